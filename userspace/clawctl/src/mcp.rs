//! `clawctl mcp`: an agent's MCP servers as agent-loop has them, so what
//! is shown is what the agent's next turn gets (specs/mcp/README.md). Each
//! command asks agent-loop's `mcp_status`, which first tries a server not
//! connected; `restart` closes one and forgets its failures.

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use clawos_api::agent_loop::{self, AgentName, McpServerRef, McpStatus};
use clawos_ipc::ComponentId;

use crate::shown::Line;

#[derive(Subcommand)]
pub enum McpCommand {
    /// The agent's servers: name, transport, program or URL.
    List(AgentArgs),
    /// Each server's state, tools given and refused, failures and last error.
    Status(AgentArgs),
    /// The tools the agent is given (`mcp.<server>.<tool>`), and those refused with why.
    Tools(AgentArgs),
    /// Closes a server (a local one is stopped) and forgets its failures:
    /// the next turn starts it again.
    Restart {
        /// The agent.
        #[arg(long, default_value = "default")]
        agent: String,
        /// The server's name in the agent's `[mcp.servers]`.
        server: String,
    },
}

#[derive(clap::Args)]
pub struct AgentArgs {
    /// The agent.
    #[arg(long, default_value = "default")]
    agent: String,
    /// Print it as JSON (mcp_status's result).
    #[arg(long)]
    json: bool,
}

pub async fn run(command: McpCommand) -> anyhow::Result<ExitCode> {
    let (client, _events) = crate::ipc::connect(ComponentId::AgentLoop).await.context("cannot reach agent-loop")?;
    let agent_loop = agent_loop::Client::new(&client);
    let (args, show): (AgentArgs, fn(&McpStatus)) = match command {
        McpCommand::Restart { agent, server } => {
            agent_loop.mcp_restart(&McpServerRef { agent: agent.clone(), server: server.clone() }).await?;
            println!("MCP server {server} of {agent} closed; the next turn starts it again");
            return Ok(ExitCode::SUCCESS);
        }
        McpCommand::List(args) => (args, list),
        McpCommand::Status(args) => (args, status),
        McpCommand::Tools(args) => (args, tools),
    };
    let found = agent_loop.mcp_status(&AgentName { agent: args.agent }).await?;
    if args.json {
        println!("{}", crate::shown::json(&found)?);
    } else if found.servers.is_empty() {
        println!("agent {} has no MCP server ([mcp.servers.<name>] in its config.toml)", found.agent);
    } else {
        show(&found);
    }
    Ok(ExitCode::SUCCESS)
}

fn list(found: &McpStatus) {
    for server in &found.servers {
        println!("{}  {}  {}", server.server, server.transport, Line(&server.endpoint));
    }
}

fn status(found: &McpStatus) {
    for server in &found.servers {
        let retry = server.retry_in_s.map(|s| format!(", tried again in {s} s")).unwrap_or_default();
        println!(
            "{}  {}  {} tools, {} refused, {} failures in a row{retry}",
            server.server,
            server.state,
            server.tools.len(),
            server.refused.len(),
            server.failures
        );
        if let Some(error) = &server.last_error {
            println!("    last error: {}", Line(error));
        }
    }
}

fn tools(found: &McpStatus) {
    for server in &found.servers {
        server.tools.iter().for_each(|tool| println!("{}", Line(tool)));
        for refused in &server.refused {
            println!("(refused) {}  {}: {}", server.server, Line(&refused.tool), Line(&refused.reason));
        }
    }
}

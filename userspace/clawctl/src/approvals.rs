//! `clawctl approvals`: the agents' actions waiting for the operator
//! (specs/agent/README.md, "Permissions and approvals"). Answering one asks
//! security-agent to record it, then agent-loop to continue the session
//! whose turn waited (`chat_continue`), printed like `clawctl chat`.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use clawos_api::security_agent::{self, Approval, ApprovalDecide, ApprovalFilter};
use clawos_ipc::ComponentId;

use crate::shown::Line;

#[derive(Subcommand)]
pub enum ApprovalsCommand {
    /// The actions waiting for an answer (--all: every approval).
    List {
        /// Every approval, answered and expired ones too.
        #[arg(long)]
        all: bool,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Allow the action; its turn goes on.
    Approve(DecideArgs),
    /// Refuse the action; the model is told and its turn goes on.
    Deny(DecideArgs),
}

#[derive(Args)]
pub struct DecideArgs {
    /// The approval's ID (`a` and 10 hex digits).
    id: String,
    /// Print the continued turn's outcome as JSON.
    #[arg(long)]
    json: bool,
}

fn print(approval: &Approval) {
    let needs = serde_json::to_string(&approval.permissions).unwrap_or_default();
    println!(
        "{}  {:?}  {}  {}  needs {needs}  expires {}",
        approval.id,
        approval.state,
        approval.agent,
        Line(&approval.tool_name),
        approval.expires_at
    );
    println!("    {}", Line(&approval.arguments.to_string()));
}

pub async fn run(command: ApprovalsCommand) -> anyhow::Result<ExitCode> {
    let (client, _events) =
        crate::ipc::connect(ComponentId::SecurityAgent).await.context("cannot reach security-agent")?;
    let security = security_agent::Client::new(&client);
    let (args, approve) = match command {
        ApprovalsCommand::List { all, json } => {
            let list = security.approval_list(&ApprovalFilter { all }).await?;
            if json {
                println!("{}", crate::shown::json(&list)?);
            } else if list.approvals.is_empty() {
                println!("no action waits for approval");
            } else {
                list.approvals.iter().for_each(print);
            }
            return Ok(ExitCode::SUCCESS);
        }
        ApprovalsCommand::Approve(args) => (args, true),
        ApprovalsCommand::Deny(args) => (args, false),
    };
    let approval = security.approval_decide(&ApprovalDecide { id: args.id.clone(), approve }).await?;
    eprintln!(
        "[{} {}: {} of {}; continuing session {}]",
        if approve { "approved" } else { "denied" },
        approval.id,
        Line(&approval.tool_name),
        approval.agent,
        approval.session_id
    );
    crate::agent::continue_session(&approval.agent, &approval.session_id, args.json).await
}

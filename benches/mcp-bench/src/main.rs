//! `mcp-bench [--starts N] [--calls M]`: an agent's MCP server, the
//! reference `@modelcontextprotocol/server-everything` (`make
//! mcp-servers`) run over its standard input and output as a child of this
//! process, each figure printed with what it measures.
//!
//! - Cold start: N times (default 10), from starting the server's program
//!   to its tools listed (`Connection::connect`, the handshake, `tools/list`).
//! - Call overhead: M calls (default 500) of `get-sum`, a tool that does
//!   next to nothing, so the time is the round trip: p50 and p99 through
//!   the client alone, and through agent-loop's `Servers::call` (what a
//!   turn's call adds before it: finding the connection and shaping the
//!   result; the policy check and the record are the same as for every
//!   tool, and not part of it).
//! - Idle memory: the server's resident memory after a call, 1 s idle.
//! - Prompt tokens: the estimate agent-loop counts (4 bytes a token) of the
//!   server's tools as the model is shown them, whole and names first.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Parser;
use clawos_agent_loop::config::McpConfig;
use clawos_agent_loop::mcp_servers::Servers;
use clawos_agent_loop::provider::{estimate_tokens, KeySource};
use futures::future::{BoxFuture, FutureExt as _};
use mcp::{CallOptions, Connection, Launch, ServerConfig};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Cli {
    /// Cold starts measured.
    #[arg(long, default_value_t = 10)]
    starts: usize,
    /// Calls measured, each way.
    #[arg(long, default_value_t = 500)]
    calls: usize,
}

struct NoKeys;

impl KeySource for NoKeys {
    fn key(&self, _secret_id: &str) -> BoxFuture<'_, Result<zeroize::Zeroizing<String>, String>> {
        async { Err("no secrets here".to_owned()) }.boxed()
    }
}

/// p50 and p99 of `samples`, ms.
fn percentiles(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |p: usize| samples[(samples.len() * p / 100).min(samples.len() - 1)].as_secs_f64() * 1000.0;
    format!("p50 {:.2} ms, p99 {:.2} ms", at(50), at(99))
}

/// Resident memory of process `pid`, MiB.
fn rss_mib(pid: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")?;
    Ok(kib / 1024.0)
}

fn tokens(tools: &[clawos_agent_loop::tools::Tool]) -> u64 {
    tools
        .iter()
        .map(|tool| {
            estimate_tokens(&tool.spec.name)
                + estimate_tokens(&tool.spec.description)
                + estimate_tokens(&tool.spec.parameters.to_string())
        })
        .sum()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let Some((node, entry)) = clawos_test_require::mcp_everything("mcp-bench") else {
        bail!("the reference server is not installed: run `make mcp-servers`");
    };
    let server = ServerConfig { command: vec![node.clone(), entry.clone(), "stdio".into()], ..ServerConfig::default() };

    let mut starts = Vec::new();
    for _ in 0..cli.starts {
        let started = Instant::now();
        let connection =
            Connection::connect("test", "everything", &server, &Launch::Child, &mcp::Secrets::default()).await?;
        connection.tools().await?;
        starts.push(started.elapsed());
        connection.close().await;
    }
    println!("cold start to tools listed, {} starts: {}", cli.starts, percentiles(starts));

    let sum = || json!({"a": 2, "b": 3}).as_object().cloned().unwrap_or_default();
    let connection =
        Connection::connect("test", "everything", &server, &Launch::Child, &mcp::Secrets::default()).await?;
    let mut client = Vec::new();
    for n in 0..cli.calls + 20 {
        let started = Instant::now();
        connection.call("get-sum", sum(), CallOptions::default()).await?;
        if n >= 20 {
            client.push(started.elapsed());
        }
    }
    println!("a call of get-sum through the client, {} calls: {}", cli.calls, percentiles(client));
    connection.close().await;

    // The server started by a shell that says its PID, for its memory.
    let dir = tempfile::tempdir()?;
    let pid_file = dir.path().join("pid");
    let command = clawos_test_require::mcp_everything_with_pid(&node, &entry, &pid_file);
    let wrapped = ServerConfig { command, ..ServerConfig::default() };
    let config = McpConfig { servers: BTreeMap::from([("everything".to_owned(), wrapped)]), ..McpConfig::default() };
    let servers = Servers::new(Launch::Child);
    let whole = servers.tools("default", &config, &NoKeys).await;
    let cancel = CancellationToken::new();
    let arguments: Value = Value::Object(Map::from_iter(sum()));
    let mut through_loop = Vec::new();
    for n in 0..cli.calls + 20 {
        let started = Instant::now();
        servers
            .call("default", "mcp.everything.get-sum", &arguments, &cancel, None)
            .await
            .map_err(anyhow::Error::msg)?;
        if n >= 20 {
            through_loop.push(started.elapsed());
        }
    }
    println!(
        "a call of get-sum through agent-loop's Servers::call, {} calls: {}",
        cli.calls,
        percentiles(through_loop)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = std::fs::read_to_string(&pid_file)?;
    println!("the idle server's resident memory: {:.1} MiB", rss_mib(pid.trim())?);

    let names_first = servers.tools("default", &McpConfig { schema_budget_tokens: 0, ..config.clone() }, &NoKeys).await;
    println!(
        "prompt tokens of its {} tools: {} whole, {} names first (with mcp_schema)",
        whole.len(),
        tokens(&whole),
        tokens(&names_first)
    );
    Ok(())
}

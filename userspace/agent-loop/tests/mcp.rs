//! An agent's MCP servers (`mcp_servers::Servers`) against the reference
//! server `@modelcontextprotocol/server-everything` (`make mcp-servers`),
//! started as a child of the test: its tools as the agent's, names first
//! past the budget, a call, a crash and a hang that restart it with
//! backoff, a changed table that replaces the process, and a local server
//! refused where local servers may not start.

use std::collections::BTreeMap;
use std::time::Duration;

use clawos_agent_loop::config::McpConfig;
use clawos_agent_loop::mcp_servers::{Servers, SCHEMA_TOOL};
use clawos_agent_loop::provider::KeySource;
use clawos_agent_loop::tools::Runs;
use clawos_test_require::mcp_everything;
use futures::future::{BoxFuture, FutureExt};
use mcp::ServerConfig;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use zeroize::Zeroizing;

struct NoKeys;

impl KeySource for NoKeys {
    fn key(&self, secret_id: &str) -> BoxFuture<'_, Result<Zeroizing<String>, String>> {
        let error = format!("no secret `{secret_id}`");
        async move { Err(error) }.boxed()
    }
}

/// The server, started by a shell that writes its PID to `pid_file` first.
fn server(node: &str, entry: &str, pid_file: &std::path::Path) -> ServerConfig {
    let command = clawos_test_require::mcp_everything_with_pid(node, entry, pid_file);
    ServerConfig { command, ..ServerConfig::default() }
}

fn config(server: ServerConfig) -> McpConfig {
    McpConfig { servers: BTreeMap::from([("everything".to_owned(), server)]), ..McpConfig::default() }
}

fn pid(pid_file: &std::path::Path) -> i32 {
    std::fs::read_to_string(pid_file).unwrap().trim().parse().unwrap()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

async fn sum(servers: &Servers) -> Result<Value, String> {
    servers.call("default", "mcp.everything.get-sum", &json!({"a": 2, "b": 3}), &CancellationToken::new(), None).await
}

#[tokio::test]
async fn an_agent_gets_its_servers_tools_and_calls_them() {
    let Some((node, entry)) = mcp_everything("an_agent_gets_its_servers_tools_and_calls_them") else { return };
    let dir = tempfile::tempdir().unwrap();
    let servers = Servers::new(mcp::Launch::Child);
    let mut config = config(server(&node, &entry, &dir.path().join("pid")));
    let tools = servers.tools("default", &config, &NoKeys).await;
    let get_sum = tools.iter().find(|tool| tool.spec.name == "mcp.everything.get-sum").expect("get-sum given");
    assert_eq!(get_sum.runs, Runs::Mcp);
    assert_eq!(get_sum.spec.parameters["required"], json!(["a", "b"]), "{}", get_sum.spec.parameters);
    assert!(!tools.iter().any(|tool| tool.spec.name == SCHEMA_TOOL), "within the default budget");
    assert!(sum(&servers).await.unwrap().as_str().unwrap().contains('5'));

    // Past a small budget: names and first lines, and the schema on request.
    config.schema_budget_tokens = 50;
    let tools = servers.tools("default", &config, &NoKeys).await;
    let get_sum = tools.iter().find(|tool| tool.spec.name == "mcp.everything.get-sum").unwrap();
    assert_eq!(get_sum.spec.parameters, json!({"type": "object"}));
    assert!(get_sum.spec.description.ends_with("(its arguments: call mcp_schema first)"));
    assert!(tools.iter().any(|tool| tool.spec.name == SCHEMA_TOOL && tool.runs == Runs::McpSchema));
    let schema = servers.schema("default", &json!({"tool": "mcp.everything.get-sum"})).await.unwrap();
    assert_eq!(schema["arguments"]["properties"]["b"]["type"], "number", "{schema}");
    let unknown = servers.schema("default", &json!({"tool": "mcp.everything.nope"})).await.unwrap_err();
    assert!(unknown.contains("has no tool `nope`"), "{unknown}");

    // The tool's own error is the call's error, for the model to read.
    let refused = servers
        .call("default", "mcp.everything.get-sum", &json!({"a": "two"}), &CancellationToken::new(), None)
        .await
        .unwrap_err();
    assert!(!refused.is_empty());
    let status = servers.status(Some("default"));
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].state, "connected");
    assert!(status[0].tools.contains(&"mcp.everything.get-sum".to_owned()));
}

#[tokio::test]
async fn a_crashed_or_hung_server_is_started_again_after_its_backoff() {
    let Some((node, entry)) = mcp_everything("a_crashed_or_hung_server_is_started_again_after_its_backoff") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let servers = Servers::new(mcp::Launch::Child);
    let config = config(ServerConfig { call_timeout_s: 1, ..server(&node, &entry, &pid_file) });
    assert!(!servers.tools("default", &config, &NoKeys).await.is_empty());
    let first = pid(&pid_file);
    // SAFETY: a plain kill(2) of the server this test started.
    unsafe { libc::kill(first, libc::SIGKILL) };
    let crashed = sum(&servers).await.unwrap_err();
    assert!(crashed.contains("closed") && crashed.contains("started again"), "{crashed}");
    let status = &servers.status(Some("default"))[0];
    assert_eq!((status.state, status.failures, status.retry_in_s), ("failed", 1, Some(0)), "{status:?}");
    // Within the backoff the server is not tried: its tools are not given.
    assert!(servers.tools("default", &config, &NoKeys).await.is_empty());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(!servers.tools("default", &config, &NoKeys).await.is_empty());
    assert_ne!(pid(&pid_file), first);
    assert!(sum(&servers).await.is_ok());

    // Silent past the call's limit: a hang, handled like a crash.
    let hung = servers
        .call(
            "default",
            "mcp.everything.trigger-long-running-operation",
            &json!({"duration": 5, "steps": 1}),
            &CancellationToken::new(),
            None,
        )
        .await
        .unwrap_err();
    assert!(hung.contains("no answer within 1 s"), "{hung}");
    let status = &servers.status(Some("default"))[0];
    assert_eq!((status.state, status.failures), ("failed", 2), "{status:?}");
}

#[tokio::test]
async fn a_calls_progress_reaches_the_caller_while_it_runs() {
    let Some((node, entry)) = mcp_everything("a_calls_progress_reaches_the_caller_while_it_runs") else { return };
    let dir = tempfile::tempdir().unwrap();
    let servers = Servers::new(mcp::Launch::Child);
    let config = config(server(&node, &entry, &dir.path().join("pid")));
    servers.tools("default", &config, &NoKeys).await;
    let (sender, mut updates) = tokio::sync::mpsc::channel(16);
    let long = json!({"duration": 2, "steps": 4});
    let name = "mcp.everything.trigger-long-running-operation";
    let result = servers.call("default", name, &long, &CancellationToken::new(), Some(sender)).await;
    assert!(result.is_ok(), "{result:?}");
    let mut seen = Vec::new();
    while let Ok(update) = updates.try_recv() {
        seen.push((update.progress, update.total));
    }
    assert!(seen.len() >= 2 && seen.iter().all(|(_, total)| *total == Some(4.0)), "{seen:?}");
}

#[tokio::test]
async fn a_changed_table_replaces_the_server_and_a_removed_one_ends_it() {
    let Some((node, entry)) = mcp_everything("a_changed_table_replaces_the_server_and_a_removed_one_ends_it") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let servers = Servers::new(mcp::Launch::Child);
    let mut config = config(server(&node, &entry, &pid_file));
    servers.tools("default", &config, &NoKeys).await;
    let first = pid(&pid_file);
    config.servers.get_mut("everything").unwrap().env.insert("CHANGED".into(), "1".into());
    servers.tools("default", &config, &NoKeys).await;
    let second = pid(&pid_file);
    assert_ne!(first, second);
    let gone = |pid| async move {
        for _ in 0..50 {
            if !alive(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    };
    assert!(gone(first).await, "the replaced server {first} still runs");
    servers.tools("default", &McpConfig::default(), &NoKeys).await;
    assert!(gone(second).await, "the removed server {second} still runs");
    assert!(servers.status(Some("default")).is_empty());
}

#[tokio::test]
async fn without_its_sandbox_a_local_server_is_not_started() {
    // On the box agent-loop starts local servers through the launcher only;
    // where it is not listening, the server fails and says why.
    let dir = tempfile::tempdir().unwrap();
    let servers = Servers::new(mcp::Launch::Sandbox { socket: dir.path().join("absent.sock") });
    let local = ServerConfig { command: vec!["/bin/true".into()], ..ServerConfig::default() };
    assert!(servers.tools("default", &config(local), &NoKeys).await.is_empty());
    let status = &servers.status(Some("default"))[0];
    assert_eq!(status.state, "failed");
    assert!(status.last_error.as_deref().unwrap().contains("the sandbox:"), "{status:?}");
    assert!(sum(&servers).await.unwrap_err().contains("not connected"));
}

//! agent-bench: what agent-loop itself costs per step of a turn
//! (specs/agent/README.md, "The loop"), without a model's or a tool's
//! time: the model answers at once from memory (a tool call, then text)
//! and the tool answers at once, so each step is the loop's own work:
//! limits and spend checked, the context read and sized, the request
//! built, the answer parsed, every message checkpointed in the agent's
//! real SQLite database (`store`), the spend recorded.
//!
//! Prints p50, p90 and p99 of the time per step over many turns, each
//! turn two steps (one tool call, one answer), ten turns per session.
//!
//! Then a tool call as a turn makes it (`tools::CallContext`): agent-loop's
//! IPC call to the real wasm-daemon binary (seccomp filter and all, started
//! on a temporary configuration), a fresh instance of `text-stats` from
//! `make tools`, its run, and its record in the agent's `tool_calls`.
//! wasm-daemon is found beside this binary, so build both with
//! `make userspace`, then run `$CARGO_TARGET_DIR/release/agent-bench`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use clawos_agent_loop::config::AgentConfig;
use clawos_agent_loop::provider::{ChatRequest, ChatResponse, FinishReason, ProviderError, ToolCall, ToolSpec, Usage};
use clawos_agent_loop::store::Store;
use clawos_agent_loop::tools::{self, CallContext, CallResult, Peers, Runner};
use clawos_agent_loop::turn::{Answered, Reporter, Thinker, Turn};
use clawos_api::agent_loop::{TurnStatus, TurnStep};
use clawos_ipc::ComponentId;
use futures::future::BoxFuture;
use futures::FutureExt as _;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const TURNS: usize = 500;
const TOOL_CALLS: usize = 1000;

/// A model that answers at once: a tool call when the last message is the
/// operator's, else text.
struct Instant_;

impl Thinker for Instant_ {
    fn think<'a>(
        &'a self,
        request: &'a ChatRequest,
        _on_text: &'a (dyn Fn(&str) + Send + Sync),
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(ChatResponse, Answered), ProviderError>> {
        let after_user = request.messages.last().is_some_and(|m| m.role == clawos_agent_loop::provider::Role::User);
        let tool_calls = if after_user { vec![ToolCall { id: "c".into(), name: "text-stats".into(), arguments: json!({"text": "a b"}) }] } else { Vec::new() };
        let response = ChatResponse {
            text: if after_user { String::new() } else { "Two words.".into() },
            finish: if after_user { FinishReason::ToolCalls } else { FinishReason::Stop },
            tool_calls,
            usage: Usage { input_tokens: 100, output_tokens: 10, estimated: false },
            model: "instant".into(),
        };
        let answered = Answered { provider: "instant".into(), model: "instant".into(), cost_usd: 0.0 };
        async move { Ok((response, answered)) }.boxed()
    }
    fn native_tools(&self) -> bool {
        true
    }
    fn context_window(&self) -> u64 {
        1_000_000
    }
    fn model(&self) -> &str {
        "instant"
    }
}

struct InstantTool;

impl Runner for InstantTool {
    fn call<'a>(&'a self, _name: &'a str, _arguments: &'a Value) -> BoxFuture<'a, CallResult> {
        async { CallResult { content: json!({"words": 2}).to_string(), is_error: false } }.boxed()
    }
}

struct Quiet;

impl Reporter for Quiet {
    fn text(&self, _text: &str) {}
    fn step(&self, _step: &TurnStep) {}
    fn publish(&self, _event_name: &str, _data: Value) {}
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    per_step().await;
    tool_call().await;
}

async fn per_step() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Store::open(&dir.path().join("workspace.db")).expect("the agent database");
    // Compaction never triggers: the bench measures the plain step.
    let config = AgentConfig::parse("[session]\nkeep_recent = 8\n[limits]\nmax_steps = 4\n").expect("the config");
    let specs = vec![ToolSpec { name: "text-stats".into(), description: "counts words".into(), parameters: json!({"type": "object"}) }];
    let mut per_step = Vec::with_capacity(TURNS);
    for i in 0..TURNS {
        let (turn_id, session_id) = (format!("t{i}"), format!("s{}", i / 10));
        store.ensure_session(&session_id).expect("a session");
        let turn = Turn {
            agent: "bench",
            config: &config,
            store: &store,
            thinker: &Instant_,
            tools: &InstantTool,
            session_id: &session_id,
            turn_id: &turn_id,
            cancel: CancellationToken::new(),
            reporter: &Quiet,
        };
        store.turn_started(&turn_id, &session_id).expect("the turn row");
        let started = Instant::now();
        let outcome = turn.run("count the words of a b", &specs).await;
        let elapsed = started.elapsed();
        assert_eq!((outcome.status, outcome.steps), (TurnStatus::Done, 2), "{outcome:?}");
        per_step.push(elapsed / outcome.steps);
    }
    per_step.sort();
    println!(
        "agent-loop per step ({TURNS} turns of 2 steps, 10 turns per session): p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms",
        ms(percentile(&per_step, 0.5)),
        ms(percentile(&per_step, 0.9)),
        ms(percentile(&per_step, 0.99))
    );
}

/// wasm-daemon running on a temporary configuration; killed on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the wasm-daemon built beside this binary, serving the tools of
/// `make tools`, with this process's UID authenticated as agent-loop (the
/// only sender the policy allows, as in the image) and the IPC rate limit
/// lifted for the measurement.
fn start_wasm_daemon(root: &Path) -> Daemon {
    let here = std::env::current_exe().expect("this binary's path");
    let daemon = here.with_file_name("clawos-wasm-daemon");
    assert!(daemon.exists(), "{} is missing: build the workspace with `make userspace`", daemon.display());
    let registry: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../out/tools/registry.json");
    let registry = registry.canonicalize().unwrap_or_else(|_| panic!("{} is missing: run `make tools`", registry.display()));
    std::fs::create_dir_all(root.join("clawfs/agents/bench")).expect("the agent's directory");
    let uid = nix::unistd::getuid();
    std::fs::write(
        root.join("ipc-acl.toml"),
        format!("[identity]\noperator_uids = []\nuids = {{ \"{uid}\" = \"agent-loop\" }}\n\n[[allow]]\nsenders = [\"agent-loop\"]\nrecipients = [\"wasm-daemon\"]\nmethods = [\"*\"]\n"),
    )
    .expect("the policy");
    std::fs::write(
        root.join("wasm-daemon.toml"),
        format!(
            "[ipc]\npolicy_path = \"{acl}\"\nrate_limit = {{ messages_per_second = 0, burst = 0 }}\n\n[component]\nregistry = \"{registry}\"\ntools_dir = \"{tools}\"\ncache_dir = \"{cache}\"\nclawfs_root = \"{clawfs}\"\ncgroups = false\naudit_log = \"{audit_log}\"\n",
            acl = root.join("ipc-acl.toml").display(),
            registry = registry.display(),
            tools = root.join("tools").display(),
            cache = root.join("cache").display(),
            clawfs = root.join("clawfs").display(),
            audit_log = root.join("clawfs-audit.log").display(),
        ),
    )
    .expect("the daemon's configuration");
    Daemon(Command::new(daemon).env("CLAWOS_CONFIG_DIR", root).env("RUST_LOG", "error").spawn().expect("starting wasm-daemon"))
}

async fn connect_when_up() -> clawos_ipc::IpcClient {
    for _ in 0..100 {
        if let Ok(client) = tools::connect(ComponentId::WasmDaemon).await {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("wasm-daemon did not come up");
}

async fn tool_call() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let _daemon = start_wasm_daemon(dir.path());
    // Only the WASM path is measured: the fs-engine slot holds a second
    // wasm-daemon connection that no call here uses.
    let peers = Peers { fs_engine: connect_when_up().await, wasm_daemon: connect_when_up().await };
    let wasm = tools::wasm_tools(&peers.wasm_daemon).await.expect("tool_list");
    assert!(wasm.iter().any(|tool| tool.spec.name == "text-stats"), "text-stats is not installed: run `make tools`");
    let cx = CallContext {
        peers: &peers,
        tools: &wasm,
        agent: "bench",
        agent_db: &dir.path().join("clawfs/agents/bench/workspace.db"),
        session_id: "bench",
        memory_workspace: "default",
    };
    let arguments = json!({"text": "one two three"});
    let mut samples = Vec::with_capacity(TOOL_CALLS);
    for i in 0..TOOL_CALLS + 100 {
        let started = Instant::now();
        let result = cx.call("text-stats", &arguments).await;
        let elapsed = started.elapsed();
        assert!(!result.is_error && result.content.contains("\"words\":3"), "{result:?}");
        // The first hundred warm the compiled-module cache and the database.
        if i >= 100 {
            samples.push(elapsed);
        }
    }
    let recorded = agentfs::AgentFs::open(cx.agent_db).and_then(|db| db.tool_calls_in_session("bench")).expect("the agent's tool_calls");
    assert_eq!(recorded.len(), TOOL_CALLS + 100, "every call is in the agent's tool_calls");
    samples.sort();
    println!(
        "tool call from agent-loop (text-stats: IPC, fresh instance, run, tool_calls record), {TOOL_CALLS} calls: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms",
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.9)),
        ms(percentile(&samples, 0.99))
    );
}

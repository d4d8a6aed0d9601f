//! `execute_tool` through IPC, end to end: the real daemon binary (seccomp
//! filter and all) started on a temporary configuration, called over its
//! abstract socket as agent-loop (the caller in the image) with a trivial
//! tool (`text-stats` from `make tools`), each call a fresh instance plus
//! its record in the agent's `tool_calls`.
//!
//! Prints p50/p99 of sequential round trips, the same call as a turn makes
//! it (agent-loop's `tools::CallContext`: security-agent's `check_policy`
//! first, from the real security-agent binary `make userspace` built beside
//! this bench, then the typed client, the result turned into the model's
//! text; specs/agent/README.md, "Tools"), and
//! calls/s with 8 concurrent callers (8 connections). The IPC rate limit is
//! lifted for the measurement (production allows 100 messages/s per
//! connection).
//!
//! Then the other tool a turn runs in agent-loop itself: `delegate`
//! (specs/agent/README.md, "Sub-agents"), each call a sub-agent's whole
//! turn (its session, checkpoints, one request to a scripted provider on
//! loopback that answers at once, its outcome and the call's record),
//! beside a bare request to the same provider: the difference is what a
//! sub-agent costs beyond its model.
//!
//! `cargo bench -p clawos-wasm-daemon --bench execute_tool`

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawos_agent_loop::config::AgentConfig;
use clawos_agent_loop::delegate::{self, Delegation};
use clawos_agent_loop::mcp_servers::Servers;
use clawos_agent_loop::provider::{ChatMessage, ChatRequest, KeySource, Role};
use clawos_agent_loop::store::Store;
use clawos_agent_loop::thinker;
use clawos_agent_loop::tools::{self, CallContext, Peers, Runner as _};
use clawos_agent_loop::turn::Reporter;
use clawos_api::agent_loop::TurnStep;
use clawos_ipc::{ComponentId, IpcClient, Object};
use clawos_scripted_provider::{openai, Script, Server};
use futures::FutureExt as _;
use tokio_util::sync::CancellationToken;

const SEQUENTIAL_CALLS: usize = 2000;
const CALLERS: usize = 8;
const CALLS_PER_CALLER: usize = 250;
const AGENT: &str = "bench-agent";
const DELEGATE_CALLS: usize = 200;

/// No vault: the scripted provider takes no key.
struct NoKeys;

impl KeySource for NoKeys {
    fn key(&self, secret_id: &str) -> futures::future::BoxFuture<'_, Result<zeroize::Zeroizing<String>, String>> {
        let error = format!("no secret `{secret_id}`");
        async move { Err(error) }.boxed()
    }
}

/// Reports nowhere.
struct Quiet;

impl Reporter for Quiet {
    fn text(&self, _text: &str) {}
    fn step(&self, _step: &TurnStep) {}
    fn publish(&self, _event_name: &str, _data: serde_json::Value) {}
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn arguments() -> serde_json::Value {
    serde_json::json!({"text": "one two three"})
}

fn params() -> Object {
    let serde_json::Value::Object(params) =
        serde_json::json!({"tool_name": "text-stats", "arguments": arguments(), "agent": AGENT})
    else {
        unreachable!()
    };
    params
}

async fn connect() -> IpcClient {
    connect_to(ComponentId::WasmDaemon).await
}

async fn connect_to(component: ComponentId) -> IpcClient {
    for _ in 0..100 {
        if let Ok(client) = tools::connect(component).await {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the daemon did not come up");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what}, {} sequential calls: p50 {:?}  p99 {:?}",
        samples.len(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.99)
    );
}

fn main() {
    let registry = clawos_test_require::package_path("../../out/tools/registry.json");
    let registry =
        registry.canonicalize().unwrap_or_else(|_| panic!("{} is missing: run `make tools`", registry.display()));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("clawfs/agents").join(AGENT)).unwrap();
    // This process's UID is agent-loop, the only sender allowed, as in the image.
    std::fs::write(
        root.join("ipc-acl.toml"),
        format!(
            "[identity]\noperator_uids = []\nuids = {{ \"{uid}\" = \"agent-loop\" }}\n\n[[allow]]\nsenders = [\"agent-loop\"]\nrecipients = [\"wasm-daemon\", \"security-agent\"]\nmethods = [\"*\"]\n",
            uid = nix::unistd::getuid()
        ),
    )
    .unwrap();
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
    .unwrap();
    let _daemon = Daemon(
        Command::new(env!("CARGO_BIN_EXE_clawos-wasm-daemon"))
            .env("CLAWOS_CONFIG_DIR", root)
            .env("RUST_LOG", "error")
            .spawn()
            .expect("starting the daemon"),
    );
    // The policy half of security-agent; its vault stays unopened (no TPM
    // here), which leaves check_policy working.
    std::fs::create_dir_all(root.join("vault")).unwrap();
    std::fs::write(
        root.join("security-agent.toml"),
        format!(
            "[ipc]\npolicy_path = \"{acl}\"\nrate_limit = {{ messages_per_second = 0, burst = 0 }}\n\n[component.vault]\nvault_dir = \"{vault}\"\naudit_log = \"{vault}/audit.log\"\nkeyring = \"process\"\n",
            acl = root.join("ipc-acl.toml").display(),
            vault = root.join("vault").display(),
        ),
    )
    .unwrap();
    let security_agent =
        std::env::current_exe().unwrap().parent().and_then(Path::parent).unwrap().join("clawos-security-agent");
    assert!(security_agent.exists(), "{} is missing: run `make userspace`", security_agent.display());
    let _security_agent = Daemon(
        Command::new(&security_agent)
            .env("CLAWOS_CONFIG_DIR", root)
            .env("RUST_LOG", "error")
            .spawn()
            .expect("starting security-agent"),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let client = connect().await;
        for _ in 0..100 {
            client.call("execute_tool", params(), None).await.expect("warm-up call");
        }
        let mut samples = Vec::with_capacity(SEQUENTIAL_CALLS);
        for _ in 0..SEQUENTIAL_CALLS {
            let start = Instant::now();
            client.call("execute_tool", params(), None).await.unwrap();
            samples.push(start.elapsed());
        }
        report("execute_tool round trip (text-stats, fresh instance + tool_calls record)", samples);

        // As a turn calls it. The fs-engine slot holds a second wasm-daemon
        // connection: only WASM tools are called here. The agent may act
        // freely, more often than the default hourly cap.
        let peers = Peers {
            fs_engine: connect().await,
            wasm_daemon: connect().await,
            security_agent: connect_to(ComponentId::SecurityAgent).await,
        };
        let wasm = tools::wasm_tools(&peers.wasm_daemon).await.expect("tool_list");
        let agent_db = root.join("clawfs/agents").join(AGENT).join("workspace.db");
        let config = AgentConfig::parse("[autonomy]\nlevel = \"full\"\nmax_actions_per_hour = 1000000\n").unwrap();
        let policy = config.policy();
        let (mcp, cancel) = (Servers::new(Default::default()), CancellationToken::new());
        let cx = CallContext {
            peers: &peers,
            tools: &wasm,
            agent: AGENT,
            agent_db: &agent_db,
            session_id: "bench",
            approval_session: "bench",
            paths: None,
            delegation: None,
            memory_workspace: "default",
            policy: &policy,
            mcp: &mcp,
            cancel: &cancel,
            progress: None,
        };
        let mut samples = Vec::with_capacity(SEQUENTIAL_CALLS);
        for n in 0..SEQUENTIAL_CALLS {
            let start = Instant::now();
            let result = cx.call(&format!("bench/1/c{n}"), "text-stats", &arguments()).await;
            samples.push(start.elapsed());
            assert!(!result.is_error && result.content.contains("\"words\":3"), "{result:?}");
        }
        let recorded = agentfs::AgentFs::open(&agent_db)
            .and_then(|db| db.tool_calls_in_session("bench"))
            .expect("the agent's tool_calls");
        assert_eq!(recorded.len(), SEQUENTIAL_CALLS, "every call is recorded with its session");
        report(
            "a tool call from agent-loop (CallContext: check_policy, IPC, fresh instance, run, tool_calls record)",
            samples,
        );

        // The same path for an MCP tool: the reference server's get-sum
        // (as trivial as text-stats) over its standard input and output, a
        // child of this bench; on the box the server runs in its sandbox
        // unit, its standard input and output a Unix socket instead of
        // pipes (specs/mcp/README.md, "Where local servers run").
        if let Some((node, entry)) = clawos_test_require::mcp_everything("execute_tool bench, the MCP leg") {
            let table = format!("[mcp.servers.everything]\ncommand = [{node:?}, {entry:?}, \"stdio\"]\n");
            let config = AgentConfig::parse(&table).unwrap();
            let servers = Servers::new(Default::default());
            let mut with_mcp = wasm.clone();
            with_mcp.extend(servers.tools(AGENT, &config.mcp, &NoKeys).await);
            let mcp_cx = CallContext {
                tools: &with_mcp,
                mcp: &servers,
                session_id: "bench-mcp",
                approval_session: "bench-mcp",
                ..cx
            };
            let mut samples = Vec::with_capacity(SEQUENTIAL_CALLS);
            for n in 0..SEQUENTIAL_CALLS {
                let start = Instant::now();
                let arguments = serde_json::json!({"a": 2, "b": 3});
                let result = mcp_cx.call(&format!("bench-mcp/1/m{n}"), "mcp.everything.get-sum", &arguments).await;
                samples.push(start.elapsed());
                assert!(!result.is_error && result.content.contains('5'), "{result:?}");
            }
            report(
                "an MCP tool call from agent-loop (CallContext: check_policy, the server over stdio, tool_calls record)",
                samples,
            );
        }

        // A sub-agent per call, its model answering at once.
        let script = (0..2 * (DELEGATE_CALLS + 10)).fold(Script::new(), |script, _| {
            script.reply(openai::text(["Done."], Some((10, 2))))
        });
        let server = Server::start(script).await.unwrap();
        let config = AgentConfig::parse(&format!(
            "[model]\nprovider = \"scripted\"\nmodel = \"m\"\nmax_retries = 0\n[autonomy]\nlevel = \"full\"\nmax_actions_per_hour = 1000000\n[providers.scripted]\nkind = \"openai\"\nbase_url = \"{}\"\n",
            server.api_url()
        ))
        .unwrap();
        let thinker = thinker::build(&config, &config.route(None).unwrap(), Arc::new(NoKeys)).unwrap();
        let store = Store::open(&agent_db).unwrap();
        let delegation = Delegation {
            config: &config,
            store: &store,
            thinker: &*thinker,
            persona: "",
            after_tool: &|| None,
            reporter: &Quiet,
            cancel: &cancel,
            turn_id: "bench-turn",
        };
        let mut with_delegate = wasm.clone();
        with_delegate.push(delegate::tool());
        let policy = config.policy();
        let parent = CallContext {
            tools: &with_delegate,
            session_id: "bench-parent",
            approval_session: "bench-parent",
            delegation: Some(&delegation),
            policy: &policy,
            ..cx
        };
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::text(Role::User, "Say done.")],
            tools: Vec::new(),
            max_tokens: 16,
            temperature: None,
        };
        let (mut bare, mut delegated) = (Vec::new(), Vec::new());
        for n in 0..DELEGATE_CALLS + 10 {
            let start = Instant::now();
            thinker.think(&request, &|_| {}, &cancel).await.expect("a scripted answer");
            let request_took = start.elapsed();
            let start = Instant::now();
            let result = parent.call(&format!("bench-parent/1/d{n}"), "delegate", &serde_json::json!({"task": "Say done."})).await;
            let call_took = start.elapsed();
            assert!(!result.is_error && result.content.contains(": done after 1 steps"), "{result:?}");
            // The first ones warm up.
            if n >= 10 {
                bare.push(request_took);
                delegated.push(call_took);
            }
        }
        report("a bare request to the scripted provider (loopback, instant answer)", bare);
        report("a delegate call: a sub-agent's turn of one instant answer, from check_policy to the call's record", delegated);

        let mut clients = Vec::new();
        for _ in 0..CALLERS {
            clients.push(Arc::new(connect().await));
        }
        let start = Instant::now();
        let callers: Vec<_> = clients
            .into_iter()
            .map(|client| {
                tokio::spawn(async move {
                    for _ in 0..CALLS_PER_CALLER {
                        client.call("execute_tool", params(), None).await.unwrap();
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.await.unwrap();
        }
        let total = CALLERS * CALLS_PER_CALLER;
        let elapsed = start.elapsed();
        println!(
            "{CALLERS} concurrent callers: {total} calls in {elapsed:.2?} = {:.0} calls/s",
            total as f64 / elapsed.as_secs_f64()
        );
    });
}

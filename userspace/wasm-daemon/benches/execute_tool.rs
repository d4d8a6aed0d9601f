//! `execute_tool` through IPC, end to end: the real daemon binary (seccomp
//! filter and all) started on a temporary configuration, called over its
//! abstract socket as the operator with a trivial tool (`text-stats` from
//! `make tools`), each call a fresh instance plus its AgentFS audit insert.
//!
//! Prints p50/p99 of sequential round trips and calls/s with 8 concurrent
//! callers (8 connections). The IPC rate limit is lifted for the
//! measurement (production allows 100 messages/s per connection).
//!
//! `cargo bench -p clawos-wasm-daemon --bench execute_tool`

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawos_ipc::{ClientOptions, ComponentId, IpcClient, Object, Principal};

const SEQUENTIAL_CALLS: usize = 2000;
const CALLERS: usize = 8;
const CALLS_PER_CALLER: usize = 250;

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn params() -> Object {
    let serde_json::Value::Object(params) = serde_json::json!({
        "tool_name": "text-stats", "arguments": {"text": "one two three"}, "agent": "bench-agent"
    }) else {
        unreachable!()
    };
    params
}

async fn connect() -> IpcClient {
    for _ in 0..100 {
        if let Ok((client, _events)) = IpcClient::connect(ComponentId::WasmDaemon, ClientOptions::new(Principal::Operator)).await {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the daemon did not come up");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let registry = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../out/tools/registry.json").canonicalize();
    let Ok(registry) = registry else {
        println!("SKIPPED: out/tools/registry.json is missing (run `make tools`)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("clawfs/agents/bench-agent")).unwrap();
    std::fs::write(root.join("ipc-acl.toml"), "[identity]\noperator_uids = [0]\n\n[[allow]]\nsenders = [\"operator\"]\nrecipients = [\"*\"]\nmethods = [\"*\"]\n").unwrap();
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
        samples.sort();
        println!(
            "execute_tool round trip (text-stats, fresh instance + audit insert), {SEQUENTIAL_CALLS} sequential calls: p50 {:?}  p99 {:?}",
            percentile(&samples, 0.50),
            percentile(&samples, 0.99)
        );

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
        println!("{CALLERS} concurrent callers: {total} calls in {elapsed:.2?} = {:.0} calls/s", total as f64 / elapsed.as_secs_f64());
    });
}

//! The real daemons as processes (router, observability and two component
//! skeletons, each under its own UID), driven through the real `clawctl`:
//! status, event fan-out with a slow subscriber, graceful shutdown, and
//! heartbeat-driven unhealthy marking.
//!
//! Needs root (to run the daemons under distinct UIDs, as in the image).

use std::collections::BTreeSet;
use std::io::{Read, Write};

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

use clawos_ipc::{ClientOptions, ComponentId, IpcClient, Object, Principal};
use serde_json::Value;

const DAEMONS: [(&str, u32); 4] =
    [("router", 61_001), ("observability", 61_002), ("scheduler", 61_003), ("fs-engine", 61_004)];

struct Daemons {
    children: Vec<(String, Child)>,
    dir: PathBuf,
    prefix: String,
    prometheus: u16,
}

impl Drop for Daemons {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The directory holding the daemon binaries: the one `make test-unit`
/// names in `CLAWOS_E2E_DAEMONS`, where it built them just before this run
/// (the workspace's release build, which shares what `cargo test` compiles);
/// else they are built here, in a target directory of their own, because
/// the `cargo test` that runs this holds the lock on the main one.
fn daemons() -> PathBuf {
    if let Some(dir) = std::env::var_os("CLAWOS_E2E_DAEMONS") {
        return dir.into();
    }
    let profile_dir = Path::new(env!("CARGO_BIN_EXE_clawctl")).parent().unwrap();
    let target = profile_dir.parent().unwrap().join("e2e-daemons");
    let packages = ["clawos-router", "clawos-observability", "clawos-scheduler", "clawos-fs-engine"];
    let mut cargo = Command::new(env!("CARGO"));
    cargo.arg("build").current_dir(clawos_test_require::package_path("")).env("CARGO_TARGET_DIR", &target);
    for package in packages {
        cargo.args(["-p", package]);
    }
    let status = cargo.status().expect("cannot run cargo");
    assert!(status.success(), "building the daemons failed");
    target.join("debug")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

fn start() -> Daemons {
    assert!(nix::unistd::geteuid().is_root(), "this test runs the daemons under distinct UIDs and needs root");
    let bin_dir = daemons();
    let dir = std::env::temp_dir().join(format!("clawos-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let uids: Vec<String> = DAEMONS.iter().map(|(id, uid)| format!("\"{uid}\" = \"{id}\"")).collect();
    write(
        &dir.join("ipc-acl.toml"),
        &format!(
            "[identity]\noperator_uids = [0]\nuids = {{ {} }}\n\n[[allow]]\nsenders = [\"*\"]\nrecipients = [\"*\"]\nmethods = [\"*\"]\n",
            uids.join(", ")
        ),
    );
    let prometheus = free_port();
    for (id, uid) in DAEMONS {
        let mut config = format!(
            "[ipc]\npolicy_path = \"{}\"\n[heartbeat]\ninterval_ms = 200\nunhealthy_after_ms = 1500\n",
            dir.join("ipc-acl.toml").display()
        );
        match id {
            "router" => config
                .push_str("[ipc.rate_limit]\nmessages_per_second = 0\nburst = 0\n[component]\nsubscriber_queue = 16\n"),
            "observability" => {
                config.push_str(&format!("[component]\nprometheus_listen = \"127.0.0.1:{prometheus}\"\n"))
            }
            // Without a writable audit log fs-engine is degraded (fail closed).
            "fs-engine" => {
                let log = dir.join("clawfs-audit.log");
                write(&log, "");
                std::os::unix::fs::chown(&log, Some(uid), None).unwrap();
                config.push_str(&format!("[component]\naudit_log = \"{}\"\n", log.display()));
            }
            // Its database in a directory of its own (the unit's StateDirectory).
            "scheduler" => {
                let state = dir.join("scheduler");
                std::fs::create_dir_all(&state).unwrap();
                std::os::unix::fs::chown(&state, Some(uid), None).unwrap();
                config.push_str(&format!(
                    "[component]\ndatabase = \"{}\"\nclawfs_root = \"{}\"\n",
                    state.join("schedule.db").display(),
                    dir.join("clawfs").display()
                ));
            }
            _ => {}
        }
        write(&dir.join(format!("{id}.toml")), &config);
    }
    let prefix = format!("clawos-e2e-{}-", std::process::id());
    let mut daemons = Daemons { children: Vec::new(), dir, prefix, prometheus };
    for (id, uid) in DAEMONS {
        let child = Command::new(bin_dir.join(format!("clawos-{id}")))
            .env("CLAWOS_CONFIG_DIR", &daemons.dir)
            .env("CLAWOS_IPC_SOCKET_PREFIX", &daemons.prefix)
            .env("RUST_LOG", "warn")
            .uid(uid)
            .gid(uid)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start clawos-{id}: {error}"));
        daemons.children.push((id.to_owned(), child));
    }
    daemons
}

impl Daemons {
    fn clawctl(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_clawctl"));
        command.args(args).env("CLAWOS_IPC_SOCKET_PREFIX", &self.prefix);
        command
    }

    /// Runs clawctl to completion; fails the test if it takes over 30 s.
    fn run(&self, args: &[&str]) -> Output {
        let child = self.clawctl(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        finish(child, &format!("clawctl {}", args.join(" ")))
    }

    fn status(&self) -> Value {
        let output = self.run(&["status", "--json"]);
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("status --json is not JSON ({e}): {}", String::from_utf8_lossy(&output.stderr)))
    }

    fn signal(&mut self, id: &str, signal: nix::sys::signal::Signal) {
        let (_, child) = self.children.iter_mut().find(|(name, _)| name == id).unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
        child.wait().unwrap();
    }
}

/// Waits for `child` at most 30 s, then kills it and fails the test.
fn finish(mut child: Child, what: &str) -> Output {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn health_of(status: &Value, component: &str) -> String {
    status["components"].as_array().unwrap().iter().find(|row| row["component"] == component).unwrap()["health"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn daemons_status_fanout_shutdown_and_unhealthy() {
    let mut daemons = start();

    // Status: the four running components become healthy through heartbeats
    // relayed router -> observability; the four not started are down.
    let mut status = Value::Null;
    // (A component answers healthy for itself at once; the wait is for
    // observability's heartbeat of each.)
    wait_for("four healthy components", Duration::from_secs(20), || {
        status = daemons.status();
        DAEMONS.iter().all(|(id, _)| {
            health_of(&status, id) == "healthy"
                && status["components"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["component"] == *id && r["last_heartbeat_age_s"].is_number())
        })
    });
    for id in ["agent-loop", "wasm-daemon", "ebpf-agent", "security-agent"] {
        assert_eq!(health_of(&status, id), "down", "{status}");
    }
    let router = status["components"].as_array().unwrap().iter().find(|r| r["component"] == "router").unwrap();
    assert_eq!(router["version"], env!("CARGO_PKG_VERSION"));
    assert!(router["uptime_s"].as_f64().unwrap() > 0.0 && router["last_heartbeat_age_s"].as_f64().unwrap() < 1.5);
    assert_eq!(status["all_healthy"], false);
    assert_eq!(daemons.run(&["status"]).status.code(), Some(3), "not all healthy -> exit 3");

    // ipc call, and errors that say what is wrong.
    let metrics = daemons.run(&["ipc", "call", "scheduler", "get_metrics"]);
    let metrics: Value = serde_json::from_slice(&metrics.stdout).unwrap();
    assert!(metrics["memory_usage_bytes"].as_u64().unwrap() > 0, "{metrics}");
    let bad = daemons.run(&["ipc", "call", "scheduler", "get_metrics", "[1]"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("must be a JSON object"));
    let unknown = daemons.run(&["ipc", "call", "router", "no_such_method"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("ENOENT"), "{unknown:?}");

    // Prometheus text on the configured local port.
    let mut http = std::net::TcpStream::connect(("127.0.0.1", daemons.prometheus)).unwrap();
    http.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut page = String::new();
    http.read_to_string(&mut page).unwrap();
    assert!(
        page.starts_with("HTTP/1.0 200") && page.contains("clawos_component_up{component=\"scheduler\"} 1"),
        "{page}"
    );

    // Fan-out: `clawctl events` sees heartbeats from several components.
    let heartbeats = daemons.run(&["events", "--name", "heartbeat", "--count", "16"]);
    let senders: BTreeSet<String> = String::from_utf8_lossy(&heartbeats.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["sender"].as_str().unwrap().to_owned())
        .collect();
    assert!(senders.is_superset(&["scheduler".to_owned(), "fs-engine".to_owned()].into()), "{senders:?}");

    slow_subscriber_does_not_block_others(&daemons);

    // Graceful shutdown: SIGTERM -> component_shutdown event -> "stopped".
    let shutdowns = daemons
        .clawctl(&["events", "--name", "component_shutdown", "--count", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the shutdown subscription", Duration::from_secs(20), || {
        // Observability subscribes to component_shutdown too; wait for the operator's subscription.
        let stats = daemons.run(&["ipc", "call", "router", "router_stats"]);
        let stats: Value = serde_json::from_slice(&stats.stdout).unwrap_or_default();
        stats["subscribers"].as_array().is_some_and(|subscribers| {
            subscribers
                .iter()
                .any(|s| s["peer"] == "operator" && s["events"] == serde_json::json!(["component_shutdown"]))
        })
    });
    daemons.signal("fs-engine", nix::sys::signal::Signal::SIGTERM);
    let shutdowns = finish(shutdowns, "clawctl events --name component_shutdown");
    let line = String::from_utf8_lossy(&shutdowns.stdout);
    assert_eq!(serde_json::from_str::<Value>(&line).unwrap()["sender"], "fs-engine", "{line}");

    // SIGKILL: no goodbye; observability marks it unhealthy after 1.5 s of silence.
    daemons.signal("scheduler", nix::sys::signal::Signal::SIGKILL);
    wait_for("heartbeat-driven health changes", Duration::from_secs(10), || {
        let output = daemons.run(&["ipc", "call", "observability", "component_status"]);
        let view: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        view.get("components").is_some()
            && health_of(&view, "scheduler") == "unhealthy"
            && health_of(&view, "fs-engine") == "stopped"
            && health_of(&view, "router") == "healthy"
    });
}

/// A subscriber that never reads loses events (counted by the router);
/// one that reads gets every event, at full speed.
fn slow_subscriber_does_not_block_others(daemons: &Daemons) {
    const EVENTS: usize = 3000;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let router_socket = format!("{}router", daemons.prefix);
    let connect = |options: ClientOptions| {
        let stream = clawos_ipc::socket::connect_abstract(&router_socket).unwrap();
        IpcClient::handshake(stream, ComponentId::Router, options)
    };
    runtime.block_on(async {
        let subscribe = |names: &[&str]| {
            let mut params = Object::new();
            params.insert("events".into(), Value::from(names.to_vec()));
            params
        };
        // The slow subscriber writes hello and subscribe_events, then never
        // reads its socket: events back up in the kernel buffer, then in the
        // router's queue for it.
        let mut slow = clawos_ipc::socket::connect_abstract(&router_socket).unwrap();
        for (method, params) in [
            ("hello", serde_json::json!({"supported_versions": ["1.0"]})),
            ("subscribe_events", Value::from(subscribe(&["flood"]))),
        ] {
            let request = clawos_ipc::Message::request(
                clawos_ipc::ProtocolVersion::V1_0,
                Principal::Operator,
                ComponentId::Router.into(),
                method,
                params.as_object().unwrap().clone(),
                None,
            );
            slow.write_all(&clawos_ipc::codec::encode(&request)).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let options = ClientOptions { event_capacity: 8192, ..ClientOptions::new(Principal::Operator) };
        let (fast, mut fast_events) = connect(options).await.unwrap();
        fast.call("subscribe_events", subscribe(&["flood"]), None).await.unwrap();
        let (publisher, _) = connect(ClientOptions::new(Principal::Operator)).await.unwrap();
        let mut data = Object::new();
        data.insert("padding".into(), Value::from("x".repeat(2048)));
        let started = Instant::now();
        let mut received = 0;
        for batch in 0..EVENTS / 10 {
            for _ in 0..10 {
                publisher.send_event("flood", data.clone()).await.unwrap();
            }
            // Keep the fast subscriber's queue shallow so only the slow one overflows.
            while received < (batch + 1) * 10 {
                tokio::time::timeout(Duration::from_secs(5), fast_events.recv())
                    .await
                    .expect("fast subscriber starved")
                    .unwrap();
                received += 1;
            }
        }
        let elapsed = started.elapsed();
        let stats = fast.call("router_stats", Object::new(), None).await.unwrap();
        let subscribers = stats["subscribers"].as_array().unwrap();
        let flood: Vec<&Value> = subscribers.iter().filter(|s| s["events"] == Value::from(vec!["flood"])).collect();
        assert_eq!(flood.len(), 2, "{stats:?}");
        let dropped: Vec<u64> = flood.iter().map(|s| s["dropped"].as_u64().unwrap()).collect();
        assert_eq!(received, EVENTS);
        assert!(
            dropped.contains(&0) && dropped.iter().any(|&d| d > 0),
            "one subscriber drops, the other none: {stats:?}"
        );
        assert!(elapsed < Duration::from_secs(20), "fan-out took {elapsed:?}");
        assert_eq!(fast.dropped_events(), 0);
        drop(slow);
    });
}

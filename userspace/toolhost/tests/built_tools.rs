//! The tools `make tools` builds (Rust, wit-bindgen, wasm32-wasip2) through
//! the host: the image's own from `out/tools` and the hostile test tools from
//! `out/test-tools` (`make test` builds them first; a bare `cargo test`
//! without them prints SKIPPED). The useful tools must work, and each hostile
//! one must be contained with the right error while the host keeps serving.
//! The WAT fixtures in tests/host.rs cover the host itself either way.

mod common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clawfs::audit::AuditLog;
use clawos_toolhost::definition::{Registry, ToolDefinition, ValidTool, TOOL_WIT_INTERFACE};
use clawos_toolhost::{
    CallError, CallRequest, Credential, CredentialError, CredentialProvider, HostConfig, MemoryError, MemoryHit,
    MemoryResults, MemorySearch, ToolHost, REDACTED,
};
use common::echo_server;
use serde_json::{json, Value};

/// The tools `make tools` built, and a ClawFS root for them to work in.
struct Tools {
    /// `out/tools` (the image's) and `out/test-tools` (the hostile ones),
    /// each with the registry tools.sh wrote there.
    dirs: Vec<(PathBuf, Registry)>,
    clawfs: tempfile::TempDir,
    /// Holds the ClawFS audit log tools' writes go to.
    logs: tempfile::TempDir,
}

fn tools() -> Option<Tools> {
    let out = clawos_test_require::package_path("../../out");
    let mut dirs = Vec::new();
    for dir in [out.join("tools"), out.join("test-tools")] {
        let registry_path = dir.join("registry.json");
        if !registry_path.exists() {
            clawos_test_require::missing(
                "the built tools' tests",
                &format!("{} is missing (run `make tools`)", registry_path.display()),
            );
            return None;
        }
        let registry = Registry::load(&registry_path).expect("registry.json from tools.sh is valid");
        dirs.push((dir, registry));
    }
    let clawfs = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(clawfs.path().join("workspaces/default")).unwrap();
    std::fs::write(clawfs.path().join("workspaces/default/hello.txt"), "hi there").unwrap();
    std::fs::write(clawfs.path().join("outside.txt"), "outside the grant").unwrap();
    Some(Tools { dirs, clawfs, logs: tempfile::tempdir().unwrap() })
}

impl Tools {
    fn config(&self) -> HostConfig {
        let audit_log = AuditLog::open(&self.audit_log()).map(Arc::new).map_err(|e| e.to_string());
        HostConfig { clawfs_root: self.clawfs.path().into(), audit_log, ..HostConfig::default() }
    }

    fn audit_log(&self) -> PathBuf {
        self.logs.path().join("clawfs-audit.log")
    }

    fn host(&self, credentials: Option<Arc<dyn CredentialProvider>>) -> ToolHost {
        let mut config = self.config();
        if let Some(credentials) = credentials {
            config.credentials = credentials;
        }
        ToolHost::new(config).unwrap()
    }

    fn host_with_memory(&self, memory: Arc<dyn MemorySearch>) -> ToolHost {
        ToolHost::new(HostConfig { memory, ..self.config() }).unwrap()
    }

    fn get(&self, tool: &str) -> ValidTool {
        self.dirs.iter().find_map(|(_, registry)| registry.get(tool)).expect("tool in a registry").clone()
    }

    /// An install-only tool (its `<tool>.json` has no capabilities) with the
    /// grants an operator would give it.
    fn installed(&self, tool: &str, capabilities: &[String]) -> ValidTool {
        let dir = self
            .dirs
            .iter()
            .map(|(dir, _)| dir)
            .find(|dir| dir.join(format!("{tool}.json")).exists())
            .expect("an install-only tool");
        let mut template: Value =
            serde_json::from_slice(&std::fs::read(dir.join(format!("{tool}.json"))).unwrap()).unwrap();
        let wasm = format!("{tool}-v0.1.0.wasm");
        let digest: [u8; 32] = sha256(&std::fs::read(dir.join(&wasm)).unwrap());
        let fields = template.as_object_mut().unwrap();
        fields.insert("tool_id".into(), tool.into());
        fields.insert("version".into(), "0.1.0".into());
        fields.insert("wasm_path".into(), wasm.into());
        fields.insert("wasm_hash".into(), clawos_toolhost::definition::format_hash(&digest).into());
        fields.insert("wit_interface".into(), TOOL_WIT_INTERFACE.into());
        fields.insert("capabilities".into(), json!(capabilities));
        let definition: ToolDefinition = serde_json::from_value(template).unwrap();
        definition.validate(dir).unwrap()
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

fn run(host: &ToolHost, tool: &ValidTool, params: Value) -> Result<Value, CallError> {
    host.call(tool, &CallRequest { agent: "test-agent", params: &params, timeout: None })
}

#[test]
fn text_and_file_tools_work_inside_their_grants() {
    let Some(tools) = tools() else { return };
    let host = tools.host(None);
    let (stats, read, write) = (tools.get("text-stats"), tools.get("file-read"), tools.get("file-write"));
    assert_eq!(
        run(&host, &stats, json!({"text": "one two\nthree"})).unwrap(),
        json!({"lines": 2, "words": 3, "bytes": 13})
    );
    assert!(matches!(run(&host, &stats, json!({"txt": 1})), Err(CallError::Tool { kind: "invalid_params", .. })));
    let hello = "/clawfs/workspaces/default/hello.txt";
    assert_eq!(run(&host, &read, json!({"path": hello})).unwrap(), json!({"path": hello, "text": "hi there"}));
    assert!(matches!(
        run(&host, &read, json!({"path": "/clawfs/outside.txt"})),
        Err(CallError::CapabilityDenied { .. })
    ));

    let notes = "/clawfs/workspaces/default/notes.md";
    assert_eq!(
        run(&host, &write, json!({"path": notes, "text": "one\n"})).unwrap(),
        json!({"path": notes, "bytes": 4})
    );
    assert_eq!(
        run(&host, &write, json!({"path": notes, "text": "two\n", "append": true})).unwrap(),
        json!({"path": notes, "bytes": 8})
    );
    assert_eq!(std::fs::read_to_string(tools.clawfs.path().join("workspaces/default/notes.md")).unwrap(), "one\ntwo\n");
    // Both writes are in the ClawFS audit log, as fs-engine would record them.
    let audited = std::fs::read_to_string(tools.audit_log()).unwrap();
    let writes: Vec<&str> = audited
        .lines()
        .filter_map(|line| line.split_once(' ').map(|(_, rest)| rest))
        .filter(|line| line.contains(" operation=write "))
        .collect();
    let write_line =
        |bytes| format!("[INFO] agent=test-agent operation=write path={notes} bytes={bytes} caller=tool:file-write");
    assert_eq!(writes, [write_line(4), write_line(8)]);
    assert!(matches!(
        run(&host, &write, json!({"path": "/clawfs/outside.txt", "text": "x"})),
        Err(CallError::CapabilityDenied { .. })
    ));
    // A symlink planted as the file is refused like any path through a
    // symlink (clawfs::files::open_beneath), not followed out of the workspace.
    std::os::unix::fs::symlink(
        tools.clawfs.path().join("outside.txt"),
        tools.clawfs.path().join("workspaces/default/link"),
    )
    .unwrap();
    let planted = run(&host, &write, json!({"path": "/clawfs/workspaces/default/link", "text": "overwritten"}));
    assert!(matches!(planted, Err(CallError::CapabilityDenied { .. })), "{planted:?}");
    assert_eq!(std::fs::read_to_string(tools.clawfs.path().join("outside.txt")).unwrap(), "outside the grant");
    let refused = std::fs::read_to_string(tools.audit_log()).unwrap();
    let refused: Vec<&str> = refused.lines().filter(|line| line.contains(" denied=true ")).collect();
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(
        refused[0].contains("path=/clawfs/outside.txt ")
            && refused[1].contains("path=/clawfs/workspaces/default/link "),
        "{refused:#?}"
    );
}

#[test]
fn json_query_picks_values_by_path() {
    let Some(tools) = tools() else { return };
    let host = tools.host(None);
    let query = tools.get("json-query");
    let document = json!({"items": [{"name": "a", "tags": ["x", "y"]}], "count": 1});
    assert_eq!(
        run(&host, &query, json!({"document": document, "path": "items[0].tags[1]"})).unwrap(),
        json!({"found": true, "value": "y"})
    );
    assert_eq!(
        run(&host, &query, json!({"document": document, "path": "count"})).unwrap(),
        json!({"found": true, "value": 1})
    );
    assert_eq!(run(&host, &query, json!({"document": document, "path": "items[3]"})).unwrap(), json!({"found": false}));
    assert!(matches!(
        run(&host, &query, json!({"document": document, "path": "items[x]"})),
        Err(CallError::Tool { kind: "invalid_params", .. })
    ));
}

#[test]
fn scratchpad_keeps_notes_per_agent_between_calls() {
    let Some(tools) = tools() else { return };
    let host = tools.host(None);
    let pad = tools.get("scratchpad");
    let call = |agent: &str, params: Value| host.call(&pad, &CallRequest { agent, params: &params, timeout: None });
    call("agent-a", json!({"op": "set", "key": "plan", "value": "ship it"})).unwrap();
    assert_eq!(
        call("agent-a", json!({"op": "get", "key": "plan"})).unwrap(),
        json!({"key": "plan", "value": "ship it"})
    );
    assert_eq!(
        call("agent-b", json!({"op": "get", "key": "plan"})).unwrap()["value"],
        Value::Null,
        "agents do not share notes"
    );
    call("agent-a", json!({"op": "delete", "key": "plan"})).unwrap();
    assert_eq!(call("agent-a", json!({"op": "get", "key": "plan"})).unwrap()["value"], Value::Null);
    let oversized = call("agent-a", json!({"op": "set", "key": "big", "value": "x".repeat(65 << 10)}));
    assert!(matches!(oversized, Err(CallError::Tool { kind: "failed", .. })), "{oversized:?}");
}

#[test]
fn web_fetch_reaches_its_granted_host_only() {
    let Some(tools) = tools() else { return };
    let host = tools.host(None);
    let (authority, server) = echo_server(2);
    let fetch = tools.installed("web-fetch", &[format!("network:outbound:{authority}")]);
    let got = run(&host, &fetch, json!({"url": format!("http://{authority}/status?q=1")})).unwrap();
    assert_eq!(got["status"], 200);
    let body: Value = serde_json::from_str(got["body"].as_str().unwrap()).unwrap();
    assert_eq!((body["method"].as_str(), body["path"].as_str()), (Some("GET"), Some("/status?q=1")));
    let posted = run(&host, &fetch, json!({"url": format!("http://{authority}/submit"), "method": "POST", "body": "payload", "headers": {"x-tool": "yes"}})).unwrap();
    let body: Value = serde_json::from_str(posted["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        (body["method"].as_str(), body["body"].as_str(), body["headers"]["x-tool"].as_str()),
        (Some("POST"), Some("payload"), Some("yes"))
    );
    server.join().unwrap();

    // Another host (a listener nobody granted) is refused before any connection.
    let ungranted = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = ungranted.local_addr().unwrap();
    match run(&host, &fetch, json!({"url": format!("http://{other}/")})) {
        Err(CallError::CapabilityDenied { reason, .. }) => assert!(reason.contains(&other.to_string()), "{reason}"),
        other => panic!("expected capability_denied, got {other:?}"),
    }
    ungranted.set_nonblocking(true).unwrap();
    assert!(ungranted.accept().is_err(), "the host connected to an ungranted host");
}

#[test]
fn hostile_tools_are_contained_and_the_host_keeps_serving() {
    let Some(tools) = tools() else { return };
    let host = tools.host(None);
    let stats = tools.get("text-stats");
    let still_serving = || assert_eq!(run(&host, &stats, json!({"text": "ok"})).unwrap()["words"], 1);

    let spin = host.call(
        &tools.get("spin-forever"),
        &CallRequest { agent: "test-agent", params: &json!({}), timeout: Some(Duration::from_millis(300)) },
    );
    assert!(matches!(spin, Err(CallError::Timeout { .. })), "{spin:?}");
    still_serving();

    match run(&host, &tools.get("memory-bomb"), json!({})) {
        Err(CallError::OutOfMemory { limit_bytes, .. }) => assert_eq!(limit_bytes, 16 << 20),
        other => panic!("expected out_of_memory, got {other:?}"),
    }
    still_serving();

    match run(&host, &tools.get("huge-output"), json!({})) {
        Err(CallError::InvalidOutput { reason, .. }) => assert!(reason.contains("exceeds"), "{reason}"),
        other => panic!("expected invalid_output, got {other:?}"),
    }
    still_serving();

    let escape = tools.get("path-escape");
    // The positive control: inside the grant the tool reads fine.
    let inside = run(&host, &escape, json!({"paths": ["/clawfs/workspaces/default/hello.txt"]})).unwrap();
    assert_eq!(inside["/clawfs/workspaces/default/hello.txt"], "hi there");
    // Around the host, through WASI itself: no preopened directory, no network.
    for wasi in ["wasi_file", "wasi_socket"] {
        assert!(inside[wasi].as_str().unwrap().starts_with("error: "), "{wasi}: {inside}");
    }
    std::os::unix::fs::symlink("/etc", tools.clawfs.path().join("workspaces/default/etc")).unwrap();
    for attempt in [
        "/clawfs/workspaces/../../etc/shadow",
        "/clawfs/workspaces/default/etc/shadow",
        "/clawfs/workspaces/default/etc/passwd",
        "/etc/shadow",
    ] {
        let got = run(&host, &escape, json!({"paths": ["/clawfs/workspaces/default/hello.txt", attempt]}));
        assert!(matches!(got, Err(CallError::CapabilityDenied { .. })), "{attempt}: {got:?}");
    }
    still_serving();

    let forked = run(&host, &tools.get("fork-bomb"), json!({})).unwrap();
    assert_eq!(
        (forked["processes_started"].as_u64(), forked["threads_started"].as_u64()),
        (Some(0), Some(0)),
        "{forked}"
    );
    assert!(
        !forked["process_error"].as_str().unwrap().is_empty() && !forked["thread_error"].as_str().unwrap().is_empty(),
        "{forked}"
    );
    still_serving();
}

/// The vault's stand-in: one secret for one tool.
struct OneSecret {
    secret: String,
}

impl CredentialProvider for OneSecret {
    fn credentials_for(
        &self,
        tool_id: &str,
        _origin: &clawos_toolhost::Origin,
    ) -> Result<Vec<Credential>, CredentialError> {
        assert_eq!(tool_id, "secret-read");
        Ok(vec![Credential {
            header: "authorization".into(),
            value: format!("Bearer {}", self.secret),
            secret: self.secret.clone(),
        }])
    }
}

#[test]
fn injected_credentials_never_reach_the_tool() {
    let Some(tools) = tools() else { return };
    let secret = "tok-9d81c0ffee42-not-for-tools";
    let host = tools.host(Some(Arc::new(OneSecret { secret: secret.into() })));
    let (authority, server) = echo_server(1);
    let reader = tools.installed("secret-read", &[format!("network:outbound:{authority}")]);
    let masked = |text: &str| text.bytes().map(|b| format!("{:02x}", b ^ 0x5a)).collect::<String>();
    let got = run(&host, &reader, json!({"url": format!("http://{authority}/"), "masked_needle": masked(secret), "masked_control": masked("echo-control-7f3a")})).unwrap();
    let seen = server.join().unwrap();
    // The server got the credential; the tool saw only the redaction marker.
    assert_eq!(seen[0]["headers"]["authorization"], format!("Bearer {secret}"));
    assert!(got["response_body"].as_str().unwrap().contains(REDACTED), "{got}");
    assert_eq!(got["environment"], json!([]));
    // The memory scan finds what really is in memory, and not the secret.
    assert_eq!(got["control_in_memory"], true, "{got}");
    assert_eq!(got["secret_in_memory"], false, "{got}");
    assert!(!got.to_string().contains(secret));
}

/// fs-engine's stand-in: one hit per search, echoing what was asked.
struct OneHit;

impl MemorySearch for OneHit {
    fn search(&self, workspace: &str, query: &str, limit: u32) -> Result<MemoryResults, MemoryError> {
        let hit = MemoryHit {
            workspace: workspace.into(),
            path: "notes.md".into(),
            heading: "Notes".into(),
            content: format!("{query} x{limit}"),
            score: 0.5,
        };
        Ok(MemoryResults {
            hits: vec![hit],
            keyword_leg: "ran (1 candidates)".into(),
            vector_leg: "not run: no embedder".into(),
        })
    }
}

#[test]
fn memory_recall_searches_only_its_granted_workspaces() {
    let Some(tools) = tools() else { return };
    let host = tools.host_with_memory(Arc::new(OneHit));
    let recall = tools.installed("memory-recall", &["memory:search:notes".to_owned()]);
    let got = run(&host, &recall, json!({"workspace": "notes", "query": "deploy steps", "limit": 3})).unwrap();
    assert_eq!(
        got["results"],
        json!([{"workspace": "notes", "path": "notes.md", "heading": "Notes", "content": "deploy steps x3", "score": 0.5}])
    );
    // The tool passes on which legs ran rather than hiding a missing one.
    assert_eq!(
        (got["keyword_leg"].as_str(), got["vector_leg"].as_str()),
        (Some("ran (1 candidates)"), Some("not run: no embedder"))
    );
    match run(&host, &recall, json!({"workspace": "secrets", "query": "x"})) {
        Err(CallError::CapabilityDenied { reason, .. }) => assert!(reason.contains("secrets"), "{reason}"),
        other => panic!("expected capability_denied, got {other:?}"),
    }
    // Without a grant the tool, which imports memory, is refused before it runs.
    let ungranted = tools.installed("memory-recall", &[]);
    assert!(matches!(host.load(&ungranted), Err(CallError::CapabilityDenied { .. })));
}

/// slow-echo, the resume tests' call in flight, takes the time it is told,
/// and a sleeping tool still ends at its deadline (it sleeps in slices, so
/// the epoch deadline sees it between them).
#[test]
fn a_sleeping_tool_answers_after_its_sleep_and_stops_at_its_deadline() {
    let Some(tools) = tools() else { return };
    let host = tools.host(None);
    let slow = tools.get("slow-echo");
    let started = std::time::Instant::now();
    let answer = run(&host, &slow, json!({"text": "late", "ms": 300})).unwrap();
    assert_eq!(answer, json!({"echo": "late", "slept_ms": 300}));
    assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    let started = std::time::Instant::now();
    let cut = host.call(
        &slow,
        &CallRequest { agent: "test-agent", params: &json!({"ms": 20_000}), timeout: Some(Duration::from_millis(300)) },
    );
    assert!(matches!(cut, Err(CallError::Timeout { .. })), "{cut:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the sleeping tool outlived its deadline: {:?}",
        started.elapsed()
    );
}

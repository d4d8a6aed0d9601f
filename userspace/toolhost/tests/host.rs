//! The host running real components: success, every limit, capability
//! denials, hash refusal, tool-call records, and the host staying healthy after each.

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawfs::audit::{AuditLog, Entry};
use clawos_toolhost::{
    CallError, CallRequest, Credential, CredentialError, CredentialProvider, HostConfig, ToolHost, REDACTED,
};
use common::{echo_server, install, tls_echo_server, Fixture};
use serde_json::{json, Value};

fn host(clawfs_root: &std::path::Path) -> ToolHost {
    ToolHost::new(HostConfig { clawfs_root: clawfs_root.into(), max_concurrent_calls: 8, ..HostConfig::default() })
        .expect("engine builds")
}

fn call(host: &ToolHost, tool: &clawos_toolhost::definition::ValidTool, params: Value) -> Result<Value, CallError> {
    host.call(tool, &CallRequest { agent: "wasm-agent", params: &params, timeout: None })
}

/// After a failed call the same host must still run a healthy tool.
fn assert_still_serving(host: &ToolHost, dir: &std::path::Path) {
    let echo = install(dir, &Fixture::Echo, &[], 16, 5);
    assert_eq!(call(host, &echo, json!({"after": "failure"})).unwrap(), json!({"after": "failure"}));
}

#[test]
fn echo_returns_its_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let echo = install(dir.path(), &Fixture::Echo, &[], 16, 5);
    let params = json!({"text": "hello", "n": [1, 2, 3]});
    assert_eq!(call(&host, &echo, params.clone()).unwrap(), params);
    // A second call gets a fresh instance and the same answer.
    assert_eq!(call(&host, &echo, params.clone()).unwrap(), params);
}

#[test]
fn infinite_loop_times_out_and_host_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let spin = install(dir.path(), &Fixture::Spin, &[], 16, 5);
    let started = Instant::now();
    let result =
        host.call(&spin, &CallRequest { agent: "a", params: &json!({}), timeout: Some(Duration::from_millis(200)) });
    let elapsed = started.elapsed();
    assert!(
        matches!(result, Err(CallError::Timeout { ref tool_id, timeout }) if tool_id == "spin" && timeout == Duration::from_millis(200)),
        "{result:?}"
    );
    assert!(elapsed >= Duration::from_millis(200) && elapsed < Duration::from_secs(2), "timed out after {elapsed:?}");
    assert_still_serving(&host, dir.path());
}

#[test]
fn tool_timeout_caps_the_callers_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let spin = install(dir.path(), &Fixture::Spin, &[], 16, 1);
    let result =
        host.call(&spin, &CallRequest { agent: "a", params: &json!({}), timeout: Some(Duration::from_secs(60)) });
    assert!(
        matches!(result, Err(CallError::Timeout { timeout, .. }) if timeout == Duration::from_secs(1)),
        "{result:?}"
    );
}

#[test]
fn memory_hog_is_out_of_memory_and_host_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let hog = install(dir.path(), &Fixture::MemoryHog, &[], 2, 5);
    let result = call(&host, &hog, json!({}));
    match result {
        Err(CallError::OutOfMemory { limit_bytes, requested_bytes, .. }) => {
            assert_eq!(limit_bytes, 2 << 20);
            assert!(requested_bytes > limit_bytes);
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    assert_still_serving(&host, dir.path());
}

#[test]
fn trap_reports_its_message_and_host_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let trap = install(dir.path(), &Fixture::Trap, &[], 16, 5);
    match call(&host, &trap, json!({})) {
        Err(CallError::Trap { message, .. }) => assert!(message.contains("unreachable"), "{message}"),
        other => panic!("expected Trap, got {other:?}"),
    }
    assert_still_serving(&host, dir.path());
}

#[test]
fn non_json_output_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let tool = install(dir.path(), &Fixture::NotJson, &[], 16, 5);
    assert!(matches!(call(&host, &tool, json!({})), Err(CallError::InvalidOutput { .. })));
}

#[test]
fn hash_mismatch_is_refused_before_compiling() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let echo = install(dir.path(), &Fixture::Echo, &[], 16, 5);
    // Same size, one byte changed: a tampered binary.
    let mut bytes = std::fs::read(&echo.wasm_path).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&echo.wasm_path, bytes).unwrap();
    match call(&host, &echo, json!({})) {
        Err(CallError::HashMismatch { expected, actual, .. }) => {
            assert_eq!(expected, echo.definition.wasm_hash);
            assert_ne!(actual, expected);
        }
        other => panic!("expected HashMismatch, got {other:?}"),
    }
}

#[test]
fn import_without_capability_is_refused_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let reader = install(dir.path(), &Fixture::FileRead, &[], 16, 5);
    match call(&host, &reader, json!("/clawfs/workspaces/a.json")) {
        Err(CallError::CapabilityDenied { reason, .. }) => {
            assert!(reason.contains("clawos:tool/filesystem"), "{reason}")
        }
        other => panic!("expected CapabilityDenied, got {other:?}"),
    }
}

/// A temporary directory with a ClawFS root, `clawfs/`, holding
/// `workspaces/default/` and `vault/`.
fn clawfs_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("clawfs");
    std::fs::create_dir_all(root.join("workspaces/default")).unwrap();
    std::fs::create_dir_all(root.join("vault")).unwrap();
    (dir, root)
}

#[test]
fn filesystem_is_confined_to_granted_prefixes() {
    let (dir, root) = clawfs_root();
    std::fs::write(root.join("workspaces/default/notes.json"), r#"{"note": 1}"#).unwrap();
    std::fs::write(root.join("vault/secret.json"), r#"{"secret": 1}"#).unwrap();
    std::os::unix::fs::symlink(root.join("vault/secret.json"), root.join("workspaces/default/link.json")).unwrap();
    // A link that stays inside the grant is refused all the same: paths are
    // never read through a symlink (clawfs::files::open_beneath).
    std::os::unix::fs::symlink(root.join("workspaces/default"), root.join("workspaces/alias")).unwrap();
    std::fs::create_dir_all(root.join("workspaces-other")).unwrap();
    std::fs::write(root.join("workspaces-other/x.json"), "{}").unwrap();
    let host = host(&root);
    let reader = install(dir.path(), &Fixture::FileRead, &["filesystem:read:/clawfs/workspaces"], 16, 5);

    assert_eq!(call(&host, &reader, json!("/clawfs/workspaces/default/notes.json")).unwrap(), json!({"note": 1}));
    assert_eq!(call(&host, &reader, json!("/clawfs//workspaces/./default/notes.json")).unwrap(), json!({"note": 1}));
    for escape in [
        "/clawfs/vault/secret.json",
        "/clawfs/workspaces/../vault/secret.json",
        "/clawfs/workspaces/default/link.json",
        "/clawfs/workspaces/alias/notes.json",
        "/clawfs/workspaces-other/x.json",
        "/clawfs/../etc/shadow",
        "/etc/shadow",
    ] {
        match call(&host, &reader, json!(escape)) {
            Err(CallError::CapabilityDenied { reason, .. }) => assert!(reason.contains(escape), "{reason}"),
            other => panic!("{escape}: expected CapabilityDenied, got {other:?}"),
        }
    }
    assert_still_serving(&host, dir.path());
}

/// A host whose tools' file writes go to the audit log at `log`.
fn audited_host(clawfs_root: &std::path::Path, log: &std::path::Path) -> ToolHost {
    let audit_log = Ok(Arc::new(AuditLog::open(log).unwrap()));
    ToolHost::new(HostConfig { clawfs_root: clawfs_root.into(), audit_log, ..HostConfig::default() }).unwrap()
}

/// The audit log's lines, each split into its timestamp and the rest.
fn audit_lines(log: &std::path::Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines().map(|line| line.split_once(' ').map(|(at, rest)| (at.to_owned(), rest.to_owned())).unwrap()).collect()
}

#[test]
fn a_tools_write_is_in_the_clawfs_audit_log_like_fs_engines() {
    let (dir, root) = clawfs_root();
    let log = dir.path().join("clawfs-audit.log");
    let host = audited_host(&root, &log);
    let writer = install(dir.path(), &Fixture::FileWrite, &["filesystem:write:/clawfs/workspaces"], 16, 5);

    let target = "/clawfs/workspaces//default/./out.json";
    assert_eq!(call(&host, &writer, json!(target)).unwrap(), json!(target));
    let written = std::fs::read_to_string(root.join("workspaces/default/out.json")).unwrap();
    assert_eq!(written, json!(target).to_string());

    // The same lines fs-engine writes for a write_file (clawfs::audit::Entry),
    // with the normal path, the agent, and the tool as the caller.
    let lines = audit_lines(&log);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let entry = |operation, bytes| Entry {
        agent: "wasm-agent",
        operation,
        path: "/clawfs/workspaces/default/out.json",
        bytes,
        denied: None,
        caller: "tool:file-write",
    };
    assert_eq!(format!("{} {}", lines[0].0, lines[0].1), entry("open", None).line(&lines[0].0));
    assert_eq!(format!("{} {}", lines[1].0, lines[1].1), entry("write", Some(written.len() as u64)).line(&lines[1].0));
    assert_eq!(lines[1].1, format!("[INFO] agent=wasm-agent operation=write path=/clawfs/workspaces/default/out.json bytes={} caller=tool:file-write", written.len()));

    // Refused writes are audited too, and write nothing.
    for escape in ["/clawfs/vault/planted.json", "/clawfs/workspaces/../vault/planted.json"] {
        assert!(matches!(call(&host, &writer, json!(escape)), Err(CallError::CapabilityDenied { .. })), "{escape}");
        let (_, line) = audit_lines(&log).pop().unwrap();
        let path = serde_json::Value::String(escape.into());
        assert!(
            line.starts_with("[WARN] agent=wasm-agent operation=write path=") && line.contains(" denied=true reason="),
            "{line}"
        );
        assert!(line.contains(&format!("path={escape} ")) || line.contains(&format!("path={path} ")), "{line}");
        assert!(line.ends_with(" caller=tool:file-write"), "{line}");
    }
    assert!(!root.join("vault/planted.json").exists());
    assert_eq!(audit_lines(&log).len(), 4);
}

#[test]
fn a_tool_never_writes_what_clawfs_maintains() {
    let (dir, root) = clawfs_root();
    let workspace = root.join("workspaces/default");
    std::fs::create_dir_all(workspace.join("snapshots")).unwrap();
    for file in ["workspace.db", "workspace.db-wal", "metadata.json"] {
        std::fs::write(workspace.join(file), "kept").unwrap();
    }
    let host = audited_host(&root, &dir.path().join("clawfs-audit.log"));
    let writer = install(dir.path(), &Fixture::FileWrite, &["filesystem:write:/clawfs/workspaces"], 16, 5);
    for (path, name) in [
        ("/clawfs/workspaces/default/workspace.db", "workspace.db"),
        ("/clawfs/workspaces/default/workspace.db-wal", "workspace.db-wal"),
        ("/clawfs/workspaces/default/metadata.json", "metadata.json"),
        ("/clawfs/workspaces/default/snapshots/forged.db", "snapshots"),
    ] {
        match call(&host, &writer, json!(path)) {
            Err(CallError::CapabilityDenied { reason, .. }) => {
                assert!(reason.contains(&format!("{name} is maintained by ClawFS")), "{reason}")
            }
            other => panic!("{path}: expected CapabilityDenied, got {other:?}"),
        }
    }
    for file in ["workspace.db", "workspace.db-wal", "metadata.json"] {
        assert_eq!(std::fs::read_to_string(workspace.join(file)).unwrap(), "kept", "{file}");
    }
    assert!(!workspace.join("snapshots/forged.db").exists());
    // Beside them, the grant writes as before.
    let written = call(&host, &writer, json!("/clawfs/workspaces/default/notes.json"));
    assert!(written.is_ok(), "{written:?}");
    assert_still_serving(&host, dir.path());
}

#[test]
fn a_tools_write_that_cannot_be_audited_does_not_happen() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("workspaces")).unwrap();
    let writer = install(dir.path(), &Fixture::FileWrite, &["filesystem:write:/clawfs/workspaces"], 16, 5);
    // No audit log at all (HostConfig's default), and one that refuses every
    // line (/dev/full: ENOSPC): the fixture traps on the refusal.
    for host in [host(dir.path()), audited_host(dir.path(), std::path::Path::new("/dev/full"))] {
        let refused = call(&host, &writer, json!("/clawfs/workspaces/x.json"));
        assert!(matches!(refused, Err(CallError::Trap { .. })), "{refused:?}");
        assert!(!dir.path().join("workspaces/x.json").exists());
    }
}

struct TestVault;

impl CredentialProvider for TestVault {
    fn credentials_for(
        &self,
        tool_id: &str,
        _origin: &clawos_toolhost::Origin,
    ) -> Result<Vec<Credential>, CredentialError> {
        assert_eq!(tool_id, "http-get");
        Ok(vec![Credential {
            header: "authorization".into(),
            value: "Bearer s3cret-token".into(),
            secret: "s3cret-token".into(),
        }])
    }
}

/// A host whose tools' HTTP requests carry [`TestVault`]'s credential,
/// trusting the certificates of `ca_bundle_pem` (`None`: the web roots).
fn vault_host(clawfs_root: &std::path::Path, ca_bundle_pem: Option<Vec<u8>>) -> ToolHost {
    let credentials = Arc::new(TestVault);
    ToolHost::new(HostConfig { clawfs_root: clawfs_root.into(), credentials, ca_bundle_pem, ..HostConfig::default() })
        .unwrap()
}

#[test]
fn http_reaches_granted_host_with_injected_redacted_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let (authority, server) = echo_server(1);
    let host = vault_host(dir.path(), None);
    let getter = install(dir.path(), &Fixture::HttpGet, &[&format!("network:outbound:{authority}")], 16, 5);
    let response = call(&host, &getter, json!(format!("http://{authority}/status"))).unwrap();
    // The server saw the credential; the tool only ever saw it redacted.
    assert_eq!(server.join().unwrap()[0]["headers"]["authorization"], "Bearer s3cret-token");
    assert_eq!(response["headers"]["authorization"], json!(REDACTED));
    assert!(!response.to_string().contains("s3cret"));
}

#[test]
fn https_verifies_the_server_and_carries_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let (authority, ca_pem, server) = tls_echo_server(1);
    let host = vault_host(dir.path(), Some(ca_pem.into_bytes()));
    let getter = install(dir.path(), &Fixture::HttpGet, &[&format!("network:outbound:{authority}")], 16, 5);
    let response = call(&host, &getter, json!(format!("https://{authority}/secure"))).unwrap();
    assert_eq!(response["path"], "/secure");
    assert_eq!(response["headers"]["authorization"], json!(REDACTED));
    assert_eq!(server.join().unwrap()[0]["headers"]["authorization"], "Bearer s3cret-token");
}

#[test]
fn https_to_a_server_outside_the_trusted_roots_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (authority, _ca_pem, server) = tls_echo_server(1);
    // The web roots (the default) do not include the test's self-signed CA.
    let host = vault_host(dir.path(), None);
    let getter = install(dir.path(), &Fixture::HttpGet, &[&format!("network:outbound:{authority}")], 16, 5);
    // The fixture traps on a transport error: the handshake was refused.
    assert!(matches!(call(&host, &getter, json!(format!("https://{authority}/"))), Err(CallError::Trap { .. })));
    assert!(server.join().unwrap().is_empty(), "no request got through");
}

#[test]
fn http_to_ungranted_host_is_denied() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let authority = listener.local_addr().unwrap().to_string();
    let host = host(dir.path());
    let getter = install(dir.path(), &Fixture::HttpGet, &["network:outbound:api.example.com"], 16, 5);
    match call(&host, &getter, json!(format!("http://{authority}/"))) {
        Err(CallError::CapabilityDenied { reason, .. }) => assert!(reason.contains(&authority), "{reason}"),
        other => panic!("expected CapabilityDenied, got {other:?}"),
    }
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "the host connected to an ungranted host");
}

#[test]
fn precompiled_cache_is_reused_across_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let echo = install(dir.path(), &Fixture::Echo, &[], 16, 5);
    // The daemon keeps one key per boot; entries under another key are
    // recompiled (tests/cache.rs).
    let key = clawos_toolhost::CacheKey::random().unwrap();
    let config = || HostConfig {
        cache_dir: Some(cache.clone()),
        cache_key: Some(key.clone()),
        clawfs_root: dir.path().into(),
        ..HostConfig::default()
    };
    ToolHost::new(config()).unwrap().load(&echo).unwrap();
    let artifacts: Vec<_> =
        std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    assert!(artifacts[0].starts_with(&echo.definition.wasm_hash["sha256:".len()..]), "{artifacts:?}");
    // A second host (a daemon restart) loads the artifact and runs it.
    let host = ToolHost::new(config()).unwrap();
    assert_eq!(call(&host, &echo, json!([1])).unwrap(), json!([1]));
}

#[test]
fn every_call_is_audited() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let records = std::sync::Mutex::new(agentfs::AgentFs::open(dir.path().join(clawfs::DATABASE_FILE)).unwrap());
    let echo = install(dir.path(), &Fixture::Echo, &[], 16, 5);
    let trap = install(dir.path(), &Fixture::Trap, &[], 16, 5);
    let (echo_params, trap_params) = (json!({"x": 1}), json!({}));
    let request = |params| CallRequest { agent: "wasm-agent", params, timeout: None };
    let ok = host.call_recorded(&echo, &request(&echo_params), Some("session-1"), None, &records).unwrap();
    assert!(ok.outcome.is_ok());
    let failed = host.call_recorded(&trap, &request(&trap_params), Some("session-1"), None, &records).unwrap();
    assert!(failed.outcome.is_err());

    let rows = records.lock().unwrap().tool_calls_in_session("session-1").unwrap();
    assert_eq!(rows.len(), 2);
    let echo_row = rows.iter().find(|r| r.id == ok.call_id).unwrap();
    assert_eq!(echo_row.name, "echo");
    assert_eq!(echo_row.parameters.as_deref(), Some(r#"{"x":1}"#));
    assert_eq!(echo_row.result.as_deref(), Some(r#"{"x":1}"#));
    let trap_row = rows.iter().find(|r| r.id == failed.call_id).unwrap();
    assert!(trap_row.error.as_deref().unwrap().starts_with("trap: "), "{:?}", trap_row.error);
    assert!(trap_row.meta.as_ref().unwrap().completed_at_ms >= trap_row.meta.as_ref().unwrap().started_at_ms);
}

#[test]
fn concurrent_calls_share_one_host() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path());
    let echo = install(dir.path(), &Fixture::Echo, &[], 16, 5);
    std::thread::scope(|scope| {
        for caller in 0..8 {
            let (host, echo) = (&host, &echo);
            scope.spawn(move || {
                for i in 0..20 {
                    assert_eq!(call(host, echo, json!([caller, i])).unwrap(), json!([caller, i]));
                }
            });
        }
    });
}

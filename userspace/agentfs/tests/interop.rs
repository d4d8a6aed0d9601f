//! Interoperability with the reference AgentFS SDK (PyPI `agentfs-sdk`
//! 0.6.4): a workspace written here is read by the SDK and the other way
//! round, each side through its ordinary API (`AgentFS.open` with a path,
//! `AgentFs::open`), and the checker finds both consistent. `make test`
//! installs the SDK (scripts/agentfs-sdk.sh) and requires
//! it (`clawos_test_require`): a missing SDK is a failure there; a bare
//! `cargo test` without it skips these tests, saying so.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use agentfs::{AgentFs, NewToolCall, S_IFLNK};
use serde_json::{json, Value};

fn sdk_available() -> bool {
    let found =
        Command::new("python3").args(["-c", "import agentfs_sdk, turso"]).status().is_ok_and(|status| status.success());
    if !found {
        clawos_test_require::missing(
            "the AgentFS SDK interoperability tests",
            "python3 cannot import agentfs_sdk; run `make agentfs-sdk` and set PYTHONPATH=out/agentfs-sdk",
        );
    }
    found
}

fn sdk(command: &str, db: &Path, args: &[&str]) -> String {
    let output = Command::new("python3")
        .arg(clawos_test_require::package_path("tests/interop/sdk.py"))
        .arg(command)
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "sdk.py {command} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn sdk_reads_a_clawos_workspace() {
    if !sdk_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clawos.db");
    {
        let mut fs = AgentFs::open(&path).unwrap();
        fs.write_file("/docs/readme", b"hello from clawos").unwrap();
        fs.write_file("/big.bin", &vec![7u8; 10_000]).unwrap();
        fs.symlink("/docs/link", "readme").unwrap();
        fs.kv_set("config", &json!({"model": "small", "tokens": 512})).unwrap();
        fs.record_tool_call(&NewToolCall {
            name: "read_file",
            parameters: Some(&json!({"path": "/docs/readme"})),
            outcome: Ok(&json!("ok")),
            started: UNIX_EPOCH + Duration::from_millis(1_700_000_000_100),
            completed: UNIX_EPOCH + Duration::from_millis(1_700_000_001_300),
            session_id: Some("s"),
            parent_call_id: None,
            idempotency_key: Some("s/1/call-1"),
        })
        .unwrap();
        common::assert_consistent(&fs);
    }
    let seen: Value = serde_json::from_str(&sdk("read", &path, &[])).unwrap();
    assert_eq!(seen["root"], json!(["big.bin", "docs"]));
    assert_eq!(seen["docs"], json!(["link", "readme"]));
    assert_eq!(seen["readme"], "hello from clawos");
    assert_eq!(seen["big_len"], 10_000);
    assert_eq!(seen["link_mode"].as_u64().unwrap() as u32 & 0o170000, S_IFLNK);
    assert_eq!(seen["link_target"], "readme");
    assert_eq!(seen["kv"], json!({"model": "small", "tokens": 512}));
    assert_eq!(seen["calls"], json!([["read_file", "{\"path\":\"/docs/readme\"}", "\"ok\"", null, 1000]]));
    // The SDK's open rewrites only what it owns; the workspace stays
    // consistent, its call still in ClawOS's hash chain.
    let report = agentfs::check::check_database(&path).unwrap();
    assert!(report.is_clean() && report.not_hardened.is_empty(), "{report}");
}

#[test]
fn clawos_reads_an_sdk_workspace() {
    if !sdk_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sdk.db");
    sdk("write", &path, &[]);
    let mut fs = AgentFs::open(&path).unwrap();
    assert_eq!(fs.read_file("/notes/todo.txt").unwrap(), b"from the sdk");
    let blob: Vec<u8> = (0..=255u8).cycle().take(256 * 40).collect();
    assert_eq!(fs.read_file("/blob.bin").unwrap(), blob);
    assert_eq!(fs.read("/blob.bin", 4095, 3).unwrap(), blob[4095..4098]);
    assert!(fs.stat("/notes").unwrap().is_dir());
    assert_eq!(fs.kv_get("session").unwrap(), Some(json!({"user": "ada", "turn": 3})));
    let calls = fs.tool_calls_by_name("search").unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].parameters.as_deref(), Some(r#"{"q": "x"}"#));
    assert_eq!(calls[0].result.as_deref(), Some(r#"{"hits": 2}"#));
    assert_eq!((calls[0].started_at, calls[0].completed_at), (1_700_000_000, 1_700_000_002));
    // Writing through ClawOS keeps the SDK's workspace consistent for both:
    // the checker finds nothing wrong, says the SDK's call is outside the
    // hash chain, and the SDK opens the workspace again and reads the file.
    fs.write_file("/notes/reply.txt", b"from clawos").unwrap();
    drop(fs);
    let report = agentfs::check::check_database(&path).unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.not_hardened.len(), 1, "{report}");
    assert!(report.not_hardened[0].starts_with("1 tool call(s) outside the hash chain"), "{report}");
    assert_eq!(sdk("cat", &path, &["/notes/reply.txt"]), "from clawos");
}

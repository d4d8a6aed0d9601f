//! The key-value store and the tool call audit trail.

mod common;

use std::time::{Duration, UNIX_EPOCH};

use agentfs::NewToolCall;
use common::Workspace;
use serde_json::json;

#[test]
fn kv_set_get_delete_list() {
    let mut ws = Workspace::new();
    ws.kv_set("user:prefs", &json!({"theme": "dark"})).unwrap();
    ws.kv_set("a", &json!(1)).unwrap();
    ws.kv_set("a", &json!([1, 2])).unwrap();
    assert_eq!(ws.kv_get("a").unwrap(), Some(json!([1, 2])));
    assert_eq!(ws.kv_get("missing").unwrap(), None);
    let keys: Vec<_> = ws.kv_list().unwrap().into_iter().map(|e| e.key).collect();
    assert_eq!(keys, ["a", "user:prefs"]);
    assert_eq!(ws.kv_count_prefix("user:").unwrap(), 1);
    assert_eq!(ws.kv_count_prefix("").unwrap(), 2);
    assert_eq!(ws.kv_count_prefix("user:prefs:").unwrap(), 0);
    // LIKE wildcards in a prefix are plain characters.
    assert_eq!(ws.kv_count_prefix("_ser").unwrap(), 0);
    assert!(ws.kv_delete("a").unwrap());
    assert!(!ws.kv_delete("a").unwrap());
    assert_eq!(ws.kv_set_json("bad", "{not json").unwrap_err().errno(), libc::EINVAL);
    ws.kv_set_json("raw", "\"text\"").unwrap();
    assert_eq!(ws.kv_get("raw").unwrap(), Some(json!("text")));
}

fn call<'a>(name: &'a str, outcome: Result<&'a serde_json::Value, &'a str>, start_ms: u64, ms: u64) -> NewToolCall<'a> {
    NewToolCall {
        name,
        parameters: None,
        outcome,
        started: UNIX_EPOCH + Duration::from_millis(start_ms),
        completed: UNIX_EPOCH + Duration::from_millis(start_ms + ms),
        session_id: Some("s1"),
        parent_call_id: None,
        idempotency_key: None,
    }
}

#[test]
fn tool_calls_record_and_query() {
    let mut ws = Workspace::new();
    let ok = json!({"bytes": 3});
    let params = json!({"path": "/x"});
    let first = ws
        .record_tool_call(&NewToolCall { parameters: Some(&params), ..call("read_file", Ok(&ok), 1_000_900, 250) })
        .unwrap();
    let nested = NewToolCall { parent_call_id: Some(first), ..call("web_search", Err("timeout"), 2_000_000, 1500) };
    ws.record_tool_call(&nested).unwrap();
    ws.record_tool_call(&call("read_file", Ok(&ok), 3_000_000, 10)).unwrap();

    let reads = ws.tool_calls_by_name("read_file").unwrap();
    assert_eq!(reads.len(), 2);
    assert_eq!(reads[0].started_at, 3_000);
    let older = &reads[1];
    assert_eq!(older.parameters.as_deref(), Some(r#"{"path":"/x"}"#));
    // Seconds and the spec's derived duration in tool_calls, milliseconds in the extension.
    assert_eq!((older.started_at, older.completed_at, older.duration_ms), (1_000, 1_001, 1_000));
    let meta = older.meta.as_ref().unwrap();
    assert_eq!(meta.completed_at_ms - meta.started_at_ms, 250);
    assert_eq!(ws.tool_calls_since(1_500).unwrap().len(), 2);
    let search = &ws.tool_calls_by_name("web_search").unwrap()[0];
    assert_eq!(search.meta.as_ref().unwrap().parent_call_id, Some(first));
    assert_eq!(search.error.as_deref(), Some("timeout"));
    assert_eq!(ws.tool_calls_in_session("s1").unwrap().len(), 3);

    let stats = ws.tool_performance().unwrap();
    assert_eq!(stats[0].name, "read_file");
    assert_eq!((stats[0].total_calls, stats[0].successful, stats[0].failed), (2, 2, 0));
    assert_eq!((stats[1].successful, stats[1].failed), (0, 1));

    // One call per idempotency key: the recorded call is found by it, and
    // a second record with the same key is refused, recording nothing.
    let keyed = ws
        .record_tool_call(&NewToolCall {
            idempotency_key: Some("s1/2/call-a"),
            ..call("file_write", Ok(&ok), 4_000_000, 5)
        })
        .unwrap();
    let found = ws.tool_call_by_key("s1/2/call-a").unwrap().unwrap();
    assert_eq!((found.id, found.outcome()), (keyed, Ok(ok.clone())));
    assert_eq!(search.outcome(), Err("timeout".to_owned()));
    assert_eq!(ws.tool_call_by_key("s1/2/call-b").unwrap(), None);
    assert!(ws
        .record_tool_call(&NewToolCall {
            idempotency_key: Some("s1/2/call-a"),
            ..call("file_write", Ok(&ok), 5_000_000, 5)
        })
        .is_err());
    assert_eq!(ws.tool_calls_by_name("file_write").unwrap().len(), 1);
}

#[test]
fn audit_trail_is_insert_only_and_validated_by_the_database() {
    let ws = Workspace::new();
    let conn = ws.connection();
    let insert = |params: &str, result: Option<&str>, error: Option<&str>, duration: i64| {
        conn.execute(
            "INSERT INTO tool_calls (name, parameters, result, error, started_at, completed_at, duration_ms)
             VALUES ('t', ?, ?, ?, 10, 12, ?)",
            rusqlite::params![params, result, error, duration],
        )
    };
    insert("{}", Some("1"), None, 2000).unwrap();
    let rejected = [
        insert("{}", Some("1"), Some("e"), 2000),
        insert("{}", None, None, 2000),
        insert("{}", Some("1"), None, 1999),
        insert("{bad", Some("1"), None, 2000),
        insert("{}", Some("not json"), None, 2000),
    ];
    for result in rejected {
        let err = agentfs::Error::from(result.unwrap_err());
        assert_eq!(err.errno(), libc::EINVAL, "{err}");
    }
    assert!(conn.execute("UPDATE tool_calls SET name = 'x'", []).is_err());
    assert!(conn.execute("DELETE FROM tool_calls", []).is_err());
    let count: i64 = conn.query_row("SELECT COUNT(*) FROM tool_calls", [], |r| r.get(0)).unwrap();
    assert_eq!(count, 1);
}

#[test]
fn every_clawos_connection_guards_the_audit_trail() {
    let mut ws = Workspace::new();
    ws.record_tool_call(&call("t", Ok(&json!(1)), 1_000, 5)).unwrap();
    // A second connection to the same file, as ClawFS's search index opens.
    let other = rusqlite::Connection::open(&ws.path).unwrap();
    agentfs::configure_connection(&other).unwrap();
    assert!(other.execute("UPDATE tool_calls SET result = '2'", []).is_err());
    assert!(other.execute("DELETE FROM clawos_tool_call_chain", []).is_err());
}

#[test]
fn the_hash_chain_shows_a_call_changed_or_removed_behind_the_guards() {
    let mut ws = Workspace::new();
    let ok = json!({"bytes": 3});
    let ids: Vec<i64> = (0..4)
        .map(|n| {
            ws.record_tool_call(&NewToolCall {
                idempotency_key: Some(&format!("k{n}")),
                ..call("read_file", Ok(&ok), 1_000 * n, 5)
            })
            .unwrap()
        })
        .collect();
    assert!(ws.check().unwrap().is_clean());
    // A process that opens the file without ClawOS's guards, as any SQLite
    // client can: its edits go through, and the chain shows each.
    let raw = rusqlite::Connection::open(&ws.path).unwrap();
    raw.execute("UPDATE tool_calls SET result = '{\"bytes\": 4}' WHERE id = ?", [ids[1]]).unwrap();
    raw.execute("UPDATE clawos_tool_call_key SET idempotency_key = 'other' WHERE call_id = ?", [ids[2]]).unwrap();
    raw.execute("DELETE FROM tool_calls WHERE id = ?", [ids[3]]).unwrap();
    let report = ws.check().unwrap();
    let details: Vec<&str> =
        report.violations.iter().filter(|v| v.rule == "tool_calls.5").map(|v| v.detail.as_str()).collect();
    assert_eq!(details.len(), 3, "{report}");
    assert!(details[0].starts_with(&format!("call {} (read_file) does not match its hash", ids[1])), "{report}");
    assert!(details[1].starts_with(&format!("call {} (read_file) does not match", ids[2])), "{report}");
    assert_eq!(details[2], format!("call {} was deleted", ids[3]));
    // A call written without its link (as the reference SDK records one)
    // is outside the chain: reported as not hardened, not as a violation.
    raw.execute_batch(
        "INSERT INTO tool_calls (name, result, started_at, completed_at, duration_ms) VALUES ('sdk', '1', 5, 5, 0)",
    )
    .unwrap();
    let report = ws.check().unwrap();
    assert_eq!(report.violations.iter().filter(|v| v.rule == "tool_calls.5").count(), 3, "{report}");
    assert!(
        report.not_hardened.iter().any(|note| note.starts_with("1 tool call(s) outside the hash chain")),
        "{report}"
    );
    std::mem::forget(ws); // damaged on purpose: skip the drop-time check
}

#[test]
fn opening_a_workspace_drops_the_triggers_older_clawos_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(agentfs::SCHEMA_SQL).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER tool_calls_reject_update BEFORE UPDATE ON tool_calls BEGIN SELECT RAISE(ABORT, 'no'); END;
             CREATE TRIGGER tool_calls_reject_delete BEFORE DELETE ON tool_calls BEGIN SELECT RAISE(ABORT, 'no'); END;",
        )
        .unwrap();
    }
    drop(agentfs::AgentFs::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let stored: i64 =
        conn.query_row("SELECT COUNT(*) FROM sqlite_schema WHERE type = 'trigger'", [], |r| r.get(0)).unwrap();
    assert_eq!(stored, 0);
}

//! An agent's database as ClawOS fills it (AgentFS files and tool calls,
//! ClawFS's search index, agent-loop's sessions) opens in the reference
//! AgentFS SDK through its ordinary API, and reads back what ClawOS wrote:
//! no stored trigger and no column CHECK in the file, which the SDK's engine
//! refuses (specs/agentfs/README.md, "Interoperability notes"). `make test`
//! requires the SDK; a bare `cargo test` without it skips, saying so.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use clawfs::{Clawfs, Config, HashingEmbedder, DATABASE_FILE};
use clawos_agent_loop::provider::{ChatMessage, Role};
use clawos_agent_loop::store::Store;
use serde_json::json;

#[test]
fn the_reference_sdk_opens_a_database_every_clawos_part_wrote() {
    let found = Command::new("python3").args(["-c", "import agentfs_sdk"]).status().is_ok_and(|s| s.success());
    if !found {
        clawos_test_require::missing(
            "the AgentFS SDK interoperability test of a whole agent database",
            "python3 cannot import agentfs_sdk; run `make agentfs-sdk` and set PYTHONPATH=out/agentfs-sdk",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clawfs = Clawfs::new(Config { vector_dimension: 128, ..Config::new(dir.path()) }).unwrap();
    clawfs.create_workspace("notes", "user").unwrap();
    let db = clawfs.workspace_dir("notes").unwrap().join(DATABASE_FILE);
    let mut index = clawfs.open_memory("notes", Some(Arc::new(HashingEmbedder::new(128)))).unwrap();
    index.index_document("memory.md", "# People\n\nAda likes tea.\n").unwrap();
    drop(index);
    let mut agentfs = agentfs::AgentFs::open(&db).unwrap();
    agentfs.write_file("/memory.md", b"# People\n\nAda likes tea.\n").unwrap();
    agentfs
        .record_tool_call(&agentfs::NewToolCall {
            name: "memory_store",
            parameters: Some(&json!({"text": "Ada likes tea."})),
            outcome: Ok(&json!({"stored": true})),
            started: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            completed: UNIX_EPOCH + Duration::from_secs(1_700_000_001),
            session_id: Some("s1"),
            parent_call_id: None,
            idempotency_key: Some("s1/1/call-1"),
        })
        .unwrap();
    drop(agentfs);
    let store = Store::open(&db).unwrap();
    store.ensure_session("s1").unwrap();
    store.append("s1", &ChatMessage::text(Role::User, "what does Ada like?"), false, 5).unwrap();
    drop(store);

    let stored: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM sqlite_schema WHERE type = 'trigger'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, 0, "a trigger is stored in the file");
    let output = Command::new("python3")
        .arg(clawos_test_require::package_path("../agentfs/tests/interop/sdk.py"))
        .args(["cat"])
        .arg(&db)
        .arg("/memory.md")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the SDK could not open the database: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "# People\n\nAda likes tea.\n");
    let report = agentfs::check::check_database(&db).unwrap();
    assert!(report.is_clean() && report.not_hardened.is_empty(), "{report}");
}

#[test]
fn a_transcript_table_with_the_old_column_check_is_rebuilt_with_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(DATABASE_FILE);
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE clawos_session (session_id TEXT PRIMARY KEY, created_at_ms INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL);
             CREATE TABLE clawos_session_message (
                session_id TEXT NOT NULL REFERENCES clawos_session(session_id), seq INTEGER NOT NULL,
                role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'summary', 'notice')),
                content TEXT NOT NULL, tool_calls TEXT, tool_call_id TEXT, tokens INTEGER NOT NULL,
                compacted INTEGER NOT NULL DEFAULT 0, at_ms INTEGER NOT NULL, PRIMARY KEY (session_id, seq));
             INSERT INTO clawos_session VALUES ('s1', 1, 1);
             INSERT INTO clawos_session_message (session_id, seq, role, content, tokens, at_ms) VALUES ('s1', 1, 'user', 'kept', 1, 1);",
        )
        .unwrap();
    }
    let store = Store::open(&db).unwrap();
    assert_eq!(store.context("s1").unwrap().into_iter().map(|m| m.message.content).collect::<Vec<_>>(), ["kept"]);
    drop(store);
    let sql: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT sql FROM sqlite_schema WHERE name = 'clawos_session_message'", [], |r| r.get(0))
        .unwrap();
    assert!(!sql.contains("NOT NULL CHECK"), "{sql}");
    // The CHECK is still enforced, as a table constraint.
    assert!(rusqlite::Connection::open(&db)
        .unwrap()
        .execute("INSERT INTO clawos_session_message (session_id, seq, role, content, tokens, at_ms) VALUES ('s1', 2, 'bogus', 'x', 1, 1)", [])
        .is_err());
}

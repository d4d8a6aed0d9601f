//! The consistency checker finds each kind of violation it claims to.

mod common;

use common::Workspace;

/// Applies `damage` with SQL to a consistent workspace and returns the rules the checker reports.
fn rules_after(damage: &str) -> Vec<&'static str> {
    let mut ws = Workspace::new();
    ws.write_file("/d/f", &[1u8; 5000]).unwrap();
    ws.symlink("/l", "/d/f").unwrap();
    ws.kv_set("k", &serde_json::json!(1)).unwrap();
    ws.record_tool_call(&agentfs::NewToolCall {
        name: "t",
        parameters: None,
        outcome: Ok(&serde_json::json!("ok")),
        started: std::time::UNIX_EPOCH,
        completed: std::time::UNIX_EPOCH,
        session_id: None,
        parent_call_id: None,
        idempotency_key: None,
    })
    .unwrap();
    assert!(ws.check().unwrap().is_clean());
    ws.connection().execute_batch(damage).unwrap();
    let report = agentfs::check::check_database(&ws.path).unwrap();
    let mut rules: Vec<_> = report.violations.iter().map(|v| v.rule).collect();
    rules.dedup();
    ws.damaged_on_purpose();
    rules
}

#[test]
fn each_rule_is_detected() {
    let ino_f = "(SELECT ino FROM fs_dentry WHERE name = 'f')";
    let cases = [
        ("DELETE FROM fs_inode WHERE ino = 1", "fs.1"),
        (&format!("DELETE FROM fs_inode WHERE ino = {ino_f}"), "fs.2"),
        (&format!("UPDATE fs_dentry SET parent_ino = {ino_f} WHERE name = 'l'"), "fs.3"),
        ("UPDATE fs_inode SET mode = 33188 WHERE ino = (SELECT ino FROM fs_dentry WHERE name = 'd')", "fs.3"),
        (&format!("UPDATE fs_inode SET mode = 4294967295 WHERE ino = {ino_f}"), "fs.6"),
        ("DELETE FROM fs_symlink", "fs.6"),
        (&format!("UPDATE fs_inode SET size = 4 WHERE ino = {ino_f}"), "fs.7"),
        ("UPDATE fs_data SET data = x'00' WHERE chunk_index = 0", "fs.7"),
        (&format!("UPDATE fs_inode SET nlink = 2 WHERE ino = {ino_f}"), "fs.8"),
        ("DELETE FROM fs_dentry WHERE name = 'l'", "fs.8"),
        ("UPDATE fs_config SET value = 'zero' WHERE key = 'chunk_size'", "fs.config"),
        ("INSERT INTO fs_whiteout VALUES ('/a/b', '/', 0)", "overlay.3"),
        ("INSERT INTO fs_whiteout VALUES ('/d', '/', 0)", "overlay.1"),
        ("INSERT INTO fs_origin VALUES (999, 3)", "overlay.5"),
        ("UPDATE kv_store SET value = '{'", "kv.2"),
        ("UPDATE kv_store SET created_at = 'yesterday'", "kv.3"),
        // A process without ClawOS's guards (dropped here) changes or
        // removes a recorded call: the hash chain shows it.
        (
            "DROP TRIGGER temp.clawos_guard_tool_calls_update; UPDATE tool_calls SET result = '\"forged\"'",
            "tool_calls.5",
        ),
        ("DROP TRIGGER temp.clawos_guard_tool_calls_delete; DELETE FROM tool_calls", "tool_calls.5"),
        (
            "DROP TRIGGER temp.clawos_guard_tool_call_meta_update; UPDATE clawos_tool_call_meta SET session_id = 'x'",
            "tool_calls.5",
        ),
        ("INSERT INTO clawos_xattr VALUES (999, 'user.x', x'00')", "clawos.xattr"),
        ("INSERT INTO clawos_inode_nsec (ino, mtime, mtime_nsec) VALUES (999, 1, 5)", "clawos.inode_nsec"),
        ("UPDATE clawos_inode_nsec SET ctime_nsec = 1000000000", "clawos.inode_nsec"),
    ];
    for (damage, rule) in cases {
        let found = rules_after(damage);
        assert!(found.contains(&rule), "{damage}: expected {rule}, got {found:?}");
    }
}

#[test]
fn tool_call_rules_are_detected_without_triggers() {
    let rules = rules_after(
        "DROP TRIGGER temp.clawos_guard_tool_calls_insert;
         INSERT INTO tool_calls (name, parameters, result, error, started_at, completed_at, duration_ms)
         VALUES ('t', '{', '1', 'e', 1, 2, 5);",
    );
    for rule in ["tool_calls.1", "tool_calls.3", "tool_calls.4"] {
        assert!(rules.contains(&rule), "{rule} missing from {rules:?}");
    }
}

#[test]
fn directory_cycles_are_detected() {
    let rules = rules_after(
        "INSERT INTO fs_inode (mode, nlink, atime, mtime, ctime) VALUES (16877, 1, 0, 0, 0);
         INSERT INTO fs_dentry (name, parent_ino, ino) VALUES ('loop', last_insert_rowid(), last_insert_rowid());",
    );
    assert!(rules.contains(&"fs.tree"), "{rules:?}");
}

#[test]
fn report_prints_each_violation() {
    let mut ws = Workspace::new();
    ws.write_file("/f", b"abc").unwrap();
    ws.connection().execute("UPDATE fs_inode SET size = 9 WHERE ino != 1", []).unwrap();
    let report = ws.check().unwrap();
    let text = report.to_string();
    assert!(text.contains("[fs.7]") && text.contains("size 9 but 3 bytes"), "{text}");
    ws.connection().execute("UPDATE fs_inode SET size = 3 WHERE ino != 1", []).unwrap();
}

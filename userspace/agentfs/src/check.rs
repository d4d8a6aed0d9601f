//! The consistency checker: verifies every consistency rule of AgentFS v0.4
//! (filesystem, overlay, key-value, tool calls) plus the invariants of
//! ClawOS's extension tables, and reports each violation it finds.
//!
//! Tool call rule 5 (no record updated or deleted) is checked against
//! ClawOS's hash chain: a call ClawOS recorded and anything changed since
//! shows, whoever changed it. A workspace, or calls, that ClawOS's
//! hardening does not cover (made by another implementation) are reported
//! as such ([`Report::not_hardened`]), not as violations of the spec.
//!
//! It only reads: it opens the database read-only and never repairs.

use std::fmt;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::error::Result;

/// One broken rule, with the offending row described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Short rule id: section and number in the spec (`fs.7`, `overlay.3`,
    /// `tool_calls.5`, ...) or `clawos.*` for extension invariants.
    pub rule: &'static str,
    /// What the rule says.
    pub description: &'static str,
    /// Which row breaks it.
    pub detail: String,
}

/// The outcome of a check: no violations when the database is consistent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub violations: Vec<Violation>,
    /// What of ClawOS's hardening the workspace lacks (calls outside the
    /// hash chain, no chain at all): not a violation of the spec, which
    /// does not ask for it, but what an operator relying on it must know.
    pub not_hardened: Vec<String>,
}

impl Report {
    /// Whether no rule is broken.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_clean() {
            writeln!(f, "consistent: no violations")?;
        } else {
            writeln!(f, "{} violation(s):", self.violations.len())?;
            for v in &self.violations {
                writeln!(f, "  [{}] {}: {}", v.rule, v.description, v.detail)?;
            }
        }
        for note in &self.not_hardened {
            writeln!(f, "not hardened by ClawOS: {note}")?;
        }
        Ok(())
    }
}

/// A rule and the query listing what breaks it, one TEXT row per violation.
struct Rule {
    id: &'static str,
    description: &'static str,
    sql: &'static str,
}

const FS_RULES: &[Rule] = &[
    Rule {
        id: "fs.config",
        description: "fs_config holds a positive integer chunk_size",
        sql: "SELECT 'chunk_size missing' WHERE NOT EXISTS (SELECT 1 FROM fs_config WHERE key = 'chunk_size')
              UNION ALL
              SELECT 'chunk_size = ' || quote(value) FROM fs_config
              WHERE key = 'chunk_size' AND NOT (value GLOB '[1-9]*' AND value NOT GLOB '*[^0-9]*')",
    },
    Rule {
        id: "fs.1",
        description: "root inode 1 exists and is a directory",
        sql: "SELECT 'inode 1 missing' WHERE NOT EXISTS (SELECT 1 FROM fs_inode WHERE ino = 1)
              UNION ALL
              SELECT printf('inode 1 has mode %o', mode) FROM fs_inode WHERE ino = 1 AND (mode & 61440) != 16384",
    },
    Rule {
        id: "fs.2",
        description: "every dentry references a valid inode",
        sql: "SELECT printf('dentry %d (%s in %d) -> missing inode %d', d.id, d.name, d.parent_ino, d.ino)
              FROM fs_dentry d LEFT JOIN fs_inode i ON i.ino = d.ino WHERE i.ino IS NULL",
    },
    Rule {
        id: "fs.3",
        description: "every dentry references a valid parent directory inode",
        sql: "SELECT printf('dentry %d (%s) has parent %d which is %s', d.id, d.name, d.parent_ino,
                            CASE WHEN p.ino IS NULL THEN 'missing' ELSE printf('mode %o', p.mode) END)
              FROM fs_dentry d LEFT JOIN fs_inode p ON p.ino = d.parent_ino
              WHERE p.ino IS NULL OR (p.mode & 61440) != 16384",
    },
    Rule {
        id: "fs.4",
        description: "no directory contains duplicate names",
        sql: "SELECT printf('%d entries named %s in directory %d', COUNT(*), name, parent_ino)
              FROM fs_dentry GROUP BY parent_ino, name HAVING COUNT(*) > 1",
    },
    Rule {
        id: "fs.5",
        description: "directories have S_IFDIR mode, one dentry each, and the root none",
        sql: "SELECT printf('directory inode %d has %d dentries', i.ino, COUNT(d.id))
              FROM fs_inode i LEFT JOIN fs_dentry d ON d.ino = i.ino
              WHERE (i.mode & 61440) = 16384 AND i.ino != 1 GROUP BY i.ino HAVING COUNT(d.id) != 1
              UNION ALL
              SELECT printf('root has dentry %d', id) FROM fs_dentry WHERE ino = 1",
    },
    Rule {
        id: "fs.6",
        description: "file types are valid; data chunks belong to regular files; fs_symlink rows to symlinks",
        sql: "SELECT printf('inode %d has unknown file type in mode %o', ino, mode) FROM fs_inode
              WHERE (mode & 61440) NOT IN (32768, 16384, 40960, 4096, 8192, 24576, 49152)
              UNION ALL
              SELECT DISTINCT printf('inode %d has data chunks but mode %o', i.ino, i.mode)
              FROM fs_data c JOIN fs_inode i ON i.ino = c.ino WHERE (i.mode & 61440) != 32768
              UNION ALL
              SELECT printf('symlink inode %d has no target', i.ino) FROM fs_inode i
              LEFT JOIN fs_symlink s ON s.ino = i.ino WHERE (i.mode & 61440) = 40960 AND s.ino IS NULL
              UNION ALL
              SELECT printf('fs_symlink row %d is not a symlink inode', s.ino) FROM fs_symlink s
              LEFT JOIN fs_inode i ON i.ino = s.ino WHERE i.ino IS NULL OR (i.mode & 61440) != 40960",
    },
    Rule {
        id: "fs.7",
        description: "file size equals the data chunks' total; chunks are contiguous and full but the last",
        sql: "WITH cs AS (SELECT CAST(value AS INTEGER) AS size FROM fs_config WHERE key = 'chunk_size'),
                   agg AS (SELECT ino, SUM(length(data)) AS bytes, COUNT(*) AS n, MAX(chunk_index) AS last
                           FROM fs_data GROUP BY ino)
              SELECT printf('inode %d has size %d but %d bytes of chunks', i.ino, i.size, COALESCE(a.bytes, 0))
              FROM fs_inode i LEFT JOIN agg a ON a.ino = i.ino
              WHERE (i.mode & 61440) = 32768 AND i.size != COALESCE(a.bytes, 0)
              UNION ALL
              SELECT printf('inode %d has chunks 0..%d with %d present', ino, last, n) FROM agg
              WHERE n != last + 1 OR (SELECT MIN(chunk_index) FROM fs_data d WHERE d.ino = agg.ino) != 0
              UNION ALL
              SELECT printf('inode %d chunk %d is %d bytes', d.ino, d.chunk_index, length(d.data))
              FROM fs_data d JOIN agg a ON a.ino = d.ino, cs
              WHERE (d.chunk_index < a.last AND length(d.data) != cs.size)
                 OR (d.chunk_index = a.last AND (length(d.data) > cs.size OR length(d.data) = 0))",
    },
    Rule {
        id: "fs.8",
        description: "every inode but the root has a dentry, and nlink counts its dentries",
        sql: "SELECT printf('inode %d has nlink %d but %d dentries', i.ino, i.nlink, COUNT(d.id))
              FROM fs_inode i LEFT JOIN fs_dentry d ON d.ino = i.ino
              GROUP BY i.ino
              HAVING (i.ino != 1 AND (COUNT(d.id) = 0 OR i.nlink != COUNT(d.id)))
                  OR (i.ino = 1 AND i.nlink != 1)",
    },
    Rule {
        id: "fs.tree",
        description: "every dentry is reachable from the root (no detached cycles)",
        sql: "WITH RECURSIVE reach(ino) AS (SELECT 1 UNION SELECT d.ino FROM fs_dentry d JOIN reach r ON d.parent_ino = r.ino)
              SELECT printf('dentry %d (%s in %d) is unreachable from /', d.id, d.name, d.parent_ino)
              FROM fs_dentry d WHERE d.parent_ino NOT IN (SELECT ino FROM reach)",
    },
    Rule {
        id: "overlay.3",
        description: "whiteout paths are normalized and parent_path is derived from path",
        sql: "SELECT printf('whiteout %s has parent_path %s', quote(path), quote(parent_path)) FROM fs_whiteout
              WHERE path NOT GLOB '/?*' OR path GLOB '*/' OR path GLOB '*//*'
                 OR parent_path != CASE WHEN rtrim(path, replace(path, '/', '')) = '/' THEN '/'
                                        ELSE substr(path, 1, length(rtrim(path, replace(path, '/', ''))) - 1) END",
    },
    Rule {
        id: "overlay.1",
        description: "no whiteout remains at a path the delta layer has an entry for",
        sql: "WITH RECURSIVE paths(ino, path) AS (
                SELECT d.ino, '/' || d.name FROM fs_dentry d WHERE d.parent_ino = 1
                UNION ALL
                SELECT d.ino, p.path || '/' || d.name FROM fs_dentry d JOIN paths p ON d.parent_ino = p.ino
              )
              SELECT printf('whiteout %s hides delta inode %d', quote(w.path), p.ino)
              FROM fs_whiteout w JOIN paths p ON p.path = w.path",
    },
    Rule {
        id: "overlay.5",
        description: "every origin mapping belongs to an existing delta inode",
        sql: "SELECT printf('fs_origin %d -> %d has no delta inode', o.delta_ino, o.base_ino) FROM fs_origin o
              LEFT JOIN fs_inode i ON i.ino = o.delta_ino WHERE i.ino IS NULL",
    },
    Rule {
        id: "kv.2",
        description: "values are valid JSON",
        sql: "SELECT printf('key %s has invalid JSON', quote(key)) FROM kv_store WHERE NOT json_valid(value)",
    },
    Rule {
        id: "kv.3",
        description: "timestamps are Unix epoch integers",
        sql: "SELECT printf('key %s has timestamps %s / %s', quote(key), quote(created_at), quote(updated_at))
              FROM kv_store WHERE typeof(created_at) != 'integer' OR typeof(updated_at) != 'integer'",
    },
    Rule {
        id: "tool_calls.1",
        description: "exactly one of result or error is set",
        sql: "SELECT printf('call %d (%s)', id, name) FROM tool_calls WHERE (result IS NULL) = (error IS NULL)",
    },
    Rule {
        id: "tool_calls.2",
        description: "completed_at is set",
        sql: "SELECT printf('call %d (%s)', id, name) FROM tool_calls WHERE completed_at IS NULL",
    },
    Rule {
        id: "tool_calls.3",
        description: "duration_ms equals (completed_at - started_at) * 1000",
        sql: "SELECT printf('call %d (%s) has duration_ms %s for %d..%d', id, name, quote(duration_ms),
                            started_at, completed_at)
              FROM tool_calls WHERE duration_ms IS NOT (completed_at - started_at) * 1000",
    },
    Rule {
        id: "tool_calls.4",
        description: "parameters and result are valid JSON when present",
        sql: "SELECT printf('call %d (%s)', id, name) FROM tool_calls
              WHERE (parameters IS NOT NULL AND NOT json_valid(parameters))
                 OR (result IS NOT NULL AND NOT json_valid(result))",
    },
    Rule {
        id: "clawos.xattr",
        description: "extended attributes belong to existing inodes",
        sql: "SELECT printf('xattr %s of missing inode %d', quote(x.name), x.ino) FROM clawos_xattr x
              LEFT JOIN fs_inode i ON i.ino = x.ino WHERE i.ino IS NULL",
    },
    Rule {
        id: "clawos.inode_nsec",
        description: "sub-second times belong to existing inodes and lie in 0..1e9",
        sql: "SELECT printf('nanoseconds of inode %d: %s', n.ino,
                            CASE WHEN i.ino IS NULL THEN 'inode missing' ELSE 'out of range' END)
              FROM clawos_inode_nsec n LEFT JOIN fs_inode i ON i.ino = n.ino
              WHERE i.ino IS NULL
                 OR NOT (COALESCE(n.atime_nsec, 0) BETWEEN 0 AND 999999999)
                 OR NOT (COALESCE(n.mtime_nsec, 0) BETWEEN 0 AND 999999999)
                 OR NOT (COALESCE(n.ctime_nsec, 0) BETWEEN 0 AND 999999999)",
    },
    Rule {
        id: "clawos.tool_call_meta",
        description: "timing rows belong to existing calls and agree with their seconds",
        sql: "SELECT printf('meta of call %d: %s', m.call_id,
                            CASE WHEN c.id IS NULL THEN 'call missing' ELSE 'seconds disagree' END)
              FROM clawos_tool_call_meta m LEFT JOIN tool_calls c ON c.id = m.call_id
              WHERE c.id IS NULL OR c.started_at != m.started_at_ms / 1000
                 OR c.completed_at != m.completed_at_ms / 1000",
    },
    Rule {
        id: "clawos.tool_call_key",
        description: "idempotency keys belong to existing calls",
        sql: "SELECT printf('key %s: call %d missing', k.idempotency_key, k.call_id)
              FROM clawos_tool_call_key k LEFT JOIN tool_calls c ON c.id = k.call_id
              WHERE c.id IS NULL",
    },
];

/// Tables a rule needs; a database made by another implementation may lack
/// ClawOS's extension tables, which then have nothing to check.
fn rule_tables(rule: &Rule) -> &'static [&'static str] {
    match rule.id {
        "clawos.xattr" => &["clawos_xattr"],
        "clawos.inode_nsec" => &["clawos_inode_nsec"],
        "clawos.tool_call_meta" => &["clawos_tool_call_meta", "tool_calls"],
        "clawos.tool_call_key" => &["clawos_tool_call_key", "tool_calls"],
        id if id.starts_with("overlay") => &["fs_whiteout", "fs_origin", "fs_dentry"],
        id if id.starts_with("kv") => &["kv_store"],
        id if id.starts_with("tool_calls") => &["tool_calls"],
        _ => &[],
    }
}

/// The tables of the spec that every AgentFS database must have.
const REQUIRED_TABLES: &[&str] = &["fs_config", "fs_inode", "fs_dentry", "fs_data", "fs_symlink"];

/// Checks the database at `path`, opened read-only.
pub fn check_database(path: impl AsRef<Path>) -> Result<Report> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    conn.busy_timeout(crate::db::BUSY_TIMEOUT)?;
    check_connection(&conn)
}

/// Checks the database behind `conn` inside one read transaction, so the
/// report describes a single snapshot.
pub fn check_connection(conn: &Connection) -> Result<Report> {
    conn.execute_batch("BEGIN DEFERRED")?;
    let report = run_rules(conn);
    conn.execute_batch("COMMIT")?;
    report
}

fn run_rules(conn: &Connection) -> Result<Report> {
    let mut report = Report::default();
    let integrity: Vec<String> =
        conn.prepare("PRAGMA integrity_check")?.query_map([], |row| row.get(0))?.collect::<rusqlite::Result<_>>()?;
    for line in integrity.into_iter().filter(|line| line != "ok") {
        report.violations.push(Violation {
            rule: "sqlite.integrity",
            description: "SQLite's integrity_check passes",
            detail: line,
        });
    }
    let mut missing = Vec::new();
    for table in REQUIRED_TABLES {
        if !crate::db::table_exists(conn, table)? {
            missing.push(*table);
            report.violations.push(Violation {
                rule: "schema",
                description: "every table of the spec's filesystem exists",
                detail: format!("table {table} is missing"),
            });
        }
    }
    if !missing.is_empty() {
        return Ok(report);
    }
    for rule in FS_RULES {
        let mut present = true;
        for table in rule_tables(rule) {
            present &= crate::db::table_exists(conn, table)?;
        }
        if !present {
            continue;
        }
        let details: Vec<String> =
            conn.prepare(rule.sql)?.query_map([], |row| row.get(0))?.collect::<rusqlite::Result<_>>()?;
        report.violations.extend(details.into_iter().map(|detail| Violation {
            rule: rule.id,
            description: rule.description,
            detail,
        }));
    }
    if crate::db::table_exists(conn, "tool_calls")? {
        check_chain(conn, &mut report)?;
    }
    Ok(report)
}

const CHAIN_RULE: &str = "tool_calls.5";
const CHAIN_DESCRIPTION: &str = "records are not updated or deleted (ClawOS's hash chain of the calls it recorded)";

/// Recomputes the hash chain over the calls as they are now. Each link is
/// checked against the stored link before it, so one changed call is
/// reported once, not with every call after it. Removing the newest calls
/// together with their links leaves a shorter chain that verifies: that
/// the chain cannot show (specs/agentfs/README.md, "The audit trail").
fn check_chain(conn: &Connection, report: &mut Report) -> Result<()> {
    if !crate::db::table_exists(conn, "clawos_tool_call_chain")? {
        report.not_hardened.push(
            "no hash chain of the tool calls (clawos_tool_call_chain): the workspace was made by another \
             implementation and not opened by ClawOS since"
                .to_owned(),
        );
        return Ok(());
    }
    let (meta, key) = (
        crate::db::table_exists(conn, "clawos_tool_call_meta")?,
        crate::db::table_exists(conn, "clawos_tool_call_key")?,
    );
    if !(meta && key) {
        report.violations.push(Violation {
            rule: CHAIN_RULE,
            description: CHAIN_DESCRIPTION,
            detail: "the hash chain is there but clawos_tool_call_meta or clawos_tool_call_key is gone".to_owned(),
        });
        return Ok(());
    }
    let mut stmt = conn.prepare(
        "SELECT ch.call_id, ch.hash, c.id, c.name, c.parameters, c.result, c.error, c.started_at,
                c.completed_at, c.duration_ms, m.session_id, m.parent_call_id, m.started_at_ms,
                m.completed_at_ms, k.idempotency_key
         FROM clawos_tool_call_chain ch
         LEFT JOIN tool_calls c ON c.id = ch.call_id
         LEFT JOIN clawos_tool_call_meta m ON m.call_id = ch.call_id
         LEFT JOIN clawos_tool_call_key k ON k.call_id = ch.call_id
         ORDER BY ch.call_id",
    )?;
    let mut rows = stmt.query([])?;
    let mut previous = crate::tool_calls::CHAIN_START.to_vec();
    while let Some(row) = rows.next()? {
        let call_id: i64 = row.get(0)?;
        let stored: Vec<u8> = row.get(1)?;
        let detail = if row.get::<_, Option<i64>>(2)?.is_none() {
            Some(format!("call {call_id} was deleted"))
        } else {
            let (name, parameters, result, error): (String, Option<String>, Option<String>, Option<String>) =
                (row.get(3)?, row.get(4)?, row.get(5)?, row.get(6)?);
            let (session_id, idempotency_key): (Option<String>, Option<String>) = (row.get(10)?, row.get(14)?);
            let call = crate::tool_calls::ChainedCall {
                id: call_id,
                name: &name,
                parameters: parameters.as_deref(),
                result: result.as_deref(),
                error: error.as_deref(),
                started_at: row.get(7)?,
                completed_at: row.get(8)?,
                duration_ms: row.get(9)?,
                session_id: session_id.as_deref(),
                parent_call_id: row.get(11)?,
                started_at_ms: row.get(12)?,
                completed_at_ms: row.get(13)?,
                idempotency_key: idempotency_key.as_deref(),
            };
            (call.hash(&previous) != stored.as_slice()).then(|| {
                format!("call {call_id} ({name}) does not match its hash: changed after it was recorded, or a call before it removed")
            })
        };
        if let Some(detail) = detail {
            report.violations.push(Violation { rule: CHAIN_RULE, description: CHAIN_DESCRIPTION, detail });
        }
        previous = stored;
    }
    let outside: Vec<i64> = conn
        .prepare("SELECT id FROM tool_calls WHERE id NOT IN (SELECT call_id FROM clawos_tool_call_chain) ORDER BY id")?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if !outside.is_empty() {
        let ids: Vec<String> = outside.iter().take(20).map(i64::to_string).collect();
        let more = if outside.len() > ids.len() { ", ..." } else { "" };
        report.not_hardened.push(format!(
            "{} tool call(s) outside the hash chain (recorded by another implementation, or before ClawOS kept one): ids {}{more}",
            outside.len(),
            ids.join(", ")
        ));
    }
    Ok(())
}

impl crate::AgentFs {
    /// Runs the checker on this workspace's own connection.
    pub fn check(&self) -> Result<Report> {
        check_connection(self.connection())
    }
}

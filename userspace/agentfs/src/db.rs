//! Row-level operations on one AgentFS database, shared by the workspace, the
//! base layer and the checker. Callers own the transaction; nothing here
//! begins or commits one.

use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};
use crate::types::{Stat, Timestamp};

/// The schema of the spec plus ClawOS's extension tables, idempotent
/// (specs/agentfs/schema.sql, run as the spec writes it).
pub const SCHEMA_SQL: &str = include_str!("../../../specs/agentfs/schema.sql");
/// TEMP triggers that make the audit trail insert-only and validate each
/// insert, on the connection that runs them (specs/agentfs/audit_triggers.sql).
pub const AUDIT_TRIGGERS_SQL: &str = include_str!("../../../specs/agentfs/audit_triggers.sql");

/// The triggers ClawOS stored in the workspaces it created before the
/// guards became TEMP triggers. The reference SDK's engine refuses to open
/// a database holding any trigger, so opening a workspace drops them.
const STORED_TRIGGERS: &[&str] = &[
    "tool_calls_validate_insert",
    "tool_calls_reject_update",
    "tool_calls_reject_delete",
    "clawos_tool_call_meta_reject_update",
    "clawos_tool_call_meta_reject_delete",
    "clawos_tool_call_key_reject_update",
    "clawos_tool_call_key_reject_delete",
];

/// How long a connection waits for another process's write lock before the
/// operation fails with [`Error::Busy`]; SQLite retries within this bound.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connection pragmas (specs/agentfs/README.md, "Connection settings"). WAL
/// with `synchronous = NORMAL` survives a killed process with every committed
/// transaction; a power cut may lose the last few commits but never
/// consistency. The write-ahead log is cut back to 64 MiB after a
/// checkpoint, or one large write (a `VACUUM`) would leave it at its size.
const PRAGMAS_SQL: &str = "
PRAGMA journal_mode = WAL;
PRAGMA cache_size = -64000;
PRAGMA mmap_size = 268435456;
PRAGMA synchronous = NORMAL;
PRAGMA temp_store = MEMORY;
PRAGMA journal_size_limit = 67108864;
";

/// How many times [`retry_cantopen`] tries an open.
const CANTOPEN_ATTEMPTS: u32 = 5;

/// Runs `open` (an open of a database other processes share, with its first
/// statements) again when SQLite answers SQLITE_CANTOPEN, up to five times,
/// 20, 40, 60 and 80 ms apart.
///
/// When no process holds an agent database open, the next one to open it
/// makes its `-wal` and `-shm` files. SQLite creates them under the process's
/// umask (0077 in every ClawOS unit, so 0600) and widens them to the
/// database's mode (0660) with fchmod straight after; another component
/// opening them in between is refused (EACCES), which SQLite reports as
/// SQLITE_CANTOPEN, "unable to open database file". In the booted image
/// agent-loop and wasm-daemon opening a new agent's database at the same
/// moment hit it (tests/vm/checks/58-agents.guest.sh); a moment later the file has
/// its mode.
pub fn retry_cantopen<T>(mut open: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let mut attempt = 1;
    loop {
        match open() {
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.code == rusqlite::ErrorCode::CannotOpen && attempt < CANTOPEN_ATTEMPTS =>
            {
                std::thread::sleep(Duration::from_millis(20 * u64::from(attempt)));
                attempt += 1;
            }
            result => return result,
        }
    }
}

/// Opens the AgentFS database at `path`, shared with other processes: the
/// busy timeout and the pragmas applied, retried while another process makes
/// its `-wal` and `-shm` files ([`retry_cantopen`]). `page_size` only takes
/// effect on a database with no page written yet.
pub(crate) fn open_shared(path: &std::path::Path, page_size: Option<u32>) -> rusqlite::Result<Connection> {
    retry_cantopen(|| {
        let conn = Connection::open(path)?;
        if let Some(page_size) = page_size {
            conn.pragma_update(None, "page_size", page_size)?;
        }
        apply_pragmas(&conn)?;
        Ok(conn)
    })
}

fn apply_pragmas(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute_batch(PRAGMAS_SQL)
}

/// Applies the busy timeout and the pragmas to a connection and, once the
/// workspace has its tables, the audit trail's guards. Other crates that
/// open an AgentFS database (ClawFS keeps its search tables in the same
/// file, agent-loop its sessions) call this so every connection runs with
/// the same settings and none can rewrite a recorded tool call.
pub fn configure_connection(conn: &Connection) -> Result<()> {
    apply_pragmas(conn)?;
    guard_audit_trail(conn)
}

/// Installs the audit trail's guards ([`AUDIT_TRIGGERS_SQL`]) on `conn`,
/// for a connection with settings of its own (agent-loop's sessions). The
/// guards name ClawOS's extension tables: on a database not yet
/// initialized this does nothing, and the `AgentFs::open` that initializes
/// it installs them on its own connection.
pub fn guard_audit_trail(conn: &Connection) -> Result<()> {
    if table_exists(conn, "clawos_tool_call_chain")? {
        conn.execute_batch(AUDIT_TRIGGERS_SQL)?;
    }
    Ok(())
}

/// Creates the schema and, on a database without `fs_config`, the initial
/// rows of the spec's Initialization section. Returns the chunk size.
pub(crate) fn init(conn: &mut Connection, chunk_size: u64) -> Result<u64> {
    if chunk_size == 0 || chunk_size > i64::MAX as u64 {
        return Err(Error::invalid("chunk_size must be positive"));
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA_SQL)?;
    for name in STORED_TRIGGERS {
        tx.execute_batch(&format!("DROP TRIGGER IF EXISTS main.{name}"))?;
    }
    tx.execute("INSERT OR IGNORE INTO fs_config (key, value) VALUES ('chunk_size', ?)", [chunk_size.to_string()])?;
    // The reference SDK records the spec version it follows under this key
    // and rewrites it on every open; matching it keeps both views equal.
    tx.execute("INSERT OR IGNORE INTO fs_config (key, value) VALUES ('schema_version', '0.4')", [])?;
    tx.execute(
        "INSERT OR IGNORE INTO fs_inode (ino, mode, nlink, uid, gid, size, atime, mtime, ctime)
         VALUES (1, 16877, 1, 0, 0, 0, unixepoch(), unixepoch(), unixepoch())",
        [],
    )?;
    let chunk_size = read_chunk_size(&tx)?;
    tx.commit()?;
    Ok(chunk_size)
}

/// Rebuilds `table` from `create_sql` (its `CREATE TABLE IF NOT EXISTS`
/// statement, same columns in the same order), keeping its rows, when its
/// stored definition contains `stale`; returns whether it did. For the
/// definitions the reference SDK's engine refuses (a column `CHECK`), which
/// ALTER TABLE cannot change. Runs in a savepoint: all or nothing.
pub fn rebuild_table_if(conn: &Connection, table: &str, stale: &str, create_sql: &str) -> Result<bool> {
    let stored: Option<String> = conn
        .query_row("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [table], |row| row.get(0))
        .optional()?;
    if !stored.is_some_and(|sql| sql.contains(stale)) {
        return Ok(false);
    }
    conn.execute_batch(&format!(
        "SAVEPOINT clawos_rebuild;
         ALTER TABLE {table} RENAME TO {table}__old;
         {create_sql};
         INSERT INTO {table} SELECT * FROM {table}__old;
         DROP TABLE {table}__old;
         RELEASE clawos_rebuild;"
    ))
    .inspect_err(|_| {
        let _ = conn.execute_batch("ROLLBACK TO clawos_rebuild; RELEASE clawos_rebuild;");
    })?;
    Ok(true)
}

pub(crate) fn table_exists(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [name], |_| Ok(()))
        .optional()?
        .is_some())
}

pub(crate) fn read_chunk_size(conn: &Connection) -> Result<u64> {
    let value: String = conn
        .query_row("SELECT value FROM fs_config WHERE key = 'chunk_size'", [], |row| row.get(0))
        .optional()?
        .ok_or_else(|| Error::corrupt("fs_config has no chunk_size"))?;
    match value.parse::<u64>() {
        Ok(size) if size > 0 => Ok(size),
        _ => Err(Error::corrupt(format!("chunk_size {value:?} is not a positive integer"))),
    }
}

/// The nanoseconds of each time, from `clawos_inode_nsec` aliased `n`,
/// where they still belong to the seconds in `fs_inode` (aliased `i`): a
/// time rewritten by another AgentFS implementation reads as whole seconds,
/// and so does a value out of range (which the checker reports).
macro_rules! nsec_columns {
    () => {
        "CASE WHEN n.atime = i.atime AND n.atime_nsec BETWEEN 0 AND 999999999 THEN n.atime_nsec ELSE 0 END,
         CASE WHEN n.mtime = i.mtime AND n.mtime_nsec BETWEEN 0 AND 999999999 THEN n.mtime_nsec ELSE 0 END,
         CASE WHEN n.ctime = i.ctime AND n.ctime_nsec BETWEEN 0 AND 999999999 THEN n.ctime_nsec ELSE 0 END"
    };
}

fn stat_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Stat> {
    // Columns 10-12, the nanoseconds, are absent for a database without
    // ClawOS's extension tables.
    let time = |secs: usize| -> rusqlite::Result<Timestamp> {
        let nsec = if row.as_ref().column_count() > secs + 4 { row.get(secs + 4)? } else { 0 };
        Ok(Timestamp { secs: row.get(secs)?, nsec })
    };
    Ok(Stat {
        ino: row.get(0)?,
        mode: row.get(1)?,
        nlink: row.get(2)?,
        uid: row.get(3)?,
        gid: row.get(4)?,
        size: row.get(5)?,
        atime: time(6)?,
        mtime: time(7)?,
        ctime: time(8)?,
        rdev: row.get(9)?,
    })
}

/// The raw `fs_inode` row of `ino` (no origin translation), with the
/// nanoseconds when the database has ClawOS's `clawos_inode_nsec` (a base
/// layer written by another implementation may not).
pub(crate) fn inode_stat(conn: &Connection, ino: i64, with_nsec: bool) -> Result<Stat> {
    let sql = if with_nsec {
        concat!(
            "SELECT i.ino, i.mode, i.nlink, i.uid, i.gid, i.size, i.atime, i.mtime, i.ctime, i.rdev, ",
            nsec_columns!(),
            " FROM fs_inode i LEFT JOIN clawos_inode_nsec n ON n.ino = i.ino WHERE i.ino = ?"
        )
    } else {
        "SELECT ino, mode, nlink, uid, gid, size, atime, mtime, ctime, rdev FROM fs_inode WHERE ino = ?"
    };
    conn.prepare_cached(sql)?
        .query_row([ino], stat_from_row)
        .optional()?
        .ok_or_else(|| Error::corrupt(format!("dentry points at missing inode {ino}")))
}

/// Stat as callers see it: the `fs_inode` row with `ino` replaced by the
/// base inode it was copied up from, if any (overlay consistency rule 6),
/// in one query.
pub(crate) fn node_stat(conn: &Connection, ino: i64) -> Result<Stat> {
    const SQL: &str = concat!(
        "SELECT COALESCE(o.base_ino, i.ino), i.mode, i.nlink, i.uid, i.gid, i.size,
                i.atime, i.mtime, i.ctime, i.rdev, ",
        nsec_columns!(),
        " FROM fs_inode i LEFT JOIN fs_origin o ON o.delta_ino = i.ino
           LEFT JOIN clawos_inode_nsec n ON n.ino = i.ino WHERE i.ino = ?"
    );
    conn.prepare_cached(SQL)?
        .query_row([ino], stat_from_row)
        .optional()?
        .ok_or_else(|| Error::corrupt(format!("dentry points at missing inode {ino}")))
}

/// Times an operation sets on an inode; `None` leaves one alone.
#[derive(Default)]
pub(crate) struct Times {
    pub atime: Option<Timestamp>,
    pub mtime: Option<Timestamp>,
    pub ctime: Option<Timestamp>,
}

impl Times {
    /// mtime and ctime: the content or the entries changed.
    pub(crate) fn modified(now: Timestamp) -> Times {
        Times { atime: None, mtime: Some(now), ctime: Some(now) }
    }

    /// ctime alone: the inode's metadata changed.
    pub(crate) fn changed(now: Timestamp) -> Times {
        Times { atime: None, mtime: None, ctime: Some(now) }
    }
}

/// Sets `times` of `ino`: the seconds in `fs_inode`, the nanoseconds in
/// `clawos_inode_nsec` next to the seconds they belong to.
pub(crate) fn set_times(conn: &Connection, ino: i64, times: &Times) -> Result<()> {
    let secs = |time: Option<Timestamp>| time.map(|time| time.secs);
    conn.prepare_cached(
        "UPDATE fs_inode SET atime = COALESCE(?2, atime), mtime = COALESCE(?3, mtime), ctime = COALESCE(?4, ctime)
         WHERE ino = ?1",
    )?
    .execute(params![ino, secs(times.atime), secs(times.mtime), secs(times.ctime)])?;
    record_nsec(conn, ino, times)
}

/// The `clawos_inode_nsec` half of [`set_times`], for statements that
/// write the seconds themselves along with other columns.
fn record_nsec(conn: &Connection, ino: i64, times: &Times) -> Result<()> {
    let secs = |time: Option<Timestamp>| time.map(|time| time.secs);
    let nsec = |time: Option<Timestamp>| time.map(|time| time.nsec);
    conn.prepare_cached(
        "INSERT INTO clawos_inode_nsec (ino, atime, atime_nsec, mtime, mtime_nsec, ctime, ctime_nsec)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT(ino) DO UPDATE SET
           atime = COALESCE(excluded.atime, atime), atime_nsec = COALESCE(excluded.atime_nsec, atime_nsec),
           mtime = COALESCE(excluded.mtime, mtime), mtime_nsec = COALESCE(excluded.mtime_nsec, mtime_nsec),
           ctime = COALESCE(excluded.ctime, ctime), ctime_nsec = COALESCE(excluded.ctime_nsec, ctime_nsec)",
    )?
    .execute(params![
        ino,
        secs(times.atime),
        nsec(times.atime),
        secs(times.mtime),
        nsec(times.mtime),
        secs(times.ctime),
        nsec(times.ctime)
    ])?;
    Ok(())
}

/// The inode and mode a name in `parent` points at, in one query, so that
/// walking a path costs one statement per component.
pub(crate) fn lookup_child_mode(conn: &Connection, parent: i64, name: &str) -> Result<Option<(i64, u32)>> {
    let found: Option<(i64, Option<u32>)> = conn
        .prepare_cached(
            "SELECT d.ino, i.mode FROM fs_dentry d LEFT JOIN fs_inode i ON i.ino = d.ino
             WHERE d.parent_ino = ? AND d.name = ?",
        )?
        .query_row(params![parent, name], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    match found {
        None => Ok(None),
        Some((ino, Some(mode))) => Ok(Some((ino, mode))),
        Some((ino, None)) => Err(Error::corrupt(format!("dentry {name:?} points at missing inode {ino}"))),
    }
}

pub(crate) fn lookup_child(conn: &Connection, parent: i64, name: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT ino FROM fs_dentry WHERE parent_ino = ? AND name = ?")?
        .query_row(params![parent, name], |row| row.get(0))
        .optional()?)
}

pub(crate) fn children(conn: &Connection, parent: i64) -> Result<Vec<(String, i64)>> {
    let mut stmt = conn.prepare_cached("SELECT name, ino FROM fs_dentry WHERE parent_ino = ? ORDER BY name ASC")?;
    let rows = stmt.query_map([parent], |row| Ok((row.get(0)?, row.get(1)?)))?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Metadata of a new inode; `nlink` starts at 0 and counts dentries added later.
pub(crate) struct NewInode {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
}

pub(crate) fn create_inode(conn: &Connection, inode: &NewInode) -> Result<i64> {
    let ino = conn
        .prepare_cached(
            "INSERT INTO fs_inode (mode, uid, gid, size, atime, mtime, ctime, rdev)
             VALUES (?, ?, ?, 0, ?, ?, ?, ?) RETURNING ino",
        )?
        .query_row(
            params![inode.mode, inode.uid, inode.gid, inode.atime.secs, inode.mtime.secs, inode.ctime.secs, inode.rdev],
            |row| row.get(0),
        )?;
    // All three times set: this replaces any row a foreign writer left behind.
    record_nsec(conn, ino, &Times { atime: Some(inode.atime), mtime: Some(inode.mtime), ctime: Some(inode.ctime) })?;
    Ok(ino)
}

/// Inserts a dentry and counts the link (spec: Creating a File, steps 4-5).
pub(crate) fn add_dentry(conn: &Connection, parent: i64, name: &str, ino: i64) -> Result<()> {
    conn.prepare_cached("INSERT INTO fs_dentry (name, parent_ino, ino) VALUES (?, ?, ?)")?
        .execute(params![name, parent, ino])?;
    conn.prepare_cached("UPDATE fs_inode SET nlink = nlink + 1 WHERE ino = ?")?.execute([ino])?;
    Ok(())
}

/// Removes a dentry, uncounts the link and frees the inode with everything
/// hanging off it when it was the last one (spec: Deleting a File).
pub(crate) fn remove_dentry(conn: &Connection, parent: i64, name: &str, ino: i64) -> Result<()> {
    conn.prepare_cached("DELETE FROM fs_dentry WHERE parent_ino = ? AND name = ?")?.execute(params![parent, name])?;
    let now = Timestamp::now();
    let nlink: i64 = conn
        .prepare_cached("UPDATE fs_inode SET nlink = nlink - 1, ctime = ? WHERE ino = ? RETURNING nlink")?
        .query_row(params![now.secs, ino], |row| row.get(0))?;
    if nlink > 0 {
        record_nsec(conn, ino, &Times::changed(now))?;
    } else {
        for sql in [
            "DELETE FROM fs_inode WHERE ino = ?",
            "DELETE FROM fs_data WHERE ino = ?",
            "DELETE FROM fs_symlink WHERE ino = ?",
            "DELETE FROM fs_origin WHERE delta_ino = ?",
            "DELETE FROM clawos_xattr WHERE ino = ?",
            "DELETE FROM clawos_inode_nsec WHERE ino = ?",
        ] {
            conn.prepare_cached(sql)?.execute([ino])?;
        }
    }
    Ok(())
}

pub(crate) fn symlink_target(conn: &Connection, ino: i64) -> Result<String> {
    conn.prepare_cached("SELECT target FROM fs_symlink WHERE ino = ?")?
        .query_row([ino], |row| row.get(0))
        .optional()?
        .ok_or_else(|| Error::corrupt(format!("symlink inode {ino} has no fs_symlink row")))
}

/// Reads `[offset, offset + len)` clipped to the file size, fetching only the
/// chunks that range touches (spec: Reading a File at Offset).
pub(crate) fn read_chunks(conn: &Connection, chunk_size: u64, ino: i64, offset: u64, len: u64) -> Result<Vec<u8>> {
    let size: u64 =
        conn.prepare_cached("SELECT size FROM fs_inode WHERE ino = ?")?.query_row([ino], |row| row.get(0))?;
    if offset >= size || len == 0 {
        return Ok(Vec::new());
    }
    let end = size.min(offset.saturating_add(len));
    let first = offset / chunk_size;
    let last = (end - 1) / chunk_size;
    let mut out = Vec::with_capacity((end - offset) as usize);
    let mut stmt = conn.prepare_cached(
        "SELECT chunk_index, data FROM fs_data
         WHERE ino = ? AND chunk_index >= ? AND chunk_index <= ? ORDER BY chunk_index ASC",
    )?;
    let mut rows = stmt.query(params![ino, first, last])?;
    let mut expected = first;
    while let Some(row) = rows.next()? {
        let index: u64 = row.get(0)?;
        let data =
            row.get_ref(1)?.as_blob().map_err(|err| Error::corrupt(format!("inode {ino} chunk {index}: {err}")))?;
        if index != expected {
            return Err(Error::corrupt(format!("inode {ino} is missing chunk {expected}")));
        }
        let chunk_start = index * chunk_size;
        let from = offset.saturating_sub(chunk_start) as usize;
        let to = ((end - chunk_start) as usize).min(data.len());
        if from < to {
            out.extend_from_slice(&data[from..to]);
        }
        expected += 1;
    }
    if out.len() as u64 != end - offset {
        return Err(Error::corrupt(format!("inode {ino} has fewer bytes than its size")));
    }
    Ok(out)
}

fn chunk(conn: &Connection, ino: i64, index: u64) -> Result<Vec<u8>> {
    Ok(conn
        .prepare_cached("SELECT data FROM fs_data WHERE ino = ? AND chunk_index = ?")?
        .query_row(params![ino, index], |row| row.get(0))
        .optional()?
        .unwrap_or_default())
}

fn put_chunk(conn: &Connection, ino: i64, index: u64, data: &[u8]) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO fs_data (ino, chunk_index, data) VALUES (?, ?, ?)")?
        .execute(params![ino, index, data])?;
    Ok(())
}

fn set_size(conn: &Connection, ino: i64, size: u64) -> Result<()> {
    let now = Timestamp::now();
    conn.prepare_cached("UPDATE fs_inode SET size = ?, mtime = ?, ctime = ? WHERE ino = ?")?
        .execute(params![size, now.secs, now.secs, ino])?;
    record_nsec(conn, ino, &Times::modified(now))
}

/// The largest file size a workspace may allow (EFBIG past it). AgentFS
/// stores every chunk up to the end (all but the last are exactly
/// `chunk_size` bytes, so the spec leaves no room for holes): a `truncate`
/// to a petabyte would try to write a petabyte of zeros.
pub const MAX_FILE_SIZE: u64 = 64 << 30;

/// A workspace's file size limit when it sets none: a write or truncate
/// past it fails with EFBIG instead of writing zeros into /clawfs until the
/// disk is full (one byte written at 2 GiB stores 2 GiB). 1 GiB is far past
/// any note, transcript or tool output an agent keeps; a workspace that
/// needs more raises it ([`crate::AgentFs::set_file_size_limit`]).
pub const DEFAULT_FILE_SIZE_LIMIT: u64 = 1 << 30;

/// The `fs_config` key of a workspace's file size limit (the spec allows
/// keys of an implementation's own).
const FILE_SIZE_LIMIT_KEY: &str = "clawos_file_size_limit";

/// The file size limit of the workspace behind `conn`.
pub(crate) fn read_file_size_limit(conn: &Connection) -> Result<u64> {
    let value: Option<String> = conn
        .query_row("SELECT value FROM fs_config WHERE key = ?", [FILE_SIZE_LIMIT_KEY], |row| row.get(0))
        .optional()?;
    match value {
        None => Ok(DEFAULT_FILE_SIZE_LIMIT),
        Some(text) => match text.parse::<u64>() {
            Ok(limit) if limit <= MAX_FILE_SIZE => Ok(limit),
            _ => Err(Error::corrupt(format!("{FILE_SIZE_LIMIT_KEY} {text:?} is not a size up to {MAX_FILE_SIZE}"))),
        },
    }
}

pub(crate) fn write_file_size_limit(conn: &Connection, limit: u64) -> Result<()> {
    if limit > MAX_FILE_SIZE {
        return Err(Error::invalid(format!("a file size limit is at most {MAX_FILE_SIZE} bytes")));
    }
    conn.execute(
        "INSERT INTO fs_config (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![FILE_SIZE_LIMIT_KEY, limit.to_string()],
    )?;
    Ok(())
}

/// Writes `data` at `offset`, zero-filling any gap after the old end, and
/// rewrites only the chunks the write (or gap) touches; EFBIG past `limit`.
pub(crate) fn write_chunks(
    conn: &Connection,
    chunk_size: u64,
    limit: u64,
    ino: i64,
    offset: u64,
    data: &[u8],
) -> Result<u64> {
    let size: u64 =
        conn.prepare_cached("SELECT size FROM fs_inode WHERE ino = ?")?.query_row([ino], |row| row.get(0))?;
    if data.is_empty() {
        return Ok(size);
    }
    let end = offset.checked_add(data.len() as u64).filter(|end| *end <= limit).ok_or(Error::FileTooLarge { limit })?;
    let new_size = size.max(end);
    let start = offset.min(size);
    for index in start / chunk_size..=(end - 1) / chunk_size {
        let chunk_start = index * chunk_size;
        let chunk_len = chunk_size.min(new_size - chunk_start) as usize;
        let write_from = offset.max(chunk_start);
        let write_to = end.min(chunk_start + chunk_len as u64);
        let covers_whole_chunk = write_from == chunk_start && write_to - chunk_start == chunk_len as u64;
        let mut buf = if covers_whole_chunk { Vec::with_capacity(chunk_len) } else { chunk(conn, ino, index)? };
        buf.resize(chunk_len, 0);
        if write_from < write_to {
            let src = &data[(write_from - offset) as usize..(write_to - offset) as usize];
            buf[(write_from - chunk_start) as usize..(write_to - chunk_start) as usize].copy_from_slice(src);
        }
        put_chunk(conn, ino, index, &buf)?;
    }
    set_size(conn, ino, new_size)?;
    Ok(new_size)
}

/// Replaces the whole content of `ino` (spec: Creating a File, steps 6-7);
/// EFBIG past `limit`.
pub(crate) fn replace_content(conn: &Connection, chunk_size: u64, limit: u64, ino: i64, data: &[u8]) -> Result<()> {
    if data.len() as u64 > limit {
        return Err(Error::FileTooLarge { limit });
    }
    conn.prepare_cached("DELETE FROM fs_data WHERE ino = ?")?.execute([ino])?;
    for (index, piece) in data.chunks(chunk_size as usize).enumerate() {
        put_chunk(conn, ino, index as u64, piece)?;
    }
    set_size(conn, ino, data.len() as u64)
}

/// Sets the size of `ino`, dropping chunks past the end or zero-filling up
/// to it; EFBIG past `limit`.
pub(crate) fn truncate(conn: &Connection, chunk_size: u64, limit: u64, ino: i64, new_size: u64) -> Result<()> {
    if new_size > limit {
        return Err(Error::FileTooLarge { limit });
    }
    let size: u64 =
        conn.prepare_cached("SELECT size FROM fs_inode WHERE ino = ?")?.query_row([ino], |row| row.get(0))?;
    if new_size < size {
        let keep_chunks = new_size.div_ceil(chunk_size);
        conn.prepare_cached("DELETE FROM fs_data WHERE ino = ? AND chunk_index >= ?")?
            .execute(params![ino, keep_chunks])?;
        if !new_size.is_multiple_of(chunk_size) {
            let index = keep_chunks - 1;
            let mut buf = chunk(conn, ino, index)?;
            buf.truncate((new_size - index * chunk_size) as usize);
            put_chunk(conn, ino, index, &buf)?;
        }
    } else {
        let first = size / chunk_size;
        let last = if new_size == 0 { 0 } else { (new_size - 1) / chunk_size };
        for index in first..=last.max(first) {
            let chunk_start = index * chunk_size;
            if chunk_start >= new_size {
                break;
            }
            let mut buf = chunk(conn, ino, index)?;
            buf.resize(chunk_size.min(new_size - chunk_start) as usize, 0);
            put_chunk(conn, ino, index, &buf)?;
        }
    }
    set_size(conn, ino, new_size)
}

pub(crate) fn xattr_list(conn: &Connection, ino: i64) -> Result<Vec<(String, Vec<u8>)>> {
    let mut stmt = conn.prepare_cached("SELECT name, value FROM clawos_xattr WHERE ino = ? ORDER BY name")?;
    let rows = stmt.query_map([ino], |row| Ok((row.get(0)?, row.get(1)?)))?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

pub(crate) fn xattr_set(conn: &Connection, ino: i64, name: &str, value: &[u8]) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO clawos_xattr (ino, name, value) VALUES (?, ?, ?)")?
        .execute(params![ino, name, value])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cantopen() -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN), None)
    }

    #[test]
    fn an_open_refused_while_another_process_makes_the_wal_is_tried_again() {
        let mut calls = 0;
        let result = retry_cantopen(|| {
            calls += 1;
            if calls < 3 {
                Err(cantopen())
            } else {
                Ok(calls)
            }
        });
        assert_eq!(result.unwrap(), 3);
    }

    #[test]
    fn an_open_that_stays_refused_fails_after_the_last_attempt() {
        let mut calls = 0;
        let result: rusqlite::Result<()> = retry_cantopen(|| {
            calls += 1;
            Err(cantopen())
        });
        assert!(
            matches!(result, Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::CannotOpen)
        );
        assert_eq!(calls, CANTOPEN_ATTEMPTS);
    }

    #[test]
    fn other_errors_are_not_tried_again() {
        let mut calls = 0;
        let result: rusqlite::Result<()> = retry_cantopen(|| {
            calls += 1;
            Err(rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY), None))
        });
        assert!(result.is_err());
        assert_eq!(calls, 1);
    }
}

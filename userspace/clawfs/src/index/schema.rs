//! The search database of a workspace (specs/clawfs/README.md, "Memory
//! search"): `search.db` beside `workspace.db`, with its tables, the
//! pragmas its connection runs with, and the one migration it has had.
//!
//! Owns: the SQL schema (`clawfs_chunks`, its FTS5 table and triggers,
//! `clawfs_vectors`, `clawfs_vector_state`), opening the database (page
//! size, AgentFS's connection settings, the memory map), moving an index an
//! older ClawFS kept inside `workspace.db` out of it, the vector state row,
//! and how a vector is stored (little-endian float32) and checksummed.
//! Must not own: what goes into the tables (`write`), what is read out of
//! them for a query (`query`), or the HNSW file (`hnsw`).

use std::path::Path;

use rusqlite::{params, Connection, Transaction};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::layout::{DATABASE_FILE, SEARCH_FILE};

/// FTS5's record of each chunk's length in tokens, which [`crate::bm25`]
/// caches.
pub(super) const FTS_DOCSIZE_TABLE: &str = "clawfs_chunks_fts_docsize";

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS clawfs_chunks (
    key      INTEGER PRIMARY KEY,   -- the HNSW key
    chunk_id TEXT NOT NULL UNIQUE,
    path     TEXT NOT NULL,
    heading  TEXT NOT NULL,
    ordinal  INTEGER NOT NULL,
    content  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS clawfs_chunks_by_path ON clawfs_chunks(path);
CREATE VIRTUAL TABLE IF NOT EXISTS clawfs_chunks_fts USING fts5(
    content, heading, path,
    content = 'clawfs_chunks', content_rowid = 'key',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS clawfs_chunks_fts_insert AFTER INSERT ON clawfs_chunks BEGIN
    INSERT INTO clawfs_chunks_fts(rowid, content, heading, path) VALUES (new.key, new.content, new.heading, new.path);
END;
CREATE TRIGGER IF NOT EXISTS clawfs_chunks_fts_delete AFTER DELETE ON clawfs_chunks BEGIN
    INSERT INTO clawfs_chunks_fts(clawfs_chunks_fts, rowid, content, heading, path)
        VALUES ('delete', old.key, old.content, old.heading, old.path);
END;
CREATE TABLE IF NOT EXISTS clawfs_vectors (
    key       INTEGER PRIMARY KEY REFERENCES clawfs_chunks(key) ON DELETE CASCADE,
    embedding BLOB NOT NULL          -- little-endian float32 x dimension
);
CREATE TABLE IF NOT EXISTS clawfs_vector_state (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    count     INTEGER NOT NULL,
    checksum  INTEGER NOT NULL,
    dimension INTEGER,
    model_id  TEXT
);
INSERT OR IGNORE INTO clawfs_vector_state(id, count, checksum) VALUES (1, 0, 0);
";

/// What the database says about its vectors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct VectorState {
    pub(super) count: u64,
    pub(super) checksum: i64,
    pub(super) dimension: Option<usize>,
    pub(super) model_id: Option<String>,
}

pub(super) fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |source| Error::Sqlite { path: path.to_owned(), source }
}

pub(super) fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(super) fn bytes_vector(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// This vector's share of the checksum; XOR makes the sum independent of
/// order and lets a removal take its share out again.
pub(super) fn vector_hash(key: u64, embedding: &[u8]) -> i64 {
    let digest = Sha256::new().chain_update(key.to_le_bytes()).chain_update(embedding).finalize();
    i64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// Page size of the search database (and of workspace databases ClawFS
/// creates). A 1536-dimension float32 vector is
/// 6 KiB: on SQLite's default 4 KiB pages each one fills a leaf page of its
/// own plus an overflow page (8 KiB); 32 KiB pages hold five (6.6 KiB each).
const PAGE_SIZE: u32 = 32768;

/// Bytes of a workspace database its search connection maps into memory.
const MMAP_SIZE: u64 = 1 << 30;

/// Opens the AgentFS database of a workspace, creating it (with
/// [`PAGE_SIZE`] pages) if it does not exist.
pub(crate) fn open_agentfs(path: &Path) -> Result<agentfs::AgentFs> {
    let options = agentfs::OpenOptions { page_size: Some(PAGE_SIZE), ..Default::default() };
    agentfs::AgentFs::open_with(path, &options).map_err(|source| Error::AgentFs { path: path.to_owned(), source })
}

/// Opens the search database of the workspace in `dir`, moving an index an
/// older ClawFS kept inside the workspace database into it. The workspace
/// database must exist: only the one creating a workspace or an agent makes
/// it, with its mode (`namespace::create_agent`), never an index opened on a
/// directory still being made.
pub(super) fn open_connection(dir: &Path) -> Result<Connection> {
    let workspace = dir.join(DATABASE_FILE);
    if !workspace.is_file() {
        return Err(Error::Io { operation: "open", path: workspace, source: std::io::ErrorKind::NotFound.into() });
    }
    open_agentfs(&workspace)?;
    let path = dir.join(SEARCH_FILE);
    let connection = Connection::open(&path).map_err(sqlite(&path))?;
    // Only takes effect before the first page is written (WAL mode fixes it).
    connection.pragma_update(None, "page_size", PAGE_SIZE).map_err(sqlite(&path))?;
    agentfs::configure_connection(&connection).map_err(|source| Error::AgentFs { path: path.clone(), source })?;
    // The vector leg reads 200 float32 vectors at random per query: map
    // the whole database (the spec's size target is 1 GiB) so those reads
    // are page-cache hits without a copy into SQLite's cache.
    connection.execute_batch(&format!("PRAGMA mmap_size = {MMAP_SIZE};")).map_err(sqlite(&path))?;
    connection.execute_batch("PRAGMA foreign_keys = ON;").map_err(sqlite(&path))?;
    connection.execute_batch(SCHEMA).map_err(sqlite(&path))?;
    move_index_out_of(&connection, &workspace).map_err(sqlite(&workspace))?;
    Ok(connection)
}

/// Moves the index tables an older ClawFS kept in the workspace database
/// into the search database: first copied (the insert trigger fills FTS5
/// again) and committed, then dropped from the workspace database. A crash
/// between the two finds the copy made and only drops; one before finds
/// nothing copied and starts again.
fn move_index_out_of(search: &Connection, workspace: &Path) -> rusqlite::Result<()> {
    search.execute("ATTACH DATABASE ?1 AS workspace", [workspace.to_string_lossy()])?;
    let moved = (|| {
        let old: bool = search.query_row(
            "SELECT EXISTS (SELECT 1 FROM workspace.sqlite_schema WHERE name = 'clawfs_chunks')",
            [],
            |row| row.get(0),
        )?;
        if !old {
            return Ok(());
        }
        let copied: bool =
            search.query_row("SELECT EXISTS (SELECT 1 FROM main.clawfs_chunks)", [], |row| row.get(0))?;
        if !copied {
            search.execute_batch(
                "BEGIN IMMEDIATE;
                 INSERT INTO main.clawfs_chunks SELECT * FROM workspace.clawfs_chunks;
                 INSERT INTO main.clawfs_vectors SELECT * FROM workspace.clawfs_vectors;
                 UPDATE main.clawfs_vector_state SET (count, checksum, dimension, model_id) =
                     (SELECT count, checksum, dimension, model_id FROM workspace.clawfs_vector_state WHERE id = 1)
                     WHERE EXISTS (SELECT 1 FROM workspace.clawfs_vector_state WHERE id = 1);
                 COMMIT;",
            )?;
        }
        search.execute_batch(
            "BEGIN IMMEDIATE;
             DROP TABLE IF EXISTS workspace.clawfs_chunks_fts;
             DROP TABLE IF EXISTS workspace.clawfs_vectors;
             DROP TABLE IF EXISTS workspace.clawfs_vector_state;
             DROP TABLE IF EXISTS workspace.clawfs_chunks;
             COMMIT;",
        )
    })();
    if moved.is_err() && !search.is_autocommit() {
        let _ = search.execute_batch("ROLLBACK");
    }
    search.execute_batch("DETACH DATABASE workspace")?;
    moved
}

pub(super) fn read_state(connection: &Connection, path: &Path) -> Result<VectorState> {
    connection
        .query_row("SELECT count, checksum, dimension, model_id FROM clawfs_vector_state WHERE id = 1", [], |row| {
            Ok(VectorState { count: row.get(0)?, checksum: row.get(1)?, dimension: row.get(2)?, model_id: row.get(3)? })
        })
        .map_err(sqlite(path))
}

pub(super) fn write_state(transaction: &Transaction, state: &VectorState, path: &Path) -> Result<()> {
    transaction
        .execute(
            "UPDATE clawfs_vector_state SET count = ?1, checksum = ?2, dimension = ?3, model_id = ?4 WHERE id = 1",
            params![state.count, state.checksum, state.dimension, state.model_id],
        )
        .map(drop)
        .map_err(sqlite(path))
}

#[cfg(test)]
mod tests {
    use super::{open_agentfs, open_connection, DATABASE_FILE, SCHEMA};

    #[test]
    fn an_index_opened_on_a_directory_without_its_workspace_database_makes_none() {
        let dir = tempfile::tempdir().unwrap();
        let error = open_connection(dir.path()).expect_err("no workspace database");
        assert!(error.to_string().contains(DATABASE_FILE), "{error}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_index_kept_in_the_workspace_database_moves_to_the_search_database() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join(DATABASE_FILE);
        open_agentfs(&workspace).unwrap();
        // The layout of an older ClawFS: the index tables inside workspace.db.
        let old = rusqlite::Connection::open(&workspace).unwrap();
        old.execute_batch(SCHEMA).unwrap();
        old.execute_batch(
            "INSERT INTO clawfs_chunks VALUES (7, 'c7', 'notes.md', 'Keys', 0, 'the vault seals its keys');
             INSERT INTO clawfs_vectors VALUES (7, x'0000803f');
             UPDATE clawfs_vector_state SET count = 1, checksum = 42, dimension = 1, model_id = 'm' WHERE id = 1;",
        )
        .unwrap();
        drop(old);
        for _ in 0..2 {
            let search = open_connection(dir.path()).unwrap();
            let found: i64 = search
                .query_row("SELECT rowid FROM clawfs_chunks_fts WHERE clawfs_chunks_fts MATCH 'seals'", [], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(found, 7);
            let state: (i64, i64, String) = search
                .query_row("SELECT count, checksum, model_id FROM clawfs_vector_state", [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .unwrap();
            assert_eq!(state, (1, 42, "m".to_owned()));
            let vectors: i64 = search.query_row("SELECT COUNT(*) FROM clawfs_vectors", [], |r| r.get(0)).unwrap();
            assert_eq!(vectors, 1);
        }
        let left: i64 = rusqlite::Connection::open(&workspace)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM sqlite_schema WHERE name LIKE 'clawfs%'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0);
        assert!(agentfs::check::check_database(&workspace).unwrap().is_clean());
    }
}

//! The memory index of one workspace: chunks in SQLite (FTS5 with the
//! `porter unicode61` tokenizer for the keyword leg, float32 BLOBs for the
//! vectors) and a usearch HNSW index persisted beside the database.
//!
//! The database is the truth; the HNSW file is a cache of it. The database
//! keeps a running count and an order-independent checksum of its vectors
//! (XOR of a hash of each key and vector), updated in the same transaction
//! as the vectors. The HNSW file is saved after every change together with
//! a sidecar recording the count and checksum it holds. On open the two
//! must agree, else (missing file, crash between commit and save, copied
//! database) the index is rebuilt from the database with a log line.
//!
//! The HNSW graph holds its vectors quantized to i8 ([`quantize`]): a quarter
//! of the memory, disk and distance work of float32, which is what makes
//! 1536-dimension inserts fast and 100,000 documents fit the spec's 1 GB.
//! The graph only proposes candidates; the vector leg re-ranks them by
//! exact cosine over the float32 vectors in the database, so quantization
//! costs no precision in the scores and almost none in recall.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::bm25::{self, ChunkLengths};
use crate::chunk::{chunk_markdown, Chunk};
use crate::embed::Embedder;
use crate::error::{io, Error, Result};
use crate::search::{fuse, LegReport, SearchHit, SearchRequest, SearchResponse};
use crate::workspace::{write_json_atomic, WorkspaceMetadata};

/// The workspace database's file name.
pub const DATABASE_FILE: &str = "workspace.db";
/// The search index's database (chunks, their FTS5 table, vectors),
/// beside the workspace database. A file of its own: the reference AgentFS
/// SDK's engine cannot open a database holding an FTS5 table, and the
/// workspace database must stay one it opens (specs/clawfs/README.md,
/// "Search index").
pub const SEARCH_FILE: &str = "search.db";
/// The HNSW index file, beside the database.
pub const HNSW_FILE: &str = "workspace.hnsw";
/// What the HNSW file holds, for the check on open.
pub const HNSW_SIDECAR_FILE: &str = "workspace.hnsw.json";

/// How the HNSW graph stores its vectors ([`quantize`]) and compares them.
/// Recorded in the sidecar: a file built another way is rebuilt on open.
const HNSW_SCALAR: ScalarKind = ScalarKind::I8;
const HNSW_METRIC: MetricKind = MetricKind::IP;
const HNSW_SCALAR_NAME: &str = "i8-ip";

/// Components of a unit vector, in standard deviations (1/√dimension),
/// that still fit the i8 range; larger ones are clamped.
const QUANTIZATION_SIGMAS: f32 = 5.0;

/// A vector as the graph stores it: normalized to unit length, scaled so a
/// component of [`QUANTIZATION_SIGMAS`] standard deviations is 127, rounded
/// and clamped. Every vector gets the same scale, so the i8 inner product
/// is the cosine times a constant, and the graph can use the plain dot
/// product kernel (about 1.5x faster to build than i8 cosine). usearch's
/// own cast would scale unit vectors to ±127, leaving 1536 components a few
/// units each.
fn quantize(vector: &[f32]) -> Vec<i8> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return vec![0; vector.len()];
    }
    let scale = 127.0 * (vector.len() as f32).sqrt() / (QUANTIZATION_SIGMAS * norm);
    vector.iter().map(|x| (x * scale).round().clamp(-127.0, 127.0) as i8).collect()
}

/// FTS5's record of each chunk's length in tokens, which [`bm25`] caches.
const FTS_DOCSIZE_TABLE: &str = "clawfs_chunks_fts_docsize";

/// Texts embedded per embedder call while re-embedding.
const EMBED_BATCH: usize = 64;

const SCHEMA: &str = "
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
struct VectorState {
    count: u64,
    checksum: i64,
    dimension: Option<usize>,
    model_id: Option<String>,
}

/// The HNSW sidecar: the vector state the file holds, and its scalar kind.
#[derive(Debug, Serialize, Deserialize)]
struct HnswSidecar {
    #[serde(flatten)]
    state: VectorState,
    scalar: String,
}

/// Hits each leg of a top-`limit` search fetches before fusion.
fn candidates(limit: usize) -> usize {
    (limit * 5).max(50)
}

/// HNSW candidates re-ranked exactly for `wanted` vector hits. The graph
/// search is approximate; re-ranking a wider set keeps recall@10 above 0.95
/// at 100,000 clustered 1536-dimension vectors (0.90 with 50).
fn rerank_candidates(wanted: usize) -> usize {
    (wanted * 4).max(200)
}

/// Below this many vectors the candidates come from a scan of every i8
/// vector of the graph rather than a walk of it: a few milliseconds, and
/// exact. A graph walk can miss a lone vector among thousands of near
/// copies (an agent's memory of similar facts and one unlike them: the
/// memory-bench scenario, where the walk missed it at 10,000).
const EXACT_BELOW: usize = 20_000;

/// What a (re-)index of documents changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IndexReport {
    /// Chunks new or changed, inserted (and embedded).
    pub added: usize,
    /// Chunks gone or changed, deleted.
    pub removed: usize,
    /// Chunks already indexed as they are, left alone.
    pub unchanged: usize,
}

/// An open workspace memory index.
pub struct MemoryIndex {
    workspace: String,
    dir: PathBuf,
    connection: Connection,
    hnsw: Index,
    embedder: Option<Arc<dyn Embedder>>,
    /// Why the vector leg cannot run, if it cannot.
    vector_unavailable: Option<String>,
    state: VectorState,
    /// Chunk lengths for the keyword leg's BM25 (see [`bm25`]).
    lengths: Arc<RwLock<ChunkLengths>>,
}

impl std::fmt::Debug for MemoryIndex {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MemoryIndex")
            .field("workspace", &self.workspace)
            .field("dir", &self.dir)
            .field("vectors", &self.state.count)
            .field("vector_unavailable", &self.vector_unavailable)
            .finish_non_exhaustive()
    }
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |source| Error::Sqlite { path: path.to_owned(), source }
}

/// usearch reports errors as C++ exceptions; their text is kept.
fn hnsw_error(path: &Path, error: impl std::fmt::Display) -> Error {
    Error::Hnsw { path: path.to_owned(), message: error.to_string() }
}

fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_vector(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// This vector's share of the checksum; XOR makes the sum independent of
/// order and lets a removal take its share out again.
fn vector_hash(key: u64, embedding: &[u8]) -> i64 {
    let digest = Sha256::new().chain_update(key.to_le_bytes()).chain_update(embedding).finalize();
    i64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// Feeds one chunk to a [`MemoryIndex::digest`]-style SHA-256: its path,
/// content and vector (little-endian f32), each length-prefixed.
pub fn digest_chunk(hasher: &mut Sha256, path: &str, content: &str, vector: Option<&[f32]>) {
    for field in [path.as_bytes(), content.as_bytes()] {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field);
    }
    match vector {
        Some(vector) => {
            hasher.update((vector.len() as u64).to_le_bytes());
            vector.iter().for_each(|x| hasher.update(x.to_le_bytes()));
        }
        None => hasher.update(u64::MAX.to_le_bytes()),
    }
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
fn open_connection(dir: &Path) -> Result<Connection> {
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

fn read_state(connection: &Connection, path: &Path) -> Result<VectorState> {
    connection
        .query_row("SELECT count, checksum, dimension, model_id FROM clawfs_vector_state WHERE id = 1", [], |row| {
            Ok(VectorState { count: row.get(0)?, checksum: row.get(1)?, dimension: row.get(2)?, model_id: row.get(3)? })
        })
        .map_err(sqlite(path))
}

fn write_state(transaction: &Transaction, state: &VectorState, path: &Path) -> Result<()> {
    transaction
        .execute(
            "UPDATE clawfs_vector_state SET count = ?1, checksum = ?2, dimension = ?3, model_id = ?4 WHERE id = 1",
            params![state.count, state.checksum, state.dimension, state.model_id],
        )
        .map(drop)
        .map_err(sqlite(path))
}

impl MemoryIndex {
    /// Opens the index of the workspace in `dir`, checking and if needed
    /// rebuilding its HNSW file. The vector leg is unavailable when there
    /// is no embedder, when its dimension is not the workspace's, or when
    /// the stored vectors come from another model.
    pub fn open(dir: &Path, metadata: &WorkspaceMetadata, embedder: Option<Arc<dyn Embedder>>) -> Result<Self> {
        let db_path = dir.join(SEARCH_FILE);
        let connection = open_connection(dir)?;
        let state = read_state(&connection, &db_path)?;
        let lengths = Arc::new(RwLock::new(ChunkLengths::default()));
        bm25::register(&connection, lengths.clone()).map_err(sqlite(&db_path))?;
        ChunkLengths::refresh(&lengths, &connection, FTS_DOCSIZE_TABLE).map_err(sqlite(&db_path))?;
        let vector_unavailable = match &embedder {
            None => Some("no embedder is configured".to_owned()),
            Some(embedder) if embedder.dimension() != metadata.vector_dimension => Some(format!(
                "the embedder `{}` produces {}-dimension vectors but the workspace stores {}",
                embedder.model_id(),
                embedder.dimension(),
                metadata.vector_dimension
            )),
            Some(embedder) => match &state.model_id {
                Some(stored) if state.count > 0 && stored != embedder.model_id() => Some(format!(
                    "the stored vectors come from `{stored}`, the embedder is `{}`; run `clawctl workspace reindex`",
                    embedder.model_id()
                )),
                _ => None,
            },
        };
        let params = metadata.hnsw_params;
        let options = IndexOptions {
            dimensions: metadata.vector_dimension,
            metric: HNSW_METRIC,
            quantization: HNSW_SCALAR,
            connectivity: params.m,
            expansion_add: params.ef_construction,
            expansion_search: params.ef_search,
            multi: false,
        };
        let hnsw_path = dir.join(HNSW_FILE);
        let hnsw = Index::new(&options).map_err(|e| hnsw_error(&hnsw_path, e))?;
        let mut index = MemoryIndex {
            workspace: metadata.workspace_id.clone(),
            dir: dir.to_owned(),
            connection,
            hnsw,
            embedder,
            vector_unavailable,
            state,
            lengths,
        };
        match index.persisted_index_problem() {
            None => {}
            Some(reason) => {
                tracing::warn!(workspace = %index.workspace, "rebuilding HNSW index {}: {reason}", hnsw_path.display());
                index.rebuild_hnsw()?;
            }
        }
        // The file stores ef_search as it was; the metadata is the setting.
        index.hnsw.change_expansion_search(params.ef_search);
        Ok(index)
    }

    /// Loads the persisted HNSW file; returns why it cannot be used, if so.
    fn persisted_index_problem(&mut self) -> Option<String> {
        let hnsw_path = self.dir.join(HNSW_FILE);
        let sidecar_path = self.dir.join(HNSW_SIDECAR_FILE);
        if !hnsw_path.exists() || !sidecar_path.exists() {
            return (self.state.count > 0 || hnsw_path.exists()).then(|| "the index file is missing".to_owned());
        }
        let HnswSidecar { state: sidecar, scalar } =
            match fs::read(&sidecar_path).ok().and_then(|b| serde_json::from_slice(&b).ok()) {
                Some(sidecar) => sidecar,
                None => return Some(format!("{} is unreadable", sidecar_path.display())),
            };
        if scalar != HNSW_SCALAR_NAME {
            return Some(format!("it stores {scalar} vectors, this version {HNSW_SCALAR_NAME}"));
        }
        if sidecar.count != self.state.count || sidecar.checksum != self.state.checksum {
            return Some(format!(
                "it holds {} vectors (checksum {:016x}), the database {} (checksum {:016x})",
                sidecar.count, sidecar.checksum, self.state.count, self.state.checksum
            ));
        }
        if let Err(error) = self.hnsw.load(&hnsw_path.to_string_lossy()) {
            return Some(format!("it cannot be loaded: {error}"));
        }
        if self.hnsw.size() as u64 != self.state.count {
            return Some(format!("it holds {} vectors, the database {}", self.hnsw.size(), self.state.count));
        }
        None
    }

    /// Rebuilds the HNSW index from the vectors in the database and saves it.
    fn rebuild_hnsw(&mut self) -> Result<()> {
        let db_path = self.dir.join(SEARCH_FILE);
        let hnsw_path = self.dir.join(HNSW_FILE);
        self.hnsw.reset().map_err(|e| hnsw_error(&hnsw_path, e))?;
        let mut statement =
            self.connection.prepare("SELECT key, embedding FROM clawfs_vectors").map_err(sqlite(&db_path))?;
        let vectors = statement
            .query_map([], |row| Ok((row.get::<_, u64>(0)?, bytes_vector(&row.get::<_, Vec<u8>>(1)?))))
            .map_err(sqlite(&db_path))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(sqlite(&db_path))?;
        drop(statement);
        self.apply_to_hnsw(&[], &vectors)?;
        self.save_hnsw()
    }

    fn save_hnsw(&self) -> Result<()> {
        let hnsw_path = self.dir.join(HNSW_FILE);
        // The sidecar goes first as "unknown" so a crash mid-save is stale,
        // never a wrong file that passes the check.
        let _ = fs::remove_file(self.dir.join(HNSW_SIDECAR_FILE));
        let temporary = self.dir.join(format!("{HNSW_FILE}.tmp"));
        self.hnsw.save(&temporary.to_string_lossy()).map_err(|e| hnsw_error(&hnsw_path, e))?;
        fs::rename(&temporary, &hnsw_path).map_err(io("rename", &hnsw_path))?;
        let sidecar = HnswSidecar { state: self.state.clone(), scalar: HNSW_SCALAR_NAME.to_owned() };
        write_json_atomic(&self.dir.join(HNSW_SIDECAR_FILE), &sidecar)
    }

    /// Why the vector leg cannot run, or `None` when it can.
    pub fn vector_unavailable(&self) -> Option<&str> {
        self.vector_unavailable.as_deref()
    }

    /// Number of chunks in the index.
    pub fn chunk_count(&self) -> Result<u64> {
        let db_path = self.dir.join(SEARCH_FILE);
        self.connection.query_row("SELECT count(*) FROM clawfs_chunks", [], |row| row.get(0)).map_err(sqlite(&db_path))
    }

    /// Number of vectors in the index.
    pub fn vector_count(&self) -> u64 {
        self.state.count
    }

    /// Indexes (or re-indexes) one Markdown document.
    pub fn index_document(&mut self, path: &str, text: &str) -> Result<IndexReport> {
        self.index_documents(&[(path, text)])
    }

    /// Indexes several documents in one transaction. Only chunks whose ID
    /// changed are deleted, inserted and embedded.
    pub fn index_documents(&mut self, documents: &[(&str, &str)]) -> Result<IndexReport> {
        let mut report = IndexReport::default();
        let mut new_chunks: Vec<Chunk> = Vec::new();
        let mut stale_keys: Vec<u64> = Vec::new();
        for (path, text) in documents {
            let existing = self.chunk_ids_of(path)?;
            let fresh = chunk_markdown(path, text);
            let fresh_ids: HashSet<&str> = fresh.iter().map(|c| c.id.as_str()).collect();
            for (id, key) in &existing {
                if !fresh_ids.contains(id.as_str()) {
                    stale_keys.push(*key);
                }
            }
            for chunk in fresh {
                if existing.contains_key(&chunk.id) {
                    report.unchanged += 1;
                } else {
                    new_chunks.push(chunk);
                }
            }
        }
        report.removed = stale_keys.len();
        report.added = new_chunks.len();
        if new_chunks.is_empty() && stale_keys.is_empty() {
            return Ok(report);
        }
        // Embed before the transaction: a failing embedder changes nothing.
        let (embeddings, model) = match (&self.embedder, &self.vector_unavailable) {
            (Some(embedder), None) => {
                let texts: Vec<&str> = new_chunks.iter().map(|c| c.content.as_str()).collect();
                (
                    embedder.embed(&texts)?.into_iter().map(Some).collect(),
                    Some((embedder.dimension(), embedder.model_id().to_owned())),
                )
            }
            _ => (vec![None; new_chunks.len()], None),
        };
        self.commit(&stale_keys, &new_chunks, embeddings, model.as_ref().map(|(d, m)| (*d, m.as_str())))?;
        self.save_hnsw()?;
        Ok(report)
    }

    /// Inserts chunks that come with their vectors (made elsewhere, e.g. by
    /// the PostgreSQL migration), in one transaction, without an embedder.
    /// Every vector must have the workspace's dimension and come from
    /// `model_id`; a chunk without one is keyword-only. The HNSW file is
    /// not written: call [`MemoryIndex::save`] after the last batch (until
    /// then, a reopen finds it stale and rebuilds it).
    pub fn insert_embedded(&mut self, chunks: Vec<(Chunk, Option<Vec<f32>>)>, model_id: &str) -> Result<()> {
        let db_path = self.dir.join(SEARCH_FILE);
        let dimension = self.hnsw.dimensions();
        if let Some(stored) =
            self.state.model_id.as_deref().filter(|stored| self.state.count > 0 && *stored != model_id)
        {
            return Err(Error::Config(format!(
                "{}: its vectors come from `{stored}`, not `{model_id}`",
                db_path.display()
            )));
        }
        if let Some((chunk, vector)) =
            chunks.iter().find_map(|(c, v)| v.as_ref().filter(|v| v.len() != dimension).map(|v| (c, v)))
        {
            return Err(Error::Config(format!(
                "{}: a {}-dimension vector, the workspace stores {dimension}",
                chunk.path,
                vector.len()
            )));
        }
        let (chunks, vectors): (Vec<Chunk>, Vec<Option<Vec<f32>>>) = chunks.into_iter().unzip();
        self.commit(&[], &chunks, vectors, Some((dimension, model_id)))
    }

    /// Writes the HNSW index and its sidecar (after [`MemoryIndex::insert_embedded`]).
    pub fn save(&self) -> Result<()> {
        self.save_hnsw()
    }

    /// SHA-256 over every chunk in insertion order, fed by [`digest_chunk`]:
    /// what a copy of a workspace (a migration) checks itself against.
    pub fn digest(&self) -> Result<(u64, [u8; 32])> {
        let db_path = self.dir.join(SEARCH_FILE);
        let mut statement = self
            .connection
            .prepare("SELECT c.path, c.content, v.embedding FROM clawfs_chunks c LEFT JOIN clawfs_vectors v USING (key) ORDER BY c.key")
            .map_err(sqlite(&db_path))?;
        let mut rows = statement.query([]).map_err(sqlite(&db_path))?;
        let (mut count, mut hasher) = (0u64, Sha256::new());
        while let Some(row) = rows.next().map_err(sqlite(&db_path))? {
            let path: String = row.get(0).map_err(sqlite(&db_path))?;
            let content: String = row.get(1).map_err(sqlite(&db_path))?;
            let embedding: Option<Vec<u8>> = row.get(2).map_err(sqlite(&db_path))?;
            digest_chunk(&mut hasher, &path, &content, embedding.as_deref().map(bytes_vector).as_deref());
            count += 1;
        }
        Ok((count, hasher.finalize().into()))
    }

    /// Deletes `stale_keys` and inserts `new_chunks` (with their vectors,
    /// from the model `(dimension, id)`) in one transaction, then updates
    /// the in-memory HNSW index.
    fn commit(
        &mut self,
        stale_keys: &[u64],
        new_chunks: &[Chunk],
        vectors: Vec<Option<Vec<f32>>>,
        model: Option<(usize, &str)>,
    ) -> Result<()> {
        let db_path = self.dir.join(SEARCH_FILE);
        let mut state = self.state.clone();
        let mut added_vectors: Vec<(u64, Vec<f32>)> = Vec::new();
        let mut added_lengths: Vec<(u64, u32)> = Vec::with_capacity(new_chunks.len());
        // IMMEDIATE: the database may be an agent's, written by agent-loop and
        // wasm-daemon too; a deferred one that reads first fails at once when
        // they commit in between.
        let transaction =
            self.connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sqlite(&db_path))?;
        for key in stale_keys {
            let embedding: Option<Vec<u8>> = transaction
                .query_row("SELECT embedding FROM clawfs_vectors WHERE key = ?1", [key], |row| row.get(0))
                .optional()
                .map_err(sqlite(&db_path))?;
            if let Some(embedding) = embedding {
                state.count -= 1;
                state.checksum ^= vector_hash(*key, &embedding);
            }
            transaction.execute("DELETE FROM clawfs_chunks WHERE key = ?1", [key]).map_err(sqlite(&db_path))?;
        }
        {
            let mut insert_chunk = transaction
                .prepare_cached(
                    "INSERT INTO clawfs_chunks(chunk_id, path, heading, ordinal, content) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(sqlite(&db_path))?;
            let mut insert_vector = transaction
                .prepare_cached("INSERT INTO clawfs_vectors(key, embedding) VALUES (?1, ?2)")
                .map_err(sqlite(&db_path))?;
            for (chunk, vector) in new_chunks.iter().zip(vectors) {
                insert_chunk
                    .execute(params![chunk.id, chunk.path, chunk.heading, chunk.ordinal, chunk.content])
                    .map_err(sqlite(&db_path))?;
                let key = transaction.last_insert_rowid() as u64;
                added_lengths.push((
                    key,
                    ChunkLengths::read_one(&transaction, FTS_DOCSIZE_TABLE, key).map_err(sqlite(&db_path))?,
                ));
                if let Some(vector) = vector {
                    let bytes = vector_bytes(&vector);
                    insert_vector.execute(params![key, bytes]).map_err(sqlite(&db_path))?;
                    state.count += 1;
                    state.checksum ^= vector_hash(key, &bytes);
                    added_vectors.push((key, vector));
                }
            }
        }
        if let Some((dimension, model_id)) = model.filter(|_| !added_vectors.is_empty()) {
            state.dimension = Some(dimension);
            state.model_id = Some(model_id.to_owned());
        }
        write_state(&transaction, &state, &db_path)?;
        transaction.commit().map_err(sqlite(&db_path))?;
        self.state = state;
        self.record_lengths(stale_keys, &added_lengths);
        self.apply_to_hnsw(stale_keys, &added_vectors)
    }

    /// The paths of every document in the index, sorted.
    pub fn documents(&self) -> Result<Vec<String>> {
        let db_path = self.dir.join(SEARCH_FILE);
        let mut statement = self
            .connection
            .prepare("SELECT DISTINCT path FROM clawfs_chunks ORDER BY path")
            .map_err(sqlite(&db_path))?;
        let rows = statement.query_map([], |row| row.get(0)).map_err(sqlite(&db_path))?;
        rows.collect::<rusqlite::Result<_>>().map_err(sqlite(&db_path))
    }

    /// Removes every chunk of document `path`; returns how many.
    pub fn remove_document(&mut self, path: &str) -> Result<usize> {
        let keys: Vec<u64> = self.chunk_ids_of(path)?.into_values().collect();
        self.commit(&keys, &[], Vec::new(), None)?;
        self.save_hnsw()?;
        Ok(keys.len())
    }

    /// Keeps the BM25 chunk lengths in step with a commit of this index.
    fn record_lengths(&self, removed: &[u64], added: &[(u64, u32)]) {
        self.lengths.write().unwrap_or_else(|poisoned| poisoned.into_inner()).apply(removed, added);
    }

    fn apply_to_hnsw(&mut self, removed: &[u64], added: &[(u64, Vec<f32>)]) -> Result<()> {
        let hnsw_path = self.dir.join(HNSW_FILE);
        for key in removed {
            self.hnsw.remove(*key).map_err(|e| hnsw_error(&hnsw_path, e))?;
        }
        // Graph construction dominates inserts; usearch's add is thread-safe,
        // so large batches are spread over the cores.
        let threads =
            if added.len() >= 64 { std::thread::available_parallelism().map_or(1, usize::from).min(8) } else { 1 };
        if self.hnsw.size() + added.len() > self.hnsw.capacity() {
            // Grow geometrically so a stream of small inserts stays cheap.
            let wanted = (self.hnsw.size() + added.len()).max(self.hnsw.capacity() * 2).max(64);
            self.hnsw.reserve_capacity_and_threads(wanted, threads).map_err(|e| hnsw_error(&hnsw_path, e))?;
        }
        let hnsw = &self.hnsw;
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|worker| {
                    scope.spawn(move || {
                        added
                            .iter()
                            .skip(worker)
                            .step_by(threads)
                            .try_for_each(|(key, vector)| hnsw.add(*key, &quantize(vector)))
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|worker| worker.join().expect("an HNSW insert thread panicked"))
        })
        .map_err(|e| hnsw_error(&hnsw_path, e))
    }

    fn chunk_ids_of(&self, path: &str) -> Result<HashMap<String, u64>> {
        let db_path = self.dir.join(SEARCH_FILE);
        let mut statement = self
            .connection
            .prepare_cached("SELECT chunk_id, key FROM clawfs_chunks WHERE path = ?1")
            .map_err(sqlite(&db_path))?;
        let rows = statement.query_map([path], |row| Ok((row.get(0)?, row.get(1)?))).map_err(sqlite(&db_path))?;
        rows.collect::<rusqlite::Result<_>>().map_err(sqlite(&db_path))
    }

    /// Runs a hybrid search. Each leg that cannot run says why in the
    /// response instead of being dropped silently.
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let (keyword_hits, keyword) = match fts_query(&request.query) {
            Some(query) => {
                let hits = self.keyword_leg(&query, candidates(request.limit))?;
                let report = LegReport::Ran { candidates: hits.len() };
                (hits, report)
            }
            None => (Vec::new(), LegReport::NotRun { reason: "the query has no searchable words".into() }),
        };
        let (vector_hits, vector) = match self.vector_leg(&request.query, candidates(request.limit)) {
            Ok(hits) => {
                let report = LegReport::Ran { candidates: hits.len() };
                (hits, report)
            }
            Err(reason) => (Vec::new(), LegReport::NotRun { reason }),
        };
        let fused = fuse(&keyword_hits, &vector_hits, request.fusion, request.limit);
        let results = fused
            .into_iter()
            .map(|(key, score, keyword_score, vector_score)| {
                let (chunk_id, path, heading, ordinal, content) = self.chunk(key)?;
                Ok(SearchHit {
                    workspace: self.workspace.clone(),
                    chunk_id,
                    path,
                    heading,
                    ordinal,
                    content,
                    score,
                    keyword_score,
                    vector_score,
                })
            })
            .collect::<Result<_>>()?;
        Ok(SearchResponse { results, keyword, vector, fusion: request.fusion })
    }

    /// The `limit` chunks nearest to `vector`, by exact cosine among the
    /// HNSW candidates: "more like this" for a vector at hand, without an
    /// embedder.
    pub fn search_by_vector(&self, vector: &[f32], limit: usize) -> Result<Vec<SearchHit>> {
        if vector.len() != self.hnsw.dimensions() {
            return Err(Error::Config(format!(
                "a {}-dimension query vector; the workspace stores {}",
                vector.len(),
                self.hnsw.dimensions()
            )));
        }
        self.nearest(vector, limit)?
            .into_iter()
            .map(|(key, similarity)| {
                let (chunk_id, path, heading, ordinal, content) = self.chunk(key)?;
                Ok(SearchHit {
                    workspace: self.workspace.clone(),
                    chunk_id,
                    path,
                    heading,
                    ordinal,
                    content,
                    score: similarity,
                    keyword_score: None,
                    vector_score: Some(similarity),
                })
            })
            .collect()
    }

    /// Up to `count` chunks nearest to `query`: HNSW candidates re-ranked
    /// by exact cosine similarity over their float32 vectors, best first.
    fn nearest(&self, query: &[f32], count: usize) -> Result<Vec<(u64, f32)>> {
        let (db_path, hnsw_path) = (self.dir.join(SEARCH_FILE), self.dir.join(HNSW_FILE));
        let query_i8 = quantize(query);
        let matches = if self.hnsw.size() < EXACT_BELOW {
            self.hnsw.exact_search(&query_i8, rerank_candidates(count))
        } else {
            self.hnsw.search(&query_i8, rerank_candidates(count))
        }
        .map_err(|e| hnsw_error(&hnsw_path, e))?;
        let mut statement = self
            .connection
            .prepare_cached("SELECT embedding FROM clawfs_vectors WHERE key = ?1")
            .map_err(sqlite(&db_path))?;
        let query_norm = dot(query, query).sqrt();
        let mut scored = matches
            .keys
            .into_iter()
            .map(|key| {
                let vector = bytes_vector(
                    &statement.query_row([key], |row| row.get::<_, Vec<u8>>(0)).map_err(sqlite(&db_path))?,
                );
                let similarity =
                    dot(query, &vector) / (query_norm * dot(&vector, &vector).sqrt()).max(f32::MIN_POSITIVE);
                Ok((key, similarity))
            })
            .collect::<Result<Vec<_>>>()?;
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.truncate(count);
        Ok(scored)
    }

    /// BM25 over the chunks, as (key, score) with higher better.
    fn keyword_leg(&self, query: &str, limit: usize) -> Result<Vec<(u64, f32)>> {
        let db_path = self.dir.join(SEARCH_FILE);
        ChunkLengths::refresh(&self.lengths, &self.connection, FTS_DOCSIZE_TABLE).map_err(sqlite(&db_path))?;
        let mut statement = self
            .connection
            .prepare_cached(&format!(
                "SELECT rowid, {0}(clawfs_chunks_fts) AS score FROM clawfs_chunks_fts WHERE clawfs_chunks_fts MATCH ?1 \
                 ORDER BY score LIMIT ?2",
                bm25::FUNCTION
            ))
            .map_err(sqlite(&db_path))?;
        // BM25 as SQLite ranks it is lower-is-better; negate it.
        let rows = statement
            .query_map(params![query, limit], |row| Ok((row.get::<_, u64>(0)?, -row.get::<_, f64>(1)? as f32)))
            .map_err(sqlite(&db_path))?;
        rows.collect::<rusqlite::Result<_>>().map_err(sqlite(&db_path))
    }

    /// Nearest chunks by cosine similarity, or why the leg cannot run.
    fn vector_leg(&self, query: &str, limit: usize) -> std::result::Result<Vec<(u64, f32)>, String> {
        if let Some(reason) = &self.vector_unavailable {
            return Err(reason.clone());
        }
        let embedder = self.embedder.as_ref().ok_or("no embedder is configured")?;
        let vector =
            embedder.embed(&[query]).map_err(|error| format!("embedding the query failed: {error}"))?.remove(0);
        self.nearest(&vector, limit).map_err(|error| format!("vector search failed: {error}"))
    }

    fn chunk(&self, key: u64) -> Result<(String, String, String, u32, String)> {
        let db_path = self.dir.join(SEARCH_FILE);
        self.connection
            .prepare_cached("SELECT chunk_id, path, heading, ordinal, content FROM clawfs_chunks WHERE key = ?1")
            .and_then(|mut statement| {
                statement.query_row([key], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)))
            })
            .map_err(sqlite(&db_path))
    }

    /// Replaces every vector of the workspace in `dir` with `embedder`'s
    /// and rebuilds the HNSW index; returns the number of chunks embedded.
    pub(crate) fn reembed(dir: &Path, metadata: &WorkspaceMetadata, embedder: Arc<dyn Embedder>) -> Result<usize> {
        let db_path = dir.join(SEARCH_FILE);
        let mut connection = open_connection(dir)?;
        let chunks: Vec<(u64, String)> = {
            let mut statement =
                connection.prepare("SELECT key, content FROM clawfs_chunks ORDER BY key").map_err(sqlite(&db_path))?;
            let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).map_err(sqlite(&db_path))?;
            rows.collect::<rusqlite::Result<_>>().map_err(sqlite(&db_path))?
        };
        let mut state = VectorState {
            count: 0,
            checksum: 0,
            dimension: Some(embedder.dimension()),
            model_id: Some(embedder.model_id().to_owned()),
        };
        let mut vectors = Vec::with_capacity(chunks.len());
        for batch in chunks.chunks(EMBED_BATCH) {
            let texts: Vec<&str> = batch.iter().map(|(_, content)| content.as_str()).collect();
            vectors.extend(batch.iter().map(|(key, _)| *key).zip(embedder.embed(&texts)?));
        }
        let transaction =
            connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sqlite(&db_path))?;
        transaction.execute("DELETE FROM clawfs_vectors", []).map_err(sqlite(&db_path))?;
        for (key, vector) in &vectors {
            let bytes = vector_bytes(vector);
            transaction
                .execute("INSERT INTO clawfs_vectors(key, embedding) VALUES (?1, ?2)", params![key, bytes])
                .map_err(sqlite(&db_path))?;
            state.count += 1;
            state.checksum ^= vector_hash(*key, &bytes);
        }
        write_state(&transaction, &state, &db_path)?;
        transaction.commit().map_err(sqlite(&db_path))?;
        for stale in [HNSW_FILE, HNSW_SIDECAR_FILE] {
            let _ = fs::remove_file(dir.join(stale));
        }
        let reindexed = WorkspaceMetadata { vector_dimension: embedder.dimension(), ..metadata.clone() };
        MemoryIndex::open(dir, &reindexed, Some(embedder))?;
        Ok(vectors.len())
    }
}

/// An FTS5 query matching any word of `text`: each word is quoted so that
/// user input cannot inject FTS5 syntax (`NEAR`, `*`, column filters).
fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> =
        text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| format!("\"{w}\"")).collect();
    (!words.is_empty()).then(|| words.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::{
        fts_query, open_agentfs, open_connection, quantize, MemoryIndex, DATABASE_FILE, QUANTIZATION_SIGMAS, SCHEMA,
    };
    use crate::{Clawfs, Config};

    #[test]
    fn an_index_opened_on_a_directory_without_its_workspace_database_makes_none() {
        let dir = tempfile::tempdir().unwrap();
        let error = open_connection(dir.path()).err().expect("no workspace database");
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

    /// A note of `words` words drawn from a small vocabulary, so that
    /// queries match many notes with varied frequencies and lengths.
    fn note(seed: usize, words: usize) -> String {
        const VOCABULARY: [&str; 12] = [
            "router", "vault", "sealing", "sealed", "keys", "tpm", "agent", "agents", "search", "index", "backup",
            "network",
        ];
        let body: Vec<&str> = (0..words).map(|n| VOCABULARY[(seed * 7 + n * n * 3 + n) % VOCABULARY.len()]).collect();
        format!("# Note {seed}\n\n{}.\n", body.join(" "))
    }

    /// The keyword leg's scores are FTS5's own `bm25()`, negated, and the
    /// lengths in memory cover every chunk (so none fell back to FTS5's
    /// `%_docsize` lookup).
    fn assert_keyword_scores_are_fts5_bm25(index: &MemoryIndex, query: &str) {
        let fts = fts_query(query).unwrap();
        let mut ours = index.keyword_leg(&fts, 10_000).unwrap();
        let mut statement = index
            .connection
            .prepare("SELECT rowid, bm25(clawfs_chunks_fts) FROM clawfs_chunks_fts WHERE clawfs_chunks_fts MATCH ?1")
            .unwrap();
        let mut fts5: Vec<(u64, f32)> = statement
            .query_map([&fts], |row| Ok((row.get(0)?, -row.get::<_, f64>(1)? as f32)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(!fts5.is_empty(), "{query} matches nothing");
        assert!(ours.windows(2).all(|pair| pair[0].1 >= pair[1].1), "best first");
        ours.sort_by_key(|hit| hit.0);
        fts5.sort_by_key(|hit| hit.0);
        assert_eq!(ours, fts5, "{query}");
        assert_eq!(index.lengths.read().unwrap().len() as u64, index.chunk_count().unwrap());
    }

    #[test]
    fn keyword_scores_stay_fts5_bm25_through_this_and_other_connections_commits() {
        let dir = tempfile::tempdir().unwrap();
        let clawfs = Clawfs::new(Config { vector_dimension: 128, ..Config::new(dir.path()) }).unwrap();
        clawfs.create_workspace("notes", "user").unwrap();
        let mut index = clawfs.open_memory("notes", None).unwrap();
        let notes: Vec<(String, String)> = (0..300).map(|n| (format!("notes/{n}.md"), note(n, 5 + n % 60))).collect();
        let documents: Vec<(&str, &str)> = notes.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
        index.index_documents(&documents).unwrap();
        for query in ["vault", "sealing keys", "agent OR search: index", "tpm router backup network"] {
            assert_keyword_scores_are_fts5_bm25(&index, query);
        }

        // This index's own changes: a removal and a rewrite.
        index.remove_document("notes/3.md").unwrap();
        index.index_document("notes/4.md", &note(4_000, 200)).unwrap();
        assert_keyword_scores_are_fts5_bm25(&index, "sealed agents");

        // Another connection's (as another process's) commit, seen through
        // `PRAGMA data_version`.
        let mut other = clawfs.open_memory("notes", None).unwrap();
        other.index_document("notes/long.md", &note(9, 400)).unwrap();
        other.remove_document("notes/5.md").unwrap();
        assert_keyword_scores_are_fts5_bm25(&index, "sealed agents");
    }

    /// Thousands of copies of a few texts and one unlike them: a walk of
    /// the graph ends among the copies, the scan below `EXACT_BELOW` finds
    /// the lone one.
    #[test]
    fn a_lone_vector_among_thousands_of_copies_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let clawfs = Clawfs::new(Config { vector_dimension: 128, ..Config::new(dir.path()) }).unwrap();
        clawfs.create_workspace("notes", "user").unwrap();
        let embedder = std::sync::Arc::new(crate::HashingEmbedder::new(128));
        let mut index = clawfs.open_memory("notes", Some(embedder.clone())).unwrap();
        let mut text: String =
            (0..10_000).map(|n| format!("## {n}\nPerson{} keeps the drill in the barn.\n", n % 24)).collect();
        text.push_str("## lone\nThe generator needs new oil every spring.\n");
        index.index_document("memory.md", &text).unwrap();
        let query = crate::Embedder::embed(&*embedder, &["generator oil"]).unwrap().remove(0);
        let best = index.search_by_vector(&query, 1).unwrap();
        assert_eq!(best[0].heading, "lone", "{best:?}");
    }

    #[test]
    fn quantize_scales_unit_vectors_alike_and_clamps_outliers() {
        // 100 dimensions: one standard deviation of a unit vector's component is 0.1.
        let mut vector = [0.0f32; 100];
        vector[..3].copy_from_slice(&[0.3, -0.1, 0.9]);
        let quantized = quantize(&vector);
        let norm = (0.09f32 + 0.01 + 0.81).sqrt();
        let expected = |x: f32| (x / norm * 127.0 / (QUANTIZATION_SIGMAS * 0.1)).round() as i8;
        assert_eq!(&quantized[..3], &[expected(0.3), expected(-0.1), 127], "0.9 / norm is 9.4 sigmas: clamped");
        assert!(quantized[3..].iter().all(|x| *x == 0));
        assert_eq!(quantize(&vector.map(|x| x * 1000.0)), quantized, "the length does not matter to cosine");
        assert_eq!(quantize(&[0.0; 3]), vec![0; 3]);
        assert_eq!(quantize(&[f32::NAN, 1.0]), vec![0; 2], "a non-finite vector quantizes to zero, not to garbage");
        assert_eq!(quantize(&[f32::INFINITY, 1.0]), vec![0; 2]);
    }
}

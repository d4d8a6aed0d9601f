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
//! The HNSW graph holds its vectors quantized to i8 (`hnsw::quantize`): a quarter
//! of the memory, disk and distance work of float32, which is what makes
//! 1536-dimension inserts fast and 100,000 documents fit the spec's 1 GB.
//! The graph only proposes candidates; the vector leg re-ranks them by
//! exact cosine over the float32 vectors in the database, so quantization
//! costs no precision in the scores and almost none in recall.
//!
//! Owns: one workspace's search index, in submodules along its seams:
//! `schema` (the search database's tables, how it is opened, the move of
//! an older ClawFS's index out of `workspace.db`), `hnsw` (the graph: its
//! quantization, building, saving, the check on open), `write` (documents
//! in and out, vectors brought along, re-embedding) and `query` (hybrid
//! search, nearest vectors, the digest). This file holds what they share:
//! [`MemoryIndex`] and opening it.
//! Must not own: the names of its files ([`crate::layout`]), a workspace's
//! directory and `metadata.json` ([`crate::Clawfs`]), cutting Markdown into chunks ([`crate::chunk`]),
//! fusing rankings ([`crate::search`]), or an agent's memory entries
//! ([`crate::memory`]).

mod hnsw;
mod query;
mod schema;
mod write;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rusqlite::Connection;
use usearch::Index;

use crate::bm25::{self, ChunkLengths};
use crate::embed::Embedder;
use crate::error::Result;
use crate::layout::{HNSW_FILE, SEARCH_FILE};
use crate::metadata::WorkspaceMetadata;
use hnsw::hnsw_error;
use schema::{open_connection, read_state, sqlite, VectorState, FTS_DOCSIZE_TABLE};

pub use query::digest_chunk;
pub(crate) use schema::open_agentfs;
pub use write::{Embedding, IndexReport, Pending};

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
    /// When new chunks are embedded ([`MemoryIndex::set_embedding`]).
    embedding: write::Embedding,
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
        let hnsw_path = dir.join(HNSW_FILE);
        let hnsw = Index::new(&hnsw::options(metadata)).map_err(|e| hnsw_error(&hnsw_path, e))?;
        let mut index = MemoryIndex {
            workspace: metadata.workspace_id.clone(),
            dir: dir.to_owned(),
            connection,
            hnsw,
            embedder,
            vector_unavailable,
            state,
            embedding: write::Embedding::default(),
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
        index.hnsw.change_expansion_search(metadata.hnsw_params.ef_search);
        Ok(index)
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
}

//! What changes a workspace's index (specs/clawfs/README.md, "Memory
//! search"): documents indexed, re-indexed and removed, chunks brought
//! with their vectors (a migration), and every vector replaced by another
//! model's.
//!
//! Owns: the diff of a document's chunks against the stored ones (only
//! chunks whose ID changed are deleted, inserted and embedded), embedding
//! before the transaction or leaving new chunks pending for vectors added
//! later, the one transaction that writes the chunks, the
//! vectors and the vector state together, and keeping the in-memory BM25
//! lengths and the HNSW graph in step with each commit.
//! Must not own: cutting Markdown into chunks ([`crate::chunk`]), the
//! tables (`schema`), or how the graph is built and saved (`hnsw`).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::Arc;

use rusqlite::{params, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};

use super::schema::{open_connection, sqlite, vector_bytes, vector_hash, write_state, VectorState, FTS_DOCSIZE_TABLE};
use super::MemoryIndex;
use crate::bm25::ChunkLengths;
use crate::chunk::{chunk_markdown, Chunk};
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::layout::{HNSW_FILE, HNSW_SIDECAR_FILE, SEARCH_FILE};
use crate::metadata::WorkspaceMetadata;

/// Texts embedded per embedder call while re-embedding.
const EMBED_BATCH: usize = 64;

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

/// When [`MemoryIndex::index_documents`] embeds new chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Embedding {
    #[default]
    /// Before the commit: the caller waits for the embedder.
    Now,
    /// Later: the chunks are committed keyword-only and stay pending until
    /// [`MemoryIndex::add_vectors`] brings their vectors.
    Later,
}

/// A chunk waiting for its vector ([`MemoryIndex::pending_embeddings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Its key in the index.
    pub key: u64,
    /// Its chunk ID (which changes with its content).
    pub chunk_id: String,
    /// The text to embed.
    pub content: String,
}

impl MemoryIndex {
    /// Indexes (or re-indexes) one Markdown document.
    pub fn index_document(&mut self, path: &str, text: &str) -> Result<IndexReport> {
        self.index_documents(&[(path, text)])
    }

    /// Indexes several documents in one transaction. Only chunks whose ID
    /// changed are deleted, inserted and embedded.
    /// New chunks are embedded before the commit or left for later, as
    /// [`MemoryIndex::set_embedding`] said ([`Embedding::Now`] by default).
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
            (Some(embedder), None) if self.embedding == Embedding::Now => {
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

    /// Whether documents indexed from now on are embedded before their
    /// commit ([`Embedding::Now`], the default) or committed keyword-only,
    /// their chunks pending until [`MemoryIndex::add_vectors`] brings their
    /// vectors ([`Embedding::Later`]: a caller that must not wait for the
    /// model, which embeds them on a thread of its own).
    pub fn set_embedding(&mut self, embedding: Embedding) {
        self.embedding = embedding;
    }

    /// Up to `limit` chunks that have no vector while this index has an
    /// embedder that works: left by [`Embedding::Later`] (or by a restart
    /// before their vectors came), oldest first. None without an embedder.
    pub fn pending_embeddings(&self, limit: usize) -> Result<Vec<Pending>> {
        if self.embedder.is_none() || self.vector_unavailable.is_some() {
            return Ok(Vec::new());
        }
        let db_path = self.dir.join(SEARCH_FILE);
        let mut statement = self
            .connection
            .prepare_cached(
                "SELECT c.key, c.chunk_id, c.content FROM clawfs_chunks c \
                 LEFT JOIN clawfs_vectors v ON v.key = c.key WHERE v.key IS NULL ORDER BY c.key LIMIT ?1",
            )
            .map_err(sqlite(&db_path))?;
        let rows = statement
            .query_map([limit as i64], |row| {
                Ok(Pending { key: row.get(0)?, chunk_id: row.get(1)?, content: row.get(2)? })
            })
            .map_err(sqlite(&db_path))?;
        rows.collect::<rusqlite::Result<_>>().map_err(sqlite(&db_path))
    }

    /// Adds vectors made outside the index (by this index's embedder, from
    /// [`MemoryIndex::pending_embeddings`]) in one transaction. A vector
    /// whose chunk is gone, was replaced (another chunk ID under its key:
    /// SQLite may reuse a deleted row's key) or has one already is left
    /// out; returns how many were added.
    pub fn add_vectors(&mut self, vectors: Vec<(Pending, Vec<f32>)>) -> Result<usize> {
        let db_path = self.dir.join(SEARCH_FILE);
        let Some(embedder) = self.embedder.clone().filter(|_| self.vector_unavailable.is_none()) else {
            return Err(Error::Config(format!("{}: no embedder to add vectors for", db_path.display())));
        };
        let mut state = self.state.clone();
        let mut added: Vec<(u64, Vec<f32>)> = Vec::new();
        let transaction =
            self.connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sqlite(&db_path))?;
        for (pending, vector) in vectors {
            if vector.len() != embedder.dimension() {
                return Err(Error::Config(format!(
                    "{}: a {}-dimension vector, the embedder makes {}",
                    db_path.display(),
                    vector.len(),
                    embedder.dimension()
                )));
            }
            let current: Option<(String, Option<i64>)> = transaction
                .query_row(
                    "SELECT c.chunk_id, v.key FROM clawfs_chunks c LEFT JOIN clawfs_vectors v ON v.key = c.key \
                     WHERE c.key = ?1",
                    [pending.key],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(sqlite(&db_path))?;
            if !matches!(current, Some((chunk_id, None)) if chunk_id == pending.chunk_id) {
                continue;
            }
            insert_vector(&transaction, &mut state, pending.key, &vector, &db_path)?;
            added.push((pending.key, vector));
        }
        if !added.is_empty() {
            state.dimension = Some(embedder.dimension());
            state.model_id = Some(embedder.model_id().to_owned());
        }
        write_state(&transaction, &state, &db_path)?;
        transaction.commit().map_err(sqlite(&db_path))?;
        self.state = state;
        self.apply_to_hnsw(&[], &added)?;
        self.save_hnsw()?;
        Ok(added.len())
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
                    insert_vector(&transaction, &mut state, key, &vector, &db_path)?;
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

    fn chunk_ids_of(&self, path: &str) -> Result<HashMap<String, u64>> {
        let db_path = self.dir.join(SEARCH_FILE);
        let mut statement = self
            .connection
            .prepare_cached("SELECT chunk_id, key FROM clawfs_chunks WHERE path = ?1")
            .map_err(sqlite(&db_path))?;
        let rows = statement.query_map([path], |row| Ok((row.get(0)?, row.get(1)?))).map_err(sqlite(&db_path))?;
        rows.collect::<rusqlite::Result<_>>().map_err(sqlite(&db_path))
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
            insert_vector(&transaction, &mut state, *key, vector, &db_path)?;
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

/// Stores `vector` as chunk `key`'s, in step with the vector state's count
/// and checksum (which every writer of `clawfs_vectors` keeps).
fn insert_vector(
    transaction: &rusqlite::Transaction<'_>,
    state: &mut VectorState,
    key: u64,
    vector: &[f32],
    db_path: &Path,
) -> Result<()> {
    let bytes = vector_bytes(vector);
    transaction
        .prepare_cached("INSERT INTO clawfs_vectors(key, embedding) VALUES (?1, ?2)")
        .and_then(|mut insert| insert.execute(params![key, bytes]))
        .map_err(sqlite(db_path))?;
    state.count += 1;
    state.checksum ^= vector_hash(key, &bytes);
    Ok(())
}

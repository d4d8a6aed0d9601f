//! `migrate-pg-to-sqlite` (specs/clawfs/README.md, "Migration from
//! PostgreSQL"): copies IronClaw's documents and their pgvector embeddings
//! from PostgreSQL into a new ClawFS workspace.
//!
//! Source schema (the same section): `documents(id, workspace_id, content,
//! metadata jsonb)` and `vectors(id, document_id, embedding vector(N),
//! created_at)`. Each document becomes one memory chunk at path
//! `pg/<workspace_id>/<id>` (heading: `metadata.title`, else
//! `metadata.path`) with its newest vector; a document without a vector is
//! kept for keyword search. Vectors are copied as they are, never
//! re-embedded, and recorded under `--model-id` so ClawFS never mixes them
//! with another model's.
//!
//! How it stays safe:
//! - PostgreSQL is read in one read-only REPEATABLE READ transaction, so
//!   the copy is one consistent moment of the source, streamed through a
//!   cursor in batches (1000 rows by default), each written in one SQLite
//!   transaction;
//! - the target workspace must not exist; on any failure it is deleted
//!   again, so a failed run leaves nothing behind (rollback);
//! - at the end the workspace's chunks are read back and their SHA-256
//!   ([`clawfs::MemoryIndex::digest`]) must equal the one computed over
//!   what was read from PostgreSQL, and the counts must match.
//!
//! Owns the PostgreSQL side; the workspace format is `clawos-clawfs`'s.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clawfs::chunk::{chunk_id, Chunk};
use clawfs::{Clawfs, Config};
use indicatif::{ProgressBar, ProgressStyle};
use pgvector::Vector;
use postgres::{IsolationLevel, NoTls};
use sha2::{Digest, Sha256};

/// Rows per cursor fetch and per SQLite transaction (specs/clawfs/README.md,
/// "Migration from PostgreSQL").
pub const DEFAULT_BATCH_SIZE: usize = 1000;

/// What to migrate where.
#[derive(Debug, Clone)]
pub struct Options {
    /// libpq connection string or URL of the source.
    pub pg_url: String,
    /// The `documents.workspace_id` to copy.
    pub source_workspace_id: String,
    /// The ClawFS root (`/clawfs` on the appliance).
    pub clawfs_root: PathBuf,
    /// The ClawFS workspace to create.
    pub workspace: String,
    /// The model that made the pgvector embeddings, as ClawFS names models
    /// (e.g. `openai-compatible:text-embedding-3-small:1536`).
    pub model_id: String,
    /// Rows per batch.
    pub batch_size: usize,
    /// Draw a progress bar on a terminal.
    pub progress: bool,
}

/// What a finished migration copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Documents copied.
    pub documents: u64,
    /// Of those, how many had a vector.
    pub vectors: u64,
    /// Older vectors of a document that has a newer one, not copied.
    pub superseded_vectors: u64,
    /// SQLite transactions written.
    pub batches: u64,
    /// The vector dimension (0 when no document had a vector).
    pub dimension: usize,
    /// The verified SHA-256 of the copied chunks, hex.
    pub digest: String,
    /// Wall time.
    pub elapsed: Duration,
}

/// Why a migration failed. The target workspace has been removed again.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Talking to PostgreSQL failed.
    #[error("PostgreSQL: {0}")]
    Postgres(#[from] postgres::Error),
    /// Writing the ClawFS workspace failed.
    #[error("ClawFS: {0}")]
    Clawfs(#[from] clawfs::Error),
    /// The data cannot be migrated as it is.
    #[error("{0}")]
    Invalid(String),
    /// What was written is not what was read.
    #[error("verification failed: {0}")]
    Verification(String),
}

const DOCUMENTS: &str = "
SELECT d.id::text, d.content, d.metadata->>'title', d.metadata->>'path', v.embedding
FROM documents d
LEFT JOIN LATERAL (
    SELECT embedding FROM vectors WHERE document_id = d.id ORDER BY created_at DESC, id DESC LIMIT 1
) v ON true
WHERE d.workspace_id::text = $1
ORDER BY d.id";

/// Runs the migration described by `options`.
pub fn migrate(options: &Options) -> Result<Report, Error> {
    if options.batch_size == 0 {
        return Err(Error::Invalid("the batch size must be at least 1".into()));
    }
    let started = Instant::now();
    let mut client = postgres::Client::connect(&options.pg_url, NoTls)?;
    let mut source =
        client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true).start()?;
    let workspace_id = options.source_workspace_id.as_str();
    let documents: i64 =
        source.query_one("SELECT count(*) FROM documents WHERE workspace_id::text = $1", &[&workspace_id])?.get(0);
    let all_vectors: i64 = source
        .query_one(
            "SELECT count(*) FROM vectors v JOIN documents d ON d.id = v.document_id WHERE d.workspace_id::text = $1",
            &[&workspace_id],
        )?
        .get(0);
    let dimension: Option<i32> = source
        .query_opt(
            "SELECT vector_dims(v.embedding) FROM vectors v JOIN documents d ON d.id = v.document_id WHERE d.workspace_id::text = $1 LIMIT 1",
            &[&workspace_id],
        )?
        .map(|row| row.get(0));
    if documents == 0 {
        return Err(Error::Invalid(format!("PostgreSQL has no documents with workspace_id `{workspace_id}`")));
    }
    let dimension = dimension.map_or(clawfs::DIMENSION_RANGE.start().to_owned(), |d| d as usize);
    let clawfs = Clawfs::new(Config { vector_dimension: dimension, ..Config::new(&options.clawfs_root) })?;
    // Refuses an existing workspace: a migration never merges into one.
    clawfs.create_workspace(&options.workspace, "migration")?;
    let copied = copy(&mut source, &clawfs, options, documents as u64, dimension);
    drop(source);
    match copied {
        Ok((vectors, batches, digest)) => Ok(Report {
            documents: documents as u64,
            vectors,
            superseded_vectors: all_vectors as u64 - vectors,
            batches,
            dimension,
            digest,
            elapsed: started.elapsed(),
        }),
        Err(error) => {
            // Rollback: the workspace exists only because of this run.
            if let Err(cleanup) = clawfs.delete_workspace(&options.workspace) {
                return Err(Error::Invalid(format!("{error}; removing the partial workspace failed too: {cleanup}")));
            }
            Err(error)
        }
    }
}

/// Streams the documents into the workspace; returns (vectors, batches, digest).
fn copy(
    source: &mut postgres::Transaction<'_>,
    clawfs: &Clawfs,
    options: &Options,
    documents: u64,
    dimension: usize,
) -> Result<(u64, u64, String), Error> {
    let mut index = clawfs.open_memory(&options.workspace, None)?;
    let bar = if options.progress { ProgressBar::new(documents) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} documents ({per_sec}, {eta} left)").expect("valid template"),
    );
    let portal = source.bind(DOCUMENTS, &[&options.source_workspace_id])?;
    let (mut hasher, mut copied, mut vectors, mut batches) = (Sha256::new(), 0u64, 0u64, 0u64);
    loop {
        let rows = source.query_portal(&portal, options.batch_size as i32)?;
        if rows.is_empty() {
            break;
        }
        let mut batch = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: String = row.try_get(0)?;
            let content: String = row.try_get(1)?;
            let heading: Option<String> = row.try_get::<_, Option<String>>(2)?.or(row.try_get(3)?);
            let embedding: Option<Vec<f32>> = row.try_get::<_, Option<Vector>>(4)?.map(Vec::from);
            if let Some(found) = embedding.as_ref().map(Vec::len).filter(|found| *found != dimension) {
                return Err(Error::Invalid(format!(
                    "document {id} has a {found}-dimension vector; the others have {dimension}"
                )));
            }
            let path = format!("pg/{}/{id}", options.source_workspace_id);
            let heading = heading.unwrap_or_default();
            clawfs::digest_chunk(&mut hasher, &path, &content, embedding.as_deref());
            vectors += u64::from(embedding.is_some());
            let chunk = Chunk { id: chunk_id(&path, &heading, 0, &content), path, heading, ordinal: 0, content };
            batch.push((chunk, embedding));
        }
        copied += rows.len() as u64;
        index.insert_embedded(batch, &options.model_id)?;
        batches += 1;
        bar.set_position(copied);
    }
    bar.finish_and_clear();
    index.save()?;
    let expected = format!("{:x}", hasher.finalize());
    let (count, digest) = index.digest()?;
    let digest: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    if count != documents || copied != documents {
        return Err(Error::Verification(format!(
            "PostgreSQL has {documents} documents, {copied} were read and the workspace holds {count}"
        )));
    }
    if digest != expected {
        return Err(Error::Verification(format!(
            "the workspace's SHA-256 {digest} differs from the source's {expected}"
        )));
    }
    if index.vector_count() != vectors {
        return Err(Error::Verification(format!(
            "{vectors} vectors were read and the workspace holds {}",
            index.vector_count()
        )));
    }
    Ok((vectors, batches, digest))
}

//! ClawFS: where ClawOS agents keep what they know (specs/clawfs/README.md).
//!
//! This crate owns the `/clawfs` namespace (specs/clawfs/README.md,
//! "Namespace"), the naming rules ("Names"), user workspaces with their
//! `metadata.json` ("Workspaces"), and the hybrid memory search of each
//! workspace ("Memory search"): FTS5 keyword search and usearch HNSW
//! vector search fused into one ranking. Workspace databases are AgentFS
//! databases (`clawos-agentfs`); the search tables live beside AgentFS's in
//! the same file. Serving it over IPC is `clawos-fs-engine`'s job, the
//! command line `clawctl`'s.
//!
//! Core concepts:
//! - [`layout`] names everything ClawFS lays out under `/clawfs` (an
//!   agent's `workspace.db`, its brain files, a workspace's
//!   `metadata.json`, ...): every module and every other crate spells
//!   those names through it.
//! - [`Clawfs`] is an instance: a root and one vector dimension for every
//!   workspace ([`Config`]). Changing the dimension is [`Clawfs::reindex`],
//!   never implicit.
//! - [`MemoryIndex`] is one workspace's search index: documents go in as
//!   Markdown, are cut into chunks with stable IDs ([`chunk`]), and come out
//!   of [`MemoryIndex::search`] with their provenance and a report of which
//!   search legs ran.
//! - [`Embedder`] turns text into vectors; [`HashingEmbedder`] is the
//!   offline default, [`OpenAiEmbedder`] calls an embeddings service, and
//!   [`CachedEmbedder`] keeps either from embedding a text twice (the real
//!   in-process model is `clawos-minilm`, which implements the trait).
//! - [`memory`] is an agent's memory: entries in the agent's Markdown
//!   files, recalled through a [`MemoryIndex`] of those files in the
//!   agent's `workspace.db`, rebuilt from the files alone when asked.
//! - [`files`] reads and writes plain files under `/clawfs` for an agent or
//!   the operator, with the access rule RULE-001; its path rules (no `..`,
//!   never through a symlink) serve the tool host too.
//! - [`audit`] is the ClawFS audit log every file operation under
//!   `/clawfs` is recorded in, by fs-engine and by the tool host alike.
//! - [`Clawfs::create_snapshot`] and its siblings keep consistent daily
//!   copies of a workspace ([`Snapshot`]) and restore them.
//! - [`Clawfs::read_identity`] and [`Clawfs::update_identity`] verify and
//!   atomically rewrite an agent's identity file ([`Identity`]), with
//!   backups and schema migrations.

pub mod audit;
mod bm25;
pub mod chunk;
pub mod embed;
mod error;
pub mod files;
mod fsio;
pub mod goals;
pub mod history;
mod identity;
mod index;
pub mod layout;
pub mod memory;
mod metadata;
pub mod names;
pub mod namespace;
pub mod search;
mod snapshot;
mod workspace;

pub use embed::{CachedEmbedder, EmbedError, Embedder, HashingEmbedder, OpenAiConfig, OpenAiEmbedder};
pub use error::{Error, Result};
pub use files::{DirEntry, EntryKind};
pub use fsio::write_json_atomic;
pub use identity::{
    Heuristic, History, Identity, IdentityBackup, LearnedPattern, Memory, Performance, State, IDENTITY_BACKUPS_KEPT,
    IDENTITY_VERSION,
};
pub use index::{digest_chunk, Embedding, IndexReport, MemoryIndex, Pending};
pub use layout::{DATABASE_FILE, HNSW_FILE, HNSW_SIDECAR_FILE, SEARCH_FILE};
pub use metadata::{HnswParams, WorkspaceMetadata};
pub use namespace::{
    agent_dir, create_namespace, identity_checksum, initial_identity, DirSpec, NamespaceReport, Owners,
    AGENT_DIR_GROUP, AGENT_DIR_MODE, AGENT_DIR_OWNER, TOP_LEVEL,
};
pub use search::{Fusion, LegReport, SearchHit, SearchRequest, SearchResponse};
pub use snapshot::Snapshot;
pub use workspace::{Clawfs, Config, DIMENSION_RANGE};

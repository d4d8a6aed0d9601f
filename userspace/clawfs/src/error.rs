//! The one error type of the crate: every variant names what failed and on
//! which path, so the operator sees a reason rather than a bare errno.

use std::path::PathBuf;

use crate::names::NameError;

/// What went wrong in a ClawFS operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A name broke a rule of specs/clawfs/README.md ("Names").
    #[error(transparent)]
    Name(#[from] NameError),
    /// A filesystem call failed.
    #[error("{operation} {path}: {source}")]
    Io {
        /// The call, e.g. "create directory".
        operation: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A user or group of the namespace table (specs/clawfs/README.md,
    /// "Namespace") does not exist on this system.
    #[error("{kind} `{name}` does not exist (needed to own {path}); is sysusers.d/clawos-clawfs.conf installed?")]
    NoSuchOwner {
        /// "user" or "group".
        kind: &'static str,
        /// Its name.
        name: String,
        /// The directory it should own.
        path: PathBuf,
    },
    /// The workspace exists already.
    #[error("workspace `{0}` already exists")]
    WorkspaceExists(String),
    /// The workspace does not exist.
    #[error("workspace `{0}` does not exist")]
    NoSuchWorkspace(String),
    /// A workspace's vector dimension differs from the instance's.
    #[error(
        "workspace `{workspace}` stores {found}-dimension vectors but this instance uses {expected}; \
         run `clawctl workspace reindex --dimension {expected}` to convert it"
    )]
    DimensionMismatch {
        /// The workspace.
        workspace: String,
        /// The instance's dimension.
        expected: usize,
        /// The workspace's dimension.
        found: usize,
    },
    /// A configuration value outside its documented range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An identity file failed verification (specs/clawfs/README.md,
    /// "Identity files"); `backup` names the newest backup that verifies,
    /// for `clawctl identity restore`.
    #[error("identity file of `{agent}` is corrupt: {reason}{}", match backup {
        Some(name) => format!("; the last good backup is {name}"),
        None => "; no good backup is kept".to_owned(),
    })]
    IdentityCorrupt {
        /// The agent.
        agent: String,
        /// What failed.
        reason: String,
        /// The newest backup that verifies, if any.
        backup: Option<String>,
    },
    /// An identity file of a schema version newer than this build.
    #[error("identity file of `{agent}` has schema version {version}; this ClawOS knows up to {supported}")]
    IdentityTooNew {
        /// The agent.
        agent: String,
        /// The file's version.
        version: u64,
        /// The newest this build reads.
        supported: u64,
    },
    /// No identity backup of that name.
    #[error("agent `{agent}` has no identity backup named {name}")]
    NoSuchIdentityBackup {
        /// The agent.
        agent: String,
        /// The name asked for.
        name: String,
    },
    /// A JSON file could not be read or written.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The SQLite database failed.
    #[error("workspace database {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// The AgentFS layer refused to create or open the workspace database.
    #[error("AgentFS workspace {path}: {source}")]
    AgentFs {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: agentfs::Error,
    },
    /// The usearch HNSW index failed.
    #[error("HNSW index {path}: {message}")]
    Hnsw {
        /// The index file.
        path: PathBuf,
        /// usearch's reason.
        message: String,
    },
    /// The workspace has no snapshot of that name.
    #[error("workspace `{workspace}` has no snapshot `{file}`")]
    NoSuchSnapshot {
        /// The workspace.
        workspace: String,
        /// The snapshot file asked for.
        file: String,
    },
    /// The agent has no memory entry with that ID.
    #[error("agent `{agent}` has no memory entry `{id}`")]
    NoSuchMemory {
        /// The agent.
        agent: String,
        /// The entry ID asked for.
        id: String,
    },
    /// A snapshot the AgentFS checker finds inconsistent: never kept, never restored.
    #[error("snapshot {path} is inconsistent, refused: {report}")]
    InconsistentSnapshot {
        /// The snapshot file.
        path: PathBuf,
        /// The checker's report.
        report: String,
    },
    /// An embedder failed.
    /// A file request that the access rules refuse (spec RULE-001) or that
    /// cannot be served as asked.
    #[error("{path}: refused: {reason}")]
    Denied {
        /// The path as asked.
        path: String,
        /// Why.
        reason: String,
    },
    #[error("embedder: {0}")]
    Embed(#[from] crate::embed::EmbedError),
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds the [`Error::Io`] mapper for `operation` on `path`.
pub(crate) fn io(operation: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { operation, path, source }
}

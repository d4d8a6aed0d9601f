//! fs-engine: ClawFS over IPC (`specs/clawfs/README.md`): files under
//! `/clawfs` with the access rules checked per request, user workspaces and
//! their hybrid memory search, snapshots, and agents' identity files.

/// The ClawFS data types these methods carry, so clients need not name `clawfs`.
pub use clawfs::memory::{Hygiene, MemoryEntry, Recall, RecallHit, Reindexed};
pub use clawfs::{
    DirEntry, EntryKind, Fusion, Identity, IndexReport, LegReport, SearchHit, SearchResponse, Snapshot,
    WorkspaceMetadata,
};
use serde::{Deserialize, Serialize};

use crate::{Done, NoParams};

service! {
    component: Some(clawos_ipc::ComponentId::FsEngine);
    /// Reads a file, as text when it is UTF-8, else base64.
    fn read_file(ReadFile) -> FileContent { timeout_ms: 5000, errors: [Eperm, Enoent, Eio] }
    /// Writes (or appends to) a file, atomically when replacing.
    fn write_file(WriteFile) -> FileWritten { timeout_ms: 5000, errors: [Eperm, Enoent, Eio] }
    /// Lists a directory, sorted by name.
    fn list_dir(FilePath) -> DirListing { timeout_ms: 5000, errors: [Eperm, Enoent, Eio] }
    /// Deletes a file or an empty directory.
    fn delete_file(FilePath) -> FileDeleted { timeout_ms: 5000, errors: [Eperm, Enoent, Eio] }
    /// Creates a user workspace.
    fn workspace_create(WorkspaceCreate) -> WorkspaceMetadata { timeout_ms: 30000, errors: [Eio] }
    /// Every user workspace's metadata.
    fn workspace_list(NoParams) -> WorkspaceList { timeout_ms: 30000, errors: [Eio] }
    /// Deletes a user workspace with its index and snapshots.
    fn workspace_delete(WorkspaceName) -> Done { timeout_ms: 30000, errors: [Enoent, Eio] }
    /// Indexes (or re-indexes) one document of a workspace's memory.
    fn memory_index(MemoryIndex) -> IndexReport { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Removes one document from a workspace's memory index.
    fn memory_remove(MemoryRemove) -> MemoryRemoved { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Hybrid (keyword + vector) search of a workspace's memory.
    // 30 s, as memory_recall: the first search of a workspace opens its
    // index, the query is embedded, and fs-engine may be indexing an agent's
    // memory files meanwhile (one lock), seconds each on a slow CPU.
    fn memory_search(MemorySearch) -> SearchResponse { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Stores a memory of an agent: a new entry in its category's file,
    /// indexed before the answer.
    fn memory_store(MemoryStore) -> MemoryEntry { timeout_ms: 30000, errors: [Eperm, Eio] }
    /// Hybrid search of an agent's memory files.
    fn memory_recall(MemoryRecall) -> Recall { timeout_ms: 30000, errors: [Eperm, Eio] }
    /// One memory entry of an agent.
    fn memory_get(MemoryId) -> MemoryEntry { timeout_ms: 5000, errors: [Eperm, Enoent, Eio] }
    /// An agent's newest memory entries, newest first.
    fn memory_list(MemoryList) -> MemoryEntries { timeout_ms: 5000, errors: [Eperm, Eio] }
    /// Removes a memory entry from its file and from the index.
    fn memory_forget(MemoryId) -> MemoryEntry { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// How many memory entries an agent has.
    fn memory_count(MemoryCount) -> MemoryCounted { timeout_ms: 5000, errors: [Eperm, Eio] }
    /// Rebuilds an agent's memory index from its files alone.
    fn memory_reindex(AgentRef) -> Reindexed { timeout_ms: 30000, errors: [Eperm, Eio] }
    /// Archives an agent's old daily logs and purges old archives.
    fn memory_hygiene(MemoryHygiene) -> Hygiene { timeout_ms: 30000, errors: [Eperm, Eio] }
    /// Takes today's snapshot of a workspace database.
    fn snapshot_create(WorkspaceRef) -> Snapshot { timeout_ms: 30000, errors: [Enoent, Eio] }
    /// A workspace's snapshots, oldest first.
    fn snapshot_list(WorkspaceRef) -> SnapshotList { timeout_ms: 30000, errors: [Enoent, Eio] }
    /// Replaces a workspace database with one of its snapshots.
    fn snapshot_restore(SnapshotRestore) -> Done { timeout_ms: 30000, errors: [Enoent, Eio] }
    /// Keeps a workspace's newest `keep` snapshots and removes the rest.
    fn snapshot_prune(SnapshotPrune) -> SnapshotsPruned { timeout_ms: 30000, errors: [Enoent, Eio] }
    /// An agent's identity file.
    fn identity_get(AgentRef) -> Identity { timeout_ms: 30000, errors: [Enoent, Eio] }
    /// Records one finished task in an agent's identity file.
    fn identity_record_task(IdentityRecordTask) -> Identity { timeout_ms: 30000, errors: [Enoent, Eio] }
    /// The kept earlier versions of an agent's identity file, oldest first.
    fn identity_backups(AgentRef) -> IdentityBackups { timeout_ms: 30000, errors: [Enoent, Eio] }
    /// Restores an agent's identity file from one of its backups.
    fn identity_restore(IdentityRestore) -> Identity { timeout_ms: 30000, errors: [Enoent, Eio] }
    /// Creates an agent's directory (`workspace.db`, `state.json`,
    /// `identity.json`, `logs/`, `cache/`) with its `config.toml`; an
    /// existing agent is EPERM (the protocol has no EEXIST). agent-loop calls
    /// it for `agent_create`.
    fn agent_dir_create(AgentDirCreate) -> AgentDirCreated { timeout_ms: 30000, errors: [Eperm, Eio] }
    /// Removes an agent's directory and everything in it.
    fn agent_dir_remove(AgentRef) -> Done { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Commits an agent's files as they are to its history, authored by
    /// the agent (agent-loop, at the end of a turn) or the operator; no
    /// commit when nothing changed.
    fn agent_commit(AgentCommit) -> AgentCommitted { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// An agent's newest commits, newest first.
    fn agent_history(AgentHistory) -> AgentCommits { timeout_ms: 30000, errors: [Enoent, Eio] }
    /// Puts an agent's files back as a commit left them, as a new commit
    /// (the operator's; changes not yet committed are committed first).
    fn agent_rollback(AgentRollback) -> Commit { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Makes a goal of an agent (`goals/<state>/<id>.md`).
    fn goal_create(GoalCreate) -> Goal { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Changes a goal: its state (the file moves; a history commit marks
    /// the boundary), a log line, an artifact.
    fn goal_update(GoalUpdate) -> Goal { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// An agent's goals (one state's, or all), by state then id.
    fn goal_list(GoalQuery) -> Goals { timeout_ms: 5000, errors: [Enoent, Eio] }
}

pub use clawfs::goals::{Goal, State as GoalState};
pub use clawfs::history::Commit;

/// Published when a goal is made or changes state: `agent`, `goal`, `from`
/// (absent for a new one), `to`.
pub const GOAL_CHANGED: &str = "goal.changed";

/// `goal_create` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalCreate {
    /// The agent.
    pub agent: String,
    /// One line.
    pub title: String,
    /// What it is about.
    #[serde(default)]
    pub description: String,
    /// Its id (1-64 of a-z, 0-9, -); from the title when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The goal it is a sub-goal of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// `proposed` or `active` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<GoalState>,
}

/// `goal_update` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalUpdate {
    /// The agent.
    pub agent: String,
    /// The goal.
    pub id: String,
    /// Its new state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<GoalState>,
    /// A line for its log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A file of the agent's it produced (relative to its directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
}

/// `goal_list` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalQuery {
    /// The agent.
    pub agent: String,
    /// Only goals in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<GoalState>,
}

/// `goal_list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Goals {
    /// By state, then id.
    pub goals: Vec<Goal>,
}

/// `agent_commit` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentCommit {
    /// The agent.
    pub agent: String,
    /// The commit message (its first line is the subject).
    pub message: String,
}

/// `agent_commit` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentCommitted {
    /// The commit, or none when nothing changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<Commit>,
}

/// `agent_history` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentHistory {
    /// The agent.
    pub agent: String,
    /// At most this many (default 20, at most 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `agent_history` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentCommits {
    /// Newest first.
    pub commits: Vec<Commit>,
}

/// `agent_rollback` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRollback {
    /// The agent.
    pub agent: String,
    /// The commit to go back to: its id, or a unique prefix of it.
    pub commit: String,
}

/// `read_file` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFile {
    /// The file, absolute under `/clawfs`.
    pub path: String,
    /// The agent the request acts for; a component must name one, the
    /// operator acts as itself without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Where to start, bytes.
    #[serde(default)]
    pub offset: u64,
    /// At most this many bytes (the protocol's message limit caps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<usize>,
}

/// `read_file` result: `content` or `content_base64`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileContent {
    /// The file as ClawFS names it.
    pub path: String,
    /// Its whole size, bytes.
    pub size: u64,
    /// Whether the read reached its end.
    pub eof: bool,
    /// The bytes read, when they are UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The bytes read, base64, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
}

/// `write_file` params: exactly one of `content` and `content_base64`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    /// The file, absolute under `/clawfs`.
    pub path: String,
    /// The agent the request acts for (see `read_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// UTF-8 text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
    /// Append instead of replacing the file.
    #[serde(default)]
    pub append: bool,
    /// Create missing parent directories.
    #[serde(default)]
    pub create_dirs: bool,
}

/// `write_file` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileWritten {
    /// The file as ClawFS names it.
    pub path: String,
    /// Bytes written by this request.
    pub bytes_written: usize,
    /// The file's size afterwards.
    pub size: u64,
}

/// `list_dir` and `delete_file` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilePath {
    /// The path, absolute under `/clawfs`.
    pub path: String,
    /// The agent the request acts for (see `read_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// `list_dir` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirListing {
    /// The directory as ClawFS names it.
    pub path: String,
    /// Its entries, sorted by name.
    pub entries: Vec<DirEntry>,
}

/// `delete_file` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileDeleted {
    /// What was deleted, as ClawFS names it.
    pub path: String,
}

/// `workspace_create` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceCreate {
    /// The new workspace's name.
    pub name: String,
    /// Who owns it. Default `user`.
    #[serde(default = "default_owner")]
    pub owner: String,
}

fn default_owner() -> String {
    "user".into()
}

/// `workspace_list` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceList {
    /// Every workspace's metadata, by name.
    pub workspaces: Vec<WorkspaceMetadata>,
}

/// `workspace_delete` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceName {
    /// The workspace.
    pub name: String,
}

/// Params naming one workspace (`snapshot_create`, `snapshot_list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceRef {
    /// The workspace.
    pub workspace: String,
}

/// `memory_index` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryIndex {
    /// The workspace.
    pub workspace: String,
    /// The document's path inside the workspace (its identity in the index).
    pub path: String,
    /// Its Markdown text.
    pub content: String,
}

/// `memory_remove` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryRemove {
    /// The workspace.
    pub workspace: String,
    /// The document's path inside the workspace.
    pub path: String,
}

/// `memory_remove` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryRemoved {
    /// Chunks removed.
    pub removed: usize,
}

/// `memory_search` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearch {
    /// The workspace.
    pub workspace: String,
    /// The query text, used by both legs.
    pub query: String,
    /// How many results. Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// How the legs are fused. Default: weighted, 0.7 vector + 0.3 keyword.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusion: Option<Fusion>,
}

/// `snapshot_list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotList {
    /// Oldest first.
    pub snapshots: Vec<Snapshot>,
}

/// `snapshot_restore` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRestore {
    /// The workspace.
    pub workspace: String,
    /// The snapshot's file name (`snapshot-YYYY-MM-DD.db`).
    pub file: String,
}

/// `snapshot_prune` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotPrune {
    /// The workspace.
    pub workspace: String,
    /// How many of the newest snapshots to keep.
    pub keep: usize,
}

/// `snapshot_prune` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotsPruned {
    /// The snapshot files removed.
    pub removed: Vec<String>,
}

/// Params naming one agent (`identity_get`, `identity_backups`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRef {
    /// The agent.
    pub agent: String,
}

/// `identity_record_task` params: one finished task, as the agent loop
/// reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentityRecordTask {
    /// The agent.
    pub agent: String,
    /// What the task was.
    pub task: String,
    /// Whether it succeeded.
    pub success: bool,
    /// How long it took, milliseconds.
    pub duration_ms: u64,
}

/// `identity_backups` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IdentityBackups {
    /// Backup names, oldest first.
    pub backups: Vec<String>,
}

/// `identity_restore` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentityRestore {
    /// The agent.
    pub agent: String,
    /// The backup's name (from `identity_backups`).
    pub backup: String,
}

/// `agent_dir_create` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentDirCreate {
    /// The new agent (specs/clawfs/README.md, "Names").
    pub agent: String,
    /// Its `config.toml`, already checked by agent-loop.
    pub config: String,
}

/// `agent_dir_create` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentDirCreated {
    /// The agent's directory as ClawFS names it.
    pub path: String,
}

/// `memory_store` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryStore {
    /// The agent.
    pub agent: String,
    /// The text (at most 8 KiB).
    pub content: String,
    /// `core` (default), `daily`, `conversation` or a custom name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// The caller's key for this store: the entry's ID is derived from it,
    /// so storing again with the same key finds the entry instead of
    /// adding a second (an agent resuming after a crash). At most 256 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// `memory_recall` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryRecall {
    /// The agent.
    pub agent: String,
    /// What to look for, in words.
    pub query: String,
    /// Only entries of this category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// How many results. Default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `memory_get` and `memory_forget` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryId {
    /// The agent.
    pub agent: String,
    /// The entry's ID.
    pub id: String,
}

/// `memory_list` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryList {
    /// The agent.
    pub agent: String,
    /// Only entries of this category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// How many. Default 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `memory_list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryEntries {
    /// Newest first.
    pub entries: Vec<MemoryEntry>,
}

/// `memory_count` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryCount {
    /// The agent.
    pub agent: String,
    /// Only entries of this category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

/// `memory_count` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryCounted {
    /// Entries.
    pub count: usize,
}

/// `memory_hygiene` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryHygiene {
    /// The agent.
    pub agent: String,
    /// Daily logs older than this many days leave recall for `archive/logs/`. Default 30.
    #[serde(default = "default_archive_after_days")]
    pub archive_after_days: u32,
    /// Archived logs older than this many days are deleted. Default 365.
    #[serde(default = "default_purge_after_days")]
    pub purge_after_days: u32,
}

/// Days before hygiene archives a daily log.
pub fn default_archive_after_days() -> u32 {
    30
}

/// Days before hygiene deletes an archived log.
pub fn default_purge_after_days() -> u32 {
    365
}

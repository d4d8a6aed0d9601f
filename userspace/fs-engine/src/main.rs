//! `clawos-fs-engine`: serves ClawFS over IPC: files under `/clawfs` for
//! agents and the operator (`read_file`, `write_file`, `list_dir`,
//! `delete_file`, with RULE-001 checked per request), user workspaces
//! (`workspace_create`, `workspace_list`, `workspace_delete`) and their
//! hybrid memory search (`memory_index`, `memory_remove`, `memory_search`),
//! snapshots and identity files. Methods and parameters:
//! `specs/clawfs/README.md`. Which component may call which method is the
//! IPC ACL's job (`ipc-acl.toml`); which paths a request may touch is ours.
//! Every file and memory operation, allowed or refused, goes to the audit
//! log first (`clawfs::audit`); when it cannot be written, the request fails.
//!
//! Owns the workspace databases and their HNSW files under
//! `/clawfs/workspaces`; the storage and search logic is `clawos-clawfs`.

mod embedder;
mod files;
mod memories;
mod watch;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawfs::memory::{AgentMemory, Category, Hygiene, MemoryEntry, Recall, Reindexed};
use clawfs::{
    Clawfs, Config, Embedder, IndexReport, Owners, SearchRequest, SearchResponse, Snapshot, WorkspaceMetadata,
};
use clawos_api::fs_engine::{
    self, AgentCommit, AgentCommits, AgentCommitted, AgentDirCreate, AgentDirCreated, AgentHistory, AgentRef,
    AgentRollback, Commit, DirListing, FileContent, FileDeleted, FilePath, FileWritten, Goal, GoalCreate, GoalQuery,
    GoalState, GoalUpdate, Goals, IdentityBackups, IdentityRecordTask, IdentityRestore, MemoryCount, MemoryCounted,
    MemoryEntries, MemoryHygiene as MemoryHygieneParams, MemoryId, MemoryIndex, MemoryList, MemoryRecall, MemoryRemove,
    MemoryRemoved, MemorySearch, MemoryStore, ReadFile, SnapshotList, SnapshotPrune, SnapshotRestore, SnapshotsPruned,
    WorkspaceCreate, WorkspaceList, WorkspaceName, WorkspaceRef, WriteFile,
};
use clawos_api::{Call, Done, NoParams, MAX_IDEMPOTENCY_KEY};
use clawos_ipc::server::MethodError;
use clawos_ipc::{ComponentId, ErrorCode, Object, Principal, Request};
use clawos_runtime::{Component, Runtime};
use serde::Deserialize;

/// `[component]` settings of fs-engine's TOML config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DaemonConfig {
    /// The ClawFS root. Default `/clawfs`.
    #[serde(default = "default_clawfs_root")]
    clawfs_root: PathBuf,
    /// The instance's one vector dimension (specs/clawfs/README.md,
    /// "Workspaces"). Default 1536.
    #[serde(default = "default_vector_dimension")]
    vector_dimension: usize,
    /// The ClawFS audit log. Default `/var/log/clawos/clawfs-audit.log`.
    #[serde(default = "default_audit_log")]
    audit_log: PathBuf,
    /// The memory search embedder. Default: the offline hashing embedder.
    #[serde(default)]
    embedder: embedder::EmbedderConfig,
    /// Agents' daily logs older than this many days are archived by the
    /// daily hygiene (specs/agent/README.md, "Memory"). Default 30.
    #[serde(default = "fs_engine::default_archive_after_days")]
    memory_archive_after_days: u32,
    /// Archived logs older than this many days are deleted. Default 365.
    #[serde(default = "fs_engine::default_purge_after_days")]
    memory_purge_after_days: u32,
}

fn default_audit_log() -> PathBuf {
    PathBuf::from(clawfs::audit::DEFAULT_PATH)
}

/// How long reading the embeddings API key from the vault may take.
const VAULT_TIMEOUT: Duration = Duration::from_secs(5);

fn default_clawfs_root() -> PathBuf {
    PathBuf::from("/clawfs")
}

fn default_vector_dimension() -> usize {
    1536
}

/// Open indexes by workspace; opening verifies the HNSW file, so it is
/// done once per workspace, not per request. (Agents' memory indexes have
/// a lock each: `memories`.)
struct State {
    clawfs: Clawfs,
    /// The embedder, or why it could not be set up (searches say so).
    embedder: Result<Arc<dyn Embedder>, String>,
    indexes: HashMap<String, clawfs::MemoryIndex>,
    namespace: Namespace,
}

/// Whether the ClawFS namespace has been created (or checked).
enum Namespace {
    NotTried,
    Ready,
    /// The last attempt failed, for this reason.
    Failed(String),
}

impl State {
    /// Creates the namespace if that has not succeeded yet; every ClawFS
    /// method needs it.
    fn ensure_namespace(&mut self) -> Result<(), MethodError> {
        if matches!(self.namespace, Namespace::Ready) {
            return Ok(());
        }
        // Owners were set by systemd-tmpfiles at boot; fs-engine is not root.
        match self.clawfs.init(Owners::Keep) {
            Ok(report) => {
                if !report.created.is_empty() {
                    tracing::info!(created = ?report.created, "ClawFS namespace completed");
                }
                self.namespace = Namespace::Ready;
                Ok(())
            }
            Err(error) => {
                let reason = format!("cannot create the ClawFS namespace: {error}");
                self.namespace = Namespace::Failed(reason.clone());
                Err(MethodError::new(ErrorCode::Eio, reason))
            }
        }
    }

    /// Searches `workspace`; when the embedder could not be set up, the
    /// vector leg's report says so rather than just "no embedder".
    fn search(&mut self, workspace: &str, request: &SearchRequest) -> Result<clawfs::SearchResponse, MethodError> {
        let mut response = self.index(workspace)?.search(request).map_err(method_error)?;
        if let (Err(reason), clawfs::LegReport::NotRun { .. }) = (&self.embedder, &response.vector) {
            response.vector =
                clawfs::LegReport::NotRun { reason: format!("the embedder could not be set up: {reason}") };
        }
        Ok(response)
    }

    fn index(&mut self, workspace: &str) -> Result<&mut clawfs::MemoryIndex, MethodError> {
        if !self.indexes.contains_key(workspace) {
            let index = self.clawfs.open_memory(workspace, self.embedder.clone().ok()).map_err(method_error)?;
            self.indexes.insert(workspace.to_owned(), index);
        }
        Ok(self.indexes.get_mut(workspace).expect("inserted above"))
    }
}

struct Daemon {
    state: Arc<Mutex<State>>,
    /// Agents' memory indexes, a lock each.
    memories: Arc<memories::AgentMemories>,
    /// The file methods, and the audit log every file and memory request
    /// is written to first.
    files: Arc<files::FileService>,
    /// For `goal.changed`.
    runtime: Runtime,
}

/// Records one finished task in `identity` (identity files are updated
/// after each task the agent loop reports: specs/clawfs/README.md,
/// "Identity files").
fn record_task(identity: &mut clawfs::Identity, task: &IdentityRecordTask) {
    let history = &mut identity.history;
    let before = history.total_executions;
    let succeeded = (history.success_rate * before as f64).round() + f64::from(u8::from(task.success));
    history.total_executions += 1;
    history.success_rate = succeeded / history.total_executions as f64;
    if task.success {
        history.completed_tasks.push(task.task.clone());
    } else {
        history.failed_tasks.push(task.task.clone());
    }
    let performance = &mut identity.performance;
    performance.avg_execution_time_ms =
        (performance.avg_execution_time_ms * before + task.duration_ms) / history.total_executions;
}

/// The category a request names, if it names one (EPROTO when it is no category).
fn category(name: Option<&str>) -> Result<Option<Category>, MethodError> {
    name.map(Category::parse).transpose().map_err(|e| MethodError::new(ErrorCode::Eproto, e.to_string()))
}

/// Maps a ClawFS error to the IPC code a caller can act on: EPERM for a
/// path the access rules refuse, EPROTO for a request that cannot succeed
/// as asked (bad name, name taken), ENOENT for a missing workspace or file,
/// EIO for storage failures.
pub(crate) fn method_error(error: clawfs::Error) -> MethodError {
    let code = match &error {
        clawfs::Error::Denied { .. } => ErrorCode::Eperm,
        clawfs::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => ErrorCode::Enoent,
        clawfs::Error::Name(_) | clawfs::Error::Config(_) | clawfs::Error::WorkspaceExists(_) => ErrorCode::Eproto,
        clawfs::Error::NoSuchWorkspace(_)
        | clawfs::Error::NoSuchMemory { .. }
        | clawfs::Error::NoSuchIdentityBackup { .. }
        | clawfs::Error::NoSuchSnapshot { .. } => ErrorCode::Enoent,
        _ => ErrorCode::Eio,
    };
    MethodError::new(code, error.to_string())
}

impl Daemon {
    /// Publishes `goal.changed` for a goal made (`from` none) or moved.
    fn goal_changed(&self, agent: &str, goal: &Goal, from: Option<GoalState>) {
        let mut data = clawos_ipc::Object::new();
        data.insert("agent".into(), agent.into());
        data.insert("goal".into(), goal.id.clone().into());
        if let Some(from) = from {
            data.insert("from".into(), from.as_str().into());
        }
        data.insert("to".into(), goal.state.as_str().into());
        self.runtime.publish(fs_engine::GOAL_CHANGED, data);
    }

    fn start(runtime: &Runtime) -> Result<Daemon, String> {
        let config: DaemonConfig =
            runtime.config().component.clone().try_into().map_err(|e| format!("[component] settings: {e}"))?;
        let clawfs =
            Clawfs::new(Config { vector_dimension: config.vector_dimension, ..Config::new(&config.clawfs_root) })
                .map_err(|e| e.to_string())?;
        let handle = tokio::runtime::Handle::current();
        let secrets: embedder::SecretSource = Arc::new(move |secret: &str| {
            clawos_runtime::peers::vault_secret(&handle, ComponentId::FsEngine, secret, VAULT_TIMEOUT)
        });
        let embedder = embedder::build(&config.embedder, config.vector_dimension, secrets);
        match &embedder {
            Ok(embedder) => {
                tracing::info!(model = embedder.model_id(), dimension = embedder.dimension(), "memory search embedder")
            }
            Err(reason) => {
                tracing::error!("memory search has no vector leg: the embedder could not be set up: {reason}")
            }
        }
        let audit = clawfs::audit::AuditLog::open(&config.audit_log)
            .map_err(|e| format!("cannot open the audit log {}: {e}", config.audit_log.display()));
        if let Err(reason) = &audit {
            tracing::error!("{reason}; file and memory requests will be refused");
        }
        let root_exists = config.clawfs_root.is_dir();
        let memories = Arc::new(memories::AgentMemories::new(clawfs.clone(), embedder.clone().ok()));
        memories.embed_in_background().map_err(|error| format!("no thread to embed memories: {error}"))?;
        let mut state = State { clawfs, embedder, indexes: HashMap::new(), namespace: Namespace::NotTried };
        if root_exists {
            // A failure here makes the component degraded, not dead: the
            // runtime's own methods still answer and the next request retries.
            if let Err(error) = state.ensure_namespace() {
                tracing::error!("{}", error.message);
            }
            // What a stop between an agent's removal and its deletion left.
            if let Err(error) = clawfs::namespace::delete_removed(&config.clawfs_root, None) {
                tracing::error!("removed agents' directories are left in agents/.removed: {error}");
            }
        } else {
            // On the appliance /clawfs is always mounted (RequiresMountsFor);
            // without it there is nothing to serve yet, which is not a fault.
            tracing::warn!(
                "ClawFS root {} does not exist; ClawFS methods will fail until it does",
                config.clawfs_root.display()
            );
        }
        let files = Arc::new(files::FileService::new(config.clawfs_root.clone(), audit));
        let state = Arc::new(Mutex::new(state));
        let hygiene = watch::Hygiene {
            archive_after_days: config.memory_archive_after_days,
            purge_after_days: config.memory_purge_after_days,
        };
        if let Err(error) = watch::start(&config.clawfs_root, memories.clone(), hygiene) {
            tracing::error!("agents' memory files will not be re-indexed when they change: {error}");
        }
        Ok(Daemon { state, memories, files, runtime: runtime.clone() })
    }

    /// Runs `work` with the state (the namespace made first) on the
    /// blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut State) -> Result<T, MethodError> + Send + 'static,
    ) -> Result<T, MethodError> {
        let state = self.state.clone();
        off_runtime(move || {
            let mut state = state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            state.ensure_namespace()?;
            work(&mut state)
        })
        .await
    }

    /// Audits a memory operation of `caller` on workspace `workspace`
    /// (`path` inside it, if any) before it runs.
    fn audit_memory(
        &self,
        caller: Principal,
        operation: &str,
        workspace: &str,
        path: Option<&str>,
    ) -> Result<(), MethodError> {
        let target = match path {
            Some(path) => format!("/clawfs/workspaces/{workspace}/{path}"),
            None => format!("/clawfs/workspaces/{workspace}"),
        };
        let entry = clawfs::audit::Entry {
            agent: caller.as_str(),
            operation,
            path: &target,
            bytes: None,
            denied: None,
            caller: caller.as_str(),
        };
        self.files.record(&entry)
    }

    /// Audits memory operation `operation` of `caller` on agent `agent`'s
    /// file `path` (its directory when `None`), then runs `work` on its
    /// memory on the blocking pool.
    async fn agent_memory<T: Send + 'static>(
        &self,
        call: &Call,
        operation: &str,
        agent: String,
        path: Option<&str>,
        work: impl FnOnce(AgentMemory<'_>, &mut clawfs::MemoryIndex) -> clawfs::Result<T> + Send + 'static,
    ) -> Result<T, MethodError> {
        let target = format!("/clawfs/agents/{agent}{}", path.map(|p| format!("/{p}")).unwrap_or_default());
        let caller = call.peer();
        self.files.record(&clawfs::audit::Entry {
            agent: &agent,
            operation,
            path: &target,
            bytes: None,
            denied: None,
            caller: caller.as_str(),
        })?;
        let (state, memories) = (self.state.clone(), self.memories.clone());
        off_runtime(move || {
            // The state's lock only for as long as this takes.
            state.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).ensure_namespace()?;
            memories.with(&agent, |memory, index| work(memory, index).map_err(method_error))
        })
        .await
    }

    /// Runs a file method on the blocking pool.
    async fn files<T: Send + 'static>(
        &self,
        work: impl FnOnce(&files::FileService) -> Result<T, MethodError> + Send + 'static,
    ) -> Result<T, MethodError> {
        let files = self.files.clone();
        off_runtime(move || work(&files)).await
    }
}

/// Runs `work` on the blocking pool: SQLite, HNSW, file I/O and fsyncs block.
async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, MethodError> + Send + 'static,
) -> Result<T, MethodError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| MethodError::new(ErrorCode::Einternal, format!("worker thread: {e}")))?
}

impl fs_engine::Service for Daemon {
    async fn read_file(&self, call: &Call, params: ReadFile) -> Result<FileContent, MethodError> {
        let caller = call.peer();
        self.files(move |files| files.read(caller, params)).await
    }

    async fn write_file(&self, call: &Call, params: WriteFile) -> Result<FileWritten, MethodError> {
        let caller = call.peer();
        self.files(move |files| files.write(caller, params)).await
    }

    async fn list_dir(&self, call: &Call, params: FilePath) -> Result<DirListing, MethodError> {
        let caller = call.peer();
        self.files(move |files| files.list(caller, params)).await
    }

    async fn delete_file(&self, call: &Call, params: FilePath) -> Result<FileDeleted, MethodError> {
        let caller = call.peer();
        self.files(move |files| files.delete(caller, params)).await
    }

    async fn workspace_create(&self, _call: &Call, p: WorkspaceCreate) -> Result<WorkspaceMetadata, MethodError> {
        self.blocking(move |s| s.clawfs.create_workspace(&p.name, &p.owner).map_err(method_error)).await
    }

    async fn workspace_list(&self, _call: &Call, _params: NoParams) -> Result<WorkspaceList, MethodError> {
        let workspaces = self.blocking(|s| s.clawfs.list_workspaces().map_err(method_error)).await?;
        Ok(WorkspaceList { workspaces })
    }

    async fn workspace_delete(&self, _call: &Call, p: WorkspaceName) -> Result<Done, MethodError> {
        self.blocking(move |s| {
            // Close the open index first so no handle outlives its files.
            s.indexes.remove(&p.name);
            s.clawfs.delete_workspace(&p.name).map_err(method_error)
        })
        .await?;
        Ok(Done {})
    }

    async fn memory_index(&self, call: &Call, p: MemoryIndex) -> Result<IndexReport, MethodError> {
        self.audit_memory(call.peer(), "write", &p.workspace, Some(&p.path))?;
        self.blocking(move |s| s.index(&p.workspace)?.index_document(&p.path, &p.content).map_err(method_error)).await
    }

    async fn memory_remove(&self, call: &Call, p: MemoryRemove) -> Result<MemoryRemoved, MethodError> {
        self.audit_memory(call.peer(), "delete", &p.workspace, Some(&p.path))?;
        let removed =
            self.blocking(move |s| s.index(&p.workspace)?.remove_document(&p.path).map_err(method_error)).await?;
        Ok(MemoryRemoved { removed })
    }

    async fn memory_search(&self, call: &Call, p: MemorySearch) -> Result<SearchResponse, MethodError> {
        self.audit_memory(call.peer(), "read", &p.workspace, None)?;
        let mut request = SearchRequest::new(p.query);
        request.limit = p.limit.unwrap_or(request.limit);
        request.fusion = p.fusion.unwrap_or(request.fusion);
        self.blocking(move |s| s.search(&p.workspace, &request)).await
    }

    async fn memory_store(&self, call: &Call, p: MemoryStore) -> Result<MemoryEntry, MethodError> {
        let category = category(p.category.as_deref())?.unwrap_or(Category::Core);
        let at = fsutil::now_rfc3339();
        let path = category.file(&at[..10]);
        if p.idempotency_key.as_ref().is_some_and(|key| key.len() > MAX_IDEMPOTENCY_KEY) {
            return Err(MethodError::new(
                ErrorCode::Eproto,
                format!("idempotency_key: more than {MAX_IDEMPOTENCY_KEY} bytes"),
            ));
        }
        self.agent_memory(call, "memory_store", p.agent, Some(&path), move |memory, index| match &p.idempotency_key {
            Some(key) => memory.store_once(index, &category, &p.content, &at, key),
            None => memory.store(index, &category, &p.content, &at),
        })
        .await
    }

    async fn memory_recall(&self, call: &Call, p: MemoryRecall) -> Result<Recall, MethodError> {
        let category = category(p.category.as_deref())?;
        let limit = p.limit.unwrap_or(5).clamp(1, 50);
        let recall = self
            .agent_memory(call, "memory_recall", p.agent, None, move |memory, index| {
                memory.recall(index, &p.query, category.as_ref(), limit)
            })
            .await?;
        Ok(recall)
    }

    async fn memory_get(&self, call: &Call, p: MemoryId) -> Result<MemoryEntry, MethodError> {
        self.agent_memory(call, "memory_get", p.agent, None, move |memory, _| memory.get(&p.id)).await
    }

    async fn memory_list(&self, call: &Call, p: MemoryList) -> Result<MemoryEntries, MethodError> {
        let category = category(p.category.as_deref())?;
        let limit = p.limit.unwrap_or(20);
        let entries = self
            .agent_memory(call, "memory_list", p.agent, None, move |memory, _| memory.list(category.as_ref(), limit))
            .await?;
        Ok(MemoryEntries { entries })
    }

    async fn memory_forget(&self, call: &Call, p: MemoryId) -> Result<MemoryEntry, MethodError> {
        self.agent_memory(call, "memory_forget", p.agent, None, move |memory, index| memory.forget(index, &p.id)).await
    }

    async fn memory_count(&self, call: &Call, p: MemoryCount) -> Result<MemoryCounted, MethodError> {
        let category = category(p.category.as_deref())?;
        let count = self
            .agent_memory(call, "memory_count", p.agent, None, move |memory, _| memory.count(category.as_ref()))
            .await?;
        Ok(MemoryCounted { count })
    }

    async fn memory_reindex(&self, call: &Call, p: AgentRef) -> Result<Reindexed, MethodError> {
        self.agent_memory(call, "memory_reindex", p.agent, None, |memory, index| memory.reindex(index)).await
    }

    async fn memory_hygiene(&self, call: &Call, p: MemoryHygieneParams) -> Result<Hygiene, MethodError> {
        let today = watch::today();
        self.agent_memory(call, "memory_hygiene", p.agent, None, move |memory, index| {
            memory.hygiene(index, p.archive_after_days, p.purge_after_days, today)
        })
        .await
    }

    async fn snapshot_create(&self, _call: &Call, p: WorkspaceRef) -> Result<Snapshot, MethodError> {
        self.blocking(move |s| s.clawfs.create_snapshot(&p.workspace).map_err(method_error)).await
    }

    async fn snapshot_list(&self, _call: &Call, p: WorkspaceRef) -> Result<SnapshotList, MethodError> {
        let snapshots = self.blocking(move |s| s.clawfs.list_snapshots(&p.workspace).map_err(method_error)).await?;
        Ok(SnapshotList { snapshots })
    }

    async fn snapshot_restore(&self, _call: &Call, p: SnapshotRestore) -> Result<Done, MethodError> {
        self.blocking(move |s| {
            // The open index belongs to the database being replaced;
            // the next search reopens (and if needed rebuilds) it.
            s.indexes.remove(&p.workspace);
            s.clawfs.restore_snapshot(&p.workspace, &p.file).map_err(method_error)
        })
        .await?;
        Ok(Done {})
    }

    async fn snapshot_prune(&self, _call: &Call, p: SnapshotPrune) -> Result<SnapshotsPruned, MethodError> {
        let removed =
            self.blocking(move |s| s.clawfs.prune_snapshots(&p.workspace, p.keep).map_err(method_error)).await?;
        Ok(SnapshotsPruned { removed })
    }

    async fn identity_get(&self, _call: &Call, p: AgentRef) -> Result<clawfs::Identity, MethodError> {
        self.blocking(move |s| s.clawfs.read_identity(&p.agent).map_err(method_error)).await
    }

    async fn identity_record_task(&self, _call: &Call, p: IdentityRecordTask) -> Result<clawfs::Identity, MethodError> {
        self.blocking(move |s| {
            s.clawfs.update_identity(&p.agent, |identity| record_task(identity, &p)).map_err(method_error)
        })
        .await
    }

    async fn identity_backups(&self, _call: &Call, p: AgentRef) -> Result<IdentityBackups, MethodError> {
        let backups = self.blocking(move |s| s.clawfs.identity_backups(&p.agent).map_err(method_error)).await?;
        Ok(IdentityBackups { backups: backups.into_iter().map(|backup| backup.name).collect() })
    }

    async fn identity_restore(&self, _call: &Call, p: IdentityRestore) -> Result<clawfs::Identity, MethodError> {
        self.blocking(move |s| s.clawfs.restore_identity(&p.agent, &p.backup).map_err(method_error)).await
    }

    async fn agent_dir_create(&self, call: &Call, params: AgentDirCreate) -> Result<AgentDirCreated, MethodError> {
        let caller = call.peer();
        self.files(move |files| files.create_agent(caller, params)).await
    }

    async fn agent_dir_remove(&self, call: &Call, params: AgentRef) -> Result<Done, MethodError> {
        let caller = call.peer();
        let (files, memories) = (self.files.clone(), self.memories.clone());
        // The directory is renamed away at once; its memory index is closed
        // and the directory deleted once the work on it ends (`memories`).
        let root = files.root().to_owned();
        off_runtime(move || {
            let agent = params.agent.clone();
            memories.remove(
                &agent,
                || files.remove_agent(caller, params),
                move |dir| {
                    if let Err(error) = clawfs::namespace::delete_removed(&root, Some(&dir)) {
                        tracing::error!("a removed agent's directory is left in agents/.removed: {error}");
                    }
                },
            )
        })
        .await?;
        Ok(Done {})
    }

    async fn agent_commit(&self, call: &Call, params: AgentCommit) -> Result<AgentCommitted, MethodError> {
        let caller = call.peer();
        self.files(move |files| files.commit_agent(caller, params)).await
    }

    async fn agent_history(&self, _call: &Call, params: AgentHistory) -> Result<AgentCommits, MethodError> {
        self.files(move |files| files.agent_history(params)).await
    }

    async fn agent_rollback(&self, call: &Call, params: AgentRollback) -> Result<Commit, MethodError> {
        let caller = call.peer();
        self.files(move |files| files.rollback_agent(caller, params)).await
    }

    async fn goal_create(&self, call: &Call, params: GoalCreate) -> Result<Goal, MethodError> {
        let caller = call.peer();
        let agent = params.agent.clone();
        let goal = self.files(move |files| files.create_goal(caller, params)).await?;
        self.goal_changed(&agent, &goal, None);
        Ok(goal)
    }

    async fn goal_update(&self, call: &Call, params: GoalUpdate) -> Result<Goal, MethodError> {
        let caller = call.peer();
        let agent = params.agent.clone();
        let (goal, from) = self.files(move |files| files.update_goal(caller, params)).await?;
        if let Some(from) = from {
            self.goal_changed(&agent, &goal, Some(from));
        }
        Ok(goal)
    }

    async fn goal_list(&self, _call: &Call, params: GoalQuery) -> Result<Goals, MethodError> {
        self.files(move |files| files.goals(params)).await
    }
}

impl Component for Daemon {
    async fn handle_request(&self, call: &Call, request: Request) -> Option<Result<Object, MethodError>> {
        fs_engine::dispatch(self, call, request).await
    }

    fn degraded_reason(&self) -> Option<String> {
        // try_lock: a health check must not wait behind a long index call.
        if let Err(reason) = self.files.audit() {
            return Some(reason.clone());
        }
        match &self.state.try_lock().ok()?.namespace {
            Namespace::Failed(reason) => Some(reason.clone()),
            Namespace::NotTried | Namespace::Ready => None,
        }
    }
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::FsEngine, env!("CARGO_PKG_VERSION"), Daemon::start)
}

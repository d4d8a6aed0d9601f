//! `clawos-fs-engine`: serves ClawFS over IPC: files under `/clawfs` for
//! agents and the operator (`read_file`, `write_file`, `list_dir`,
//! `delete_file`, with RULE-001 checked per request), user workspaces
//! (`workspace_create`, `workspace_list`, `workspace_delete`) and their
//! hybrid memory search (`memory_index`, `memory_remove`, `memory_search`),
//! snapshots and identity files. Methods and parameters:
//! `specs/clawfs/README.md`. Which component may call which method is the
//! IPC ACL's job (`ipc-acl.toml`); which paths a request may touch is ours.
//! Every file and memory operation, allowed or refused, goes to the audit
//! log first (`audit.rs`); when it cannot be written, the request fails.
//!
//! Owns the workspace databases and their HNSW files under
//! `/clawfs/workspaces`; the storage and search logic is `clawos-clawfs`.

mod audit;
mod embedder;
mod files;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawfs::{Clawfs, Config, Embedder, MemoryIndex, Owners, SearchRequest};
use clawos_ipc::server::{Connection, MethodError};
use clawos_ipc::{ComponentId, ErrorCode, Object, Principal, Request};
use clawos_runtime::{Component, Runtime};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// `[component]` settings of fs-engine's TOML config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DaemonConfig {
    /// The ClawFS root. Default `/clawfs`.
    #[serde(default = "default_clawfs_root")]
    clawfs_root: PathBuf,
    /// The instance's one vector dimension (spec §4.3). Default 1536.
    #[serde(default = "default_vector_dimension")]
    vector_dimension: usize,
    /// The ClawFS audit log. Default `/var/log/clawos/clawfs-audit.log`.
    #[serde(default = "default_audit_log")]
    audit_log: PathBuf,
    /// The memory search embedder. Default: the offline hashing embedder.
    #[serde(default)]
    embedder: embedder::EmbedderConfig,
}

fn default_audit_log() -> PathBuf {
    PathBuf::from("/var/log/clawos/clawfs-audit.log")
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
/// done once per workspace, not per request.
struct State {
    clawfs: Clawfs,
    /// The embedder, or why it could not be set up (searches say so).
    embedder: Result<Arc<dyn Embedder>, String>,
    indexes: HashMap<String, MemoryIndex>,
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
            response.vector = clawfs::LegReport::NotRun { reason: format!("the embedder could not be set up: {reason}") };
        }
        Ok(response)
    }

    fn index(&mut self, workspace: &str) -> Result<&mut MemoryIndex, MethodError> {
        if !self.indexes.contains_key(workspace) {
            let index = self.clawfs.open_memory(workspace, self.embedder.clone().ok()).map_err(method_error)?;
            self.indexes.insert(workspace.to_owned(), index);
        }
        Ok(self.indexes.get_mut(workspace).expect("inserted above"))
    }
}

struct Daemon {
    state: Arc<Mutex<State>>,
    /// The file methods, and the audit log every file and memory request
    /// is written to first.
    files: Arc<files::FileService>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkspaceCreate {
    name: String,
    #[serde(default = "default_owner")]
    owner: String,
}

fn default_owner() -> String {
    "user".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkspaceName {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryIndexParams {
    workspace: String,
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryRemove {
    workspace: String,
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotWorkspace {
    workspace: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotName {
    workspace: String,
    file: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotPrune {
    workspace: String,
    keep: usize,
}

fn snapshot_json(snapshot: &clawfs::Snapshot) -> serde_json::Value {
    serde_json::json!({ "file": snapshot.file, "bytes": snapshot.bytes })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentName {
    agent: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityRestore {
    agent: String,
    backup: String,
}

/// One finished task, as the agent loop reports it (spec §5.4: identity
/// files are updated after each task completion).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityRecordTask {
    agent: String,
    task: String,
    success: bool,
    duration_ms: u64,
}

impl IdentityRecordTask {
    fn apply(&self, identity: &mut clawfs::Identity) {
        let history = &mut identity.history;
        let before = history.total_executions;
        let succeeded = (history.success_rate * before as f64).round() + f64::from(u8::from(self.success));
        history.total_executions += 1;
        history.success_rate = succeeded / history.total_executions as f64;
        if self.success {
            history.completed_tasks.push(self.task.clone());
        } else {
            history.failed_tasks.push(self.task.clone());
        }
        let performance = &mut identity.performance;
        performance.avg_execution_time_ms = (performance.avg_execution_time_ms * before + self.duration_ms) / history.total_executions;
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemorySearch {
    workspace: String,
    #[serde(flatten)]
    request: SearchRequest,
}

fn params<T: DeserializeOwned>(request: &Request) -> Result<T, MethodError> {
    serde_json::from_value(serde_json::Value::Object(request.params.clone()))
        .map_err(|e| MethodError::bad_params(format!("{}: {e}", request.method)))
}

fn object(value: impl Serialize) -> Result<Object, MethodError> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(object)) => Ok(object),
        Ok(other) => {
            let mut object = Object::new();
            object.insert("result".into(), other);
            Ok(object)
        }
        Err(e) => Err(MethodError::new(ErrorCode::Einternal, format!("encoding the response: {e}"))),
    }
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
        | clawfs::Error::NoSuchIdentityBackup { .. }
        | clawfs::Error::NoSuchSnapshot { .. } => ErrorCode::Enoent,
        _ => ErrorCode::Eio,
    };
    MethodError::new(code, error.to_string())
}

impl Daemon {
    fn start(runtime: &Runtime) -> Result<Daemon, String> {
        let config: DaemonConfig =
            runtime.config().component.clone().try_into().map_err(|e| format!("[component] settings: {e}"))?;
        let clawfs = Clawfs::new(Config { vector_dimension: config.vector_dimension, ..Config::new(&config.clawfs_root) })
            .map_err(|e| e.to_string())?;
        let handle = tokio::runtime::Handle::current();
        let secrets: embedder::SecretSource =
            Arc::new(move |secret: &str| clawos_runtime::peers::vault_secret(&handle, ComponentId::FsEngine, secret, VAULT_TIMEOUT));
        let embedder = embedder::build(&config.embedder, config.vector_dimension, secrets);
        match &embedder {
            Ok(embedder) => tracing::info!(model = embedder.model_id(), dimension = embedder.dimension(), "memory search embedder"),
            Err(reason) => tracing::error!("memory search has no vector leg: the embedder could not be set up: {reason}"),
        }
        let audit = audit::AuditLog::open(&config.audit_log).map_err(|e| format!("cannot open the audit log {}: {e}", config.audit_log.display()));
        if let Err(reason) = &audit {
            tracing::error!("{reason}; file and memory requests will be refused");
        }
        let root_exists = config.clawfs_root.is_dir();
        let mut state = State { clawfs, embedder, indexes: HashMap::new(), namespace: Namespace::NotTried };
        if root_exists {
            // A failure here makes the component degraded, not dead: the
            // runtime's own methods still answer and the next request retries.
            if let Err(error) = state.ensure_namespace() {
                tracing::error!("{}", error.message);
            }
        } else {
            // On the appliance /clawfs is always mounted (RequiresMountsFor);
            // without it there is nothing to serve yet, which is not a fault.
            tracing::warn!("ClawFS root {} does not exist; ClawFS methods will fail until it does", config.clawfs_root.display());
        }
        let files = Arc::new(files::FileService::new(config.clawfs_root.clone(), audit));
        Ok(Daemon { state: Arc::new(Mutex::new(state)), files })
    }

    /// Runs `work` on the blocking pool: SQLite and HNSW calls block.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut State) -> Result<T, MethodError> + Send + 'static,
    ) -> Result<T, MethodError> {
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || {
            let mut state = state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            state.ensure_namespace()?;
            work(&mut state)
        })
        .await
        .map_err(|e| MethodError::new(ErrorCode::Einternal, format!("worker thread: {e}")))?
    }

    /// Audits a memory operation of `caller` on workspace `workspace`
    /// (`path` inside it, if any) before it runs.
    fn audit_memory(&self, caller: Principal, operation: &str, workspace: &str, path: Option<&str>) -> Result<(), MethodError> {
        let target = match path {
            Some(path) => format!("/clawfs/workspaces/{workspace}/{path}"),
            None => format!("/clawfs/workspaces/{workspace}"),
        };
        let entry = audit::Entry { agent: caller.as_str(), operation, path: &target, bytes: None, denied: None, caller: caller.as_str() };
        self.files.record(&entry)
    }

    async fn dispatch(&self, caller: Principal, request: Request) -> Result<Object, MethodError> {
        if files::METHODS.contains(&request.method.as_str()) {
            let files = self.files.clone();
            return tokio::task::spawn_blocking(move || files.handle(caller, &request.method, request.params))
                .await
                .map_err(|e| MethodError::new(ErrorCode::Einternal, format!("worker thread: {e}")))?;
        }
        match request.method.as_str() {
            "workspace_create" => {
                let p: WorkspaceCreate = params(&request)?;
                object(self.blocking(move |s| s.clawfs.create_workspace(&p.name, &p.owner).map_err(method_error)).await?)
            }
            "workspace_list" => {
                let workspaces = self.blocking(|s| s.clawfs.list_workspaces().map_err(method_error)).await?;
                object(serde_json::json!({ "workspaces": workspaces }))
            }
            "workspace_delete" => {
                let p: WorkspaceName = params(&request)?;
                self.blocking(move |s| {
                    // Close the open index first so no handle outlives its files.
                    s.indexes.remove(&p.name);
                    s.clawfs.delete_workspace(&p.name).map_err(method_error)
                })
                .await?;
                Ok(Object::new())
            }
            "memory_index" => {
                let p: MemoryIndexParams = params(&request)?;
                self.audit_memory(caller, "write", &p.workspace, Some(&p.path))?;
                object(self.blocking(move |s| s.index(&p.workspace)?.index_document(&p.path, &p.content).map_err(method_error)).await?)
            }
            "memory_remove" => {
                let p: MemoryRemove = params(&request)?;
                self.audit_memory(caller, "delete", &p.workspace, Some(&p.path))?;
                let removed = self.blocking(move |s| s.index(&p.workspace)?.remove_document(&p.path).map_err(method_error)).await?;
                object(serde_json::json!({ "removed": removed }))
            }
            "memory_search" => {
                let p: MemorySearch = params(&request)?;
                self.audit_memory(caller, "read", &p.workspace, None)?;
                object(self.blocking(move |s| s.search(&p.workspace, &p.request)).await?)
            }
            "snapshot_create" => {
                let p: SnapshotWorkspace = params(&request)?;
                let snapshot = self.blocking(move |s| s.clawfs.create_snapshot(&p.workspace).map_err(method_error)).await?;
                object(snapshot_json(&snapshot))
            }
            "snapshot_list" => {
                let p: SnapshotWorkspace = params(&request)?;
                let snapshots = self.blocking(move |s| s.clawfs.list_snapshots(&p.workspace).map_err(method_error)).await?;
                object(serde_json::json!({ "snapshots": snapshots.iter().map(snapshot_json).collect::<Vec<_>>() }))
            }
            "snapshot_restore" => {
                let p: SnapshotName = params(&request)?;
                self.blocking(move |s| {
                    // The open index belongs to the database being replaced;
                    // the next search reopens (and if needed rebuilds) it.
                    s.indexes.remove(&p.workspace);
                    s.clawfs.restore_snapshot(&p.workspace, &p.file).map_err(method_error)
                })
                .await?;
                Ok(Object::new())
            }
            "snapshot_prune" => {
                let p: SnapshotPrune = params(&request)?;
                let removed = self.blocking(move |s| s.clawfs.prune_snapshots(&p.workspace, p.keep).map_err(method_error)).await?;
                object(serde_json::json!({ "removed": removed }))
            }
            "identity_get" => {
                let p: AgentName = params(&request)?;
                object(self.blocking(move |s| s.clawfs.read_identity(&p.agent).map_err(method_error)).await?)
            }
            "identity_record_task" => {
                let p: IdentityRecordTask = params(&request)?;
                object(self.blocking(move |s| s.clawfs.update_identity(&p.agent, |identity| p.apply(identity)).map_err(method_error)).await?)
            }
            "identity_backups" => {
                let p: AgentName = params(&request)?;
                let backups = self.blocking(move |s| s.clawfs.identity_backups(&p.agent).map_err(method_error)).await?;
                object(serde_json::json!({ "backups": backups.iter().map(|backup| &backup.name).collect::<Vec<_>>() }))
            }
            "identity_restore" => {
                let p: IdentityRestore = params(&request)?;
                object(self.blocking(move |s| s.clawfs.restore_identity(&p.agent, &p.backup).map_err(method_error)).await?)
            }
            other => Err(MethodError::unknown_method(other)),
        }
    }
}

/// The methods this component answers itself, besides [`files::METHODS`].
const METHODS: [&str; 14] = [
    "workspace_create",
    "workspace_list",
    "workspace_delete",
    "memory_index",
    "memory_remove",
    "memory_search",
    "snapshot_create",
    "snapshot_list",
    "snapshot_restore",
    "snapshot_prune",
    "identity_get",
    "identity_record_task",
    "identity_backups",
    "identity_restore",
];

impl Component for Daemon {
    async fn handle_request(&self, connection: Connection, request: Request) -> Option<Result<Object, MethodError>> {
        if METHODS.contains(&request.method.as_str()) || files::METHODS.contains(&request.method.as_str()) {
            Some(self.dispatch(connection.peer(), request).await)
        } else {
            None
        }
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

//! `read_file`, `write_file`, `list_dir` and `delete_file`: files under
//! `/clawfs` on behalf of an agent or the operator; and `agent_dir_create`
//! / `agent_dir_remove`, the agents' directories themselves, and
//! `agent_commit` / `agent_history` / `agent_rollback`, their history
//! (`clawfs::history`). A component (the agent
//! loop, the WASM daemon) must name the agent it acts for in `agent`, and
//! gets that agent's rights (RULE-001, `clawfs::files`); the operator acts
//! as itself, or as an agent when it names one. Each request is audited
//! before it is carried out.

use std::path::PathBuf;

use base64::Engine as _;
use clawfs::audit::{AuditLog, Entry};
use clawfs::files::{self, Access, Requester, WriteMode};
use clawfs::layout::{agents_dir, AGENT_CONFIG_FILE};
use clawfs::namespace::{self, NamespaceReport, Owners};
use clawfs::{goals, history};
use clawos_api::fs_engine::{
    AgentCommit, AgentCommits, AgentCommitted, AgentDirCreate, AgentDirCreated, AgentHistory, AgentRef, AgentRollback,
    Commit, DirListing, FileContent, FileDeleted, FilePath, FileWritten, Goal, GoalCreate, GoalQuery, GoalState,
    GoalUpdate, Goals, ReadFile, WriteFile,
};
use clawos_ipc::server::MethodError;
use clawos_ipc::{ErrorCode, Principal};

/// The longest commit message, bytes.
const MAX_COMMIT_MESSAGE: usize = 4096;

fn history_error(error: history::Error) -> MethodError {
    let code = match &error {
        history::Error::NoCommit(_) => ErrorCode::Enoent,
        history::Error::Unchanged(_) => ErrorCode::Eperm,
        history::Error::Git(_) | history::Error::Io { .. } => ErrorCode::Eio,
    };
    MethodError::new(code, error.to_string())
}

fn goal_error(error: goals::Error) -> MethodError {
    let code = match &error {
        goals::Error::NoGoal(_) => ErrorCode::Enoent,
        goals::Error::Refused(_) => ErrorCode::Eperm,
        goals::Error::Corrupt { .. } | goals::Error::Io { .. } => ErrorCode::Eio,
    };
    MethodError::new(code, error.to_string())
}

/// Now, RFC 3339 (UTC, seconds).
fn now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    fsutil::rfc3339(secs)
}

/// Serves the file methods under one ClawFS root.
pub struct FileService {
    root: PathBuf,
    audit: Result<AuditLog, String>,
}

impl FileService {
    /// Files under `root`, audited to `audit`.
    pub fn new(root: PathBuf, audit: Result<AuditLog, String>) -> Self {
        FileService { root, audit }
    }

    /// The ClawFS root it serves.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// The audit log, or why it could not be opened.
    pub fn audit(&self) -> &Result<AuditLog, String> {
        &self.audit
    }

    /// Writes `entry` to the audit log; a request that cannot be audited fails.
    pub fn record(&self, entry: &Entry<'_>) -> Result<(), MethodError> {
        let log =
            self.audit.as_ref().map_err(|reason| MethodError::new(ErrorCode::Eio, format!("refused: {reason}")))?;
        log.record(entry).map_err(|e| MethodError::new(ErrorCode::Eio, e.to_string()))
    }

    /// Records an allowed `operation` on `path` for `agent`, asked by `caller`.
    fn record_allowed(
        &self,
        caller: Principal,
        agent: &str,
        operation: &str,
        path: &str,
        bytes: Option<u64>,
    ) -> Result<(), MethodError> {
        self.record(&Entry { agent, operation, path, bytes, denied: None, caller: caller.as_str() })
    }

    /// Resolves `path` for whoever the request is for, auditing a refusal.
    fn resolve<'a>(
        &self,
        caller: Principal,
        agent: Option<&'a str>,
        operation: &str,
        path: &str,
        access: Access,
    ) -> Result<(Requester<'a>, files::Resolved), MethodError> {
        let requester = match (agent, caller) {
            (Some(agent), _) => Some(Requester::Agent(agent)),
            (None, Principal::Operator) => Some(Requester::Operator),
            (None, Principal::Component(_) | Principal::Console) => None,
        };
        let resolved = match requester {
            Some(requester) => files::resolve(&self.root, requester, path, access),
            None => Err(clawfs::Error::Denied {
                path: path.to_owned(),
                reason: match agent {
                    Some(agent) => format!("`{agent}` is not a ClawOS agent"),
                    None => "a component must name the agent it acts for (`agent`)".to_owned(),
                },
            }),
        };
        match resolved {
            Ok(resolved) => Ok((requester.expect("resolved only with a requester"), resolved)),
            Err(error) => {
                let reason = match &error {
                    clawfs::Error::Denied { reason, .. } => reason.clone(),
                    other => other.to_string(),
                };
                let name = requester.map_or("unknown", |r| r.name());
                self.record(&Entry {
                    agent: name,
                    operation,
                    path,
                    bytes: None,
                    denied: Some(&reason),
                    caller: caller.as_str(),
                })?;
                Err(crate::method_error(error))
            }
        }
    }

    /// `read_file` for `caller`.
    pub fn read(&self, caller: Principal, p: ReadFile) -> Result<FileContent, MethodError> {
        let (requester, file) = self.resolve(caller, p.agent.as_deref(), "read", &p.path, Access::Read)?;
        let record = |operation, bytes| self.record_allowed(caller, requester.name(), operation, &file.display, bytes);
        record("open", None)?;
        let read = files::read(&file, p.offset, p.length).map_err(crate::method_error)?;
        record("read", Some(read.data.len() as u64))?;
        let (content, content_base64) = match String::from_utf8(read.data) {
            Ok(text) => (Some(text), None),
            Err(bytes) => (None, Some(base64::engine::general_purpose::STANDARD.encode(bytes.as_bytes()))),
        };
        Ok(FileContent { path: file.display.clone(), size: read.size, eof: read.eof, content, content_base64 })
    }

    /// `write_file` for `caller`.
    pub fn write(&self, caller: Principal, p: WriteFile) -> Result<FileWritten, MethodError> {
        let data = match (p.content, p.content_base64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| MethodError::bad_params(format!("write_file: content_base64: {e}")))?,
            _ => return Err(MethodError::bad_params("write_file: give exactly one of content and content_base64")),
        };
        let (requester, file) = self.resolve(caller, p.agent.as_deref(), "write", &p.path, Access::Write)?;
        let record = |operation, bytes| self.record_allowed(caller, requester.name(), operation, &file.display, bytes);
        record("open", None)?;
        if p.create_dirs {
            // The parent was checked with the file: it lies inside the same allowed tree.
            if let Some(parent) = file.real.parent() {
                let parent = files::Resolved {
                    real: parent.to_owned(),
                    display: file.display.rsplit_once('/').map_or("", |(dir, _)| dir).to_owned(),
                };
                files::make_dir(&parent).map_err(crate::method_error)?;
            }
        }
        let mode = if p.append { WriteMode::Append } else { WriteMode::Replace };
        let size = files::write(&file, &data, mode).map_err(crate::method_error)?;
        record("write", Some(data.len() as u64))?;
        Ok(FileWritten { path: file.display.clone(), bytes_written: data.len(), size })
    }

    /// `list_dir` for `caller`.
    pub fn list(&self, caller: Principal, p: FilePath) -> Result<DirListing, MethodError> {
        let (requester, dir) = self.resolve(caller, p.agent.as_deref(), "list", &p.path, Access::Read)?;
        self.record_allowed(caller, requester.name(), "list", &dir.display, None)?;
        let entries = files::list(&dir).map_err(crate::method_error)?;
        Ok(DirListing { path: dir.display.clone(), entries })
    }

    /// `delete_file` for `caller`.
    pub fn delete(&self, caller: Principal, p: FilePath) -> Result<FileDeleted, MethodError> {
        let (requester, path) = self.resolve(caller, p.agent.as_deref(), "delete", &p.path, Access::Write)?;
        self.record_allowed(caller, requester.name(), "delete", &path.display, None)?;
        files::delete(&path).map_err(crate::method_error)?;
        Ok(FileDeleted { path: path.display.clone() })
    }

    /// `agent_dir_create` for `caller`: the directory, then `config.toml`
    /// (0640: agent-loop reads it through the group, the agent never
    /// writes it, `clawfs::layout::AGENT_CONFIG_FILE`).
    pub fn create_agent(&self, caller: Principal, p: AgentDirCreate) -> Result<AgentDirCreated, MethodError> {
        clawfs::names::validate_agent_name(&p.agent).map_err(|e| MethodError::new(ErrorCode::Eproto, e.to_string()))?;
        let display = format!("/clawfs/agents/{}", p.agent);
        if namespace::agent_exists(&self.root, &p.agent) {
            return Err(MethodError::new(ErrorCode::Eperm, format!("agent `{}` already exists", p.agent)));
        }
        self.record_allowed(caller, &p.agent, "agent_create", &display, None)?;
        // Owners were set on agents/ by systemd-tmpfiles (setgid group).
        namespace::create_agent(&self.root, &p.agent, Owners::Keep, &mut NamespaceReport::default())
            .map_err(crate::method_error)?;
        let config = agents_dir(&self.root).join(&p.agent).join(AGENT_CONFIG_FILE);
        // write_atomic's mode is narrowed by the unit's UMask=0077; the
        // group must read it, so the mode is set after.
        fsutil::write_atomic(&config, p.config.as_bytes(), 0o640)
            .and_then(|()| std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o640)))
            .map_err(|e| MethodError::new(ErrorCode::Eio, format!("writing {}: {e}", config.display())))?;
        Ok(AgentDirCreated { path: display })
    }

    /// The directory of agent `agent`, which must exist.
    fn agent_dir(&self, agent: &str) -> Result<(PathBuf, String), MethodError> {
        if !namespace::agent_exists(&self.root, agent) {
            return Err(MethodError::new(ErrorCode::Enoent, format!("no agent `{agent}`")));
        }
        Ok((agents_dir(&self.root).join(agent), format!("/clawfs/agents/{agent}")))
    }

    /// `agent_commit` for `caller`: authored by the agent when a component
    /// (agent-loop) asks for it, by the operator when the operator (or the
    /// console, for them) does.
    pub fn commit_agent(&self, caller: Principal, p: AgentCommit) -> Result<AgentCommitted, MethodError> {
        if p.message.trim().is_empty() || p.message.len() > MAX_COMMIT_MESSAGE {
            return Err(MethodError::bad_params(format!("`message` must be 1 to {MAX_COMMIT_MESSAGE} bytes")));
        }
        let (dir, display) = self.agent_dir(&p.agent)?;
        let author = if caller.acts_for_operator() { "operator" } else { p.agent.as_str() };
        self.record_allowed(caller, &p.agent, "commit", &display, None)?;
        let commit = history::commit(&dir, author, &p.message).map_err(history_error)?;
        Ok(AgentCommitted { commit })
    }

    /// `agent_history`.
    pub fn agent_history(&self, p: AgentHistory) -> Result<AgentCommits, MethodError> {
        let (dir, _) = self.agent_dir(&p.agent)?;
        let limit = p.limit.unwrap_or(20).clamp(1, 500);
        Ok(AgentCommits { commits: history::log(&dir, limit).map_err(history_error)? })
    }

    /// `agent_rollback` for `caller` (the operator: the ACL grants it to no
    /// component), audited before the files change.
    pub fn rollback_agent(&self, caller: Principal, p: AgentRollback) -> Result<Commit, MethodError> {
        let (dir, display) = self.agent_dir(&p.agent)?;
        let author = if caller.acts_for_operator() { "operator" } else { p.agent.as_str() };
        self.record_allowed(caller, &p.agent, "rollback", &display, None)?;
        history::rollback(&dir, &p.commit, author, files::FILE_MODE, namespace::AGENT_DIR_MODE).map_err(history_error)
    }

    /// `goal_create` for `caller`, audited as a write of the goal's file.
    pub fn create_goal(&self, caller: Principal, p: GoalCreate) -> Result<Goal, MethodError> {
        let (dir, display) = self.agent_dir(&p.agent)?;
        let new = goals::New {
            id: p.id.as_deref(),
            title: &p.title,
            description: &p.description,
            parent: p.parent.as_deref(),
            state: p.state,
        };
        self.record_allowed(caller, &p.agent, "goal_create", &format!("{display}/{}", goals::GOALS_DIR), None)?;
        goals::create(&dir, &new, &now(), files::FILE_MODE, namespace::AGENT_DIR_MODE).map_err(goal_error)
    }

    /// `goal_update` for `caller`, audited; a change of state is also a
    /// history commit ("Goal <id>: <from> → <to>"), authored as
    /// `agent_commit` would author it. Returns the state the goal left.
    pub fn update_goal(&self, caller: Principal, p: GoalUpdate) -> Result<(Goal, Option<GoalState>), MethodError> {
        let (dir, display) = self.agent_dir(&p.agent)?;
        let change = goals::Change { state: p.state, note: p.note.as_deref(), artifact: p.artifact.as_deref() };
        self.record_allowed(
            caller,
            &p.agent,
            "goal_update",
            &format!("{display}/{}/{}", goals::GOALS_DIR, p.id),
            None,
        )?;
        let (goal, from) = goals::update(&dir, &p.id, &change, &now(), files::FILE_MODE, namespace::AGENT_DIR_MODE)
            .map_err(goal_error)?;
        if let Some(from) = from {
            let author = if caller.acts_for_operator() { "operator" } else { p.agent.as_str() };
            let message = format!("Goal {}: {} → {}\n\n{}", goal.id, from.as_str(), goal.state.as_str(), goal.title);
            if let Err(e) = history::commit(&dir, author, &message) {
                tracing::warn!(agent = p.agent, goal = goal.id, "the goal's history commit: {e}");
            }
        }
        Ok((goal, from))
    }

    /// `goal_list`.
    pub fn goals(&self, p: GoalQuery) -> Result<Goals, MethodError> {
        let (dir, _) = self.agent_dir(&p.agent)?;
        let all = goals::list(&dir).map_err(goal_error)?;
        Ok(Goals { goals: all.into_iter().filter(|g| p.state.is_none_or(|s| g.state == s)).collect() })
    }

    /// `agent_dir_remove` for `caller`: the directory is renamed out of
    /// the namespace (`namespace::remove_agent`); returns where to, for
    /// `namespace::delete_removed`.
    pub fn remove_agent(&self, caller: Principal, p: AgentRef) -> Result<std::path::PathBuf, MethodError> {
        let display = format!("/clawfs/agents/{}", p.agent);
        if !namespace::agent_exists(&self.root, &p.agent) {
            return Err(MethodError::new(ErrorCode::Enoent, format!("no agent `{}`", p.agent)));
        }
        self.record_allowed(caller, &p.agent, "agent_remove", &display, None)?;
        namespace::remove_agent(&self.root, &p.agent).map_err(crate::method_error)
    }
}

#[cfg(test)]
mod tests {
    use clawos_ipc::{ComponentId, Object};
    use serde_json::json;

    use super::*;

    fn service() -> (tempfile::TempDir, FileService) {
        let dir = tempfile::tempdir().unwrap();
        for agent in ["kernel-engine", "fs-engine"] {
            std::fs::create_dir_all(dir.path().join("clawfs/agents").join(agent)).unwrap();
        }
        let audit = AuditLog::open(&dir.path().join("clawfs-audit.log")).map_err(|e| e.to_string());
        let service = FileService::new(dir.path().join("clawfs"), audit);
        (dir, service)
    }

    /// Calls file method `method` as the daemon's dispatch would: params
    /// parsed by the API's types, the result encoded.
    fn call(
        service: &FileService,
        caller: Principal,
        method: &str,
        params: serde_json::Value,
    ) -> Result<Object, MethodError> {
        let serde_json::Value::Object(params) = params else { panic!("params must be an object") };
        match method {
            "read_file" => clawos_api::encode(&service.read(caller, clawos_api::parse(method, params)?)?),
            "write_file" => clawos_api::encode(&service.write(caller, clawos_api::parse(method, params)?)?),
            "list_dir" => clawos_api::encode(&service.list(caller, clawos_api::parse(method, params)?)?),
            "delete_file" => clawos_api::encode(&service.delete(caller, clawos_api::parse(method, params)?)?),
            other => panic!("not a file method: {other}"),
        }
    }

    fn audit_lines(dir: &tempfile::TempDir) -> Vec<String> {
        std::fs::read_to_string(dir.path().join("clawfs-audit.log"))
            .unwrap()
            .lines()
            .map(|line| line[21..].to_owned())
            .collect()
    }

    const AGENT_LOOP: Principal = Principal::Component(ComponentId::AgentLoop);

    #[test]
    fn an_agent_writes_and_reads_its_own_files_and_every_step_is_audited() {
        let (dir, service) = service();
        let written = call(
            &service,
            AGENT_LOOP,
            "write_file",
            json!({"agent": "kernel-engine", "path": "notes/plan.md", "content": "# Plan\n", "create_dirs": true}),
        )
        .unwrap();
        assert_eq!(written["path"], "/clawfs/agents/kernel-engine/notes/plan.md");
        let read = call(
            &service,
            AGENT_LOOP,
            "read_file",
            json!({"agent": "kernel-engine", "path": "/clawfs/agents/kernel-engine/notes/plan.md"}),
        )
        .unwrap();
        assert_eq!(
            (read["content"].as_str(), read["size"].as_u64(), read["eof"].as_bool()),
            (Some("# Plan\n"), Some(7), Some(true))
        );
        let binary = call(
            &service,
            AGENT_LOOP,
            "write_file",
            json!({"agent": "kernel-engine", "path": "blob", "content_base64": "AP8="}),
        )
        .unwrap();
        assert_eq!(binary["size"], 2);
        assert_eq!(
            call(&service, AGENT_LOOP, "read_file", json!({"agent": "kernel-engine", "path": "blob"})).unwrap()
                ["content_base64"],
            "AP8="
        );
        let listing = call(&service, AGENT_LOOP, "list_dir", json!({"agent": "kernel-engine", "path": "."})).unwrap();
        let names: Vec<&str> =
            listing["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["blob", "notes"]);
        call(&service, AGENT_LOOP, "delete_file", json!({"agent": "kernel-engine", "path": "blob"})).unwrap();
        let missing =
            call(&service, AGENT_LOOP, "read_file", json!({"agent": "kernel-engine", "path": "blob"})).unwrap_err();
        assert_eq!(missing.code, ErrorCode::Enoent);

        let plan = "agent=kernel-engine operation={} path=/clawfs/agents/kernel-engine/notes/plan.md";
        let lines = audit_lines(&dir);
        assert_eq!(lines[0], format!("[INFO] {} caller=agent-loop", plan.replace("{}", "open")));
        assert_eq!(lines[1], format!("[INFO] {} bytes=7 caller=agent-loop", plan.replace("{}", "write")));
        assert_eq!(lines[3], format!("[INFO] {} bytes=7 caller=agent-loop", plan.replace("{}", "read")));
        assert!(lines.iter().any(|l| l == "[INFO] agent=kernel-engine operation=delete path=/clawfs/agents/kernel-engine/blob caller=agent-loop"), "{lines:#?}");
    }

    #[test]
    fn refusals_are_audited_and_touch_nothing() {
        let (dir, service) = service();
        std::fs::write(dir.path().join("clawfs/agents/fs-engine/private.md"), "mine").unwrap();
        let cases = [
            json!({"agent": "kernel-engine", "path": "/clawfs/agents/fs-engine/private.md", "content": "overwritten"}),
            json!({"agent": "kernel-engine", "path": "../fs-engine/private.md", "content": "overwritten"}),
            json!({"path": "/clawfs/agents/fs-engine/private.md", "content": "overwritten"}),
            json!({"agent": "intruder", "path": "/clawfs/agents/fs-engine/private.md", "content": "overwritten"}),
        ];
        for params in cases {
            let error = call(&service, AGENT_LOOP, "write_file", params.clone()).unwrap_err();
            assert_eq!(error.code, ErrorCode::Eperm, "{params}: {error:?}");
        }
        assert_eq!(std::fs::read_to_string(dir.path().join("clawfs/agents/fs-engine/private.md")).unwrap(), "mine");
        let lines = audit_lines(&dir);
        assert_eq!(lines.len(), 4);
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("[WARN] ") && l.contains(" operation=write ") && l.contains(" denied=true ")),
            "{lines:#?}"
        );
        assert!(lines[0].contains("agent=kernel-engine") && lines[0].contains("RULE-001"), "{}", lines[0]);
        assert!(lines[2].contains("agent=unknown") && lines[2].contains("must name the agent"), "{}", lines[2]);
        // The operator may read it.
        let read =
            call(&service, Principal::Operator, "read_file", json!({"path": "/clawfs/agents/fs-engine/private.md"}))
                .unwrap();
        assert_eq!(read["content"], "mine");
    }

    #[test]
    fn without_an_audit_log_nothing_happens() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("agents/kernel-engine")).unwrap();
        let service = FileService::new(dir.path().to_owned(), Err("cannot open the audit log".into()));
        let error =
            call(&service, AGENT_LOOP, "write_file", json!({"agent": "kernel-engine", "path": "x", "content": "y"}))
                .unwrap_err();
        assert_eq!(error.code, ErrorCode::Eio);
        assert!(!dir.path().join("agents/kernel-engine/x").exists());
    }
}

//! `clawos-wasm-daemon`: runs WASM tools for agents.
//!
//! Loads the tool registry at start (every tool compiled once, through the
//! precompiled cache in its state directory), then answers `execute_tool`:
//! each call runs in a fresh instance on a blocking thread and is recorded in
//! the agent's AgentFS `tool_calls`. Design: `specs/toolhost/README.md`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clawos_ipc::server::{Connection, MethodError};
use clawos_ipc::{ComponentId, ErrorCode, Object, Request};
use clawos_runtime::{Component, Runtime};
use clawos_toolhost::cgroup::ToolCgroups;
use clawos_toolhost::definition::Registry;
use clawos_toolhost::{CallError, CallRequest, HostConfig, ToolHost, DEFAULT_MAX_CONCURRENT_CALLS};
use serde::Deserialize;

mod seccomp;

/// `execute_tool`'s default timeout (IPC spec: method timeouts table).
const DEFAULT_EXECUTE_TIMEOUT: Duration = Duration::from_millis(10_000);

/// All tools' memory together, below the unit's MemoryMax so the daemon
/// itself keeps room to answer.
const TOOLS_MEMORY_MAX_BYTES: u64 = 448 << 20;

/// `[component]` of `/etc/clawos/wasm-daemon.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DaemonConfig {
    /// Tool manifest (default: the image's tools).
    #[serde(default = "default_registry")]
    registry: PathBuf,
    /// Precompiled tools, keyed by wasm hash and engine.
    #[serde(default = "default_cache_dir")]
    cache_dir: PathBuf,
    /// Where guest `/clawfs` paths point, and where agents' workspace.db live.
    #[serde(default = "default_clawfs_root")]
    clawfs_root: PathBuf,
}

fn default_registry() -> PathBuf {
    PathBuf::from("/usr/lib/clawos/tools/registry.json")
}

fn default_cache_dir() -> PathBuf {
    PathBuf::from("/var/lib/clawos/wasm-daemon/cache")
}

fn default_clawfs_root() -> PathBuf {
    PathBuf::from("/clawfs")
}

/// `execute_tool` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecuteTool {
    tool_name: String,
    /// The tool's JSON parameters.
    #[serde(default)]
    arguments: serde_json::Value,
    /// The agent the call is made for: its workspace gets the audit row.
    agent_id: String,
    #[serde(default)]
    session_id: Option<String>,
}

struct Daemon {
    host: Arc<ToolHost>,
    registry: Arc<Registry>,
    clawfs_root: PathBuf,
}

impl Daemon {
    fn start(runtime: &Runtime) -> Result<Daemon, String> {
        let config: DaemonConfig =
            runtime.config().component.clone().try_into().map_err(|e| format!("[component] settings: {e}"))?;
        let registry = Registry::load(&config.registry).map_err(|e| e.to_string())?;
        let host = ToolHost::new(HostConfig {
            cache_dir: Some(config.cache_dir),
            clawfs_root: config.clawfs_root.clone(),
            cgroups: tool_cgroups(),
            ..HostConfig::default()
        })
        .map_err(|e| format!("starting the tool host: {e:#}"))?;
        // Compile every tool now: a bad tool shows up in the journal at boot,
        // not in an agent's first call, and the daemon still serves the rest.
        for tool in registry.tools() {
            match host.load(tool) {
                Ok(()) => tracing::info!(tool = tool.tool_id(), "tool loaded"),
                Err(e) => tracing::error!(tool = tool.tool_id(), "tool not loadable: {e}"),
            }
        }
        // Last: from here on only the calls the daemon keeps making are allowed.
        let rules = seccomp::install().map_err(|e| format!("installing the seccomp filter: {e}"))?;
        tracing::info!(rules, "seccomp filter installed: any other system call kills the daemon");
        Ok(Daemon { host: Arc::new(host), registry: Arc::new(registry), clawfs_root: config.clawfs_root })
    }

    async fn execute_tool(&self, request: Request) -> Result<Object, MethodError> {
        let params: ExecuteTool = serde_json::from_value(serde_json::Value::Object(request.params))
            .map_err(|e| MethodError::new(ErrorCode::Eproto, format!("execute_tool params: {e}")))?;
        let tool = self
            .registry
            .get(&params.tool_name)
            .cloned()
            .ok_or_else(|| MethodError::new(ErrorCode::Enoent, format!("unknown tool {:?}", params.tool_name)))?;
        let workspace = agent_workspace(&self.clawfs_root, &params.agent_id)?;
        let timeout = request.timeout_ms.map_or(DEFAULT_EXECUTE_TIMEOUT, Duration::from_millis);
        let host = self.host.clone();
        let recorded = tokio::task::spawn_blocking(move || {
            let mut audit = agentfs::AgentFs::open(&workspace)
                .map_err(|e| MethodError::new(ErrorCode::Eio, format!("opening {}: {e}", workspace.display())))?;
            let call = CallRequest { agent_id: &params.agent_id, params: &params.arguments, timeout: Some(timeout) };
            host.call_recorded(&tool, &call, params.session_id.as_deref(), &mut audit)
                .map_err(|e| MethodError::new(ErrorCode::Eio, e.to_string()))
        })
        .await
        .map_err(|e| MethodError::new(ErrorCode::Einternal, format!("tool call thread: {e}")))??;
        let result = recorded.outcome.map_err(|e| MethodError::new(error_code(&e), format!("{}: {e}", e.kind())))?;
        let mut object = Object::new();
        object.insert("result".into(), result);
        object.insert("call_id".into(), recorded.call_id.into());
        Ok(object)
    }
}

/// Per-tool cgroups in the subtree systemd delegated to the daemon
/// (`Delegate=` in its unit), or `None`, logged, when there is none (not
/// started by systemd, or cgroup v1): the in-process limits still apply.
fn tool_cgroups() -> Option<ToolCgroups> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let relative = own.lines().find_map(|line| line.strip_prefix("0::/"))?;
    let delegated = Path::new("/sys/fs/cgroup").join(relative);
    match ToolCgroups::setup(&delegated, TOOLS_MEMORY_MAX_BYTES, DEFAULT_MAX_CONCURRENT_CALLS) {
        Ok(cgroups) => Some(cgroups),
        Err(e) => {
            tracing::warn!("no per-tool cgroups (cpu.max, pids.max): {e}");
            None
        }
    }
}

/// `<clawfs>/agents/<agent>/workspace.db`; the id must be a plain name so it
/// cannot point the audit elsewhere.
fn agent_workspace(clawfs_root: &Path, agent_id: &str) -> Result<PathBuf, MethodError> {
    let plain = !agent_id.is_empty() && agent_id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !plain {
        return Err(MethodError::new(ErrorCode::Eproto, format!("agent_id {agent_id:?} must be lowercase letters, digits and hyphens")));
    }
    Ok(clawfs_root.join("agents").join(agent_id).join("workspace.db"))
}

fn error_code(error: &CallError) -> ErrorCode {
    match error {
        CallError::UnknownTool(_) => ErrorCode::Enoent,
        CallError::HashMismatch { .. } | CallError::CapabilityDenied { .. } => ErrorCode::Eperm,
        CallError::Timeout { .. } => ErrorCode::Etimeout,
        CallError::InvalidParams(_) | CallError::Tool { kind: "invalid_params", .. } => ErrorCode::Eproto,
        _ => ErrorCode::Eio,
    }
}

impl Component for Daemon {
    async fn handle_request(&self, _connection: Connection, request: Request) -> Option<Result<Object, MethodError>> {
        // Who may call is the IPC ACL's job (ipc-acl.toml: execute_tool).
        match request.method.as_str() {
            "execute_tool" => Some(self.execute_tool(request).await),
            _ => None,
        }
    }
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::WasmDaemon, env!("CARGO_PKG_VERSION"), Daemon::start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_cannot_leave_the_agents_directory() {
        let root = Path::new("/clawfs");
        assert_eq!(agent_workspace(root, "wasm-agent").unwrap(), Path::new("/clawfs/agents/wasm-agent/workspace.db"));
        for bad in ["", "../vault", "a/b", "Agent"] {
            assert!(agent_workspace(root, bad).is_err(), "{bad:?}");
        }
    }
}

//! `clawos-wasm-daemon`: runs WASM tools for agents.
//!
//! Loads the image's tool registry and the operator's installed tools at
//! start, installs its seccomp filter, compiles every tool in the background
//! (once per boot, through the precompiled cache in its state directory,
//! whose entries are authenticated with a key kept in its runtime
//! directory), and answers:
//! - `execute_tool`: each call runs in a fresh instance on a blocking thread
//!   and is recorded in the agent's AgentFS `tool_calls`; each file a tool
//!   writes is recorded in the ClawFS audit log, as fs-engine records its own;
//!   a call with an idempotency key runs at most once per key (`once`);
//! - `tool_list`, `tool_inspect`, `tool_install`, `tool_remove`: the tools
//!   and their grants (`clawctl tool ...`); installs go to `/clawfs/tools`.
//!
//! Design: `specs/toolhost/README.md`; syscall allowlist: `specs/toolhost/seccomp.md`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use clawos_api::wasm_daemon::{
    self, ExecuteTool, ToolDetails, ToolInstall, ToolList, ToolRef, ToolRemoved, ToolResult, ToolSource, ToolSummary,
};
use clawos_api::{Call, NoParams, MAX_IDEMPOTENCY_KEY};
use clawos_ipc::server::MethodError;
use clawos_ipc::{ComponentId, ErrorCode, Object, Request};
use clawos_runtime::{Component, Runtime};
use clawos_toolhost::cgroup::ToolCgroups;
use clawos_toolhost::definition::{Registry, ToolDefinition, ValidTool};
use clawos_toolhost::store::{StoreError, ToolStore};
use clawos_toolhost::{CacheKey, CallError, CallRequest, HostConfig, ToolHost, DEFAULT_MAX_CONCURRENT_CALLS};
use serde::Deserialize;
use serde_json::Value;

mod agent_dbs;
mod credentials;
mod kv;
mod memory;
mod once;
mod seccomp;

/// All tools' memory together, below the unit's MemoryMax so the daemon
/// itself keeps room to answer.
const TOOLS_MEMORY_MAX_BYTES: u64 = 448 << 20;

/// `[component]` of `/etc/clawos/wasm-daemon.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DaemonConfig {
    /// The image's tool manifest (read-only).
    #[serde(default = "default_registry")]
    registry: PathBuf,
    /// Tools the operator installs (specs/toolhost/README.md, "Installed
    /// tools"), and their
    /// `credentials.toml`.
    #[serde(default = "default_tools_dir")]
    tools_dir: PathBuf,
    /// The image's tools compiled when it was built (`--precompile`), on
    /// the verified root: loaded without a MAC, so never a directory
    /// anything on the box can write.
    #[serde(default = "default_image_artifacts")]
    image_artifacts: PathBuf,
    /// Precompiled tools, keyed by wasm hash and engine.
    #[serde(default = "default_cache_dir")]
    cache_dir: PathBuf,
    /// The key that authenticates the cache's entries, one per boot
    /// ([`cache_key`]): in the unit's `RuntimeDirectory=` (tmpfs, kept
    /// across restarts of the daemon, gone at power-off).
    #[serde(default = "default_cache_key_file")]
    cache_key_file: PathBuf,
    /// Where guest `/clawfs` paths point, and where agents' workspace.db live.
    #[serde(default = "default_clawfs_root")]
    clawfs_root: PathBuf,
    /// Per-tool cgroups in the subtree systemd delegates; off only where the
    /// daemon runs outside its unit (the benchmark), so it leaves the
    /// caller's cgroup alone.
    #[serde(default = "enabled")]
    cgroups: bool,
    /// PEM certificates tools' HTTPS trusts instead of the built-in web
    /// roots (a private CA); unset: the web roots.
    #[serde(default)]
    ca_bundle: Option<PathBuf>,
    /// The ClawFS audit log tools' file writes are recorded in, fs-engine's
    /// (specs/clawfs/README.md, "Audit log"). Default
    /// `/var/log/clawos/clawfs-audit.log`.
    #[serde(default = "default_audit_log")]
    audit_log: PathBuf,
}

fn default_audit_log() -> PathBuf {
    PathBuf::from(clawfs::audit::DEFAULT_PATH)
}

fn enabled() -> bool {
    true
}

fn default_registry() -> PathBuf {
    PathBuf::from("/usr/lib/clawos/tools/registry.json")
}

fn default_tools_dir() -> PathBuf {
    PathBuf::from("/clawfs/tools")
}

fn default_image_artifacts() -> PathBuf {
    PathBuf::from(IMAGE_ARTIFACTS)
}

/// Where the image's build puts the artifacts of its tools.
const IMAGE_ARTIFACTS: &str = "/usr/lib/clawos/tools/precompiled";

fn default_cache_dir() -> PathBuf {
    PathBuf::from("/var/lib/clawos/wasm-daemon/cache")
}

fn default_cache_key_file() -> PathBuf {
    PathBuf::from("/run/clawos/wasm-daemon/precompiled-cache.key")
}

fn default_clawfs_root() -> PathBuf {
    PathBuf::from("/clawfs")
}

struct Daemon {
    host: Arc<ToolHost>,
    /// One permit per pool slot: a call beyond them waits (within its IPC
    /// timeout) instead of failing to get an instance.
    call_slots: tokio::sync::Semaphore,
    /// The image's tools: listed, never installed over or removed.
    image: Registry,
    installed: Mutex<ToolStore>,
    agent_dbs: Arc<agent_dbs::AgentDbs>,
    /// Calls with an idempotency key now running (`once`).
    keyed: Arc<once::KeyedCalls>,
    clawfs_root: PathBuf,
    /// Why the ClawFS audit log could not be opened (tools' file writes are
    /// refused meanwhile), for the health check.
    audit_log_problem: Option<String>,
}

impl Daemon {
    fn start(runtime: &Runtime) -> Result<Daemon, String> {
        let config: DaemonConfig =
            runtime.config().component.clone().try_into().map_err(|e| format!("[component] settings: {e}"))?;
        let image = Registry::load(&config.registry).map_err(|e| e.to_string())?;
        let installed = ToolStore::open(&config.tools_dir).map_err(|e| format!("installed tools: {e}"))?;
        let ca_bundle_pem = match &config.ca_bundle {
            Some(path) => Some(std::fs::read(path).map_err(|e| format!("ca_bundle {}: {e}", path.display()))?),
            None => None,
        };
        let agent_dbs = Arc::new(agent_dbs::AgentDbs::default());
        // Opened before the seccomp filter and kept open: appends need no
        // new open. Without it the daemon still runs tools, refuses their
        // writes and reports itself degraded, as fs-engine does.
        let audit_log = clawfs::audit::AuditLog::open(&config.audit_log)
            .map(Arc::new)
            .map_err(|e| format!("cannot open the ClawFS audit log {}: {e}", config.audit_log.display()));
        if let Err(reason) = &audit_log {
            tracing::error!("{reason}; tools' file writes will be refused");
        }
        let audit_log_problem = audit_log.as_ref().err().cloned();
        let credentials = credentials::VaultCredentials::new(
            config.tools_dir.join("credentials.toml"),
            tokio::runtime::Handle::current(),
        );
        let host = ToolHost::new(HostConfig {
            cache_dir: Some(config.cache_dir),
            cache_key: cache_key(&config.cache_key_file).map(CacheKey::from_bytes),
            image_artifacts: Some(config.image_artifacts),
            clawfs_root: config.clawfs_root.clone(),
            credentials: Arc::new(credentials),
            memory: Arc::new(memory::FsEngineMemory::new(tokio::runtime::Handle::current())),
            kv: Arc::new(kv::AgentFsKv::new(config.clawfs_root.clone(), agent_dbs.clone())),
            ca_bundle_pem,
            cgroups: if config.cgroups { tool_cgroups() } else { None },
            audit_log,
            ..HostConfig::default()
        })
        .map_err(|e| format!("starting the tool host: {e:#}"))?;
        // Last: from here on only the calls the daemon keeps making are allowed.
        let before = seccomp::filters_on_main_thread();
        let rules = seccomp::install().map_err(|e| format!("installing the seccomp filter: {e}"))?;
        let after = seccomp::filters_on_main_thread();
        let count = |n: Option<u32>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
        tracing::info!(
            rules,
            "seccomp filter installed on every thread (seccomp filters per thread: {} -> {}): any other system call kills the daemon",
            count(before),
            count(after)
        );
        // Compile every tool in the background: a bad tool shows up in the
        // journal at boot rather than in an agent's first call, and the
        // daemon is ready at once (Cranelift takes seconds per tool on a
        // slow machine); a call that comes first compiles its tool itself.
        let host = Arc::new(host);
        let tools: Vec<ValidTool> = image.tools().chain(installed.registry().tools()).cloned().collect();
        let precompiler = host.clone();
        tokio::task::spawn_blocking(move || {
            for tool in tools {
                match precompiler.load(&tool) {
                    Ok(()) => tracing::info!(tool = tool.tool_id(), "tool loaded"),
                    Err(e) => tracing::error!(tool = tool.tool_id(), "tool not loadable: {e}"),
                }
            }
        });
        Ok(Daemon {
            host,
            call_slots: tokio::sync::Semaphore::new(DEFAULT_MAX_CONCURRENT_CALLS as usize),
            image,
            installed: Mutex::new(installed),
            agent_dbs,
            keyed: Arc::default(),
            clawfs_root: config.clawfs_root,
            audit_log_problem,
        })
    }

    /// The answer of the call recorded in `database` with `key`, if one
    /// is: its result, or its error as it was recorded (`<kind>: <message>`,
    /// the text the first caller got).
    async fn recorded(
        &self,
        database: &Path,
        key: &str,
    ) -> Result<Option<Result<ToolResult, MethodError>>, MethodError> {
        let (agent_dbs, database, key) = (self.agent_dbs.clone(), database.to_owned(), key.to_owned());
        let found = tokio::task::spawn_blocking(move || {
            let db = agent_dbs.get(&database)?;
            let found = db.lock().expect("agent database lock poisoned").tool_call_by_key(&key);
            found.map_err(|e| MethodError::new(ErrorCode::Eio, format!("{}: {e}", database.display())))
        })
        .await
        .map_err(|e| MethodError::new(ErrorCode::Einternal, format!("tool call thread: {e}")))??;
        let Some(call) = found else { return Ok(None) };
        Ok(Some(match call.outcome() {
            Ok(result) => Ok(ToolResult { result, call_id: call.id }),
            Err(error) => {
                let code = if error.starts_with("timeout:") { ErrorCode::Etimeout } else { ErrorCode::Eio };
                Err(MethodError::new(code, error))
            }
        }))
    }

    fn installed(&self) -> std::sync::MutexGuard<'_, ToolStore> {
        self.installed.lock().expect("tool store lock poisoned")
    }

    /// The tool named `name`, image tools first, and where it comes from.
    fn tool(&self, name: &str) -> Result<(ValidTool, ToolSource), MethodError> {
        if let Some(tool) = self.image.get(name) {
            return Ok((tool.clone(), ToolSource::Image));
        }
        self.installed()
            .registry()
            .get(name)
            .map(|tool| (tool.clone(), ToolSource::Installed))
            .ok_or_else(|| MethodError::new(ErrorCode::Enoent, format!("unknown tool {name:?}")))
    }
}

impl wasm_daemon::Service for Daemon {
    async fn execute_tool(&self, call: &Call, params: ExecuteTool) -> Result<ToolResult, MethodError> {
        let timeout = call.timeout;
        let (tool, _) = self.tool(&params.tool_name)?;
        let database = agent_database(&self.clawfs_root, &params.agent)?;
        // A key already recorded answers from its record; one running now
        // is waited for (`once`).
        let once = match &params.idempotency_key {
            Some(key) if key.len() > MAX_IDEMPOTENCY_KEY => {
                return Err(MethodError::new(
                    ErrorCode::Eproto,
                    format!("idempotency_key: more than {MAX_IDEMPOTENCY_KEY} bytes"),
                ));
            }
            Some(key) => {
                let held = self.keyed.hold(&database, key).await;
                if let Some(answer) = self.recorded(&database, key).await? {
                    tracing::info!(
                        tool = params.tool_name,
                        agent = params.agent,
                        "answered from the call recorded with its idempotency key"
                    );
                    return answer;
                }
                Some(held)
            }
            None => None,
        };
        let host = self.host.clone();
        let _slot =
            self.call_slots.acquire().await.map_err(|e| MethodError::new(ErrorCode::Einternal, e.to_string()))?;
        let agent_dbs = self.agent_dbs.clone();
        let recorded = tokio::task::spawn_blocking(move || {
            // Held until the call is recorded, whatever becomes of the request.
            let _once = once;
            let audit = agent_dbs.get(&database)?;
            let call = CallRequest { agent: &params.agent, params: &params.arguments, timeout: Some(timeout) };
            host.call_recorded(&tool, &call, params.session_id.as_deref(), params.idempotency_key.as_deref(), &audit)
                .map_err(|e| MethodError::new(ErrorCode::Eio, e.to_string()))
        })
        .await
        .map_err(|e| MethodError::new(ErrorCode::Einternal, format!("tool call thread: {e}")))??;
        let result = recorded.outcome.map_err(|e| MethodError::new(error_code(&e), format!("{}: {e}", e.kind())))?;
        Ok(ToolResult { result, call_id: recorded.call_id })
    }

    async fn tool_list(&self, _call: &Call, _params: NoParams) -> Result<ToolList, MethodError> {
        let installed = self.installed();
        let tools = self
            .image
            .tools()
            .map(|tool| summary(tool, ToolSource::Image))
            .chain(installed.registry().tools().map(|tool| summary(tool, ToolSource::Installed)))
            .collect();
        Ok(ToolList { tools })
    }

    async fn tool_inspect(&self, _call: &Call, params: ToolRef) -> Result<ToolDetails, MethodError> {
        let (tool, source) = self.tool(&params.tool_name)?;
        let host = self.host.clone();
        let loaded = tokio::task::spawn_blocking({
            let tool = tool.clone();
            move || host.params_schema(&tool)
        })
        .await
        .map_err(|e| MethodError::new(ErrorCode::Einternal, format!("load thread: {e}")))?;
        let (params_schema, load_error) = match loaded {
            Ok(schema) => (Some(serde_json::from_str(&schema).unwrap_or(Value::String(schema))), None),
            Err(e) => (None, Some(format!("{}: {e}", e.kind()))),
        };
        Ok(ToolDetails {
            summary: summary(&tool, source),
            definition: serde_json::to_value(&tool.definition).expect("definitions serialize"),
            wasm_file: tool.wasm_path.display().to_string(),
            loadable: load_error.is_none(),
            params_schema,
            load_error,
        })
    }

    /// Verifies the hash, writes the binary, compiles and links the tool
    /// (its imports against its capabilities, its descriptor against the
    /// definition) and only then lists it.
    async fn tool_install(&self, _call: &Call, params: ToolInstall) -> Result<ToolSummary, MethodError> {
        let definition: ToolDefinition = serde_json::from_value(params.definition)
            .map_err(|e| MethodError::bad_params(format!("tool_install: definition: {e}")))?;
        let tool_id = definition.tool_id.clone();
        if self.image.get(&tool_id).is_some() {
            return Err(MethodError::new(
                ErrorCode::Eperm,
                format!("{tool_id:?} is one of the image's tools and cannot be replaced"),
            ));
        }
        let wasm = base64::engine::general_purpose::STANDARD
            .decode(params.wasm_base64.as_bytes())
            .map_err(|e| MethodError::new(ErrorCode::Eproto, format!("wasm_base64: {e}")))?;
        let staged = self.installed().stage(definition, &wasm).map_err(store_error)?;
        let host = self.host.clone();
        let checked = staged.clone();
        tokio::task::spawn_blocking(move || host.load(&checked))
            .await
            .map_err(|e| MethodError::new(ErrorCode::Einternal, format!("load thread: {e}")))?
            .map_err(|e| MethodError::new(error_code(&e), format!("{}: {e}", e.kind())))?;
        let result = summary(&staged, ToolSource::Installed);
        self.installed().commit(staged).map_err(store_error)?;
        tracing::info!(tool = tool_id, capabilities = ?result.capabilities, "tool installed");
        Ok(result)
    }

    async fn tool_remove(&self, _call: &Call, params: ToolRef) -> Result<ToolRemoved, MethodError> {
        let tool_name = params.tool_name;
        if self.image.get(&tool_name).is_some() {
            return Err(MethodError::new(
                ErrorCode::Eperm,
                format!("{tool_name:?} is one of the image's tools and cannot be removed"),
            ));
        }
        let removed = self.installed().remove(&tool_name).map_err(store_error)?;
        self.host.unload(&tool_name);
        tracing::info!(tool = tool_name, "tool removed");
        Ok(ToolRemoved { tool_name, version: removed.definition.version, removed: true })
    }
}

/// What `tool_list` shows of a tool.
fn summary(tool: &ValidTool, source: ToolSource) -> ToolSummary {
    let d = &tool.definition;
    ToolSummary {
        tool_name: d.tool_id.clone(),
        version: d.version.clone(),
        source,
        description: d.description.clone(),
        capabilities: d.capabilities.clone(),
        wasm_hash: d.wasm_hash.clone(),
        memory_limit_mb: d.memory_limit_mb,
        cpu_quota_percent: d.cpu_quota_percent,
        timeout_seconds: d.timeout_seconds,
    }
}

fn store_error(error: StoreError) -> MethodError {
    let code = match &error {
        StoreError::HashMismatch { .. } | StoreError::Immutable(_) => ErrorCode::Eperm,
        StoreError::Definition(_) => ErrorCode::Eproto,
        StoreError::NotInstalled(_) => ErrorCode::Enoent,
        StoreError::Io { .. } => ErrorCode::Eio,
    };
    MethodError::new(code, error.to_string())
}

/// The precompiled cache's key for this boot: the one in `path` if there is
/// one, else a new random one written there (0600). `None`, logged, when
/// `path`'s directory does not exist or cannot be used (the daemon run
/// outside its unit): the tool host then keys the cache for this process
/// only, which costs a compile per tool and start, nothing else.
///
/// Why this key and this place (specs/toolhost/README.md, "Precompiled
/// cache"): the cache is on /var, on the data partition, and its entries
/// are machine code. A key on that partition would be only as safe as the
/// partition's encryption (specs/clawfs/encryption.md), the one layer the
/// MAC is there not to depend on, so it lives in the runtime directory, a
/// tmpfs: never on disk, readable only by the daemon (0700, its own user)
/// and root, kept across restarts of the daemon
/// (`RuntimeDirectoryPreserve=restart`) so a crash or a watchdog restart
/// reuses the compiled tools, and gone at reboot, so each boot compiles
/// every tool once. A key from the vault would survive reboots too, but
/// loading tools would then wait for security-agent and an unsealed vault,
/// and any secret the daemon may read can be named in credentials.toml,
/// which is on the same partition, and so sent to a granted host.
fn cache_key(path: &Path) -> Option<[u8; CacheKey::LEN]> {
    match read_or_create_key(path) {
        Ok(key) => Some(key),
        Err(e) => {
            tracing::warn!(path = %path.display(), "no precompiled-cache key for this boot ({e}); tools compiled by this process are cached for it only");
            None
        }
    }
}

fn read_or_create_key(path: &Path) -> std::io::Result<[u8; CacheKey::LEN]> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut existing = Vec::new();
    match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) {
        Ok(file) => {
            file.take(CacheKey::LEN as u64 + 1).read_to_end(&mut existing)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Ok(key) = <[u8; CacheKey::LEN]>::try_from(existing.as_slice()) {
        return Ok(key);
    }
    // Missing, or cut short by a crash while it was written: a new key,
    // which only invalidates entries written under the last one.
    let mut key = [0u8; CacheKey::LEN];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    std::io::Write::write_all(&mut file, &key)?;
    Ok(key)
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

/// `<clawfs>/agents/<agent>/workspace.db`; the name must be a plain name so
/// it cannot point the audit elsewhere.
fn agent_database(clawfs_root: &Path, agent: &str) -> Result<PathBuf, MethodError> {
    let plain = !agent.is_empty() && agent.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !plain {
        return Err(MethodError::new(
            ErrorCode::Eproto,
            format!("agent {agent:?} must be lowercase letters, digits and hyphens"),
        ));
    }
    Ok(clawfs::layout::agents_dir(clawfs_root).join(agent).join(clawfs::DATABASE_FILE))
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
    async fn handle_request(&self, call: &Call, request: Request) -> Option<Result<Object, MethodError>> {
        // Who may call is the IPC ACL's job (ipc-acl.toml): agents execute_tool,
        // the operator everything.
        wasm_daemon::dispatch(self, call, request).await
    }

    fn degraded_reason(&self) -> Option<String> {
        self.audit_log_problem.clone()
    }
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--check-seccomp") => return seccomp::check(),
        Some("--precompile") => return precompile(&args[1..]),
        _ => {}
    }
    clawos_runtime::main(ComponentId::WasmDaemon, env!("CARGO_PKG_VERSION"), Daemon::start)
}

/// `--precompile DIR WASM...`, run by the image's build
/// (scripts/stage-rootfs.sh): compiles each tool with the engine the daemon
/// runs (the same `ToolHost::new`) into DIR, which the image installs as
/// [`IMAGE_ARTIFACTS`], so a box compiles none of its own tools at boot.
fn precompile(args: &[String]) -> std::process::ExitCode {
    let Some((dir, wasms)) = args.split_first().filter(|(_, wasms)| !wasms.is_empty()) else {
        eprintln!("usage: clawos-wasm-daemon --precompile DIR WASM...");
        return std::process::ExitCode::from(2);
    };
    let compiled = ToolHost::new(HostConfig::default()).map_err(|e| format!("the engine: {e:#}")).and_then(|host| {
        wasms.iter().try_for_each(|wasm| {
            let bytes = std::fs::read(wasm).map_err(|e| format!("{wasm}: {e}"))?;
            let path = host.precompile_into(&bytes, Path::new(dir)).map_err(|e| format!("{wasm}: {e:#}"))?;
            println!("{wasm} -> {}", path.display());
            Ok(())
        })
    });
    match compiled {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("clawos-wasm-daemon --precompile: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_key_is_made_once_per_boot_and_kept() {
        use std::os::unix::fs::PermissionsExt;
        let run = tempfile::tempdir().unwrap();
        let path = run.path().join("precompiled-cache.key");
        let key = cache_key(&path).expect("made in an existing directory");
        assert_eq!(std::fs::read(&path).unwrap(), key);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(cache_key(&path), Some(key), "a restart reads the same key");
        // A key cut short (a crash while writing it) is replaced.
        std::fs::write(&path, &key[..5]).unwrap();
        let replaced = cache_key(&path).unwrap();
        assert_ne!(replaced, key);
        assert_eq!(std::fs::read(&path).unwrap(), replaced);
        // Outside the unit (no runtime directory) there is none: the host
        // keys the cache for its process only.
        assert_eq!(cache_key(&run.path().join("missing/precompiled-cache.key")), None);
    }

    #[test]
    fn agent_names_cannot_leave_the_agents_directory() {
        let root = Path::new("/clawfs");
        assert_eq!(
            agent_database(root, "wasm-agent").unwrap(),
            Path::new("/clawfs/agents/wasm-agent").join(clawfs::DATABASE_FILE)
        );
        for bad in ["", "../vault", "a/b", "Agent"] {
            assert!(agent_database(root, bad).is_err(), "{bad:?}");
        }
    }
}

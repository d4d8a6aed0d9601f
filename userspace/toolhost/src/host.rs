//! The tool host: one wasmtime Engine, a cache of compiled tools, and a
//! fresh Store and instance for every call.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clawfs::audit::AuditLog;
use clawfs::names::check_params_schema;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::{clawos::tool as wit, ToolHostPre as HostPre};
use crate::definition::{format_hash, ValidTool, MAX_MEMORY_LIMIT_MB};
use crate::error::{Abort, CallError};
use crate::imports::{Grants, Services};
use crate::limits::CallLimiter;
use crate::providers::{CredentialProvider, KvBackend, MemoryKv, MemorySearch, NoCredentials, NoMemory};

/// How often the ticker thread advances the epoch: the granularity of every
/// deadline.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);
/// Largest JSON result a tool may return.
pub const MAX_OUTPUT_BYTES: usize = 1 << 20;
/// Calls that may run at once; the pooling allocator reserves this many slots.
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 32;

/// How the host is set up. `Default` is the daemon's production setting
/// minus the cache directory and credentials.
pub struct HostConfig {
    /// Where precompiled tools are kept (`<sha256>-<engine>.cwasm`); `None`
    /// compiles every tool once per process. Its files become machine code
    /// in this process, so none is loaded unless it carries a valid MAC
    /// under `cache_key` (specs/toolhost/README.md, "Precompiled cache"):
    /// the directory may be on storage an attacker can write.
    pub cache_dir: Option<PathBuf>,
    /// The key that authenticates the cache's entries. `None`: a random key
    /// of this host's own, so entries serve only this host and a new one
    /// (a daemon restart) recompiles every tool. A key that outlives the
    /// host must be kept where nothing that can write `cache_dir` can read
    /// it, or planted code becomes loadable again.
    pub cache_key: Option<CacheKey>,
    /// Artifacts compiled when the image was built, for the image's own
    /// tools (`<sha256>-<engine>.cwasm`, [`ToolHost::precompile_into`]),
    /// looked up before the cache. They are loaded without a MAC, so this
    /// must be a directory only the image's build can write: the verified
    /// root, whose bytes are as trusted as this code's own. `None`: none.
    pub image_artifacts: Option<PathBuf>,
    /// The host directory that guest paths under `/clawfs` map to.
    pub clawfs_root: PathBuf,
    /// Credentials injected into granted HTTP requests.
    pub credentials: Arc<dyn CredentialProvider>,
    /// Answers granted workspace memory searches.
    pub memory: Arc<dyn MemorySearch>,
    /// Keeps the `state:kv` keys (default: in memory).
    pub kv: Arc<dyn KvBackend>,
    /// PEM certificates HTTPS trusts instead of the built-in web roots
    /// (Mozilla's, compiled in): for a private CA. `None`: the web roots.
    pub ca_bundle_pem: Option<Vec<u8>>,
    /// Calls that may run at once (pooling allocator slots).
    pub max_concurrent_calls: u32,
    /// Per-tool cgroups the calling thread joins for each call, when the
    /// daemon has a delegated cgroup v2 subtree.
    pub cgroups: Option<crate::cgroup::ToolCgroups>,
    /// The ClawFS audit log (specs/clawfs/README.md, "Audit log") that every
    /// file write of a tool is recorded in, as fs-engine records its own.
    /// `Err` says why there is none; tools' writes are then refused, since
    /// a write that cannot be audited must not happen. Default: none.
    pub audit_log: Result<Arc<AuditLog>, String>,
}

impl Default for HostConfig {
    fn default() -> HostConfig {
        HostConfig {
            cache_dir: None,
            cache_key: None,
            image_artifacts: None,
            clawfs_root: PathBuf::from("/clawfs"),
            credentials: Arc::new(NoCredentials),
            memory: Arc::new(NoMemory),
            kv: Arc::new(MemoryKv::default()),
            ca_bundle_pem: None,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            cgroups: None,
            audit_log: Err("no ClawFS audit log is configured".into()),
        }
    }
}

/// The secret that authenticates precompiled artifacts: HMAC-SHA256 keys
/// of 32 bytes (specs/toolhost/README.md, "Precompiled cache").
#[derive(Clone)]
pub struct CacheKey([u8; CacheKey::LEN]);

impl CacheKey {
    /// Bytes in a key: SHA-256's output, HMAC-SHA256's full strength.
    pub const LEN: usize = 32;

    /// A new key from the kernel's random generator (getrandom(2)).
    pub fn random() -> std::io::Result<CacheKey> {
        let mut key = [0u8; CacheKey::LEN];
        let mut filled = 0;
        while filled < key.len() {
            // SAFETY: writes at most `key.len() - filled` bytes into `key`
            // from `filled` on, which is inside it.
            let got = unsafe { libc::getrandom(key[filled..].as_mut_ptr().cast(), key.len() - filled, 0) };
            if got < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() != std::io::ErrorKind::Interrupted {
                    return Err(error);
                }
            } else {
                filled += got as usize;
            }
        }
        Ok(CacheKey(key))
    }

    /// A key kept by the caller (the daemon keeps one per boot).
    pub fn from_bytes(bytes: [u8; CacheKey::LEN]) -> CacheKey {
        CacheKey(bytes)
    }
}

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheKey(..)")
    }
}

/// The target every tool is compiled for: ClawOS runs on x86_64 alone
/// (ARCHITECTURE.md).
const TARGET: &str = "x86_64-unknown-linux-gnu";

/// The file name of a precompiled artifact, in the cache and among the
/// image's: the wasm's SHA-256 and the engine's compatibility hash.
fn artifact_name(digest: &[u8; 32], engine: u64) -> String {
    format!("{}-{engine:016x}.cwasm", fsutil::hex(digest))
}

/// The on-disk cache of precompiled tools and the key its entries are
/// authenticated with.
struct PrecompiledCache {
    dir: PathBuf,
    key: CacheKey,
}

/// What every entry's MAC starts with, so the key authenticates nothing but
/// cache entries of this format.
const CACHE_MAC_DOMAIN: &[u8] = b"clawos-toolhost precompiled artifact v1\0";
/// Entries larger than this are refused unread: the daemon would otherwise
/// read whatever size was planted into its memory (the unit's MemoryMax is
/// 512 MiB). Artifacts are about four times their wasm: 0.4-0.5 MiB for the
/// image's tools, some 12 MiB for the largest installable one (3 MiB).
const MAX_CACHE_ENTRY_BYTES: u64 = 128 << 20;

impl PrecompiledCache {
    /// The MAC of an entry: over the wasm's SHA-256 and the engine's hash
    /// (what the file's name claims) as well as the artifact, so a valid
    /// entry of one tool renamed to another's name does not verify.
    fn mac(&self, digest: &[u8; 32], engine: u64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key.0).expect("HMAC takes keys of any length");
        mac.update(CACHE_MAC_DOMAIN);
        mac.update(digest);
        mac.update(&engine.to_le_bytes());
        mac
    }

    /// The file's bytes: the 32-byte MAC, then the artifact.
    fn seal(&self, digest: &[u8; 32], engine: u64, artifact: &[u8]) -> Vec<u8> {
        let mut mac = self.mac(digest, engine);
        mac.update(artifact);
        let mut entry = mac.finalize().into_bytes().to_vec();
        entry.extend_from_slice(artifact);
        entry
    }

    /// The artifact inside `entry` if its MAC verifies, else `None`. The
    /// comparison is constant-time (`verify_slice`), so timing tells a forger
    /// nothing about how much of a guessed MAC was right.
    fn open<'a>(&self, digest: &[u8; 32], engine: u64, entry: &'a [u8]) -> Option<&'a [u8]> {
        let (tag, artifact) = entry.split_at_checked(CacheKey::LEN)?;
        let mut mac = self.mac(digest, engine);
        mac.update(artifact);
        mac.verify_slice(tag).ok().map(|()| artifact)
    }
}

/// Reads a cache entry whole. Only a regular file, not reached through a
/// symlink, no larger than any artifact is: a planted FIFO would block the
/// loading thread, a device or a huge file fill the daemon's memory.
fn read_cache_entry(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if metadata.len() > MAX_CACHE_ENTRY_BYTES {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than any artifact ({MAX_CACHE_ENTRY_BYTES})",
            metadata.len()
        )));
    }
    let mut entry = Vec::with_capacity(metadata.len() as usize);
    file.take(MAX_CACHE_ENTRY_BYTES).read_to_end(&mut entry)?;
    Ok(entry)
}

/// Who is calling and with what.
#[derive(Debug, Clone)]
pub struct CallRequest<'a> {
    /// The calling agent; its kv state and tool-call records are used.
    pub agent: &'a str,
    pub params: &'a serde_json::Value,
    /// The caller's own deadline; the tool's `timeout_seconds` caps it.
    pub timeout: Option<Duration>,
}

/// The Store data of one call.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: CallLimiter,
    pub(crate) grants: Arc<Grants>,
    pub(crate) services: Arc<Services>,
    pub(crate) tool_id: String,
    pub(crate) agent: String,
    pub(crate) log_lines: usize,
    deadline: Instant,
}

impl CallState {
    /// Time left before the call's deadline, for host-side blocking work.
    pub(crate) fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Bytes the call's memories and tables may still grow by: the most
    /// host-side work for the guest may hold (a file read, a listing, a
    /// response body), since it must fit in the guest in the end.
    pub(crate) fn memory_left(&self) -> usize {
        self.limiter.remaining_bytes()
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// A compiled tool, linked against exactly its granted interfaces.
struct LoadedTool {
    tool: ValidTool,
    pre: HostPre<CallState>,
    grants: Arc<Grants>,
    /// The JSON Schema of `run`'s parameters, from the tool's `describe`.
    params_schema: String,
}

/// Runs tools. Cheap to share between threads (`&self` everywhere).
pub struct ToolHost {
    engine: Engine,
    services: Arc<Services>,
    cache: Option<PrecompiledCache>,
    image_artifacts: Option<PathBuf>,
    cgroups: Option<crate::cgroup::ToolCgroups>,
    loaded: Mutex<HashMap<String, Arc<LoadedTool>>>,
    /// Dropping the sender stops the ticker thread.
    stop_ticker: Option<mpsc::Sender<()>>,
    ticker: Option<JoinHandle<()>>,
}

impl ToolHost {
    /// Builds the engine (Cranelift, component model, epoch interruption,
    /// pooling allocator) and starts the epoch ticker thread.
    pub fn new(config: HostConfig) -> Result<ToolHost, wasmtime::Error> {
        let max_memory = (MAX_MEMORY_LIMIT_MB as usize) << 20;
        let calls = config.max_concurrent_calls;
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(calls)
            .total_core_instances(calls * crate::limits::MAX_INSTANCES_PER_CALL as u32)
            .total_memories(calls * crate::limits::MAX_MEMORIES_PER_CALL as u32)
            .total_tables(calls * crate::limits::MAX_TABLES_PER_CALL as u32)
            .max_memories_per_component(crate::limits::MAX_MEMORIES_PER_CALL as u32)
            .max_tables_per_component(crate::limits::MAX_TABLES_PER_CALL as u32)
            .max_memory_size(max_memory);
        let mut engine_config = Config::new();
        engine_config
            // Named, so Cranelift compiles for the architecture's baseline
            // rather than for the features of the CPU it runs on: an
            // artifact compiled when the image is built then loads on every
            // box (`image_artifacts`), the emulated CPU of the boot tests
            // included. Tools do little arithmetic for newer vector units
            // to speed up.
            .target(TARGET)?
            .wasm_component_model(true)
            .epoch_interruption(true)
            // Each slot reserves the largest memory a tool may ask for (plus
            // guard pages) rather than wasmtime's default 4 GiB.
            .memory_reservation(max_memory as u64)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&engine_config)?;
        let cache = match config.cache_dir {
            None => None,
            Some(dir) => {
                create_private_dir(&dir)
                    .map_err(|e| wasmtime::Error::msg(format!("cache directory {}: {e}", dir.display())))?;
                let key = match config.cache_key {
                    Some(key) => key,
                    None => CacheKey::random()
                        .map_err(|e| wasmtime::Error::msg(format!("a key for the precompiled cache: {e}")))?,
                };
                Some(PrecompiledCache { dir, key })
            }
        };
        let (stop_ticker, stopped) = mpsc::channel::<()>();
        let ticking = engine.clone();
        let ticker = std::thread::Builder::new()
            .name("epoch-ticker".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(EPOCH_TICK) {
                    ticking.increment_epoch();
                }
            })
            .map_err(|e| wasmtime::Error::msg(format!("starting the epoch ticker: {e}")))?;
        Ok(ToolHost {
            engine,
            services: Arc::new(Services {
                clawfs_root: config.clawfs_root,
                credentials: config.credentials,
                memory: config.memory,
                kv: config.kv,
                tls: tls_config(config.ca_bundle_pem.as_deref())?,
                audit_log: config.audit_log,
            }),
            cache,
            image_artifacts: config.image_artifacts,
            cgroups: config.cgroups,
            loaded: Mutex::new(HashMap::new()),
            stop_ticker: Some(stop_ticker),
            ticker: Some(ticker),
        })
    }

    /// Compiles (or fetches from cache) and links `tool` without running it,
    /// so the first call does not pay for compilation.
    pub fn load(&self, tool: &ValidTool) -> Result<(), CallError> {
        self.loaded_tool(tool).map(drop)
    }

    /// The JSON Schema of `tool`'s parameters, as it describes itself
    /// (loading it first if need be).
    pub fn params_schema(&self, tool: &ValidTool) -> Result<String, CallError> {
        Ok(self.loaded_tool(tool)?.params_schema.clone())
    }

    /// Forgets the compiled `tool_id` (after it was removed from the registry).
    pub fn unload(&self, tool_id: &str) {
        self.loaded.lock().expect("tool cache lock poisoned").remove(tool_id);
    }

    fn loaded_tool(&self, tool: &ValidTool) -> Result<Arc<LoadedTool>, CallError> {
        if let Some(loaded) = self.loaded.lock().expect("tool cache lock poisoned").get(tool.tool_id()) {
            // A changed registry entry (new hash, capabilities, limits) reloads.
            if loaded.tool == *tool {
                return Ok(loaded.clone());
            }
        }
        let loaded = Arc::new(self.load_from_disk(tool)?);
        self.loaded.lock().expect("tool cache lock poisoned").insert(tool.tool_id().to_owned(), loaded.clone());
        Ok(loaded)
    }

    /// Reads the wasm, checks its hash, compiles or deserializes it, and
    /// links it against the interfaces its capabilities grant.
    fn load_from_disk(&self, tool: &ValidTool) -> Result<LoadedTool, CallError> {
        let tool_id = tool.tool_id().to_owned();
        let load_error = |what, message: String| CallError::Load { tool_id: tool_id.clone(), what, message };
        let bytes = std::fs::read(&tool.wasm_path)
            .map_err(|e| load_error("wasm file", format!("{}: {e}", tool.wasm_path.display())))?;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        if digest != tool.wasm_sha256 {
            return Err(CallError::HashMismatch {
                tool_id,
                expected: tool.definition.wasm_hash.clone(),
                actual: format_hash(&digest),
            });
        }
        let component = self.compile(&bytes, &digest).map_err(|e| load_error("component", format!("{e:#}")))?;
        let grants = Arc::new(Grants::new(&tool.capabilities));
        let linker = self.linker_for(&component, &grants, &tool_id)?;
        let instance_pre = linker.instantiate_pre(&component).map_err(|e| load_error("imports", format!("{e:#}")))?;
        let pre = HostPre::new(instance_pre).map_err(|e| load_error("exports", format!("{e:#}")))?;
        let mut loaded = LoadedTool { tool: tool.clone(), pre, grants, params_schema: String::new() };
        loaded.params_schema = self.check_descriptor(&loaded)?;
        Ok(loaded)
    }

    /// Compiles `bytes`, going through the on-disk cache when there is one.
    /// The key holds the wasm's hash and the engine's compatibility hash, so
    /// a wasmtime upgrade or a config change never loads a stale artifact.
    ///
    /// An entry is machine code, and the cache directory is on storage this
    /// host does not vouch for (the daemon's is on the data partition;
    /// specs/toolhost/README.md, "Precompiled cache"): one is loaded only if
    /// its MAC under the cache key verifies, checked on the very bytes then deserialized (read once
    /// into memory, not mapped from the file, which could change in
    /// between). Anything else (planted, damaged, from another boot's key)
    /// is recompiled from the verified wasm and overwritten.
    fn compile(&self, bytes: &[u8], digest: &[u8; 32]) -> wasmtime::Result<Component> {
        let engine = self.engine_hash();
        if let Some(component) = self.image_artifact(digest, engine) {
            return Ok(component);
        }
        let Some(cache) = &self.cache else {
            return Component::new(&self.engine, bytes);
        };
        let path = cache.dir.join(artifact_name(digest, engine));
        match read_cache_entry(&path) {
            Ok(entry) => match cache.open(digest, engine, &entry) {
                // SAFETY: the artifact's MAC verified under the cache key,
                // which only this daemon holds: it is the bytes this engine
                // wrote for exactly this wasm (its SHA-256 is in the MAC)
                // and engine. wasmtime still checks its header against the
                // engine.
                Some(artifact) => match unsafe { Component::deserialize(&self.engine, artifact) } {
                    Ok(component) => return Ok(component),
                    Err(e) => tracing::warn!(path = %path.display(), "ignoring unusable cached artifact: {e:#}"),
                },
                None => tracing::warn!(
                    path = %path.display(),
                    "refusing a cached artifact whose MAC does not verify (planted, damaged, or written under another key); recompiling"
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), "ignoring unreadable cached artifact: {e}"),
        }
        let artifact = self.engine.precompile_component(bytes)?;
        fsutil::write_atomic(&path, &cache.seal(digest, engine, &artifact), 0o600)
            .map_err(|e| wasmtime::Error::msg(format!("writing {}: {e}", path.display())))?;
        // SAFETY: `artifact` was produced by this engine a moment ago.
        unsafe { Component::deserialize(&self.engine, &artifact) }
    }

    /// This engine's precompile compatibility hash: in every artifact's
    /// name, so a wasmtime upgrade or a config change never loads a stale one.
    fn engine_hash(&self) -> u64 {
        let mut engine_hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut engine_hasher);
        engine_hasher.finish()
    }

    /// The image's artifact for the wasm with this SHA-256 and this
    /// engine's hash, if `image_artifacts` holds one this engine accepts. A
    /// missing one is no error (a tool installed after the build, another
    /// engine); an unusable one is logged and compiled instead.
    fn image_artifact(&self, digest: &[u8; 32], engine: u64) -> Option<Component> {
        let path = self.image_artifacts.as_ref()?.join(artifact_name(digest, engine));
        let artifact = match read_cache_entry(&path) {
            Ok(artifact) => artifact,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), "ignoring unreadable image artifact: {e}");
                return None;
            }
        };
        // SAFETY: `image_artifacts` is a directory only the image's build
        // writes (HostConfig), on the verified root: these bytes are as
        // trusted as the daemon's own code, and were written by
        // `precompile_into` for exactly this wasm (its SHA-256 is in the
        // name) and engine. wasmtime still checks its header against the
        // engine and the CPU.
        match unsafe { Component::deserialize(&self.engine, &artifact) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(path = %path.display(), "ignoring unusable image artifact: {e:#}");
                None
            }
        }
    }

    /// Compiles `wasm` and writes the artifact into `dir` under the name
    /// `image_artifacts` looks for; returns its path. For the image's build
    /// (`clawos-wasm-daemon --precompile`), with an engine configured as
    /// the daemon's.
    pub fn precompile_into(&self, wasm: &[u8], dir: &Path) -> wasmtime::Result<PathBuf> {
        let digest: [u8; 32] = Sha256::digest(wasm).into();
        let path = dir.join(artifact_name(&digest, self.engine_hash()));
        let artifact = self.engine.precompile_component(wasm)?;
        fsutil::write_atomic(&path, &artifact, 0o644)
            .map_err(|e| wasmtime::Error::msg(format!("writing {}: {e}", path.display())))?;
        Ok(path)
    }

    /// A linker with WASI (deny-by-default context) and only the
    /// `clawos:tool` interfaces `grants` allows. A component importing
    /// anything else is refused here, before it can run.
    fn linker_for(
        &self,
        component: &Component,
        grants: &Grants,
        tool_id: &str,
    ) -> Result<Linker<CallState>, CallError> {
        let denied = |reason: String| CallError::CapabilityDenied { tool_id: tool_id.to_owned(), reason };
        let mut linker = Linker::<CallState>::new(&self.engine);
        // Rust's wasip2 std imports wasi:cli, io, clocks, random, filesystem
        // and sockets whether or not it uses them, so WASI is always linked;
        // the per-call WasiCtx grants nothing (no preopens, no env, no args,
        // no socket address) which is what keeps them closed.
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| self.link_error(tool_id, e))?;
        wit::types::add_to_linker::<_, HasSelf<CallState>>(&mut linker, |s| s)
            .map_err(|e| self.link_error(tool_id, e))?;
        wit::logging::add_to_linker::<_, HasSelf<CallState>>(&mut linker, |s| s)
            .map_err(|e| self.link_error(tool_id, e))?;
        for (name, _) in component.component_type().imports(&self.engine) {
            let interface = name.split('@').next().unwrap_or(name);
            let granted = match interface {
                "clawos:tool/types" | "clawos:tool/logging" => true,
                "clawos:tool/filesystem" => grants.filesystem(),
                "clawos:tool/http" => grants.network(),
                "clawos:tool/kv" => grants.kv,
                "clawos:tool/memory" => grants.memory(),
                other => other.starts_with("wasi:"),
            };
            if !granted {
                return Err(denied(format!("the component imports {name}, which none of its capabilities grants")));
            }
        }
        if grants.filesystem() {
            wit::filesystem::add_to_linker::<_, HasSelf<CallState>>(&mut linker, |s| s)
                .map_err(|e| self.link_error(tool_id, e))?;
        }
        if grants.network() {
            wit::http::add_to_linker::<_, HasSelf<CallState>>(&mut linker, |s| s)
                .map_err(|e| self.link_error(tool_id, e))?;
        }
        if grants.memory() {
            wit::memory::add_to_linker::<_, HasSelf<CallState>>(&mut linker, |s| s)
                .map_err(|e| self.link_error(tool_id, e))?;
        }
        if grants.kv {
            wit::kv::add_to_linker::<_, HasSelf<CallState>>(&mut linker, |s| s)
                .map_err(|e| self.link_error(tool_id, e))?;
        }
        Ok(linker)
    }

    fn link_error(&self, tool_id: &str, e: wasmtime::Error) -> CallError {
        CallError::Host { tool_id: tool_id.to_owned(), message: format!("linking host interfaces: {e:#}") }
    }

    /// The tool must describe itself with the registry's name and version;
    /// returns its parameters' schema.
    fn check_descriptor(&self, loaded: &LoadedTool) -> Result<String, CallError> {
        let definition = &loaded.tool.definition;
        let (mut store, timeout) = self.new_store(loaded, "clawos-toolhost", None);
        let descriptor = loaded
            .pre
            .instantiate(&mut store)
            .and_then(|bindings| bindings.call_describe(&mut store))
            .map_err(|e| classify(&definition.tool_id, timeout, e))?;
        if descriptor.name != definition.tool_id || descriptor.version != definition.version {
            return Err(CallError::Load {
                tool_id: definition.tool_id.clone(),
                what: "descriptor",
                message: format!(
                    "the tool describes itself as {} {}, the registry lists {} {}",
                    descriptor.name, descriptor.version, definition.tool_id, definition.version
                ),
            });
        }
        if let Err(message) = check_params_schema(&descriptor.params_schema) {
            return Err(CallError::Load { tool_id: definition.tool_id.clone(), what: "descriptor", message });
        }
        Ok(descriptor.params_schema)
    }

    fn new_store(&self, loaded: &LoadedTool, agent: &str, requested: Option<Duration>) -> (Store<CallState>, Duration) {
        let definition = &loaded.tool.definition;
        let tool_limit = Duration::from_secs(definition.timeout_seconds.into());
        let timeout = requested.map_or(tool_limit, |r| r.min(tool_limit));
        let state = CallState {
            wasi: WasiCtx::builder().allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false).build(),
            table: ResourceTable::new(),
            limiter: CallLimiter::new((definition.memory_limit_mb as usize) << 20),
            grants: loaded.grants.clone(),
            services: self.services.clone(),
            tool_id: definition.tool_id.clone(),
            agent: agent.to_owned(),
            log_lines: 0,
            deadline: Instant::now() + timeout,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        // One tick more than the timeout: the first tick may come at once.
        store.set_epoch_deadline(timeout.as_millis().div_ceil(EPOCH_TICK.as_millis()) as u64 + 1);
        store.epoch_deadline_trap();
        (store, timeout)
    }

    /// The engine every tool and channel is compiled for.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Creates a Store and an instance of `tool` and drops them without
    /// running anything: what every call pays before the tool starts
    /// (measured by the benchmarks).
    pub fn instantiate(&self, tool: &ValidTool) -> Result<(), CallError> {
        let loaded = self.loaded_tool(tool)?;
        let (mut store, timeout) = self.new_store(&loaded, "clawos-toolhost", None);
        loaded.pre.instantiate(&mut store).map(drop).map_err(|e| classify(tool.tool_id(), timeout, e))
    }

    /// Runs `tool` once in a fresh instance and returns its JSON result.
    pub fn call(&self, tool: &ValidTool, request: &CallRequest<'_>) -> Result<serde_json::Value, CallError> {
        let loaded = self.loaded_tool(tool)?;
        let tool_id = tool.tool_id();
        let _placement = match &self.cgroups {
            Some(cgroups) => Some(
                cgroups.enter(tool).map_err(|e| CallError::Host { tool_id: tool_id.into(), message: e.to_string() })?,
            ),
            None => None,
        };
        let (mut store, timeout) = self.new_store(&loaded, request.agent, request.timeout);
        let params = serde_json::to_string(request.params).map_err(|e| CallError::InvalidParams(e.to_string()))?;
        let outcome = loaded
            .pre
            .instantiate(&mut store)
            .and_then(|bindings| bindings.call_run(&mut store, &params))
            .map_err(|e| classify(tool_id, timeout, e))?;
        let output = outcome.map_err(|e| match e {
            wit::types::ToolError::InvalidParams(message) => {
                CallError::Tool { tool_id: tool_id.into(), kind: "invalid_params", message }
            }
            wit::types::ToolError::Failed(message) => {
                CallError::Tool { tool_id: tool_id.into(), kind: "failed", message }
            }
        })?;
        if output.len() > MAX_OUTPUT_BYTES {
            return Err(CallError::InvalidOutput {
                tool_id: tool_id.into(),
                reason: format!("{} bytes exceeds the {MAX_OUTPUT_BYTES}-byte limit", output.len()),
            });
        }
        serde_json::from_str(&output)
            .map_err(|e| CallError::InvalidOutput { tool_id: tool_id.into(), reason: format!("not JSON: {e}") })
    }
}

impl Drop for ToolHost {
    fn drop(&mut self) {
        drop(self.stop_ticker.take());
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
    }
}

/// Turns what wasmtime returned into the call's specific error.
pub(crate) fn classify(tool_id: &str, timeout: Duration, error: wasmtime::Error) -> CallError {
    let tool_id = tool_id.to_owned();
    if let Some(abort) = error.downcast_ref::<Abort>() {
        return match abort {
            Abort::Memory { requested_bytes, limit_bytes } => {
                CallError::OutOfMemory { tool_id, requested_bytes: *requested_bytes, limit_bytes: *limit_bytes }
            }
            Abort::Denied(reason) => CallError::CapabilityDenied { tool_id, reason: reason.clone() },
        };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => CallError::Timeout { tool_id, timeout },
        Some(trap) => CallError::Trap { tool_id, message: format!("{trap}") },
        None if format!("{error:#}").contains("pooling") || format!("{error:#}").contains("concurrent") => {
            CallError::Host { tool_id, message: format!("{error:#}") }
        }
        None => CallError::Trap { tool_id, message: format!("{error:#}") },
    }
}

/// The TLS settings for tools' HTTPS: the web roots, or exactly the
/// certificates of `ca_bundle_pem`.
fn tls_config(ca_bundle_pem: Option<&[u8]>) -> Result<ureq::tls::TlsConfig, wasmtime::Error> {
    use ureq::tls::{parse_pem, PemItem, RootCerts, TlsConfig};
    let roots = match ca_bundle_pem {
        None => RootCerts::WebPki,
        Some(pem) => {
            let mut certs = Vec::new();
            for item in parse_pem(pem) {
                if let PemItem::Certificate(cert) = item.map_err(|e| wasmtime::Error::msg(format!("CA bundle: {e}")))? {
                    certs.push(cert);
                }
            }
            if certs.is_empty() {
                return Err(wasmtime::Error::msg("CA bundle: no certificates in it"));
            }
            RootCerts::new_with_certs(&certs)
        }
    };
    Ok(TlsConfig::builder().root_certs(roots).build())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

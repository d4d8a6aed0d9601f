//! Per-tool cgroup v2 limits, a second line behind the Store's own limits.
//!
//! Tools run on the daemon's threads, so the per-tool cgroups are *threaded*
//! cgroups: the calling thread moves into `tool-<id>` for the call and back
//! afterwards. Layout under the daemon's delegated cgroup (`Delegate=yes`):
//!
//! ```text
//! <delegated>/                 domain, no processes; +cpu +pids +memory for children
//! <delegated>/daemon/          the daemon process; threaded root; memory.max here
//! <delegated>/daemon/tool-<id> threaded; cpu.max and pids.max per tool
//! ```
//!
//! The memory controller is not threaded in cgroup v2, so memory cannot be
//! limited per tool thread: the per-call limiter is the per-tool memory line,
//! and `daemon/memory.max` caps all tools together.
//!
//! Why plain cgroupfs writes and not the `cgroups-rs` crate: 0.5.1 (the
//! newest, which does handle threaded cgroups and `cgroup.threads`) pulls in
//! 73 crates, 29 of them new to this workspace (`cargo tree -e normal` of a
//! crate depending on `cgroups-rs = "=0.5.1"` alone, against Cargo.lock):
//! a D-Bus client (zbus 5, not optional) and a second async runtime
//! (async-io, async-executor, blocking) inside wasm-daemon, the component
//! that runs untrusted code and whose seccomp filter and attack surface we
//! keep small, for the few cgroupfs file writes below. Each names its file in
//! [`CgroupError`].

use std::fs;
use std::path::{Path, PathBuf};

use crate::definition::ValidTool;

/// The `cpu.max` period: 100 ms, the kernel default.
const CPU_PERIOD_US: u32 = 100_000;

/// A failed cgroupfs operation, with the file it touched.
#[derive(Debug, thiserror::Error)]
#[error("cgroup {op} {path}: {source}")]
pub struct CgroupError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

fn write(path: PathBuf, value: &str) -> Result<(), CgroupError> {
    fs::write(&path, value).map_err(|source| CgroupError { op: "write", path, source })
}

fn mkdir(path: PathBuf) -> Result<(), CgroupError> {
    match fs::create_dir(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(CgroupError { op: "mkdir", path, source: e }),
        _ => Ok(()),
    }
}

/// The daemon's tool cgroups.
#[derive(Debug)]
pub struct ToolCgroups {
    daemon: PathBuf,
    pids_max: u32,
}

impl ToolCgroups {
    /// Moves this process into `<delegated>/daemon`, enables the controllers
    /// and caps all tools' memory at `memory_max_bytes`. `pids_max` bounds the
    /// threads one tool's cgroup may hold (the concurrent calls of that tool).
    pub fn setup(delegated: &Path, memory_max_bytes: u64, pids_max: u32) -> Result<ToolCgroups, CgroupError> {
        let daemon = delegated.join("daemon");
        mkdir(daemon.clone())?;
        write(daemon.join("cgroup.procs"), &std::process::id().to_string())?;
        write(delegated.join("cgroup.subtree_control"), "+cpu +pids +memory")?;
        write(daemon.join("memory.max"), &memory_max_bytes.to_string())?;
        Ok(ToolCgroups { daemon, pids_max })
    }

    /// The cgroup of `tool`, created with its limits on first use.
    fn tool_cgroup(&self, tool: &ValidTool) -> Result<PathBuf, CgroupError> {
        let path = self.daemon.join(format!("tool-{}", tool.tool_id()));
        if !path.exists() {
            mkdir(path.clone())?;
            write(path.join("cgroup.type"), "threaded")?;
            // Only possible once a threaded child exists; idempotent after.
            write(self.daemon.join("cgroup.subtree_control"), "+cpu +pids")?;
        }
        let quota = tool.definition.cpu_quota_percent * CPU_PERIOD_US / 100;
        write(path.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
        write(path.join("pids.max"), &self.pids_max.to_string())?;
        Ok(path)
    }

    /// Moves the calling thread into `tool`'s cgroup until the guard drops.
    pub fn enter(&self, tool: &ValidTool) -> Result<ThreadPlacement<'_>, CgroupError> {
        let path = self.tool_cgroup(tool)?;
        write(path.join("cgroup.threads"), &current_tid().to_string())?;
        Ok(ThreadPlacement { cgroups: self })
    }
}

fn current_tid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// The calling thread's stay in a tool cgroup; dropping it moves the thread
/// back to the daemon's cgroup.
#[derive(Debug)]
pub struct ThreadPlacement<'a> {
    cgroups: &'a ToolCgroups,
}

impl Drop for ThreadPlacement<'_> {
    fn drop(&mut self) {
        if let Err(e) = write(self.cgroups.daemon.join("cgroup.threads"), &current_tid().to_string()) {
            // The thread keeps the tool's CPU quota; say so loudly rather than
            // panic in a destructor.
            tracing::error!("moving the thread back from its tool cgroup: {e}");
        }
    }
}

//! Drives a tool cgroup's `pids.max` instead of reading it back
//! (`specs/toolhost/README.md`, the per-tool cgroups): a WASM tool cannot
//! start a thread or a process, so no tool can show the limit holding. This
//! probe stands in for a tool's thread that could: it moves itself into the
//! daemon's threaded subtree, its only thread into `tool-<id>`, and starts
//! threads there until the kernel refuses one. Prints one JSON line: how
//! many started, the cgroup's `pids.max`, its `pids.current` at the refusal
//! and the refusal's error; exits non-zero when none was refused.
//!
//!   clawos-pids-probe <daemon cgroup>/tool-<id>
//!
//! Root only; the threads it started end with it, and the cgroup holds
//! nothing of it afterwards.
use std::path::Path;

/// Far above any `pids.max` a tool cgroup gets: a limit that does not hold
/// stops the probe here instead of starting threads without end.
const MAX_THREADS: usize = 1000;

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map(|text| text.trim().to_owned()).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("{}: {e}", path.display()))
}

fn main() -> Result<(), String> {
    let tool = std::env::args_os().nth(1).ok_or("usage: clawos-pids-probe <daemon cgroup>/tool-<id>")?;
    let tool = Path::new(&tool);
    let root = tool.parent().ok_or("the tool cgroup has no parent")?;
    let pid = std::process::id().to_string();
    // Into the threaded root (the daemon's cgroup) as a process, then this
    // thread, its only one, into the tool's threaded cgroup.
    write(&root.join("cgroup.procs"), &pid)?;
    write(&tool.join("cgroup.threads"), &pid)?;
    let max = read(&tool.join("pids.max"))?;
    let mut started = 0;
    let refusal = loop {
        if started == MAX_THREADS {
            break None;
        }
        // Each thread waits until the process ends.
        match std::thread::Builder::new().stack_size(64 << 10).spawn(std::thread::park) {
            Ok(_) => started += 1,
            Err(e) => break Some(e),
        }
    };
    let current = read(&tool.join("pids.current"))?;
    println!(
        "{}",
        serde_json::json!({
            "started": started,
            "pids_max": max,
            "pids_current": current,
            "refused": refusal.as_ref().map(ToString::to_string),
            // EAGAIN, what clone(2) fails with at a pids limit.
            "eagain": refusal.as_ref().map(std::io::Error::kind) == Some(std::io::ErrorKind::WouldBlock),
        })
    );
    match refusal {
        Some(_) => Ok(()),
        None => Err(format!("{started} threads started in {} and none was refused", tool.display())),
    }
}

//! Proves the eBPF path end to end on the running kernel: loads the monitor
//! object, attaches the exec tracepoint, runs a child, and waits for the
//! kernel's record of that exec. Prints one JSON line; exits non-zero on failure.
use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use clawos_ebpf_common::c_bytes;
use clawos_ebpf_monitor::{ExecMonitor, DEFAULT_OBJECT};

fn main() -> anyhow::Result<()> {
    let object = std::env::args_os().nth(1).map(PathBuf::from).unwrap_or_else(|| DEFAULT_OBJECT.into());
    let mut monitor = ExecMonitor::attach(&object).with_context(|| format!("attaching {}", object.display()))?;
    let child = Command::new("/usr/bin/true").spawn().context("spawning /usr/bin/true")?;
    let child_pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        while let Some(event) = monitor.next_event() {
            if event.header.pid == child_pid {
                let filename = String::from_utf8_lossy(c_bytes(&event.filename));
                println!(
                    "{{\"program\":\"sched_process_exec\",\"attached\":true,\"pid\":{},\"filename\":\"{}\",\"cgroup_id\":{}}}",
                    child_pid,
                    filename.escape_default(),
                    event.header.cgroup_id
                );
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("no exec event for pid {child_pid} within 10 s")
}

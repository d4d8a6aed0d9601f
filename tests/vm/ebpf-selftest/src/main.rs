//! Proves the eBPF path end to end on the running kernel: loads the monitor
//! object, attaches every program, puts its own cgroup in scope (audit mode,
//! no rules), runs a child, and waits for the kernel's record of that exec.
//! Prints one JSON line; exits non-zero on failure.
use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use clawos_ebpf_common::CgroupPolicy;
use clawos_ebpf_monitor::{own_cgroup, Event, Monitor, ScopeEntry, DEFAULT_OBJECT};

fn main() -> anyhow::Result<()> {
    let object = std::env::args_os().nth(1).map(PathBuf::from).unwrap_or_else(|| DEFAULT_OBJECT.into());
    let mut monitor = Monitor::attach(&object).with_context(|| format!("attaching {}", object.display()))?;
    let (path, cgroup_id) = own_cgroup().context("finding this process's cgroup")?;
    let entry =
        ScopeEntry { path, cgroup_id, policy: CgroupPolicy::default(), open_grants: vec![], connect_grants: vec![] };
    monitor.apply(&[entry]).context("putting this cgroup in scope")?;
    let child = Command::new("/usr/bin/true").spawn().context("spawning /usr/bin/true")?;
    let child_pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let mut seen = None;
        monitor.drain(|event| {
            if let Ok(Event::Exec(exec)) = event {
                if exec.header.pid == child_pid {
                    seen = Some(Event::Exec(exec));
                }
            }
        });
        if let Some(event) = seen {
            let mut line = event.to_json();
            line.insert("program".into(), "sched_process_exec".into());
            line.insert("attached".into(), true.into());
            line.insert("programs".into(), monitor.program_stats().len().into());
            println!("{}", serde_json::Value::Object(line));
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("no exec event for pid {child_pid} within 10 s")
}

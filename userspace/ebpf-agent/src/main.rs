//! `clawos-ebpf-agent`: loads the ClawOS eBPF monitor at boot, keeps its
//! policy maps in step with `/etc/clawos/ebpf-policy.toml` and the cgroups
//! that exist, turns kernel records into IPC events through the router
//! (`ebpf_event` for every record, `anomaly_detected`, `threshold_exceeded`,
//! `events_lost`), and answers `get_metrics` (the runtime's metrics plus per-program
//! BPF run count, run time and losses), `get_policy` and `reload_policy`.
//!
//! Owns: the anomaly rules and the policy lifecycle. Does not own: the
//! programs and map formats (`clawos-ebpf-monitor`, `clawos-ebpf-common`).
//! Fails closed: a policy or rules file that does not parse stops start-up,
//! and a bad reload leaves the previous policy in force.

mod rules;

use std::{
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use clawos_api::ebpf_agent::{self, EbpfMetrics, PolicyReloaded, PolicyView, ProgramStats, ResolvedCgroup};
use clawos_api::{Call, NoParams};
use clawos_ebpf_monitor::{policy::CGROUP_ROOT, Monitor, Policy, DEFAULT_OBJECT};
use clawos_ipc::{server::MethodError, ComponentId, ErrorCode, Object, Request};
use clawos_runtime::{Component, Runtime};
use rules::{Evaluator, Finding, Rules, DEFAULT_RULES};
use serde_json::json;

/// How often ring buffers are drained. The file ring (1 MiB, ~3,200 open
/// records) then holds a 10 ms burst of 300,000 opens/s; draining this
/// often costs 100 wakeups a second.
const DRAIN_INTERVAL: Duration = Duration::from_millis(10);
/// How often the policy is re-resolved against existing cgroups, which is
/// also the longest a newly created cgroup goes unmonitored.
const RESCAN_INTERVAL: Duration = Duration::from_secs(1);

struct State {
    monitor: Monitor,
    policy: Policy,
    /// Syscall totals per cgroup at the last rescan, to turn counts into deltas.
    syscalls: std::collections::HashMap<u64, u64>,
    /// Losses per program already reported.
    lost: std::collections::HashMap<&'static str, u64>,
    events: u64,
}

struct Daemon {
    state: Arc<Mutex<State>>,
    runtime: Runtime,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The policy entries, without the agent's own cgroup: its map updates are
/// bpf() calls that would otherwise report themselves.
fn resolve(policy: &Policy) -> Vec<clawos_ebpf_monitor::ScopeEntry> {
    let own = clawos_ebpf_monitor::own_cgroup().map(|(_, id)| id).ok();
    policy.resolve(Path::new(CGROUP_ROOT)).into_iter().filter(|entry| Some(entry.cgroup_id) != own).collect()
}

impl Daemon {
    fn start(runtime: &Runtime) -> Result<Self, String> {
        let policy_path = Path::new(clawos_ebpf_monitor::policy::DEFAULT_POLICY);
        let policy = Policy::load(policy_path).map_err(|error| format!("{error:#}"))?;
        let rules = Rules::load(Path::new(DEFAULT_RULES))?;
        let mut monitor = Monitor::attach(Path::new(DEFAULT_OBJECT)).map_err(|error| error_chain(&error))?;
        // Diagnostics only: the programs enforce the same without them.
        if let Err(error) = monitor.forward_program_logs(ProgramLog) {
            tracing::error!("the eBPF programs' own log is not read: {}", error_chain(&error));
        }
        monitor.apply(&resolve(&policy)).map_err(|error| error_chain(&error))?;
        let state = Arc::new(Mutex::new(State {
            monitor,
            policy,
            syscalls: Default::default(),
            lost: Default::default(),
            events: 0,
        }));
        let worker = (Arc::clone(&state), runtime.clone());
        std::thread::Builder::new()
            .name("ebpf-events".into())
            .spawn(move || event_loop(&worker.0, &worker.1, Evaluator::new(rules)))
            .map_err(|error| format!("spawning the event thread: {error}"))?;
        Ok(Self { state, runtime: runtime.clone() })
    }
}

/// The eBPF programs' aya-log records, into this component's log (the
/// journal), prefixed with the program's module.
struct ProgramLog;

impl log::Log for ProgramLog {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        let (program, message) = (record.target(), record.args());
        match record.level() {
            log::Level::Error => tracing::error!("eBPF {program}: {message}"),
            log::Level::Warn => tracing::warn!("eBPF {program}: {message}"),
            log::Level::Info => tracing::info!("eBPF {program}: {message}"),
            log::Level::Debug => tracing::debug!("eBPF {program}: {message}"),
            log::Level::Trace => tracing::trace!("eBPF {program}: {message}"),
        }
    }

    fn flush(&self) {}
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn event_loop(state: &Mutex<State>, runtime: &Runtime, mut evaluator: Evaluator) {
    let started = Instant::now();
    let mut last_rescan = Instant::now();
    loop {
        std::thread::sleep(DRAIN_INTERVAL);
        let now = started.elapsed();
        let mut state = lock(state);
        let mut records = Vec::new();
        state.monitor.drain(|event| match event {
            Ok(event) => records.push(event),
            Err(error) => tracing::warn!(%error, "undecodable eBPF record"),
        });
        state.events += records.len() as u64;
        for event in &records {
            runtime.publish("ebpf_event", event.to_json());
            for finding in evaluator.observe(event, now) {
                publish_finding(runtime, finding);
            }
        }
        if last_rescan.elapsed() >= RESCAN_INTERVAL {
            last_rescan = Instant::now();
            let entries = resolve(&state.policy);
            if let Err(error) = state.monitor.apply(&entries) {
                tracing::error!(error = error_chain(&error), "updating policy maps");
            }
            for (cgroup_id, total) in state.monitor.syscall_counts() {
                let previous = state.syscalls.insert(cgroup_id, total).unwrap_or(0);
                for finding in evaluator.count("syscalls", cgroup_id, total.saturating_sub(previous), now) {
                    publish_finding(runtime, finding);
                }
            }
            let programs = state.monitor.program_stats();
            for data in newly_lost(&mut state.lost, &programs) {
                runtime.publish("events_lost", data);
            }
        }
    }
}

/// The `events_lost` events to publish: one per program whose ring buffer
/// dropped records since the last call (`reported` holds the totals already
/// published), with the new and the total count.
fn newly_lost(
    reported: &mut std::collections::HashMap<&'static str, u64>,
    programs: &[clawos_ebpf_monitor::ProgramStats],
) -> Vec<Object> {
    let mut events = Vec::new();
    for stats in programs {
        let before = reported.insert(stats.name, stats.lost_events).unwrap_or(0);
        if stats.lost_events > before {
            let mut data = Object::new();
            data.insert("program".into(), json!(stats.name));
            data.insert("lost".into(), json!(stats.lost_events - before));
            data.insert("lost_total".into(), json!(stats.lost_events));
            events.push(data);
        }
    }
    events
}

fn publish_finding(runtime: &Runtime, finding: Finding) {
    let (name, data) = match finding {
        Finding::Anomaly { rule, cgroup_id, pid, detail } => {
            ("anomaly_detected", json!({"rule": rule, "cgroup_id": cgroup_id, "pid": pid, "detail": detail}))
        }
        Finding::Threshold { rule, cgroup_id, count, threshold, window_seconds } => (
            "threshold_exceeded",
            json!({"rule": rule, "cgroup_id": cgroup_id, "count": count, "threshold": threshold, "window_seconds": window_seconds}),
        ),
    };
    if let serde_json::Value::Object(data) = data {
        runtime.publish(name, data);
    }
}

impl ebpf_agent::Service for Daemon {
    async fn get_metrics(&self, _call: &Call, _params: NoParams) -> Result<EbpfMetrics, MethodError> {
        let process = self.runtime.metrics()?;
        let state = lock(&self.state);
        let programs = state
            .monitor
            .program_stats()
            .into_iter()
            .map(|p| ProgramStats {
                name: p.name.to_owned(),
                id: p.id,
                run_count: p.run_count,
                run_time_ns: p.run_time_ns,
                lost_events: p.lost_events,
                coalesced_events: p.coalesced_events,
            })
            .collect();
        Ok(EbpfMetrics {
            process,
            programs,
            events_total: state.events,
            monitored_cgroups: resolve(&state.policy).len(),
        })
    }

    async fn get_policy(&self, _call: &Call, _params: NoParams) -> Result<PolicyView, MethodError> {
        let state = lock(&self.state);
        let resolved = resolve(&state.policy)
            .into_iter()
            .map(|entry| ResolvedCgroup {
                path: entry.path,
                cgroup_id: entry.cgroup_id,
                mode: entry.policy.mode,
                rules: entry.policy.rules,
            })
            .collect();
        let cgroup = state.policy.cgroups.iter().map(|rule| serde_json::to_value(rule).unwrap_or_default()).collect();
        Ok(PolicyView { cgroup, resolved })
    }

    async fn reload_policy(&self, _call: &Call, _params: NoParams) -> Result<PolicyReloaded, MethodError> {
        let path = Path::new(clawos_ebpf_monitor::policy::DEFAULT_POLICY);
        let policy = Policy::load(path).map_err(|error| MethodError::new(ErrorCode::Eproto, error_chain(&error)))?;
        let mut state = lock(&self.state);
        let entries = resolve(&policy);
        state.monitor.apply(&entries).map_err(|error| MethodError::new(ErrorCode::Eio, error_chain(&error)))?;
        state.policy = policy;
        Ok(PolicyReloaded { monitored_cgroups: entries.len() })
    }
}

impl Component for Daemon {
    async fn handle_request(&self, call: &Call, request: Request) -> Option<Result<Object, MethodError>> {
        ebpf_agent::dispatch(self, call, request).await
    }
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::EbpfAgent, env!("CARGO_PKG_VERSION"), Daemon::start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(name: &'static str, lost_events: u64) -> clawos_ebpf_monitor::ProgramStats {
        clawos_ebpf_monitor::ProgramStats {
            name,
            id: 1,
            run_count: 0,
            run_time_ns: 0,
            lost_events,
            coalesced_events: 0,
        }
    }

    #[test]
    fn events_lost_is_published_once_per_overflow_with_the_new_count() {
        let mut reported = std::collections::HashMap::new();
        assert!(newly_lost(&mut reported, &[program("file_open", 0), program("tcp_connect", 0)]).is_empty());
        let events = newly_lost(&mut reported, &[program("file_open", 40), program("tcp_connect", 0)]);
        assert_eq!(events.len(), 1);
        assert_eq!(
            serde_json::Value::Object(events[0].clone()),
            json!({"program": "file_open", "lost": 40, "lost_total": 40})
        );
        // Nothing new: nothing published; more lost: only the difference.
        assert!(newly_lost(&mut reported, &[program("file_open", 40)]).is_empty());
        let events = newly_lost(&mut reported, &[program("file_open", 45)]);
        assert_eq!(
            serde_json::Value::Object(events[0].clone()),
            json!({"program": "file_open", "lost": 5, "lost_total": 45})
        );
    }
}

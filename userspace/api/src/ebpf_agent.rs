//! ebpf-agent: the eBPF monitor's policy and program statistics
//! (`specs/ebpf/events.md`).

use clawos_ipc::HeartbeatMetrics;
use serde::{Deserialize, Serialize};

use crate::NoParams;

service! {
    component: Some(clawos_ipc::ComponentId::EbpfAgent);
    /// The agent's own metrics plus each eBPF program's run count and time,
    /// events read and cgroups monitored.
    fn get_metrics(NoParams) -> EbpfMetrics { timeout_ms: 2000, errors: [Eio] }
    /// The policy in force and the cgroups it resolved to.
    fn get_policy(NoParams) -> PolicyView { timeout_ms: 2000, errors: [] }
    /// Reads `/etc/clawos/ebpf-policy.toml` again and applies it; a policy
    /// that does not parse or apply leaves the old one in force.
    fn reload_policy(NoParams) -> PolicyReloaded { timeout_ms: 5000, errors: [Eproto, Eio] }
}

/// ebpf-agent's `get_metrics` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EbpfMetrics {
    /// The process and message metrics every component reports.
    #[serde(flatten)]
    pub process: HeartbeatMetrics,
    /// Each attached program.
    pub programs: Vec<ProgramStats>,
    /// Events read from the ring buffers since start.
    pub events_total: u64,
    /// Cgroups the policy resolved to.
    pub monitored_cgroups: usize,
}

/// One eBPF program's statistics since it was loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProgramStats {
    /// The program.
    pub name: String,
    /// The kernel's program id.
    pub id: u32,
    /// Runs (kernel BPF stats).
    pub run_count: u64,
    /// Time spent running, nanoseconds.
    pub run_time_ns: u64,
    /// Records lost because its ring buffer was full.
    pub lost_events: u64,
    /// Repeated opens of one file folded into one event.
    pub coalesced_events: u64,
}

/// `get_policy` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PolicyView {
    /// The policy file's `[[cgroup]]` rules, as loaded.
    pub cgroup: Vec<serde_json::Value>,
    /// The cgroups they resolved to.
    pub resolved: Vec<ResolvedCgroup>,
}

/// One monitored cgroup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResolvedCgroup {
    /// Path below the cgroup mount.
    pub path: String,
    /// Its cgroup id.
    pub cgroup_id: u64,
    /// The mode as the programs see it (`specs/ebpf/events.md`).
    pub mode: u32,
    /// The rule bits as the programs see them.
    pub rules: u32,
}

/// `reload_policy` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PolicyReloaded {
    /// Cgroups the new policy resolved to.
    pub monitored_cgroups: usize,
}

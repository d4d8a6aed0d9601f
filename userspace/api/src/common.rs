//! The methods every component answers, served by `clawos-runtime` (a
//! component may serve one of them itself, as observability and ebpf-agent
//! do `get_metrics`).

use clawos_ipc::{ComponentId, HeartbeatMetrics};
use serde::{Deserialize, Serialize};

use crate::NoParams;

service! {
    component: None;
    /// Liveness: the same answer as `health_check`.
    fn ping(NoParams) -> Health { timeout_ms: 1000, errors: [Eio] }
    /// The component's health, version, uptime and process id.
    fn health_check(NoParams) -> Health { timeout_ms: 2000, errors: [Eio] }
    /// The component's own process and message metrics, as in its heartbeats.
    fn get_metrics(NoParams) -> HeartbeatMetrics { timeout_ms: 2000, errors: [Eio] }
}

/// Whether a component works fully.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthState {
    /// Fully working.
    Ok,
    /// Running with reduced function; `reason` says why.
    Degraded,
}

/// `ping` and `health_check` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Health {
    /// Fully working or degraded.
    pub status: HealthState,
    /// Why it is degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The component.
    pub component: ComponentId,
    /// Its software version.
    pub component_version: String,
    /// Time since it started, nanoseconds.
    pub uptime_ns: u64,
    /// Its process id.
    pub pid: u32,
}

//! observability: the health table of every component (from the heartbeats
//! it follows at the router) and their last metrics.

use std::collections::BTreeMap;

use clawos_ipc::health::Liveness;
use clawos_ipc::message::HealthStatus;
use clawos_ipc::{ComponentId, HeartbeatMetrics};
use serde::{Deserialize, Serialize};

use crate::NoParams;

service! {
    component: Some(clawos_ipc::ComponentId::Observability);
    /// The last heartbeat metrics of every component, or of one.
    fn get_metrics(MetricsQuery) -> AllMetrics { timeout_ms: 2000, errors: [] }
    /// One row per component: health, version, last heartbeat, uptime.
    fn component_status(NoParams) -> ComponentStatuses { timeout_ms: 2000, errors: [] }
}

/// observability's `get_metrics` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsQuery {
    /// Only this component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<ComponentId>,
}

/// observability's `get_metrics` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AllMetrics {
    /// By component id.
    pub components: BTreeMap<ComponentId, ComponentMetrics>,
}

/// What observability knows of one component's metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ComponentMetrics {
    /// Its liveness by heartbeat.
    pub health: Liveness,
    /// What its last heartbeat said of itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<HealthStatus>,
    /// The metrics of its last heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<HeartbeatMetrics>,
}

/// `component_status` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ComponentStatuses {
    /// One row per component, in component order.
    pub components: Vec<ComponentStatus>,
}

/// One row of `component_status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ComponentStatus {
    /// The component.
    pub component: ComponentId,
    /// Its liveness by heartbeat.
    pub health: Liveness,
    /// Its version, from its `component_ready` event.
    pub component_version: Option<String>,
    /// Milliseconds since its last heartbeat.
    pub last_heartbeat_age_ms: Option<u64>,
    /// Its uptime at the last heartbeat, nanoseconds.
    pub uptime_ns: Option<u64>,
    /// Heartbeats received from it.
    pub heartbeats: u64,
}

//! Heartbeat bookkeeping: a component silent for longer than the timeout
//! (spec: 90 s) is unhealthy.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::component::ComponentId;
use crate::message::{HealthStatus, Heartbeat};

/// What is known about one component's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Liveness {
    /// A heartbeat arrived within the timeout and reported `ok`.
    Healthy,
    /// A heartbeat arrived within the timeout but reported degraded/critical.
    Degraded,
    /// No heartbeat within the timeout.
    Unhealthy,
    /// The component announced `component_shutdown` and has not come back.
    Stopped,
    /// Never heard from.
    Unknown,
}

/// The last heartbeat of one component.
#[derive(Debug, Clone)]
pub struct LastHeartbeat {
    /// When it arrived.
    pub received_at: Instant,
    /// What it said.
    pub heartbeat: Heartbeat,
}

/// Tracks the last heartbeat of every component.
#[derive(Debug)]
pub struct HealthTracker {
    timeout: Duration,
    last: BTreeMap<ComponentId, LastHeartbeat>,
    stopped: BTreeMap<ComponentId, Instant>,
}

impl HealthTracker {
    /// A tracker marking components unhealthy after `timeout` of silence.
    pub fn new(timeout: Duration) -> Self {
        HealthTracker { timeout, last: BTreeMap::new(), stopped: BTreeMap::new() }
    }

    /// Records a heartbeat (which also clears a previous shutdown).
    pub fn record(&mut self, component: ComponentId, heartbeat: Heartbeat, now: Instant) {
        self.stopped.remove(&component);
        self.last.insert(component, LastHeartbeat { received_at: now, heartbeat });
    }

    /// Records a `component_shutdown` announcement.
    pub fn record_shutdown(&mut self, component: ComponentId, now: Instant) {
        self.stopped.insert(component, now);
    }

    /// The component's health as of `now`.
    pub fn liveness(&self, component: ComponentId, now: Instant) -> Liveness {
        let last = self.last.get(&component);
        if let Some(stopped_at) = self.stopped.get(&component) {
            if last.is_none_or(|last| last.received_at <= *stopped_at) {
                return Liveness::Stopped;
            }
        }
        match last {
            None => Liveness::Unknown,
            Some(last) if now.saturating_duration_since(last.received_at) > self.timeout => Liveness::Unhealthy,
            Some(last) if last.heartbeat.status == HealthStatus::Ok => Liveness::Healthy,
            Some(_) => Liveness::Degraded,
        }
    }

    /// The last heartbeat of `component`, if any.
    pub fn last_heartbeat(&self, component: ComponentId) -> Option<&LastHeartbeat> {
        self.last.get(&component)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::HeartbeatMetrics;

    fn beat(status: HealthStatus) -> Heartbeat {
        Heartbeat {
            status,
            metrics: HeartbeatMetrics {
                uptime_ns: 1,
                messages_processed: 0,
                messages_failed: 0,
                memory_usage_bytes: 1,
                cpu_usage_percent: 0.0,
                active_connections: 0,
                open_fds: None,
                threads: None,
            },
        }
    }

    #[test]
    fn silence_past_the_timeout_marks_unhealthy() {
        let start = Instant::now();
        let mut tracker = HealthTracker::new(Duration::from_secs(90));
        let router = ComponentId::Router;
        assert_eq!(tracker.liveness(router, start), Liveness::Unknown);
        tracker.record(router, beat(HealthStatus::Ok), start);
        assert_eq!(tracker.liveness(router, start + Duration::from_secs(90)), Liveness::Healthy);
        assert_eq!(tracker.liveness(router, start + Duration::from_secs(91)), Liveness::Unhealthy);
        tracker.record(router, beat(HealthStatus::Degraded), start + Duration::from_secs(100));
        assert_eq!(tracker.liveness(router, start + Duration::from_secs(101)), Liveness::Degraded);
        tracker.record_shutdown(router, start + Duration::from_secs(102));
        assert_eq!(tracker.liveness(router, start + Duration::from_secs(103)), Liveness::Stopped);
        tracker.record(router, beat(HealthStatus::Ok), start + Duration::from_secs(104));
        assert_eq!(tracker.liveness(router, start + Duration::from_secs(105)), Liveness::Healthy);
    }
}

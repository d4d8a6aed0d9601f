//! The health table, fed by events from the router.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawos_api::observability::{AllMetrics, ComponentMetrics, ComponentStatus, ComponentStatuses};
use clawos_api::router::{self, SubscribeEvents};
use clawos_ipc::health::HealthTracker;
use clawos_ipc::message::HEARTBEAT;
use clawos_ipc::{Body, ClientOptions, ComponentId, Heartbeat, IpcClient, Message, Principal};
use clawos_runtime::{COMPONENT_READY, COMPONENT_SHUTDOWN};
use serde_json::Value;

/// Pause before re-subscribing after losing the router.
const RESUBSCRIBE_DELAY: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Extra {
    versions: BTreeMap<ComponentId, String>,
    heartbeats: BTreeMap<ComponentId, u64>,
    agents: crate::agents::AgentMetrics,
}

/// What observability knows about every component.
pub struct Collector {
    tracker: Mutex<HealthTracker>,
    extra: Mutex<Extra>,
}

impl Collector {
    pub fn new(unhealthy_after: Duration) -> Self {
        Collector { tracker: Mutex::new(HealthTracker::new(unhealthy_after)), extra: Mutex::default() }
    }

    fn tracker(&self) -> std::sync::MutexGuard<'_, HealthTracker> {
        // Each critical section is one update of a map; a poisoned lock still holds a consistent table.
        self.tracker.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn extra(&self) -> std::sync::MutexGuard<'_, Extra> {
        self.extra.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes one event relayed by the router.
    pub fn record(&self, message: &Message, now: Instant) {
        let (Principal::Component(component), Body::Event(event)) = (message.sender, &message.body) else {
            return;
        };
        match event.event_name.as_str() {
            HEARTBEAT => match serde_json::from_value::<Heartbeat>(Value::Object(event.event_data.clone())) {
                Ok(heartbeat) => {
                    self.tracker().record(component, heartbeat, now);
                    *self.extra().heartbeats.entry(component).or_default() += 1;
                }
                Err(error) => tracing::warn!(%component, %error, "malformed heartbeat"),
            },
            COMPONENT_READY => {
                if let Some(version) = event.event_data.get("component_version").and_then(Value::as_str) {
                    self.extra().versions.insert(component, version.to_owned());
                }
            }
            COMPONENT_SHUTDOWN => self.tracker().record_shutdown(component, now),
            _ => self.extra().agents.record(message),
        }
    }

    /// Appends the agents' metric families to `out`.
    pub fn render_agents(&self, out: &mut String) {
        self.extra().agents.render(out);
    }

    /// One row per component.
    pub fn rows(&self) -> Vec<(ComponentStatus, Option<Heartbeat>)> {
        let now = Instant::now();
        let tracker = self.tracker();
        let extra = self.extra();
        ComponentId::ALL
            .into_iter()
            .map(|component| {
                let last = tracker.last_heartbeat(component);
                let status = ComponentStatus {
                    component,
                    health: tracker.liveness(component, now),
                    component_version: extra.versions.get(&component).cloned(),
                    last_heartbeat_age_ms: last.map(|last| {
                        u64::try_from(now.duration_since(last.received_at).as_millis()).unwrap_or(u64::MAX)
                    }),
                    uptime_ns: last.map(|last| last.heartbeat.metrics.uptime_ns),
                    heartbeats: extra.heartbeats.get(&component).copied().unwrap_or(0),
                };
                (status, last.map(|last| last.heartbeat.clone()))
            })
            .collect()
    }

    /// `component_status`: one row per component.
    pub fn status(&self) -> ComponentStatuses {
        ComponentStatuses { components: self.rows().into_iter().map(|(status, _)| status).collect() }
    }

    /// `get_metrics`: the last heartbeat metrics of every component, or of `only`.
    pub fn metrics(&self, only: Option<ComponentId>) -> AllMetrics {
        let components = self
            .rows()
            .into_iter()
            .filter(|(status, _)| only.is_none_or(|only| only == status.component))
            .map(|(status, heartbeat)| {
                let (status_reported, metrics) =
                    heartbeat.map_or((None, None), |heartbeat| (Some(heartbeat.status), Some(heartbeat.metrics)));
                (status.component, ComponentMetrics { health: status.health, status: status_reported, metrics })
            })
            .collect();
        AllMetrics { components }
    }
}

/// Subscribes to the health events at the router, forever, reconnecting
/// when the router goes away.
pub async fn follow_router(collector: Arc<Collector>) {
    let names = SubscribeEvents {
        events: [HEARTBEAT, COMPONENT_READY, COMPONENT_SHUTDOWN]
            .into_iter()
            .chain(crate::agents::EVENTS)
            .map(str::to_owned)
            .collect(),
    };
    loop {
        match IpcClient::connect(ComponentId::Router, ClientOptions::new(ComponentId::Observability.into())).await {
            Ok((client, mut events)) => match router::Client::new(&client).subscribe_events(&names).await {
                Ok(_) => {
                    tracing::info!("subscribed to health events at the router");
                    while let Some(message) = events.recv().await {
                        collector.record(&message, Instant::now());
                    }
                    tracing::warn!("router connection closed; resubscribing");
                }
                Err(error) => tracing::warn!(%error, "subscribe_events failed"),
            },
            Err(error) => tracing::debug!(%error, "router not reachable yet"),
        }
        tokio::time::sleep(RESUBSCRIBE_DELAY).await;
    }
}

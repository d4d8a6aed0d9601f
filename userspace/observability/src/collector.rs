//! The health table, fed by events from the router.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawos_ipc::health::{HealthTracker, Liveness};
use clawos_ipc::message::HEARTBEAT;
use clawos_ipc::server::MethodError;
use clawos_ipc::{Body, ClientOptions, ComponentId, Heartbeat, IpcClient, Message, Object, Principal};
use clawos_runtime::{COMPONENT_READY, COMPONENT_SHUTDOWN};
use serde::Serialize;
use serde_json::Value;

/// Pause before re-subscribing after losing the router.
const RESUBSCRIBE_DELAY: Duration = Duration::from_secs(1);

/// One row of `component_status`.
#[derive(Debug, Serialize)]
pub struct ComponentStatus {
    pub component: ComponentId,
    pub health: Liveness,
    pub component_version: Option<String>,
    pub last_heartbeat_age_ms: Option<u64>,
    pub uptime_ns: Option<u64>,
    pub heartbeats: u64,
}

#[derive(Default)]
struct Extra {
    versions: BTreeMap<ComponentId, String>,
    heartbeats: BTreeMap<ComponentId, u64>,
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
            _ => {}
        }
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
                    last_heartbeat_age_ms: last
                        .map(|last| u64::try_from(now.duration_since(last.received_at).as_millis()).unwrap_or(u64::MAX)),
                    uptime_ns: last.map(|last| last.heartbeat.metrics.uptime_ns),
                    heartbeats: extra.heartbeats.get(&component).copied().unwrap_or(0),
                };
                (status, last.map(|last| last.heartbeat.clone()))
            })
            .collect()
    }

    /// `component_status`: `{"components": [ComponentStatus, ...]}`.
    pub fn status(&self) -> Object {
        let rows: Vec<Value> = self
            .rows()
            .into_iter()
            .map(|(status, _)| serde_json::to_value(status).unwrap_or(Value::Null))
            .collect();
        let mut result = Object::new();
        result.insert("components".into(), Value::Array(rows));
        result
    }

    /// `get_metrics {"component"?: id}`: the last heartbeat metrics of every
    /// (or one) component, `{"components": {id: {health, status, metrics}}}`.
    pub fn metrics(&self, params: &Object) -> Result<Object, MethodError> {
        let only: Option<ComponentId> = match params.get("component") {
            None => None,
            Some(Value::String(name)) => Some(name.parse().map_err(MethodError::bad_params)?),
            Some(_) => return Err(MethodError::bad_params("component must be a string")),
        };
        let mut components = Object::new();
        for (status, heartbeat) in self.rows() {
            if only.is_some_and(|only| only != status.component) {
                continue;
            }
            let mut entry = Object::new();
            entry.insert("health".into(), serde_json::to_value(status.health).unwrap_or(Value::Null));
            if let Some(heartbeat) = heartbeat {
                entry.insert("status".into(), serde_json::to_value(heartbeat.status).unwrap_or(Value::Null));
                entry.insert("metrics".into(), serde_json::to_value(heartbeat.metrics).unwrap_or(Value::Null));
            }
            components.insert(status.component.to_string(), Value::Object(entry));
        }
        let mut result = Object::new();
        result.insert("components".into(), Value::Object(components));
        Ok(result)
    }
}

/// Subscribes to the health events at the router, forever, reconnecting
/// when the router goes away.
pub async fn follow_router(collector: Arc<Collector>) {
    let mut names = Object::new();
    names.insert("events".into(), Value::from(vec![HEARTBEAT, COMPONENT_READY, COMPONENT_SHUTDOWN]));
    loop {
        match IpcClient::connect(ComponentId::Router, ClientOptions::new(ComponentId::Observability.into())).await {
            Ok((client, mut events)) => match client.call("subscribe_events", names.clone(), None).await {
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

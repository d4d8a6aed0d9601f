//! The health table, fed by events from the router, and at each
//! subscription by asking every component once (`catch_up`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawos_api::common::{self, HealthState};
use clawos_api::observability::{AllMetrics, ComponentMetrics, ComponentStatus, ComponentStatuses};
use clawos_api::router::{self, SubscribeEvents};
use clawos_api::NoParams;
use clawos_ipc::health::HealthTracker;
use clawos_ipc::message::HealthStatus;
use clawos_ipc::message::HEARTBEAT;
use clawos_ipc::{Body, ClientOptions, ComponentId, Heartbeat, IpcClient, Message, Principal};
use clawos_runtime::{COMPONENT_READY, COMPONENT_SHUTDOWN};
use serde_json::Value;

/// Pause before re-subscribing after losing the router.
const RESUBSCRIBE_DELAY: Duration = Duration::from_secs(1);
/// How long `catch_up` keeps asking a component that does not answer yet
/// (one still starting at boot), one try a second: past it, the
/// component's own first heartbeat will do.
const CATCH_UP_TRIES: u32 = 60;
/// One `catch_up` call's bound.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(2);

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

    /// Takes a component's answer to `health_check` and `get_metrics` as the
    /// heartbeat it would have sent at `now`; and its version, which its
    /// `component_ready` would have carried.
    fn record_answer(&self, component: ComponentId, health: common::Health, heartbeat: Heartbeat, now: Instant) {
        self.tracker().record(component, heartbeat, now);
        self.extra().versions.entry(component).or_insert(health.component_version);
    }

    /// Whether a heartbeat of `component` was recorded (or asked for) at all.
    fn seen(&self, component: ComponentId) -> bool {
        self.tracker().last_heartbeat(component).is_some()
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
                    let catching_up = tokio::spawn(catch_up(Arc::clone(&collector)));
                    while let Some(message) = events.recv().await {
                        collector.record(&message, Instant::now());
                    }
                    catching_up.abort();
                    tracing::warn!("router connection closed; resubscribing");
                }
                Err(error) => tracing::warn!(%error, "subscribe_events failed"),
            },
            Err(error) => tracing::debug!(%error, "router not reachable yet"),
        }
        tokio::time::sleep(RESUBSCRIBE_DELAY).await;
    }
}

/// The heartbeats sent before a subscription reached no one: a component
/// that started before observability subscribed (at boot they start
/// together) would show as `unknown` until its next heartbeat, up to an
/// interval (30 s) later, and the update gate would wait that long
/// (specs/ipc/README.md, "Heartbeats, events and health"). So each
/// component not seen yet is asked once for its health and metrics, which
/// are recorded as the heartbeat it would have sent. One that does not
/// answer yet is asked again each second, for a minute at most; its own
/// first heartbeat, which this subscription now receives, ends that too.
async fn catch_up(collector: Arc<Collector>) {
    let mut asks = tokio::task::JoinSet::new();
    for component in ComponentId::ALL {
        let collector = Arc::clone(&collector);
        asks.spawn(async move {
            for _ in 0..CATCH_UP_TRIES {
                if collector.seen(component) {
                    return;
                }
                if let Ok((health, heartbeat)) = ask(component).await {
                    collector.record_answer(component, health, heartbeat, Instant::now());
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
    while asks.join_next().await.is_some() {}
    tracing::info!("every component that answered is in the health table");
}

/// A component's `health_check` and `get_metrics`, as a heartbeat.
async fn ask(component: ComponentId) -> Result<(common::Health, Heartbeat), String> {
    let connect = IpcClient::connect(component, ClientOptions::new(ComponentId::Observability.into()));
    let (client, _events) = tokio::time::timeout(CATCH_UP_TIMEOUT, connect)
        .await
        .map_err(|_| "no answer".to_owned())?
        .map_err(|error| error.to_string())?;
    let calls = common::Client::new(&client).with_timeout(CATCH_UP_TIMEOUT);
    let health = calls.health_check(&NoParams {}).await.map_err(|error| error.to_string())?;
    let metrics = calls.get_metrics(&NoParams {}).await.map_err(|error| error.to_string())?;
    let status = match health.status {
        HealthState::Ok => HealthStatus::Ok,
        HealthState::Degraded => HealthStatus::Degraded,
    };
    Ok((health, Heartbeat { status, metrics }))
}

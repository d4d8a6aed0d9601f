//! The runtime every ClawOS component daemon is built on.
//!
//! Owns: start-up (logging, config, IPC policy, the listening socket from
//! systemd socket activation or bound by itself), the IPC server with the
//! built-in methods every component answers (`ping`, `health_check`,
//! `get_metrics`), the heartbeat loop that also feeds the systemd watchdog,
//! event publishing through the router, and graceful shutdown on SIGTERM
//! with a `component_shutdown` event.
//!
//! Does not own: the protocol itself (`clawos-ipc`), the methods' names and
//! types (`clawos-api`), or what any component's own methods do (the
//! component crates, through [`Component`]).
//!
//! Events (heartbeats included) go to the router, which fans them out to
//! subscribers; observability subscribes to `heartbeat`, `component_ready`
//! and `component_shutdown` there. One event path means `clawctl events`
//! sees exactly what observability sees.
#![deny(missing_docs)]

pub mod config;
pub mod logging;
pub mod peers;
mod publisher;
pub mod systemd;

use std::future::Future;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawos_api::common::{Health, HealthState};
use clawos_api::{Call, NoParams};
use clawos_ipc::message::{HealthStatus, Heartbeat, HeartbeatMetrics, HEARTBEAT};
use clawos_ipc::process_metrics::ProcessSampler;
use clawos_ipc::server::{Connection, Handler, MethodError, ServerSettings, ServerStats};
use clawos_ipc::version::SUPPORTED_VERSIONS;
use clawos_ipc::{AccessPolicy, ComponentId, ErrorCode, Event, IpcServer, Message, Object, Request};
use serde_json::Value;

pub use config::RuntimeConfig;
pub use publisher::EventPublisher;

/// Event announcing a component finished starting.
pub const COMPONENT_READY: &str = "component_ready";
/// Event announcing a component is stopping.
pub const COMPONENT_SHUTDOWN: &str = "component_shutdown";

/// What a component adds to the runtime.
pub trait Component: Send + Sync + 'static {
    /// Answers a request, or `None` if the method is not this component's
    /// (the runtime then tries the common methods, else answers ENOENT).
    /// A component implements its `clawos_api::<component>::Service` and
    /// answers here with that module's `dispatch`.
    fn handle_request(
        &self,
        call: &Call,
        request: Request,
    ) -> impl Future<Output = Option<Result<Object, MethodError>>> + Send {
        let _ = (call, request);
        async { None }
    }

    /// Takes an event addressed to this component.
    fn handle_event(&self, connection: Connection, event: Event) -> impl Future<Output = ()> + Send {
        let _ = (connection, event);
        async {}
    }

    /// A connection ended.
    fn connection_closed(&self, connection_id: u64) {
        let _ = connection_id;
    }

    /// Why the component runs with reduced function, or `None` when it is
    /// fully working (the default). `Some` makes `health_check` answer
    /// `"status": "degraded"` with this `reason`, and heartbeats report
    /// `degraded`. Called on every health check and heartbeat: keep it cheap.
    fn degraded_reason(&self) -> Option<String> {
        None
    }

    /// Delivers one of this component's own events without the router
    /// socket; returns `false` to send it to the router (the default). Only
    /// the router itself overrides this.
    fn deliver_own_event(&self, event: &Message) -> bool {
        let _ = event;
        false
    }
}

/// Shared state the runtime gives a component when building it.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    component: ComponentId,
    software_version: &'static str,
    config: RuntimeConfig,
    stats: Arc<ServerStats>,
    sampler: Mutex<ProcessSampler>,
    publisher: EventPublisher,
}

impl Runtime {
    /// This component.
    pub fn component(&self) -> ComponentId {
        self.inner.component
    }

    /// The loaded config.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// Publishes an event through the router (best effort, see [`EventPublisher`]).
    pub fn publish(&self, event_name: &str, event_data: Object) {
        self.inner.publisher.publish(event_name, event_data);
    }

    /// Current metrics, as sent in heartbeats and answered by `get_metrics`.
    pub fn metrics(&self) -> Result<HeartbeatMetrics, MethodError> {
        let sample = self
            .inner
            .sampler
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .sample()
            .map_err(|error| MethodError::new(ErrorCode::Eio, error.to_string()))?;
        let stats = &self.inner.stats;
        Ok(HeartbeatMetrics {
            uptime_ns: u64::try_from(sample.uptime.as_nanos()).unwrap_or(u64::MAX),
            messages_processed: stats.messages_processed.load(Ordering::Relaxed),
            messages_failed: stats.messages_failed.load(Ordering::Relaxed),
            memory_usage_bytes: sample.rss_bytes,
            cpu_usage_percent: sample.cpu_percent,
            active_connections: stats.active_connections.load(Ordering::Relaxed),
            open_fds: Some(sample.open_fds),
            threads: Some(sample.threads),
        })
    }

    fn health(&self, degraded_reason: Option<String>) -> Result<Health, MethodError> {
        let metrics = self.metrics()?;
        Ok(Health {
            status: if degraded_reason.is_some() { HealthState::Degraded } else { HealthState::Ok },
            reason: degraded_reason,
            component: self.inner.component,
            component_version: self.inner.software_version.to_owned(),
            uptime_ns: metrics.uptime_ns,
            pid: std::process::id(),
        })
    }
}

/// Adapts a [`Component`] to the IPC server, adding the built-in methods.
struct RuntimeHandler<C> {
    runtime: Runtime,
    component: Arc<C>,
}

impl<C: Component> Handler for RuntimeHandler<C> {
    async fn handle_request(&self, connection: Connection, request: Request) -> Result<Object, MethodError> {
        let component = self.runtime.inner.component;
        let timeout = clawos_ipc::timeouts::effective_timeout(
            request.timeout_ms,
            clawos_api::timeout(component, &request.method),
        );
        let call = Call { connection, timeout };
        let method = request.method.clone();
        let answer = if clawos_api::own_methods(component).iter().any(|own| own.name == method) {
            self.component.handle_request(&call, request).await
        } else {
            clawos_api::common::dispatch(self, &call, request).await
        };
        answer.unwrap_or_else(|| Err(MethodError::unknown_method(&method)))
    }

    async fn handle_event(&self, connection: Connection, event: Event) {
        self.component.handle_event(connection, event).await;
    }

    fn connection_closed(&self, connection_id: u64) {
        self.component.connection_closed(connection_id);
    }
}

/// The methods every component answers, unless it serves one itself.
impl<C: Component> clawos_api::common::Service for RuntimeHandler<C> {
    async fn ping(&self, _call: &Call, _params: NoParams) -> Result<Health, MethodError> {
        self.runtime.health(self.component.degraded_reason())
    }

    async fn health_check(&self, _call: &Call, _params: NoParams) -> Result<Health, MethodError> {
        self.runtime.health(self.component.degraded_reason())
    }

    async fn get_metrics(&self, _call: &Call, _params: NoParams) -> Result<HeartbeatMetrics, MethodError> {
        self.runtime.metrics()
    }
}

/// Runs a component daemon to completion: call it from `main`.
///
/// `build` makes the component once the runtime is up; it may spawn tasks.
pub fn main<C: Component>(
    component: ComponentId,
    software_version: &'static str,
    build: impl FnOnce(&Runtime) -> Result<C, String>,
) -> ExitCode {
    logging::init(component.as_str());
    match start(component, software_version, build) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("clawos-{component}: {error}");
            ExitCode::FAILURE
        }
    }
}

fn start<C: Component>(
    component: ComponentId,
    software_version: &'static str,
    build: impl FnOnce(&Runtime) -> Result<C, String>,
) -> Result<(), String> {
    let config_path = config::config_path(component);
    let config = RuntimeConfig::load(&config_path).map_err(|error| error.to_string())?;
    let policy = AccessPolicy::load(&config.ipc.policy_path).map_err(|error| error.to_string())?;
    clawos_api::verify_acl(&policy).map_err(|error| format!("{}: {error}", config.ipc.policy_path.display()))?;
    // Must happen before any thread exists (it edits the environment).
    let activated = systemd::activated_listener().map_err(|error| format!("socket activation: {error}"))?;
    let socket = clawos_ipc::socket::socket_name(component);
    let listener = match activated {
        Some(listener) => {
            tracing::info!("using the socket passed by systemd");
            listener
        }
        None => clawos_ipc::socket::bind_abstract(&socket).map_err(|error| error.to_string())?,
    };
    let sampler = ProcessSampler::new().map_err(|error| error.to_string())?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?;
    tokio.block_on(async move {
        let listener = tokio::net::UnixListener::from_std(listener).map_err(|error| error.to_string())?;
        let stats = Arc::new(ServerStats::default());
        let (publisher, outgoing) = EventPublisher::new(component);
        let runtime = Runtime {
            inner: Arc::new(RuntimeInner {
                component,
                software_version,
                config: config.clone(),
                stats: Arc::clone(&stats),
                sampler: Mutex::new(sampler),
                publisher,
            }),
        };
        let component_impl = Arc::new(build(&runtime)?);
        let delivery = Arc::clone(&component_impl);
        let publisher_task =
            tokio::spawn(publisher::run(component, outgoing, move |event| delivery.deliver_own_event(event)));
        let settings = ServerSettings {
            component,
            software_version: software_version.to_owned(),
            protocol_versions: SUPPORTED_VERSIONS.to_vec(),
            policy: Arc::new(policy),
            rate_limit: config.ipc.rate_limit,
            method_timeout: clawos_api::timeouts_of(component),
        };
        let component_for_health = Arc::clone(&component_impl);
        let handler = Arc::new(RuntimeHandler { runtime: runtime.clone(), component: component_impl });
        let server = IpcServer::new(settings, handler, stats);
        tracing::info!(version = software_version, socket = %format!("@{socket}"), "clawos-{component} ready");
        systemd::notify_ready(&format!("serving @{socket}"));
        runtime.publish(COMPONENT_READY, version_data(software_version));
        let outcome = tokio::select! {
            served = server.serve(listener) => served.map_err(|error| format!("IPC server failed: {error}")),
            () = heartbeat_loop(&runtime, &*component_for_health) => Ok(()),
            signal = shutdown_signal() => {
                tracing::info!("{signal}; shutting down");
                Ok(())
            }
        };
        systemd::notify_stopping();
        runtime.publish(COMPONENT_SHUTDOWN, version_data(software_version));
        // Give the publisher a moment to deliver the shutdown notice.
        runtime.inner.publisher.close();
        let _ = tokio::time::timeout(Duration::from_secs(2), publisher_task).await;
        outcome
    })
}

fn version_data(software_version: &str) -> Object {
    let mut data = Object::new();
    data.insert("component_version".into(), Value::from(software_version));
    data.insert("pid".into(), Value::from(std::process::id()));
    data
}

/// Sends heartbeats every interval and pings the systemd watchdog at least
/// twice per watchdog period; never returns. If this loop stalls (a hung
/// runtime), systemd stops getting WATCHDOG=1 and restarts the service.
async fn heartbeat_loop(runtime: &Runtime, component: &impl Component) {
    let interval = runtime.config().heartbeat.interval();
    let tick = systemd::watchdog_timeout().map_or(interval, |watchdog| interval.min(watchdog / 2));
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_heartbeat: Option<Instant> = None;
    loop {
        ticker.tick().await;
        systemd::notify_watchdog();
        if last_heartbeat.is_some_and(|at| at.elapsed() + tick / 2 < interval) {
            continue;
        }
        last_heartbeat = Some(Instant::now());
        let heartbeat = match runtime.metrics() {
            Ok(metrics) => {
                let status =
                    if component.degraded_reason().is_some() { HealthStatus::Degraded } else { HealthStatus::Ok };
                Heartbeat { status, metrics }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot sample metrics; skipping this heartbeat");
                continue;
            }
        };
        match clawos_api::encode(&heartbeat) {
            Ok(data) => runtime.publish(HEARTBEAT, data),
            Err(error) => tracing::error!(%error, "cannot encode heartbeat"),
        }
    }
}

async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut terminate), Ok(mut interrupt)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        tracing::error!("cannot install signal handlers; SIGTERM will kill without a shutdown event");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    }
}

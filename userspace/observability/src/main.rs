//! `clawos-observability`: the ClawOS metrics and health collector.
//!
//! Owns: the health table of all components (fed by the heartbeat,
//! `component_ready` and `component_shutdown` events it subscribes to at the
//! router), the `get_metrics` and `component_status` methods, and the
//! Prometheus text endpoint (default `127.0.0.1:9464/metrics`). Does not
//! own: producing metrics (every component's runtime does that).

mod agents;
mod collector;
mod prometheus;

use std::net::SocketAddr;
use std::sync::Arc;

use clawos_api::observability::{self, AllMetrics, ComponentStatuses, MetricsQuery};
use clawos_api::{Call, NoParams};
use clawos_ipc::server::MethodError;
use clawos_ipc::{ComponentId, Object, Request};
use clawos_runtime::{Component, Runtime};
use serde::Deserialize;

use crate::collector::Collector;

/// `[component]` of `/etc/clawos/observability.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObservabilityConfig {
    /// Where Prometheus scrapes, `ADDRESS:PORT`. Default `127.0.0.1:9464`:
    /// loopback only, so the metrics leave the box only through SSH.
    #[serde(default = "default_prometheus_listen")]
    prometheus_listen: SocketAddr,
}

fn default_prometheus_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9464))
}

struct Observability {
    collector: Arc<Collector>,
}

impl observability::Service for Observability {
    async fn get_metrics(&self, _call: &Call, params: MetricsQuery) -> Result<AllMetrics, MethodError> {
        Ok(self.collector.metrics(params.component))
    }

    async fn component_status(&self, _call: &Call, _params: NoParams) -> Result<ComponentStatuses, MethodError> {
        Ok(self.collector.status())
    }
}

impl Component for Observability {
    async fn handle_request(&self, call: &Call, request: Request) -> Option<Result<Object, MethodError>> {
        observability::dispatch(self, call, request).await
    }
}

fn build(runtime: &Runtime) -> Result<Observability, String> {
    let config: ObservabilityConfig =
        runtime.config().component.clone().try_into().map_err(|e| format!("[component] settings: {e}"))?;
    let collector = Arc::new(Collector::new(runtime.config().heartbeat.unhealthy_after()));
    tokio::spawn(collector::follow_router(Arc::clone(&collector)));
    tokio::spawn(prometheus::serve(config.prometheus_listen, Arc::clone(&collector)));
    Ok(Observability { collector })
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::Observability, env!("CARGO_PKG_VERSION"), build)
}

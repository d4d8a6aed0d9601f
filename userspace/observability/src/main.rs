//! `clawos-observability`: the ClawOS metrics and health collector.
//!
//! Owns: the health table of all components (fed by the heartbeat,
//! `component_ready` and `component_shutdown` events it subscribes to at the
//! router), the `get_metrics` and `component_status` methods, and the
//! Prometheus text endpoint (default `127.0.0.1:9464/metrics`). Does not
//! own: producing metrics (every component's runtime does that).

mod collector;
mod prometheus;

use std::net::SocketAddr;
use std::sync::Arc;

use clawos_ipc::server::{Connection, MethodError};
use clawos_ipc::{ComponentId, Object, Request};
use clawos_runtime::{Component, Runtime};

use crate::collector::Collector;

/// Where Prometheus scrapes by default (`[component] prometheus_listen`).
const DEFAULT_PROMETHEUS_LISTEN: &str = "127.0.0.1:9464";

struct Observability {
    collector: Arc<Collector>,
}

impl Component for Observability {
    async fn handle_request(&self, _connection: Connection, request: Request) -> Option<Result<Object, MethodError>> {
        match request.method.as_str() {
            "get_metrics" => Some(self.collector.metrics(&request.params)),
            "component_status" => Some(Ok(self.collector.status())),
            _ => None,
        }
    }
}

fn build(runtime: &Runtime) -> Result<Observability, String> {
    let listen: SocketAddr = match runtime.config().component.get("prometheus_listen") {
        None => DEFAULT_PROMETHEUS_LISTEN.parse().map_err(|error| format!("{error}"))?,
        Some(value) => value
            .as_str()
            .and_then(|text| text.parse().ok())
            .ok_or("component.prometheus_listen must be \"ADDRESS:PORT\"")?,
    };
    let collector = Arc::new(Collector::new(runtime.config().heartbeat.unhealthy_after()));
    tokio::spawn(collector::follow_router(Arc::clone(&collector)));
    tokio::spawn(prometheus::serve(listen, Arc::clone(&collector)));
    Ok(Observability { collector })
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::Observability, env!("CARGO_PKG_VERSION"), build)
}

//! Prometheus text exposition (format 0.0.4) over minimal HTTP/1.0: every
//! request for `/metrics` gets the current numbers, anything else a 404.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::collector::Collector;
use clawos_ipc::health::Liveness;

/// Longest request head read; scrapers send a few hundred bytes.
const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// A client that does not finish its request in this time is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves until the process exits. Bind failures are logged, not fatal:
/// IPC keeps working without the scrape endpoint.
pub async fn serve(listen: SocketAddr, collector: Arc<Collector>) {
    let listener = match TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%listen, %error, "cannot serve Prometheus metrics");
            return;
        }
    };
    tracing::info!(%listen, "serving Prometheus metrics at /metrics");
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let collector = Arc::clone(&collector);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &collector)).await;
        });
    }
}

async fn answer(mut stream: TcpStream, collector: &Collector) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let read = stream.read(&mut chunk).await?;
        if read == 0 || head.len() + read > MAX_REQUEST_BYTES {
            break;
        }
        head.extend_from_slice(&chunk[..read]);
    }
    let request_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut parts = request_line.split(|&b| b == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let response = if method == b"GET" && (path == b"/metrics" || path.starts_with(b"/metrics?")) {
        let body = render(collector);
        format!("HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}", body.len())
    } else {
        "HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nnot found\n".to_owned()
    };
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// The exposition text.
pub fn render(collector: &Collector) -> String {
    let rows = collector.rows();
    let mut out = String::new();
    let mut family = |name: &str,
                      kind: &str,
                      help: &str,
                      value: &dyn Fn(
        &clawos_api::observability::ComponentStatus,
        Option<&clawos_ipc::Heartbeat>,
    ) -> Option<f64>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (status, heartbeat) in &rows {
            if let Some(value) = value(status, heartbeat.as_ref()) {
                let _ = writeln!(out, "{name}{{component=\"{}\"}} {value}", status.component);
            }
        }
    };
    family(
        "clawos_component_up",
        "gauge",
        "1 if the component's last heartbeat is within the unhealthy threshold.",
        &|s, _| Some(f64::from(u8::from(matches!(s.health, Liveness::Healthy | Liveness::Degraded)))),
    );
    family("clawos_component_last_heartbeat_age_seconds", "gauge", "Seconds since the last heartbeat.", &|s, _| {
        s.last_heartbeat_age_ms.map(|ms| ms as f64 / 1000.0)
    });
    family("clawos_component_heartbeats_total", "counter", "Heartbeats received from the component.", &|s, _| {
        Some(s.heartbeats as f64)
    });
    family("clawos_component_uptime_seconds", "gauge", "Component uptime at its last heartbeat.", &|_, h| {
        h.map(|h| h.metrics.uptime_ns as f64 / 1e9)
    });
    family("clawos_component_messages_processed_total", "counter", "IPC messages processed.", &|_, h| {
        h.map(|h| h.metrics.messages_processed as f64)
    });
    family("clawos_component_messages_failed_total", "counter", "IPC messages that failed.", &|_, h| {
        h.map(|h| h.metrics.messages_failed as f64)
    });
    family("clawos_component_memory_bytes", "gauge", "Resident memory.", &|_, h| {
        h.map(|h| h.metrics.memory_usage_bytes as f64)
    });
    family("clawos_component_cpu_percent", "gauge", "CPU use, percent of the machine.", &|_, h| {
        h.map(|h| h.metrics.cpu_usage_percent)
    });
    family("clawos_component_ipc_connections", "gauge", "Open IPC connections.", &|_, h| {
        h.map(|h| h.metrics.active_connections as f64)
    });
    family("clawos_component_open_fds", "gauge", "Open file descriptors.", &|_, h| {
        h.and_then(|h| h.metrics.open_fds).map(|n| n as f64)
    });
    collector.render_agents(&mut out);
    out
}

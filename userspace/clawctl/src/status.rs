//! `clawctl status [--json]`: asks every component directly (reachable?
//! version? uptime?) and observability for its heartbeat view, plus systemd
//! for the restart count.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use clawos_api::common::{self, HealthState};
use clawos_api::observability::{self, ComponentStatus};
use clawos_api::NoParams;
use clawos_ipc::health::Liveness;
use clawos_ipc::ComponentId;
use serde::Serialize;
use serde_json::Value;

/// How long one component may take to answer before it counts as down.
const PROBE_TIMEOUT: Duration = Duration::from_millis(2000);

#[derive(Args)]
pub struct StatusArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
pub(crate) struct Row {
    pub(crate) component: ComponentId,
    /// healthy, degraded, unhealthy, stopped or down (not answering).
    /// Observability's heartbeat view, except where it has not heard from
    /// the component yet (at boot, before its first heartbeat): then the
    /// component's own answer to `health_check`, healthy or degraded.
    pub(crate) health: String,
    reachable: bool,
    version: Option<String>,
    uptime_s: Option<f64>,
    last_heartbeat_age_s: Option<f64>,
    restarts: Option<u64>,
    pub(crate) error: Option<String>,
}

struct Probe {
    version: Option<String>,
    uptime_ns: Option<u64>,
    /// What the component says of itself.
    health: HealthState,
}

async fn probe(component: ComponentId) -> anyhow::Result<Probe> {
    let (client, _events) = tokio::time::timeout(PROBE_TIMEOUT, crate::ipc::connect(component))
        .await
        .map_err(|_| anyhow::anyhow!("no hello answer within {PROBE_TIMEOUT:?}"))??;
    let health = common::Client::new(&client).with_timeout(PROBE_TIMEOUT).health_check(&NoParams {}).await?;
    Ok(Probe {
        version: client.server_info().get("component_version").and_then(Value::as_str).map(str::to_owned),
        uptime_ns: Some(health.uptime_ns),
        health: health.status,
    })
}

/// systemd's restart counter for the component's service, if systemd runs.
fn restarts(component: ComponentId) -> Option<u64> {
    if !std::path::Path::new("/run/systemd/system").exists() {
        return None;
    }
    let output = std::process::Command::new("systemctl")
        .args(["show", "--property=NRestarts", "--value", &format!("clawos-{component}.service")])
        .output()
        .ok()?;
    String::from_utf8(output.stdout).ok()?.trim().parse().ok()
}

pub async fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let mut rows = collect().await?;
    for row in &mut rows {
        row.restarts = restarts(row.component);
    }
    let all_healthy = rows.iter().all(|row| row.health == "healthy");
    if args.json {
        println!("{}", crate::shown::json(&serde_json::json!({ "components": rows, "all_healthy": all_healthy }))?);
    } else {
        print_table(&rows);
    }
    Ok(if all_healthy { ExitCode::SUCCESS } else { ExitCode::from(3) })
}

/// One row per component: what `clawctl status` shows, and what the update
/// health gate (`update::gate`) requires to be healthy everywhere. Without
/// the restart counts, which the gate does not need: each costs a
/// `systemctl` run, seconds for eight of them on a slow boot.
pub(crate) async fn collect() -> anyhow::Result<Vec<Row>> {
    let heartbeat_view: Vec<ComponentStatus> = match crate::ipc::connect(ComponentId::Observability).await {
        Ok((client, _events)) => {
            let observability = observability::Client::new(&client).with_timeout(PROBE_TIMEOUT);
            observability.component_status(&NoParams {}).await.map(|status| status.components).unwrap_or_default()
        }
        Err(_) => Vec::new(),
    };
    let probes = futures_join(ComponentId::ALL.map(probe)).await;
    let mut rows = Vec::new();
    for (component, probe) in ComponentId::ALL.into_iter().zip(probes) {
        let seen = heartbeat_view.iter().find(|row| row.component == component);
        let heartbeat_health = serde_json::to_value(seen.map_or(Liveness::Unknown, |row| row.health))?;
        let heartbeat_health = heartbeat_health.as_str().unwrap_or("unknown");
        let age = seen.and_then(|row| row.last_heartbeat_age_ms).map(|ms| ms as f64 / 1000.0);
        let row = match probe {
            Ok(probe) => Row {
                component,
                health: match (heartbeat_health, probe.health) {
                    ("unknown", HealthState::Ok) => "healthy".to_owned(),
                    ("unknown", HealthState::Degraded) => "degraded".to_owned(),
                    (seen, _) => seen.to_owned(),
                },
                reachable: true,
                version: probe.version,
                uptime_s: probe.uptime_ns.map(|ns| ns as f64 / 1e9),
                last_heartbeat_age_s: age,
                restarts: None,
                error: None,
            },
            Err(error) => Row {
                component,
                health: "down".into(),
                reachable: false,
                version: None,
                uptime_s: None,
                last_heartbeat_age_s: age,
                restarts: None,
                error: Some(format!("{error:#}")),
            },
        };
        rows.push(row);
    }
    Ok(rows)
}

async fn futures_join<F: std::future::Future<Output = T>, T>(futures: [F; 8]) -> Vec<T> {
    let [a, b, c, d, e, f, g, h] = futures;
    let (a, b, c, d, e, f, g, h) = tokio::join!(a, b, c, d, e, f, g, h);
    vec![a, b, c, d, e, f, g, h]
}

fn print_table(rows: &[Row]) {
    let show = |value: Option<String>| value.unwrap_or_else(|| "-".into());
    println!(
        "{:<15} {:<10} {:<9} {:>10} {:>10} {:>8}",
        "COMPONENT", "HEALTH", "VERSION", "UPTIME", "HEARTBEAT", "RESTARTS"
    );
    for row in rows {
        println!(
            "{:<15} {:<10} {:<9} {:>10} {:>10} {:>8}",
            row.component.as_str(),
            row.health,
            show(row.version.clone()),
            show(row.uptime_s.map(|s| format!("{s:.0}s"))),
            show(row.last_heartbeat_age_s.map(|s| format!("{s:.0}s ago"))),
            show(row.restarts.map(|n| n.to_string())),
        );
        if let Some(error) = &row.error {
            println!("  {}", crate::shown::Line(error));
        }
    }
}

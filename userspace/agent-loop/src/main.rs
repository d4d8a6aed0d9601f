//! `clawos-agent-loop`: Central orchestration.
//!
//! For now the daemon only does what every component does through
//! `clawos-runtime` (hello, heartbeats, `ping`/`health_check`,
//! `get_metrics`); its own methods arrive with its own issue. Owns nothing
//! else yet.

mod provider;

use clawos_ipc::ComponentId;
use clawos_runtime::Component;

/// The component's own state; empty until it has methods of its own.
struct Daemon;

impl Component for Daemon {}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::AgentLoop, env!("CARGO_PKG_VERSION"), |_runtime| Ok(Daemon))
}

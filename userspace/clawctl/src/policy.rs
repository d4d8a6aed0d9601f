//! `clawctl policy show|reload`: the eBPF enforcement policy held by
//! ebpf-agent (`/etc/clawos/ebpf-policy.toml` and the cgroups it resolves to).

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use clawos_ipc::{ComponentId, Object};

#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Print the policy in force and the cgroups it covers, as JSON.
    Show,
    /// Re-read the policy file; a file that does not parse leaves the old one in force.
    Reload,
}

pub async fn run(command: PolicyCommand) -> anyhow::Result<ExitCode> {
    let method = match command {
        PolicyCommand::Show => "get_policy",
        PolicyCommand::Reload => "reload_policy",
    };
    let (client, _events) = crate::ipc::connect(ComponentId::EbpfAgent).await?;
    let result = client.call(method, Object::new(), None).await.with_context(|| format!("ebpf-agent {method}"))?;
    println!("{}", serde_json::to_string_pretty(&result)?);
    Ok(ExitCode::SUCCESS)
}

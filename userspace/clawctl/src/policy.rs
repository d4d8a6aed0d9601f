//! `clawctl policy show|reload`: the eBPF enforcement policy held by
//! ebpf-agent (`/etc/clawos/ebpf-policy.toml` and the cgroups it resolves to).

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use clawos_api::{ebpf_agent, NoParams};
use clawos_ipc::ComponentId;

#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Print the policy in force and the cgroups it covers, as JSON.
    Show,
    /// Re-read the policy file; a file that does not parse leaves the old one in force.
    Reload,
}

pub async fn run(command: PolicyCommand) -> anyhow::Result<ExitCode> {
    let (client, _events) = crate::ipc::connect(ComponentId::EbpfAgent).await?;
    let agent = ebpf_agent::Client::new(&client);
    let result = match command {
        PolicyCommand::Show => {
            serde_json::to_value(agent.get_policy(&NoParams {}).await.context("ebpf-agent get_policy")?)?
        }
        PolicyCommand::Reload => {
            serde_json::to_value(agent.reload_policy(&NoParams {}).await.context("ebpf-agent reload_policy")?)?
        }
    };
    println!("{}", crate::shown::json(&result)?);
    Ok(ExitCode::SUCCESS)
}

//! `clawos-security-agent`: policy enforcement, and the host of the
//! secrets vault.
//!
//! The vault service lives here rather than in a unit of its own because the
//! security agent is already the component every other one trusts with
//! authorization decisions, and hosting the vault in it keeps the set of
//! processes that can reach the TPM and the unsealed master key at one: a
//! separate `clawos-vault.service` would be a ninth daemon with the same
//! privileges (TPM device, keyring, `/clawfs/vault`) and another IPC
//! identity to grant. The cost is that a crash of the security agent also
//! interrupts secret reads; systemd restarts it within a second, and the
//! master key cached in the service user's keyring makes the restart cheap.
//!
//! At start the agent opens the vault: the master key comes from the
//! keyring if this boot already unsealed it, else from the TPM. If the
//! vault cannot be opened (sealed with a PCR mismatch, a passphrase vault
//! after a reboot, TPM unreachable) the agent keeps running, reports
//! `degraded` with the reason in `health_check` and heartbeats, and serves
//! `vault_status` and the operator's recovery methods. A vault that does
//! not exist yet is not a fault: it waits for `clawctl vault init`.
//!
//! Owns: the vault's IPC methods ([`vault_service::METHODS`], documented in
//! specs/vault/README.md) and the vault access policy (`[component.vault]`
//! of `/etc/clawos/security-agent.toml`, see [`settings`]). The runtime
//! provides `ping`, `health_check` and `get_metrics`.

mod settings;
mod vault_service;

use clawos_ipc::server::{Connection, MethodError};
use clawos_ipc::{ComponentId, Object, Request};
use clawos_runtime::Component;

use crate::settings::VaultSettings;
use crate::vault_service::VaultService;

/// The component's own state: the vault it hosts.
struct Daemon {
    vault: VaultService,
}

impl Component for Daemon {
    async fn handle_request(&self, connection: Connection, request: Request) -> Option<Result<Object, MethodError>> {
        self.vault.handle(connection.peer(), &request.method, request.params).await
    }

    fn degraded_reason(&self) -> Option<String> {
        self.vault.degraded_reason()
    }
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::SecurityAgent, env!("CARGO_PKG_VERSION"), |runtime| {
        let settings = VaultSettings::from_component_table(&runtime.config().component)?;
        Ok(Daemon { vault: VaultService::start(settings)? })
    })
}

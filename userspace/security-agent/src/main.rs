//! `clawos-security-agent`: the host of the secrets vault.
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
//! Owns: the vault's IPC methods (`clawos_api::security_agent`, documented
//! in specs/vault/README.md) and the vault access policy (`[component.vault]`
//! of `/etc/clawos/security-agent.toml`, see [`settings`]). The runtime
//! provides `ping`, `health_check` and `get_metrics`.
//!
//! Does not own (yet): `check_policy`, the agent runtime's per-action
//! permission decision, which lands here with the agent loop so the decision
//! and its audit live in one place; until then no ACL rule grants it.

mod settings;
mod vault_service;

use clawos_api::security_agent::{
    self, SecretGet, SecretHistory, SecretList, SecretName, SecretRemoved, SecretSet, SecretValue, SecretVersion, VaultInit,
    VaultInitialized, VaultRecover, VaultStatus, VaultUnlock,
};
use clawos_api::{Call, NoParams};
use clawos_ipc::server::MethodError;
use clawos_ipc::{ComponentId, Object, Request};
use clawos_runtime::Component;

use crate::settings::VaultSettings;
use crate::vault_service::VaultService;

/// The component's own state: the vault it hosts.
struct Daemon {
    vault: VaultService,
}

impl security_agent::Service for Daemon {
    async fn vault_status(&self, call: &Call, _params: NoParams) -> Result<VaultStatus, MethodError> {
        self.vault.run(call.peer(), "vault_status", |host, _| host.status()).await
    }

    async fn vault_init(&self, call: &Call, params: VaultInit) -> Result<VaultInitialized, MethodError> {
        let peer = call.peer();
        self.vault.run(peer, "vault_init", move |host, caller| host.init(peer, caller, params)).await
    }

    async fn vault_unlock(&self, call: &Call, params: VaultUnlock) -> Result<VaultStatus, MethodError> {
        let peer = call.peer();
        self.vault.run(peer, "vault_unlock", move |host, _| host.unlock(peer, &params.passphrase)).await
    }

    async fn vault_recover(&self, call: &Call, params: VaultRecover) -> Result<VaultStatus, MethodError> {
        let peer = call.peer();
        self.vault.run(peer, "vault_recover", move |host, caller| host.recover(peer, caller, &params.recovery_key)).await
    }

    async fn vault_reseal(&self, call: &Call, _params: NoParams) -> Result<VaultStatus, MethodError> {
        self.vault.run(call.peer(), "vault_reseal", |host, caller| host.reseal(caller)).await
    }

    async fn vault_rotate(&self, call: &Call, _params: NoParams) -> Result<VaultStatus, MethodError> {
        self.vault.run(call.peer(), "vault_rotate", |host, caller| host.rotate(caller)).await
    }

    async fn secret_set(&self, call: &Call, params: SecretSet) -> Result<SecretVersion, MethodError> {
        self.vault.run(call.peer(), "secret_set", move |host, caller| host.set(caller, params)).await
    }

    async fn secret_get(&self, call: &Call, params: SecretGet) -> Result<SecretValue, MethodError> {
        self.vault.run(call.peer(), "secret_get", move |host, caller| host.get(caller, params)).await
    }

    async fn secret_list(&self, call: &Call, _params: NoParams) -> Result<SecretList, MethodError> {
        self.vault.run(call.peer(), "secret_list", |host, caller| host.list(caller)).await
    }

    async fn secret_history(&self, call: &Call, params: SecretName) -> Result<SecretHistory, MethodError> {
        self.vault.run(call.peer(), "secret_history", move |host, caller| host.history(caller, params)).await
    }

    async fn secret_remove(&self, call: &Call, params: SecretName) -> Result<SecretRemoved, MethodError> {
        self.vault.run(call.peer(), "secret_remove", move |host, caller| host.remove(caller, params)).await
    }
}

impl Component for Daemon {
    async fn handle_request(&self, call: &Call, request: Request) -> Option<Result<Object, MethodError>> {
        security_agent::dispatch(self, call, request).await
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

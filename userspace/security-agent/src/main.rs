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
//! of `/etc/clawos/security-agent.toml`, see [`settings`]); and each agent
//! action's permission decision, `check_policy`, with the approvals queue
//! (`policy`, specs/agent/README.md, "Permissions and approvals"), here so
//! the decision and its record live in one place, beside the vault, where
//! no agent or tool can write. The runtime provides `ping`, `health_check`
//! and `get_metrics`.
//!
//! A crash of the policy half costs the turns that ask meanwhile a failed
//! check, which agent-loop treats as a denial (fail closed); decisions and
//! approvals are committed before they are answered.

mod policy;
mod settings;
mod vault_service;

use std::sync::{Arc, Mutex};

use clawos_api::security_agent::{
    self, Approval, ApprovalDecide, ApprovalFilter, ApprovalList, CheckPolicy, Decision, PolicyDecision, SecretGet,
    SecretHistory, SecretList, SecretName, SecretRemoved, SecretSet, SecretValue, SecretVersion, VaultCheck, VaultInit,
    VaultInitialized, VaultPrepareUpdate, VaultRecover, VaultStatus, VaultUnlock,
};
use clawos_api::{Call, NoParams};
use clawos_ipc::server::MethodError;
use clawos_ipc::{ComponentId, ErrorCode, Object, Request};
use clawos_runtime::{Component, Runtime};
use serde_json::json;

use crate::settings::VaultSettings;
use crate::vault_service::VaultService;

/// The component's own state: the vault it hosts and the policy database.
struct Daemon {
    vault: VaultService,
    /// The policy database, or why it cannot be opened (every check then
    /// fails, which agent-loop treats as a denial).
    policy: Arc<Mutex<Result<policy::PolicyStore, String>>>,
    runtime: Runtime,
}

impl Daemon {
    /// Runs `work` on the policy database on the blocking pool (SQLite
    /// calls block).
    async fn policy<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut policy::PolicyStore) -> Result<T, MethodError> + Send + 'static,
    ) -> Result<T, MethodError> {
        let policy = self.policy.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = policy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let db = guard.as_mut().map_err(|reason| MethodError::new(ErrorCode::Eio, reason.clone()))?;
            work(db)
        })
        .await
        .map_err(|e| MethodError::new(ErrorCode::Einternal, format!("worker thread: {e}")))?
    }
}

fn eio(reason: String) -> MethodError {
    MethodError::new(ErrorCode::Eio, reason)
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
        self.vault
            .run(peer, "vault_recover", move |host, caller| host.recover(peer, caller, &params.recovery_key))
            .await
    }

    async fn vault_reseal(&self, call: &Call, _params: NoParams) -> Result<VaultStatus, MethodError> {
        self.vault.run(call.peer(), "vault_reseal", |host, caller| host.reseal(caller)).await
    }

    async fn vault_prepare_update(&self, call: &Call, params: VaultPrepareUpdate) -> Result<VaultStatus, MethodError> {
        let peer = call.peer();
        self.vault
            .run(peer, "vault_prepare_update", move |host, caller| host.prepare_update(peer, caller, &params.pcr4))
            .await
    }

    async fn vault_rotate(&self, call: &Call, _params: NoParams) -> Result<VaultStatus, MethodError> {
        self.vault.run(call.peer(), "vault_rotate", |host, caller| host.rotate(caller)).await
    }

    async fn vault_check(&self, call: &Call, _params: NoParams) -> Result<VaultCheck, MethodError> {
        self.vault.run(call.peer(), "vault_check", |host, caller| host.check(caller)).await
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

    async fn check_policy(&self, _call: &Call, params: CheckPolicy) -> Result<PolicyDecision, MethodError> {
        let (agent, tool, action) = (params.agent.clone(), params.tool_name.clone(), params.action_id.clone());
        let decision = self.policy(move |db| db.check(&params, policy::now()).map_err(eio)).await?;
        // The journal has the decision, never the arguments.
        tracing::info!(agent, tool, action, decision = ?decision.decision, reason = decision.reason, "policy decision");
        let data = json!({"agent": agent, "tool_name": tool, "action_id": action, "reason": decision.reason, "approval_id": decision.approval_id});
        match decision.decision {
            Decision::Deny => self.runtime.publish("policy_violation", object(data)),
            Decision::Pending => self.runtime.publish("approval.requested", object(data)),
            Decision::Allow => {}
        }
        Ok(decision)
    }

    async fn approval_list(&self, _call: &Call, params: ApprovalFilter) -> Result<ApprovalList, MethodError> {
        let approvals = self.policy(move |db| db.list(params.all, policy::now()).map_err(eio)).await?;
        Ok(ApprovalList { approvals })
    }

    async fn approval_decide(&self, _call: &Call, params: ApprovalDecide) -> Result<Approval, MethodError> {
        let id = params.id.clone();
        let approval = self
            .policy(move |db| match db.decide(&params.id, params.approve, policy::now()).map_err(eio)? {
                None => Err(MethodError::new(ErrorCode::Enoent, format!("no approval `{}`", params.id))),
                Some(decided) => decided.map_err(|reason| MethodError::new(ErrorCode::Eperm, reason)),
            })
            .await?;
        tracing::info!(approval = id, agent = approval.agent, tool = approval.tool_name, state = ?approval.state, "approval decided by the operator");
        let data = json!({"agent": approval.agent, "approval_id": id, "tool_name": approval.tool_name, "state": approval.state});
        self.runtime.publish("approval.decided", object(data));
        Ok(approval)
    }
}

fn object(value: serde_json::Value) -> Object {
    match value {
        serde_json::Value::Object(map) => map,
        _ => Object::new(),
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
        let policy = policy::PolicyStore::open(&settings.config.vault_dir);
        if let Err(reason) = &policy {
            tracing::error!("agents' actions will be refused: {reason}");
        }
        Ok(Daemon {
            vault: VaultService::start(settings)?,
            policy: Arc::new(Mutex::new(policy)),
            runtime: runtime.clone(),
        })
    })
}

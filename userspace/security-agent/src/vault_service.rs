//! The vault service: the security-agent's IPC methods over the
//! `clawos-vault` library (specs/vault/README.md, "IPC methods").
//!
//! Authentication is the IPC server's (SO_PEERCRED → principal, then the
//! ACL in `/etc/clawos/ipc-acl.toml`); this module maps the principal to the
//! vault [`Caller`] and lets the library authorize it against the vault
//! [`vault::AccessPolicy`] and record it in the audit log. Methods that run
//! before a vault is open (`vault_init`, `vault_unlock`, `vault_recover`)
//! are the operator's alone and checked here.
//!
//! Secret values, the recovery key and passphrases pass through this module
//! only in memory: they are never logged, and error messages never carry
//! them. Values travel as base64 in `value_base64` because secrets are bytes.
//! The methods' params and results are `clawos_api::security_agent`'s;
//! `main.rs` implements its `Service` with [`VaultService::run`].

use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use clawos_api::security_agent::{
    self as api, Protection, SecretGet, SecretHistory, SecretList, SecretName, SecretRemoved, SecretSet, SecretValue,
    SecretVersion, VaultInit, VaultInitialized,
};
use clawos_ipc::server::MethodError;
use clawos_ipc::{ErrorCode, Principal};
use tokio::sync::oneshot;
use vault::{
    Caller, InitProtection, Passphrase, ProtectionKind, RecoveryKey, SealState, SecretInfo, Vault, VaultError,
};
use zeroize::Zeroizing;

use crate::settings::VaultSettings;

/// Largest secret value accepted: API keys, tokens, certificates and
/// private keys fit many times over; anything bigger is not a credential.
pub const MAX_SECRET_VALUE_BYTES: usize = 64 * 1024;
/// Shortest operator passphrase accepted for a vault without a TPM: the
/// passphrase is the only thing between a stolen disk and the secrets.
pub const MIN_PASSPHRASE_CHARS: usize = 12;

/// Why the vault is not open.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ClosedReason {
    /// No vault yet: the normal state of a fresh appliance until
    /// `clawctl vault init`, not a fault.
    NotInitialized,
    /// The TPM refuses to unseal: the boot state changed.
    PcrMismatch,
    /// A passphrase vault after a reboot.
    PassphraseRequired,
    /// Anything else (TPM unreachable, I/O, a corrupt file); retried on
    /// the next request, since it may be transient.
    Failed(String),
}

impl ClosedReason {
    fn from_open_error(error: VaultError) -> Self {
        match error {
            VaultError::NotInitialized { .. } => ClosedReason::NotInitialized,
            VaultError::PcrMismatch => ClosedReason::PcrMismatch,
            VaultError::PassphraseRequired => ClosedReason::PassphraseRequired,
            other => ClosedReason::Failed(other.to_string()),
        }
    }

    /// What health checks and heartbeats say, `None` when this is no fault.
    fn degraded_reason(&self) -> Option<String> {
        match self {
            ClosedReason::NotInitialized => None,
            ClosedReason::PcrMismatch => Some(
                "vault sealed: PCR mismatch (the boot state changed; run `clawctl vault recover`, then `clawctl vault reseal`)"
                    .to_owned(),
            ),
            ClosedReason::PassphraseRequired => {
                Some("vault locked: the operator passphrase is required (`clawctl vault unlock`)".to_owned())
            }
            ClosedReason::Failed(error) => Some(format!("vault unavailable: {error}")),
        }
    }

    /// The error a request that needs the open vault gets.
    fn as_method_error(&self) -> MethodError {
        match self {
            ClosedReason::NotInitialized => {
                MethodError::new(ErrorCode::Enoent, "the vault is not initialized (`clawctl vault init`)")
            }
            ClosedReason::Failed(error) => MethodError::new(ErrorCode::Eio, format!("vault unavailable: {error}")),
            sealed_or_locked => {
                MethodError::new(ErrorCode::Eperm, sealed_or_locked.degraded_reason().unwrap_or_default())
            }
        }
    }
}

enum VaultState {
    Open(Box<Vault>),
    Closed(ClosedReason),
}

/// The vault and what it was opened with. It lives on one thread of its
/// own (see [`VaultService`]).
pub struct VaultHost {
    settings: VaultSettings,
    state: VaultState,
}

/// A request for the vault thread.
type Job = Box<dyn FnOnce(&mut VaultHost) + Send>;

/// The security-agent's vault, shared by the IPC connections.
///
/// All vault work runs on one dedicated thread, in arrival order: the
/// library is its directory's single writer, its TPM commands, fsyncs and
/// 600,000-round KDFs block, and the kernel keyring it caches keys in is
/// only reliably reachable from one thread (a process keyring created by
/// one thread is not installed in threads that already exist). If a caller
/// times out its request still runs to completion, so a rotation is never
/// cut in half.
pub struct VaultService {
    jobs: mpsc::Sender<Job>,
    /// The degraded reason, kept apart from the vault thread so health
    /// checks and heartbeats never wait behind a long operation.
    degraded: Arc<Mutex<Option<String>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Only ever holds a plain value that is replaced whole: never inconsistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl VaultService {
    /// Starts the vault thread and opens the vault as this boot allows:
    /// unsealed by the TPM, or left closed (and the component degraded)
    /// when it cannot be. Returns once the first open attempt is done.
    pub fn start(settings: VaultSettings) -> Result<Self, String> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (opened, first_state) = mpsc::channel();
        std::thread::Builder::new()
            .name("vault".into())
            .spawn(move || {
                let mut host = VaultHost { settings, state: VaultState::Closed(ClosedReason::NotInitialized) };
                let from_keyring = Vault::master_in_keyring(&host.settings.config).unwrap_or(false);
                let started = Instant::now();
                host.try_open();
                host.log_state(started.elapsed(), from_keyring);
                let _ = opened.send(host.degraded_reason());
                for job in queue {
                    job(&mut host);
                }
            })
            .map_err(|error| format!("cannot start the vault thread: {error}"))?;
        let degraded = first_state.recv().map_err(|_| "the vault thread died while opening the vault".to_owned())?;
        Ok(VaultService { jobs, degraded: Arc::new(Mutex::new(degraded)) })
    }

    /// Why the vault is not serving, if it should be.
    pub fn degraded_reason(&self) -> Option<String> {
        lock(&self.degraded).clone()
    }

    /// Runs `work` for `peer`'s request `method` on the vault thread, in
    /// arrival order, and logs whether it was served.
    pub async fn run<T: Send + 'static>(
        &self,
        peer: Principal,
        method: &'static str,
        work: impl FnOnce(&mut VaultHost, &Caller) -> Result<T, MethodError> + Send + 'static,
    ) -> Result<T, MethodError> {
        let degraded = Arc::clone(&self.degraded);
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |host: &mut VaultHost| {
            let result = work(host, &Caller::new(peer.as_str()));
            *lock(&degraded) = host.degraded_reason();
            match &result {
                Ok(_) => tracing::info!(caller = %peer, method, "vault request served"),
                Err(error) => tracing::warn!(caller = %peer, method, %error, "vault request refused or failed"),
            }
            let _ = reply.send(result);
        });
        if self.jobs.send(job).is_err() {
            return Err(MethodError::new(ErrorCode::Einternal, "the vault thread has stopped"));
        }
        answer.await.unwrap_or_else(|_| {
            Err(MethodError::new(ErrorCode::Einternal, "the vault thread stopped during the request"))
        })
    }
}

impl VaultHost {
    /// Logs how the first open at start went and where the master key came
    /// from; `took` is the open's time (a TPM unseal, or the kernel
    /// keyring's copy for a restarted agent, and the key checks), which the
    /// boot tests report for the boot's first start.
    fn log_state(&self, took: Duration, from_keyring: bool) {
        match &self.state {
            VaultState::Open(_) if from_keyring => {
                tracing::info!("vault open: master key from the kernel keyring in {} ms", took.as_millis())
            }
            VaultState::Open(_) => tracing::info!("vault open: unsealed by the TPM in {} ms", took.as_millis()),
            VaultState::Closed(ClosedReason::NotInitialized) => {
                tracing::info!("no vault yet; waiting for `clawctl vault init`")
            }
            VaultState::Closed(reason) => {
                tracing::warn!("running degraded: {}", reason.degraded_reason().unwrap_or_default())
            }
        }
    }

    fn try_open(&mut self) {
        self.state = match Vault::open(self.settings.config.clone()) {
            Ok(vault) => self.serving(vault),
            Err(error) => VaultState::Closed(ClosedReason::from_open_error(error)),
        };
    }

    fn serving(&self, mut vault: Vault) -> VaultState {
        vault.set_policy(self.settings.policy.clone());
        VaultState::Open(Box::new(vault))
    }

    fn degraded_reason(&self) -> Option<String> {
        match &self.state {
            VaultState::Open(_) => None,
            VaultState::Closed(reason) => reason.degraded_reason(),
        }
    }

    /// The open vault; a vault closed by a possibly transient failure is
    /// opened again first.
    fn vault(&mut self) -> Result<&mut Vault, MethodError> {
        if matches!(self.state, VaultState::Closed(ClosedReason::Failed(_))) {
            self.try_open();
        }
        match &mut self.state {
            VaultState::Open(vault) => Ok(vault.as_mut()),
            VaultState::Closed(reason) => Err(reason.as_method_error()),
        }
    }

    /// `vault_init`: the operator's only.
    pub fn init(
        &mut self,
        peer: Principal,
        caller: &Caller,
        params: VaultInit,
    ) -> Result<VaultInitialized, MethodError> {
        require_operator(peer, "vault_init")?;
        let protection = match (params.protection, params.passphrase) {
            (Protection::Tpm, None) => InitProtection::Tpm,
            (Protection::Tpm, Some(_)) => {
                return Err(MethodError::bad_params("a passphrase is only for `passphrase` protection"))
            }
            (Protection::Passphrase, None) => return Err(MethodError::bad_params("passphrase is required")),
            (Protection::Passphrase, Some(passphrase)) => {
                if passphrase.chars().count() < MIN_PASSPHRASE_CHARS {
                    return Err(MethodError::bad_params(format!(
                        "the passphrase must have at least {MIN_PASSPHRASE_CHARS} characters"
                    )));
                }
                InitProtection::Passphrase(Passphrase::new(passphrase.to_string()))
            }
        };
        let initialized = Vault::init(self.settings.config.clone(), protection, caller).map_err(vault_error)?;
        self.state = self.serving(initialized.vault);
        let recovery_key = initialized.recovery_key.reveal();
        Ok(VaultInitialized { status: self.status()?, recovery_key })
    }

    /// `vault_unlock`: the operator's only.
    pub fn unlock(&mut self, peer: Principal, passphrase: &str) -> Result<api::VaultStatus, MethodError> {
        require_operator(peer, "vault_unlock")?;
        let passphrase = Passphrase::new(passphrase.to_owned());
        let vault = Vault::unlock_with_passphrase(self.settings.config.clone(), &passphrase).map_err(vault_error)?;
        self.state = self.serving(vault);
        self.status()
    }

    /// `vault_recover`: the operator's only.
    pub fn recover(
        &mut self,
        peer: Principal,
        caller: &Caller,
        recovery_key: &str,
    ) -> Result<api::VaultStatus, MethodError> {
        require_operator(peer, "vault_recover")?;
        let recovery_key = RecoveryKey::parse(recovery_key).map_err(vault_error)?;
        let vault = Vault::recover(self.settings.config.clone(), &recovery_key, caller).map_err(vault_error)?;
        self.state = self.serving(vault);
        self.status()
    }

    /// `vault_reseal`.
    pub fn reseal(&mut self, caller: &Caller) -> Result<api::VaultStatus, MethodError> {
        self.vault()?.reseal(caller).map_err(vault_error)?;
        self.status()
    }

    /// `vault_prepare_update`: operator only, like an update itself.
    pub fn prepare_update(
        &mut self,
        peer: Principal,
        caller: &Caller,
        pcr4: &str,
    ) -> Result<api::VaultStatus, MethodError> {
        require_operator(peer, "vault_prepare_update")?;
        let value = fsutil::unhex(pcr4)
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .ok_or_else(|| MethodError::new(ErrorCode::Eproto, "pcr4 must be 64 hex digits (a SHA-256 PCR value)"))?;
        self.vault()?.prepare_update(caller, value).map_err(vault_error)?;
        self.status()
    }

    /// `vault_rotate`.
    pub fn rotate(&mut self, caller: &Caller) -> Result<api::VaultStatus, MethodError> {
        self.vault()?.rotate(caller).map_err(vault_error)?;
        self.status()
    }

    /// `vault_check`.
    pub fn check(&mut self, caller: &Caller) -> Result<api::VaultCheck, MethodError> {
        let report = self.vault()?.check(caller).map_err(vault_error)?;
        Ok(api::VaultCheck {
            secrets: report.secrets,
            versions: report.versions,
            audit_entries: report.audit_entries,
            problems: report.problems,
        })
    }

    /// `secret_set`.
    pub fn set(&mut self, caller: &Caller, params: SecretSet) -> Result<SecretVersion, MethodError> {
        let value = Zeroizing::new(
            BASE64
                .decode(params.value_base64.as_bytes())
                .map_err(|_| MethodError::bad_params("value_base64 is not base64"))?,
        );
        if value.len() > MAX_SECRET_VALUE_BYTES {
            return Err(MethodError::bad_params(format!("a secret value is at most {MAX_SECRET_VALUE_BYTES} bytes")));
        }
        let version = self.vault()?.set(caller, &params.secret_id, &value).map_err(vault_error)?;
        Ok(SecretVersion { secret_id: params.secret_id, version })
    }

    /// `secret_get`.
    pub fn get(&mut self, caller: &Caller, params: SecretGet) -> Result<SecretValue, MethodError> {
        let vault = self.vault()?;
        let value = match params.version {
            None => vault.get(caller, &params.secret_id),
            Some(0) => return Err(MethodError::bad_params("version must be a positive integer")),
            Some(version) => vault.get_version(caller, &params.secret_id, version),
        }
        .map_err(vault_error)?;
        Ok(SecretValue { secret_id: params.secret_id, value_base64: Zeroizing::new(BASE64.encode(value.expose())) })
    }

    /// `secret_list`.
    pub fn list(&mut self, caller: &Caller) -> Result<SecretList, MethodError> {
        let secrets = self.vault()?.list(caller).map_err(vault_error)?;
        Ok(SecretList { secrets: secrets.iter().map(info).collect() })
    }

    /// `secret_history`.
    pub fn history(&mut self, caller: &Caller, params: SecretName) -> Result<SecretHistory, MethodError> {
        let versions = self.vault()?.history(caller, &params.secret_id).map_err(vault_error)?;
        Ok(SecretHistory { secret_id: params.secret_id, versions: versions.iter().map(info).collect() })
    }

    /// `secret_remove`.
    pub fn remove(&mut self, caller: &Caller, params: SecretName) -> Result<SecretRemoved, MethodError> {
        self.vault()?.remove(caller, &params.secret_id).map_err(vault_error)?;
        Ok(SecretRemoved { secret_id: params.secret_id, removed: true })
    }

    /// `vault_status`, and the result of every method that changes the vault.
    pub fn status(&mut self) -> Result<api::VaultStatus, MethodError> {
        let status = match &self.state {
            VaultState::Open(vault) => vault.current_status(),
            VaultState::Closed(_) => Vault::status(&self.settings.config),
        }
        .map_err(vault_error)?;
        let (protection, pcrs, tpm_branches) = match &status.protection {
            None => (None, None, None),
            Some(ProtectionKind::Tpm2 { pcrs, branches }) => {
                (Some("tpm2"), Some(pcrs.iter().map(|&pcr| u32::from(pcr)).collect()), Some(*branches as u32))
            }
            Some(ProtectionKind::Passphrase) => (Some("passphrase"), None, None),
        };
        let state = match status.state {
            SealState::NotInitialized => "not-initialized",
            SealState::Unsealed => "unsealed",
            SealState::Unsealable => "unsealable",
            SealState::PcrMismatch => "pcr-mismatch",
            SealState::TpmUnavailable(_) => "tpm-unavailable",
            SealState::PassphraseRequired => "passphrase-required",
        };
        Ok(api::VaultStatus {
            vault_dir: status.vault_dir.display().to_string(),
            initialized: status.state != SealState::NotInitialized,
            protection: protection.map(str::to_owned),
            protection_description: status.protection.as_ref().map(ToString::to_string),
            pcrs,
            tpm_branches,
            state: state.to_owned(),
            state_description: status.state.to_string(),
            generation: status.generation,
            secret_count: status.secret_count,
            degraded_reason: self.degraded_reason(),
        })
    }
}

fn require_operator(peer: Principal, method: &str) -> Result<(), MethodError> {
    if peer == Principal::Operator {
        Ok(())
    } else {
        Err(MethodError::new(ErrorCode::Eperm, format!("`{method}` is for the operator only, not `{peer}`")))
    }
}

fn info(info: &SecretInfo) -> api::SecretInfo {
    api::SecretInfo {
        secret_id: info.id.clone(),
        version: info.version,
        created_at: info.created_at.clone(),
        updated_at: info.updated_at.clone(),
        key_generation: info.key_generation,
    }
}

/// The IPC error code of a vault failure. Messages never hold secret
/// material (the library guarantees it for its errors).
fn vault_error(error: VaultError) -> MethodError {
    if let VaultError::EarlierVersionDenied { .. } = &error {
        // Who has it is this service's policy, not the library's: say so.
        return MethodError::new(
            ErrorCode::Eperm,
            format!("{error} (by default only the operator reads other versions; a grant in [component.vault] can allow it)"),
        );
    }
    let code = match &error {
        VaultError::AccessDenied { .. }
        | VaultError::PcrMismatch
        | VaultError::PassphraseRequired
        | VaultError::WrongPassphrase
        | VaultError::WrongRecoveryKey => ErrorCode::Eperm,
        VaultError::NotInitialized { .. } | VaultError::SecretNotFound { .. } => ErrorCode::Enoent,
        VaultError::AlreadyInitialized { .. }
        | VaultError::InvalidSecretId { .. }
        | VaultError::MalformedRecoveryKey
        | VaultError::NotPassphraseProtected
        | VaultError::NotTpmProtected => ErrorCode::Eproto,
        VaultError::Io { .. } | VaultError::Tpm(_) | VaultError::Keyring(_) | VaultError::Audit { .. } => {
            ErrorCode::Eio
        }
        _ => ErrorCode::Einternal,
    };
    MethodError::new(code, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_real_faults_degrade_the_component() {
        assert_eq!(ClosedReason::NotInitialized.degraded_reason(), None);
        let sealed = ClosedReason::from_open_error(VaultError::PcrMismatch);
        assert!(sealed.degraded_reason().unwrap().contains("PCR mismatch"));
        assert_eq!(sealed.as_method_error().code, ErrorCode::Eperm);
        assert_eq!(ClosedReason::PassphraseRequired.as_method_error().code, ErrorCode::Eperm);
        assert_eq!(ClosedReason::NotInitialized.as_method_error().code, ErrorCode::Enoent);
        assert_eq!(ClosedReason::Failed("tpm gone".into()).as_method_error().code, ErrorCode::Eio);
    }

    #[test]
    fn only_the_operator_administers() {
        assert!(require_operator(Principal::Operator, "vault_init").is_ok());
        let refused = require_operator(Principal::Component(clawos_ipc::ComponentId::AgentLoop), "vault_init");
        assert_eq!(refused.unwrap_err().code, ErrorCode::Eperm);
    }
}

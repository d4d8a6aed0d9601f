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

use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use clawos_ipc::server::MethodError;
use clawos_ipc::{ErrorCode, Object, Principal};
use serde_json::{json, Value};
use tokio::sync::oneshot;
use vault::{
    Caller, InitProtection, Passphrase, ProtectionKind, RecoveryKey, SealState, SecretInfo, Vault,
    VaultError, VaultStatus,
};
use zeroize::Zeroizing;

use crate::settings::VaultSettings;

/// Every IPC method this module answers.
pub const METHODS: [&str; 11] = [
    "vault_status",
    "vault_init",
    "vault_unlock",
    "vault_recover",
    "vault_reseal",
    "vault_rotate",
    "secret_set",
    "secret_get",
    "secret_list",
    "secret_history",
    "secret_remove",
];

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
            sealed_or_locked => MethodError::new(
                ErrorCode::Eperm,
                sealed_or_locked.degraded_reason().unwrap_or_default(),
            ),
        }
    }
}

enum VaultState {
    Open(Box<Vault>),
    Closed(ClosedReason),
}

/// The vault and what it was opened with. It lives on one thread of its
/// own (see [`VaultService`]).
struct VaultHost {
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
                let started = Instant::now();
                host.try_open();
                host.log_state(started.elapsed());
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

    /// Answers `method` if it is a vault method, else `None`.
    pub async fn handle(&self, peer: Principal, method: &str, params: Object) -> Option<Result<Object, MethodError>> {
        if !METHODS.contains(&method) {
            return None;
        }
        let degraded = Arc::clone(&self.degraded);
        let method = method.to_owned();
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |host: &mut VaultHost| {
            let result = host.dispatch(peer, &method, params);
            *lock(&degraded) = host.degraded_reason();
            match &result {
                Ok(_) => tracing::info!(caller = %peer, method, "vault request served"),
                Err(error) => tracing::warn!(caller = %peer, method, %error, "vault request refused or failed"),
            }
            let _ = reply.send(result);
        });
        if self.jobs.send(job).is_err() {
            return Some(Err(MethodError::new(ErrorCode::Einternal, "the vault thread has stopped")));
        }
        Some(answer.await.unwrap_or_else(|_| {
            Err(MethodError::new(ErrorCode::Einternal, "the vault thread stopped during the request"))
        }))
    }
}

impl VaultHost {
    /// Logs how the first open at start went; `took` is the unseal time
    /// (TPM unseal and key checks) the boot tests report.
    fn log_state(&self, took: Duration) {
        match &self.state {
            VaultState::Open(_) => tracing::info!("vault open: unsealed in {} ms", took.as_millis()),
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

    fn dispatch(&mut self, peer: Principal, method: &str, mut params: Object) -> Result<Object, MethodError> {
        let caller = Caller::new(peer.as_str());
        match method {
            "vault_status" => {
                no_params(&params)?;
                self.status()
            }
            "vault_init" => {
                require_operator(peer, method)?;
                self.init(&caller, &mut params)
            }
            "vault_unlock" => {
                require_operator(peer, method)?;
                let passphrase = Passphrase::new(take_string(&mut params, "passphrase")?.to_string());
                no_params(&params)?;
                let vault = Vault::unlock_with_passphrase(self.settings.config.clone(), &passphrase)
                    .map_err(vault_error)?;
                self.state = self.serving(vault);
                self.status()
            }
            "vault_recover" => {
                require_operator(peer, method)?;
                let text = take_string(&mut params, "recovery_key")?;
                no_params(&params)?;
                let recovery_key = RecoveryKey::parse(&text).map_err(vault_error)?;
                let vault = Vault::recover(self.settings.config.clone(), &recovery_key, &caller)
                    .map_err(vault_error)?;
                self.state = self.serving(vault);
                self.status()
            }
            "vault_reseal" => {
                no_params(&params)?;
                self.vault()?.reseal(&caller).map_err(vault_error)?;
                self.status()
            }
            "vault_rotate" => {
                no_params(&params)?;
                self.vault()?.rotate(&caller).map_err(vault_error)?;
                self.status()
            }
            "secret_set" => {
                let id = take_string(&mut params, "secret_id")?;
                let encoded = take_string(&mut params, "value_base64")?;
                no_params(&params)?;
                let value = Zeroizing::new(
                    BASE64.decode(encoded.as_bytes()).map_err(|_| MethodError::bad_params("value_base64 is not base64"))?,
                );
                if value.len() > MAX_SECRET_VALUE_BYTES {
                    return Err(MethodError::bad_params(format!(
                        "a secret value is at most {MAX_SECRET_VALUE_BYTES} bytes"
                    )));
                }
                let version = self.vault()?.set(&caller, &id, &value).map_err(vault_error)?;
                Ok(object(json!({ "secret_id": *id, "version": version })))
            }
            "secret_get" => {
                let id = take_string(&mut params, "secret_id")?;
                let version = take_version(&mut params)?;
                no_params(&params)?;
                let vault = self.vault()?;
                let value = match version {
                    None => vault.get(&caller, &id),
                    Some(version) => vault.get_version(&caller, &id, version),
                }
                .map_err(vault_error)?;
                let mut result = Object::new();
                result.insert("secret_id".into(), Value::from(id.as_str()));
                result.insert("value_base64".into(), Value::from(BASE64.encode(value.expose())));
                Ok(result)
            }
            "secret_list" => {
                no_params(&params)?;
                let secrets = self.vault()?.list(&caller).map_err(vault_error)?;
                Ok(object(json!({ "secrets": secrets.iter().map(info_json).collect::<Vec<_>>() })))
            }
            "secret_history" => {
                let id = take_string(&mut params, "secret_id")?;
                no_params(&params)?;
                let versions = self.vault()?.history(&caller, &id).map_err(vault_error)?;
                Ok(object(json!({ "secret_id": *id, "versions": versions.iter().map(info_json).collect::<Vec<_>>() })))
            }
            "secret_remove" => {
                let id = take_string(&mut params, "secret_id")?;
                no_params(&params)?;
                self.vault()?.remove(&caller, &id).map_err(vault_error)?;
                Ok(object(json!({ "secret_id": *id, "removed": true })))
            }
            other => Err(MethodError::unknown_method(other)),
        }
    }

    /// `vault_init {"protection": "tpm" | "passphrase", "passphrase"?}`.
    fn init(&mut self, caller: &Caller, params: &mut Object) -> Result<Object, MethodError> {
        let protection = match take_string(params, "protection")?.as_str() {
            "tpm" => InitProtection::Tpm,
            "passphrase" => {
                let passphrase = take_string(params, "passphrase")?;
                if passphrase.chars().count() < MIN_PASSPHRASE_CHARS {
                    return Err(MethodError::bad_params(format!(
                        "the passphrase must have at least {MIN_PASSPHRASE_CHARS} characters"
                    )));
                }
                InitProtection::Passphrase(Passphrase::new(passphrase.to_string()))
            }
            _ => return Err(MethodError::bad_params("protection must be \"tpm\" or \"passphrase\"")),
        };
        no_params(params)?;
        let initialized = Vault::init(self.settings.config.clone(), protection, caller).map_err(vault_error)?;
        self.state = self.serving(initialized.vault);
        let mut result = self.status()?;
        result.insert("recovery_key".into(), Value::from(initialized.recovery_key.reveal().as_str()));
        Ok(result)
    }

    fn status(&mut self) -> Result<Object, MethodError> {
        let status = match &self.state {
            VaultState::Open(vault) => vault.current_status(),
            VaultState::Closed(_) => Vault::status(&self.settings.config),
        }
        .map_err(vault_error)?;
        let mut result = status_json(&status);
        result.insert("degraded_reason".into(), self.degraded_reason().map_or(Value::Null, Value::from));
        Ok(result)
    }
}

fn require_operator(peer: Principal, method: &str) -> Result<(), MethodError> {
    if peer == Principal::Operator {
        Ok(())
    } else {
        Err(MethodError::new(ErrorCode::Eperm, format!("`{method}` is for the operator only, not `{peer}`")))
    }
}

/// Removes the string param `name`, which is wiped when dropped because it
/// may be a secret value, a passphrase or the recovery key.
fn take_string(params: &mut Object, name: &str) -> Result<Zeroizing<String>, MethodError> {
    match params.remove(name) {
        Some(Value::String(text)) => Ok(Zeroizing::new(text)),
        Some(_) => Err(MethodError::bad_params(format!("{name} must be a string"))),
        None => Err(MethodError::bad_params(format!("{name} is required"))),
    }
}

fn take_version(params: &mut Object) -> Result<Option<u32>, MethodError> {
    match params.remove("version") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .and_then(|version| u32::try_from(version).ok())
            .filter(|version| *version >= 1)
            .map(Some)
            .ok_or_else(|| MethodError::bad_params("version must be a positive integer")),
    }
}

/// Refuses params left over after a method took its own: a misspelt name
/// must not silently fall back to a default.
fn no_params(params: &Object) -> Result<(), MethodError> {
    match params.keys().next() {
        None => Ok(()),
        Some(name) => Err(MethodError::bad_params(format!("unknown param `{name}`"))),
    }
}

fn object(value: Value) -> Object {
    match value {
        Value::Object(object) => object,
        _ => unreachable!("built from json!({{...}})"),
    }
}

fn info_json(info: &SecretInfo) -> Value {
    json!({
        "secret_id": info.id,
        "version": info.version,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "key_generation": info.key_generation,
    })
}

/// The `vault_status` result; `state` and `protection` are stable
/// machine-readable names, the `*_description` fields are for people.
fn status_json(status: &VaultStatus) -> Object {
    let (protection, pcrs) = match &status.protection {
        None => (Value::Null, Value::Null),
        Some(ProtectionKind::Tpm2 { pcrs }) => (Value::from("tpm2"), json!(pcrs)),
        Some(ProtectionKind::Passphrase) => (Value::from("passphrase"), Value::Null),
    };
    let state = match status.state {
        SealState::NotInitialized => "not-initialized",
        SealState::Unsealed => "unsealed",
        SealState::Unsealable => "unsealable",
        SealState::PcrMismatch => "pcr-mismatch",
        SealState::TpmUnavailable(_) => "tpm-unavailable",
        SealState::PassphraseRequired => "passphrase-required",
    };
    object(json!({
        "vault_dir": status.vault_dir.display().to_string(),
        "initialized": status.state != SealState::NotInitialized,
        "protection": protection,
        "protection_description": status.protection.as_ref().map(ToString::to_string),
        "pcrs": pcrs,
        "state": state,
        "state_description": status.state.to_string(),
        "generation": status.generation,
        "secret_count": status.secret_count,
    }))
}

/// The IPC error code of a vault failure. Messages never hold secret
/// material (the library guarantees it for its errors).
fn vault_error(error: VaultError) -> MethodError {
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
        VaultError::Io { .. } | VaultError::Tpm(_) | VaultError::Keyring(_) | VaultError::Audit { .. } => ErrorCode::Eio,
        _ => ErrorCode::Einternal,
    };
    MethodError::new(code, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_taken_strictly() {
        let mut params = object(json!({ "secret_id": "a", "version": 2, "extra": true }));
        assert_eq!(take_string(&mut params, "secret_id").unwrap().as_str(), "a");
        assert_eq!(take_version(&mut params).unwrap(), Some(2));
        assert!(no_params(&params).unwrap_err().message.contains("extra"));
        assert!(take_string(&mut params, "secret_id").unwrap_err().message.contains("required"));
        let mut zero = object(json!({ "version": 0 }));
        assert!(take_version(&mut zero).is_err());
        let mut number = object(json!({ "secret_id": 5 }));
        assert!(take_string(&mut number, "secret_id").is_err());
    }

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

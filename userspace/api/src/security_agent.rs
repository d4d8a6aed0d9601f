//! security-agent: the secrets vault (`specs/vault/README.md`). Secret
//! values travel base64-encoded (`value_base64`) because secrets are bytes;
//! every param or result that holds a secret, a passphrase or the recovery
//! key is wiped from memory when it drops.

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::NoParams;

service! {
    component: Some(clawos_ipc::ComponentId::SecurityAgent);
    /// Whether the vault exists, how it is protected and whether it is open.
    fn vault_status(NoParams) -> VaultStatus { timeout_ms: 30000, errors: [Eio] }
    /// Creates the vault (operator only) and answers the recovery key once.
    fn vault_init(VaultInit) -> VaultInitialized { timeout_ms: 30000, errors: [Eperm, Eio] }
    /// Opens a passphrase vault after a reboot (operator only).
    fn vault_unlock(VaultUnlock) -> VaultStatus { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Opens the vault with the recovery key when the TPM refuses (operator only).
    fn vault_recover(VaultRecover) -> VaultStatus { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Seals the master key to the current boot state again.
    fn vault_reseal(NoParams) -> VaultStatus { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Replaces the master key and re-encrypts every secret under it.
    fn vault_rotate(NoParams) -> VaultStatus { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Stores a new version of a secret.
    fn secret_set(SecretSet) -> SecretVersion { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Reads a secret (its newest version, or the one asked for), if the
    /// vault policy lets the caller; any other version than the newest needs
    /// secret-read-history too, which only the operator has by default.
    fn secret_get(SecretGet) -> SecretValue { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Every secret's newest version, without values.
    fn secret_list(NoParams) -> SecretList { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Every kept version of one secret, without values.
    fn secret_history(SecretName) -> SecretHistory { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Removes a secret and all its versions.
    fn secret_remove(SecretName) -> SecretRemoved { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
}

/// How a new vault's master key is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Protection {
    /// Sealed to the TPM 2.0 and this boot's PCRs.
    Tpm,
    /// Derived from an operator passphrase (no TPM).
    Passphrase,
}

/// `vault_init` params.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VaultInit {
    /// How the master key is protected.
    pub protection: Protection,
    /// Required with `passphrase` protection: at least 12 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub passphrase: Option<Zeroizing<String>>,
}

/// `vault_unlock` params.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VaultUnlock {
    /// The operator passphrase.
    #[schemars(with = "String")]
    pub passphrase: Zeroizing<String>,
}

/// `vault_recover` params.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VaultRecover {
    /// The recovery key `vault_init` answered.
    #[schemars(with = "String")]
    pub recovery_key: Zeroizing<String>,
}

/// The vault's state (`vault_status` and the other vault methods' result).
/// `state` and `protection` are stable names for programs; the
/// `*_description` fields are for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VaultStatus {
    /// The vault's directory.
    pub vault_dir: String,
    /// Whether a vault exists.
    pub initialized: bool,
    /// `tpm2` or `passphrase`; null before init.
    pub protection: Option<String>,
    /// The protection, for people.
    pub protection_description: Option<String>,
    /// The PCRs a TPM vault is sealed to.
    pub pcrs: Option<Vec<u32>>,
    /// `not-initialized`, `unsealed`, `unsealable`, `pcr-mismatch`,
    /// `tpm-unavailable` or `passphrase-required`.
    pub state: String,
    /// The state, for people.
    pub state_description: String,
    /// The master key's generation (rotations so far + 1).
    pub generation: Option<u32>,
    /// Secrets stored.
    pub secret_count: usize,
    /// Why security-agent is degraded, if it is.
    pub degraded_reason: Option<String>,
}

/// `vault_init` result: the status and the recovery key, shown once.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VaultInitialized {
    /// The new vault's status.
    #[serde(flatten)]
    pub status: VaultStatus,
    /// The recovery key: the last resort when the TPM or passphrase fails.
    #[schemars(with = "String")]
    pub recovery_key: Zeroizing<String>,
}

/// `secret_set` params.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretSet {
    /// The secret's id.
    pub secret_id: String,
    /// The value, base64 (standard alphabet); at most 64 KiB decoded.
    #[schemars(with = "String")]
    pub value_base64: Zeroizing<String>,
}

/// `secret_set` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretVersion {
    /// The secret's id.
    pub secret_id: String,
    /// The version just stored.
    pub version: u32,
}

/// `secret_get` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretGet {
    /// The secret's id.
    pub secret_id: String,
    /// A version (from 1); the newest when absent. Another version than the
    /// newest needs secret-read-history (the operator's by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub version: Option<u32>,
}

/// `secret_get` result.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretValue {
    /// The secret's id.
    pub secret_id: String,
    /// The value, base64.
    #[schemars(with = "String")]
    pub value_base64: Zeroizing<String>,
}

/// `secret_history` and `secret_remove` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretName {
    /// The secret's id.
    pub secret_id: String,
}

/// One version of a secret, without its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretInfo {
    /// The secret's id.
    pub secret_id: String,
    /// The version.
    pub version: u32,
    /// When the secret was first stored, RFC 3339.
    pub created_at: String,
    /// When this version was stored, RFC 3339.
    pub updated_at: String,
    /// The master key generation it is encrypted under.
    pub key_generation: u32,
}

/// `secret_list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretList {
    /// Each secret's newest version.
    pub secrets: Vec<SecretInfo>,
}

/// `secret_history` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretHistory {
    /// The secret's id.
    pub secret_id: String,
    /// Every kept version, oldest first.
    pub versions: Vec<SecretInfo>,
}

/// `secret_remove` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretRemoved {
    /// The secret's id.
    pub secret_id: String,
    /// Always true: a missing secret is ENOENT.
    pub removed: bool,
}

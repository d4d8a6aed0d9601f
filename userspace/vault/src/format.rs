//! The on-disk formats: secret files and master-key.enc. specs/vault/README.md
//! ("Files") describes both field by field.

use serde::{Deserialize, Serialize};

use crate::crypto::{Ciphertext, KdfParams};
use crate::tpm::SealedKey;

/// Prefix of a secret file's `key_id`; the master-key generation follows.
pub(crate) const KEY_ID_PREFIX: &str = "kernel-keyring:clawos-master:g";
/// `format` of master-key.enc.
pub(crate) const MASTER_FORMAT: &str = "clawos-vault-master-key/1";

/// One version of one secret (specs/vault/README.md, "Files").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SecretFile {
    pub secret_id: String,
    #[serde(flatten)]
    pub ciphertext: Ciphertext,
    pub algorithm: String,
    /// `kernel-keyring:clawos-master:g<generation>`: which master key.
    pub key_id: String,
    pub kdf: KdfParams,
    /// When version 1 was written.
    pub created_at: String,
    /// When this version was written.
    pub updated_at: String,
    pub version: u32,
}

impl SecretFile {
    /// The master-key generation named by `key_id`.
    pub(crate) fn generation(&self) -> Option<u32> {
        self.key_id.strip_prefix(KEY_ID_PREFIX)?.parse().ok()
    }
}

/// The salt and associated data of a secret version: `<secret_id>:v<version>`.
pub(crate) fn secret_binding(secret_id: &str, version: u32) -> String {
    format!("{secret_id}:v{version}")
}

/// A key wrapped under a key derived by PBKDF2 from something the operator holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WrappedKey {
    pub kdf: KdfParams,
    #[serde(flatten)]
    pub ciphertext: Ciphertext,
}

/// How the master key is protected at rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) enum MasterProtection {
    /// Sealed by the TPM to PCR values.
    Tpm2(SealedKey),
    /// Wrapped under the operator passphrase (no TPM).
    Passphrase(WrappedKey),
}

/// An earlier master key kept so files from before a rotation (backups,
/// an interrupted rotation) stay readable for 30 days.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArchivedMaster {
    pub generation: u32,
    pub archived_at: String,
    /// Unix seconds after which the entry is dropped.
    pub expires_at_unix: i64,
    /// The old key, encrypted under the current master key.
    #[serde(flatten)]
    pub ciphertext: Ciphertext,
}

/// master-key.enc.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MasterKeyFile {
    pub format: String,
    /// Random, public; names this vault's keyring entries.
    pub vault_id: String,
    /// Starts at 1, +1 per rotation.
    pub generation: u32,
    pub created_at: String,
    pub protection: MasterProtection,
    /// The master key wrapped under the recovery key.
    pub recovery: WrappedKey,
    /// The keys that must survive rotation, encrypted under the master key.
    pub escrow: Ciphertext,
    pub archive: Vec<ArchivedMaster>,
}

impl MasterKeyFile {
    /// The vault and generation this file's wraps are bound to.
    pub(crate) fn scope(&self) -> WrapScope<'_> {
        WrapScope { vault_id: &self.vault_id, generation: self.generation }
    }

    /// Associated data for a wrap of generation `generation`'s master key by `purpose`.
    pub(crate) fn aad(&self, purpose: &str, generation: u32) -> Vec<u8> {
        self.scope().aad(purpose, generation)
    }
}

/// What every wrap in master-key.enc is bound to: this vault, and the
/// generation of the file that holds it. Separate from [`MasterKeyFile`] so a
/// file's wraps can be computed before the file itself is assembled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WrapScope<'a> {
    pub vault_id: &'a str,
    pub generation: u32,
}

impl WrapScope<'_> {
    /// Associated data for a wrap of generation `generation`'s master key by `purpose`.
    pub(crate) fn aad(&self, purpose: &str, generation: u32) -> Vec<u8> {
        format!("clawos-vault:{}:{purpose}:g{generation}:under-g{}", self.vault_id, self.generation).into_bytes()
    }
}

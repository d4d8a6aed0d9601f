//! The ClawOS secrets vault (specs/vault/README.md).
//!
//! This crate owns the vault directory (default `/clawfs/vault`:
//! `master-key.enc`, `secrets/`, `system-manifest.json`), the vault's audit
//! log, the vault's entries in the kernel keyring, and the sealed object it
//! creates in the TPM. It does not authenticate callers, speak IPC, or
//! print anything: the security-agent service and `clawctl` do, and fill in
//! the [`AccessPolicy`] and [`Caller`] it evaluates. It never writes a
//! secret value, the master key or a derived key to disk or to a log.
//!
//! Key hierarchy:
//! - a 256-bit master key, sealed by the TPM to PCRs (SHA-256 bank,
//!   [`config::DEFAULT_PCRS`]) or, without a TPM, wrapped under an
//!   operator passphrase (PBKDF2-HMAC-SHA256, 600,000 rounds, 16-byte salt);
//!   also wrapped under a recovery key shown once at [`Vault::init`];
//! - per-secret keys PBKDF2(master, `<secret_id>:v<version>`, 600,000),
//!   cached in the kernel keyring so each costs one derivation per boot;
//! - each secret version is one AES-256-GCM JSON file (specs/vault/README.md,
//!   "Files"), its ID and version bound as associated data.
//!
//! Every operation is authorized against the policy and recorded in an
//! HMAC-chained audit log before its result is returned.

mod audit;
pub mod config;
mod crypto;
mod error;
mod files;
mod format;
mod keyring;
mod keys;
mod manifest;
mod policy;
mod tpm;
mod vault;

pub use audit::{AuditEntry, AuditReport};
pub use config::{KeyringScope, VaultConfig};
pub use crypto::{CryptoError, Key256};
pub use error::{Result, VaultError};
pub use keyring::KeyringError;
pub use keys::{Passphrase, RecoveryKey};
pub use manifest::{ManifestReport, SystemManifest};
pub use policy::{AccessPolicy, Caller, Grant, SecretScope, VaultCapability};
pub use tpm::{storage_primary_template, SealedKey, TpmError};
pub use vault::{
    validate_secret_id, InitProtection, Initialized, ProtectionKind, SealState, SecretInfo, SecretValue, Vault,
    VaultCheck, VaultStatus, ARCHIVE_RETENTION_SECONDS, MAX_SECRET_ID_LEN,
};

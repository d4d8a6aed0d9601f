//! The vault's error type.

use std::path::PathBuf;

use crate::keyring::KeyringError;
use crate::policy::VaultCapability;
use crate::tpm::TpmError;

/// Every way a vault operation can fail. No variant carries secret material.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// No master-key.enc in the vault directory.
    #[error("no vault at {dir}")]
    NotInitialized {
        /// The vault directory.
        dir: PathBuf,
    },
    /// init was asked for a directory that already holds a vault.
    #[error("a vault already exists at {dir}")]
    AlreadyInitialized {
        /// The vault directory.
        dir: PathBuf,
    },
    /// A file operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A vault file does not parse or has values this vault never writes.
    #[error("{path} is malformed: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The PCRs differ from the sealed state: the recovery key is needed.
    #[error("sealed: PCR mismatch (boot state changed; use the recovery key, then reseal)")]
    PcrMismatch,
    /// The TPM failed or is unreachable.
    #[error(transparent)]
    Tpm(#[from] TpmError),
    /// The kernel keyring failed.
    #[error(transparent)]
    Keyring(#[from] KeyringError),
    /// A passphrase-protected vault whose key is not in the keyring.
    #[error("locked: the operator passphrase is required")]
    PassphraseRequired,
    /// The passphrase does not unlock the master key.
    #[error("wrong passphrase")]
    WrongPassphrase,
    /// The recovery key does not unlock the master key.
    #[error("wrong recovery key")]
    WrongRecoveryKey,
    /// The recovery key text is not 64 hex digits.
    #[error("a recovery key is 64 hexadecimal digits, optionally grouped with dashes")]
    MalformedRecoveryKey,
    /// A passphrase was offered to a vault that is not passphrase-protected.
    #[error("the vault is sealed by a TPM, not protected by a passphrase")]
    NotPassphraseProtected,
    /// The operation needs a TPM-protected vault (reseal).
    #[error("the vault is protected by a passphrase, not sealed by a TPM")]
    NotTpmProtected,
    /// The master key loaded does not open the vault's own key escrow.
    #[error("the master key does not match this vault")]
    MasterKeyMismatch,
    /// A secret ID outside `[a-z0-9][a-z0-9_-]{0,127}`.
    #[error("invalid secret ID `{id}`: use 1-128 of a-z, 0-9, '-', '_', starting with a letter or digit")]
    InvalidSecretId {
        /// The rejected ID.
        id: String,
    },
    /// No such secret or version.
    #[error("secret `{id}` {version} not found")]
    SecretNotFound {
        /// The secret ID.
        id: String,
        /// `latest` or `version N`.
        version: String,
    },
    /// A secret file fails authentication: wrong key, or its ciphertext,
    /// nonce, tag or bound ID/version was altered.
    #[error("secret `{id}` version {version} failed authentication (tampered or wrong key)")]
    SecretAuthentication {
        /// The secret ID.
        id: String,
        /// The version.
        version: u32,
    },
    /// The secret file was written under a master key that is neither
    /// current nor in the 30-day archive.
    #[error("secret `{id}` is encrypted under master-key generation {generation}, which is no longer available")]
    UnknownKeyGeneration {
        /// The secret ID.
        id: String,
        /// The generation the file names.
        generation: u32,
    },
    /// The policy does not grant the capability.
    #[error("`{caller}` lacks {} on {}", capability.as_str(), target.as_deref().unwrap_or("the vault"))]
    AccessDenied {
        /// The caller identity.
        caller: String,
        /// The capability needed.
        capability: VaultCapability,
        /// The secret, or `None` for the whole vault.
        target: Option<String>,
    },
    /// The caller may read the secret's current version but asked for
    /// another one, which needs [`VaultCapability::SecretReadHistory`] as well.
    #[error(
        "`{caller}` may read only the current version of `{id}` (current version is {current}), not version {version}: \
         other versions need {} on it, which `{caller}` lacks",
        VaultCapability::SecretReadHistory.as_str()
    )]
    EarlierVersionDenied {
        /// The caller identity.
        caller: String,
        /// The secret ID.
        id: String,
        /// The version asked for.
        version: u32,
        /// The secret's current version.
        current: u32,
    },
    /// The audit record could not be written, so the operation was refused.
    #[error("audit log {path} unwritable, operation refused: {source}")]
    Audit {
        /// The audit log.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Rotation failed and was rolled back; the vault is as before.
    #[error("rotation failed at {stage} and was rolled back: {source}")]
    RotationRolledBack {
        /// Which stage failed.
        stage: &'static str,
        /// Why.
        #[source]
        source: Box<VaultError>,
    },
    /// A failure injected by a unit test into rotation.
    #[cfg(test)]
    #[error("injected failure")]
    Injected,
    /// The system manifest's MAC does not verify: it was altered.
    #[error("system manifest {path} fails its MAC: altered or from another vault")]
    ManifestTampered {
        /// The manifest.
        path: PathBuf,
    },
}

/// Shorthand for the vault's results.
pub type Result<T, E = VaultError> = std::result::Result<T, E>;

/// Maps an I/O error to [`VaultError::Io`] with context.
pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> VaultError {
    let path = path.into();
    move |source| VaultError::Io { action, path, source }
}

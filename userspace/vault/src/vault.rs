//! [`Vault`]: the open vault and how it comes to be open: set-up
//! ([`Vault::init`]), opening and unsealing ([`Vault::open`]), passphrase
//! unlock, recovery, status and lock; and the authorization and audit
//! record every operation goes through.
//!
//! Owns: the [`Vault`] type and the keys it holds in memory, the master-key
//! file as read and written, the keys escrowed under the master key, the
//! keyring names of master and derived keys, and the authorize-then-record
//! step of every operation.
//!
//! Must not own: secret files and per-secret keys (`secrets`), changing the
//! master key or its seal (`rotation`), or the system manifest
//! (`manifest`). Each of those submodules adds its operations to [`Vault`]
//! in an `impl Vault` block of its own, authorized and recorded through
//! `authorize` and `record` here.

mod manifest;
mod rotation;
mod secrets;

use std::fs;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::audit::{AuditLog, AuditReport};
use crate::config::VaultConfig;
use crate::crypto::{
    self, decrypt, encrypt, pbkdf2_sha256, random_bytes, subkey, Ciphertext, CryptoError, KdfParams, Key256, KEY_LEN,
    SALT_LEN,
};
use crate::error::{io, Result, VaultError};
use crate::files::{create_private_dir, write_atomic};
use crate::format::{MasterKeyFile, MasterProtection, WrapScope, WrappedKey, MASTER_FORMAT};
use crate::keyring::KeyCache;
use crate::keys::{Passphrase, RecoveryKey};
use crate::policy::{AccessPolicy, Caller, VaultCapability};
use crate::tpm::{Tpm, TpmError};

pub use rotation::ARCHIVE_RETENTION_SECONDS;
pub use secrets::{validate_secret_id, SecretInfo, SecretValue, VaultCheck, MAX_SECRET_ID_LEN};

use secrets::current_secret_ids;

/// How a new vault protects its master key.
#[derive(Debug)]
pub enum InitProtection {
    /// Seal it with the TPM to [`VaultConfig::pcrs`].
    Tpm,
    /// No TPM: wrap it under this operator passphrase and keep the unlocked
    /// key in the kernel keyring.
    Passphrase(Passphrase),
}

/// Which protection is in force, as [`VaultStatus`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtectionKind {
    /// Sealed by the TPM to these PCRs of the SHA-256 bank.
    Tpm2 {
        /// PCR indices.
        pcrs: Vec<u8>,
        /// How many sets of their values unseal it: 1, or 2 while an update
        /// is prepared or until its version is blessed (specs/update/README.md,
        /// "The TPM across an update").
        branches: usize,
    },
    /// Operator passphrase, kernel keyring (the spec's no-TPM fallback).
    Passphrase,
}

impl std::fmt::Display for ProtectionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtectionKind::Tpm2 { pcrs, branches } => {
                let list: Vec<String> = pcrs.iter().map(u8::to_string).collect();
                write!(f, "TPM 2.0 sealed to PCRs {} (sha256)", list.join(","))?;
                match branches {
                    1 => Ok(()),
                    n => write!(f, ", under {n} sets of their values (this boot's and an update's)"),
                }
            }
            ProtectionKind::Passphrase => f.write_str("operator passphrase, no TPM (key held in the kernel keyring)"),
        }
    }
}

/// Whether the master key is available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealState {
    /// No vault in the directory.
    NotInitialized,
    /// The master key is in the kernel keyring: the vault is open.
    Unsealed,
    /// The PCRs match the sealed state; opening will unseal.
    Unsealable,
    /// The PCRs moved: the recovery key is needed, then a reseal.
    PcrMismatch,
    /// The TPM could not be asked.
    TpmUnavailable(String),
    /// A passphrase vault whose key is not in the keyring.
    PassphraseRequired,
}

impl std::fmt::Display for SealState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SealState::NotInitialized => f.write_str("not initialized"),
            SealState::Unsealed => f.write_str("unsealed"),
            SealState::Unsealable => f.write_str("sealed: PCRs match, ready to unseal"),
            SealState::PcrMismatch => f.write_str("sealed: PCR mismatch"),
            SealState::TpmUnavailable(reason) => write!(f, "sealed: TPM unavailable ({reason})"),
            SealState::PassphraseRequired => f.write_str("locked: passphrase required"),
        }
    }
}

/// What `clawctl vault status` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaultStatus {
    /// The vault directory.
    pub vault_dir: PathBuf,
    /// Protection in force, `None` before init.
    pub protection: Option<ProtectionKind>,
    /// Availability of the master key.
    pub state: SealState,
    /// Master-key generation (1 + number of rotations).
    pub generation: Option<u32>,
    /// Number of secrets (current versions).
    pub secret_count: usize,
}

/// The keys escrowed under the master key, re-encrypted on every rotation.
struct Escrow {
    /// Root of the audit and manifest MAC keys.
    integrity: Key256,
    /// PBKDF2 output of the recovery key, to rewrap new master keys.
    recovery_kek: Key256,
    /// PBKDF2 output of the passphrase, for passphrase vaults.
    passphrase_kek: Option<Key256>,
}

impl Escrow {
    fn seal(&self, scope: WrapScope<'_>, master: &Key256) -> Ciphertext {
        let mut plain = Zeroizing::new(Vec::with_capacity(3 * KEY_LEN));
        plain.extend_from_slice(self.integrity.as_bytes());
        plain.extend_from_slice(self.recovery_kek.as_bytes());
        if let Some(kek) = &self.passphrase_kek {
            plain.extend_from_slice(kek.as_bytes());
        }
        encrypt(master, &scope.aad("escrow", scope.generation), &plain)
    }

    fn open(file: &MasterKeyFile, master: &Key256) -> Result<Self> {
        let plain = decrypt(master, &file.aad("escrow", file.generation), &file.escrow)
            .map_err(|_| VaultError::MasterKeyMismatch)?;
        let part = |index: usize| Key256::from_slice(plain.get(index * KEY_LEN..(index + 1) * KEY_LEN)?);
        let mismatch = || VaultError::MasterKeyMismatch;
        Ok(Escrow {
            integrity: part(0).ok_or_else(mismatch)?,
            recovery_kek: part(1).ok_or_else(mismatch)?,
            passphrase_kek: part(2),
        })
    }
}

/// An unlocked vault. Create one with [`Vault::init`], [`Vault::open`],
/// [`Vault::unlock_with_passphrase`] or [`Vault::recover`]; it is the single
/// writer of its directory (the hosting service serializes callers).
pub struct Vault {
    config: VaultConfig,
    file: MasterKeyFile,
    master: Key256,
    escrow: Escrow,
    archived: Vec<(u32, Key256)>,
    cache: KeyCache,
    policy: AccessPolicy,
    audit: AuditLog,
    /// The rotation stage the tests make fail (see `rotation`).
    #[cfg(test)]
    fail_rotation_at: Option<&'static str>,
}

/// What [`Vault::init`] returns: the open vault and the recovery key, which
/// exists nowhere else and must be shown to the operator now.
#[derive(Debug)]
pub struct Initialized {
    /// The new, open vault.
    pub vault: Vault,
    /// The recovery key.
    pub recovery_key: RecoveryKey,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault")
            .field("vault_dir", &self.config.vault_dir)
            .field("generation", &self.file.generation)
            .finish_non_exhaustive()
    }
}

fn now_unix() -> i64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since_epoch.map_or(0, |elapsed| i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX))
}

fn read_master_file(config: &VaultConfig) -> Result<MasterKeyFile> {
    let path = config.master_key_path();
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(VaultError::NotInitialized { dir: config.vault_dir.clone() })
        }
        Err(error) => return Err(io("read", path)(error)),
    };
    let file: MasterKeyFile = serde_json::from_slice(&bytes)
        .map_err(|error| VaultError::Corrupt { path: path.clone(), reason: error.to_string() })?;
    if file.format != MASTER_FORMAT {
        return Err(VaultError::Corrupt { path, reason: format!("unknown format `{}`", file.format) });
    }
    Ok(file)
}

fn write_master_file(config: &VaultConfig, file: &MasterKeyFile) -> Result<()> {
    let path = config.master_key_path();
    let bytes = serde_json::to_vec_pretty(file).expect("master-key files always serialize");
    write_atomic(&path, &bytes).map_err(io("write", path))
}

fn wrap_with_kek(scope: WrapScope<'_>, purpose: &str, kek: &Key256, salt: &[u8], master: &Key256) -> WrappedKey {
    WrappedKey {
        kdf: KdfParams::new(salt),
        ciphertext: encrypt(kek, &scope.aad(purpose, scope.generation), master.as_bytes()),
    }
}

/// Derives the wrapping key from an operator credential and unwraps the master key.
fn unwrap_with_credential(
    file: &MasterKeyFile,
    purpose: &str,
    wrapped: &WrappedKey,
    credential: &[u8],
    path: &Path,
) -> Result<Option<(Key256, Key256)>> {
    let salt = wrapped.kdf.checked_salt().ok_or_else(|| VaultError::Corrupt {
        path: path.to_owned(),
        reason: format!("unsupported KDF parameters for the {purpose} wrap"),
    })?;
    let kek = pbkdf2_sha256(credential, &salt);
    match decrypt(&kek, &file.aad(purpose, file.generation), &wrapped.ciphertext) {
        Ok(plain) => Ok(Key256::from_slice(&plain).map(|master| (master, kek))),
        Err(CryptoError::Authentication) => Ok(None),
        Err(CryptoError::Malformed { field }) => Err(VaultError::Corrupt {
            path: path.to_owned(),
            reason: format!("malformed {field} in the {purpose} wrap"),
        }),
    }
}

fn outcome<T>(result: &Result<T>) -> String {
    match result {
        Ok(_) => "allowed".to_owned(),
        Err(error) => format!("failed: {error}"),
    }
}

/// Keyring name of the master key of `generation`.
fn master_cache_name(generation: u32) -> String {
    format!("master:g{generation}:")
}

/// Keyring name prefix of the keys derived from `master`: a fingerprint of
/// the key itself, so a generation number reused after a rolled-back
/// rotation can never pick up keys derived from the discarded master.
fn derived_key_prefix(master: &Key256) -> String {
    let fingerprint = crypto::hmac_sha256(master, &[b"clawos-vault-keyring-name"]);
    format!("k{}:", fsutil::hex(&fingerprint[..8]))
}

impl Vault {
    /// Creates a vault in [`VaultConfig::vault_dir`]: a fresh random master
    /// key, protected as asked, plus a recovery key returned exactly once.
    /// Fails with [`VaultError::AlreadyInitialized`] if a vault exists.
    pub fn init(config: VaultConfig, protection: InitProtection, caller: &Caller) -> Result<Initialized> {
        if config.master_key_path().exists() {
            return Err(VaultError::AlreadyInitialized { dir: config.vault_dir.clone() });
        }
        for dir in [&config.vault_dir, &config.secrets_dir()] {
            create_private_dir(dir).map_err(io("create", dir.clone()))?;
        }
        let master = Key256::random();
        let recovery_key = RecoveryKey::generate();
        let recovery_salt: [u8; SALT_LEN] = random_bytes();
        let vault_id = fsutil::hex(&random_bytes::<16>());
        let scope = WrapScope { vault_id: &vault_id, generation: 1 };
        let recovery_kek = pbkdf2_sha256(recovery_key.as_bytes(), &recovery_salt);
        let recovery = wrap_with_kek(scope, "recovery", &recovery_kek, &recovery_salt, &master);
        let (protection, passphrase_kek) = match protection {
            InitProtection::Tpm => {
                (MasterProtection::Tpm2(Tpm::connect(&config.tcti)?.seal(&master, &config.pcrs, &[])?), None)
            }
            InitProtection::Passphrase(passphrase) => {
                let salt: [u8; SALT_LEN] = random_bytes();
                let kek = pbkdf2_sha256(passphrase.as_bytes(), &salt);
                let wrapped = wrap_with_kek(scope, "passphrase", &kek, &salt, &master);
                (MasterProtection::Passphrase(wrapped), Some(kek))
            }
        };
        let escrow = Escrow { integrity: Key256::random(), recovery_kek, passphrase_kek };
        let file = MasterKeyFile {
            format: MASTER_FORMAT.to_owned(),
            escrow: escrow.seal(scope, &master),
            vault_id,
            generation: 1,
            created_at: fsutil::now_rfc3339(),
            protection,
            recovery,
            archive: Vec::new(),
        };
        write_master_file(&config, &file)?;
        let mut vault = Self::assemble(config, file, master, escrow)?;
        vault.record(caller, VaultCapability::VaultAdmin, "init", None, "allowed")?;
        Ok(Initialized { vault, recovery_key })
    }

    /// Opens the vault: the master key from the kernel keyring if this boot
    /// already unsealed it, otherwise unsealed by the TPM.
    /// [`VaultError::PcrMismatch`] when the boot state changed,
    /// [`VaultError::PassphraseRequired`] for a locked passphrase vault.
    pub fn open(config: VaultConfig) -> Result<Self> {
        let file = read_master_file(&config)?;
        let cache = KeyCache::new(config.keyring, &file.vault_id)?;
        if let Some(master) = cache.get(&master_cache_name(file.generation)) {
            return Self::from_master(config, file, master);
        }
        match &file.protection {
            MasterProtection::Tpm2(sealed) => {
                let master = match Tpm::connect(&config.tcti)?.unseal(sealed) {
                    Err(TpmError::PcrMismatch) => return Err(VaultError::PcrMismatch),
                    other => other?,
                };
                Self::from_master(config, file, master)
            }
            MasterProtection::Passphrase(_) => Err(VaultError::PassphraseRequired),
        }
    }

    /// Whether this boot's kernel keyring holds the master key, so that
    /// [`Vault::open`] takes it from there rather than from the TPM: what
    /// the security agent reports of each open (a restarted agent finds the
    /// key its first start unsealed).
    pub fn master_in_keyring(config: &VaultConfig) -> Result<bool> {
        let file = read_master_file(config)?;
        Ok(KeyCache::new(config.keyring, &file.vault_id)?.get(&master_cache_name(file.generation)).is_some())
    }

    /// Unlocks a passphrase vault (600,000 PBKDF2 rounds) and caches the
    /// master key in the kernel keyring for later [`Vault::open`]s.
    pub fn unlock_with_passphrase(config: VaultConfig, passphrase: &Passphrase) -> Result<Self> {
        let file = read_master_file(&config)?;
        let MasterProtection::Passphrase(wrapped) = &file.protection else {
            return Err(VaultError::NotPassphraseProtected);
        };
        let path = config.master_key_path();
        let (master, _) = unwrap_with_credential(&file, "passphrase", wrapped, passphrase.as_bytes(), &path)?
            .ok_or(VaultError::WrongPassphrase)?;
        Self::from_master(config, file, master)
    }

    /// Unlocks the vault with the recovery key when the TPM refuses (PCR
    /// mismatch) or the passphrase is lost. Follow with [`Vault::reseal`]
    /// so the next boot unseals by itself.
    pub fn recover(config: VaultConfig, recovery_key: &RecoveryKey, caller: &Caller) -> Result<Self> {
        let file = read_master_file(&config)?;
        let path = config.master_key_path();
        let (master, _) = unwrap_with_credential(&file, "recovery", &file.recovery, recovery_key.as_bytes(), &path)?
            .ok_or(VaultError::WrongRecoveryKey)?;
        let mut vault = Self::from_master(config, file, master)?;
        vault.record(caller, VaultCapability::VaultAdmin, "recover", None, "allowed")?;
        Ok(vault)
    }

    /// Reports the protection and availability without unlocking anything.
    pub fn status(config: &VaultConfig) -> Result<VaultStatus> {
        let file = match read_master_file(config) {
            Err(VaultError::NotInitialized { .. }) => {
                return Ok(VaultStatus {
                    vault_dir: config.vault_dir.clone(),
                    protection: None,
                    state: SealState::NotInitialized,
                    generation: None,
                    secret_count: 0,
                })
            }
            other => other?,
        };
        let cached = KeyCache::new(config.keyring, &file.vault_id)?.get(&master_cache_name(file.generation)).is_some();
        let (protection, state) = match &file.protection {
            MasterProtection::Tpm2(sealed) => {
                let state = if cached {
                    SealState::Unsealed
                } else {
                    match Tpm::connect(&config.tcti).and_then(|mut tpm| tpm.policy_matches(sealed)) {
                        Ok(true) => SealState::Unsealable,
                        Ok(false) => SealState::PcrMismatch,
                        Err(error) => SealState::TpmUnavailable(error.to_string()),
                    }
                };
                (ProtectionKind::Tpm2 { pcrs: sealed.pcrs.clone(), branches: sealed.branches.len().max(1) }, state)
            }
            MasterProtection::Passphrase(_) => {
                (ProtectionKind::Passphrase, if cached { SealState::Unsealed } else { SealState::PassphraseRequired })
            }
        };
        Ok(VaultStatus {
            vault_dir: config.vault_dir.clone(),
            protection: Some(protection),
            state,
            generation: Some(file.generation),
            secret_count: current_secret_ids(&config.secrets_dir())?.len(),
        })
    }

    /// Replaces the access policy (deny-all until set).
    pub fn set_policy(&mut self, policy: AccessPolicy) {
        self.policy = policy;
    }

    /// Removes this vault's keys from the kernel keyring and closes it; the
    /// next [`Vault::open`] must unseal (or unlock) again.
    pub fn lock(self) -> Result<()> {
        self.cache.forget("")?;
        Ok(())
    }

    fn from_master(config: VaultConfig, file: MasterKeyFile, master: Key256) -> Result<Self> {
        let escrow = Escrow::open(&file, &master)?;
        let mut vault = Self::assemble(config, file, master, escrow)?;
        vault.finish_interrupted_rotation()?;
        Ok(vault)
    }

    fn assemble(config: VaultConfig, file: MasterKeyFile, master: Key256, escrow: Escrow) -> Result<Self> {
        let cache = KeyCache::new(config.keyring, &file.vault_id)?;
        cache.put(&master_cache_name(file.generation), &master)?;
        let now = now_unix();
        let mut archived = Vec::new();
        for entry in file.archive.iter().filter(|entry| entry.expires_at_unix > now) {
            let plain = decrypt(&master, &file.aad("archive", entry.generation), &entry.ciphertext).map_err(|_| {
                VaultError::Corrupt {
                    path: config.master_key_path(),
                    reason: format!("archived master key g{} does not decrypt", entry.generation),
                }
            })?;
            if let Some(key) = Key256::from_slice(&plain) {
                archived.push((entry.generation, key));
            }
        }
        let audit = AuditLog::open(&config.audit_log, subkey(&escrow.integrity, "audit"))
            .map_err(io("open audit log", config.audit_log.clone()))?;
        Ok(Vault {
            config,
            file,
            master,
            escrow,
            archived,
            cache,
            policy: AccessPolicy::deny_all(),
            audit,
            #[cfg(test)]
            fail_rotation_at: None,
        })
    }

    /// The status of this open vault.
    pub fn current_status(&self) -> Result<VaultStatus> {
        Ok(VaultStatus {
            vault_dir: self.config.vault_dir.clone(),
            protection: Some(match &self.file.protection {
                MasterProtection::Tpm2(sealed) => {
                    ProtectionKind::Tpm2 { pcrs: sealed.pcrs.clone(), branches: sealed.branches.len().max(1) }
                }
                MasterProtection::Passphrase(_) => ProtectionKind::Passphrase,
            }),
            state: SealState::Unsealed,
            generation: Some(self.file.generation),
            secret_count: current_secret_ids(&self.config.secrets_dir())?.len(),
        })
    }

    /// Lets the operation through if the policy allows it; otherwise
    /// records the denial in the audit log and refuses.
    fn authorize(
        &mut self,
        caller: &Caller,
        capability: VaultCapability,
        operation: &str,
        secret: Option<(&str, Option<u32>)>,
    ) -> Result<()> {
        if self.policy.allows(caller, capability, secret.map(|(id, _)| id)) {
            return Ok(());
        }
        self.record(caller, capability, operation, secret, "denied")?;
        Err(VaultError::AccessDenied {
            caller: caller.identity.clone(),
            capability,
            target: secret.map(|(id, _)| id.to_owned()),
        })
    }

    /// Appends the operation and its outcome to the audit log; an operation
    /// whose entry cannot be written fails.
    fn record(
        &mut self,
        caller: &Caller,
        capability: VaultCapability,
        operation: &str,
        secret: Option<(&str, Option<u32>)>,
        outcome: &str,
    ) -> Result<()> {
        self.audit
            .append(&caller.identity, capability.as_str(), operation, secret, outcome)
            .map_err(|source| VaultError::Audit { path: self.config.audit_log.clone(), source })
    }

    /// Verifies the whole audit log's MAC chain.
    pub fn verify_audit_log(&self) -> Result<AuditReport> {
        self.audit.verify().map_err(io("read audit log", self.config.audit_log.clone()))
    }
}

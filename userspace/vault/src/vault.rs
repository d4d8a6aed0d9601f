//! [`Vault`]: opening, unsealing, recovering and rotating the master key,
//! and the authorized, audited secret operations.

use std::fs;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::audit::{AuditLog, AuditReport};
use crate::config::VaultConfig;
use crate::crypto::{
    self, decrypt, encrypt, pbkdf2_sha256, random_bytes, subkey, Ciphertext, CryptoError,
    KdfParams, Key256, CIPHER_ALGORITHM, KEY_LEN, SALT_LEN,
};
use crate::error::{io, Result, VaultError};
use crate::format::{
    secret_binding, ArchivedMaster, MasterKeyFile, MasterProtection, SecretFile, WrapScope,
    WrappedKey, KEY_ID_PREFIX, MASTER_FORMAT,
};
use crate::fsutil::{create_private_dir, exchange, sync_dir, write_atomic};
use crate::keyring::KeyCache;
use crate::keys::{Passphrase, RecoveryKey};
use crate::manifest::{ManifestReport, SystemManifest};
use crate::policy::{AccessPolicy, Caller, Capability};
use crate::tpm::{Tpm, TpmError};

/// How long an old master key stays in the archive after a rotation.
pub const ARCHIVE_RETENTION_SECONDS: i64 = 30 * 24 * 60 * 60;
/// Longest secret ID accepted.
pub const MAX_SECRET_ID_LEN: usize = 128;
/// Directory under secrets/ holding earlier versions.
const HISTORY_DIR: &str = "history";
/// Where rotation builds the re-encrypted tree before swapping it in.
const ROTATION_STAGING: &str = ".secrets.rotating";

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
    },
    /// Operator passphrase, kernel keyring (the spec's no-TPM fallback).
    Passphrase,
}

impl std::fmt::Display for ProtectionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtectionKind::Tpm2 { pcrs } => {
                let list: Vec<String> = pcrs.iter().map(u8::to_string).collect();
                write!(f, "TPM 2.0 sealed to PCRs {} (sha256)", list.join(","))
            }
            ProtectionKind::Passphrase => {
                f.write_str("operator passphrase, no TPM (key held in the kernel keyring)")
            }
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

/// A decrypted secret value, wiped on drop and never printed by `Debug`.
pub struct SecretValue(Zeroizing<Vec<u8>>);

impl SecretValue {
    /// The value's bytes.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretValue(<{} bytes redacted>)", self.0.len())
    }
}

/// A secret version's metadata (no value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretInfo {
    /// Secret ID.
    pub id: String,
    /// Version number, from 1.
    pub version: u32,
    /// When version 1 was written.
    pub created_at: String,
    /// When this version was written.
    pub updated_at: String,
    /// Master-key generation it is encrypted under.
    pub key_generation: u32,
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
        let part =
            |index: usize| Key256::from_slice(plain.get(index * KEY_LEN..(index + 1) * KEY_LEN)?);
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
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn read_master_file(config: &VaultConfig) -> Result<MasterKeyFile> {
    let path = config.master_key_path();
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(VaultError::NotInitialized {
                dir: config.vault_dir.clone(),
            })
        }
        Err(error) => return Err(io("read", path)(error)),
    };
    let file: MasterKeyFile =
        serde_json::from_slice(&bytes).map_err(|error| VaultError::Corrupt {
            path: path.clone(),
            reason: error.to_string(),
        })?;
    if file.format != MASTER_FORMAT {
        return Err(VaultError::Corrupt {
            path,
            reason: format!("unknown format `{}`", file.format),
        });
    }
    Ok(file)
}

fn write_master_file(config: &VaultConfig, file: &MasterKeyFile) -> Result<()> {
    let path = config.master_key_path();
    let bytes = serde_json::to_vec_pretty(file).expect("master-key files always serialize");
    write_atomic(&path, &bytes).map_err(io("write", path))
}

fn wrap_with_kek(
    scope: WrapScope<'_>,
    purpose: &str,
    kek: &Key256,
    salt: &[u8],
    master: &Key256,
) -> WrappedKey {
    WrappedKey {
        kdf: KdfParams::new(salt),
        ciphertext: encrypt(
            kek,
            &scope.aad(purpose, scope.generation),
            master.as_bytes(),
        ),
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
    let salt = wrapped
        .kdf
        .checked_salt()
        .ok_or_else(|| VaultError::Corrupt {
            path: path.to_owned(),
            reason: format!("unsupported KDF parameters for the {purpose} wrap"),
        })?;
    let kek = pbkdf2_sha256(credential, &salt);
    match decrypt(
        &kek,
        &file.aad(purpose, file.generation),
        &wrapped.ciphertext,
    ) {
        Ok(plain) => Ok(Key256::from_slice(&plain).map(|master| (master, kek))),
        Err(CryptoError::Authentication) => Ok(None),
        Err(CryptoError::Malformed { field }) => Err(VaultError::Corrupt {
            path: path.to_owned(),
            reason: format!("malformed {field} in the {purpose} wrap"),
        }),
    }
}

/// Checks a secret ID against `[a-z0-9][a-z0-9_-]{0,127}`, which keeps it a
/// safe file name and makes `<id>:v<version>` unambiguous.
pub fn validate_secret_id(id: &str) -> Result<()> {
    let valid = !id.is_empty()
        && id.len() <= MAX_SECRET_ID_LEN
        && id.bytes().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-' || byte == b'_'
        })
        && id.as_bytes()[0].is_ascii_alphanumeric();
    if valid {
        Ok(())
    } else {
        Err(VaultError::InvalidSecretId { id: id.to_owned() })
    }
}

fn outcome<T>(result: &Result<T>) -> String {
    match result {
        Ok(_) => "allowed".to_owned(),
        Err(error) => format!("failed: {error}"),
    }
}

impl Vault {
    /// Creates a vault in [`VaultConfig::vault_dir`]: a fresh random master
    /// key, protected as asked, plus a recovery key returned exactly once.
    /// Fails with [`VaultError::AlreadyInitialized`] if a vault exists.
    pub fn init(
        config: VaultConfig,
        protection: InitProtection,
        caller: &Caller,
    ) -> Result<Initialized> {
        if config.master_key_path().exists() {
            return Err(VaultError::AlreadyInitialized {
                dir: config.vault_dir.clone(),
            });
        }
        for dir in [&config.vault_dir, &config.secrets_dir()] {
            create_private_dir(dir).map_err(io("create", dir.clone()))?;
        }
        let master = Key256::random();
        let recovery_key = RecoveryKey::generate();
        let recovery_salt: [u8; SALT_LEN] = random_bytes();
        let vault_id = crate::hex(&random_bytes::<16>());
        let scope = WrapScope {
            vault_id: &vault_id,
            generation: 1,
        };
        let recovery_kek = pbkdf2_sha256(recovery_key.as_bytes(), &recovery_salt);
        let recovery = wrap_with_kek(scope, "recovery", &recovery_kek, &recovery_salt, &master);
        let (protection, passphrase_kek) = match protection {
            InitProtection::Tpm => (
                MasterProtection::Tpm2(Tpm::connect(&config.tcti)?.seal(&master, &config.pcrs)?),
                None,
            ),
            InitProtection::Passphrase(passphrase) => {
                let salt: [u8; SALT_LEN] = random_bytes();
                let kek = pbkdf2_sha256(passphrase.as_bytes(), &salt);
                let wrapped = wrap_with_kek(scope, "passphrase", &kek, &salt, &master);
                (MasterProtection::Passphrase(wrapped), Some(kek))
            }
        };
        let escrow = Escrow {
            integrity: Key256::random(),
            recovery_kek,
            passphrase_kek,
        };
        let file = MasterKeyFile {
            format: MASTER_FORMAT.to_owned(),
            escrow: escrow.seal(scope, &master),
            vault_id,
            generation: 1,
            created_at: crate::now_rfc3339(),
            protection,
            recovery,
            archive: Vec::new(),
        };
        write_master_file(&config, &file)?;
        let mut vault = Self::assemble(config, file, master, escrow)?;
        vault.record(caller, Capability::VaultAdmin, "init", None, "allowed")?;
        Ok(Initialized {
            vault,
            recovery_key,
        })
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

    /// Unlocks a passphrase vault (600,000 PBKDF2 rounds) and caches the
    /// master key in the kernel keyring for later [`Vault::open`]s.
    pub fn unlock_with_passphrase(config: VaultConfig, passphrase: &Passphrase) -> Result<Self> {
        let file = read_master_file(&config)?;
        let MasterProtection::Passphrase(wrapped) = &file.protection else {
            return Err(VaultError::NotPassphraseProtected);
        };
        let path = config.master_key_path();
        let (master, _) =
            unwrap_with_credential(&file, "passphrase", wrapped, passphrase.as_bytes(), &path)?
                .ok_or(VaultError::WrongPassphrase)?;
        Self::from_master(config, file, master)
    }

    /// Unlocks the vault with the recovery key when the TPM refuses (PCR
    /// mismatch) or the passphrase is lost. Follow with [`Vault::reseal`]
    /// so the next boot unseals by itself.
    pub fn recover(
        config: VaultConfig,
        recovery_key: &RecoveryKey,
        caller: &Caller,
    ) -> Result<Self> {
        let file = read_master_file(&config)?;
        let path = config.master_key_path();
        let (master, _) = unwrap_with_credential(
            &file,
            "recovery",
            &file.recovery,
            recovery_key.as_bytes(),
            &path,
        )?
        .ok_or(VaultError::WrongRecoveryKey)?;
        let mut vault = Self::from_master(config, file, master)?;
        vault.record(caller, Capability::VaultAdmin, "recover", None, "allowed")?;
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
        let cached = KeyCache::new(config.keyring, &file.vault_id)?
            .get(&master_cache_name(file.generation))
            .is_some();
        let (protection, state) = match &file.protection {
            MasterProtection::Tpm2(sealed) => {
                let state = if cached {
                    SealState::Unsealed
                } else {
                    match Tpm::connect(&config.tcti).and_then(|mut tpm| tpm.policy_matches(sealed))
                    {
                        Ok(true) => SealState::Unsealable,
                        Ok(false) => SealState::PcrMismatch,
                        Err(error) => SealState::TpmUnavailable(error.to_string()),
                    }
                };
                (
                    ProtectionKind::Tpm2 {
                        pcrs: sealed.pcrs.clone(),
                    },
                    state,
                )
            }
            MasterProtection::Passphrase(_) => (
                ProtectionKind::Passphrase,
                if cached {
                    SealState::Unsealed
                } else {
                    SealState::PassphraseRequired
                },
            ),
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

    fn assemble(
        config: VaultConfig,
        file: MasterKeyFile,
        master: Key256,
        escrow: Escrow,
    ) -> Result<Self> {
        let cache = KeyCache::new(config.keyring, &file.vault_id)?;
        cache.put(&master_cache_name(file.generation), &master)?;
        let now = now_unix();
        let mut archived = Vec::new();
        for entry in file
            .archive
            .iter()
            .filter(|entry| entry.expires_at_unix > now)
        {
            let plain = decrypt(
                &master,
                &file.aad("archive", entry.generation),
                &entry.ciphertext,
            )
            .map_err(|_| VaultError::Corrupt {
                path: config.master_key_path(),
                reason: format!("archived master key g{} does not decrypt", entry.generation),
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
                MasterProtection::Tpm2(sealed) => ProtectionKind::Tpm2 {
                    pcrs: sealed.pcrs.clone(),
                },
                MasterProtection::Passphrase(_) => ProtectionKind::Passphrase,
            }),
            state: SealState::Unsealed,
            generation: Some(self.file.generation),
            secret_count: current_secret_ids(&self.config.secrets_dir())?.len(),
        })
    }

    /// Seals the current master key to the PCRs as they are now
    /// ([`VaultConfig::pcrs`]), after an update and [`Vault::recover`].
    pub fn reseal(&mut self, caller: &Caller) -> Result<()> {
        self.authorize(caller, Capability::VaultAdmin, "reseal", None)?;
        let result = self.reseal_now();
        self.record(
            caller,
            Capability::VaultAdmin,
            "reseal",
            None,
            &outcome(&result),
        )?;
        result
    }

    fn reseal_now(&mut self) -> Result<()> {
        if !matches!(self.file.protection, MasterProtection::Tpm2(_)) {
            return Err(VaultError::NotTpmProtected);
        }
        let sealed = Tpm::connect(&self.config.tcti)?.seal(&self.master, &self.config.pcrs)?;
        let mut file = self.file.clone();
        file.protection = MasterProtection::Tpm2(sealed);
        write_master_file(&self.config, &file)?;
        self.file = file;
        Ok(())
    }

    // ----- secrets -----

    fn current_path(&self, id: &str) -> PathBuf {
        self.config.secrets_dir().join(format!("{id}.enc"))
    }

    fn history_dir(&self, id: &str) -> PathBuf {
        self.config.secrets_dir().join(HISTORY_DIR).join(id)
    }

    fn history_path(&self, id: &str, version: u32) -> PathBuf {
        self.history_dir(id).join(format!("v{version}.enc"))
    }

    fn master_for(&self, generation: u32) -> Option<&Key256> {
        if generation == self.file.generation {
            return Some(&self.master);
        }
        self.archived
            .iter()
            .find(|(archived, _)| *archived == generation)
            .map(|(_, key)| key)
    }

    /// The per-secret key, from the keyring or by PBKDF2 (then cached).
    fn secret_key(&self, master: &Key256, id: &str, version: u32) -> Result<Key256> {
        let binding = secret_binding(id, version);
        let name = format!("{}{binding}", derived_key_prefix(master));
        if let Some(key) = self.cache.get(&name) {
            return Ok(key);
        }
        let key = pbkdf2_sha256(master.as_bytes(), binding.as_bytes());
        // Caching is an optimization: a full keyring quota (kernel.keys.maxkeys
        // and maxbytes, 200 keys and 20,000 bytes per non-root user unless
        // raised) must cost the next read a KDF, not fail this one.
        let _ = self.cache.put(&name, &key);
        Ok(key)
    }

    fn encrypt_secret(
        &self,
        master: &Key256,
        generation: u32,
        id: &str,
        version: u32,
        created_at: &str,
        value: &[u8],
    ) -> Result<SecretFile> {
        let binding = secret_binding(id, version);
        let key = self.secret_key(master, id, version)?;
        Ok(SecretFile {
            secret_id: id.to_owned(),
            ciphertext: encrypt(&key, binding.as_bytes(), value),
            algorithm: CIPHER_ALGORITHM.to_owned(),
            key_id: format!("{KEY_ID_PREFIX}{generation}"),
            kdf: KdfParams::new(binding.as_bytes()),
            created_at: created_at.to_owned(),
            updated_at: crate::now_rfc3339(),
            version,
        })
    }

    fn decrypt_secret(&self, file: &SecretFile, path: &Path) -> Result<Zeroizing<Vec<u8>>> {
        let corrupt = |reason: &str| VaultError::Corrupt {
            path: path.to_owned(),
            reason: reason.to_owned(),
        };
        let binding = secret_binding(&file.secret_id, file.version);
        if file.algorithm != CIPHER_ALGORITHM {
            return Err(corrupt("unsupported algorithm"));
        }
        if file.kdf.checked_salt().as_deref() != Some(binding.as_bytes()) {
            return Err(corrupt(
                "KDF parameters differ from `<secret_id>:v<version>`",
            ));
        }
        let generation = file.generation().ok_or_else(|| corrupt("unknown key_id"))?;
        let master =
            self.master_for(generation)
                .ok_or_else(|| VaultError::UnknownKeyGeneration {
                    id: file.secret_id.clone(),
                    generation,
                })?;
        let key = self.secret_key(master, &file.secret_id, file.version)?;
        decrypt(&key, binding.as_bytes(), &file.ciphertext).map_err(|error| match error {
            CryptoError::Authentication => VaultError::SecretAuthentication {
                id: file.secret_id.clone(),
                version: file.version,
            },
            CryptoError::Malformed { field } => corrupt(&format!("malformed {field}")),
        })
    }

    fn load_current(&self, id: &str) -> Result<Option<SecretFile>> {
        read_secret_file(&self.current_path(id), id)
    }

    fn authorize(
        &mut self,
        caller: &Caller,
        capability: Capability,
        operation: &str,
        secret: Option<(&str, Option<u32>)>,
    ) -> Result<()> {
        if self
            .policy
            .allows(caller, capability, secret.map(|(id, _)| id))
        {
            return Ok(());
        }
        self.record(caller, capability, operation, secret, "denied")?;
        Err(VaultError::AccessDenied {
            caller: caller.identity.clone(),
            capability,
            target: secret.map(|(id, _)| id.to_owned()),
        })
    }

    fn record(
        &mut self,
        caller: &Caller,
        capability: Capability,
        operation: &str,
        secret: Option<(&str, Option<u32>)>,
        outcome: &str,
    ) -> Result<()> {
        self.audit
            .append(
                &caller.identity,
                capability.as_str(),
                operation,
                secret,
                outcome,
            )
            .map_err(|source| VaultError::Audit {
                path: self.config.audit_log.clone(),
                source,
            })
    }

    /// Stores a new version of `id` (version 1 if new); earlier versions
    /// stay readable through [`Vault::get_version`]. Returns the version.
    pub fn set(&mut self, caller: &Caller, id: &str, value: &[u8]) -> Result<u32> {
        validate_secret_id(id)?;
        self.authorize(caller, Capability::SecretWrite, "set", Some((id, None)))?;
        let result = self.set_now(id, value);
        let version = result.as_ref().ok().copied();
        self.record(
            caller,
            Capability::SecretWrite,
            "set",
            Some((id, version)),
            &outcome(&result),
        )?;
        result
    }

    fn set_now(&mut self, id: &str, value: &[u8]) -> Result<u32> {
        let previous = self.load_current(id)?;
        let (version, created_at) = match &previous {
            Some(file) => (file.version + 1, file.created_at.clone()),
            None => (1, crate::now_rfc3339()),
        };
        if let Some(file) = &previous {
            // The old version is durable in history/ before the current file
            // is replaced, so a crash in between loses nothing.
            let dir = self.history_dir(id);
            create_private_dir(&dir).map_err(io("create", dir.clone()))?;
            let path = self.history_path(id, file.version);
            write_atomic(&path, &to_json(file)).map_err(io("write", path))?;
        }
        let file = self.encrypt_secret(
            &self.master,
            self.file.generation,
            id,
            version,
            &created_at,
            value,
        )?;
        let path = self.current_path(id);
        write_atomic(&path, &to_json(&file)).map_err(io("write", path))?;
        Ok(version)
    }

    /// The latest value of `id`; needs [`Capability::SecretRead`] on it.
    pub fn get(&mut self, caller: &Caller, id: &str) -> Result<SecretValue> {
        self.read(caller, id, None)
    }

    /// A given version of `id`; needs [`Capability::SecretRead`] on it.
    pub fn get_version(&mut self, caller: &Caller, id: &str, version: u32) -> Result<SecretValue> {
        self.read(caller, id, Some(version))
    }

    fn read(&mut self, caller: &Caller, id: &str, version: Option<u32>) -> Result<SecretValue> {
        validate_secret_id(id)?;
        self.authorize(caller, Capability::SecretRead, "get", Some((id, version)))?;
        let result = self.read_now(id, version);
        let read_version = result.as_ref().ok().map(|(version, _)| *version);
        self.record(
            caller,
            Capability::SecretRead,
            "get",
            Some((id, read_version.or(version))),
            &outcome(&result),
        )?;
        result.map(|(_, value)| SecretValue(value))
    }

    fn read_now(&self, id: &str, version: Option<u32>) -> Result<(u32, Zeroizing<Vec<u8>>)> {
        let not_found = || VaultError::SecretNotFound {
            id: id.to_owned(),
            version: version.map_or("latest".to_owned(), |version| format!("version {version}")),
        };
        let current = self.load_current(id)?.ok_or_else(not_found)?;
        let (file, path) = match version {
            None => (current, self.current_path(id)),
            Some(version) if version == current.version => (current, self.current_path(id)),
            Some(version) => {
                let path = self.history_path(id, version);
                (read_secret_file(&path, id)?.ok_or_else(not_found)?, path)
            }
        };
        if let Some(wanted) = version {
            if file.version != wanted {
                return Err(VaultError::Corrupt {
                    path,
                    reason: format!("holds version {} instead of {wanted}", file.version),
                });
            }
        }
        let value = self.decrypt_secret(&file, &path)?;
        Ok((file.version, value))
    }

    /// Metadata of the current version of every secret.
    pub fn list(&mut self, caller: &Caller) -> Result<Vec<SecretInfo>> {
        self.authorize(caller, Capability::SecretList, "list", None)?;
        let result = self.list_now();
        self.record(
            caller,
            Capability::SecretList,
            "list",
            None,
            &outcome(&result),
        )?;
        result
    }

    fn list_now(&self) -> Result<Vec<SecretInfo>> {
        let mut infos = Vec::new();
        for id in current_secret_ids(&self.config.secrets_dir())? {
            if let Some(file) = self.load_current(&id)? {
                infos.push(info(&file));
            }
        }
        Ok(infos)
    }

    /// Metadata of every version of `id`, oldest first.
    pub fn history(&mut self, caller: &Caller, id: &str) -> Result<Vec<SecretInfo>> {
        validate_secret_id(id)?;
        self.authorize(caller, Capability::SecretList, "history", Some((id, None)))?;
        let result = self.history_now(id);
        self.record(
            caller,
            Capability::SecretList,
            "history",
            Some((id, None)),
            &outcome(&result),
        )?;
        result
    }

    fn history_now(&self, id: &str) -> Result<Vec<SecretInfo>> {
        let current = self
            .load_current(id)?
            .ok_or_else(|| VaultError::SecretNotFound {
                id: id.to_owned(),
                version: "latest".to_owned(),
            })?;
        let mut infos = Vec::new();
        for version in 1..current.version {
            if let Some(file) = read_secret_file(&self.history_path(id, version), id)? {
                infos.push(info(&file));
            }
        }
        infos.push(info(&current));
        Ok(infos)
    }

    /// Deletes `id` and all its versions.
    pub fn remove(&mut self, caller: &Caller, id: &str) -> Result<()> {
        validate_secret_id(id)?;
        self.authorize(caller, Capability::SecretWrite, "remove", Some((id, None)))?;
        let result = self.remove_now(id);
        self.record(
            caller,
            Capability::SecretWrite,
            "remove",
            Some((id, None)),
            &outcome(&result),
        )?;
        result
    }

    fn remove_now(&self, id: &str) -> Result<()> {
        let path = self.current_path(id);
        match fs::remove_file(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(VaultError::SecretNotFound {
                    id: id.to_owned(),
                    version: "latest".to_owned(),
                })
            }
            other => other.map_err(io("remove", path))?,
        }
        let secrets = self.config.secrets_dir();
        sync_dir(&secrets).map_err(io("sync", secrets))?;
        let history = self.history_dir(id);
        match fs::remove_dir_all(&history) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(io("remove", history)(error))
            }
            _ => Ok(()),
        }
    }

    // ----- rotation -----

    /// Generates a new master key, re-encrypts every version of every
    /// secret under it, verifies each decrypts, then commits; the old key
    /// is archived for 30 days. Any failure rolls back: the vault stays as
    /// it was and everything readable.
    pub fn rotate(&mut self, caller: &Caller) -> Result<()> {
        self.authorize(caller, Capability::VaultAdmin, "rotate", None)?;
        let result = self.rotate_now();
        self.record(
            caller,
            Capability::VaultAdmin,
            "rotate",
            None,
            &outcome(&result),
        )?;
        result
    }

    #[cfg(test)]
    fn fail_point(&self, stage: &'static str) -> Result<()> {
        if self.fail_rotation_at == Some(stage) {
            return Err(VaultError::Injected);
        }
        Ok(())
    }

    #[cfg(not(test))]
    fn fail_point(&self, _stage: &'static str) -> Result<()> {
        Ok(())
    }

    fn rotate_now(&mut self) -> Result<()> {
        let staging = self.config.vault_dir.join(ROTATION_STAGING);
        let rolled_back =
            |stage: &'static str, source: VaultError| VaultError::RotationRolledBack {
                stage,
                source: Box::new(source),
            };
        let discard_staging = |staging: &Path| {
            // Best effort: leftover staging is removed again on the next open.
            let _ = fs::remove_dir_all(staging);
        };
        let files = self
            .all_secret_files()
            .map_err(|error| rolled_back("read", error))?;
        let new_master = Key256::random();
        let new_generation = self.file.generation + 1;
        match self.stage_rotation(&staging, &files, &new_master, new_generation) {
            Ok(()) => {}
            Err(error) => {
                discard_staging(&staging);
                return Err(rolled_back("re-encrypt and verify", error));
            }
        }
        let new_file = match self.rotated_master_file(&new_master, new_generation) {
            Ok(file) => file,
            Err(error) => {
                discard_staging(&staging);
                return Err(rolled_back("seal", error));
            }
        };
        let old_file = self.file.clone();
        if let Err(error) = write_master_file(&self.config, &new_file) {
            discard_staging(&staging);
            return Err(rolled_back("commit", error));
        }
        let secrets = self.config.secrets_dir();
        let swapped = self
            .fail_point("swap")
            .and_then(|()| exchange(&staging, &secrets).map_err(io("swap in", secrets.clone())));
        if let Err(error) = swapped {
            // The old tree is still in place; put the old master file back.
            // Should that fail too, the new file's archive still holds the
            // old key, so every secret stays readable.
            let restored = write_master_file(&self.config, &old_file);
            discard_staging(&staging);
            return Err(match restored {
                Ok(()) => rolled_back("swap", error),
                Err(restore_error) => restore_error,
            });
        }
        // Best effort: staging now holds the old tree, removed again on the next open.
        let _ = fs::remove_dir_all(&staging);
        let old_generation = self.file.generation;
        let old_derived_keys = derived_key_prefix(&self.master);
        let archived_old = (
            old_generation,
            std::mem::replace(&mut self.master, new_master),
        );
        self.archived.retain(|(generation, _)| {
            new_file
                .archive
                .iter()
                .any(|entry| entry.generation == *generation)
        });
        self.archived.push(archived_old);
        self.file = new_file;
        self.cache
            .put(&master_cache_name(new_generation), &self.master)?;
        self.cache.forget(&master_cache_name(old_generation))?;
        self.cache.forget(&old_derived_keys)?;
        Ok(())
    }

    /// Every stored secret file: (path relative to secrets/, parsed file).
    fn all_secret_files(&self) -> Result<Vec<(PathBuf, SecretFile)>> {
        let secrets = self.config.secrets_dir();
        let mut files = Vec::new();
        for id in current_secret_ids(&secrets)? {
            let Some(current) = self.load_current(&id)? else {
                continue;
            };
            for version in 1..current.version {
                let path = self.history_path(&id, version);
                if let Some(file) = read_secret_file(&path, &id)? {
                    let relative = path
                        .strip_prefix(&secrets)
                        .expect("under secrets/")
                        .to_owned();
                    files.push((relative, file));
                }
            }
            files.push((PathBuf::from(format!("{id}.enc")), current));
        }
        Ok(files)
    }

    fn stage_rotation(
        &self,
        staging: &Path,
        files: &[(PathBuf, SecretFile)],
        new_master: &Key256,
        new_generation: u32,
    ) -> Result<()> {
        if staging.exists() {
            fs::remove_dir_all(staging).map_err(io("remove", staging.to_owned()))?;
        }
        create_private_dir(staging).map_err(io("create", staging.to_owned()))?;
        // Two 600,000-round KDFs per version (old key, new key) dominate a
        // rotation, so the re-encryption runs on every core; writing and
        // verifying stay sequential.
        let reencrypted = on_every_core(files, |(relative, old)| {
            let old_path = self.config.secrets_dir().join(relative);
            let value = self.decrypt_secret(old, &old_path)?;
            let mut new = self.encrypt_secret(
                new_master,
                new_generation,
                &old.secret_id,
                old.version,
                &old.created_at,
                &value,
            )?;
            new.updated_at.clone_from(&old.updated_at);
            Ok::<_, VaultError>((value, new))
        });
        for ((relative, old), result) in files.iter().zip(reencrypted) {
            let (value, new) = result?;
            let path = staging.join(relative);
            if let Some(parent) = path.parent() {
                create_private_dir(parent).map_err(io("create", parent.to_owned()))?;
            }
            write_atomic(&path, &to_json(&new)).map_err(io("write", path.clone()))?;
            self.fail_point("verify")?;
            // Verify what is on disk, through the same path a later read takes.
            let written =
                read_secret_file(&path, &old.secret_id)?.ok_or_else(|| VaultError::Corrupt {
                    path: path.clone(),
                    reason: "vanished after writing".to_owned(),
                })?;
            let key = self.secret_key(new_master, &old.secret_id, old.version)?;
            let binding = secret_binding(&old.secret_id, old.version);
            let check = decrypt(&key, binding.as_bytes(), &written.ciphertext).map_err(|_| {
                VaultError::SecretAuthentication {
                    id: old.secret_id.clone(),
                    version: old.version,
                }
            })?;
            if check.as_slice() != value.as_slice() {
                return Err(VaultError::SecretAuthentication {
                    id: old.secret_id.clone(),
                    version: old.version,
                });
            }
        }
        for dir in [staging.to_owned(), staging.join(HISTORY_DIR)] {
            if dir.exists() {
                sync_dir(&dir).map_err(io("sync", dir.clone()))?;
            }
        }
        Ok(())
    }

    fn rotated_master_file(
        &self,
        new_master: &Key256,
        new_generation: u32,
    ) -> Result<MasterKeyFile> {
        let mut file = self.file.clone();
        file.generation = new_generation;
        let scope = WrapScope {
            vault_id: &self.file.vault_id,
            generation: new_generation,
        };
        let path = self.config.master_key_path();
        let salt_of = |wrapped: &WrappedKey| {
            wrapped
                .kdf
                .checked_salt()
                .ok_or_else(|| VaultError::Corrupt {
                    path: path.clone(),
                    reason: "unsupported KDF parameters".to_owned(),
                })
        };
        file.protection = match &self.file.protection {
            MasterProtection::Tpm2(_) => MasterProtection::Tpm2(
                Tpm::connect(&self.config.tcti)?.seal(new_master, &self.config.pcrs)?,
            ),
            MasterProtection::Passphrase(wrapped) => {
                let kek = self
                    .escrow
                    .passphrase_kek
                    .as_ref()
                    .ok_or(VaultError::MasterKeyMismatch)?;
                MasterProtection::Passphrase(wrap_with_kek(
                    scope,
                    "passphrase",
                    kek,
                    &salt_of(wrapped)?,
                    new_master,
                ))
            }
        };
        file.recovery = wrap_with_kek(
            scope,
            "recovery",
            &self.escrow.recovery_kek,
            &salt_of(&self.file.recovery)?,
            new_master,
        );
        file.escrow = self.escrow.seal(scope, new_master);
        let now = now_unix();
        let mut archive: Vec<ArchivedMaster> = Vec::new();
        let kept = self
            .archived
            .iter()
            .filter_map(|(generation, key)| {
                let entry = self
                    .file
                    .archive
                    .iter()
                    .find(|entry| entry.generation == *generation)?;
                (entry.expires_at_unix > now).then_some((
                    *generation,
                    key,
                    entry.archived_at.clone(),
                    entry.expires_at_unix,
                ))
            })
            .chain(std::iter::once((
                self.file.generation,
                &self.master,
                crate::now_rfc3339(),
                now + ARCHIVE_RETENTION_SECONDS,
            )));
        for (generation, key, archived_at, expires_at_unix) in kept {
            archive.push(ArchivedMaster {
                generation,
                archived_at,
                expires_at_unix,
                ciphertext: encrypt(new_master, &file.aad("archive", generation), key.as_bytes()),
            });
        }
        file.archive = archive;
        Ok(file)
    }

    /// Completes or discards a rotation a crash interrupted: a staged tree
    /// already under the committed generation is swapped in, anything else
    /// is dropped. Files are readable in every case, as the master file
    /// archives the previous key.
    fn finish_interrupted_rotation(&mut self) -> Result<()> {
        let staging = self.config.vault_dir.join(ROTATION_STAGING);
        if !staging.exists() {
            return Ok(());
        }
        let committed = current_secret_ids(&staging)?
            .first()
            .map(|id| read_secret_file(&staging.join(format!("{id}.enc")), id))
            .transpose()?
            .flatten()
            .is_some_and(|file| file.generation() == Some(self.file.generation));
        if committed {
            let secrets = self.config.secrets_dir();
            exchange(&staging, &secrets).map_err(io("swap in", secrets))?;
        }
        fs::remove_dir_all(&staging).map_err(io("remove", staging))
    }

    // ----- audit and manifest -----

    /// Verifies the whole audit log's MAC chain.
    pub fn verify_audit_log(&self) -> Result<AuditReport> {
        self.audit
            .verify()
            .map_err(io("read audit log", self.config.audit_log.clone()))
    }

    /// Hashes `relative_paths` under `root` into system-manifest.json.
    pub fn write_system_manifest(
        &mut self,
        caller: &Caller,
        root: &Path,
        relative_paths: &[&Path],
    ) -> Result<SystemManifest> {
        self.authorize(caller, Capability::VaultAdmin, "write-manifest", None)?;
        let result = SystemManifest::build(
            root,
            relative_paths,
            &subkey(&self.escrow.integrity, "manifest"),
        )
        .map_err(|(name, error)| io("hash", root.join(name))(error))
        .and_then(|manifest| {
            let path = self.config.manifest_path();
            write_atomic(
                &path,
                &serde_json::to_vec_pretty(&manifest).expect("manifests serialize"),
            )
            .map_err(io("write", path))?;
            Ok(manifest)
        });
        self.record(
            caller,
            Capability::VaultAdmin,
            "write-manifest",
            None,
            &outcome(&result),
        )?;
        result
    }

    /// Checks system-manifest.json's MAC, then every file it lists under `root`.
    pub fn verify_system_manifest(&self, root: &Path) -> Result<ManifestReport> {
        let path = self.config.manifest_path();
        let bytes = fs::read(&path).map_err(io("read", path.clone()))?;
        let manifest: SystemManifest =
            serde_json::from_slice(&bytes).map_err(|error| VaultError::Corrupt {
                path: path.clone(),
                reason: error.to_string(),
            })?;
        if !manifest.authentic(&subkey(&self.escrow.integrity, "manifest")) {
            return Err(VaultError::ManifestTampered { path });
        }
        Ok(manifest.check(root))
    }
}

/// Keyring name prefix of the keys derived from `master`: a fingerprint of
/// the key itself, so a generation number reused after a rolled-back
/// rotation can never pick up keys derived from the discarded master.
/// `work` applied to every item, the items split across the machine's cores;
/// results in item order.
fn on_every_core<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let chunk = items.len().div_ceil(cores).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(|| part.iter().map(&work).collect::<Vec<R>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a rotation worker panicked"))
            .collect()
    })
}

fn derived_key_prefix(master: &Key256) -> String {
    let fingerprint = crypto::hmac_sha256(master, &[b"clawos-vault-keyring-name"]);
    format!("k{}:", crate::hex(&fingerprint[..8]))
}

fn master_cache_name(generation: u32) -> String {
    format!("master:g{generation}:")
}

fn to_json(file: &SecretFile) -> Vec<u8> {
    serde_json::to_vec_pretty(file).expect("secret files always serialize")
}

fn info(file: &SecretFile) -> SecretInfo {
    SecretInfo {
        id: file.secret_id.clone(),
        version: file.version,
        created_at: file.created_at.clone(),
        updated_at: file.updated_at.clone(),
        key_generation: file.generation().unwrap_or(0),
    }
}

/// Parses a secret file, `None` if absent; checks it belongs to `id`.
fn read_secret_file(path: &Path, id: &str) -> Result<Option<SecretFile>> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io("read", path.to_owned())(error)),
    };
    let file: SecretFile = serde_json::from_slice(&bytes).map_err(|error| VaultError::Corrupt {
        path: path.to_owned(),
        reason: error.to_string(),
    })?;
    if file.secret_id != id {
        return Err(VaultError::Corrupt {
            path: path.to_owned(),
            reason: format!("holds secret `{}`", file.secret_id),
        });
    }
    Ok(Some(file))
}

/// IDs of the `<id>.enc` files directly in `dir`, sorted.
fn current_secret_ids(dir: &Path) -> Result<Vec<String>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io("list", dir.to_owned())(error)),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io("list", dir.to_owned()))?;
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|name| name.strip_suffix(".enc")) else {
            continue;
        };
        if validate_secret_id(id).is_ok() && entry.file_type().is_ok_and(|kind| kind.is_file()) {
            ids.push(id.to_owned());
        }
    }
    ids.sort();
    Ok(ids)
}

// Rotation needs a vault but no TPM: passphrase vaults in the process keyring.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KeyringScope;
    use crate::policy::SecretScope;

    fn passphrase_vault(dir: &Path) -> Vault {
        let config = VaultConfig {
            vault_dir: dir.join("vault"),
            audit_log: dir.join("audit.log"),
            keyring: KeyringScope::Process,
            ..VaultConfig::new()
        };
        let operator = Caller::new("clawctl");
        let mut vault = Vault::init(
            config,
            InitProtection::Passphrase(Passphrase::new("pw".into())),
            &operator,
        )
        .unwrap()
        .vault;
        vault.set_policy(
            AccessPolicy::deny_all()
                .grant("clawctl", Capability::VaultAdmin, SecretScope::All)
                .grant("clawctl", Capability::SecretRead, SecretScope::All)
                .grant("clawctl", Capability::SecretWrite, SecretScope::All),
        );
        vault
    }

    fn assert_readable(vault: &mut Vault, expected: &[(&str, u32, &[u8])]) {
        let operator = Caller::new("clawctl");
        for (id, version, value) in expected {
            assert_eq!(
                vault.get_version(&operator, id, *version).unwrap().expose(),
                *value
            );
        }
    }

    #[test]
    fn rotation_rolls_back_on_injected_failures() {
        let temp = tempfile::tempdir().unwrap();
        let mut vault = passphrase_vault(temp.path());
        let operator = Caller::new("clawctl");
        vault.set(&operator, "alpha", b"one").unwrap();
        vault.set(&operator, "alpha", b"two").unwrap();
        let expected: &[(&str, u32, &[u8])] = &[("alpha", 1, b"one"), ("alpha", 2, b"two")];
        let master_before = fs::read(vault.config.master_key_path()).unwrap();

        for stage in ["verify", "swap"] {
            vault.fail_rotation_at = Some(stage);
            let error = vault.rotate(&operator).unwrap_err();
            assert!(
                matches!(error, VaultError::RotationRolledBack { source, .. } if matches!(*source, VaultError::Injected)),
                "stage {stage}"
            );
            assert_eq!(vault.file.generation, 1);
            assert_eq!(
                fs::read(vault.config.master_key_path()).unwrap(),
                master_before
            );
            assert!(!vault.config.vault_dir.join(ROTATION_STAGING).exists());
            assert_readable(&mut vault, expected);
        }

        vault.fail_rotation_at = None;
        vault.rotate(&operator).unwrap();
        assert_eq!(vault.file.generation, 2);
        assert_readable(&mut vault, expected);
        let reopened_config = vault.config.clone();
        vault.lock().unwrap();
        let mut reopened =
            Vault::unlock_with_passphrase(reopened_config, &Passphrase::new("pw".into())).unwrap();
        reopened.set_policy(AccessPolicy::deny_all().grant(
            "clawctl",
            Capability::SecretRead,
            SecretScope::All,
        ));
        assert_readable(&mut reopened, expected);
    }

    #[test]
    fn an_interrupted_rotation_is_completed_on_open() {
        let temp = tempfile::tempdir().unwrap();
        let mut vault = passphrase_vault(temp.path());
        let operator = Caller::new("clawctl");
        vault.set(&operator, "alpha", b"one").unwrap();
        // Crash after the master file committed, before the swap: the old
        // tree is still in place and the new one staged.
        let staging = vault.config.vault_dir.join(ROTATION_STAGING);
        let files = vault.all_secret_files().unwrap();
        let new_master = Key256::random();
        vault
            .stage_rotation(&staging, &files, &new_master, 2)
            .unwrap();
        let new_file = vault.rotated_master_file(&new_master, 2).unwrap();
        write_master_file(&vault.config, &new_file).unwrap();
        let config = vault.config.clone();
        vault.lock().unwrap();

        let mut reopened =
            Vault::unlock_with_passphrase(config, &Passphrase::new("pw".into())).unwrap();
        assert!(!staging.exists());
        reopened.set_policy(AccessPolicy::deny_all().grant(
            "clawctl",
            Capability::SecretRead,
            SecretScope::All,
        ));
        assert_readable(&mut reopened, &[("alpha", 1, b"one")]);
        let file = reopened.load_current("alpha").unwrap().unwrap();
        assert_eq!(file.generation(), Some(2));
    }
}

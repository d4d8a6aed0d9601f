//! The secrets themselves: [`Vault::set`], [`Vault::get`],
//! [`Vault::get_version`], [`Vault::list`], [`Vault::history`] and
//! [`Vault::remove`], and the files under `secrets/` they read and write:
//! `<id>.enc` for the current version of a secret, `history/<id>/v<n>.enc`
//! for the earlier ones, each version encrypted under its own key.
//!
//! Owns: secret IDs and their validation, the layout of `secrets/`, the
//! per-secret keys (derived from a master key, cached in the kernel
//! keyring), and encrypting and decrypting one secret version.
//!
//! Must not own: which master keys exist and how they are protected (the
//! parent module and `rotation`), or the access policy and audit log,
//! reached only through `authorize` and `record`. It never writes a value
//! in the clear.

use std::fs;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use super::{derived_key_prefix, outcome, Vault};
use crate::crypto::{decrypt, encrypt, pbkdf2_sha256, CryptoError, KdfParams, Key256, CIPHER_ALGORITHM};
use crate::error::{io, Result, VaultError};
use crate::files::{create_private_dir, sync_dir, write_atomic};
use crate::format::{secret_binding, SecretFile, KEY_ID_PREFIX};
use crate::policy::{Caller, VaultCapability};

/// Longest secret ID accepted.
pub const MAX_SECRET_ID_LEN: usize = 128;
/// Directory under secrets/ holding earlier versions.
pub(super) const HISTORY_DIR: &str = "history";

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

/// What [`Vault::check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VaultCheck {
    /// Secrets found.
    pub secrets: u32,
    /// Versions, of all secrets, that decrypted and verified.
    pub versions: u32,
    /// Audit log entries whose MAC chain verified.
    pub audit_entries: u64,
    /// What did not: a version that would not read or decrypt, the first
    /// broken audit entry.
    pub problems: Vec<String>,
}

/// Checks a secret ID against `[a-z0-9][a-z0-9_-]{0,127}`, which keeps it a
/// safe file name and makes `<id>:v<version>` unambiguous.
pub fn validate_secret_id(id: &str) -> Result<()> {
    let valid = !id.is_empty()
        && id.len() <= MAX_SECRET_ID_LEN
        && id.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-' || byte == b'_')
        && id.as_bytes()[0].is_ascii_alphanumeric();
    if valid {
        Ok(())
    } else {
        Err(VaultError::InvalidSecretId { id: id.to_owned() })
    }
}

impl Vault {
    fn current_path(&self, id: &str) -> PathBuf {
        self.config.secrets_dir().join(format!("{id}.enc"))
    }

    fn history_dir(&self, id: &str) -> PathBuf {
        self.config.secrets_dir().join(HISTORY_DIR).join(id)
    }

    pub(super) fn history_path(&self, id: &str, version: u32) -> PathBuf {
        self.history_dir(id).join(format!("v{version}.enc"))
    }

    fn master_for(&self, generation: u32) -> Option<&Key256> {
        if generation == self.file.generation {
            return Some(&self.master);
        }
        self.archived.iter().find(|(archived, _)| *archived == generation).map(|(_, key)| key)
    }

    /// The per-secret key, from the keyring or by PBKDF2 (then cached).
    pub(super) fn secret_key(&self, master: &Key256, id: &str, version: u32) -> Result<Key256> {
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

    pub(super) fn encrypt_secret(
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
            updated_at: fsutil::now_rfc3339(),
            version,
        })
    }

    pub(super) fn decrypt_secret(&self, file: &SecretFile, path: &Path) -> Result<Zeroizing<Vec<u8>>> {
        let corrupt = |reason: &str| VaultError::Corrupt { path: path.to_owned(), reason: reason.to_owned() };
        let binding = secret_binding(&file.secret_id, file.version);
        if file.algorithm != CIPHER_ALGORITHM {
            return Err(corrupt("unsupported algorithm"));
        }
        if file.kdf.checked_salt().as_deref() != Some(binding.as_bytes()) {
            return Err(corrupt("KDF parameters differ from `<secret_id>:v<version>`"));
        }
        let generation = file.generation().ok_or_else(|| corrupt("unknown key_id"))?;
        let master = self
            .master_for(generation)
            .ok_or_else(|| VaultError::UnknownKeyGeneration { id: file.secret_id.clone(), generation })?;
        let key = self.secret_key(master, &file.secret_id, file.version)?;
        decrypt(&key, binding.as_bytes(), &file.ciphertext).map_err(|error| match error {
            CryptoError::Authentication => {
                VaultError::SecretAuthentication { id: file.secret_id.clone(), version: file.version }
            }
            CryptoError::Malformed { field } => corrupt(&format!("malformed {field}")),
        })
    }

    pub(super) fn load_current(&self, id: &str) -> Result<Option<SecretFile>> {
        read_secret_file(&self.current_path(id), id)
    }

    /// Stores a new version of `id` (version 1 if new); earlier versions
    /// stay readable through [`Vault::get_version`]. Returns the version.
    pub fn set(&mut self, caller: &Caller, id: &str, value: &[u8]) -> Result<u32> {
        validate_secret_id(id)?;
        self.authorize(caller, VaultCapability::SecretWrite, "set", Some((id, None)))?;
        let result = self.set_now(id, value);
        let version = result.as_ref().ok().copied();
        self.record(caller, VaultCapability::SecretWrite, "set", Some((id, version)), &outcome(&result))?;
        result
    }

    fn set_now(&mut self, id: &str, value: &[u8]) -> Result<u32> {
        let previous = self.load_current(id)?;
        let (version, created_at) = match &previous {
            Some(file) => (file.version + 1, file.created_at.clone()),
            None => (1, fsutil::now_rfc3339()),
        };
        if let Some(file) = &previous {
            // The old version is durable in history/ before the current file
            // is replaced, so a crash in between loses nothing.
            let dir = self.history_dir(id);
            create_private_dir(&dir).map_err(io("create", dir.clone()))?;
            let path = self.history_path(id, file.version);
            write_atomic(&path, &to_json(file)).map_err(io("write", path))?;
        }
        let file = self.encrypt_secret(&self.master, self.file.generation, id, version, &created_at, value)?;
        let path = self.current_path(id);
        write_atomic(&path, &to_json(&file)).map_err(io("write", path))?;
        Ok(version)
    }

    /// The latest value of `id`; needs [`VaultCapability::SecretRead`] on it.
    pub fn get(&mut self, caller: &Caller, id: &str) -> Result<SecretValue> {
        self.read(caller, id, None)
    }

    /// A given version of `id`; needs [`VaultCapability::SecretRead`] on it, and
    /// for any version but the current one [`VaultCapability::SecretReadHistory`]
    /// too.
    pub fn get_version(&mut self, caller: &Caller, id: &str, version: u32) -> Result<SecretValue> {
        self.read(caller, id, Some(version))
    }

    fn read(&mut self, caller: &Caller, id: &str, version: Option<u32>) -> Result<SecretValue> {
        validate_secret_id(id)?;
        self.authorize(caller, VaultCapability::SecretRead, "get", Some((id, version)))?;
        if let Some(version) = version {
            self.authorize_other_version(caller, id, version)?;
        }
        let result = self.read_now(id, version);
        let read_version = result.as_ref().ok().map(|(version, _)| *version);
        self.record(
            caller,
            VaultCapability::SecretRead,
            "get",
            Some((id, read_version.or(version))),
            &outcome(&result),
        )?;
        result.map(|(_, value)| SecretValue(value))
    }

    /// Whether `caller`, who may read `id`, may read its `version`: the
    /// current one, yes; any other needs [`VaultCapability::SecretReadHistory`],
    /// so that a rotation cuts off a reader whose copy of the old value
    /// leaked (specs/vault/README.md, "Who may do what"). Checked after
    /// `secret-read`, so a caller that may not read the secret at all learns
    /// nothing about its versions.
    fn authorize_other_version(&mut self, caller: &Caller, id: &str, version: u32) -> Result<()> {
        let current = match self.load_current(id)? {
            Some(file) if file.version != version => file.version,
            // The current version, or no secret (read_now says so).
            _ => return Ok(()),
        };
        if self.policy.allows(caller, VaultCapability::SecretReadHistory, Some(id)) {
            return Ok(());
        }
        self.record(caller, VaultCapability::SecretReadHistory, "get", Some((id, Some(version))), "denied")?;
        Err(VaultError::EarlierVersionDenied { caller: caller.identity.clone(), id: id.to_owned(), version, current })
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
        self.authorize(caller, VaultCapability::SecretList, "list", None)?;
        let result = self.list_now();
        self.record(caller, VaultCapability::SecretList, "list", None, &outcome(&result))?;
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
        self.authorize(caller, VaultCapability::SecretList, "history", Some((id, None)))?;
        let result = self.history_now(id);
        self.record(caller, VaultCapability::SecretList, "history", Some((id, None)), &outcome(&result))?;
        result
    }

    fn history_now(&self, id: &str) -> Result<Vec<SecretInfo>> {
        let current = self
            .load_current(id)?
            .ok_or_else(|| VaultError::SecretNotFound { id: id.to_owned(), version: "latest".to_owned() })?;
        let mut infos = Vec::new();
        for version in 1..current.version {
            if let Some(file) = read_secret_file(&self.history_path(id, version), id)? {
                infos.push(info(&file));
            }
        }
        infos.push(info(&current));
        Ok(infos)
    }

    /// Reads and decrypts every version of every secret (each under its
    /// own key, bound to its ID and version, so an altered, swapped or
    /// half-written file fails) and verifies the audit log's MAC chain: what
    /// `clawctl vault check` reports after a crash or a power cut. The
    /// operator's ([`VaultCapability::VaultAdmin`]); no value leaves the vault.
    pub fn check(&mut self, caller: &Caller) -> Result<VaultCheck> {
        self.authorize(caller, VaultCapability::VaultAdmin, "check", None)?;
        let result = self.check_now();
        self.record(caller, VaultCapability::VaultAdmin, "check", None, &outcome(&result))?;
        result
    }

    fn check_now(&self) -> Result<VaultCheck> {
        let mut report = VaultCheck::default();
        for id in current_secret_ids(&self.config.secrets_dir())? {
            report.secrets += 1;
            let versions = match self.history_now(&id) {
                Ok(versions) => versions,
                Err(error) => {
                    report.problems.push(format!("{id}: {error}"));
                    continue;
                }
            };
            for info in versions {
                match self.read_now(&id, Some(info.version)) {
                    Ok(_) => report.versions += 1,
                    Err(error) => report.problems.push(format!("{id} version {}: {error}", info.version)),
                }
            }
        }
        let audit = self.verify_audit_log()?;
        report.audit_entries = audit.verified_entries;
        if let Some((line, why)) = audit.first_broken {
            report.problems.push(format!("audit log line {line}: {why}"));
        }
        Ok(report)
    }

    /// Deletes `id` and all its versions.
    pub fn remove(&mut self, caller: &Caller, id: &str) -> Result<()> {
        validate_secret_id(id)?;
        self.authorize(caller, VaultCapability::SecretWrite, "remove", Some((id, None)))?;
        let result = self.remove_now(id);
        self.record(caller, VaultCapability::SecretWrite, "remove", Some((id, None)), &outcome(&result))?;
        result
    }

    fn remove_now(&self, id: &str) -> Result<()> {
        let path = self.current_path(id);
        match fs::remove_file(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(VaultError::SecretNotFound { id: id.to_owned(), version: "latest".to_owned() })
            }
            other => other.map_err(io("remove", path))?,
        }
        let secrets = self.config.secrets_dir();
        sync_dir(&secrets).map_err(io("sync", secrets))?;
        let history = self.history_dir(id);
        match fs::remove_dir_all(&history) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(io("remove", history)(error)),
            _ => Ok(()),
        }
    }
}

pub(super) fn to_json(file: &SecretFile) -> Vec<u8> {
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
pub(super) fn read_secret_file(path: &Path, id: &str) -> Result<Option<SecretFile>> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io("read", path.to_owned())(error)),
    };
    let file: SecretFile = serde_json::from_slice(&bytes)
        .map_err(|error| VaultError::Corrupt { path: path.to_owned(), reason: error.to_string() })?;
    if file.secret_id != id {
        return Err(VaultError::Corrupt {
            path: path.to_owned(),
            reason: format!("holds secret `{}`", file.secret_id),
        });
    }
    Ok(Some(file))
}

/// IDs of the `<id>.enc` files directly in `dir`, sorted.
pub(super) fn current_secret_ids(dir: &Path) -> Result<Vec<String>> {
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

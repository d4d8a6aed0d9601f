//! Changing how the master key is held: [`Vault::rotate`] (a new master
//! key, every version of every secret re-encrypted under it) and
//! [`Vault::reseal`] (the same key, sealed again to the PCRs as they are
//! now) and [`Vault::prepare_update`] (the same key, sealed to this boot
//! and to the next version's).
//!
//! A rotation re-encrypts into a staging tree beside `secrets/`, verifies
//! what it wrote, commits the new master-key file (which archives the old
//! key for [`ARCHIVE_RETENTION_SECONDS`]), then swaps the trees. A failure
//! rolls back, leaving the vault as it was; a crash is completed or
//! discarded the next time the vault is opened.
//!
//! Owns: the staging tree, the archive of earlier master keys in the
//! master-key file, and the rotation's fault-injection points for tests.
//!
//! Must not own: the secret file format or the per-secret keys
//! (`secrets`), or opening and unsealing the vault (the parent module).

use std::fs;
use std::path::{Path, PathBuf};

use super::secrets::{current_secret_ids, read_secret_file, to_json, HISTORY_DIR};
use super::{derived_key_prefix, master_cache_name, now_unix, outcome, wrap_with_kek, write_master_file, Vault};
use crate::crypto::{decrypt, encrypt, Key256};
use crate::error::{io, Result, VaultError};
use crate::files::{create_private_dir, exchange, sync_dir, write_atomic};
use crate::format::{
    secret_binding, ArchivedMaster, MasterKeyFile, MasterProtection, SecretFile, WrapScope, WrappedKey,
};
use crate::policy::{Caller, VaultCapability};
use crate::tpm::Tpm;

/// How long an old master key stays in the archive after a rotation.
pub const ARCHIVE_RETENTION_SECONDS: i64 = 30 * 24 * 60 * 60;
/// Where rotation builds the re-encrypted tree before swapping it in.
const ROTATION_STAGING: &str = ".secrets.rotating";

impl Vault {
    /// Seals the current master key to the PCRs as they are now
    /// ([`VaultConfig::pcrs`](crate::VaultConfig::pcrs)), after an update
    /// and [`Vault::recover`].
    pub fn reseal(&mut self, caller: &Caller) -> Result<()> {
        self.authorize(caller, VaultCapability::VaultAdmin, "reseal", None)?;
        let result = self.reseal_now();
        self.record(caller, VaultCapability::VaultAdmin, "reseal", None, &outcome(&result))?;
        result
    }

    /// Seals the master key so it unseals both in this boot and in a boot
    /// where PCR 4 holds `pcr4` and the other sealed PCRs are as now: the
    /// boot of an update's UKI, whose PCR 4 `clawctl update apply` computed
    /// (specs/update/README.md, "The TPM across an update"). The boots the
    /// key unsealed in before this one are dropped.
    pub fn prepare_update(&mut self, caller: &Caller, pcr4: [u8; 32]) -> Result<()> {
        self.authorize(caller, VaultCapability::VaultAdmin, "prepare-update", None)?;
        let result = self.prepare_update_now(pcr4);
        self.record(caller, VaultCapability::VaultAdmin, "prepare-update", None, &outcome(&result))?;
        result
    }

    fn prepare_update_now(&mut self, pcr4: [u8; 32]) -> Result<()> {
        let MasterProtection::Tpm2(sealed) = &self.file.protection else {
            return Err(VaultError::NotTpmProtected);
        };
        let mut tpm = Tpm::connect(&self.config.tcti)?;
        let next = tpm.branch_with(sealed, 4, pcr4)?;
        let sealed = tpm.seal(&self.master, &sealed.pcrs.clone(), &[next])?;
        let mut file = self.file.clone();
        file.protection = MasterProtection::Tpm2(sealed);
        write_master_file(&self.config, &file)?;
        self.file = file;
        Ok(())
    }

    fn reseal_now(&mut self) -> Result<()> {
        if !matches!(self.file.protection, MasterProtection::Tpm2(_)) {
            return Err(VaultError::NotTpmProtected);
        }
        let sealed = Tpm::connect(&self.config.tcti)?.seal(&self.master, &self.config.pcrs, &[])?;
        let mut file = self.file.clone();
        file.protection = MasterProtection::Tpm2(sealed);
        write_master_file(&self.config, &file)?;
        self.file = file;
        Ok(())
    }

    /// Generates a new master key, re-encrypts every version of every
    /// secret under it, verifies each decrypts, then commits; the old key
    /// is archived for 30 days. Any failure rolls back: the vault stays as
    /// it was and everything readable.
    pub fn rotate(&mut self, caller: &Caller) -> Result<()> {
        self.authorize(caller, VaultCapability::VaultAdmin, "rotate", None)?;
        let result = self.rotate_now();
        self.record(caller, VaultCapability::VaultAdmin, "rotate", None, &outcome(&result))?;
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
        let rolled_back = |stage: &'static str, source: VaultError| VaultError::RotationRolledBack {
            stage,
            source: Box::new(source),
        };
        let discard_staging = |staging: &Path| {
            // Best effort: leftover staging is removed again on the next open.
            let _ = fs::remove_dir_all(staging);
        };
        let files = self.all_secret_files().map_err(|error| rolled_back("read", error))?;
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
        let swapped =
            self.fail_point("swap").and_then(|()| exchange(&staging, &secrets).map_err(io("swap in", secrets.clone())));
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
        let archived_old = (old_generation, std::mem::replace(&mut self.master, new_master));
        self.archived.retain(|(generation, _)| new_file.archive.iter().any(|entry| entry.generation == *generation));
        self.archived.push(archived_old);
        self.file = new_file;
        self.cache.put(&master_cache_name(new_generation), &self.master)?;
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
                    let relative = path.strip_prefix(&secrets).expect("under secrets/").to_owned();
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
            let mut new =
                self.encrypt_secret(new_master, new_generation, &old.secret_id, old.version, &old.created_at, &value)?;
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
            let written = read_secret_file(&path, &old.secret_id)?.ok_or_else(|| VaultError::Corrupt {
                path: path.clone(),
                reason: "vanished after writing".to_owned(),
            })?;
            let key = self.secret_key(new_master, &old.secret_id, old.version)?;
            let binding = secret_binding(&old.secret_id, old.version);
            let check = decrypt(&key, binding.as_bytes(), &written.ciphertext)
                .map_err(|_| VaultError::SecretAuthentication { id: old.secret_id.clone(), version: old.version })?;
            if check.as_slice() != value.as_slice() {
                return Err(VaultError::SecretAuthentication { id: old.secret_id.clone(), version: old.version });
            }
        }
        for dir in [staging.to_owned(), staging.join(HISTORY_DIR)] {
            if dir.exists() {
                sync_dir(&dir).map_err(io("sync", dir.clone()))?;
            }
        }
        Ok(())
    }

    fn rotated_master_file(&self, new_master: &Key256, new_generation: u32) -> Result<MasterKeyFile> {
        let mut file = self.file.clone();
        file.generation = new_generation;
        let scope = WrapScope { vault_id: &self.file.vault_id, generation: new_generation };
        let path = self.config.master_key_path();
        let salt_of = |wrapped: &WrappedKey| {
            wrapped.kdf.checked_salt().ok_or_else(|| VaultError::Corrupt {
                path: path.clone(),
                reason: "unsupported KDF parameters".to_owned(),
            })
        };
        file.protection = match &self.file.protection {
            // The new key unseals wherever the old one did (a pending
            // update's branch included).
            MasterProtection::Tpm2(sealed) => MasterProtection::Tpm2(Tpm::connect(&self.config.tcti)?.seal(
                new_master,
                &sealed.pcrs,
                &Tpm::branches(sealed)?,
            )?),
            MasterProtection::Passphrase(wrapped) => {
                let kek = self.escrow.passphrase_kek.as_ref().ok_or(VaultError::MasterKeyMismatch)?;
                MasterProtection::Passphrase(wrap_with_kek(scope, "passphrase", kek, &salt_of(wrapped)?, new_master))
            }
        };
        file.recovery =
            wrap_with_kek(scope, "recovery", &self.escrow.recovery_kek, &salt_of(&self.file.recovery)?, new_master);
        file.escrow = self.escrow.seal(scope, new_master);
        let now = now_unix();
        let mut archive: Vec<ArchivedMaster> = Vec::new();
        let kept = self
            .archived
            .iter()
            .filter_map(|(generation, key)| {
                let entry = self.file.archive.iter().find(|entry| entry.generation == *generation)?;
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
                fsutil::now_rfc3339(),
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
    pub(super) fn finish_interrupted_rotation(&mut self) -> Result<()> {
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
}

/// `work` applied to every item, the items split across the machine's cores;
/// results in item order.
fn on_every_core<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let chunk = items.len().div_ceil(cores).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> =
            items.chunks(chunk).map(|part| scope.spawn(|| part.iter().map(&work).collect::<Vec<R>>())).collect();
        workers.into_iter().flat_map(|worker| worker.join().expect("a rotation worker panicked")).collect()
    })
}

// Rotation needs a vault but no TPM: passphrase vaults in the process keyring.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{KeyringScope, VaultConfig};
    use crate::keys::Passphrase;
    use crate::policy::{AccessPolicy, SecretScope};
    use crate::vault::InitProtection;

    fn passphrase_vault(dir: &Path) -> Vault {
        let config = VaultConfig {
            vault_dir: dir.join("vault"),
            audit_log: dir.join("audit.log"),
            keyring: KeyringScope::Process,
            ..VaultConfig::new()
        };
        let operator = Caller::new("clawctl");
        let mut vault =
            Vault::init(config, InitProtection::Passphrase(Passphrase::new("pw".into())), &operator).unwrap().vault;
        vault.set_policy(
            AccessPolicy::deny_all()
                .grant("clawctl", VaultCapability::VaultAdmin, SecretScope::All)
                .grant("clawctl", VaultCapability::SecretRead, SecretScope::All)
                .grant("clawctl", VaultCapability::SecretReadHistory, SecretScope::All)
                .grant("clawctl", VaultCapability::SecretWrite, SecretScope::All),
        );
        vault
    }

    fn assert_readable(vault: &mut Vault, expected: &[(&str, u32, &[u8])]) {
        let operator = Caller::new("clawctl");
        for (id, version, value) in expected {
            assert_eq!(vault.get_version(&operator, id, *version).unwrap().expose(), *value);
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
            assert_eq!(fs::read(vault.config.master_key_path()).unwrap(), master_before);
            assert!(!vault.config.vault_dir.join(ROTATION_STAGING).exists());
            assert_readable(&mut vault, expected);
        }

        vault.fail_rotation_at = None;
        vault.rotate(&operator).unwrap();
        assert_eq!(vault.file.generation, 2);
        assert_readable(&mut vault, expected);
        let reopened_config = vault.config.clone();
        vault.lock().unwrap();
        let mut reopened = Vault::unlock_with_passphrase(reopened_config, &Passphrase::new("pw".into())).unwrap();
        reopened.set_policy(
            AccessPolicy::deny_all().grant("clawctl", VaultCapability::SecretRead, SecretScope::All).grant(
                "clawctl",
                VaultCapability::SecretReadHistory,
                SecretScope::All,
            ),
        );
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
        vault.stage_rotation(&staging, &files, &new_master, 2).unwrap();
        let new_file = vault.rotated_master_file(&new_master, 2).unwrap();
        write_master_file(&vault.config, &new_file).unwrap();
        let config = vault.config.clone();
        vault.lock().unwrap();

        let mut reopened = Vault::unlock_with_passphrase(config, &Passphrase::new("pw".into())).unwrap();
        assert!(!staging.exists());
        reopened.set_policy(AccessPolicy::deny_all().grant("clawctl", VaultCapability::SecretRead, SecretScope::All));
        assert_readable(&mut reopened, &[("alpha", 1, b"one")]);
        let file = reopened.load_current("alpha").unwrap().unwrap();
        assert_eq!(file.generation(), Some(2));
    }
}

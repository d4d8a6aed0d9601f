//! Where the vault keeps its files, how it reaches the TPM, which PCRs it
//! seals to and which kernel keyring caches its keys.

use std::path::PathBuf;

/// Default vault directory (specs/vault/README.md, "Files").
pub const DEFAULT_VAULT_DIR: &str = "/clawfs/vault";
/// Default TPM access: the kernel's resource manager, which flushes
/// transient objects when a connection closes.
pub const DEFAULT_TCTI: &str = "device:/dev/tpmrm0";
/// Environment variable that overrides [`DEFAULT_TCTI`], e.g.
/// `swtpm:host=127.0.0.1,port=2321` for a software TPM.
pub const TCTI_ENV: &str = "CLAWOS_VAULT_TCTI";
/// Default audit log, under /var/log/clawos like ClawFS's own
/// (specs/clawfs/README.md, "Audit log"), in a directory of its own so the
/// hosting service can own it (`LogsDirectory=clawos/vault`) without owning
/// every component's logs.
pub const DEFAULT_AUDIT_LOG: &str = "/var/log/clawos/vault/audit.log";
/// PCRs (SHA-256 bank) the master key is sealed to by default. See
/// specs/vault/README.md for the reasoning:
/// - 4: firmware's measurement of every boot application, i.e. the UKI's PE
///   image (kernel, embedded command line with the root hash, initrd). It is
///   taken before the measured code runs, so another OS cannot replay it.
/// - 12: systemd-stub's measurement of a command line that overrides the
///   embedded one, and of credentials and add-ons: changes PCR 4 cannot see.
///
/// Firmware updates touch PCRs 0-2 and leave these alone; a firmware update
/// that changes how boot applications are logged changes PCR 4, which then
/// needs the recovery key and a reseal.
pub const DEFAULT_PCRS: &[u8] = &[4, 12];
/// Highest PCR index a PC client TPM has.
pub const MAX_PCR: u8 = 23;

/// Which kernel keyring caches the unsealed master key and derived per-secret keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyringScope {
    /// The user keyring of the vault's uid: lives until the uid's last
    /// process exits, which for root is the next reboot. Keys are readable
    /// only by a possessor.
    User,
    /// The process keyring: gone when the process exits. For tests and for
    /// one-shot tools that must leave nothing behind.
    Process,
}

/// Everything a [`crate::Vault`] needs to know about its environment.
/// Build with [`VaultConfig::new`] and adjust the public fields.
#[derive(Debug, Clone)]
pub struct VaultConfig {
    /// Vault directory; default [`DEFAULT_VAULT_DIR`].
    pub vault_dir: PathBuf,
    /// TCTI configuration string understood by tss-esapi (`device:...`,
    /// `swtpm:host=...,port=...`, `tabrmd:`); default `$CLAWOS_VAULT_TCTI`
    /// or [`DEFAULT_TCTI`].
    pub tcti: String,
    /// PCR indices (SHA-256 bank) the master key is sealed to at init,
    /// reseal and rotation; default [`DEFAULT_PCRS`]. An existing sealed
    /// blob records its own set, which is the one unsealing checks.
    pub pcrs: Vec<u8>,
    /// Hash-chained audit log; default [`DEFAULT_AUDIT_LOG`].
    pub audit_log: PathBuf,
    /// Keyring for cached keys; default [`KeyringScope::User`].
    pub keyring: KeyringScope,
}

impl VaultConfig {
    /// The production defaults, with the TCTI taken from `$CLAWOS_VAULT_TCTI` when set.
    pub fn new() -> Self {
        VaultConfig {
            vault_dir: PathBuf::from(DEFAULT_VAULT_DIR),
            tcti: std::env::var(TCTI_ENV).unwrap_or_else(|_| DEFAULT_TCTI.to_owned()),
            pcrs: DEFAULT_PCRS.to_vec(),
            audit_log: PathBuf::from(DEFAULT_AUDIT_LOG),
            keyring: KeyringScope::User,
        }
    }

    pub(crate) fn master_key_path(&self) -> PathBuf {
        self.vault_dir.join("master-key.enc")
    }

    pub(crate) fn secrets_dir(&self) -> PathBuf {
        self.vault_dir.join("secrets")
    }

    pub(crate) fn manifest_path(&self) -> PathBuf {
        self.vault_dir.join("system-manifest.json")
    }
}

impl Default for VaultConfig {
    fn default() -> Self {
        Self::new()
    }
}

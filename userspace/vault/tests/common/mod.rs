//! Test fixtures: a real swtpm per test, and vault configurations in temporary directories.

mod swtpm;

use std::path::{Path, PathBuf};

use vault::{AccessPolicy, Caller, KeyringScope, SecretScope, VaultCapability, VaultConfig};

pub use swtpm::Swtpm;

/// A configuration under `dir` using the process keyring and `tcti`.
pub fn config(dir: &Path, tcti: &str) -> VaultConfig {
    VaultConfig {
        vault_dir: dir.join("vault"),
        tcti: tcti.to_owned(),
        pcrs: vec![4, 12],
        audit_log: dir.join("log/vault-audit.log"),
        keyring: KeyringScope::Process,
    }
}

/// A TCTI with no TPM behind it (nothing listens on port 1).
pub const NO_TPM: &str = "swtpm:host=127.0.0.1,port=1";

pub fn operator() -> Caller {
    Caller::new("clawctl")
}

/// The operator may do everything.
pub fn operator_policy() -> AccessPolicy {
    VaultCapability::ALL
        .into_iter()
        .fold(AccessPolicy::deny_all(), |policy, capability| policy.grant("clawctl", capability, SecretScope::All))
}

/// Every regular file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

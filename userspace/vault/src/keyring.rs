//! The kernel keyring cache of the unsealed master key and the derived
//! per-secret keys, so that unsealing and the 600,000-round KDF happen once
//! per boot (or per process, with [`KeyringScope::Process`]).
//!
//! Keys are `user` keys readable only by a possessor. The spec names
//! `logon` keys, but the kernel refuses to return a `logon` key's payload
//! to user space (`keyctl_read` fails with EOPNOTSUPP), so they cannot serve
//! as a cache for a user-space vault. Descriptions carry the vault's random
//! ID and key generation, so vaults and master-key generations never share
//! an entry.

use linux_keyutils::{KeyError, KeyPermissionsBuilder, KeyRing, KeyRingIdentifier, Permission};
use zeroize::Zeroizing;

use crate::config::KeyringScope;
use crate::crypto::{Key256, KEY_LEN};

/// A keyring operation failed.
#[derive(Debug, thiserror::Error)]
#[error("kernel keyring {operation} failed: {source}")]
pub struct KeyringError {
    /// Which operation.
    pub operation: &'static str,
    /// What the kernel reported.
    #[source]
    pub source: KeyError,
}

fn failed(operation: &'static str) -> impl FnOnce(KeyError) -> KeyringError {
    move |source| KeyringError { operation, source }
}

/// The cache for one vault.
pub(crate) struct KeyCache {
    ring: KeyRing,
    prefix: String,
}

impl KeyCache {
    pub(crate) fn new(scope: KeyringScope, vault_id: &str) -> Result<Self, KeyringError> {
        let id = match scope {
            KeyringScope::User => KeyRingIdentifier::User,
            KeyringScope::Process => KeyRingIdentifier::Process,
        };
        let ring = KeyRing::from_special_id(id, true).map_err(failed("open keyring"))?;
        Ok(KeyCache { ring, prefix: format!("clawos-vault:{vault_id}:") })
    }

    fn description(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The cached key `name`, if present.
    pub(crate) fn get(&self, name: &str) -> Option<Key256> {
        let key = self.ring.search(&self.description(name)).ok()?;
        let mut buffer = Zeroizing::new([0u8; KEY_LEN]);
        match key.read(&mut *buffer) {
            Ok(KEY_LEN) => Key256::from_slice(&buffer[..]),
            _ => None,
        }
    }

    /// Caches `key` under `name`, readable only by possessors.
    pub(crate) fn put(&self, name: &str, key: &Key256) -> Result<(), KeyringError> {
        let entry = self.ring.add_key(&self.description(name), key.as_bytes()).map_err(failed("add_key"))?;
        let possessor_only = KeyPermissionsBuilder::builder().posessor(Permission::ALL).user(Permission::VIEW).build();
        entry.set_perms(possessor_only).map_err(failed("setperm"))
    }

    /// Invalidates every cached key of this vault whose name starts with `name_prefix`.
    pub(crate) fn forget(&self, name_prefix: &str) -> Result<(), KeyringError> {
        let wanted = self.description(name_prefix);
        let links = self.ring.get_links(4096).map_err(failed("read keyring"))?;
        for key in links.iter().filter_map(|link| link.as_key()) {
            let Ok(metadata) = key.metadata() else {
                continue;
            };
            if metadata.get_description().starts_with(&wanted) {
                key.invalidate().map_err(failed("invalidate"))?;
            }
        }
        Ok(())
    }
}

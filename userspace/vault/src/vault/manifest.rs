//! The vault's side of `system-manifest.json`:
//! [`Vault::write_system_manifest`] and [`Vault::verify_system_manifest`],
//! which need the unlocked vault for the manifest's MAC key (derived from
//! the escrowed integrity key).
//!
//! Owns: authorizing and auditing the write, and where the file goes.
//!
//! Must not own: the manifest's format, hashing and checking, which are
//! `crate::manifest`'s.

use std::fs;
use std::path::Path;

use super::{outcome, Vault};
use crate::crypto::subkey;
use crate::error::{io, Result, VaultError};
use crate::files::write_atomic;
use crate::manifest::{ManifestReport, SystemManifest};
use crate::policy::{Caller, VaultCapability};

impl Vault {
    /// Hashes `relative_paths` under `root` into system-manifest.json.
    pub fn write_system_manifest(
        &mut self,
        caller: &Caller,
        root: &Path,
        relative_paths: &[&Path],
    ) -> Result<SystemManifest> {
        self.authorize(caller, VaultCapability::VaultAdmin, "write-manifest", None)?;
        let result = SystemManifest::build(root, relative_paths, &subkey(&self.escrow.integrity, "manifest"))
            .map_err(|(name, error)| io("hash", root.join(name))(error))
            .and_then(|manifest| {
                let path = self.config.manifest_path();
                write_atomic(&path, &serde_json::to_vec_pretty(&manifest).expect("manifests serialize"))
                    .map_err(io("write", path))?;
                Ok(manifest)
            });
        self.record(caller, VaultCapability::VaultAdmin, "write-manifest", None, &outcome(&result))?;
        result
    }

    /// Checks system-manifest.json's MAC, then every file it lists under `root`.
    pub fn verify_system_manifest(&self, root: &Path) -> Result<ManifestReport> {
        let path = self.config.manifest_path();
        let bytes = fs::read(&path).map_err(io("read", path.clone()))?;
        let manifest: SystemManifest = serde_json::from_slice(&bytes)
            .map_err(|error| VaultError::Corrupt { path: path.clone(), reason: error.to_string() })?;
        if !manifest.authentic(&subkey(&self.escrow.integrity, "manifest")) {
            return Err(VaultError::ManifestTampered { path });
        }
        Ok(manifest.check(root))
    }
}

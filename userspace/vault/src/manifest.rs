//! system-manifest.json: SHA-256 of the system files, MACed with a key only
//! the unlocked vault holds, and its verification against a root directory.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::crypto::{hmac_sha256, Key256};

/// `format` of system-manifest.json.
pub(crate) const MANIFEST_FORMAT: &str = "clawos-system-manifest/1";

/// The manifest as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemManifest {
    /// Always `clawos-system-manifest/1`.
    pub format: String,
    /// RFC 3339 time of creation.
    pub created_at: String,
    /// Path relative to the root → lowercase hex SHA-256.
    pub files: BTreeMap<String, String>,
    /// HMAC-SHA256 (hex) over the fields above.
    pub mac: String,
}

/// Result of checking the files under a root against the manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestReport {
    /// Files whose hash matches.
    pub matched: Vec<String>,
    /// Files whose hash differs.
    pub mismatched: Vec<String>,
    /// Files listed but absent or unreadable.
    pub missing: Vec<String>,
}

impl ManifestReport {
    /// True when every listed file is present and unchanged.
    pub fn is_clean(&self) -> bool {
        self.mismatched.is_empty() && self.missing.is_empty()
    }
}

fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = [0u8; 64 * 1024];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(fsutil::hex(&hasher.finalize()))
}

/// Refuses absolute paths and `..`, so a manifest never reaches outside its root.
pub(crate) fn is_contained(relative: &Path) -> bool {
    relative.components().all(|component| matches!(component, Component::Normal(_)))
        && relative.components().next().is_some()
}

impl SystemManifest {
    fn compute_mac(&self, key: &Key256) -> String {
        let files = serde_json::to_vec(&self.files).expect("maps of strings serialize");
        fsutil::hex(&hmac_sha256(key, &[self.format.as_bytes(), self.created_at.as_bytes(), &files]))
    }

    /// Hashes `relative_paths` under `root`.
    pub(crate) fn build(root: &Path, relative_paths: &[&Path], key: &Key256) -> Result<Self, (String, io::Error)> {
        let mut files = BTreeMap::new();
        for relative in relative_paths {
            let name = relative.to_string_lossy().into_owned();
            if !is_contained(relative) {
                return Err((name, io::Error::new(io::ErrorKind::InvalidInput, "not a relative path under root")));
            }
            let digest = sha256_file(&root.join(relative)).map_err(|error| (name.clone(), error))?;
            files.insert(name, digest);
        }
        let mut manifest = SystemManifest {
            format: MANIFEST_FORMAT.to_owned(),
            created_at: fsutil::now_rfc3339(),
            files,
            mac: String::new(),
        };
        manifest.mac = manifest.compute_mac(key);
        Ok(manifest)
    }

    /// Whether the MAC verifies under `key`.
    pub(crate) fn authentic(&self, key: &Key256) -> bool {
        self.format == MANIFEST_FORMAT && self.mac == self.compute_mac(key)
    }

    /// Rehashes every listed file under `root`.
    pub(crate) fn check(&self, root: &Path) -> ManifestReport {
        let mut report = ManifestReport::default();
        for (name, expected) in &self.files {
            let relative = Path::new(name);
            match is_contained(relative).then(|| sha256_file(&root.join(relative))) {
                Some(Ok(actual)) if &actual == expected => report.matched.push(name.clone()),
                Some(Ok(_)) => report.mismatched.push(name.clone()),
                _ => report.missing.push(name.clone()),
            }
        }
        report
    }
}

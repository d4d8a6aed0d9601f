//! Tools installed at run time, kept in the ClawFS tools directory
//! (`/clawfs/tools`, specs/toolhost/README.md, "Installed tools"):
//! `binaries/<id>-v<version>.wasm`, `definitions/tool-<id>.json` and
//! `registry.json` listing them all. The image's own tools live read-only in
//! `/usr/lib/clawos/tools`; this store only ever holds what an operator
//! installed.
//!
//! Every file is written to a temporary name, fsynced and renamed, and the
//! registry is written last: a crash mid-install leaves a stray binary, never
//! a registry entry without its file. A binary is immutable once written (its
//! name carries the version): installing other bytes under the same name is
//! refused.

use std::path::{Path, PathBuf};

use clawfs::names;
use sha2::{Digest, Sha256};

use crate::definition::{format_hash, DefinitionError, Registry, ToolDefinition, ValidTool};

/// Why an install or removal was refused.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    /// The uploaded bytes are not the ones the definition pins.
    #[error("tool {tool_id}: wasm hash mismatch: the definition says {expected}, the file has {actual}")]
    HashMismatch { tool_id: String, expected: String, actual: String },
    /// `binaries/<id>-v<version>.wasm` exists with other bytes.
    #[error("{0} already exists with different contents; install a new version instead")]
    Immutable(PathBuf),
    #[error("tool {0:?} is not installed")]
    NotInstalled(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.to_owned(), source }
}

/// The installed tools in one directory.
#[derive(Debug)]
pub struct ToolStore {
    dir: PathBuf,
    registry: Registry,
}

impl ToolStore {
    /// Opens `dir` (usually `/clawfs/tools`); a missing `registry.json` is
    /// an empty store, an invalid one is an error.
    pub fn open(dir: &Path) -> Result<ToolStore, StoreError> {
        let registry_path = dir.join("registry.json");
        let registry = if registry_path.exists() { Registry::load(&registry_path)? } else { Registry::default() };
        Ok(ToolStore { dir: dir.to_owned(), registry })
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Checks `definition` and `wasm` and writes the binary. The tool is not
    /// listed until [`ToolStore::commit`]; the caller loads it in between, so
    /// a tool the host refuses never enters the registry.
    pub fn stage(&self, mut definition: ToolDefinition, wasm: &[u8]) -> Result<ValidTool, StoreError> {
        definition.wasm_path =
            Path::new("binaries").join(names::tool_binary_file(&definition.tool_id, &definition.version));
        let tool = definition.validate(&self.dir)?;
        let digest: [u8; 32] = Sha256::digest(wasm).into();
        if digest != tool.wasm_sha256 {
            return Err(StoreError::HashMismatch {
                tool_id: tool.tool_id().to_owned(),
                expected: tool.definition.wasm_hash.clone(),
                actual: format_hash(&digest),
            });
        }
        match std::fs::read(&tool.wasm_path) {
            Ok(existing) if existing == wasm => {}
            Ok(_) => return Err(StoreError::Immutable(tool.wasm_path.clone())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => write_atomic(&tool.wasm_path, wasm)?,
            Err(e) => return Err(io(&tool.wasm_path)(e)),
        }
        Ok(tool)
    }

    /// Lists a staged tool: its definition file, then the registry. Replaces
    /// an earlier version of the same tool (its binary stays, immutable, for
    /// whoever pinned it).
    pub fn commit(&mut self, tool: ValidTool) -> Result<(), StoreError> {
        let definition_path = self.dir.join("definitions").join(names::tool_definition_file(tool.tool_id()));
        let text = serde_json::to_string_pretty(&tool.definition).expect("definitions serialize") + "\n";
        write_atomic(&definition_path, text.as_bytes())?;
        let mut registry = self.registry.clone();
        registry.remove(tool.tool_id());
        registry.insert(tool)?;
        write_atomic(&self.dir.join("registry.json"), registry.to_json().as_bytes())?;
        self.registry = registry;
        Ok(())
    }

    /// Unlists `tool_id` (registry first) and deletes its definition and binary.
    pub fn remove(&mut self, tool_id: &str) -> Result<ValidTool, StoreError> {
        let mut registry = self.registry.clone();
        let tool = registry.remove(tool_id).ok_or_else(|| StoreError::NotInstalled(tool_id.to_owned()))?;
        write_atomic(&self.dir.join("registry.json"), registry.to_json().as_bytes())?;
        self.registry = registry;
        for path in [self.dir.join("definitions").join(names::tool_definition_file(tool_id)), tool.wasm_path.clone()] {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&path)(e)),
                _ => {}
            }
        }
        Ok(tool)
    }
}

/// `fsutil::write_atomic` (temporary file, fsync, rename, fsync of the
/// directory) into a directory created if missing; a new file gets mode
/// 0666 less the umask.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().expect("store paths have a directory");
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    fsutil::write_atomic(path, bytes, 0o666).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definition(id: &str, version: &str, wasm: &[u8]) -> ToolDefinition {
        ToolDefinition {
            tool_id: id.into(),
            version: version.into(),
            wasm_path: PathBuf::from("ignored.wasm"),
            wasm_hash: format_hash(&Sha256::digest(wasm).into()),
            wit_interface: crate::definition::TOOL_WIT_INTERFACE.into(),
            capabilities: vec!["network:outbound:api.example.com".into()],
            memory_limit_mb: 16,
            cpu_quota_percent: 10,
            timeout_seconds: 5,
            author: None,
            license: None,
            description: None,
        }
    }

    #[test]
    fn install_lists_reopens_and_removes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ToolStore::open(dir.path()).unwrap();
        let tool = store.stage(definition("web-fetch", "1.0.0", b"wasm one"), b"wasm one").unwrap();
        assert_eq!(tool.wasm_path, dir.path().join("binaries/web-fetch-v1.0.0.wasm"));
        assert!(ToolStore::open(dir.path()).unwrap().registry().get("web-fetch").is_none(), "staged is not listed");
        store.commit(tool).unwrap();
        assert!(dir.path().join("definitions/tool-web-fetch.json").exists());
        let reopened = ToolStore::open(dir.path()).unwrap();
        assert_eq!(
            reopened.registry().get("web-fetch").unwrap().definition.capabilities,
            ["network:outbound:api.example.com"]
        );

        // A new version replaces the listing; the old binary is never rewritten.
        let v2 = store.stage(definition("web-fetch", "1.1.0", b"wasm two"), b"wasm two").unwrap();
        store.commit(v2).unwrap();
        assert_eq!(
            ToolStore::open(dir.path()).unwrap().registry().get("web-fetch").unwrap().definition.version,
            "1.1.0"
        );
        assert!(matches!(
            store.stage(definition("web-fetch", "1.0.0", b"other"), b"other"),
            Err(StoreError::Immutable(_))
        ));

        store.remove("web-fetch").unwrap();
        assert!(ToolStore::open(dir.path()).unwrap().registry().get("web-fetch").is_none());
        assert!(!dir.path().join("binaries/web-fetch-v1.1.0.wasm").exists());
        assert!(matches!(store.remove("web-fetch"), Err(StoreError::NotInstalled(_))));
    }

    #[test]
    fn bytes_must_match_the_pinned_hash() {
        let dir = tempfile::tempdir().unwrap();
        let store = ToolStore::open(dir.path()).unwrap();
        let error =
            store.stage(definition("web-fetch", "1.0.0", b"what was reviewed"), b"what was uploaded").unwrap_err();
        assert!(matches!(error, StoreError::HashMismatch { .. }), "{error}");
        assert!(!dir.path().join("binaries/web-fetch-v1.0.0.wasm").exists(), "nothing written");
    }
}

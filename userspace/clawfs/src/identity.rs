//! Identity files (specs/clawfs/README.md, "Identity files"):
//! `agents/<agent>/identity.json`, an agent's persistent state, learned
//! patterns and history.
//!
//! Every read verifies the file: JSON, the checksum (SHA-256 over the
//! canonical JSON without the `checksum` field), the schema, and that
//! it belongs to the agent. A file that fails is reported as
//! [`Error::IdentityCorrupt`] naming the newest backup that verifies, which
//! [`Clawfs::restore_identity`] puts back. Updates are atomic (temporary
//! file, fsync, rename, fsync of the directory) and first copy the current
//! good file to `vault/identity-backups/<agent>/`, keeping the newest
//! [`IDENTITY_BACKUPS_KEPT`]. Files of an older schema version are migrated
//! on read and written back; a newer version than this build knows is
//! refused rather than rewritten.

use std::fs;
use std::path::{Path, PathBuf};

use fsutil::now_rfc3339;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::fsio::{dir_entries, write_json_atomic};
use crate::layout::{agents_dir, identity_backups_dir, IDENTITY_FILE};
use crate::names::validate_agent_name;
use crate::namespace::{identity_checksum, initial_identity};
use crate::workspace::Clawfs;

/// The schema version this build writes.
pub const IDENTITY_VERSION: u64 = 1;
/// Backups kept per agent; older ones are removed after each update.
pub const IDENTITY_BACKUPS_KEPT: usize = 10;

/// The identity schema (specs/clawfs/README.md, "Identity files"). Unknown
/// top-level fields are kept as they are (a newer ClawOS of the same version
/// may add some); missing or mistyped known fields are corruption.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Identity {
    pub agent_id: String,
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
    pub state: State,
    pub memory: Memory,
    pub history: History,
    pub performance: Performance,
    pub checksum: String,
    /// Top-level fields this build does not know, kept as they are through
    /// reads and updates.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct State {
    pub current_phase: Option<String>,
    pub current_task: Option<String>,
    pub last_checkpoint: Option<String>,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Memory {
    pub learned_patterns: Vec<LearnedPattern>,
    pub heuristics: Vec<Heuristic>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LearnedPattern {
    pub pattern_id: String,
    pub description: String,
    pub confidence: f64,
    pub learned_at: String,
    pub usage_count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Heuristic {
    pub heuristic_id: String,
    pub rule: String,
    pub accuracy: f64,
    pub last_validated: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct History {
    pub completed_tasks: Vec<String>,
    pub failed_tasks: Vec<String>,
    pub total_executions: u64,
    pub success_rate: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Performance {
    pub avg_execution_time_ms: u64,
    pub peak_memory_mb: u64,
    pub last_benchmark: Option<String>,
}

/// One kept copy of an earlier identity file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityBackup {
    /// File name under `vault/identity-backups/<agent>/`.
    pub name: String,
    pub path: PathBuf,
}

impl Clawfs {
    fn identity_path(&self, agent: &str) -> PathBuf {
        agents_dir(&self.config().root).join(agent).join(IDENTITY_FILE)
    }

    fn identity_backup_dir(&self, agent: &str) -> PathBuf {
        identity_backups_dir(&self.config().root, agent)
    }

    /// Reads and verifies `agent`'s identity file, migrating (and rewriting)
    /// a file of an older schema version.
    pub fn read_identity(&self, agent: &str) -> Result<Identity> {
        validate_agent_name(agent)?;
        let path = self.identity_path(agent);
        let value = match verified(&path, agent) {
            Ok(value) => value,
            Err(reason) => {
                return Err(Error::IdentityCorrupt {
                    agent: agent.to_owned(),
                    reason,
                    backup: self.newest_good_backup(agent).map(|backup| backup.name),
                })
            }
        };
        let version = value["version"].as_u64().unwrap_or(0);
        if version > IDENTITY_VERSION {
            return Err(Error::IdentityTooNew { agent: agent.to_owned(), version, supported: IDENTITY_VERSION });
        }
        if version < IDENTITY_VERSION {
            let migrated = migrate(value.clone(), version);
            self.backup_identity(agent, &value)?;
            write_json_atomic(&path, &migrated)?;
            tracing::info!(agent, from = version, to = IDENTITY_VERSION, "identity file migrated");
            return typed(&migrated).map_err(|reason| Error::IdentityCorrupt {
                agent: agent.to_owned(),
                reason,
                backup: None,
            });
        }
        typed(&value).map_err(|reason| Error::IdentityCorrupt { agent: agent.to_owned(), reason, backup: None })
    }

    /// Changes `agent`'s identity with `change`, then writes it atomically
    /// with a new `updated_at` and checksum, after backing up the current
    /// file. A corrupt current file is not overwritten: restore a backup first.
    pub fn update_identity(&self, agent: &str, change: impl FnOnce(&mut Identity)) -> Result<Identity> {
        let mut identity = self.read_identity(agent)?;
        let current = serde_json::to_value(&identity).map_err(|source| self.json_error(agent, source))?;
        change(&mut identity);
        identity.agent_id = agent.to_owned();
        identity.version = IDENTITY_VERSION;
        identity.updated_at = now_rfc3339();
        let mut value = serde_json::to_value(&identity).map_err(|source| self.json_error(agent, source))?;
        let checksum = identity_checksum(&value);
        value["checksum"] = Value::String(checksum.clone());
        identity.checksum = checksum;
        self.backup_identity(agent, &current)?;
        write_json_atomic(&self.identity_path(agent), &value)?;
        Ok(identity)
    }

    /// The kept backups of `agent`'s identity, oldest first.
    pub fn identity_backups(&self, agent: &str) -> Result<Vec<IdentityBackup>> {
        validate_agent_name(agent)?;
        let mut backups: Vec<IdentityBackup> = dir_entries(&self.identity_backup_dir(agent))?
            .into_iter()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                (name.starts_with("identity-") && name.ends_with(".json"))
                    .then(|| IdentityBackup { path: entry.path(), name })
            })
            .collect();
        backups.sort_by_key(|backup| backup_sequence(&backup.name));
        Ok(backups)
    }

    /// Puts the backup `name` back as `agent`'s identity file, after
    /// verifying it. The file it replaces is not backed up: it is the one
    /// that failed verification, or the operator chose to go back.
    pub fn restore_identity(&self, agent: &str, name: &str) -> Result<Identity> {
        let backup = self
            .identity_backups(agent)?
            .into_iter()
            .find(|backup| backup.name == name)
            .ok_or_else(|| Error::NoSuchIdentityBackup { agent: agent.to_owned(), name: name.to_owned() })?;
        let value = verified(&backup.path, agent).map_err(|reason| Error::IdentityCorrupt {
            agent: agent.to_owned(),
            reason: format!("backup {name}: {reason}"),
            backup: None,
        })?;
        write_json_atomic(&self.identity_path(agent), &value)?;
        self.read_identity(agent)
    }

    /// Writes a fresh identity file for `agent`, as the namespace creates it.
    pub fn create_identity(&self, agent: &str) -> Result<Identity> {
        validate_agent_name(agent)?;
        write_json_atomic(&self.identity_path(agent), &initial_identity(agent))?;
        self.read_identity(agent)
    }

    fn newest_good_backup(&self, agent: &str) -> Option<IdentityBackup> {
        let backups = self.identity_backups(agent).ok()?;
        backups.into_iter().rev().find(|backup| verified(&backup.path, agent).is_ok())
    }

    fn backup_identity(&self, agent: &str, current: &Value) -> Result<()> {
        let dir = self.identity_backup_dir(agent);
        fs::create_dir_all(&dir).map_err(|source| Error::Io {
            operation: "create directory",
            path: dir.clone(),
            source,
        })?;
        // identity-<sequence>-<UTC time>.json: the zero-padded sequence
        // orders them (several may fall in one second), the time informs.
        let sequence = self.identity_backups(agent)?.last().map_or(0, |newest| backup_sequence(&newest.name) + 1);
        let stamp: String = now_rfc3339().chars().filter(char::is_ascii_alphanumeric).collect();
        write_json_atomic(&dir.join(format!("identity-{sequence:08}-{stamp}.json")), current)?;
        let backups = self.identity_backups(agent)?;
        for old in backups.iter().take(backups.len().saturating_sub(IDENTITY_BACKUPS_KEPT)) {
            fs::remove_file(&old.path).map_err(|source| Error::Io {
                operation: "remove",
                path: old.path.clone(),
                source,
            })?;
        }
        Ok(())
    }

    fn json_error(&self, agent: &str, source: serde_json::Error) -> Error {
        Error::Json { path: self.identity_path(agent), source }
    }
}

/// The sequence number of a backup's file name (0 for a foreign name).
fn backup_sequence(name: &str) -> u64 {
    name.strip_prefix("identity-").and_then(|rest| rest.split('-').next()).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// The file at `path` as JSON, if it parses, carries a matching checksum,
/// follows the schema of its version and names `agent`; else why not.
fn verified(path: &Path, agent: &str) -> std::result::Result<Value, String> {
    let bytes = fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|error| format!("not JSON: {error}"))?;
    let stored = value.get("checksum").and_then(Value::as_str).ok_or("no checksum field")?;
    let computed = identity_checksum(&value);
    if stored != computed {
        return Err(format!("checksum mismatch: the file says {stored}, its content hashes to {computed}"));
    }
    if value.get("agent_id").and_then(Value::as_str) != Some(agent) {
        return Err(format!("agent_id is {}, not {agent}", value.get("agent_id").unwrap_or(&Value::Null)));
    }
    if value.get("version").and_then(Value::as_u64).unwrap_or(0) == IDENTITY_VERSION {
        typed(&value)?;
    }
    Ok(value)
}

fn typed(value: &Value) -> std::result::Result<Identity, String> {
    serde_json::from_value(value.clone()).map_err(|error| format!("does not follow the identity schema: {error}"))
}

/// Brings `value` from schema `version` up to [`IDENTITY_VERSION`] and
/// re-checksums it. Version 0 is a file from before versioning: any of the
/// schema's sections may be missing and are filled with their initial values.
fn migrate(mut value: Value, version: u64) -> Value {
    if version == 0 {
        let agent = value["agent_id"].as_str().unwrap_or_default().to_owned();
        let initial = initial_identity(&agent);
        for section in ["created_at", "updated_at", "state", "memory", "history", "performance"] {
            if value.get(section).is_none() {
                value[section] = initial[section].clone();
            }
        }
    }
    value["version"] = Value::from(IDENTITY_VERSION);
    let checksum = identity_checksum(&value);
    value["checksum"] = Value::String(checksum);
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;
    use serde_json::json;

    fn instance_with_agent(agent: &str) -> (tempfile::TempDir, Clawfs) {
        let dir = tempfile::tempdir().unwrap();
        let clawfs = Clawfs::new(Config::new(dir.path())).unwrap();
        fs::create_dir_all(dir.path().join("agents").join(agent)).unwrap();
        clawfs.create_identity(agent).unwrap();
        (dir, clawfs)
    }

    fn write_raw(clawfs: &Clawfs, agent: &str, value: &Value) {
        fs::write(clawfs.identity_path(agent), serde_json::to_vec(value).unwrap()).unwrap();
    }

    #[test]
    fn an_update_is_checksummed_backed_up_and_read_back() {
        let (_dir, clawfs) = instance_with_agent("kernel-engine");
        let before = clawfs.read_identity("kernel-engine").unwrap();
        let after = clawfs
            .update_identity("kernel-engine", |identity| {
                identity.history.total_executions += 1;
                identity.history.completed_tasks.push("A-01".into());
            })
            .unwrap();
        assert_eq!(clawfs.read_identity("kernel-engine").unwrap(), after);
        assert_eq!(after.history.total_executions, 1);
        assert_ne!(after.checksum, before.checksum);
        let backups = clawfs.identity_backups("kernel-engine").unwrap();
        assert_eq!(backups.len(), 1);
        let kept: Identity = serde_json::from_slice(&fs::read(&backups[0].path).unwrap()).unwrap();
        assert_eq!(kept, before, "the backup is the file as it was before the update");
        assert!(!clawfs.identity_path("kernel-engine").with_extension("json.tmp").exists());
    }

    #[test]
    fn a_corrupt_file_is_reported_with_the_last_good_backup_which_restores_it() {
        let (_dir, clawfs) = instance_with_agent("fs-engine");
        clawfs.update_identity("fs-engine", |identity| identity.history.total_executions = 7).unwrap();
        let good = clawfs.update_identity("fs-engine", |identity| identity.history.total_executions = 8).unwrap();
        // One changed byte of content, checksum left as it was.
        let path = clawfs.identity_path("fs-engine");
        let text = fs::read_to_string(&path).unwrap().replace("\"total_executions\": 8", "\"total_executions\": 9");
        fs::write(&path, text).unwrap();
        let Err(Error::IdentityCorrupt { reason, backup: Some(backup), .. }) = clawfs.read_identity("fs-engine") else {
            panic!("a tampered file was not reported with a backup");
        };
        assert!(reason.contains("checksum mismatch"), "{reason}");
        assert_eq!(backup, clawfs.identity_backups("fs-engine").unwrap().last().unwrap().name);
        // The update refuses to build on the corrupt file.
        assert!(matches!(clawfs.update_identity("fs-engine", |_| {}), Err(Error::IdentityCorrupt { .. })));
        let restored = clawfs.restore_identity("fs-engine", &backup).unwrap();
        assert_eq!(restored.history.total_executions, 7, "the newest backup is the state before the last update");
        assert_ne!(restored, good);
    }

    #[test]
    fn schema_and_ownership_violations_are_corruption_even_with_a_valid_checksum() {
        let (_dir, clawfs) = instance_with_agent("security-agent");
        let mut value = serde_json::to_value(clawfs.read_identity("security-agent").unwrap()).unwrap();
        value["history"]["total_executions"] = json!("many");
        value["checksum"] = json!(identity_checksum(&value));
        write_raw(&clawfs, "security-agent", &value);
        let error = clawfs.read_identity("security-agent").unwrap_err().to_string();
        assert!(error.contains("schema"), "{error}");

        let mut other = initial_identity("ebpf-agent");
        other["checksum"] = json!(identity_checksum(&other));
        write_raw(&clawfs, "security-agent", &other);
        let error = clawfs.read_identity("security-agent").unwrap_err().to_string();
        assert!(error.contains("agent_id"), "{error}");

        fs::write(clawfs.identity_path("security-agent"), b"{ torn").unwrap();
        let error = clawfs.read_identity("security-agent").unwrap_err().to_string();
        assert!(error.contains("not JSON"), "{error}");
    }

    #[test]
    fn a_version_0_file_is_migrated_on_read_and_the_original_kept() {
        let (_dir, clawfs) = instance_with_agent("build-engine");
        let mut old = json!({
            "agent_id": "build-engine",
            "state": { "current_phase": "P2", "current_task": null, "last_checkpoint": null, "status": "in_progress" },
            "history": { "completed_tasks": ["B-01"], "failed_tasks": [], "total_executions": 3, "success_rate": 1.0 },
        });
        old["checksum"] = json!(identity_checksum(&old));
        write_raw(&clawfs, "build-engine", &old);
        let migrated = clawfs.read_identity("build-engine").unwrap();
        assert_eq!(migrated.version, IDENTITY_VERSION);
        assert_eq!(migrated.history.completed_tasks, ["B-01"], "content survives the migration");
        assert_eq!(migrated.performance.peak_memory_mb, 0, "missing sections get their initial values");
        let on_disk: Value = serde_json::from_slice(&fs::read(clawfs.identity_path("build-engine")).unwrap()).unwrap();
        assert_eq!(on_disk["version"], json!(IDENTITY_VERSION), "the migrated file is written back");
        let backups = clawfs.identity_backups("build-engine").unwrap();
        let kept: Value = serde_json::from_slice(&fs::read(&backups.last().unwrap().path).unwrap()).unwrap();
        assert_eq!(kept, old, "the pre-migration file is backed up");
    }

    #[test]
    fn unknown_top_level_fields_survive_an_update() {
        let (_dir, clawfs) = instance_with_agent("core-dev-agent");
        let mut value = serde_json::to_value(clawfs.read_identity("core-dev-agent").unwrap()).unwrap();
        value["preferences"] = json!({ "editor": "helix" });
        value["checksum"] = json!(identity_checksum(&value));
        write_raw(&clawfs, "core-dev-agent", &value);
        clawfs.update_identity("core-dev-agent", |identity| identity.history.total_executions = 1).unwrap();
        let on_disk: Value =
            serde_json::from_slice(&fs::read(clawfs.identity_path("core-dev-agent")).unwrap()).unwrap();
        assert_eq!(on_disk["preferences"], json!({ "editor": "helix" }));
        assert_eq!(clawfs.read_identity("core-dev-agent").unwrap().history.total_executions, 1);
    }

    #[test]
    fn a_newer_version_is_refused_not_rewritten() {
        let (_dir, clawfs) = instance_with_agent("observability");
        let mut newer = serde_json::to_value(clawfs.read_identity("observability").unwrap()).unwrap();
        newer["version"] = json!(IDENTITY_VERSION + 1);
        newer["checksum"] = json!(identity_checksum(&newer));
        write_raw(&clawfs, "observability", &newer);
        assert!(matches!(clawfs.read_identity("observability"), Err(Error::IdentityTooNew { .. })));
        let on_disk: Value = serde_json::from_slice(&fs::read(clawfs.identity_path("observability")).unwrap()).unwrap();
        assert_eq!(on_disk, newer);
    }

    #[test]
    fn only_the_newest_backups_are_kept() {
        let (_dir, clawfs) = instance_with_agent("wasm-agent");
        for n in 0..IDENTITY_BACKUPS_KEPT as u64 + 5 {
            clawfs.update_identity("wasm-agent", |identity| identity.history.total_executions = n).unwrap();
        }
        let backups = clawfs.identity_backups("wasm-agent").unwrap();
        assert_eq!(backups.len(), IDENTITY_BACKUPS_KEPT);
        let newest: Identity = serde_json::from_slice(&fs::read(&backups.last().unwrap().path).unwrap()).unwrap();
        assert_eq!(newest.history.total_executions, IDENTITY_BACKUPS_KEPT as u64 + 3);
    }
}

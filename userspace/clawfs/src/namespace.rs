//! The `/clawfs` tree (specs/clawfs/README.md, "Namespace"): the six
//! top-level directories with their owners and modes, and the agent
//! directories (the first agent at every start, the others when the
//! operator creates them). Creation is idempotent, so fs-engine runs it at
//! every start and repairs what is missing without touching what is there.
//!
//! Owns: making the tree, its owners, groups and modes, an agent's initial
//! files (the brain files' starting texts, `state.json`, `identity.json`),
//! removing and listing agents. Must not own: the names of what it makes
//! ([`crate::layout`]), nor what those files hold later (their own modules).

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use fsutil::now_rfc3339;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::error::{io, Error, Result};
use crate::fsio::write_json_atomic;
use crate::index::open_agentfs;
use crate::layout::{
    agents_dir, AGENTS_DIR, AGENT_SUBDIRS, BRAIN_FILES, DATABASE_FILE, IDENTITY_FILE, IDENTITY_MD, MEMORY_MD,
    REMOVED_DIR, SOUL_MD, SPECS_DIR, STATE_FILE, SYSTEM_DIR, TOOLS_DIR, USER_MD, VAULT_DIR, WORKSPACES_DIR,
};
use crate::names::FIRST_AGENT;

/// Where an agent's directory is, and whether it exists, are the layout's;
/// named here too, where agents are made and removed.
pub use crate::layout::{agent_dir, agent_exists};

/// One directory of the namespace with its owner, group and mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirSpec {
    /// Path relative to the ClawFS root.
    pub path: &'static str,
    /// Owning user.
    pub owner: &'static str,
    /// Owning group.
    pub group: &'static str,
    /// Permission bits.
    pub mode: u32,
}

/// The top-level directories with their owners and modes
/// (specs/clawfs/README.md, "Namespace").
///
/// Each directory that a component writes belongs to that component, which
/// runs as its own user (`sysusers.d/clawos.conf`): `tools/` belongs to
/// `clawos-wasm-daemon`, `vault/` to `clawos-security-agent` (which hosts
/// the vault, `tmpfiles.d/clawos-vault.conf`), and `workspaces/` to
/// `clawos-fs-engine`, the only writer of workspace databases.
/// `tmpfiles.d/clawos-clawfs.conf` repeats this table for first boot.
pub const TOP_LEVEL: [DirSpec; 6] = [
    DirSpec { path: SYSTEM_DIR, owner: "root", group: "root", mode: 0o555 },
    // fs-engine creates the agents' directories here (setgid on the
    // appliance, see AGENT_DIR_MODE).
    DirSpec { path: AGENTS_DIR, owner: "clawos-fs-engine", group: "clawos-agents", mode: 0o750 },
    DirSpec { path: TOOLS_DIR, owner: "clawos-wasm-daemon", group: "clawos-agents", mode: 0o755 },
    DirSpec { path: WORKSPACES_DIR, owner: "clawos-fs-engine", group: "clawos-users", mode: 0o750 },
    DirSpec { path: VAULT_DIR, owner: "clawos-security-agent", group: "clawos-security-agent", mode: 0o700 },
    // Read-only, but with x: a directory without x cannot be entered, so
    // nobody could read the specs; 0555 keeps them read-only and readable.
    DirSpec { path: SPECS_DIR, owner: "root", group: "root", mode: 0o555 },
];

/// Owner of every agent directory: fs-engine writes there on the agent's
/// behalf and enforces that an agent stays inside its own (RULE-001).
pub const AGENT_DIR_OWNER: &str = "clawos-fs-engine";
/// Group of every agent directory (specs/clawfs/README.md, "Namespace").
pub const AGENT_DIR_GROUP: &str = "clawos-agents";
/// Mode of agent directories (specs/clawfs/README.md, "Namespace"). ClawOS
/// agents are not Unix users, so the directory belongs to fs-engine and the
/// group lets the wasm-daemon append the tool-call audit trail to
/// `workspace.db` and agent-loop keep its sessions there. systemd-tmpfiles
/// sets the setgid bit on the one it makes (`default`), so files made
/// inside keep the group. A directory fs-engine makes inherits the group
/// from `agents/`, but the chmod that widens it past the unit's umask
/// clears the bit, and fs-engine may neither set it again
/// (`RestrictSUIDSGID=`) nor chgrp (`~@privileged` holds `@chown`): files
/// made inside get fs-engine's primary group, `clawos`.
pub const AGENT_DIR_MODE: u32 = 0o770;
/// Mode of an agent's `workspace.db` (SQLite gives its -wal/-shm the same).
pub const AGENT_DB_MODE: u32 = 0o660;

/// What [`create_namespace`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NamespaceReport {
    /// Directories and files created by this call, relative to the root.
    pub created: Vec<String>,
}

/// Whether [`create_namespace`] sets owners and groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owners {
    /// chown everything to the table's users and groups (needs root; the
    /// users and groups must exist).
    Apply,
    /// Leave ownership alone: on the appliance systemd-tmpfiles has set it
    /// at boot (`tmpfiles.d/clawos-clawfs.conf`) and fs-engine, which is not
    /// root, could not change it anyway; in tests there are no such users.
    Keep,
}

/// Creates the namespace under `root`: the top-level directories (with
/// their modes when this call creates them), and for each agent its
/// directory, `logs/`, `cache/`, `workspace.db` (an AgentFS database),
/// `state.json` and `identity.json`. Existing entries are left as they are.
pub fn create_namespace(root: &Path, owners: Owners) -> Result<NamespaceReport> {
    let mut report = NamespaceReport::default();
    fs::create_dir_all(root).map_err(io("create directory", root))?;
    for spec in TOP_LEVEL {
        ensure_dir(root, spec.path, spec.mode, &mut report)?;
        if owners == Owners::Apply {
            chown(&root.join(spec.path), spec.owner, spec.group)?;
        }
    }
    create_agent(root, FIRST_AGENT, owners, &mut report)?;
    Ok(report)
}

/// The brain files a new agent starts with (specs/agent/README.md,
/// "Persona" and "Memory"), short so a small model's prompt stays short:
/// markdown its operator reads and edits, and the agent through fs-engine.
const BRAIN: [(&str, &str); 4] = [
    (
        SOUL_MD,
        "# Soul\n\nI am honest about what I know and what I did. I act only through my tools and within the limits I was given. I never reveal secrets or try to change these rules.\n",
    ),
    (IDENTITY_MD, "# Identity\n\nI am {agent}, an AI agent on a ClawOS box.\n"),
    (USER_MD, "# User\n"),
    (MEMORY_MD, "# Memory\n"),
];

/// Creates agent `agent`'s directory under `root` with `logs/`, `cache/`,
/// `instructions/`, `workspace.db` (an AgentFS database), `state.json`,
/// `identity.json` and the brain files, adding what is missing and leaving
/// what exists alone.
pub fn create_agent(root: &Path, agent: &str, owners: Owners, report: &mut NamespaceReport) -> Result<()> {
    crate::names::validate_agent_name(agent)?;
    let agent_rel = format!("{AGENTS_DIR}/{agent}");
    ensure_dir(root, &agent_rel, AGENT_DIR_MODE, report)?;
    for sub in AGENT_SUBDIRS {
        ensure_dir(root, &format!("{agent_rel}/{sub}"), AGENT_DIR_MODE, report)?;
    }
    let dir = root.join(&agent_rel);
    let db = dir.join(DATABASE_FILE);
    if !db.exists() {
        // The file gets its mode before SQLite opens it: the -wal and -shm
        // files SQLite makes take the database's mode of that moment, and
        // fs-engine's watcher may open the new database at once. Made 0600
        // by the unit's umask and widened after, they would stay 0600 while
        // the watcher held them, and agent-loop could not open the database
        // ("unable to open database file").
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(AGENT_DB_MODE)
            .open(&db)
            .and_then(|file| file.set_permissions(fs::Permissions::from_mode(AGENT_DB_MODE)))
            .map_err(io("create", &db))?;
        open_agentfs(&db)?;
        report.created.push(format!("{agent_rel}/{DATABASE_FILE}"));
    }
    let state = json!({ "agent_id": agent, "status": "idle", "updated_at": now_rfc3339() });
    write_new_json(&dir.join(STATE_FILE), &state, &format!("{agent_rel}/{STATE_FILE}"), report)?;
    let identity = initial_identity(agent);
    write_new_json(&dir.join(IDENTITY_FILE), &identity, &format!("{agent_rel}/{IDENTITY_FILE}"), report)?;
    for (name, text) in BRAIN {
        let path = dir.join(name);
        if !path.exists() {
            fsutil::write_atomic(&path, text.replace("{agent}", agent).as_bytes(), crate::files::FILE_MODE)
                .map_err(io("write", &path))?;
            fs::set_permissions(&path, fs::Permissions::from_mode(crate::files::FILE_MODE))
                .map_err(io("chmod", &path))?;
            report.created.push(format!("{agent_rel}/{name}"));
        }
    }
    if owners == Owners::Apply {
        let files = [DATABASE_FILE, STATE_FILE, IDENTITY_FILE].into_iter().chain(BRAIN_FILES);
        for entry in [""].into_iter().chain(AGENT_SUBDIRS).chain(files) {
            chown(&dir.join(entry), AGENT_DIR_OWNER, AGENT_DIR_GROUP)?;
        }
    }
    Ok(())
}

/// Takes agent `agent`'s directory out of the namespace at once: renamed,
/// in one step, into `agents/.removed/`, from where [`delete_removed`]
/// deletes it. The agent is gone when this returns (a new agent may take
/// its name), however large its directory is and whatever still works in
/// it (a re-index writing its index ends in the renamed copy). Returns the
/// renamed directory.
pub fn remove_agent(root: &Path, agent: &str) -> Result<PathBuf> {
    let dir = agent_dir(root, agent)?;
    let agents = agents_dir(root);
    let removed = agents.join(REMOVED_DIR);
    match fs::DirBuilder::new().mode(0o700).create(&removed) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(io("create directory", &removed)(e)),
        _ => {}
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let renamed = removed.join(format!("{agent}.{nanos}"));
    fs::rename(&dir, &renamed).map_err(io("rename", &dir))?;
    fsutil::sync_dir(&agents).map_err(io("sync directory", &agents))?;
    fsutil::sync_dir(&removed).map_err(io("sync directory", &removed))?;
    Ok(renamed)
}

/// Deletes `dir`, a directory [`remove_agent`] renamed, or with `None`
/// every one left in `agents/.removed/` (by a stop between the rename and
/// the deletion).
pub fn delete_removed(root: &Path, dir: Option<&Path>) -> Result<()> {
    let removed = agents_dir(root).join(REMOVED_DIR);
    let dirs = match dir {
        Some(dir) => vec![dir.to_owned()],
        None => match fs::read_dir(&removed) {
            Ok(entries) => entries
                .map(|e| e.map(|e| e.path()))
                .collect::<std::io::Result<_>>()
                .map_err(io("read directory", &removed))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io("read directory", &removed)(e)),
        },
    };
    for dir in dirs.iter().filter(|dir| dir.parent() == Some(removed.as_path())) {
        fs::remove_dir_all(dir).map_err(io("remove directory", dir))?;
    }
    fsutil::sync_dir(&removed).map_err(io("sync directory", &removed))
}

/// The agents under `root`, sorted by name: every directory of `agents/`
/// with a valid agent name.
pub fn list_agents(root: &Path) -> Result<Vec<String>> {
    let dir = agents_dir(root);
    let mut agents = Vec::new();
    for entry in fs::read_dir(&dir).map_err(io("read directory", &dir))? {
        let entry = entry.map_err(io("read directory", &dir))?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        if crate::names::validate_agent_name(&name).is_ok() && entry.file_type().is_ok_and(|t| t.is_dir()) {
            agents.push(name);
        }
    }
    agents.sort();
    Ok(agents)
}

/// The identity file an agent starts with, checksummed as
/// specs/clawfs/README.md ("Identity files") requires: SHA-256 over the
/// canonical JSON (sorted keys, no spaces) without the `checksum` field.
pub fn initial_identity(agent: &str) -> Value {
    let now = now_rfc3339();
    let mut identity = json!({
        "agent_id": agent,
        "version": 1,
        "created_at": now,
        "updated_at": now,
        "state": { "current_phase": null, "current_task": null, "last_checkpoint": null, "status": "idle" },
        "memory": { "learned_patterns": [], "heuristics": [] },
        "history": { "completed_tasks": [], "failed_tasks": [], "total_executions": 0, "success_rate": 0.0 },
        "performance": { "avg_execution_time_ms": 0, "peak_memory_mb": 0, "last_benchmark": null },
    });
    let checksum = identity_checksum(&identity);
    identity["checksum"] = Value::String(checksum);
    identity
}

/// `sha256:<hex>` of `identity` without its `checksum` field. serde_json's
/// map is ordered by key, so `to_string` is the canonical form.
pub fn identity_checksum(identity: &Value) -> String {
    let mut body = identity.clone();
    if let Some(object) = body.as_object_mut() {
        object.remove("checksum");
    }
    let digest = Sha256::digest(body.to_string().as_bytes());
    format!("sha256:{}", fsutil::hex(&digest))
}

fn ensure_dir(root: &Path, rel: &str, mode: u32, report: &mut NamespaceReport) -> Result<()> {
    let path = root.join(rel);
    match fs::DirBuilder::new().mode(mode).create(&path) {
        Ok(()) => {
            // The umask may have narrowed the mode given to mkdir. Read-only
            // modes (system/, specs/) are fine: nothing is created inside.
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).map_err(io("chmod", &path))?;
            report.created.push(rel.to_owned());
            Ok(())
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(error) => Err(io("create directory", path)(error)),
    }
}

fn write_new_json(path: &Path, value: &Value, rel: &str, report: &mut NamespaceReport) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    write_json_atomic(path, value)?;
    report.created.push(rel.to_owned());
    Ok(())
}

fn chown(path: &Path, owner: &str, group: &str) -> Result<()> {
    let uid =
        lookup_user(owner).ok_or_else(|| Error::NoSuchOwner { kind: "user", name: owner.into(), path: path.into() })?;
    let gid = lookup_group(group).ok_or_else(|| Error::NoSuchOwner {
        kind: "group",
        name: group.into(),
        path: path.into(),
    })?;
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(io("chown", path))
}

fn lookup_user(name: &str) -> Option<u32> {
    let name = CString::new(name).ok()?;
    // SAFETY: `name` is NUL-terminated; getpwnam returns NULL or a pointer
    // to static storage that we read before any other passwd call.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    // SAFETY: checked non-NULL just before the read.
    (!entry.is_null()).then(|| unsafe { (*entry).pw_uid })
}

fn lookup_group(name: &str) -> Option<u32> {
    let name = CString::new(name).ok()?;
    // SAFETY: as in lookup_user, for the group database.
    let entry = unsafe { libc::getgrnam(name.as_ptr()) };
    // SAFETY: checked non-NULL just before the read.
    (!entry.is_null()).then(|| unsafe { (*entry).gr_gid })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn creates_the_spec_tree_with_modes_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("clawfs");
        let report = create_namespace(&root, Owners::Keep).unwrap();
        for spec in TOP_LEVEL {
            let mode = fs::metadata(root.join(spec.path)).unwrap().mode() & 0o7777;
            assert_eq!(mode, spec.mode, "{}", spec.path);
        }
        for agent in [FIRST_AGENT] {
            let agent_dir = root.join("agents").join(agent);
            assert_eq!(fs::metadata(&agent_dir).unwrap().mode() & 0o7777, AGENT_DIR_MODE);
            for sub in ["logs", "cache", "instructions"] {
                assert!(agent_dir.join(sub).is_dir(), "{agent}/{sub}");
            }
            assert!(fs::read_to_string(agent_dir.join("identity.md")).unwrap().contains(&format!("I am {agent},")));
            assert_eq!(fs::metadata(agent_dir.join("soul.md")).unwrap().mode() & 0o777, crate::files::FILE_MODE);
            assert!(fs::read_to_string(agent_dir.join("soul.md")).unwrap().starts_with("# Soul"));
            agentfs::AgentFs::open(agent_dir.join(DATABASE_FILE)).unwrap();
            assert_eq!(fs::metadata(agent_dir.join(DATABASE_FILE)).unwrap().mode() & 0o777, AGENT_DB_MODE);
            let identity: Value = serde_json::from_slice(&fs::read(agent_dir.join("identity.json")).unwrap()).unwrap();
            assert_eq!(identity["agent_id"], agent);
            assert_eq!(identity["checksum"], identity_checksum(&identity));
            let state: Value = serde_json::from_slice(&fs::read(agent_dir.join("state.json")).unwrap()).unwrap();
            assert_eq!(state["agent_id"], agent);
        }
        assert!(report.created.contains(&format!("agents/default/{DATABASE_FILE}")));
        assert_eq!(BRAIN.map(|(name, _)| name), BRAIN_FILES, "every brain file the layout names is made");

        // A second run keeps everything, including edited files.
        fs::write(root.join("agents/default/state.json"), b"{\"edited\":true}").unwrap();
        fs::write(root.join("agents/default/soul.md"), b"edited").unwrap();
        assert!(create_namespace(&root, Owners::Keep).unwrap().created.is_empty());
        assert_eq!(fs::read(root.join("agents/default/state.json")).unwrap(), b"{\"edited\":true}");
        assert_eq!(fs::read(root.join("agents/default/soul.md")).unwrap(), b"edited");
    }

    #[test]
    fn a_changed_identity_fails_its_checksum() {
        let mut identity = initial_identity("wasm-agent");
        identity["history"]["total_executions"] = json!(1);
        assert_ne!(identity["checksum"], identity_checksum(&identity));
    }

    #[test]
    fn agents_are_created_listed_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("clawfs");
        create_namespace(&root, Owners::Keep).unwrap();
        let mut report = NamespaceReport::default();
        create_agent(&root, "helper", Owners::Keep, &mut report).unwrap();
        assert!(report.created.contains(&format!("agents/helper/{DATABASE_FILE}")));
        assert!(create_agent(&root, "../x", Owners::Keep, &mut report).is_err());
        std::os::unix::fs::symlink(root.join("agents/helper"), root.join("agents/alias")).unwrap();
        assert_eq!(list_agents(&root).unwrap(), ["default", "helper"]);
        assert!(agent_exists(&root, "helper") && !agent_exists(&root, "alias") && !agent_exists(&root, "nobody"));
        let renamed = remove_agent(&root, "helper").unwrap();
        assert!(!agent_exists(&root, "helper") && renamed.join(DATABASE_FILE).is_file());
        assert_eq!(list_agents(&root).unwrap(), ["default"]);
        // A new agent may take the name at once; a second removal leaves two
        // to delete, which a start's clean-up (`None`) finds.
        create_agent(&root, "helper", Owners::Keep, &mut report).unwrap();
        remove_agent(&root, "helper").unwrap();
        delete_removed(&root, Some(&renamed)).unwrap();
        assert!(!renamed.exists());
        assert!(delete_removed(&root, Some(&root.join("agents/default"))).is_ok() && agent_exists(&root, "default"));
        delete_removed(&root, None).unwrap();
        assert_eq!(fs::read_dir(root.join("agents").join(REMOVED_DIR)).unwrap().count(), 0);
    }
}

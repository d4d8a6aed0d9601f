//! Where things are under `/clawfs` (specs/clawfs/README.md, "Namespace",
//! "Workspaces", "Identity files"): the name of every directory and file
//! ClawFS lays out, and the paths of an agent's directory and what is in
//! it. The glossary calls the agent database's file name "ClawFS's layout"
//! (specs/README.md, "agent database"): this module is that layout.
//!
//! Owns: the names (`agents/`, `workspace.db`, `search.db`, the HNSW files,
//! `identity.json`, `state.json`, `config.toml`, the brain files `soul.md`,
//! `identity.md`, `user.md` and `memory.md`, an agent's subdirectories, a
//! workspace's `metadata.json` and `snapshots/`, the identity backups under
//! `vault/`), and the paths built from them: [`agent_dir`], and whether an
//! agent exists ([`agent_exists`]: while its directory does, "Names").
//! Every other module, and every other crate, names these through the
//! constants here.
//!
//! Must not own: making any of it (`namespace`, [`crate::Clawfs`]), modes
//! and owners (`namespace`), what the files hold (their own modules), who
//! may reach which path (RULE-001, [`crate::files`]), or the rules of a
//! name ([`crate::names`]).

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::names::validate_agent_name;

/// The agents' directories, `agents/<agent>/`.
pub const AGENTS_DIR: &str = "agents";
/// Removed agents' directories waiting to be deleted, `agents/.removed/`
/// (its name is no agent's: a dot is not allowed in one).
pub const REMOVED_DIR: &str = ".removed";
/// The user workspaces, `workspaces/<workspace>/`.
pub const WORKSPACES_DIR: &str = "workspaces";
/// The tool registry (the wasm-daemon's).
pub const TOOLS_DIR: &str = "tools";
/// The secrets vault (the security agent's) and the identity backups.
pub const VAULT_DIR: &str = "vault";
/// The specifications, readable by every agent.
pub const SPECS_DIR: &str = "specs";
/// Read-only system files.
pub const SYSTEM_DIR: &str = "system";

/// The AgentFS database of a workspace or an agent: a user workspace's
/// files, an agent's files, key-value store, sessions and tool-call records
/// (the agent database).
pub const DATABASE_FILE: &str = "workspace.db";
/// The search index's database (chunks, their FTS5 table, vectors),
/// beside the workspace database. A file of its own: the reference AgentFS
/// SDK's engine cannot open a database holding an FTS5 table, and the
/// workspace database must stay one it opens (specs/clawfs/README.md,
/// "Workspaces").
pub const SEARCH_FILE: &str = "search.db";
/// The HNSW index file, beside the database.
pub const HNSW_FILE: &str = "workspace.hnsw";
/// What the HNSW file holds, for the check on open.
pub const HNSW_SIDECAR_FILE: &str = "workspace.hnsw.json";

/// An agent's state, in its directory.
pub const STATE_FILE: &str = "state.json";
/// An agent's identity file (specs/clawfs/README.md, "Identity files"), in
/// its directory; not the brain file [`IDENTITY_MD`].
pub const IDENTITY_FILE: &str = "identity.json";
/// An agent's configuration in its directory (`specs/agent/README.md`): the
/// operator's, read-only to the agent, so nothing the agent does can widen
/// its own limits.
pub const AGENT_CONFIG_FILE: &str = "config.toml";

/// The brain file of an agent's values and boundaries
/// (`specs/agent/README.md`, "Persona"), guarded by agent-loop's soul guard.
pub const SOUL_MD: &str = "soul.md";
/// The brain file of who the agent is; not the identity file [`IDENTITY_FILE`].
pub const IDENTITY_MD: &str = "identity.md";
/// The brain file of who the agent serves.
pub const USER_MD: &str = "user.md";
/// The brain file of the agent's core memories (`specs/agent/README.md`,
/// "Memory": the `core` category's entries).
pub const MEMORY_MD: &str = "memory.md";
/// The brain files a new agent starts with, in this order.
pub const BRAIN_FILES: [&str; 4] = [SOUL_MD, IDENTITY_MD, USER_MD, MEMORY_MD];

/// An agent's daily logs (the `daily` memory category).
pub const LOGS_DIR: &str = "logs";
/// An agent's scratch space, not indexed.
pub const CACHE_DIR: &str = "cache";
/// An agent's durable rules, one Markdown file each.
pub const INSTRUCTIONS_DIR: &str = "instructions";
/// An agent's other memory categories, `memory/<category>.md`.
pub const MEMORY_DIR: &str = "memory";
/// What memory hygiene took out of recall, not indexed.
pub const ARCHIVE_DIR: &str = "archive";
/// The subdirectories every agent directory is created with.
pub const AGENT_SUBDIRS: [&str; 3] = [LOGS_DIR, CACHE_DIR, INSTRUCTIONS_DIR];

/// A workspace's `metadata.json` (specs/clawfs/README.md, "Workspaces").
pub const METADATA_FILE: &str = "metadata.json";
/// A workspace's snapshots (specs/clawfs/README.md, "Snapshots").
pub const SNAPSHOTS_DIR: &str = "snapshots";

/// The identity backups, `vault/identity-backups/<agent>/`.
pub const IDENTITY_BACKUPS_DIR: &str = "identity-backups";

/// `agents/` under `root`.
pub fn agents_dir(root: &Path) -> PathBuf {
    root.join(AGENTS_DIR)
}

/// The directory of `agent` under `root`.
pub fn agent_dir(root: &Path, agent: &str) -> Result<PathBuf> {
    validate_agent_name(agent)?;
    Ok(agents_dir(root).join(agent))
}

/// Whether agent `agent` exists: its name is valid and its directory is
/// there (a directory, not a symlink).
pub fn agent_exists(root: &Path, agent: &str) -> bool {
    agent_dir(root, agent).is_ok_and(|dir| fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()))
}

/// `workspaces/` under `root`.
pub fn workspaces_dir(root: &Path) -> PathBuf {
    root.join(WORKSPACES_DIR)
}

/// Where the identity backups of `agent` are kept, under `root`'s vault.
pub fn identity_backups_dir(root: &Path, agent: &str) -> PathBuf {
    root.join(VAULT_DIR).join(IDENTITY_BACKUPS_DIR).join(agent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_dirs_refuse_unknown_agents() {
        assert!(agent_dir(Path::new("/clawfs"), "../vault").is_err());
        assert_eq!(agent_dir(Path::new("/clawfs"), "fs-engine").unwrap(), Path::new("/clawfs/agents/fs-engine"));
    }
}

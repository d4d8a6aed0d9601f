//! Plain files under `/clawfs`, read and written on someone's behalf, with
//! the access rule RULE-001 (specs/clawfs/README.md, "Files and RULE-001"):
//! an agent reads and writes only inside its own directory `agents/<agent>/`
//! (and may read `specs/`); the operator reaches everything but the vault.
//! Inside an agent directory the files ClawFS maintains itself
//! (`workspace.db*`, the HNSW index, `identity.json`) are read-only here:
//! they change only through their own methods, which keep them consistent.
//!
//! Paths are resolved lexically (no `..`) and never through a symlink, so
//! a request cannot leave the directory it was allowed. [`parse`] and
//! [`beneath`] (or [`open_beneath`], which has the kernel enforce it in the
//! open itself) are those two rules on their own, for every `/clawfs` path
//! served on someone's behalf: [`resolve`] adds RULE-001 to them for
//! fs-engine, the tool host a tool's granted prefixes before
//! [`open_beneath`] (specs/toolhost/README.md, "Host"). Who
//! may reach which path is the caller's rule; how a path is read, and that
//! it stays where it says, is this module's, and only this module's.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::error::{io, Error, Result};
use crate::layout::{
    agent_exists, AGENTS_DIR, DATABASE_FILE, HNSW_FILE, IDENTITY_FILE, METADATA_FILE, SEARCH_FILE, SNAPSHOTS_DIR,
    SPECS_DIR, VAULT_DIR, WORKSPACES_DIR,
};

/// Largest read or write in one request (the IPC message limit is 4 MiB,
/// and base64 grows data by a third).
pub const MAX_TRANSFER_BYTES: usize = 1024 * 1024;
/// Longest path accepted.
pub const MAX_PATH_BYTES: usize = 4096;

/// Whom a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requester<'a> {
    /// The operator (clawctl).
    Operator,
    /// One of the eight agents.
    Agent(&'a str),
}

impl<'a> Requester<'a> {
    /// The name written in the audit log.
    pub fn name(&self) -> &'a str {
        match self {
            Requester::Operator => "operator",
            Requester::Agent(agent) => agent,
        }
    }
}

/// What a request wants to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read a file or list a directory.
    Read,
    /// Create, change or delete.
    Write,
}

/// A path that passed the access check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The path on disk.
    pub real: PathBuf,
    /// The same as a `/clawfs/...` path, for answers and the audit log.
    pub display: String,
}

/// The databases and the HNSW index (with their journals and sidecars).
fn is_index_or_database(name: &str) -> bool {
    name.starts_with(DATABASE_FILE) || name.starts_with(SEARCH_FILE) || name.starts_with(HNSW_FILE)
}

/// The entry of an agent's or a workspace's directory that ClawFS maintains
/// itself and that `parts` (components below `/clawfs`) name or lie in, if
/// any: in an agent's directory its databases, HNSW index, identity file,
/// configuration and history (`.git`); in a workspace's its databases, HNSW index, metadata
/// and snapshots. Only their own methods change them, which keep them
/// consistent: a plain write there, by an agent through fs-engine or by a
/// tool through its filesystem grant, is refused (a forged row in an
/// agent's `workspace.db` would be a forged approval or checkpoint).
pub fn maintained<'p>(parts: &[&'p str]) -> Option<&'p str> {
    match *parts {
        [AGENTS_DIR, _, name, ..]
            if is_index_or_database(name)
                || name == IDENTITY_FILE
                || name == AGENT_CONFIG_FILE
                || name == crate::history::GIT_DIR =>
        {
            Some(name)
        }
        [WORKSPACES_DIR, _, name, ..]
            if is_index_or_database(name) || name == METADATA_FILE || name == SNAPSHOTS_DIR =>
        {
            Some(name)
        }
        _ => None,
    }
}

/// An agent's configuration ([`crate::layout::AGENT_CONFIG_FILE`]), named
/// here too because its rule is here: read-only to the agent.
pub use crate::layout::AGENT_CONFIG_FILE;

/// The components of `relative` after `base`, checked lexically: `.` and
/// empty components are dropped, `..` is refused. `asked` is the path as
/// the request gave it, for the refusal.
fn components<'a>(asked: &str, mut parts: Vec<&'a str>, relative: &'a str) -> Result<Vec<&'a str>> {
    let denied = |reason: &str| Error::Denied { path: asked.to_owned(), reason: reason.to_owned() };
    if asked.len() > MAX_PATH_BYTES || asked.contains('\0') {
        return Err(denied("the path is too long or contains NUL"));
    }
    for component in Path::new(relative).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str().ok_or_else(|| denied("the path is not UTF-8"))?),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => return Err(denied("`..` is not allowed in a path")),
        }
    }
    Ok(parts)
}

/// The components of an absolute `/clawfs/...` path below the ClawFS root
/// (none for `/clawfs` itself), checked lexically: at most
/// [`MAX_PATH_BYTES`], no NUL, no `..`; `.` and repeated `/` are dropped.
/// Nothing on disk is looked at: that is [`beneath`].
pub fn parse(path: &str) -> Result<Vec<&str>> {
    match path.strip_prefix("/clawfs") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => components(path, Vec::new(), rest),
        _ => Err(Error::Denied { path: path.to_owned(), reason: "not a /clawfs/... path".into() }),
    }
}

/// `/clawfs/a/b` for the components `[a, b]` (`/clawfs` for none): the
/// normal form of a path, in answers and the audit log.
pub fn display(parts: &[&str]) -> String {
    let mut display = String::from("/clawfs");
    for part in parts {
        display.push('/');
        display.push_str(part);
    }
    display
}

/// The host path of `parts` under `root`, reached without a symlink: every
/// component on the way must be a real directory and the last must not be a
/// symlink, so nothing reached through it is outside the tree it names. A
/// component that does not exist (yet) is not refused here; opening it
/// reports it. Files are then opened `O_NOFOLLOW`, so a symlink planted
/// after this check is not followed either. `asked` is the path as the
/// request gave it, for the refusal.
pub fn beneath(root: &Path, asked: &str, parts: &[&str]) -> Result<PathBuf> {
    let mut real = root.to_owned();
    for (position, part) in parts.iter().enumerate() {
        real.push(part);
        let is_last = position + 1 == parts.len();
        let denied = |what: &str| Error::Denied {
            path: asked.to_owned(),
            reason: format!("{} is {what}", display(&parts[..=position])),
        };
        match fs::symlink_metadata(&real) {
            Ok(metadata) if metadata.file_type().is_symlink() => return Err(denied("a symlink")),
            Ok(metadata) if !is_last && !metadata.is_dir() => return Err(denied("not a directory")),
            _ => {}
        }
    }
    Ok(real)
}

/// What [`open_beneath`] opens a path for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenFor {
    /// Reading a regular file.
    Read,
    /// Writing a regular file, created (mode 0640) or truncated.
    Write,
    /// Listing a directory.
    List,
}

/// Opens `parts` under `root` in a single openat2(2) that resolves beneath
/// the root and through no symlink (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
/// RESOLVE_NO_MAGICLINKS`): the rule of [`beneath`] enforced by the kernel
/// at the moment of the open, so a symlink swapped in after a check is not
/// followed either. `O_NONBLOCK` makes a FIFO fail or open at once instead
/// of blocking the caller's thread, and what was opened must be what
/// `purpose` expects (a regular file, or a directory for listing): a FIFO,
/// socket or device is refused before a byte moves. `asked` is the path as
/// the request gave it, for the refusal.
pub fn open_beneath(root: &Path, asked: &str, parts: &[&str], purpose: OpenFor) -> Result<File> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let denied = |reason: &str| Error::Denied { path: asked.to_owned(), reason: reason.to_owned() };
    let relative: PathBuf = if parts.is_empty() { PathBuf::from(".") } else { parts.iter().collect() };
    let flags = OFlags::CLOEXEC
        | OFlags::NOFOLLOW
        | OFlags::NONBLOCK
        | match purpose {
            OpenFor::Read => OFlags::RDONLY,
            OpenFor::Write => OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC,
            OpenFor::List => OFlags::RDONLY | OFlags::DIRECTORY,
        };
    let root_dir = File::open(root).map_err(io("open", root))?;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    // openat2 refuses a mode without O_CREAT.
    let mode = if purpose == OpenFor::Write { Mode::from_raw_mode(0o640) } else { Mode::empty() };
    let opened = rustix::fs::openat2(&root_dir, &relative, flags, mode, resolve).map_err(|errno| match errno {
        rustix::io::Errno::LOOP => denied("the path passes through a symlink"),
        rustix::io::Errno::XDEV => denied("the path leaves /clawfs"),
        errno => Error::Io { operation: "open", path: root.join(&relative), source: errno.into() },
    })?;
    let file = File::from(opened);
    let kind = file.metadata().map_err(io("stat", root.join(&relative)))?.file_type();
    match purpose {
        OpenFor::Read | OpenFor::Write if !kind.is_file() => Err(denied("not a regular file")),
        _ => Ok(file),
    }
}

/// Checks `path` (absolute `/clawfs/...`, or relative to the agent's own
/// directory) for `requester` and `access`. `Err(Error::Denied)` says why not.
pub fn resolve(root: &Path, requester: Requester<'_>, path: &str, access: Access) -> Result<Resolved> {
    let denied = |reason: String| Error::Denied { path: path.to_owned(), reason };
    if let Requester::Agent(agent) = requester {
        // An agent that does not exist has no directory to write into; a
        // write with `create_dirs` must not make one.
        if !agent_exists(root, agent) {
            return Err(denied(format!("`{agent}` is not an agent of this box")));
        }
    }
    let parts = match requester {
        Requester::Agent(agent) if !path.starts_with('/') => components(path, vec![AGENTS_DIR, agent], path)?,
        _ if path.starts_with('/') => parse(path)?,
        _ => {
            return Err(denied(
                "the operator's paths are /clawfs/... (an agent's may also be relative to its own directory)".into(),
            ))
        }
    };
    match (requester, parts.as_slice(), access) {
        (Requester::Operator, [VAULT_DIR, ..], _) => {
            return Err(denied("the vault is reached through `clawctl secret`, not as files".into()))
        }
        (Requester::Operator, _, _) => {}
        (Requester::Agent(_), [SPECS_DIR, ..], Access::Read) => {}
        (Requester::Agent(agent), [AGENTS_DIR, owner, rest @ ..], _) if owner == &agent => {
            if let Some(name) = maintained(&parts).filter(|_| access == Access::Write) {
                return Err(denied(format!("{name} is maintained by ClawFS and changes only through its own methods")));
            }
            if access == Access::Write && rest.is_empty() {
                return Err(denied("an agent cannot replace or remove its own directory".into()));
            }
        }
        (Requester::Agent(agent), _, _) => {
            return Err(denied(format!("outside the directory of agent `{agent}` (RULE-001)")))
        }
    }
    Ok(Resolved { real: beneath(root, path, &parts)?, display: display(&parts) })
}

/// Contents read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// The bytes, at most [`MAX_TRANSFER_BYTES`].
    pub data: Vec<u8>,
    /// The whole file's size.
    pub size: u64,
    /// Whether the read reached the end of the file.
    pub eof: bool,
}

fn open_no_follow(path: &Path, options: &mut OpenOptions) -> Result<File> {
    // O_NONBLOCK: a FIFO planted here fails or opens at once (and is then
    // refused as not a regular file) instead of blocking a serving thread.
    options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK).open(path).map_err(io("open", path))
}

/// Reads up to `length` bytes (at most [`MAX_TRANSFER_BYTES`]) from `offset`.
pub fn read(file: &Resolved, offset: u64, length: Option<usize>) -> Result<ReadResult> {
    let mut handle = open_no_follow(&file.real, OpenOptions::new().read(true))?;
    let metadata = handle.metadata().map_err(io("stat", &file.real))?;
    if !metadata.is_file() {
        return Err(Error::Denied { path: file.display.clone(), reason: "not a regular file".into() });
    }
    let size = metadata.len();
    let wanted = length.unwrap_or(MAX_TRANSFER_BYTES).min(MAX_TRANSFER_BYTES);
    handle.seek(SeekFrom::Start(offset)).map_err(io("seek", &file.real))?;
    let mut data = Vec::with_capacity(wanted.min(size.saturating_sub(offset) as usize));
    handle.take(wanted as u64).read_to_end(&mut data).map_err(io("read", &file.real))?;
    let eof = offset + data.len() as u64 >= size;
    Ok(ReadResult { data, size, eof })
}

/// How [`write`] changes a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Replace the whole file atomically: a reader or a crash sees the old
    /// contents or the new, never a mix; a full disk leaves the old.
    Replace,
    /// Append to the end (creating the file).
    Append,
}

/// The mode of a file written here: the owner writes, the group the
/// directory admits reads (for an agent's files, agent-loop reads its
/// brain files, `specs/agent/README.md`, "Persona"). Set explicitly: the
/// components' umask (0077) would leave 0600.
pub const FILE_MODE: u32 = 0o640;

/// Writes `data` (at most [`MAX_TRANSFER_BYTES`]); returns the file's new size.
pub fn write(file: &Resolved, data: &[u8], mode: WriteMode) -> Result<u64> {
    if data.len() > MAX_TRANSFER_BYTES {
        return Err(Error::Denied {
            path: file.display.clone(),
            reason: format!("{} bytes is more than the {MAX_TRANSFER_BYTES} of one write; append in parts", data.len()),
        });
    }
    match mode {
        WriteMode::Append => {
            let mut handle = open_no_follow(&file.real, OpenOptions::new().append(true).create(true).mode(FILE_MODE))?;
            handle.set_permissions(fs::Permissions::from_mode(FILE_MODE)).map_err(io("chmod", &file.real))?;
            handle.write_all(data).map_err(io("write", &file.real))?;
            handle.sync_data().map_err(io("fsync", &file.real))?;
            Ok(handle.metadata().map_err(io("stat", &file.real))?.len())
        }
        WriteMode::Replace => {
            if fs::symlink_metadata(&file.real).is_ok_and(|m| m.is_dir()) {
                return Err(Error::Denied { path: file.display.clone(), reason: "is a directory".into() });
            }
            // A failed write (a full disk) leaves the old file as it was.
            fsutil::write_atomic(&file.real, data, FILE_MODE).map_err(io("write", &file.real))?;
            fs::set_permissions(&file.real, fs::Permissions::from_mode(FILE_MODE)).map_err(io("chmod", &file.real))?;
            Ok(data.len() as u64)
        }
    }
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct DirEntry {
    /// The name.
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
}

/// What a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed).
    Symlink,
    /// A socket, FIFO or device.
    Other,
}

/// The entries of a directory, sorted by name.
pub fn list(dir: &Resolved) -> Result<Vec<DirEntry>> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(&dir.real).map_err(io("list", &dir.real))? {
        let entry = entry.map_err(io("list", &dir.real))?;
        let metadata = entry.metadata().map_err(io("stat", entry.path()))?;
        let kind = match metadata.file_type() {
            t if t.is_symlink() => EntryKind::Symlink,
            t if t.is_dir() => EntryKind::Dir,
            t if t.is_file() => EntryKind::File,
            _ => EntryKind::Other,
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.push(DirEntry { name, kind, size: metadata.len(), mode: metadata.permissions().mode() & 0o7777 });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// Removes a file or an empty directory.
pub fn delete(path: &Resolved) -> Result<()> {
    let metadata = fs::symlink_metadata(&path.real).map_err(io("stat", &path.real))?;
    if metadata.is_dir() {
        fs::remove_dir(&path.real).map_err(io("remove", &path.real))
    } else {
        fs::remove_file(&path.real).map_err(io("remove", &path.real))
    }
}

/// The mode of a directory a write makes: the group (the components that
/// read an agent's files directly, such as the scheduler its jobs file) may
/// list and enter it, not change it.
pub const DIR_MODE: u32 = 0o750;

/// Creates a directory (and its missing parents, each checked the same
/// way), each with [`DIR_MODE`] set after it is made: the mode given at
/// creation is narrowed by the process's umask (fs-engine's unit has 0077).
pub fn make_dir(dir: &Resolved) -> Result<()> {
    let missing: Vec<&Path> = dir.real.ancestors().take_while(|at| !at.exists()).collect();
    for at in missing.into_iter().rev() {
        match fs::DirBuilder::new().mode(DIR_MODE).create(at) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(io("mkdir", at)(e)),
            _ => fs::set_permissions(at, fs::Permissions::from_mode(DIR_MODE)).map_err(io("chmod", at))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for path in ["agents/kernel-engine/logs", "agents/fs-engine", "specs", "vault", "workspaces"] {
            fs::create_dir_all(dir.path().join(path)).unwrap();
        }
        fs::write(dir.path().join("agents/fs-engine/secret.md"), "fs-engine's").unwrap();
        dir
    }

    fn denied(result: Result<Resolved>) -> String {
        match result {
            Err(Error::Denied { reason, .. }) => reason,
            other => panic!("expected a denial, got {other:?}"),
        }
    }

    #[test]
    fn maintained_names_what_only_its_own_methods_change() {
        let parts = |path: &'static str| parse(path).unwrap();
        for (path, name) in [
            ("/clawfs/agents/a/workspace.db", "workspace.db"),
            ("/clawfs/agents/a/workspace.db-wal", "workspace.db-wal"),
            ("/clawfs/agents/a/search.db-shm", "search.db-shm"),
            ("/clawfs/agents/a/workspace.hnsw.json", "workspace.hnsw.json"),
            ("/clawfs/agents/a/identity.json", "identity.json"),
            ("/clawfs/agents/a/config.toml", "config.toml"),
            ("/clawfs/agents/a/.git/HEAD", ".git"),
            ("/clawfs/workspaces/w/workspace.db", "workspace.db"),
            ("/clawfs/workspaces/w/metadata.json", "metadata.json"),
            ("/clawfs/workspaces/w/snapshots/s1/workspace.db", "snapshots"),
        ] {
            assert_eq!(maintained(&parts(path)), Some(name), "{path}");
        }
        for path in [
            "/clawfs/agents/a/soul.md",
            "/clawfs/agents/a/notes/workspace.db",
            "/clawfs/agents/a/state.json",
            "/clawfs/workspaces/w/notes.md",
            "/clawfs/workspaces/w/config.toml",
            "/clawfs/agents",
        ] {
            assert_eq!(maintained(&parts(path)), None, "{path}");
        }
    }

    #[test]
    fn an_agent_stays_in_its_own_directory() {
        let dir = root();
        let me = Requester::Agent("kernel-engine");
        let own = resolve(dir.path(), me, "notes/today.md", Access::Write).unwrap();
        assert_eq!(own.display, "/clawfs/agents/kernel-engine/notes/today.md");
        assert_eq!(own.real, dir.path().join("agents/kernel-engine/notes/today.md"));
        assert_eq!(
            resolve(dir.path(), me, "/clawfs/agents/kernel-engine/logs", Access::Read).unwrap().display,
            "/clawfs/agents/kernel-engine/logs"
        );
        assert!(resolve(dir.path(), me, "/clawfs/specs/README.md", Access::Read).is_ok());

        assert!(
            denied(resolve(dir.path(), me, "/clawfs/agents/fs-engine/secret.md", Access::Read)).contains("RULE-001")
        );
        assert!(denied(resolve(dir.path(), me, "../fs-engine/secret.md", Access::Read)).contains(".."));
        assert!(denied(resolve(dir.path(), me, "/clawfs/vault/master-key.enc", Access::Read)).contains("RULE-001"));
        assert!(denied(resolve(dir.path(), me, "/clawfs/specs/README.md", Access::Write)).contains("RULE-001"));
        assert!(denied(resolve(dir.path(), me, "/etc/shadow", Access::Read)).contains("/clawfs"));
        assert!(denied(resolve(dir.path(), me, "/clawfsx/agents", Access::Read)).contains("/clawfs"));
        assert!(denied(resolve(dir.path(), me, DATABASE_FILE, Access::Write)).contains("maintained by ClawFS"));
        assert!(denied(resolve(dir.path(), me, "identity.json", Access::Write)).contains("maintained by ClawFS"));
        assert!(resolve(dir.path(), me, "identity.json", Access::Read).is_ok());
        assert!(denied(resolve(dir.path(), me, "workspace.db-wal", Access::Write)).contains("maintained by ClawFS"));
        assert!(
            denied(resolve(dir.path(), me, "/clawfs/agents/kernel-engine", Access::Write)).contains("own directory")
        );
        assert!(denied(resolve(dir.path(), Requester::Agent("root"), "x", Access::Read))
            .contains("not an agent of this box"));
        assert!(denied(resolve(dir.path(), me, "config.toml", Access::Write)).contains("maintained by ClawFS"));
        resolve(dir.path(), me, "config.toml", Access::Read).unwrap();
    }

    #[test]
    fn symlinks_are_never_followed() {
        let dir = root();
        std::os::unix::fs::symlink(dir.path().join("agents/fs-engine"), dir.path().join("agents/kernel-engine/escape"))
            .unwrap();
        let me = Requester::Agent("kernel-engine");
        assert!(denied(resolve(dir.path(), me, "escape/secret.md", Access::Read)).contains("symlink"));
        assert!(denied(resolve(dir.path(), me, "escape", Access::Write)).contains("symlink"));
        // The refusal names the /clawfs path, not where the root is on the host.
        let reason = denied(resolve(dir.path(), me, "escape/secret.md", Access::Read));
        assert_eq!(reason, "/clawfs/agents/kernel-engine/escape is a symlink");
        let file = dir.path().join("agents/kernel-engine/file");
        fs::write(&file, "").unwrap();
        assert!(denied(resolve(dir.path(), me, "file/below", Access::Read)).contains("not a directory"));
    }

    #[test]
    fn paths_parse_to_their_normal_components() {
        assert_eq!(parse("/clawfs").unwrap(), Vec::<&str>::new());
        assert_eq!(parse("/clawfs/").unwrap(), Vec::<&str>::new());
        assert_eq!(parse("/clawfs//workspaces/./a/").unwrap(), ["workspaces", "a"]);
        assert_eq!(display(&parse("/clawfs//workspaces/./a/").unwrap()), "/clawfs/workspaces/a");
        assert_eq!(display(&[]), "/clawfs");
        let refused = |path: &str| match parse(path) {
            Err(Error::Denied { reason, .. }) => reason,
            other => panic!("{path:?}: expected a denial, got {other:?}"),
        };
        assert!(refused("/clawfs/workspaces/../vault").contains(".."));
        assert!(refused("/clawfs/..").contains(".."));
        for outside in ["/etc/shadow", "/clawfsx", "clawfs/workspaces", "workspaces", ""] {
            assert!(refused(outside).contains("/clawfs"), "{outside:?}");
        }
        assert!(refused("/clawfs/a\0b").contains("NUL"));
        assert!(refused(&format!("/clawfs/{}", "a/".repeat(MAX_PATH_BYTES))).contains("too long"));
    }

    #[test]
    fn beneath_walks_real_directories_only() {
        let dir = root();
        let parts = parse("/clawfs/agents/fs-engine/secret.md").unwrap();
        assert_eq!(beneath(dir.path(), "asked", &parts).unwrap(), dir.path().join("agents/fs-engine/secret.md"));
        // Missing components are the open's to report, not a refusal.
        assert!(beneath(dir.path(), "asked", &["workspaces", "new", "file"]).is_ok());
        std::os::unix::fs::symlink("/etc", dir.path().join("workspaces/etc")).unwrap();
        for through_link in [&["workspaces", "etc"][..], &["workspaces", "etc", "passwd"][..]] {
            match beneath(dir.path(), "asked", through_link) {
                Err(Error::Denied { path, reason }) => {
                    assert_eq!((path.as_str(), reason.as_str()), ("asked", "/clawfs/workspaces/etc is a symlink"))
                }
                other => panic!("{through_link:?}: expected a denial, got {other:?}"),
            }
        }
    }

    #[test]
    fn open_beneath_refuses_symlinks_and_special_files() {
        let dir = root();
        fs::write(dir.path().join("workspaces/plain.txt"), "plain").unwrap();
        let mut read = String::new();
        open_beneath(dir.path(), "asked", &["workspaces", "plain.txt"], OpenFor::Read)
            .unwrap()
            .read_to_string(&mut read)
            .unwrap();
        assert_eq!(read, "plain");
        assert!(open_beneath(dir.path(), "asked", &["workspaces"], OpenFor::List).is_ok());
        assert!(open_beneath(dir.path(), "asked", &[], OpenFor::List).is_ok());
        std::os::unix::fs::symlink(dir.path(), dir.path().join("workspaces/up")).unwrap();
        for through_link in [&["workspaces", "up"][..], &["workspaces", "up", "workspaces", "plain.txt"][..]] {
            match open_beneath(dir.path(), "asked", through_link, OpenFor::Read) {
                Err(Error::Denied { reason, .. }) => assert_eq!(reason, "the path passes through a symlink"),
                other => panic!("{through_link:?}: expected a denial, got {other:?}"),
            }
        }
        let fifo =
            std::ffi::CString::new(dir.path().join("workspaces/pipe").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        for purpose in [OpenFor::Read, OpenFor::Write] {
            assert!(open_beneath(dir.path(), "asked", &["workspaces", "pipe"], purpose).is_err(), "{purpose:?}");
        }
        assert!(matches!(
            open_beneath(dir.path(), "asked", &["workspaces", "missing"], OpenFor::Read),
            Err(Error::Io { .. })
        ));
    }

    #[test]
    fn the_operator_reaches_all_but_the_vault() {
        let dir = root();
        assert!(resolve(dir.path(), Requester::Operator, "/clawfs/agents/fs-engine/secret.md", Access::Read).is_ok());
        assert!(resolve(dir.path(), Requester::Operator, "/clawfs", Access::Read).is_ok());
        assert!(denied(resolve(dir.path(), Requester::Operator, "/clawfs/vault/master-key.enc", Access::Read))
            .contains("vault"));
        assert!(denied(resolve(dir.path(), Requester::Operator, "relative.md", Access::Read)).contains("/clawfs"));
    }

    #[test]
    fn write_read_append_list_delete() {
        let dir = root();
        let me = Requester::Agent("kernel-engine");
        let file = resolve(dir.path(), me, "logs/run.log", Access::Write).unwrap();
        assert_eq!(write(&file, b"first\n", WriteMode::Replace).unwrap(), 6);
        assert_eq!(write(&file, b"second\n", WriteMode::Append).unwrap(), 13);
        let whole = read(&file, 0, None).unwrap();
        assert_eq!((whole.data.as_slice(), whole.size, whole.eof), (&b"first\nsecond\n"[..], 13, true));
        let part = read(&file, 6, Some(3)).unwrap();
        assert_eq!((part.data.as_slice(), part.eof), (&b"sec"[..], false));
        assert_eq!(write(&file, b"replaced", WriteMode::Replace).unwrap(), 8);
        assert_eq!(read(&file, 0, None).unwrap().data, b"replaced");

        let logs = resolve(dir.path(), me, "logs", Access::Read).unwrap();
        let entries = list(&logs).unwrap();
        assert_eq!(entries.len(), 1, "no temporary file is left: {entries:?}");
        assert_eq!((entries[0].name.as_str(), entries[0].kind, entries[0].size), ("run.log", EntryKind::File, 8));
        delete(&file).unwrap();
        assert!(list(&logs).unwrap().is_empty());
        assert!(matches!(read(&file, 0, None), Err(Error::Io { .. })));
    }

    #[test]
    fn oversized_writes_are_refused_and_change_nothing() {
        let dir = root();
        let file = resolve(dir.path(), Requester::Agent("kernel-engine"), "big.bin", Access::Write).unwrap();
        write(&file, b"kept", WriteMode::Replace).unwrap();
        let error = write(&file, &vec![0; MAX_TRANSFER_BYTES + 1], WriteMode::Replace).unwrap_err();
        assert!(error.to_string().contains("append in parts"), "{error}");
        assert_eq!(read(&file, 0, None).unwrap().data, b"kept");
    }
}

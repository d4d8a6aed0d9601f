//! An agent's history (`specs/clawfs/README.md`, "History"): its directory
//! is a git repository (`.git`, which only ClawFS writes), and each turn
//! that changed its files is one commit. Written with libgit2 (git2), never
//! by running `git`.
//!
//! Owns: what is versioned (text files of at most [`MAX_VERSIONED`] bytes,
//! without the files ClawFS maintains), a commit of the directory as it is,
//! the log, and a rollback, which is itself a commit so nothing is lost.
//! Must not own: who may ask (fs-engine's caller checks) or when (agent-loop
//! commits at the end of a turn).

use std::fs;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use git2::{IndexAddOption, Oid, Repository, Signature, Sort};

/// The repository, under the agent's directory.
pub const GIT_DIR: &str = ".git";
/// The largest file versioned, bytes; larger ones stay out.
pub const MAX_VERSIONED: u64 = 1024 * 1024;
/// What a file's first bytes are checked for NUL over (git's own test for
/// binary content).
const BINARY_PROBE: usize = 8000;
/// Who commits: the author is the agent (or the operator, for a rollback).
const COMMITTER: &str = "ClawOS fs-engine";

/// The files ClawFS maintains, kept out by rule (`.git/info/exclude`): the
/// agent database and its index, the identity file, the config, the state
/// file, caches.
fn exclude() -> String {
    use crate::layout::{
        AGENT_CONFIG_FILE, CACHE_DIR, DATABASE_FILE, HNSW_FILE, IDENTITY_FILE, SEARCH_FILE, STATE_FILE,
    };
    format!(
        "# ClawFS keeps these out of the agent's history (specs/clawfs/README.md, \"History\").\n\
         /{DATABASE_FILE}*\n/{SEARCH_FILE}*\n/{HNSW_FILE}*\n/{IDENTITY_FILE}*\n/{AGENT_CONFIG_FILE}\n/{STATE_FILE}\n/{CACHE_DIR}/\n"
    )
}

/// A history error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libgit2 failed.
    #[error("the agent's history: {0}")]
    Git(#[from] git2::Error),
    /// A file of the directory could not be read or given its mode.
    #[error("the agent's history: {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No such commit.
    #[error("the agent's history has no commit `{0}`")]
    NoCommit(String),
    /// A rollback to what the files already are.
    #[error("the files are already as commit {0} left them")]
    Unchanged(String),
}

/// A history result.
pub type Result<T> = std::result::Result<T, Error>;

/// One commit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Commit {
    /// Its id (hex).
    pub id: String,
    /// When, seconds since the epoch.
    pub time: i64,
    /// Who: the agent, or `operator`.
    pub author: String,
    /// Its message.
    pub message: String,
    /// The files it changed (added, modified or removed), relative to the
    /// agent's directory.
    pub files: Vec<String>,
}

/// The repository of `dir`, made if it has none.
fn open(dir: &Path) -> Result<Repository> {
    if dir.join(GIT_DIR).is_dir() {
        return Ok(Repository::open(dir)?);
    }
    let repo = Repository::init(dir)?;
    let exclude = dir.join(GIT_DIR).join("info").join("exclude");
    fs::create_dir_all(exclude.parent().expect("a parent"))
        .and_then(|()| fs::write(&exclude, self::exclude()))
        .map_err(|source| Error::Io { path: exclude.display().to_string(), source })?;
    Ok(repo)
}

/// Whether `path` is versioned as it is now: a regular file, small, text.
fn versioned(path: &Path) -> bool {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() <= MAX_VERSIONED => {
            let mut head = vec![0; BINARY_PROBE];
            let read = fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head));
            read.is_ok_and(|n| !head[..n].contains(&0))
        }
        _ => false,
    }
}

/// Commits `dir` as it is, by `author` with `message`; `None` when nothing
/// changed since the last commit.
pub fn commit(dir: &Path, author: &str, message: &str) -> Result<Option<Commit>> {
    let repo = open(dir)?;
    let mut index = repo.index()?;
    // What left, grew past the limit or turned binary leaves the index
    // (a file the index saw at this size and time is not read again)...
    let gone: Vec<Vec<u8>> = index
        .iter()
        .filter(|entry| {
            let path = dir.join(bytes_path(&entry.path));
            let unchanged = fs::symlink_metadata(&path).is_ok_and(|meta| {
                meta.is_file()
                    && meta.len() == u64::from(entry.file_size)
                    && meta.mtime() == i64::from(entry.mtime.seconds())
                    && meta.mtime_nsec() == i64::from(entry.mtime.nanoseconds())
            });
            !unchanged && !versioned(&path)
        })
        .map(|entry| entry.path)
        .collect();
    for path in gone {
        index.remove_path(Path::new(&bytes_path(&path)))?;
    }
    // ...and every versioned file (new or changed) enters it, but excluded ones.
    let mut only_versioned = |path: &Path, _: &[u8]| i32::from(!versioned(&dir.join(path)));
    index.add_all(["*"], IndexAddOption::DEFAULT, Some(&mut only_versioned))?;
    index.write()?;
    let tree_id = index.write_tree()?;
    let parent = repo.head().ok().and_then(|head| head.peel_to_commit().ok());
    if parent.as_ref().is_some_and(|p| p.tree_id() == tree_id) {
        return Ok(None);
    }
    let tree = repo.find_tree(tree_id)?;
    let author = Signature::now(author, &format!("{author}@clawos"))?;
    let committer = Signature::now(COMMITTER, "fs-engine@clawos")?;
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    let id = repo.commit(Some("HEAD"), &author, &committer, message, &tree, &parents)?;
    Ok(Some(described(&repo, id)?))
}

fn bytes_path(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

/// Commit `id` with the files it changed against its first parent.
fn described(repo: &Repository, id: Oid) -> Result<Commit> {
    let commit = repo.find_commit(id)?;
    let tree = commit.tree()?;
    let parent_tree = commit.parent(0).ok().map(|p| p.tree()).transpose()?;
    let diff = repo.diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None)?;
    let files = diff
        .deltas()
        .filter_map(|delta| delta.new_file().path().or_else(|| delta.old_file().path()))
        .map(|p| p.display().to_string())
        .collect();
    let author = commit.author();
    Ok(Commit {
        id: id.to_string(),
        time: commit.time().seconds(),
        author: author.name().unwrap_or("?").to_owned(),
        message: commit.message().unwrap_or("").trim_end().to_owned(),
        files,
    })
}

/// The newest `limit` commits, newest first (none before the first commit).
pub fn log(dir: &Path, limit: usize) -> Result<Vec<Commit>> {
    if !dir.join(GIT_DIR).is_dir() {
        return Ok(Vec::new());
    }
    let repo = Repository::open(dir)?;
    if repo.head().is_err() {
        return Ok(Vec::new());
    }
    let mut walk = repo.revwalk()?;
    // Parents after their children whatever the clock said (commits of one
    // second, a clock set back).
    walk.set_sorting(Sort::TOPOLOGICAL)?;
    walk.push_head()?;
    walk.take(limit).map(|id| described(&repo, id?)).collect()
}

/// Puts the versioned files back as commit `id` (or a unique prefix of it)
/// left them, as a new commit by `author`: nothing is lost, the rollback can
/// itself be rolled back. Changes not yet committed are committed first.
/// `file_mode` and `dir_mode` are given to what the rollback writes (the
/// modes ClawFS gives an agent's files and directories).
pub fn rollback(dir: &Path, id: &str, author: &str, file_mode: u32, dir_mode: u32) -> Result<Commit> {
    commit(dir, author, "Changes before a rollback")?;
    let repo = open(dir)?;
    let target = repo
        .revparse_single(id)
        .and_then(|object| object.peel_to_commit())
        .map_err(|_| Error::NoCommit(id.to_owned()))?;
    let short = target.id().to_string()[..12].to_owned();
    let head = repo.head()?.peel_to_commit()?;
    if head.tree_id() == target.tree_id() {
        return Err(Error::Unchanged(short));
    }
    let mut checkout = git2::build::CheckoutBuilder::new();
    checkout.force();
    repo.checkout_tree(target.as_object(), Some(&mut checkout))?;
    // libgit2 writes with the process's umask: the agent's group must read.
    let tree = target.tree()?;
    let mut modes = Ok(());
    tree.walk(git2::TreeWalkMode::PreOrder, |parent, entry| {
        let path = dir.join(parent).join(entry.name().unwrap_or_default());
        let mode = if entry.kind() == Some(git2::ObjectType::Tree) { dir_mode } else { file_mode };
        if let Err(source) = fs::set_permissions(&path, fs::Permissions::from_mode(mode)) {
            modes = Err(Error::Io { path: path.display().to_string(), source });
            return git2::TreeWalkResult::Abort;
        }
        git2::TreeWalkResult::Ok
    })?;
    modes?;
    let subject = target.summary().ok().flatten().unwrap_or("").to_owned();
    let message = format!("Roll back to {short}: {subject}");
    commit(dir, author, &message)?.ok_or(Error::Unchanged(short))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, path: &str, text: &[u8]) {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn a_turn_that_changed_files_is_one_commit_and_one_that_did_not_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        write(dir, "notes/a.md", b"one");
        write(dir, "workspace.db", b"SQLite format 3\0");
        write(dir, "config.toml", b"[model]\n");
        write(dir, "cache/x.md", b"cached");
        write(dir, "blob.bin", b"\x00\x01\x02");
        write(dir, "big.md", &vec![b'a'; MAX_VERSIONED as usize + 1]);
        let first = commit(dir, "agent-a", "Wrote a note").unwrap().unwrap();
        assert_eq!(first.files, ["notes/a.md"], "only the small text files the agent owns");
        assert_eq!((first.author.as_str(), first.message.as_str()), ("agent-a", "Wrote a note"));
        assert_eq!(commit(dir, "agent-a", "again").unwrap(), None);
        write(dir, "notes/a.md", b"two");
        fs::remove_file(dir.join("big.md")).unwrap();
        write(dir, "notes/b.md", b"new");
        let second = commit(dir, "agent-a", "Changed it").unwrap().unwrap();
        assert_eq!(second.files, ["notes/a.md", "notes/b.md"]);
        // A versioned file that turns binary leaves the history.
        write(dir, "notes/b.md", b"\x00now binary");
        let third = commit(dir, "agent-a", "b went binary").unwrap().unwrap();
        assert_eq!(third.files, ["notes/b.md"]);
        let log = log(dir, 10).unwrap();
        assert_eq!(
            log.iter().map(|c| c.message.as_str()).collect::<Vec<_>>(),
            ["b went binary", "Changed it", "Wrote a note"]
        );
    }

    #[test]
    fn a_rollback_puts_the_files_back_as_a_new_commit_and_keeps_what_it_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        write(dir, "notes/plan.md", b"v1");
        let first = commit(dir, "agent-a", "v1").unwrap().unwrap();
        write(dir, "notes/plan.md", b"v2");
        write(dir, "notes/extra.md", b"added later");
        commit(dir, "agent-a", "v2").unwrap().unwrap();
        write(dir, "notes/plan.md", b"v3, never committed");
        let rolled = rollback(dir, &first.id[..10], "operator", 0o640, 0o770).unwrap();
        assert_eq!(fs::read(dir.join("notes/plan.md")).unwrap(), b"v1");
        assert!(!dir.join("notes/extra.md").exists());
        assert_eq!(fs::metadata(dir.join("notes/plan.md")).unwrap().permissions().mode() & 0o777, 0o640);
        assert!(rolled.message.starts_with(&format!("Roll back to {}: v1", &first.id[..12])), "{}", rolled.message);
        assert_eq!(rolled.author, "operator");
        let messages: Vec<String> = log(dir, 10).unwrap().into_iter().map(|c| c.message).collect();
        assert_eq!(messages[1], "Changes before a rollback", "v3 was kept: {messages:?}");
        assert!(matches!(rollback(dir, &first.id, "operator", 0o640, 0o770), Err(Error::Unchanged(_))));
        assert!(matches!(rollback(dir, "0123456789", "operator", 0o640, 0o770), Err(Error::NoCommit(_))));
    }
}

//! [`AgentFs`], an open AgentFS database (an agent database or a user
//! workspace's): opening it, the POSIX-shaped
//! operations callers use, and the transactions they run in.
//!
//! Every public operation runs in a single SQLite transaction (inside a
//! batch, a savepoint of the batch's); an error rolls it back, so the
//! database never holds half an operation.
//!
//! Owns: opening and configuring a database, the transaction and batch
//! machinery (`write_tx`, `read_tx`, [`AgentFs::batch`]), and what each
//! public operation checks and returns.
//!
//! Must not own: how a path resolves, or how a name is created, removed or
//! renamed across the layers of an overlay: each operation hands that to
//! the transaction's `Ctx` (`overlay`). Nor the SQL of single tables (`db`).

use std::path::Path;
use std::sync::Arc;

use rusqlite::{params, Connection, TransactionBehavior};

use crate::base::{BaseLayer, BaseSource};
use crate::db::{self, Times};
use crate::durable::Durability;
use crate::error::{Error, Result};
use crate::overlay::{Ctx, Node};
use crate::path::{join, split_last};
use crate::types::{DirEntry, SetAttr, Stat, Timestamp, PERMISSION_BITS, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG};

/// Inode number of the root directory (spec: Special Inodes).
pub const ROOT_INO: i64 = 1;
/// Default `fs_config.chunk_size` for new workspaces.
pub const DEFAULT_CHUNK_SIZE: u64 = 4096;
/// Symlinks followed while resolving one path before ELOOP, as Linux's limit.
pub const MAX_SYMLINK_FOLLOWS: usize = 40;
/// Access time is rewritten on read only when it is older than mtime or than
/// this many seconds, as Linux's relatime: reads then stay read-only.
const RELATIME_WINDOW_SECS: i64 = 24 * 60 * 60;

/// Freed pages are given back to the file system (a `VACUUM` after the
/// commit that freed them) once at least this many bytes are free ...
const RECLAIM_MIN_FREE_BYTES: u64 = 16 << 20;
/// ... and no more bytes are in use than free, and at most this many:
/// `VACUUM` copies the pages in use through a temporary database held in
/// memory (`temp_store = MEMORY`), and the components that open workspaces
/// run with 256 to 768 MiB (their units' `MemoryMax`). Auto-vacuum would
/// need no copy, but the reference SDK's engine corrupts a database that has
/// it on (specs/agentfs/README.md, "Interoperability notes").
const RECLAIM_MAX_USED_BYTES: u64 = 64 << 20;

/// How to open a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    /// Chunk size written to `fs_config` when the database is created; an
    /// existing database keeps its own, as the spec makes it immutable.
    pub chunk_size: u64,
    /// SQLite page size of a database this open creates (512..=65536, a
    /// power of two); `None` for SQLite's 4096. An existing database keeps
    /// its own: WAL mode cannot change it.
    pub page_size: Option<u32>,
    /// Read-only lower layer; `None` for a plain workspace.
    pub base: Option<BaseSource>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { chunk_size: DEFAULT_CHUNK_SIZE, page_size: None, base: None }
    }
}

/// An open AgentFS workspace.
pub struct AgentFs {
    conn: Connection,
    chunk_size: u64,
    file_size_limit: u64,
    base: Option<Box<dyn BaseLayer>>,
    owner: (u32, u32),
    batch: BatchState,
    /// The flushes that make a commit durable before it is acknowledged,
    /// shared with this process's other handles on the file (`durable`).
    durability: Arc<Durability>,
}

/// Whether operations run in their own transactions or inside a batch's.
#[derive(Debug, Clone, PartialEq)]
enum BatchState {
    None,
    Open,
    /// SQLite rolled the batch's transaction back by itself (it does on a
    /// full disk, an I/O error or an interrupted statement): every later
    /// operation of the batch must fail, or it would commit on its own.
    RolledBack {
        cause: String,
        errno: i32,
    },
}

/// One operation's savepoint inside a batch. Dropped without
/// [`OpSavepoint::release`] (an error, or a panic unwinding through the
/// operation) it rolls the operation back, so a batch never commits half of
/// one. The statements are prepared once and cached: a savepoint per
/// operation is the batch's per-operation cost.
struct OpSavepoint<'c> {
    conn: &'c Connection,
    released: bool,
}

impl<'c> OpSavepoint<'c> {
    fn begin(conn: &'c Connection) -> Result<Self> {
        conn.prepare_cached("SAVEPOINT agentfs_op")?.execute([])?;
        Ok(OpSavepoint { conn, released: false })
    }

    fn release(mut self) -> Result<()> {
        self.conn.prepare_cached("RELEASE agentfs_op")?.execute([])?;
        self.released = true;
        Ok(())
    }
}

/// Runs `op` in a savepoint of the transaction open on `conn`: it is rolled
/// back alone if it fails (or panics), whatever else the transaction holds.
pub(crate) fn in_savepoint<T>(conn: &Connection, op: impl FnOnce() -> Result<T>) -> Result<T> {
    let savepoint = OpSavepoint::begin(conn)?;
    let out = op()?;
    savepoint.release()?;
    Ok(out)
}

impl Drop for OpSavepoint<'_> {
    fn drop(&mut self) {
        if !self.released {
            // If SQLite already rolled the whole transaction back there is
            // nothing to undo, and this fails harmlessly.
            let _ = self.conn.execute_batch("ROLLBACK TO agentfs_op; RELEASE agentfs_op");
        }
    }
}

impl AgentFs {
    /// Opens the workspace at `path`, creating and initializing it if needed.
    pub fn open(path: impl AsRef<Path>) -> Result<AgentFs> {
        AgentFs::open_with(path, &OpenOptions::default())
    }

    /// Opens the workspace at `path` with explicit options.
    pub fn open_with(path: impl AsRef<Path>, options: &OpenOptions) -> Result<AgentFs> {
        let path = std::path::absolute(path.as_ref()).map_err(|e| Error::invalid(format!("database path: {e}")))?;
        let mut conn = db::open_shared(&path, options.page_size)?;
        let durability = Durability::of(&path).map_err(|source| Error::NotDurable { source })?;
        db::guard_audit_trail(&conn)?;
        let chunk_size = db::init(&mut conn, options.chunk_size)?;
        // A database this open created had no tables for the guards yet.
        conn.execute_batch(db::AUDIT_TRIGGERS_SQL)?;
        let file_size_limit = db::read_file_size_limit(&conn)?;
        let base = match &options.base {
            Some(source) => {
                let base = source.open()?;
                // Delta inodes are numbered above every base inode so that the
                // numbers `stat` reports never collide across layers.
                let floor = base.max_ino()?;
                conn.execute("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'fs_inode'", [floor])?;
                Some(base)
            }
            None => None,
        };
        Ok(AgentFs { conn, chunk_size, file_size_limit, base, owner: (0, 0), batch: BatchState::None, durability })
    }

    /// The chunk size of this workspace's `fs_data`.
    pub fn chunk_size(&self) -> u64 {
        self.chunk_size
    }

    /// The largest size a file of this workspace may grow to by a write or
    /// a truncate (EFBIG past it): [`crate::DEFAULT_FILE_SIZE_LIMIT`] unless
    /// the workspace set another.
    pub fn file_size_limit(&self) -> u64 {
        self.file_size_limit
    }

    /// Sets this workspace's file size limit (up to [`crate::MAX_FILE_SIZE`]),
    /// kept in the workspace (`fs_config`); files already larger stay as
    /// they are but cannot grow. Handles open elsewhere read it when they
    /// open the workspace.
    pub fn set_file_size_limit(&mut self, limit: u64) -> Result<()> {
        self.write_tx(|cx| db::write_file_size_limit(cx.conn, limit))?;
        self.file_size_limit = limit;
        Ok(())
    }

    /// Gives the pages freed by deleted or shrunk files back to the file
    /// system once enough are free (see [`RECLAIM_MIN_FREE_BYTES`]), so the
    /// database's size follows its content; returns whether it did. Runs
    /// after every commit, outside a batch. Best effort: it is
    /// skipped while another connection writes, and tried again after a
    /// later write.
    pub fn reclaim_free_pages(&mut self) -> Result<bool> {
        if self.batch != BatchState::None {
            return Ok(false);
        }
        // One cached statement: this runs after every commit.
        let (free, pages, page_size): (u64, u64, u64) = self
            .conn
            .prepare_cached("SELECT f.freelist_count, c.page_count, s.page_size FROM pragma_freelist_count() f, pragma_page_count() c, pragma_page_size() s")?
            .query_row([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
        let (free_bytes, used_bytes) = (free * page_size, (pages - free) * page_size);
        if free_bytes < RECLAIM_MIN_FREE_BYTES || used_bytes > free_bytes || used_bytes > RECLAIM_MAX_USED_BYTES {
            return Ok(false);
        }
        match self.conn.execute_batch("VACUUM") {
            Ok(()) => Ok(true),
            Err(error) => match Error::from(error) {
                Error::Busy => Ok(false),
                error => Err(error),
            },
        }
    }

    /// The underlying connection, for the checker and for read-only queries.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Makes every change this process committed durable, and copies the
    /// write-ahead log into the database file as far as readers allow (a
    /// passive checkpoint), so the file's size shows its content. Each
    /// write already returns only once it is on disk (`durable`); this is
    /// the explicit barrier for callers that want one (the FUSE mount's
    /// fsync).
    pub fn sync(&mut self) -> Result<()> {
        self.conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        self.durable(self.durability.all_committed())
    }

    /// How many flushes this process has run on this database file, over
    /// all its handles (a benchmark's measure of how many commits shared one).
    pub fn flushes(&self) -> u64 {
        self.durability.flushes()
    }

    /// How many transactions this process's writers of this database file
    /// committed, over all its handles (a benchmark's measure of how many
    /// writes shared one; a handle's own batches not counted).
    pub fn shared_commits(&self) -> u64 {
        self.durability.commit.commits()
    }

    fn durable(&self, commit: fsutil::Ticket) -> Result<()> {
        self.durability.wait(commit).map_err(|source| Error::NotDurable { source })
    }

    /// Sets the uid and gid given to files this handle creates (default 0:0).
    pub fn set_owner(&mut self, uid: u32, gid: u32) {
        self.owner = (uid, gid);
    }

    /// Runs one operation atomically: its own transaction, or inside a
    /// [`AgentFs::batch`] a savepoint, so a failed operation never leaves
    /// half its changes behind either way.
    pub(crate) fn write_tx<T>(&mut self, op: impl FnOnce(&Ctx<'_>) -> Result<T>) -> Result<T> {
        self.atomic(TransactionBehavior::Immediate, op)
    }

    pub(crate) fn read_tx<T>(&mut self, op: impl FnOnce(&Ctx<'_>) -> Result<T>) -> Result<T> {
        self.atomic(TransactionBehavior::Deferred, op)
    }

    fn atomic<T>(&mut self, behavior: TransactionBehavior, op: impl FnOnce(&Ctx<'_>) -> Result<T>) -> Result<T> {
        let (chunk_size, file_size_limit, base, owner) =
            (self.chunk_size, self.file_size_limit, self.base.as_deref(), self.owner);
        let run = |conn: &Connection| op(&Ctx { conn, chunk_size, file_size_limit, base, owner });
        match &self.batch {
            BatchState::None if matches!(behavior, TransactionBehavior::Immediate) => {
                // In the transaction this process's writers of the file
                // share (`commit`), on its writer connection.
                let durability = &self.durability;
                let (out, commit, committer) = durability.commit.run(run, || durability.committed())?;
                self.durable(commit)?;
                // The write is committed: a failed reclaim must not report
                // it as failed. Once per commit, by the writer that made it.
                if committer {
                    let _ = self.reclaim_free_pages();
                }
                Ok(out)
            }
            BatchState::None => {
                let tx = self.conn.transaction_with_behavior(behavior)?;
                let out = run(&tx)?;
                tx.commit()?;
                Ok(out)
            }
            BatchState::RolledBack { cause, errno } => {
                Err(Error::BatchRolledBack { cause: cause.clone(), errno: *errno })
            }
            BatchState::Open => {
                let outcome = in_savepoint(&self.conn, || run(&self.conn));
                if let Err(error) = &outcome {
                    if self.conn.is_autocommit() {
                        self.batch = BatchState::RolledBack { cause: error.to_string(), errno: error.errno() };
                    }
                }
                outcome
            }
        }
    }

    /// Group commit: runs `ops` against this workspace with all their
    /// changes in one transaction. Each operation inside stays atomic (a
    /// savepoint), and an error it returns can be handled inside `ops`; if
    /// `ops` itself returns an error, nothing of the batch is kept. Some
    /// errors (a full disk, an I/O error) make SQLite roll the whole
    /// transaction back: then every later operation of the batch and the
    /// batch itself fail with [`Error::BatchRolledBack`]. A crash before the
    /// batch returns loses the whole batch, never part of it.
    ///
    /// Every commit writes the B-tree pages it touched to the write-ahead
    /// log (a small-file create touches about eight: inode, dentry and its
    /// two indexes, data and its key, the sequence table, the header), so
    /// per-operation commits bound small-file creation to a few thousand a
    /// second; sharing the commit lifts that bound.
    pub fn batch<T>(&mut self, ops: impl FnOnce(&mut AgentFs) -> Result<T>) -> Result<T> {
        self.begin_batch()?;
        match ops(self) {
            Ok(out) => self.commit_batch().map(|()| out),
            // A rollback SQLite did by itself is the error to report: it
            // is why nothing was kept, whatever `ops` made of it.
            Err(error) => Err(self.end_batch(false).err().unwrap_or(error)),
        }
    }

    /// Opens a batch that stays open across calls until
    /// [`AgentFs::commit_batch`]: the same group commit as [`AgentFs::batch`]
    /// for callers whose operations arrive one at a time (the FUSE mount).
    pub fn begin_batch(&mut self) -> Result<()> {
        if self.batch != BatchState::None {
            return Err(Error::invalid("a batch is already open on this handle"));
        }
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        self.batch = BatchState::Open;
        Ok(())
    }

    /// Whether a batch is open (it may have been rolled back by SQLite).
    pub fn in_batch(&self) -> bool {
        self.batch != BatchState::None
    }

    /// Commits the open batch. If SQLite rolled it back by itself, or the
    /// commit fails, nothing of it is kept and the error says why; either
    /// way the handle is back to one transaction per operation.
    pub fn commit_batch(&mut self) -> Result<()> {
        self.end_batch(true)?;
        self.durable(self.durability.committed())?;
        // Committed: a failed reclaim must not report the batch as failed.
        let _ = self.reclaim_free_pages();
        Ok(())
    }

    fn end_batch(&mut self, keep: bool) -> Result<()> {
        let ended = match std::mem::replace(&mut self.batch, BatchState::None) {
            BatchState::None => return Err(Error::invalid("no batch is open on this handle")),
            BatchState::RolledBack { cause, errno } => Err(Error::BatchRolledBack { cause, errno }),
            BatchState::Open if keep => self.conn.execute_batch("COMMIT").map_err(Error::from),
            BatchState::Open => Ok(()),
        };
        if !self.conn.is_autocommit() {
            // The first error is the one to report; should the rollback fail
            // too, SQLite rolls back when the connection closes.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        ended
    }

    /// stat(2): metadata of `path`, following a final symlink.
    pub fn stat(&mut self, path: &str) -> Result<Stat> {
        self.read_tx(|cx| {
            let (_, node) = cx.resolve(path, true)?;
            cx.stat(&node)
        })
    }

    /// lstat(2): metadata of `path` itself, even if it is a symlink.
    pub fn lstat(&mut self, path: &str) -> Result<Stat> {
        self.read_tx(|cx| {
            let (_, node) = cx.resolve(path, false)?;
            cx.stat(&node)
        })
    }

    /// Whether `path` exists (without following a final symlink).
    pub fn exists(&mut self, path: &str) -> Result<bool> {
        match self.lstat(path) {
            Ok(_) => Ok(true),
            Err(Error::NotFound { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Creates a regular file and writes `data` as its whole content,
    /// replacing any existing content. Missing parent directories are
    /// created, as the spec's implementation notes describe.
    pub fn write_file(&mut self, path: &str, data: &[u8]) -> Result<()> {
        self.write_tx(|cx| {
            let (parent, name) = split_last(path)?;
            let (parent, parent_node) = cx.mkdir_all(&parent)?;
            let ino = match cx.lookup_child(&parent, &parent_node, name)? {
                // An existing name may be a symlink to follow: resolve it whole.
                Some(_) => {
                    let (real, node) = cx.resolve(path, true)?;
                    cx.regular_in_delta(&real, node)?
                }
                None => cx.create_in(&parent, parent_node, name, S_IFREG | 0o644, 0, None)?,
            };
            db::replace_content(cx.conn, cx.chunk_size, cx.file_size_limit, ino, data)
        })
    }

    /// Creates an empty regular file with `permissions`; EEXIST if the name is taken.
    pub fn create(&mut self, path: &str, permissions: u32) -> Result<Stat> {
        self.write_tx(|cx| {
            let ino = cx.create_node(path, S_IFREG | (permissions & PERMISSION_BITS), 0, None)?;
            cx.stat(&Node::Delta(ino))
        })
    }

    /// Writes `data` at `offset` of an existing regular file, zero-filling any
    /// gap; returns the new size.
    pub fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<u64> {
        self.write_tx(|cx| {
            let (real, node) = cx.resolve(path, true)?;
            let ino = cx.regular_in_delta(&real, node)?;
            db::write_chunks(cx.conn, cx.chunk_size, cx.file_size_limit, ino, offset, data)
        })
    }

    /// Appends `data` to an existing regular file; returns the new size.
    pub fn append(&mut self, path: &str, data: &[u8]) -> Result<u64> {
        self.write_tx(|cx| {
            let (real, node) = cx.resolve(path, true)?;
            let ino = cx.regular_in_delta(&real, node)?;
            let size = db::inode_stat(cx.conn, ino, true)?.size;
            db::write_chunks(cx.conn, cx.chunk_size, cx.file_size_limit, ino, size, data)
        })
    }

    /// The whole content of a regular file.
    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>> {
        self.read(path, 0, u64::MAX)
    }

    /// Up to `len` bytes from `offset`, reading only the chunks that range touches.
    pub fn read(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let (data, touched) = self.read_tx(|cx| {
            let (real, node) = cx.resolve(path, true)?;
            let stat = cx.stat(&node)?;
            cx.require_regular(&real, &stat)?;
            match node {
                Node::Delta(ino) => {
                    let data = db::read_chunks(cx.conn, cx.chunk_size, ino, offset, len)?;
                    let now = Timestamp::now();
                    let stale = stat.atime <= stat.mtime || now.secs - stat.atime.secs > RELATIME_WINDOW_SECS;
                    Ok((data, stale.then_some((ino, now))))
                }
                Node::Base(_) => Ok((cx.base()?.read(&real, offset, len)?, None)),
            }
        })?;
        if let Some((ino, now)) = touched {
            // Spec: Reading a File, step 4 (update access time). Best effort,
            // as the kernel's lazy atime: a read must not fail because its
            // bookkeeping cannot be written (a full disk, a writer holding
            // the lock); the next read tries again.
            let _ = db::set_times(&self.conn, ino, &Times { atime: Some(now), ..Times::default() });
        }
        Ok(data)
    }

    /// Sets the size of a regular file (truncate(2)).
    pub fn truncate(&mut self, path: &str, size: u64) -> Result<()> {
        self.set_attr(path, &SetAttr { size: Some(size), ..SetAttr::default() }).map(drop)
    }

    /// Creates a directory; EEXIST if the name is taken, ENOENT if the parent is missing.
    pub fn mkdir(&mut self, path: &str, permissions: u32) -> Result<Stat> {
        self.write_tx(|cx| {
            let ino = cx.create_node(path, S_IFDIR | (permissions & PERMISSION_BITS), 0, None)?;
            cx.stat(&Node::Delta(ino))
        })
    }

    /// Creates a special file or regular file from a full mode (mknod(2)).
    pub fn mknod(&mut self, path: &str, mode: u32, rdev: u64) -> Result<Stat> {
        self.write_tx(|cx| {
            if matches!(mode & S_IFMT, S_IFDIR | S_IFLNK) || crate::FileType::from_mode(mode).is_none() {
                return Err(Error::invalid(format!("mknod cannot create mode {mode:o}")));
            }
            let ino = cx.create_node(path, mode, rdev, None)?;
            cx.stat(&Node::Delta(ino))
        })
    }

    /// Creates a symlink at `path` pointing at `target` (symlink(2) argument order reversed
    /// to read as "at path, link to target").
    pub fn symlink(&mut self, path: &str, target: &str) -> Result<Stat> {
        self.write_tx(|cx| {
            if target.is_empty() || target.len() > crate::MAX_PATH_LEN {
                return Err(Error::invalid("symlink target must be 1 to PATH_MAX bytes"));
            }
            let ino = cx.create_node(path, S_IFLNK | 0o777, 0, Some(target))?;
            cx.stat(&Node::Delta(ino))
        })
    }

    /// Target of the symlink at `path`.
    pub fn readlink(&mut self, path: &str) -> Result<String> {
        self.read_tx(|cx| {
            let (real, node) = cx.resolve(path, false)?;
            if !cx.stat(&node)?.is_symlink() {
                return Err(Error::invalid(format!("{real}: not a symbolic link")));
            }
            cx.readlink(&real, &node)
        })
    }

    /// Entries of the directory at `path`, merged across overlay layers and
    /// sorted by name; `.` and `..` are not listed.
    pub fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        Ok(self
            .readdir_plus(path)?
            .into_iter()
            .map(|(name, stat)| DirEntry { name, ino: stat.ino, file_type: stat.file_type() })
            .collect())
    }

    /// [`AgentFs::readdir`] with each entry's full `lstat`, read in the same
    /// transaction (what FUSE READDIRPLUS and `ls -l` need, without a path
    /// resolution per entry).
    pub fn readdir_plus(&mut self, path: &str) -> Result<Vec<(String, Stat)>> {
        self.read_tx(|cx| {
            let (real, node) = cx.resolve(path, true)?;
            if !cx.stat(&node)?.is_dir() {
                return Err(Error::NotADirectory { path: real });
            }
            cx.merged_children(&real, &node)?.into_iter().map(|(name, child)| Ok((name, cx.stat(&child)?))).collect()
        })
    }

    /// Removes a non-directory name; the inode goes with its last link.
    pub fn unlink(&mut self, path: &str) -> Result<()> {
        self.write_tx(|cx| {
            let (parent, parent_node, name) = cx.resolve_parent(path)?;
            let child = cx.require_child(&parent, &parent_node, name)?;
            if cx.stat(&child)?.is_dir() {
                return Err(Error::IsADirectory { path: join(&parent, name) });
            }
            cx.remove_entry(&parent, &parent_node, name, &child)
        })
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, path: &str) -> Result<()> {
        self.write_tx(|cx| {
            let (parent, parent_node, name) = cx.resolve_parent(path)?;
            let child = cx.require_child(&parent, &parent_node, name)?;
            let child_path = join(&parent, name);
            if !cx.stat(&child)?.is_dir() {
                return Err(Error::NotADirectory { path: child_path });
            }
            if !cx.merged_children(&child_path, &child)?.is_empty() {
                return Err(Error::DirectoryNotEmpty { path: child_path });
            }
            cx.remove_entry(&parent, &parent_node, name, &child)
        })
    }

    /// Adds the name `new_path` for the inode at `existing` (link(2); a final
    /// symlink in `existing` is not followed).
    pub fn link(&mut self, existing: &str, new_path: &str) -> Result<Stat> {
        self.write_tx(|cx| {
            let (source_path, source) = cx.resolve(existing, false)?;
            if cx.stat(&source)?.is_dir() {
                return Err(Error::NotPermitted { reason: format!("{source_path}: hard link to a directory") });
            }
            let (parent, parent_node, name) = cx.resolve_parent(new_path)?;
            if cx.lookup_child(&parent, &parent_node, name)?.is_some() {
                return Err(Error::AlreadyExists { path: join(&parent, name) });
            }
            let ino = cx.in_delta(&source_path, source)?;
            let parent_ino = cx.dir_in_delta(&parent)?;
            db::add_dentry(cx.conn, parent_ino, name, ino)?;
            cx.remove_whiteout(&join(&parent, name))?;
            let now = Timestamp::now();
            db::set_times(cx.conn, ino, &Times::changed(now))?;
            cx.touch_dir(parent_ino, now)?;
            cx.stat(&Node::Delta(ino))
        })
    }

    /// Moves `old_path` to `new_path`, atomically replacing a target that
    /// rename(2) would replace.
    pub fn rename(&mut self, old_path: &str, new_path: &str) -> Result<()> {
        self.write_tx(|cx| cx.rename(old_path, new_path))
    }

    /// Changes attributes of `path` (following a final symlink); returns the new stat.
    pub fn set_attr(&mut self, path: &str, attr: &SetAttr) -> Result<Stat> {
        self.write_tx(|cx| {
            let (real, node) = cx.resolve(path, true)?;
            cx.set_attr(&real, node, attr)
        })
    }

    /// Changes attributes of `path` itself, even if it is a symlink (lchown, lutimes).
    pub fn set_attr_nofollow(&mut self, path: &str, attr: &SetAttr) -> Result<Stat> {
        self.write_tx(|cx| {
            let (real, node) = cx.resolve(path, false)?;
            cx.set_attr(&real, node, attr)
        })
    }

    /// chmod(2): replaces the permission bits, keeping the file type.
    pub fn chmod(&mut self, path: &str, permissions: u32) -> Result<()> {
        self.set_attr(path, &SetAttr { permissions: Some(permissions), ..SetAttr::default() }).map(drop)
    }

    /// chown(2): sets owner and group.
    pub fn chown(&mut self, path: &str, uid: u32, gid: u32) -> Result<()> {
        self.set_attr(path, &SetAttr { uid: Some(uid), gid: Some(gid), ..SetAttr::default() }).map(drop)
    }

    /// utimes(2): sets access and modification time (Unix seconds).
    pub fn set_times(&mut self, path: &str, atime: i64, mtime: i64) -> Result<()> {
        let (atime, mtime) = (Some(Timestamp::from_secs(atime)), Some(Timestamp::from_secs(mtime)));
        self.set_attr(path, &SetAttr { atime, mtime, ..SetAttr::default() }).map(drop)
    }

    /// Value of the extended attribute `name` of `path` (not following a final symlink).
    pub fn get_xattr(&mut self, path: &str, name: &str) -> Result<Vec<u8>> {
        self.read_tx(|cx| {
            let (real, node) = cx.resolve(path, false)?;
            cx.xattrs(&real, &node)?.remove(name).ok_or_else(|| Error::NoSuchAttribute { name: name.to_owned() })
        })
    }

    /// Names of the extended attributes of `path`, sorted.
    pub fn list_xattr(&mut self, path: &str) -> Result<Vec<String>> {
        self.read_tx(|cx| {
            let (real, node) = cx.resolve(path, false)?;
            Ok(cx.xattrs(&real, &node)?.into_keys().collect())
        })
    }

    /// Sets the extended attribute `name` of `path`.
    pub fn set_xattr(&mut self, path: &str, name: &str, value: &[u8]) -> Result<()> {
        if name.is_empty() || name.len() > crate::MAX_NAME_LEN {
            return Err(Error::invalid("xattr names are 1 to 255 bytes"));
        }
        self.write_tx(|cx| {
            let (real, node) = cx.resolve(path, false)?;
            let ino = cx.in_delta(&real, node)?;
            db::xattr_set(cx.conn, ino, name, value)?;
            db::set_times(cx.conn, ino, &Times::changed(Timestamp::now()))
        })
    }

    /// Removes the extended attribute `name` of `path`; ENODATA if it is not set.
    pub fn remove_xattr(&mut self, path: &str, name: &str) -> Result<()> {
        self.write_tx(|cx| {
            let (real, node) = cx.resolve(path, false)?;
            if !cx.xattrs(&real, &node)?.contains_key(name) {
                return Err(Error::NoSuchAttribute { name: name.to_owned() });
            }
            let ino = cx.in_delta(&real, node)?;
            cx.conn.execute("DELETE FROM clawos_xattr WHERE ino = ? AND name = ?", params![ino, name])?;
            db::set_times(cx.conn, ino, &Times::changed(Timestamp::now()))
        })
    }
}

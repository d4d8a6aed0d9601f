//! Acknowledged means on disk (specs/agentfs/README.md, "Connection
//! settings"): a write an [`crate::AgentFs`] method returned from survives
//! a power cut, and the writers of one database in this process share the
//! flushes that make it so.
//!
//! Connections run WAL with `synchronous = NORMAL`: a commit appends its
//! pages to the write-ahead log without flushing it (SQLite flushes the log
//! only before a checkpoint), so it survives a killed process but not a
//! power cut. After each commit the writer flushes the log (fdatasync(2) of
//! the `-wal` file) through [`fsutil::SharedFlush`], which lets concurrent
//! writers share one flush: the cost of durability is latency per commit,
//! not commits per second. `synchronous = FULL` would flush inside each
//! commit, with SQLite's write lock held, one writer after the other.
//!
//! Owns: the flush state of each database file this process has open,
//! shared by all of its handles, and the registry that gives those handles
//! one [`SharedCommit`] too (`commit`: the writer connection whose
//! transaction they share, which queues this process's writers on a mutex
//! instead of SQLite's busy handler, which sleeps in steps of
//! milliseconds). Must not own: transactions (`commit`, `database.rs`) or
//! SQL.
//!
//! What a failure costs: a failed flush is final for the database in this
//! process (see [`fsutil::SharedFlush`]): every later write fails with
//! [`crate::Error::NotDurable`] until all its handles are closed.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use fsutil::{SharedFlush, Ticket};

use crate::commit::SharedCommit;

/// One database file's flush state, shared by this process's handles.
pub(crate) struct Durability {
    database: PathBuf,
    wal: PathBuf,
    /// The transaction this process's writers of the file share.
    pub(crate) commit: SharedCommit,
    sync: SharedFlush,
    /// The write-ahead log open for flushing, with its inode number: the
    /// log is made anew when the last connection of every process closed
    /// it and a new one opened the database.
    open_wal: Mutex<Option<(u64, File)>>,
}

/// A database file by device and inode, whatever path named it.
type FileId = (u64, u64);

/// The databases this process has open, so that every handle of one file
/// shares its flushes.
static OPEN: LazyLock<Mutex<HashMap<FileId, Weak<Durability>>>> = LazyLock::new(Mutex::default);

impl Durability {
    /// The flush state of the database file at `database`, shared with the
    /// other handles of this process open on the same file.
    pub(crate) fn of(database: &Path) -> io::Result<Arc<Durability>> {
        let metadata = std::fs::metadata(database)?;
        let key = (metadata.dev(), metadata.ino());
        let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|_, durability| durability.strong_count() > 0);
        if let Some(durability) = open.get(&key).and_then(Weak::upgrade) {
            return Ok(durability);
        }
        let mut wal = OsString::from(database.as_os_str());
        wal.push("-wal");
        let durability = Arc::new(Durability {
            database: database.to_owned(),
            wal: PathBuf::from(wal),
            commit: SharedCommit::new(database),
            sync: SharedFlush::new(),
            open_wal: Mutex::default(),
        });
        open.insert(key, Arc::downgrade(&durability));
        Ok(durability)
    }

    /// Records a commit that just returned; wait on its ticket before
    /// acknowledging it.
    pub(crate) fn committed(&self) -> Ticket {
        self.sync.written()
    }

    /// Every commit of this process so far.
    pub(crate) fn all_committed(&self) -> Ticket {
        self.sync.all_written()
    }

    /// Returns once the commit of `ticket` is on disk.
    pub(crate) fn wait(&self, ticket: Ticket) -> io::Result<()> {
        self.sync.wait(ticket, || self.flush())
    }

    /// Flushes run so far (the benchmark's measure of sharing).
    pub(crate) fn flushes(&self) -> u64 {
        self.sync.flushes()
    }

    /// fdatasync(2) of the write-ahead log the path names now; of its
    /// directory too when the log is one this process has not flushed yet
    /// (SQLite does not sync the directory when it makes the log, and a
    /// power cut could otherwise take the log whole). With no log (the
    /// database is not in WAL mode, or the last connection checkpointed it
    /// into the database and removed it) the database file is flushed.
    fn flush(&self) -> io::Result<()> {
        let not_found = |error: &io::Error| error.kind() == io::ErrorKind::NotFound;
        let mut open_wal = self.open_wal.lock().unwrap_or_else(PoisonError::into_inner);
        let inode = match std::fs::metadata(&self.wal) {
            Ok(metadata) => Some(metadata.ino()),
            Err(error) if not_found(&error) => None,
            Err(error) => return Err(error),
        };
        if inode.is_none() {
            *open_wal = None;
        } else if open_wal.as_ref().map(|(open, _)| *open) != inode {
            *open_wal = match File::open(&self.wal) {
                Ok(file) => {
                    let inode = file.metadata()?.ino();
                    if let Some(dir) = self.wal.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                        fsutil::sync_dir(dir)?;
                    }
                    Some((inode, file))
                }
                Err(error) if not_found(&error) => None,
                Err(error) => return Err(error),
            };
        }
        match open_wal.as_ref() {
            Some((_, wal)) => wal.sync_data(),
            None => File::open(&self.database)?.sync_data(),
        }
    }
}

//! Group commit across FUSE requests.
//!
//! One SQLite commit per request bounds the mount to a few thousand small
//! files a second (each commit writes the handful of B-tree pages it
//! touched to the write-ahead log). Instead, the mount keeps one batch
//! ([`AgentFs::begin_batch`]) open across requests and commits it when it
//! is [`CommitPolicy::interval`] old, when it holds
//! [`MAX_BATCH_BYTES`] of file data, on fsync, and at unmount. Each request
//! stays atomic inside the batch (a savepoint), and every request sees the
//! writes before it, so processes using the mount notice no difference.
//!
//! What changes is durability, and it changes to what a local filesystem
//! promises: ext4 commits its journal every 5 s, and only fsync(2) makes a
//! write durable. Here a write reaches the database within the interval
//! (10 ms by default) even if the mount process is then killed; fsync waits
//! for the commit. A commit that fails (the disk filled up under another
//! writer) loses the batch: it is logged and reported by the next fsync,
//! as the kernel reports writeback errors. To keep that from happening on a
//! filling disk, no batch is opened while less than [`LOW_SPACE_BYTES`] are
//! free: then each request commits alone and gets its own ENOSPC.

use std::ffi::CString;
use std::ops::{Deref, DerefMut};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use agentfs::AgentFs;
use libc::c_int;

/// The default [`CommitPolicy::interval`].
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_millis(10);
/// File data a batch may hold before it is committed, so a large write
/// neither grows the write-ahead log without bound nor risks much at once.
pub const MAX_BATCH_BYTES: u64 = 16 << 20;
/// Below this much free space under the database, requests commit one by
/// one (batching resumes once space is back).
pub const LOW_SPACE_BYTES: u64 = 256 << 20;

/// When the mount commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitPolicy {
    /// How long a batch may stay open; zero commits every request alone.
    pub interval: Duration,
}

impl Default for CommitPolicy {
    fn default() -> Self {
        CommitPolicy { interval: DEFAULT_COMMIT_INTERVAL }
    }
}

/// The workspace and the batch it has open.
pub(crate) struct Shared {
    fs: AgentFs,
    policy: CommitPolicy,
    batch: Option<OpenBatch>,
    /// A failed group commit not yet reported to anyone (its errno).
    unreported_loss: Option<c_int>,
}

struct OpenBatch {
    since: Instant,
    bytes: u64,
}

impl Deref for Shared {
    type Target = AgentFs;
    fn deref(&self) -> &AgentFs {
        &self.fs
    }
}

impl DerefMut for Shared {
    fn deref_mut(&mut self) -> &mut AgentFs {
        &mut self.fs
    }
}

impl Shared {
    /// Commits the open batch, if any. A failure loses the batch: it is
    /// logged, kept for the next fsync to report, and returned.
    fn commit(&mut self) -> Result<(), c_int> {
        let Some(batch) = self.batch.take() else { return Ok(()) };
        match self.fs.commit_batch() {
            Ok(()) => Ok(()),
            Err(err) => {
                let errno = err.errno();
                eprintln!(
                    "agentfs mount: group commit failed, the last {} ms of changes are lost: {err}",
                    batch.since.elapsed().as_millis()
                );
                self.unreported_loss = Some(errno);
                Err(errno)
            }
        }
    }

    fn batch_is_due(&self) -> bool {
        self.batch
            .as_ref()
            .is_some_and(|batch| batch.since.elapsed() >= self.policy.interval || batch.bytes >= MAX_BATCH_BYTES)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Unmount: whatever was acknowledged goes in before the database
        // closes (closing would roll an open batch back). A failure is logged.
        let _ = self.commit();
    }
}

/// What the committer thread is woken for.
enum Wake {
    /// A request opened a batch: commit it once it is due.
    Opened,
    /// The mount is ending.
    Stop,
}

/// The mount's handle on the workspace, shared with the committer thread.
pub(crate) struct Workspace {
    shared: Arc<Mutex<Shared>>,
    /// The directory holding the database: its free space decides batching.
    db_dir: PathBuf,
    wake_committer: mpsc::Sender<Wake>,
}

impl Workspace {
    /// The workspace and the thread that commits a batch left open by the
    /// last request once it is due (requests only commit when the next one
    /// arrives). The thread sleeps while no batch is open.
    pub(crate) fn new(fs: AgentFs, db_dir: PathBuf, policy: CommitPolicy) -> (Workspace, Committer) {
        let shared = Arc::new(Mutex::new(Shared { fs, policy, batch: None, unreported_loss: None }));
        let (wake_committer, wakes) = mpsc::channel();
        let handle = (!policy.interval.is_zero()).then(|| {
            let shared = Arc::downgrade(&shared);
            thread::spawn(move || commit_when_due(&shared, &wakes, policy.interval))
        });
        let committer = Committer { wake: wake_committer.clone(), handle };
        (Workspace { shared, db_dir, wake_committer }, committer)
    }

    /// The directory holding the database.
    pub(crate) fn db_dir(&self) -> &Path {
        &self.db_dir
    }

    /// The workspace. Requests lock it once per library call, and never
    /// twice at once: the lock is not reentrant.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }

    /// Called before a request that changes the workspace and will write
    /// `bytes` of file data: commits a batch that is due, then opens one
    /// if the policy and the free space allow. (Should the committer thread
    /// commit the batch before the request's own calls, they commit alone.)
    pub(crate) fn will_write(&self, bytes: u64) -> Result<(), c_int> {
        let mut shared = self.lock();
        if shared.batch_is_due() {
            shared.commit()?;
        }
        let batching = !shared.policy.interval.is_zero();
        if shared.batch.is_none() && batching && free_bytes(&self.db_dir).is_ok_and(|free| free >= LOW_SPACE_BYTES) {
            shared.fs.begin_batch().map_err(|err| err.errno())?;
            shared.batch = Some(OpenBatch { since: Instant::now(), bytes: 0 });
            // Never blocks; fails only once the committer is gone at unmount,
            // when the last batch is committed on drop instead.
            let _ = self.wake_committer.send(Wake::Opened);
        }
        if let Some(batch) = &mut shared.batch {
            batch.bytes += bytes;
        }
        Ok(())
    }

    /// fsync: commits now and makes every commit durable; reports a loss
    /// since the last fsync first, once, as the kernel reports writeback errors.
    pub(crate) fn sync(&self) -> Result<(), c_int> {
        let mut shared = self.lock();
        let committed = shared.commit();
        if let Some(errno) = shared.unreported_loss.take() {
            return Err(errno);
        }
        committed?;
        shared.fs.sync().map_err(|err| err.errno())
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic while holding the lock leaves nothing half done in the
    // database (every operation is a savepoint), so the lock is usable.
    shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The committer thread: asleep until a batch is opened, then awake until
/// that batch is committed (by itself once due, or by a request).
fn commit_when_due(shared: &Weak<Mutex<Shared>>, wakes: &mpsc::Receiver<Wake>, interval: Duration) {
    while let Ok(Wake::Opened) = wakes.recv() {
        loop {
            let Some(shared) = shared.upgrade() else { return };
            let wait = {
                let mut shared = lock(&shared);
                let Some(since) = shared.batch.as_ref().map(|batch| batch.since) else { break };
                if shared.batch_is_due() {
                    // A failure is logged and kept for the next fsync.
                    let _ = shared.commit();
                    break;
                }
                interval.saturating_sub(since.elapsed())
            };
            drop(shared);
            match wakes.recv_timeout(wait) {
                Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Wake::Opened) | Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

/// The committer thread; [`Committer::stop`] ends it.
pub(crate) struct Committer {
    wake: mpsc::Sender<Wake>,
    handle: Option<JoinHandle<()>>,
}

impl Committer {
    pub(crate) fn stop(self) {
        let _ = self.wake.send(Wake::Stop);
        if let Some(handle) = self.handle {
            // The thread only commits; a panic there was already printed.
            let _ = handle.join();
        }
    }
}

/// Bytes available to unprivileged writers on the filesystem holding `dir`.
pub(crate) fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let stat = statvfs(dir)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

pub(crate) fn statvfs(dir: &Path) -> std::io::Result<libc::statvfs> {
    let path = CString::new(dir.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: an all-zero statvfs is a valid value of the plain C struct.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated path and `stat` a writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stat)
}

//! A shared flush (fsync(2)): writers that may only acknowledge a write
//! once it is on disk share one flush, instead of queueing one flush each.
//! (Not group commit, which in ClawOS is many operations in one
//! transaction: `AgentFs::batch`.)
//!
//! A writer writes (the kernel has the data), takes a [`Ticket`], and
//! [`SharedFlush::wait`]s on it. If no flush is running, it runs one itself,
//! covering every write ticketed before the flush started; if one is
//! running, it waits for it, and then for the next one if the running one
//! started before its write. With eight writers a flush covers about eight
//! writes: durability costs each write the latency of about two flushes at
//! worst, not the throughput of one flush per write.
//!
//! A failed flush is final: after fsync(2) reports an error the kernel may
//! have dropped the dirty pages, and a later fsync(2) could succeed without
//! the lost data ever reaching the disk. Every wait after it fails with the
//! first error, so nothing written after it is acknowledged either.

use std::io;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// One write's place in the order of writes, to wait on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[must_use = "a write is acknowledged only once its ticket was waited on"]
pub struct Ticket(u64);

/// The flush state of one file (or set of files flushed together).
#[derive(Debug, Default)]
pub struct SharedFlush {
    state: Mutex<State>,
    flushed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Writes ticketed so far.
    written: u64,
    /// Every write up to this ticket is on disk.
    durable: u64,
    flushing: bool,
    /// The first flush error, which every later wait reports.
    failed: Option<(io::ErrorKind, String)>,
    /// Flushes run so far.
    flushes: u64,
}

impl SharedFlush {
    pub fn new() -> SharedFlush {
        SharedFlush::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a write that has reached the kernel (call it after the
    /// write returned, never before) and returns its ticket.
    pub fn written(&self) -> Ticket {
        let mut state = self.lock();
        state.written += 1;
        Ticket(state.written)
    }

    /// A ticket for every write recorded so far (for an explicit sync).
    pub fn all_written(&self) -> Ticket {
        Ticket(self.lock().written)
    }

    /// Returns once the write of `ticket` is on disk. `flush` must make
    /// every write made so far durable (fsync(2) or fdatasync(2) of the
    /// file); it runs at most once, in this thread, when no other caller's
    /// flush covers the write.
    pub fn wait(&self, ticket: Ticket, flush: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let mut flush = Some(flush);
        let mut state = self.lock();
        loop {
            if let Some((kind, message)) = &state.failed {
                return Err(io::Error::new(
                    *kind,
                    format!("an earlier flush failed, nothing since is durable: {message}"),
                ));
            }
            if state.durable >= ticket.0 {
                return Ok(());
            }
            if state.flushing {
                state = self.flushed.wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let Some(flush) = flush.take() else {
                // Unreachable: a flush this thread ran covered its ticket.
                return Err(io::Error::other("flushed, yet the write is not durable"));
            };
            state.flushing = true;
            let covers = state.written;
            drop(state);
            let outcome = flush();
            state = self.lock();
            state.flushing = false;
            state.flushes += 1;
            match outcome {
                Ok(()) => state.durable = state.durable.max(covers),
                Err(error) => {
                    state.failed = Some((error.kind(), error.to_string()));
                    self.flushed.notify_all();
                    return Err(error);
                }
            }
            self.flushed.notify_all();
        }
    }

    /// How many flushes have run (a benchmark's and a test's measure of
    /// how many writes each one covered).
    pub fn flushes(&self) -> u64 {
        self.lock().flushes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn concurrent_writers_share_flushes_and_none_returns_before_a_flush_that_began_after_its_write() {
        let sync = Arc::new(SharedFlush::new());
        // What the "disk" holds: the highest write a flush started after.
        let written = Arc::new(AtomicU64::new(0));
        let on_disk = Arc::new(AtomicU64::new(0));
        let writers: Vec<_> = (0..8)
            .map(|_| {
                let (sync, written, on_disk) = (sync.clone(), written.clone(), on_disk.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let mine = written.fetch_add(1, Ordering::SeqCst) + 1;
                        let ticket = sync.written();
                        sync.wait(ticket, || {
                            let covered = written.load(Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(1));
                            on_disk.fetch_max(covered, Ordering::SeqCst);
                            Ok(())
                        })
                        .unwrap();
                        assert!(on_disk.load(Ordering::SeqCst) >= mine, "acknowledged before its flush");
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let flushes = sync.flushes();
        assert!(flushes < 400, "{flushes} flushes for 400 writes: none shared");
        assert!(flushes > 0);
    }

    #[test]
    fn a_failed_flush_fails_every_later_wait() {
        let sync = SharedFlush::new();
        let first = sync.written();
        let error = sync.wait(first, || Err(io::Error::from_raw_os_error(5))).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(5));
        let second = sync.written();
        let error = sync.wait(second, || Ok(())).unwrap_err();
        assert!(error.to_string().contains("an earlier flush failed"), "{error}");
        // An explicit sync of nothing new still reports it.
        assert!(sync.wait(sync.all_written(), || Ok(())).is_err());
    }
}

//! The shared commit (specs/agentfs/README.md, "Connection settings"): the
//! writers of one database in this process share a transaction, so writes
//! that arrive together cost one commit and one flush between them, not
//! one of each per write.
//!
//! A write takes the process's writer connection for the file, runs its
//! operation in a savepoint of the open transaction (beginning one if none
//! is open) and, if another writer is already queued for the connection,
//! leaves the transaction open for it: the last writer of a burst commits
//! for every operation the transaction holds, and each of their writers
//! then waits for the flush that puts the commit on disk (`durable`) before
//! its write is acknowledged. A transaction holds at most [`MAX_HELD`]
//! operations, so a steady stream of writers cannot keep one open. One
//! handle's own batch ([`crate::AgentFs::batch`]) runs on that handle's
//! connection, as before.
//!
//! Owns: each database's writer connection in this process and the
//! transaction its writers share. Must not own: the flushes (`durable`),
//! the operations (`database.rs`).
//!
//! What a failure costs: an operation that fails is rolled back to its own
//! savepoint, and the others stay. One that makes SQLite roll the whole
//! transaction back (a full disk, an I/O error), or a failed commit, fails
//! every write the transaction held, each with [`Error::NotCommitted`] (the
//! failing one with its own error): none of them is acknowledged, none is
//! kept.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use fsutil::Ticket;
use rusqlite::Connection;

use crate::db;
use crate::error::{Error, Result};

/// The most operations one shared transaction holds before it is committed
/// even though writers are queued: the latency a write can add to the
/// writers before it is bounded.
pub(crate) const MAX_HELD: usize = 64;

/// How many failed transactions are remembered for the writers still to
/// wake up and read theirs: far more than can fail while one waits.
const FAILURES_KEPT: usize = 64;

/// One database file's writer connection and its shared transaction.
pub(crate) struct SharedCommit {
    database: PathBuf,
    writer: Mutex<Writer>,
    /// Signalled when a transaction ends (committed or not).
    ended: Condvar,
    /// Writers waiting for the connection: while one is, the transaction
    /// stays open for it.
    queued: AtomicUsize,
}

#[derive(Default)]
struct Writer {
    /// Opened at the first write.
    conn: Option<Connection>,
    /// Operations the open transaction holds (0: none is open).
    held: usize,
    /// The open transaction's number (or the next one's); they start at 1.
    number: u64,
    /// Every transaction up to this number has ended.
    ended: u64,
    /// The flush ticket of the last commit, which covers every transaction
    /// ended so far.
    ticket: Option<Ticket>,
    /// The last transactions that ended without a commit, with why.
    failed: VecDeque<(u64, String, i32)>,
    /// Transactions committed so far.
    commits: u64,
}

impl SharedCommit {
    pub(crate) fn new(database: &Path) -> SharedCommit {
        SharedCommit {
            database: database.to_owned(),
            writer: Mutex::new(Writer { number: 1, ..Writer::default() }),
            ended: Condvar::new(),
            queued: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `op` in the shared transaction and returns its result once the
    /// transaction holding it committed, with the ticket to wait on before
    /// acknowledging it, and whether this call was the one that committed
    /// (its caller then does the once-per-commit upkeep: reclaiming free
    /// pages). `ticket` records a commit that just returned
    /// (`Durability::committed`); it runs in the thread that commits.
    pub(crate) fn run<T>(
        &self,
        op: impl FnOnce(&Connection) -> Result<T>,
        ticket: impl FnOnce() -> Ticket,
    ) -> Result<(T, Ticket, bool)> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        let mut writer = self.lock();
        self.queued.fetch_sub(1, Ordering::SeqCst);
        let mine = writer.number;
        let outcome = self.run_held(&mut writer, op);
        // The last writer of a burst ends the transaction; a writer whose
        // transaction is held for others returns with it.
        let committer = writer.held > 0 && (self.queued.load(Ordering::SeqCst) == 0 || writer.held >= MAX_HELD);
        if committer {
            self.end(&mut writer, ticket);
        } else if writer.held == 0 && writer.conn.as_ref().is_some_and(|conn| !conn.is_autocommit()) {
            // Begun for this operation alone, which failed: nothing to keep.
            self.end(&mut writer, ticket);
        }
        let out = outcome?;
        while writer.ended < mine {
            writer = self.ended.wait(writer).unwrap_or_else(PoisonError::into_inner);
        }
        if let Some((_, cause, errno)) = writer.failed.iter().find(|(number, ..)| *number == mine) {
            return Err(Error::NotCommitted { cause: cause.clone(), errno: *errno });
        }
        let ticket = writer.ticket.expect("a transaction that committed recorded its ticket");
        Ok((out, ticket, committer))
    }

    /// `op` in a savepoint of the open transaction, counted as held if it
    /// succeeded. If SQLite rolled the whole transaction back after it,
    /// the transaction ends there, failing every write it held.
    fn run_held<T>(&self, writer: &mut Writer, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if writer.conn.is_none() {
            let conn = db::open_shared(&self.database, None)?;
            db::guard_audit_trail(&conn)?;
            writer.conn = Some(conn);
        }
        let conn = writer.conn.as_ref().expect("opened above");
        if writer.held == 0 {
            conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        }
        // A panic in `op` unwinds through the savepoint, which rolls the
        // operation back; the transaction then ends as if it had failed,
        // so no writer waits on it for ever.
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| crate::database::in_savepoint(conn, || op(conn))));
        let rolled_back = conn.is_autocommit();
        match outcome {
            Ok(Ok(out)) if !rolled_back => {
                writer.held += 1;
                Ok(out)
            }
            Ok(Ok(_)) => Err(self.fail_rolled_back(writer, "SQLite rolled the transaction back", libc::EIO)),
            Ok(Err(error)) => {
                if rolled_back && writer.held > 0 {
                    self.fail_rolled_back(writer, &error.to_string(), error.errno());
                }
                Err(error)
            }
            Err(panic) => {
                if !rolled_back {
                    let _ = conn.execute_batch("ROLLBACK");
                }
                self.fail_rolled_back(writer, "a write panicked", libc::EIO);
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// Ends the open transaction without a commit, recording why for the
    /// writers it held.
    fn fail_rolled_back(&self, writer: &mut Writer, cause: &str, errno: i32) -> Error {
        let number = writer.number;
        Self::record_failure(writer, number, cause, errno);
        self.ended_now(writer);
        Error::NotCommitted { cause: cause.to_owned(), errno }
    }

    fn record_failure(writer: &mut Writer, number: u64, cause: &str, errno: i32) {
        writer.failed.push_back((number, cause.to_owned(), errno));
        if writer.failed.len() > FAILURES_KEPT {
            writer.failed.pop_front();
        }
    }

    /// Commits the open transaction (or rolls it back, holding nothing).
    fn end(&self, writer: &mut Writer, ticket: impl FnOnce() -> Ticket) {
        let conn = writer.conn.as_ref().expect("a transaction is open on the connection");
        if writer.held == 0 {
            let _ = conn.execute_batch("ROLLBACK");
        } else {
            match conn.prepare_cached("COMMIT").and_then(|mut commit| commit.execute([])) {
                Ok(_) => {
                    writer.commits += 1;
                    writer.ticket = Some(ticket());
                }
                Err(error) => {
                    if !conn.is_autocommit() {
                        let _ = conn.execute_batch("ROLLBACK");
                    }
                    let error = Error::from(error);
                    let number = writer.number;
                    Self::record_failure(writer, number, &error.to_string(), error.errno());
                }
            }
        }
        self.ended_now(writer);
    }

    /// Transactions committed so far (a benchmark's measure of how many
    /// writes shared one).
    pub(crate) fn commits(&self) -> u64 {
        self.lock().commits
    }

    fn ended_now(&self, writer: &mut Writer) {
        writer.held = 0;
        writer.ended = writer.number;
        writer.number += 1;
        self.ended.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// A workspace's database (its schema made by `AgentFs::open`) and
    /// the shared commit of a writer connection on it.
    fn shared() -> (tempfile::TempDir, Arc<SharedCommit>) {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("w.db");
        drop(crate::AgentFs::open(&database).unwrap());
        (dir, Arc::new(SharedCommit::new(&database)))
    }

    fn ticket() -> Ticket {
        fsutil::SharedFlush::new().written()
    }

    fn kv_set(conn: &Connection, key: &str) -> Result<()> {
        conn.execute("INSERT INTO kv_store (key, value) VALUES (?, '1')", [key])?;
        Ok(())
    }

    fn kv_keys(shared: &SharedCommit) -> Vec<String> {
        let conn = db::open_shared(&shared.database, None).unwrap();
        let mut keys = conn.prepare("SELECT key FROM kv_store ORDER BY key").unwrap();
        keys.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    }

    /// What [`SharedCommit::run`] returned for a write of no result.
    type Ran = Result<((), Ticket, bool)>;

    /// Writer A's operation waits inside the transaction until writer B is
    /// queued for the connection, then `b_op` runs as B's operation; returns
    /// both results.
    fn a_then_queued_b(
        shared: &Arc<SharedCommit>,
        b_op: impl FnOnce(&Connection) -> Result<()> + Send + 'static,
    ) -> (Ran, Ran) {
        let (inside, go) = (mpsc::channel(), mpsc::channel::<()>());
        let a = {
            let shared = shared.clone();
            let (inside, go) = (inside.0, go.1);
            std::thread::spawn(move || {
                shared.run(
                    |conn| {
                        kv_set(conn, "a")?;
                        inside.send(()).unwrap();
                        go.recv().unwrap();
                        Ok(())
                    },
                    ticket,
                )
            })
        };
        inside.1.recv().unwrap();
        let b = {
            let shared = shared.clone();
            std::thread::spawn(move || shared.run(b_op, ticket))
        };
        while shared.queued.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        go.0.send(()).unwrap();
        (a.join().unwrap(), b.join().unwrap())
    }

    /// Two writes that arrive together share one commit, and each returns
    /// only once it is committed.
    #[test]
    fn a_write_queued_behind_another_shares_its_commit() {
        let (_dir, shared) = shared();
        let (a, b) = a_then_queued_b(&shared, |conn| kv_set(conn, "b"));
        let (_, _, a_committed) = a.unwrap();
        let (_, _, b_committed) = b.unwrap();
        assert!(!a_committed && b_committed, "the last writer of the two commits for both");
        assert_eq!(shared.commits(), 1, "two writes, two commits");
        assert_eq!(kv_keys(&shared), ["a", "b"]);
        // Alone, a write commits by itself.
        let (_, _ticket, _) = shared.run(|conn| kv_set(conn, "c"), ticket).unwrap();
        assert_eq!(shared.commits(), 2);
    }

    /// A write that fails is rolled back alone; the one it shared the
    /// transaction with is committed.
    #[test]
    fn a_failed_write_is_rolled_back_alone() {
        let (_dir, shared) = shared();
        let (a, b) = a_then_queued_b(&shared, |conn| {
            kv_set(conn, "b")?;
            // The key A wrote: a constraint error after B's own insert.
            kv_set(conn, "a")
        });
        let (_, _ticket, _) = a.unwrap();
        assert!(b.is_err(), "the failing write returned Ok");
        assert_eq!(kv_keys(&shared), ["a"], "B's first insert was kept, or A's lost");
    }

    /// When SQLite rolls the whole transaction back (as after a full
    /// disk), every write it held fails and none is kept.
    #[test]
    fn a_transaction_rolled_back_fails_every_write_it_held() {
        let (_dir, shared) = shared();
        let (a, b) = a_then_queued_b(&shared, |conn| {
            conn.execute_batch("ROLLBACK")?;
            Err(Error::NoSpace)
        });
        assert!(matches!(b, Err(Error::NoSpace)), "{b:?}");
        match a {
            Err(Error::NotCommitted { errno, .. }) => assert_eq!(errno, libc::ENOSPC),
            other => panic!("the held write: {other:?}"),
        }
        assert!(kv_keys(&shared).is_empty());
        // The connection goes on.
        let (_, _ticket, _) = shared.run(|conn| kv_set(conn, "c"), ticket).unwrap();
        assert_eq!(kv_keys(&shared), ["c"]);
    }
}

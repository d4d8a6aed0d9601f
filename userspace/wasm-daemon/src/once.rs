//! One run per idempotency key (`execute_tool`'s `idempotency_key`,
//! `specs/agent/README.md`, "Checkpoints and resume").
//!
//! An agent-loop that crashed while a tool ran asks for the same call again
//! when it resumes, with the same key. The key is recorded with the call in
//! the agent's `tool_calls` (`clawos_tool_call_key`), so a call that
//! finished is answered from its record; a call still running in this
//! daemon (it outlives the caller's connection) is waited for first. Only a
//! call that never finished, because this daemon died too, runs again.
//!
//! Owns: the gate that keeps two calls with one key from running side by
//! side. Must not own: the record (toolhost writes it with the call).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// A call's key on one agent database: the database's path and the key.
type Entry = (PathBuf, String);
/// The gate of one key: held while a call with it is looked up and run.
type Gate = Arc<tokio::sync::Mutex<()>>;

/// The keys of calls running or being looked up now, per agent database.
#[derive(Default)]
pub struct KeyedCalls {
    running: Mutex<HashMap<Entry, Gate>>,
}

/// Held while a keyed call is looked up and run (moved into the thread
/// that runs it: the caller's request may be dropped, when its connection
/// closes, long before the tool ends); a second call with the key waits
/// for it to be dropped.
pub struct Held {
    calls: Arc<KeyedCalls>,
    entry: Entry,
    gate: Gate,
    guard: Option<OwnedMutexGuard<()>>,
}

impl KeyedCalls {
    /// Waits until no other call with `key` on `database` runs, then holds it.
    pub async fn hold(self: &Arc<Self>, database: &Path, key: &str) -> Held {
        let entry = (database.to_owned(), key.to_owned());
        let gate = self.lock().entry(entry.clone()).or_default().clone();
        let guard = gate.clone().lock_owned().await;
        Held { calls: self.clone(), entry, gate, guard: Some(guard) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Entry, Gate>> {
        self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut running = self.calls.lock();
        // Nobody else holds or waits for the gate (the map's reference and
        // this one): the entry goes, so the map holds only live keys.
        if Arc::strong_count(&self.gate) == 2 {
            running.remove(&self.entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_second_call_with_the_key_waits_for_the_first() {
        let calls = Arc::new(KeyedCalls::default());
        let db = Path::new("/clawfs/agents/a/workspace.db");
        let first = calls.hold(db, "s/1/c").await;
        let other_key = calls.hold(db, "s/1/d").await;
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let waiter = {
            let calls = calls.clone();
            tokio::spawn(async move {
                let _second = calls.hold(Path::new("/clawfs/agents/a/workspace.db"), "s/1/c").await;
                tx.send(()).unwrap();
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err(), "the second call ran beside the first");
        drop(first);
        waiter.await.unwrap();
        assert!(rx.try_recv().is_ok());
        drop(other_key);
        assert_eq!(calls.len(), 0, "finished keys stay in the map");
    }
}

//! The agents' open memory indexes, each behind a lock of its own
//! (specs/agent/README.md, "Memory").
//!
//! Re-indexing a changed memory file embeds its new chunks: seconds under
//! emulation with MiniLM. With one lock over every index (as before), the
//! watcher re-indexing one agent's file held up every agent's memory
//! requests and the removal of any agent, past the 30 s an IPC call may
//! take. Here a request waits only for work on the same agent's index,
//! and the watcher takes that lock one file at a time.
//!
//! Removing an agent does not wait for that lock: its directory is renamed
//! away at once, the agent's slot is marked removed and replaced by a new
//! one, and the old index is closed and its directory deleted on a thread
//! once the work holding the lock ends. Waiting for it instead (as before)
//! put a re-index, 30 s and more of MiniLM on a loaded CI machine, in front
//! of `clawctl agent rm`.
//!
//! Owns: opening an agent's index (once, bringing it in step with the
//! files), the lock per agent, and closing an index whose agent was
//! removed. Must not own: what a memory operation does (`clawfs::memory`),
//! when files are re-indexed (`watch`), or how a directory is removed
//! (`clawfs::namespace`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use clawfs::memory::AgentMemory;
use clawfs::{Clawfs, Embedder, MemoryIndex};
use clawos_ipc::server::MethodError;
use clawos_ipc::ErrorCode;

use crate::method_error;

/// One agent's index, open or not yet, and whether the agent was removed.
#[derive(Default)]
struct Slot {
    index: Mutex<Option<MemoryIndex>>,
    /// Set, before its directory is renamed, on the slot of an agent being
    /// removed: whoever takes its lock after that refuses to work, so no
    /// index is opened beside the one a new agent of the same name opens.
    removed: AtomicBool,
}

pub(crate) struct AgentMemories {
    clawfs: Clawfs,
    embedder: Option<Arc<dyn Embedder>>,
    /// The slot of every agent name asked for since the start (a removed
    /// agent's is replaced, a few bytes per name).
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AgentMemories {
    pub(crate) fn new(clawfs: Clawfs, embedder: Option<Arc<dyn Embedder>>) -> AgentMemories {
        AgentMemories { clawfs, embedder, slots: Mutex::default() }
    }

    fn slot(&self, agent: &str) -> Arc<Slot> {
        lock(&self.slots).entry(agent.to_owned()).or_default().clone()
    }

    /// Runs `work` on agent `agent`'s memory and its open index, holding
    /// that agent's lock only. The first open brings the index in step with
    /// the files, which may have changed while fs-engine was not running
    /// (`AgentMemory::sync_all`). Refused (EPERM, `AgentMemory::new`) for
    /// an agent that does not exist, and (ENOENT) when it was removed while
    /// this waited.
    pub(crate) fn with<T>(
        &self,
        agent: &str,
        work: impl FnOnce(AgentMemory<'_>, &mut MemoryIndex) -> Result<T, MethodError>,
    ) -> Result<T, MethodError> {
        let slot = self.slot(agent);
        let mut index = lock(&slot.index);
        if slot.removed.load(Ordering::SeqCst) {
            return Err(MethodError::new(ErrorCode::Enoent, format!("agent `{agent}` was removed")));
        }
        let memory = AgentMemory::new(&self.clawfs.config().root, agent).map_err(method_error)?;
        if index.is_none() {
            let mut opened = self.clawfs.open_agent_memory(agent, self.embedder.clone()).map_err(method_error)?;
            let report = memory.sync_all(&mut opened).map_err(method_error)?;
            tracing::info!(
                agent,
                added = report.added,
                removed = report.removed,
                unchanged = report.unchanged,
                "agent memory index opened"
            );
            *index = Some(opened);
        }
        work(memory, index.as_mut().expect("opened above"))
    }

    /// Removes agent `agent` without waiting for work on its index:
    /// `rename` takes its directory out of the namespace (quick) and says
    /// where to; a new slot serves the name from then on. A thread then
    /// waits for the old slot's lock, closes the index and runs `delete` on
    /// the renamed directory. If `rename` fails, nothing changed.
    pub(crate) fn remove(
        &self,
        agent: &str,
        rename: impl FnOnce() -> Result<PathBuf, MethodError>,
        delete: impl FnOnce(PathBuf) + Send + 'static,
    ) -> Result<(), MethodError> {
        let old = {
            // Held across the rename: no request takes the new slot and
            // opens the index of a directory about to move.
            let mut slots = lock(&self.slots);
            let old = slots.insert(agent.to_owned(), Arc::default()).unwrap_or_default();
            old.removed.store(true, Ordering::SeqCst);
            match rename() {
                Ok(renamed) => (old, renamed),
                Err(error) => {
                    old.removed.store(false, Ordering::SeqCst);
                    slots.insert(agent.to_owned(), old);
                    return Err(error);
                }
            }
        };
        let agent = agent.to_owned();
        let closing = std::thread::Builder::new().name("agent-removal".into()).spawn(move || {
            let (slot, renamed) = old;
            lock(&slot.index).take();
            delete(renamed);
            tracing::debug!(agent, "removed agent's index closed, directory deleted");
        });
        if let Err(error) = closing {
            // The directory stays in agents/.removed until the next start.
            tracing::error!("no thread to delete a removed agent's directory: {error}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn memories_of(agents: &[&str]) -> (tempfile::TempDir, AgentMemories) {
        let dir = tempfile::tempdir().unwrap();
        let clawfs = Clawfs::new(clawfs::Config::new(dir.path())).unwrap();
        clawfs.init(clawfs::Owners::Keep).unwrap();
        let mut report = clawfs::namespace::NamespaceReport::default();
        for agent in agents {
            clawfs::namespace::create_agent(dir.path(), agent, clawfs::Owners::Keep, &mut report).unwrap();
        }
        (dir, AgentMemories::new(clawfs, None))
    }

    /// Holds agent `agent`'s lock on a thread, as seconds of embedding
    /// would, until the returned sender is sent to; returns once it holds it.
    fn hold(
        memories: &Arc<AgentMemories>,
        agent: &'static str,
    ) -> (mpsc::Sender<()>, std::thread::JoinHandle<Result<(), MethodError>>) {
        let (holding, held) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let memories = memories.clone();
        let holder = std::thread::spawn(move || {
            memories.with(agent, |_, _| {
                holding.send(()).unwrap();
                released.recv().unwrap();
                Ok(())
            })
        });
        held.recv().unwrap();
        (release, holder)
    }

    /// Removes `agent` as `agent_dir_remove` does; the receiver gets the
    /// renamed directory once it is deleted.
    fn remove(memories: &AgentMemories, root: &std::path::Path, agent: &str) -> mpsc::Receiver<PathBuf> {
        let (deleted, on_delete) = mpsc::channel();
        let root = root.to_owned();
        let rename_root = root.clone();
        memories
            .remove(
                agent,
                || clawfs::namespace::remove_agent(&rename_root, agent).map_err(method_error),
                move |dir| {
                    clawfs::namespace::delete_removed(&root, Some(&dir)).unwrap();
                    let _ = deleted.send(dir);
                },
            )
            .unwrap();
        on_delete
    }

    #[test]
    fn a_removal_waits_for_no_work_on_the_agents_index_and_a_new_agent_of_the_name_is_served_at_once() {
        let (dir, memories) = memories_of(&["busy"]);
        let memories = Arc::new(memories);
        let (release, reindex) = hold(&memories, "busy");
        let old = memories.slot("busy");
        let (returned, on_return) = mpsc::channel();
        {
            let (memories, root) = (memories.clone(), dir.path().to_owned());
            std::thread::spawn(move || returned.send(remove(&memories, &root, "busy")).unwrap());
        }
        let deleted = on_return.recv_timeout(Duration::from_secs(10)).expect("the removal waited for the re-index");
        assert!(!clawfs::namespace::agent_exists(dir.path(), "busy"));
        let mut report = clawfs::namespace::NamespaceReport::default();
        clawfs::namespace::create_agent(dir.path(), "busy", clawfs::Owners::Keep, &mut report).unwrap();
        assert_eq!(memories.with("busy", |memory, _| Ok(memory.count(None))).unwrap().unwrap(), 0);
        assert!(deleted.try_recv().is_err(), "deleted while its index was in use");
        release.send(()).unwrap();
        reindex.join().unwrap().unwrap();
        let renamed = deleted.recv_timeout(Duration::from_secs(10)).expect("the removed directory is deleted");
        assert!(!renamed.exists());
        // Whoever waited for the old slot finds it marked and its index closed.
        assert!(old.removed.load(Ordering::SeqCst) && lock(&old.index).is_none());
    }

    #[test]
    fn work_on_one_agents_memory_holds_up_no_other_agent_and_a_removed_agent_is_refused() {
        let (dir, memories) = memories_of(&["slow", "quick"]);
        let memories = Arc::new(memories);
        let (release, slow) = hold(&memories, "slow");
        let (done, finished) = mpsc::channel();
        let quick = {
            let memories = memories.clone();
            std::thread::spawn(move || done.send(memories.with("quick", |memory, _| Ok(memory.count(None)))).unwrap())
        };
        let counted = finished.recv_timeout(Duration::from_secs(10)).expect("held up by another agent's lock");
        assert_eq!(counted.unwrap().unwrap(), 0);
        release.send(()).unwrap();
        slow.join().unwrap().unwrap();
        quick.join().unwrap();
        // Removed: the next request finds no agent.
        remove(&memories, dir.path(), "quick");
        let error = memories.with("quick", |_, _| Ok(())).unwrap_err();
        assert_eq!(error.code, ErrorCode::Eperm, "{}", error.message);
    }
}

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
//! Owns: opening an agent's index (once, bringing it in step with the
//! files), the lock per agent, and closing an index while its directory is
//! removed. Must not own: what a memory operation does (`clawfs::memory`)
//! or when files are re-indexed (`watch`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use clawfs::memory::AgentMemory;
use clawfs::{Clawfs, Embedder, MemoryIndex};
use clawos_ipc::server::MethodError;

use crate::method_error;

/// One agent's index, open or not yet (or closed for a removal).
type Slot = Arc<Mutex<Option<MemoryIndex>>>;

pub(crate) struct AgentMemories {
    clawfs: Clawfs,
    embedder: Option<Arc<dyn Embedder>>,
    /// Every agent name asked for since the start. An entry is never
    /// removed: a request holding a removed entry's slot could then open an
    /// index beside the one a new entry's holder opens, two writers of one
    /// index file. A name's entry outlives its agent (a few bytes).
    slots: Mutex<HashMap<String, Slot>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AgentMemories {
    pub(crate) fn new(clawfs: Clawfs, embedder: Option<Arc<dyn Embedder>>) -> AgentMemories {
        AgentMemories { clawfs, embedder, slots: Mutex::default() }
    }

    fn slot(&self, agent: &str) -> Slot {
        lock(&self.slots).entry(agent.to_owned()).or_default().clone()
    }

    /// Runs `work` on agent `agent`'s memory and its open index, holding
    /// that agent's lock only. The first open brings the index in step with
    /// the files, which may have changed while fs-engine was not running
    /// (`AgentMemory::sync_all`). Refused (EPERM, `AgentMemory::new`) for
    /// an agent that does not exist.
    pub(crate) fn with<T>(
        &self,
        agent: &str,
        work: impl FnOnce(AgentMemory<'_>, &mut MemoryIndex) -> Result<T, MethodError>,
    ) -> Result<T, MethodError> {
        let slot = self.slot(agent);
        let mut index = lock(&slot);
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

    /// Closes agent `agent`'s index and runs `remove` (the removal of its
    /// directory) before anyone can open it again: a request or a re-index
    /// waiting for the agent's lock finds the agent gone. Reopening between
    /// the two (a rescan of the files) wrote `search.db` into the directory
    /// as it was being removed ("Directory not empty").
    pub(crate) fn close_while<T>(&self, agent: &str, remove: impl FnOnce() -> T) -> T {
        let slot = self.slot(agent);
        let mut index = lock(&slot);
        *index = None;
        remove()
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

    #[test]
    fn work_on_one_agents_memory_holds_up_no_other_agent_and_a_removed_agent_is_refused() {
        let (dir, memories) = memories_of(&["slow", "quick"]);
        let memories = Arc::new(memories);
        let (holding, held) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let slow = {
            let memories = memories.clone();
            std::thread::spawn(move || {
                // Stands in for seconds of embedding under the agent's lock.
                memories.with("slow", |_, _| {
                    holding.send(()).unwrap();
                    released.recv().unwrap();
                    Ok(())
                })
            })
        };
        held.recv().unwrap();
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
        // Closed while its directory goes; the next request finds no agent.
        memories.close_while("quick", || std::fs::remove_dir_all(dir.path().join("agents/quick")).unwrap());
        let error = memories.with("quick", |_, _| Ok(())).unwrap_err();
        assert_eq!(error.code, clawos_ipc::ErrorCode::Eperm, "{}", error.message);
    }
}

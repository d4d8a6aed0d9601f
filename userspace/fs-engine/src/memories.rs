//! The agents' open memory indexes, each behind a lock of its own
//! (specs/agent/README.md, "Memory"), and the thread that embeds their new
//! chunks.
//!
//! Embedding a chunk with MiniLM takes seconds under emulation. With one
//! lock over every index (as before), the watcher re-indexing one agent's
//! file held up every agent's memory requests and the removal of any
//! agent, past the 30 s an IPC call may take. Here a request waits only for
//! work on the same agent's index, the watcher takes that lock one file at
//! a time, and no one waits for embeddings under it
//! ([`AgentMemories::embed_in_background`]).
//!
//! Removing an agent does not wait for that lock: its directory is renamed
//! away at once, the agent's slot is marked removed and replaced by a new
//! one, and the old index is closed and its directory deleted on a thread
//! once the work holding the lock ends. Waiting for it instead (as before)
//! put a re-index, 30 s and more of MiniLM on a loaded CI machine, in front
//! of `clawctl agent rm`.
//!
//! Owns: opening an agent's index (once, bringing it in step with the
//! files), the lock per agent, embedding pending chunks, and closing an
//! index whose agent was removed. Must not own: what a memory operation does (`clawfs::memory`),
//! when files are re-indexed (`watch`), or how a directory is removed
//! (`clawfs::namespace`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use clawfs::memory::AgentMemory;
use clawfs::{Clawfs, Embedder, Embedding, MemoryIndex};
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
    /// Set once [`AgentMemories::embed_in_background`] runs: indexes are
    /// then opened with `Embedding::Later`, and an agent whose index has
    /// chunks without a vector is queued here for the embedding thread.
    queue: Mutex<Option<EmbeddingQueue>>,
}

/// The agents waiting for the embedding thread, each once.
struct EmbeddingQueue {
    send: std::sync::mpsc::Sender<String>,
    queued: std::collections::HashSet<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AgentMemories {
    pub(crate) fn new(clawfs: Clawfs, embedder: Option<Arc<dyn Embedder>>) -> AgentMemories {
        AgentMemories { clawfs, embedder, slots: Mutex::default(), queue: Mutex::default() }
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
        self.with_index(agent, true, work)
    }

    fn with_index<T>(
        &self,
        agent: &str,
        queue_pending: bool,
        work: impl FnOnce(AgentMemory<'_>, &mut MemoryIndex) -> Result<T, MethodError>,
    ) -> Result<T, MethodError> {
        let deferred = lock(&self.queue).is_some();
        let slot = self.slot(agent);
        let mut index = lock(&slot.index);
        if slot.removed.load(Ordering::SeqCst) {
            return Err(MethodError::new(ErrorCode::Enoent, format!("agent `{agent}` was removed")));
        }
        let memory = AgentMemory::new(&self.clawfs.config().root, agent).map_err(method_error)?;
        if index.is_none() {
            let mut opened = self.clawfs.open_agent_memory(agent, self.embedder.clone()).map_err(method_error)?;
            if deferred {
                opened.set_embedding(Embedding::Later);
            }
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
        let index = index.as_mut().expect("opened above");
        let done = work(memory, index);
        if deferred && queue_pending && index.pending_embeddings(1).is_ok_and(|pending| !pending.is_empty()) {
            self.queue_for_embedding(agent);
        }
        done
    }

    fn queue_for_embedding(&self, agent: &str) {
        if let Some(queue) = lock(&self.queue).as_mut() {
            if queue.queued.insert(agent.to_owned()) {
                let _ = queue.send.send(agent.to_owned());
            }
        }
    }

    /// From now on a memory request waits for no embedding: indexes commit
    /// new chunks keyword-only (found by keyword at once) and a thread
    /// embeds them one at a time, outside the agent's lock, then adds the
    /// vectors under it. Under emulation a store sent while the agent's
    /// first index open embedded its files waited for it past the 30 s
    /// every IPC request is capped at (scenario 3 of the boot suite,
    /// `tests/vm/checks/71-scenarios.sh`, failed on it).
    ///
    /// The thread runs at idle priority: embedding the backlog takes no CPU
    /// from requests, turns or a query's own (short) embedding. That holds
    /// because the unit runs candle's matrix products on the calling thread
    /// (`RAYON_NUM_THREADS=1` in clawos-fs-engine.service), not on a pool
    /// at normal priority.
    pub(crate) fn embed_in_background(self: &Arc<Self>) -> std::io::Result<()> {
        let Some(embedder) = self.embedder.clone() else { return Ok(()) };
        let (send, receive) = std::sync::mpsc::channel::<String>();
        *lock(&self.queue) = Some(EmbeddingQueue { send, queued: Default::default() });
        let memories = Arc::downgrade(self);
        std::thread::Builder::new().name("memory-embedding".into()).spawn(move || {
            crate::embedder::at_idle_priority("memory embedding");
            for agent in receive {
                let Some(memories) = memories.upgrade() else { return };
                if let Some(queue) = lock(&memories.queue).as_mut() {
                    queue.queued.remove(&agent);
                }
                memories.embed_pending(&agent, &*embedder);
            }
        })?;
        Ok(())
    }

    /// Embeds agent `agent`'s pending chunks, one a pass, until none is left
    /// or the embedder fails (they stay pending: the agent's next request
    /// queues it again).
    fn embed_pending(&self, agent: &str, embedder: &dyn Embedder) {
        loop {
            let pending = self.with_index(agent, false, |_, index| index.pending_embeddings(1).map_err(method_error));
            let Some(chunk) = pending.ok().and_then(|pending| pending.into_iter().next()) else { return };
            let vector = match embedder.embed(&[chunk.content.as_str()]) {
                Ok(mut vectors) if vectors.len() == 1 => vectors.remove(0),
                Ok(_) => return,
                Err(error) => {
                    tracing::warn!(agent, "memory chunks stay keyword-only for now: {error}");
                    return;
                }
            };
            let added = self
                .with_index(agent, false, |_, index| index.add_vectors(vec![(chunk, vector)]).map_err(method_error));
            if let Err(error) = added {
                tracing::warn!(agent, "adding a memory chunk's vector: {}", error.message);
                return;
            }
        }
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

    /// An embedder that embeds only once its gate is opened.
    struct Gated {
        inner: clawfs::HashingEmbedder,
        open: std::sync::Mutex<bool>,
        opened: std::sync::Condvar,
    }

    impl Embedder for Gated {
        fn dimension(&self) -> usize {
            self.inner.dimension()
        }
        fn model_id(&self) -> &str {
            self.inner.model_id()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, clawfs::EmbedError> {
            let open = self.open.lock().unwrap();
            drop(self.opened.wait_while(open, |open| !*open).unwrap());
            self.inner.embed(texts)
        }
    }

    #[test]
    fn a_store_waits_for_no_embedding_and_its_vector_comes_after() {
        let dir = tempfile::tempdir().unwrap();
        let clawfs = Clawfs::new(clawfs::Config::new(dir.path())).unwrap();
        clawfs.init(clawfs::Owners::Keep).unwrap();
        let mut report = clawfs::namespace::NamespaceReport::default();
        clawfs::namespace::create_agent(dir.path(), "keeper", clawfs::Owners::Keep, &mut report).unwrap();
        let dimension = clawfs.config().vector_dimension;
        let gated = Arc::new(Gated {
            inner: clawfs::HashingEmbedder::new(dimension),
            open: std::sync::Mutex::new(false),
            opened: std::sync::Condvar::new(),
        });
        let memories = Arc::new(AgentMemories::new(clawfs, Some(gated.clone())));
        memories.embed_in_background().unwrap();
        let category = clawfs::memory::Category::parse("preferences").unwrap();
        // The model is stuck: the store still answers, and keyword search finds it.
        let (stored, on_store) = mpsc::channel();
        {
            let memories = memories.clone();
            std::thread::spawn(move || {
                let entry = memories.with("keeper", |memory, index| {
                    memory
                        .store(index, &category, "Prefers quieter neighborhoods", "2026-11-29T10:00:00Z")
                        .map_err(method_error)
                });
                stored.send(entry).unwrap();
            });
        }
        on_store.recv_timeout(Duration::from_secs(10)).expect("the store waited for the model").unwrap();
        let pending = memories.with("keeper", |_, index| index.pending_embeddings(100).map_err(method_error)).unwrap();
        assert!(!pending.is_empty());
        // The model comes back: the thread gives every chunk its vector.
        *gated.open.lock().unwrap() = true;
        gated.opened.notify_all();
        for _ in 0..100 {
            let left =
                memories.with_index("keeper", false, |_, index| index.pending_embeddings(1).map_err(method_error));
            if left.unwrap().is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("chunks still without a vector");
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

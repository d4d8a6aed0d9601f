//! Keeps each agent's memory index in step with its files
//! (`specs/agent/README.md`, "Memory"). The files are the truth and anyone
//! may change them: the agent through `file_write`, a WASM tool with file
//! access, the operator over SSH. An inotify watch on `/clawfs/agents`
//! (the `notify` crate) sees each change; after 300 ms without another
//! (2 s at most, so a file written continuously is still picked up) the
//! changed memory files are re-indexed, or removed from the index when
//! they are gone, each file under its agent's lock alone (`memories`), so
//! requests for the agent's memory go between them. The same thread runs
//! the daily hygiene of every agent.
//!
//! What a miss costs: nothing lasting. A change made while fs-engine was
//! down, or lost to an inotify queue overflow, is found when the agent's
//! index is next opened or on the rescan an overflow asks for
//! (`AgentMemory::sync_all`), and `clawctl memory reindex` rebuilds an
//! index from the files alone.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawfs::layout::agents_dir;
use clawfs::memory::is_indexed;
use notify::{Event, EventKind, RecursiveMode, Watcher};

use crate::memories::AgentMemories;

/// Quiet time after the last change before re-indexing.
const QUIET: Duration = Duration::from_millis(300);
/// Longest a change waits while others keep coming.
const MAX_DELAY: Duration = Duration::from_secs(2);
/// How often hygiene runs (the first time a minute after start, off the
/// boot's critical path).
const HYGIENE_EVERY: Duration = Duration::from_secs(24 * 3600);
const IDLE_WAKE: Duration = Duration::from_secs(60);

/// The daily hygiene's ages (fs-engine's `[component]` settings).
#[derive(Debug, Clone, Copy)]
pub struct Hygiene {
    pub archive_after_days: u32,
    pub purge_after_days: u32,
}

/// Today as days since 1970-01-01 (UTC).
pub fn today() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| (d.as_secs() / 86_400) as i64)
}

/// Starts watching `root`/agents on a thread of its own.
pub fn start(root: &Path, memories: Arc<AgentMemories>, hygiene: Hygiene) -> Result<(), String> {
    let agents = agents_dir(root);
    let (sender, events) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(sender).map_err(|e| format!("inotify: {e}"))?;
    watcher.watch(&agents, RecursiveMode::Recursive).map_err(|e| format!("watching {}: {e}", agents.display()))?;
    let root = root.to_owned();
    std::thread::Builder::new()
        .name("memory-watch".into())
        .spawn(move || {
            // The watcher lives as long as the thread reading its events.
            let _watcher = watcher;
            run(&events, &root, &memories, hygiene);
        })
        .map_err(|e| format!("cannot start the memory watch thread: {e}"))?;
    tracing::info!("re-indexing agents' memory files under {} when they change", agents.display());
    Ok(())
}

/// What is waiting to be re-indexed.
#[derive(Default)]
struct Pending {
    /// (agent, file relative to its directory).
    files: BTreeSet<(String, String)>,
    /// Agents to bring fully in step (after an overflow, or a new directory).
    agents: BTreeSet<String>,
    since: Option<Instant>,
}

fn run(events: &Receiver<notify::Result<Event>>, root: &Path, memories: &AgentMemories, hygiene: Hygiene) {
    let agents = agents_dir(root);
    let mut pending = Pending::default();
    let mut hygiene_due = Instant::now() + IDLE_WAKE;
    loop {
        let wait = if pending.since.is_some() {
            QUIET
        } else {
            hygiene_due.saturating_duration_since(Instant::now()).max(QUIET)
        };
        match events.recv_timeout(wait) {
            Ok(Ok(event)) => {
                note(&event, &agents, &mut pending);
                if pending.since.is_none_or(|since| since.elapsed() < MAX_DELAY) {
                    continue;
                }
            }
            Ok(Err(error)) => tracing::warn!("memory watch: {error}"),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if pending.since.is_some() {
            reindex(memories, root, std::mem::take(&mut pending));
        }
        if Instant::now() >= hygiene_due {
            run_hygiene(memories, root, hygiene);
            hygiene_due = Instant::now() + HYGIENE_EVERY;
        }
    }
}

/// Adds the memory files an event names to `pending`.
fn note(event: &Event, agents: &Path, pending: &mut Pending) {
    if matches!(event.kind, EventKind::Access(_)) {
        return;
    }
    // A new directory is watched from when notify sees it: a file made in
    // it before that sends no event, so the agent's files are all brought
    // in step (the operator's `mkdir memory && echo ... > memory/x.md`).
    let new_directory = matches!(event.kind, EventKind::Create(notify::event::CreateKind::Folder));
    for path in &event.paths {
        let Some((agent, relative)) = memory_file(agents, path) else { continue };
        if event.need_rescan() || new_directory {
            pending.agents.insert(agent);
        } else if is_indexed(&relative) {
            pending.files.insert((agent, relative));
        } else {
            continue;
        }
        pending.since.get_or_insert_with(Instant::now);
    }
}

/// `(agent, path relative to its directory)` of a path under `agents`.
fn memory_file(agents: &Path, path: &Path) -> Option<(String, String)> {
    let relative = path.strip_prefix(agents).ok()?.to_str()?;
    let (agent, rest) = relative.split_once('/').unwrap_or((relative, ""));
    Some((agent.to_owned(), rest.to_owned()))
}

/// Re-indexes what is pending; the files of an agent removed since are not
/// an error to report.
fn reindex(memories: &AgentMemories, root: &Path, pending: Pending) {
    let exists = |agent: &str| clawfs::namespace::agent_exists(root, agent);
    for agent in pending.agents.iter().filter(|agent| exists(agent)) {
        if let Err(error) = memories.with(agent, |memory, index| memory.sync_all(index).map_err(crate::method_error)) {
            tracing::warn!(agent, "memory rescan failed: {}", error.message);
        }
    }
    for (agent, file) in pending.files.iter().filter(|(agent, _)| !pending.agents.contains(agent)) {
        if !exists(agent) {
            continue;
        }
        let began = Instant::now();
        match memories.with(agent, |memory, index| memory.sync(index, file).map_err(crate::method_error)) {
            Ok(report) if report.added + report.removed > 0 => {
                // took_ms: when the re-index began (the boot check's measure).
                let took_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
                tracing::info!(
                    agent,
                    file,
                    added = report.added,
                    removed = report.removed,
                    took_ms,
                    "memory file re-indexed"
                );
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(agent, file, "memory file not re-indexed: {}", error.message),
        }
    }
}

fn run_hygiene(memories: &AgentMemories, root: &Path, hygiene: Hygiene) {
    let agents = match clawfs::namespace::list_agents(root) {
        Ok(agents) => agents,
        Err(error) => return tracing::warn!("memory hygiene: {error}"),
    };
    for agent in agents {
        let outcome = memories.with(&agent, |memory, index| {
            memory
                .hygiene(index, hygiene.archive_after_days, hygiene.purge_after_days, today())
                .map_err(crate::method_error)
        });
        match outcome {
            Ok(report) if !report.archived.is_empty() || !report.purged.is_empty() => {
                tracing::info!(agent, archived = ?report.archived, purged = ?report.purged, "memory hygiene");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(agent, "memory hygiene failed: {}", error.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn events_name_the_agent_and_its_memory_file() {
        let agents = Path::new("/clawfs/agents");
        assert_eq!(
            memory_file(agents, Path::new("/clawfs/agents/default/logs/2026-11-25.md")),
            Some(("default".into(), "logs/2026-11-25.md".into()))
        );
        assert_eq!(memory_file(agents, Path::new("/clawfs/workspaces/x.md")), None);
        let mut pending = Pending::default();
        let event =
            |path: &str| Event::new(EventKind::Modify(notify::event::ModifyKind::Any)).add_path(PathBuf::from(path));
        note(&event("/clawfs/agents/default/workspace.db"), agents, &mut pending);
        note(&event("/clawfs/agents/default/cache/x.md"), agents, &mut pending);
        assert!(pending.since.is_none());
        note(&event("/clawfs/agents/default/memory.md"), agents, &mut pending);
        assert_eq!(pending.files.into_iter().collect::<Vec<_>>(), [("default".to_owned(), "memory.md".to_owned())]);
        // A new directory rescans its agent: what was made in it before its
        // watch existed is found.
        let mut pending = Pending::default();
        let made = Event::new(EventKind::Create(notify::event::CreateKind::Folder))
            .add_path(PathBuf::from("/clawfs/agents/default/memory"));
        note(&made, agents, &mut pending);
        assert_eq!(pending.agents.into_iter().collect::<Vec<_>>(), ["default".to_owned()]);
    }
}

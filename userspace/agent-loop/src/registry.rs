//! The agents agent-loop hosts (`specs/agent/README.md`): which exist, and
//! the state of each as `agent_list` and `agent_show` report it.
//!
//! Owns: finding an agent's directory by name, opening its database, its
//! state (stopped by a config that does not load or a database that does
//! not open, halted by the soul guard, paused by the operator, running a
//! turn, or idle) and the operator's pause, kept in the agent's database so
//! it survives a restart. Must not own: making or removing an agent's
//! directory (fs-engine), its turns (`launch`), or the IPC methods (the
//! daemon).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use clawos_api::agent_loop::{AgentInfo, AgentState};

use crate::config::AgentConfig;
use crate::error::Error;
use crate::guard;
use crate::store::Store;

/// The agents under a ClawFS root.
pub struct Registry {
    clawfs_root: PathBuf,
    /// Agents paused by the operator, as read from (and written to) their
    /// databases, so a pause survives a restart.
    paused: Mutex<BTreeMap<String, bool>>,
}

/// An agent as [`Registry::find`] found it.
pub struct Agent {
    /// Its name and state.
    pub info: AgentInfo,
    /// Its config; `None` when it does not load (the agent is stopped, and
    /// `info.error` says why).
    pub config: Option<AgentConfig>,
    /// Its database.
    pub store: Store,
    /// Its directory.
    pub dir: PathBuf,
}

impl Registry {
    /// The agents of the ClawFS mounted at `clawfs_root`.
    pub fn new(clawfs_root: PathBuf) -> Self {
        Registry { clawfs_root, paused: Mutex::default() }
    }

    /// The agents' names, sorted.
    pub fn names(&self) -> Result<Vec<String>, Error> {
        clawfs::namespace::list_agents(&self.clawfs_root).map_err(Error::ListAgents)
    }

    /// The directory of agent `agent`, which must exist.
    pub fn dir(&self, agent: &str) -> Result<PathBuf, Error> {
        clawfs::names::validate_agent_name(agent)?;
        let dir = clawfs::layout::agents_dir(&self.clawfs_root).join(agent);
        if !clawfs::namespace::agent_exists(&self.clawfs_root, agent) {
            return Err(Error::NoAgent { agent: agent.to_owned() });
        }
        Ok(dir)
    }

    /// Agent `agent`: its state, config and database. `running` is whether
    /// a turn of it runs now (the turn table's, `launch`).
    pub fn find(&self, agent: &str, running: bool) -> Result<Agent, Error> {
        let dir = self.dir(agent)?;
        let store = open_store(&dir)?;
        let config = AgentConfig::load(&dir);
        let (state, error, model) = match &config {
            Err(why) => (AgentState::Stopped, Some(why.to_string()), None),
            Ok(config) => {
                let route = config.model.route();
                // The soul guard first: a change it cannot review halts too.
                let (state, error) = match guard::check(&dir, &store, config.persona.budget_tokens) {
                    Err(why) => {
                        (AgentState::Halted, Some(format!("the soul guard cannot review the brain files: {why}")))
                    }
                    Ok(review) if !review.holds.is_empty() => {
                        (AgentState::Halted, Some(guard::summary(agent, &review.holds)))
                    }
                    Ok(_) if self.is_paused(agent, &store) => (AgentState::Paused, None),
                    Ok(_) if running => (AgentState::Running, None),
                    Ok(_) => (AgentState::Idle, None),
                };
                (state, error, Some(format!("{}/{}", route.provider, route.model)))
            }
        };
        let info = AgentInfo { agent: agent.to_owned(), state, error, model };
        Ok(Agent { info, config: config.ok(), store, dir })
    }

    /// Pauses or resumes agent `agent`. Resuming needs a config that loads.
    pub fn set_paused(&self, agent: &str, paused: bool) -> Result<(), Error> {
        let dir = self.dir(agent)?;
        if !paused {
            AgentConfig::load(&dir)?;
        }
        open_store(&dir)?.set_paused(paused)?;
        lock(&self.paused).insert(agent.to_owned(), paused);
        Ok(())
    }

    /// Forgets a removed agent.
    pub fn forget(&self, agent: &str) {
        lock(&self.paused).remove(agent);
    }

    fn is_paused(&self, agent: &str, store: &Store) -> bool {
        let mut paused = lock(&self.paused);
        *paused.entry(agent.to_owned()).or_insert_with(|| store.paused().unwrap_or(false))
    }
}

/// The database of the agent whose directory is `dir`.
pub fn open_store(dir: &Path) -> Result<Store, Error> {
    Ok(Store::open(&dir.join(clawfs::DATABASE_FILE))?)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

//! The agents' agent databases (`/clawfs/agents/<agent>/workspace.db`),
//! kept open between tool calls: opening one costs more than a call.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clawos_ipc::server::MethodError;
use clawos_ipc::ErrorCode;

/// Agents whose agent databases are kept open at once.
const MAX_OPEN_AGENT_DBS: usize = 64;

/// An agent's `workspace.db`, kept open between calls (opening costs more
/// than the call), with the file identity it was opened on: if the path
/// now names another file (a restored snapshot), it is reopened, so no row
/// goes to an unlinked file.
struct AuditDb {
    file_id: (u64, u64),
    db: Arc<Mutex<agentfs::AgentFs>>,
}

fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(path)?;
    Ok((metadata.dev(), metadata.ino()))
}

/// The open agent databases by path.
#[derive(Default)]
pub struct AgentDbs {
    open: Mutex<HashMap<PathBuf, AuditDb>>,
}

impl AgentDbs {
    pub fn get(&self, database: &Path) -> Result<Arc<Mutex<agentfs::AgentFs>>, MethodError> {
        let io_error = |e: &dyn std::fmt::Display| {
            MethodError::new(ErrorCode::Eio, format!("opening {}: {e}", database.display()))
        };
        let mut open = self.open.lock().expect("agent database cache lock poisoned");
        if let (Some(cached), Ok(current)) = (open.get(database), file_id(database)) {
            if cached.file_id == current {
                return Ok(cached.db.clone());
            }
        }
        let db = Arc::new(Mutex::new(agentfs::AgentFs::open(database).map_err(|e| io_error(&e))?));
        let file_id = file_id(database).map_err(|e| io_error(&e))?;
        if open.len() >= MAX_OPEN_AGENT_DBS {
            open.clear();
        }
        open.insert(database.to_owned(), AuditDb { file_id, db: db.clone() });
        Ok(db)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_database_is_reused_until_its_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join(clawfs::DATABASE_FILE);
        let agent_dbs = AgentDbs::default();
        let first = agent_dbs.get(&database).unwrap();
        assert!(Arc::ptr_eq(&first, &agent_dbs.get(&database).unwrap()));
        // A restored snapshot renamed over the path is a new file: reopened.
        agentfs::AgentFs::open(dir.path().join("restored.db")).unwrap();
        std::fs::rename(dir.path().join("restored.db"), &database).unwrap();
        assert!(!Arc::ptr_eq(&first, &agent_dbs.get(&database).unwrap()));
    }
}

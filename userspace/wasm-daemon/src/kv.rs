//! The `state:kv` store of tools, kept in the calling agent's AgentFS
//! `kv_store` (the same `workspace.db` as its tool-call records), so it survives
//! daemon restarts and travels with the agent's directory. Keys are
//! namespaced `clawos.tool/<tool>/<key>`; values are bytes, stored as a
//! base64 JSON string because AgentFS values are JSON.

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use clawos_toolhost::{KvBackend, KvError};

use crate::agent_dbs::AgentDbs;

pub struct AgentFsKv {
    clawfs_root: PathBuf,
    agent_dbs: Arc<AgentDbs>,
}

impl AgentFsKv {
    pub fn new(clawfs_root: PathBuf, agent_dbs: Arc<AgentDbs>) -> AgentFsKv {
        AgentFsKv { clawfs_root, agent_dbs }
    }

    fn db(&self, agent: &str) -> Result<Arc<std::sync::Mutex<agentfs::AgentFs>>, KvError> {
        let unavailable = |reason| KvError::Unavailable { agent: agent.to_owned(), reason };
        let database = crate::agent_database(&self.clawfs_root, agent).map_err(|e| unavailable(e.message))?;
        self.agent_dbs.get(&database).map_err(|e| unavailable(e.message))
    }
}

fn prefix(tool_id: &str) -> String {
    format!("clawos.tool/{tool_id}/")
}

fn storage(error: agentfs::Error) -> KvError {
    KvError::Storage(error.to_string())
}

impl KvBackend for AgentFsKv {
    fn get(&self, agent: &str, tool_id: &str, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        let db = self.db(agent)?;
        let value =
            db.lock().expect("agentfs lock poisoned").kv_get(&format!("{}{key}", prefix(tool_id))).map_err(storage)?;
        let corrupt = |reason: String| KvError::Corrupt { key: key.to_owned(), reason };
        match value {
            None => Ok(None),
            Some(serde_json::Value::String(encoded)) => {
                base64::engine::general_purpose::STANDARD.decode(encoded).map(Some).map_err(|e| corrupt(e.to_string()))
            }
            Some(other) => Err(corrupt(format!("not a base64 string: {other}"))),
        }
    }

    fn set(&self, agent: &str, tool_id: &str, key: &str, value: Vec<u8>, max_keys: usize) -> Result<(), KvError> {
        let db = self.db(agent)?;
        let mut db = db.lock().expect("agentfs lock poisoned");
        let full_key = format!("{}{key}", prefix(tool_id));
        let held = db.kv_count_prefix(&prefix(tool_id)).map_err(storage)?;
        if held >= max_keys && db.kv_get(&full_key).map_err(storage)?.is_none() {
            return Err(KvError::Full { max_keys });
        }
        let encoded = base64::engine::general_purpose::STANDARD.encode(value);
        db.kv_set(&full_key, &serde_json::Value::String(encoded)).map_err(storage)
    }

    fn delete(&self, agent: &str, tool_id: &str, key: &str) -> Result<(), KvError> {
        let db = self.db(agent)?;
        let mut db = db.lock().expect("agentfs lock poisoned");
        db.kv_delete(&format!("{}{key}", prefix(tool_id))).map(drop).map_err(storage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_persist_in_the_agents_workspace_per_tool() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("agents/wasm-agent")).unwrap();
        let kv = AgentFsKv::new(root.path().into(), Arc::default());
        kv.set("wasm-agent", "scratchpad", "plan", b"\x00bytes\xff".to_vec(), 2).unwrap();
        assert_eq!(kv.get("wasm-agent", "other-tool", "plan").unwrap(), None, "tools do not share keys");
        kv.set("wasm-agent", "scratchpad", "b", vec![1], 2).unwrap();
        assert_eq!(
            kv.set("wasm-agent", "scratchpad", "c", vec![2], 2),
            Err(KvError::Full { max_keys: 2 }),
            "a third key is over the limit"
        );
        kv.set("wasm-agent", "scratchpad", "b", vec![3], 2).unwrap();

        // A new daemon (new cache) reads the same database.
        let reopened = AgentFsKv::new(root.path().into(), Arc::default());
        assert_eq!(reopened.get("wasm-agent", "scratchpad", "plan").unwrap().as_deref(), Some(&b"\x00bytes\xff"[..]));
        let mut db = agentfs::AgentFs::open(root.path().join("agents/wasm-agent").join(clawfs::DATABASE_FILE)).unwrap();
        assert!(db.kv_get("clawos.tool/scratchpad/plan").unwrap().is_some());
        reopened.delete("wasm-agent", "scratchpad", "plan").unwrap();
        assert_eq!(reopened.get("wasm-agent", "scratchpad", "plan").unwrap(), None);
        assert!(
            matches!(reopened.get("../x", "scratchpad", "plan"), Err(KvError::Unavailable { .. })),
            "agent ids stay plain names"
        );
        // A value the store did not write is reported as damaged, not as bytes.
        db.kv_set("clawos.tool/scratchpad/odd", &serde_json::json!(1)).unwrap();
        assert!(matches!(reopened.get("wasm-agent", "scratchpad", "odd"), Err(KvError::Corrupt { .. })));
    }
}

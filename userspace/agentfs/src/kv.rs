//! The key-value store of the spec (`kv_store`), values always valid JSON.

use rusqlite::{params, OptionalExtension};
use serde_json::Value;

use crate::error::Result;
use crate::AgentFs;

/// One key of the store with its timestamps (spec: List All Keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEntry {
    pub key: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl AgentFs {
    /// Stores `value` under `key`, replacing any previous value (spec: Set a Value).
    pub fn kv_set(&mut self, key: &str, value: &Value) -> Result<()> {
        self.kv_set_json(key, &value.to_string())
    }

    /// Stores an already serialized JSON value; EINVAL if `json` is not valid JSON.
    pub fn kv_set_json(&mut self, key: &str, json: &str) -> Result<()> {
        serde_json::from_str::<Value>(json)?;
        self.write_tx(|cx| {
            cx.conn
                .prepare_cached(
                    "INSERT INTO kv_store (key, value, updated_at) VALUES (?, ?, unixepoch())
                     ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = unixepoch()",
                )?
                .execute(params![key, json])?;
            Ok(())
        })
    }

    /// The value under `key`, `None` if unset (spec: Get a Value).
    pub fn kv_get(&mut self, key: &str) -> Result<Option<Value>> {
        let json: Option<String> = self
            .connection()
            .prepare_cached("SELECT value FROM kv_store WHERE key = ?")?
            .query_row([key], |row| row.get(0))
            .optional()?;
        Ok(json.map(|json| serde_json::from_str(&json)).transpose()?)
    }

    /// Removes `key`; returns whether it was set (spec: Delete a Value).
    pub fn kv_delete(&mut self, key: &str) -> Result<bool> {
        self.write_tx(|cx| Ok(cx.conn.execute("DELETE FROM kv_store WHERE key = ?", [key])? > 0))
    }

    /// How many keys start with `prefix` (an extension: callers that share
    /// one store by key prefix count their own keys without listing all).
    pub fn kv_count_prefix(&mut self, prefix: &str) -> Result<usize> {
        let count: i64 = self
            .connection()
            .prepare_cached("SELECT count(*) FROM kv_store WHERE substr(key, 1, length(?1)) = ?1")?
            .query_row([prefix], |row| row.get(0))?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// Every key in key order (spec: List All Keys).
    pub fn kv_list(&mut self) -> Result<Vec<KvEntry>> {
        let mut stmt =
            self.connection().prepare_cached("SELECT key, created_at, updated_at FROM kv_store ORDER BY key ASC")?;
        let entries = stmt
            .query_map([], |row| Ok(KvEntry { key: row.get(0)?, created_at: row.get(1)?, updated_at: row.get(2)? }))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(entries)
    }
}

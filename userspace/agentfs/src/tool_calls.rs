//! The insert-only tool call audit trail (`tool_calls`) and ClawOS's
//! extensions: timing (`clawos_tool_call_meta`), idempotency keys
//! (`clawos_tool_call_key`) and the hash chain (`clawos_tool_call_chain`,
//! specs/agentfs/README.md, "The audit trail").

use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::AgentFs;

/// A finished tool call to record.
#[derive(Debug, Clone)]
pub struct NewToolCall<'a> {
    pub name: &'a str,
    pub parameters: Option<&'a Value>,
    /// The JSON result on success, the error message on failure: exactly one
    /// is stored (tool call consistency rule 1).
    pub outcome: std::result::Result<&'a Value, &'a str>,
    pub started: SystemTime,
    pub completed: SystemTime,
    /// Conversation or agent session the call belongs to.
    pub session_id: Option<&'a str>,
    /// The tool call that made this one, for nested calls.
    pub parent_call_id: Option<i64>,
    /// The caller's key for this call (`clawos_tool_call_key`): one call
    /// per key, so a call asked for again after a crash is found instead
    /// of run twice ([`AgentFs::tool_call_by_key`]).
    pub idempotency_key: Option<&'a str>,
}

/// Millisecond timing and grouping of one call (ClawOS extension table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallMeta {
    pub session_id: Option<String>,
    pub parent_call_id: Option<i64>,
    pub started_at_ms: i64,
    pub completed_at_ms: i64,
}

/// One `tool_calls` row, with its extension row when ClawOS recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: i64,
    pub name: String,
    pub parameters: Option<String>,
    pub result: Option<String>,
    pub error: Option<String>,
    pub started_at: i64,
    pub completed_at: i64,
    pub duration_ms: i64,
    pub meta: Option<ToolCallMeta>,
}

impl ToolCall {
    /// What the call answered: its result as JSON, or its error message (a
    /// result that is not JSON says so; the insert trigger refuses one).
    pub fn outcome(&self) -> std::result::Result<Value, String> {
        match (&self.result, &self.error) {
            (Some(result), _) => serde_json::from_str(result)
                .map_err(|e| format!("the recorded result of call {} is not JSON: {e}", self.id)),
            (None, error) => Err(error.clone().unwrap_or_default()),
        }
    }
}

/// One row of the spec's "Analyze Tool Performance" query.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolStats {
    pub name: String,
    pub total_calls: i64,
    pub successful: i64,
    pub failed: i64,
    pub avg_duration_ms: f64,
}

/// A call as the hash chain covers it: its `tool_calls` row, its
/// `clawos_tool_call_meta` row and its idempotency key.
pub(crate) struct ChainedCall<'a> {
    pub id: i64,
    pub name: &'a str,
    pub parameters: Option<&'a str>,
    pub result: Option<&'a str>,
    pub error: Option<&'a str>,
    pub started_at: i64,
    pub completed_at: i64,
    pub duration_ms: i64,
    pub session_id: Option<&'a str>,
    pub parent_call_id: Option<i64>,
    pub started_at_ms: Option<i64>,
    pub completed_at_ms: Option<i64>,
    pub idempotency_key: Option<&'a str>,
}

/// The hash before the first call of a chain.
pub(crate) const CHAIN_START: [u8; 32] = [0; 32];

impl ChainedCall<'_> {
    /// SHA-256 over a version tag, the previous hash and every field, each
    /// text length-prefixed and each optional field tagged present or
    /// absent, so no two different calls encode alike.
    pub(crate) fn hash(&self, previous: &[u8]) -> [u8; 32] {
        fn text(hasher: &mut Sha256, value: Option<&str>) {
            match value {
                None => hasher.update([0]),
                Some(text) => {
                    hasher.update([1]);
                    hasher.update((text.len() as u64).to_le_bytes());
                    hasher.update(text.as_bytes());
                }
            }
        }
        fn integer(hasher: &mut Sha256, value: Option<i64>) {
            match value {
                None => hasher.update([0]),
                Some(number) => {
                    hasher.update([1]);
                    hasher.update(number.to_le_bytes());
                }
            }
        }
        let mut hasher = Sha256::new();
        hasher.update(b"clawos tool call chain v1\0");
        hasher.update(previous);
        integer(&mut hasher, Some(self.id));
        text(&mut hasher, Some(self.name));
        text(&mut hasher, self.parameters);
        text(&mut hasher, self.result);
        text(&mut hasher, self.error);
        for value in [self.started_at, self.completed_at, self.duration_ms] {
            integer(&mut hasher, Some(value));
        }
        text(&mut hasher, self.session_id);
        for value in [self.parent_call_id, self.started_at_ms, self.completed_at_ms] {
            integer(&mut hasher, value);
        }
        text(&mut hasher, self.idempotency_key);
        hasher.finalize().into()
    }
}

/// The hash of the newest call in the chain, or [`CHAIN_START`].
fn chain_head(conn: &Connection) -> Result<Vec<u8>> {
    let head: Option<Vec<u8>> = conn
        .prepare_cached("SELECT hash FROM clawos_tool_call_chain ORDER BY call_id DESC LIMIT 1")?
        .query_row([], |row| row.get(0))
        .optional()?;
    Ok(head.unwrap_or_else(|| CHAIN_START.to_vec()))
}

fn unix_millis(time: SystemTime) -> Result<i64> {
    let millis = time.duration_since(UNIX_EPOCH).map_err(|_| Error::invalid("tool call time before 1970"))?.as_millis();
    i64::try_from(millis).map_err(|_| Error::invalid("tool call time out of range"))
}

/// Columns named one by one: databases made by the reference SDK carry an
/// extra `status` column that `SELECT *` would shift into place.
const SELECT_CALLS: &str = "SELECT c.id, c.name, c.parameters, c.result, c.error, c.started_at,
       c.completed_at, c.duration_ms, m.session_id, m.parent_call_id, m.started_at_ms,
       m.completed_at_ms
FROM tool_calls c LEFT JOIN clawos_tool_call_meta m ON m.call_id = c.id";

fn call_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ToolCall> {
    let started_at_ms: Option<i64> = row.get(10)?;
    let meta = match started_at_ms {
        Some(started_at_ms) => Some(ToolCallMeta {
            session_id: row.get(8)?,
            parent_call_id: row.get(9)?,
            started_at_ms,
            completed_at_ms: row.get(11)?,
        }),
        None => None,
    };
    Ok(ToolCall {
        id: row.get(0)?,
        name: row.get(1)?,
        parameters: row.get(2)?,
        result: row.get(3)?,
        error: row.get(4)?,
        started_at: row.get(5)?,
        completed_at: row.get(6)?,
        duration_ms: row.get::<_, Option<i64>>(7)?.unwrap_or_default(),
        meta,
    })
}

impl AgentFs {
    /// Records a finished call (spec: Record Tool Call), its timing row, its
    /// idempotency key and its link of the hash chain, in one transaction;
    /// returns the call id. A key already recorded is a constraint error and
    /// records nothing.
    ///
    /// `tool_calls` keeps whole seconds with `duration_ms` derived from them
    /// as consistency rule 3 requires; the measured milliseconds go to
    /// `clawos_tool_call_meta`.
    pub fn record_tool_call(&mut self, call: &NewToolCall<'_>) -> Result<i64> {
        let started_ms = unix_millis(call.started)?;
        let completed_ms = unix_millis(call.completed)?;
        if completed_ms < started_ms {
            return Err(Error::invalid("tool call completed before it started"));
        }
        let (started_at, completed_at) = (started_ms.div_euclid(1000), completed_ms.div_euclid(1000));
        let parameters = call.parameters.map(Value::to_string);
        let duration_ms = (completed_at - started_at) * 1000;
        let (result, error) = match call.outcome {
            Ok(value) => (Some(value.to_string()), None),
            Err(message) => (None, Some(message)),
        };
        self.write_tx(|cx| {
            let id: i64 = cx
                .conn
                .prepare_cached(
                    "INSERT INTO tool_calls (name, parameters, result, error, started_at, completed_at, duration_ms)
                     VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                )?
                .query_row(
                    params![call.name, parameters, result, error, started_at, completed_at, duration_ms],
                    |row| row.get(0),
                )?;
            cx.conn
                .prepare_cached(
                    "INSERT INTO clawos_tool_call_meta
                     (call_id, session_id, parent_call_id, started_at_ms, completed_at_ms)
                     VALUES (?, ?, ?, ?, ?)",
                )?
                .execute(params![id, call.session_id, call.parent_call_id, started_ms, completed_ms])?;
            if let Some(key) = call.idempotency_key {
                cx.conn
                    .prepare_cached("INSERT INTO clawos_tool_call_key (idempotency_key, call_id) VALUES (?, ?)")?
                    .execute(params![key, id])?;
            }
            let link = ChainedCall {
                id,
                name: call.name,
                parameters: parameters.as_deref(),
                result: result.as_deref(),
                error,
                started_at,
                completed_at,
                duration_ms,
                session_id: call.session_id,
                parent_call_id: call.parent_call_id,
                started_at_ms: Some(started_ms),
                completed_at_ms: Some(completed_ms),
                idempotency_key: call.idempotency_key,
            }
            .hash(&chain_head(cx.conn)?);
            cx.conn
                .prepare_cached("INSERT INTO clawos_tool_call_chain (call_id, hash) VALUES (?, ?)")?
                .execute(params![id, link.as_slice()])?;
            Ok(id)
        })
    }

    fn query_calls(&self, filter: &str, arg: &dyn rusqlite::ToSql) -> Result<Vec<ToolCall>> {
        let sql = format!("{SELECT_CALLS} WHERE {filter} ORDER BY c.started_at DESC, c.id DESC");
        let mut stmt = self.connection().prepare_cached(&sql)?;
        let calls = stmt.query_map([arg], call_from_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(calls)
    }

    /// Calls of the tool `name`, newest first (spec: Query Tool Calls by Name).
    pub fn tool_calls_by_name(&self, name: &str) -> Result<Vec<ToolCall>> {
        self.query_calls("c.name = ?", &name)
    }

    /// Calls started after `since` (Unix seconds), newest first (spec: Query Recent Tool Calls).
    pub fn tool_calls_since(&self, since: i64) -> Result<Vec<ToolCall>> {
        self.query_calls("c.started_at > ?", &since)
    }

    /// Calls made in session `session_id`, newest first (ClawOS extension).
    pub fn tool_calls_in_session(&self, session_id: &str) -> Result<Vec<ToolCall>> {
        self.query_calls("m.session_id = ?", &session_id)
    }

    /// The call recorded with idempotency key `key`, if there is one.
    pub fn tool_call_by_key(&self, key: &str) -> Result<Option<ToolCall>> {
        let filter = "c.id = (SELECT call_id FROM clawos_tool_call_key WHERE idempotency_key = ?)";
        Ok(self.query_calls(filter, &key)?.into_iter().next())
    }

    /// Per-tool call counts and mean duration (spec: Analyze Tool Performance).
    pub fn tool_performance(&self) -> Result<Vec<ToolStats>> {
        let mut stmt = self.connection().prepare_cached(
            "SELECT name, COUNT(*) AS total_calls,
                    SUM(CASE WHEN error IS NULL THEN 1 ELSE 0 END) AS successful,
                    SUM(CASE WHEN error IS NOT NULL THEN 1 ELSE 0 END) AS failed,
                    AVG(duration_ms) AS avg_duration_ms
             FROM tool_calls GROUP BY name ORDER BY total_calls DESC",
        )?;
        let stats = stmt
            .query_map([], |row| {
                Ok(ToolStats {
                    name: row.get(0)?,
                    total_calls: row.get(1)?,
                    successful: row.get(2)?,
                    failed: row.get(3)?,
                    avg_duration_ms: row.get::<_, Option<f64>>(4)?.unwrap_or_default(),
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(stats)
    }
}

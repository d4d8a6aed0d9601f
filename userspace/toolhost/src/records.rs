//! Records each call in the calling agent's AgentFS `tool_calls` table.

use std::sync::Mutex;
use std::time::SystemTime;

use agentfs::{AgentFs, NewToolCall};

use crate::definition::ValidTool;
use crate::{CallError, CallRequest, ToolHost};

/// Why a call's outcome could not be recorded. The call's own outcome is
/// still returned to the caller alongside it.
#[derive(Debug, thiserror::Error)]
#[error("recording the call of {tool_id} in its tool_calls: {source}")]
pub struct RecordError {
    pub tool_id: String,
    #[source]
    pub source: agentfs::Error,
}

/// The outcome of a recorded call.
#[derive(Debug)]
pub struct RecordedCall {
    pub outcome: Result<serde_json::Value, CallError>,
    /// The `tool_calls` row id.
    pub call_id: i64,
}

impl ToolHost {
    /// Runs the tool like [`ToolHost::call`] and records parameters, result
    /// or error (as `<kind>: <message>`), and timing in `records`, locked only
    /// for the insert so an agent's calls still run side by side. A failure
    /// to record is an error even when the call succeeded: an unrecorded call
    /// must not look like a recorded one. With `idempotency_key` the key is
    /// recorded with the call (the caller looks it up first, see
    /// [`AgentFs::tool_call_by_key`]).
    pub fn call_recorded(
        &self,
        tool: &ValidTool,
        request: &CallRequest<'_>,
        session_id: Option<&str>,
        idempotency_key: Option<&str>,
        records: &Mutex<AgentFs>,
    ) -> Result<RecordedCall, RecordError> {
        let started = SystemTime::now();
        let outcome = self.call(tool, request);
        let completed = SystemTime::now();
        let recorded = outcome.as_ref().map_err(|e| format!("{}: {e}", e.kind()));
        let call_id = records
            .lock()
            .expect("tool_calls lock poisoned")
            .record_tool_call(&NewToolCall {
                name: tool.tool_id(),
                parameters: Some(request.params),
                outcome: match &recorded {
                    Ok(value) => Ok(*value),
                    Err(text) => Err(text.as_str()),
                },
                started,
                completed,
                session_id,
                parent_call_id: None,
                idempotency_key,
            })
            .map_err(|source| RecordError { tool_id: tool.tool_id().to_owned(), source })?;
        Ok(RecordedCall { outcome, call_id })
    }
}

//! The errors a tool call can end with. Each limit has its own variant so
//! callers (and the tool-call records) can tell a slow tool from a greedy one.

use std::time::Duration;

use crate::definition::DefinitionError;

/// Why one call did not return a result. After any of these the host is as
/// healthy as before: the call's Store and instance are dropped with it.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The tool id is not in the registry.
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    /// The wasm file's SHA-256 differs from the registry's `wasm_hash`; the
    /// file is not compiled or run.
    #[error("tool {tool_id}: wasm hash mismatch: registry says {expected}, file has {actual}")]
    HashMismatch { tool_id: String, expected: String, actual: String },
    /// The tool reached for something its definition does not grant: an
    /// import of an ungranted interface (refused before instantiation), or a
    /// path or host outside its grants (the call is aborted).
    #[error("tool {tool_id}: capability denied: {reason}")]
    CapabilityDenied { tool_id: String, reason: String },
    /// The wall-clock deadline passed (epoch interruption).
    #[error("tool {tool_id}: timed out after {timeout:?}")]
    Timeout { tool_id: String, timeout: Duration },
    /// Memories and tables together would have grown past the tool's limit.
    #[error(
        "tool {tool_id}: out of memory: growing to {requested_bytes} bytes exceeds the limit of {limit_bytes} bytes"
    )]
    OutOfMemory { tool_id: String, requested_bytes: usize, limit_bytes: usize },
    /// The guest trapped (unreachable, out-of-bounds access, stack overflow, ...).
    #[error("tool {tool_id}: trapped: {message}")]
    Trap { tool_id: String, message: String },
    /// The tool ran and reported its own error through `tool-error`.
    #[error("tool {tool_id}: {kind}: {message}")]
    Tool { tool_id: String, kind: &'static str, message: String },
    /// The tool returned something that is not JSON, or too much of it.
    #[error("tool {tool_id}: invalid output: {reason}")]
    InvalidOutput { tool_id: String, reason: String },
    /// The caller's parameters are not acceptable before the tool even runs.
    #[error("invalid parameters: {0}")]
    InvalidParams(String),
    /// The wasm file could not be read, compiled or linked.
    #[error("tool {tool_id}: cannot load {what}: {message}")]
    Load { tool_id: String, what: &'static str, message: String },
    /// The registry entry itself is invalid.
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    /// The host's own resources (cgroup, pool slots) failed.
    #[error("tool {tool_id}: host error: {message}")]
    Host { tool_id: String, message: String },
}

impl CallError {
    /// A short stable name for the error's kind, for IPC error payloads and
    /// the tool-call records.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::UnknownTool(_) => "unknown_tool",
            CallError::HashMismatch { .. } => "hash_mismatch",
            CallError::CapabilityDenied { .. } => "capability_denied",
            CallError::Timeout { .. } => "timeout",
            CallError::OutOfMemory { .. } => "out_of_memory",
            CallError::Trap { .. } => "trap",
            CallError::Tool { .. } => "tool_error",
            CallError::InvalidOutput { .. } => "invalid_output",
            CallError::InvalidParams(_) => "invalid_params",
            CallError::Load { .. } => "load_failed",
            CallError::Definition(_) => "invalid_definition",
            CallError::Host { .. } => "host_error",
        }
    }
}

/// Raised inside the Store (from the limiter or a host function) to abort
/// the guest; the host turns it back into a [`CallError`] when the call ends.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Abort {
    #[error("memory limit: {requested_bytes} bytes requested, {limit_bytes} allowed")]
    Memory { requested_bytes: usize, limit_bytes: usize },
    #[error("capability denied: {0}")]
    Denied(String),
}

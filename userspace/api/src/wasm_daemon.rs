//! wasm-daemon: WASM tools (`specs/toolhost/README.md`). A tool is named by
//! `tool_name` (the `tool_id` of its definition file) and its input is
//! `arguments`, as in the IPC spec's `execute_tool` example.

use serde::{Deserialize, Serialize};

use crate::NoParams;

service! {
    component: Some(clawos_ipc::ComponentId::WasmDaemon);
    /// Runs a tool for an agent in a fresh instance; the call is recorded
    /// in the agent's workspace database first.
    fn execute_tool(ExecuteTool) -> ToolResult { timeout_ms: 10000, errors: [Eperm, Enoent, Etimeout, Eio] }
    /// The image's and the operator's installed tools.
    fn tool_list(NoParams) -> ToolList { timeout_ms: 5000, errors: [] }
    /// One tool: its definition, whether it loads, and its parameters schema.
    fn tool_inspect(ToolRef) -> ToolDetails { timeout_ms: 30000, errors: [Enoent] }
    /// Installs (or upgrades) a tool: the hash is verified and the tool
    /// compiled and linked against its capabilities before it is listed.
    fn tool_install(ToolInstall) -> ToolSummary { timeout_ms: 30000, errors: [Eperm, Eio] }
    /// Removes an installed tool (the image's cannot be).
    fn tool_remove(ToolRef) -> ToolRemoved { timeout_ms: 5000, errors: [Eperm, Enoent, Eio] }
}

/// `execute_tool` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteTool {
    /// The tool.
    pub tool_name: String,
    /// The tool's input, checked against its parameters schema.
    #[serde(default)]
    pub arguments: serde_json::Value,
    /// The agent the call is made for: its workspace database records it.
    pub agent: String,
    /// The agent's session, recorded with the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The caller's key for this call, recorded with it: a call asked for
    /// again with a recorded key is not run again, its recorded outcome is
    /// the answer, and while the first is still running the second waits
    /// for it (an agent resuming after a crash, `specs/agent/README.md`,
    /// "Checkpoints and resume"). At most 256 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// `execute_tool` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolResult {
    /// What the tool answered.
    pub result: serde_json::Value,
    /// The call's row in the agent's `tool_calls`.
    pub call_id: i64,
}

/// Params naming one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRef {
    /// The tool.
    pub tool_name: String,
}

/// Where a tool comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolSource {
    /// Shipped in the image: cannot be replaced or removed.
    Image,
    /// Installed by the operator under `/clawfs/tools`.
    Installed,
}

/// What `tool_list` shows of a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolSummary {
    /// The tool.
    pub tool_name: String,
    /// Its version.
    pub version: String,
    /// Image or installed.
    pub source: ToolSource,
    /// What it does.
    pub description: Option<String>,
    /// The capabilities it is granted.
    pub capabilities: Vec<String>,
    /// SHA-256 of its component.
    pub wasm_hash: String,
    /// Its memory limit.
    pub memory_limit_mb: u32,
    /// Its CPU quota, percent of one core.
    pub cpu_quota_percent: u32,
    /// Its wall-time limit per call.
    pub timeout_seconds: u32,
}

/// `tool_list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolList {
    /// Image tools first.
    pub tools: Vec<ToolSummary>,
}

/// `tool_inspect` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolDetails {
    /// What `tool_list` shows.
    #[serde(flatten)]
    pub summary: ToolSummary,
    /// The definition file as loaded (`specs/toolhost/README.md`).
    pub definition: serde_json::Value,
    /// Where its component lives.
    pub wasm_file: String,
    /// Whether it compiles and links against its capabilities.
    pub loadable: bool,
    /// The JSON Schema of its `arguments`, when it loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_schema: Option<serde_json::Value>,
    /// Why it does not load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_error: Option<String>,
}

/// `tool_install` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolInstall {
    /// The definition file (`specs/toolhost/README.md`); its `wasm_path`
    /// is replaced by the store's.
    pub definition: serde_json::Value,
    /// The component, base64.
    pub wasm_base64: String,
}

/// `tool_remove` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolRemoved {
    /// The tool.
    pub tool_name: String,
    /// The version removed.
    pub version: String,
    /// Always true: a missing tool is ENOENT.
    pub removed: bool,
}

//! agent-loop: the agents (`specs/agent/README.md`). An agent is named by
//! `agent`; each conversation with it is a session (`session_id`), and each
//! operator message starts one turn (`turn_id`) that runs to its answer.
//!
//! A turn outlives any request (a model may think for minutes), so
//! `chat_send` answers at once and the turn reports on the same connection
//! with events carrying its `turn_id` ([`TURN_TEXT`], [`TURN_STEP`],
//! [`TURN_END`]); `turn_result` answers for a finished turn when those were
//! missed.

use serde::{Deserialize, Serialize};

use crate::{Done, NoParams};

service! {
    component: Some(clawos_ipc::ComponentId::AgentLoop);
    /// Creates an agent with a `config.toml` (the default one when none is
    /// given); a config that does not parse is EPROTO naming the key.
    fn agent_create(AgentCreate) -> AgentInfo { timeout_ms: 30000, errors: [Eperm, Eio] }
    /// Every agent and its state.
    fn agent_list(NoParams) -> AgentList { timeout_ms: 5000, errors: [Eio] }
    /// One agent: state, config error, model, limits, spend, sessions.
    fn agent_show(AgentName) -> AgentDetails { timeout_ms: 5000, errors: [Enoent, Eio] }
    /// Stops an agent from taking new turns (a running turn finishes).
    fn agent_pause(AgentName) -> AgentInfo { timeout_ms: 5000, errors: [Enoent] }
    /// Re-reads an agent's config and lets it take turns again; a config
    /// error is answered (EPROTO) and the agent stays stopped.
    fn agent_resume(AgentName) -> AgentInfo { timeout_ms: 5000, errors: [Enoent, Eproto, Eio] }
    /// The changes to an agent's `soul.md` / `identity.md` the soul guard
    /// holds, each with why and the diff from the approved version.
    fn agent_guard(AgentName) -> GuardHolds { timeout_ms: 5000, errors: [Enoent, Eio] }
    /// Decides the held changes: approved, they become the approved
    /// versions; rejected, the approved versions are written back. Either
    /// way the agent takes turns again.
    fn agent_guard_decide(GuardDecision) -> AgentInfo { timeout_ms: 10000, errors: [Enoent, Eio] }
    /// Removes an agent, its directory and everything in it.
    fn agent_remove(AgentName) -> Done { timeout_ms: 30000, errors: [Enoent, Eperm, Eio] }
    /// Starts a turn: the operator's message to an agent, in a session (a
    /// new one when none is named). Progress arrives as events on this
    /// connection; EAGAIN when the session already runs a turn.
    fn chat_send(ChatSend) -> TurnStarted { timeout_ms: 5000, errors: [Enoent, Eperm, Eagain, Eio] }
    /// Cancels a running turn (the session stays).
    fn chat_cancel(TurnRef) -> TurnCancelled { timeout_ms: 5000, errors: [Enoent] }
    /// Continues a session whose turn ended `waiting` for an approval, once
    /// the operator answered it: the answered calls run (or are refused) and
    /// the model goes on; the turn reports like `chat_send`'s.
    fn chat_continue(SessionRef) -> TurnStarted { timeout_ms: 5000, errors: [Enoent, Eperm, Eagain, Eio] }
    /// A turn's outcome: running, or how it ended.
    fn turn_result(TurnRef) -> TurnOutcome { timeout_ms: 5000, errors: [Enoent] }
    /// An agent's sessions, newest first.
    fn session_list(AgentName) -> SessionList { timeout_ms: 5000, errors: [Enoent, Eio] }
    /// A session's transcript.
    fn session_show(SessionRef) -> Transcript { timeout_ms: 5000, errors: [Enoent, Eio] }
    /// What the session's next request would put in the model's context
    /// window, part by part with each part's tokens: the system prompt's
    /// instructions, each persona source, each tool's schema, each message.
    fn session_context(SessionRef) -> SessionContext { timeout_ms: 10000, errors: [Enoent, Eio] }
    /// An agent's MCP servers as its next turn would have them: each
    /// server not connected is tried now (unless its backoff has not
    /// passed; one still connecting after 25 s shows its state before),
    /// then its state, the tools the agent is given and those refused, and
    /// the last error (`specs/mcp/README.md`).
    fn mcp_status(AgentName) -> McpStatus { timeout_ms: 30000, errors: [Enoent, Eproto, Eio] }
    /// Closes an agent's MCP server (a local one is stopped) and forgets
    /// its failures: the next turn or status starts it again at once.
    fn mcp_restart(McpServerRef) -> Done { timeout_ms: 5000, errors: [Enoent] }
}

/// Event: text the model produced, as it streams (`turn_id`, `text`).
pub const TURN_TEXT: &str = "turn.text";
/// Event: a step of the turn (a model request, a tool call) began or ended
/// ([`TurnStep`]).
pub const TURN_STEP: &str = "turn.step";
/// Event: the turn ended ([`TurnOutcome`]); the last event of a turn.
pub const TURN_END: &str = "turn.end";

/// Params naming one agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentName {
    /// The agent.
    pub agent: String,
}

/// `agent_create` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentCreate {
    /// The new agent (specs/clawfs/README.md, "Names").
    pub agent: String,
    /// Its `config.toml`; the default config (the in-box model) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// Whether an agent takes turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// Waiting for a message.
    Idle,
    /// Running a turn.
    Running,
    /// Paused by the operator.
    Paused,
    /// Its config or its database does not load; `error` says why.
    Stopped,
    /// The soul guard holds a change to its `soul.md` or `identity.md`
    /// until the operator decides (`agent_guard`); `error` says which.
    Halted,
}

/// `mcp_status` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpStatus {
    /// The agent.
    pub agent: String,
    /// Its servers, by name.
    pub servers: Vec<McpServerStatus>,
}

/// One MCP server of an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpServerStatus {
    /// Its name in the agent's `[mcp.servers]`.
    pub server: String,
    /// `stdio` (a local program) or `http` (Streamable HTTP).
    pub transport: String,
    /// The program, or the URL.
    pub endpoint: String,
    /// `connected`, or `failed` (tried again after `retry_in_s`).
    pub state: String,
    /// The tools the agent is given (`mcp.<server>.<tool>`).
    pub tools: Vec<String>,
    /// The server's tools the agent is not given, each with why.
    pub refused: Vec<McpRefusedTool>,
    /// Failures in a row.
    pub failures: u32,
    /// The last failure.
    pub last_error: Option<String>,
    /// Seconds until the next try, when failed.
    pub retry_in_s: Option<u64>,
}

/// A server's tool the agent is not given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpRefusedTool {
    /// The server's name for it.
    pub tool: String,
    /// Why.
    pub reason: String,
}

/// `mcp_restart` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerRef {
    /// The agent.
    pub agent: String,
    /// The server's name in its `[mcp.servers]`.
    pub server: String,
}

/// `agent_guard` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GuardHolds {
    /// The held changes, by file; empty when nothing is held.
    pub holds: Vec<GuardHold>,
}

/// A change the soul guard holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GuardHold {
    /// The file, relative to the agent's directory.
    pub file: String,
    /// Why it is held.
    pub reason: String,
    /// When, RFC 3339 UTC.
    pub held_at: String,
    /// Unified diff from the approved version to the held one.
    pub diff: String,
}

/// `agent_guard_decide` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GuardDecision {
    /// The agent.
    pub agent: String,
    /// True approves the held changes, false rejects them.
    pub approve: bool,
}

/// One agent as `agent_list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentInfo {
    /// The agent.
    pub agent: String,
    /// Its state.
    pub state: AgentState,
    /// Why it is stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Provider and model of its default route (`provider/model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `agent_list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentList {
    /// By name.
    pub agents: Vec<AgentInfo>,
}

/// Spend against a limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spend {
    /// Spent in the period, US dollars.
    pub spent_usd: f64,
    /// The period's limit, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_usd: Option<f64>,
}

/// `agent_show` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentDetails {
    /// What `agent_list` shows.
    #[serde(flatten)]
    pub info: AgentInfo,
    /// The turn limits in force (`[limits]` of its config).
    pub limits: serde_json::Value,
    /// What it may do without the operator (`[autonomy]` of its config:
    /// `level`, `max_actions_per_hour`, `approval_expires_minutes`).
    pub autonomy: serde_json::Value,
    /// The tools it may call.
    pub tools: Vec<String>,
    /// Tokens of its system prompt with the tool descriptions.
    pub system_prompt_tokens: u64,
    /// Spend today (UTC).
    pub today: Spend,
    /// Spend this month (UTC).
    pub month: Spend,
    /// How many sessions it has.
    pub sessions: u64,
    /// The brain files in its system prompt, in order (`soul.md`, ...).
    pub persona: Vec<String>,
    /// The brain files left out of it, each with why (over the
    /// `[persona] budget_tokens` left, unreadable).
    pub persona_left_out: Vec<String>,
}

/// `chat_send` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatSend {
    /// The agent.
    pub agent: String,
    /// The session to continue; a new one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The operator's message.
    pub message: String,
    /// A route of the agent's config (`fast`, `smart`, `local`, ...)
    /// instead of its default model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// `chat_send` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnStarted {
    /// The agent.
    pub agent: String,
    /// The session (new or continued).
    pub session_id: String,
    /// The turn: its events carry it.
    pub turn_id: String,
}

/// Params naming one turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnRef {
    /// The turn.
    pub turn_id: String,
}

/// `chat_cancel` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnCancelled {
    /// The turn.
    pub turn_id: String,
    /// False when it had already ended.
    pub cancelled: bool,
}

/// What a step of a turn was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A request to the model.
    Think,
    /// A tool call.
    Tool,
}

/// [`TURN_STEP`] event data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnStep {
    /// The turn.
    pub turn_id: String,
    /// Step number within the turn, from 1.
    pub step: u32,
    /// What it is.
    pub kind: StepKind,
    /// The tool, for a tool step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// Whether it ended well (absent while it runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// How long it took, milliseconds (absent while it runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// Still running.
    Running,
    /// The agent answered.
    Done,
    /// A limit of the agent's config ended it; `message` names the limit.
    Limit,
    /// The operator cancelled it.
    Cancelled,
    /// The model could not be reached or answered garbage; `message` says why.
    Failed,
    /// The soul guard halted the agent after a tool call changed its
    /// `soul.md` or `identity.md`; `message` says which.
    Halted,
    /// A tool call waits for the operator's approval; `message` names the
    /// approval and how to answer it (`chat_continue` goes on after).
    Waiting,
}

/// `turn_result` result and [`TURN_END`] event data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnOutcome {
    /// The turn.
    pub turn_id: String,
    /// The session.
    pub session_id: String,
    /// How it ended.
    pub status: TurnStatus,
    /// The agent's answer (what was streamed, joined).
    pub answer: String,
    /// Why it ended, when not `done`: the limit reached, the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Steps taken.
    pub steps: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Prompt tokens over the turn's requests.
    pub input_tokens: u64,
    /// Answer tokens over the turn's requests.
    pub output_tokens: u64,
    /// What the turn cost, US dollars.
    pub cost_usd: f64,
}

/// One session as `session_list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionSummary {
    /// The session.
    pub session_id: String,
    /// When it began (RFC 3339).
    pub created_at: String,
    /// When it last changed (RFC 3339).
    pub updated_at: String,
    /// Messages in its transcript.
    pub messages: u64,
}

/// `session_list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionList {
    /// Newest first.
    pub sessions: Vec<SessionSummary>,
}

/// `session_show` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRef {
    /// The agent.
    pub agent: String,
    /// The session.
    pub session_id: String,
}

/// One message of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TranscriptEntry {
    /// Its position in the session, from 1.
    pub seq: u64,
    /// `user`, `assistant`, `tool`, or `notice` (compaction, limits).
    pub role: String,
    /// Its text.
    pub content: String,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<serde_json::Value>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// When it was recorded (RFC 3339).
    pub at: String,
}

/// One part of a session's context window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContextPart {
    /// `instructions` (the system prompt's own text), `persona` (a brain
    /// file or instruction file), `tool` (a tool's schema, or for a model
    /// without native tool calling the prompt's tool list) or `message`.
    pub kind: String,
    /// The file, the tool, or a message's `#seq role`.
    pub name: String,
    /// Its estimated tokens.
    pub tokens: u64,
    /// The start of a message's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
}

/// `session_context` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionContext {
    /// The session.
    pub session_id: String,
    /// The default route's model.
    pub model: String,
    /// Its context window, tokens, when its provider table names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The system prompt as the next request sends it.
    pub system_prompt: String,
    /// In the order the request carries them.
    pub parts: Vec<ContextPart>,
    /// The persona sources left out, each with why.
    pub left_out: Vec<String>,
    /// The parts' tokens together.
    pub total_tokens: u64,
}

/// `session_show` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Transcript {
    /// The session.
    pub session_id: String,
    /// Oldest first, compacted parts as their summary.
    pub entries: Vec<TranscriptEntry>,
}

//! The tools a model may call (`specs/agent/README.md`, "Tools"): the
//! agent's files, its memory (store, recall, forget) and a workspace's
//! memory search through fs-engine, every installed WASM tool through
//! wasm-daemon's `execute_tool`, and the tools of the agent's MCP servers
//! (`mcp_servers`, specs/mcp/README.md).
//!
//! Owns: describing tools to the model (name, description, the JSON Schema
//! of their arguments; the built-in tools' in `built_in`), what each call
//! needs (`Permission`), and carrying
//! a call to the component that runs it once security-agent's
//! `check_policy` allows it (`specs/agent/README.md`, "Permissions and
//! approvals"). Must not own: any permission decision. The policy decides
//! in security-agent; a call then goes out under the agent's name and the
//! component that serves it applies its own rules (RULE-001 in fs-engine,
//! tool grants and the sandbox in wasm-daemon), so nothing a model writes
//! can widen what the agent may do. WASM calls are recorded in
//! the agent's `tool_calls` by wasm-daemon; the built-in and MCP calls are
//! recorded here, in the same table, with the session.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

mod built_in;

use clawos_api::security_agent::{self, AgentPolicy, CheckPolicy, Decision, Permission};
use clawos_api::wasm_daemon::{self, ExecuteTool, ToolRef};
use clawos_ipc::client::ConnectError;
use clawos_ipc::{ComponentId, IpcClient};
use serde_json::Value;

pub use self::built_in::BuiltIn;
pub(crate) use self::built_in::{optional, schema_of};
use crate::provider::ToolSpec;

/// Why agent-loop could not reach a component, or learn its tools.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The component's socket did not take the connection or the handshake.
    #[error("connecting to {peer}: {source}")]
    Connect {
        /// The component.
        peer: ComponentId,
        /// Why.
        #[source]
        source: ConnectError,
    },
    /// wasm-daemon did not answer `method` (`tool_list`, `tool_inspect`).
    #[error("wasm-daemon {method}: {source}")]
    WasmDaemon {
        /// The method.
        method: &'static str,
        /// Its error.
        #[source]
        source: clawos_api::CallError,
    },
}

/// Why the agent database's tool-call records could not be read or written.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    /// The database did not open.
    #[error("{}: {source}", db.display())]
    Open {
        /// The agent database.
        db: PathBuf,
        /// AgentFS's reason.
        #[source]
        source: agentfs::Error,
    },
    /// A query or the insert failed.
    #[error(transparent)]
    AgentFs(#[from] agentfs::Error),
    /// The blocking task that reads or writes them panicked or was cancelled.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

/// Where a tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// fs-engine, on the agent's files or memory: a built-in tool.
    BuiltIn(BuiltIn),
    /// wasm-daemon, in the sandbox.
    Wasm,
    /// agent-loop itself: a sub-agent's turn (`delegate`).
    Delegate,
    /// One of the agent's MCP servers, in its own unit or remote.
    Mcp,
    /// agent-loop itself: an MCP tool's schema (`mcp_schema`), when the
    /// model was shown MCP tools by name first.
    McpSchema,
}

/// A tool the agent may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// What the model is told.
    pub spec: ToolSpec,
    /// Where it runs.
    pub runs: Runs,
    /// What a call of it needs.
    pub needs: Vec<Permission>,
}

/// The built-in tools: the agent's own files (paths relative to its
/// directory, RULE-001), its memory, and a workspace's memory search.
pub fn built_in() -> Vec<Tool> {
    BuiltIn::ALL
        .into_iter()
        .map(|tool| Tool {
            spec: ToolSpec {
                name: tool.name().into(),
                description: tool.description().into(),
                parameters: tool.parameters(),
            },
            runs: Runs::BuiltIn(tool),
            needs: vec![tool.needs()],
        })
        .collect()
}

/// The installed WASM tools with their arguments' schemas, from
/// wasm-daemon. A tool that does not load is left out (and logged).
pub async fn wasm_tools(client: &IpcClient) -> Result<Vec<Tool>, Error> {
    let daemon = wasm_daemon::Client::new(client);
    let list = daemon
        .tool_list(&clawos_api::NoParams {})
        .await
        .map_err(|source| Error::WasmDaemon { method: "tool_list", source })?;
    let mut tools = Vec::new();
    for summary in list.tools {
        let details = daemon
            .tool_inspect(&ToolRef { tool_name: summary.tool_name.clone() })
            .await
            .map_err(|source| Error::WasmDaemon { method: "tool_inspect", source })?;
        match details.params_schema {
            Some(parameters) if details.loadable => {
                // A tool granted any network access needs `network` too.
                let capabilities = details.definition.get("capabilities").and_then(Value::as_array);
                let networked = capabilities
                    .is_some_and(|all| all.iter().any(|c| c.as_str().is_some_and(|c| c.starts_with("network:"))));
                tools.push(Tool {
                    spec: ToolSpec {
                        name: summary.tool_name,
                        description: summary.description.unwrap_or_default(),
                        parameters,
                    },
                    runs: Runs::Wasm,
                    needs: if networked { vec![Permission::Tool, Permission::Network] } else { vec![Permission::Tool] },
                });
            }
            _ => tracing::warn!(
                tool = summary.tool_name,
                reason = details.load_error.as_deref().unwrap_or("no schema"),
                "tool left out"
            ),
        }
    }
    Ok(tools)
}

/// The components a turn calls tools through, connected for the turn.
pub struct Peers {
    /// fs-engine.
    pub fs_engine: IpcClient,
    /// wasm-daemon.
    pub wasm_daemon: IpcClient,
    /// security-agent, which decides each call (`check_policy`).
    pub security_agent: IpcClient,
}

/// What a call spent on a model: a sub-agent's requests, counted to the
/// turn that made the call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Answer tokens.
    pub output_tokens: u64,
    /// US dollars.
    pub cost_usd: f64,
}

/// What a call gave: the result for the model, and whether it failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallResult {
    /// The text the model gets as the tool's result.
    pub content: String,
    /// True when the tool failed (the content says how).
    pub is_error: bool,
    /// Set when the call did not run because it waits for the operator's
    /// approval: what the operator is told (the approval and how to answer).
    pub waiting: Option<String>,
    /// What the call spent on a model.
    pub spent: Spent,
}

impl CallResult {
    /// A result the model reads.
    pub fn new(content: impl Into<String>, is_error: bool) -> Self {
        CallResult { content: content.into(), is_error, ..CallResult::default() }
    }

    /// A call that waits for the operator: what they are told.
    pub(crate) fn waiting(what: String) -> Self {
        CallResult { waiting: Some(what), ..CallResult::default() }
    }
}

/// A connection to `peer` as agent-loop.
pub async fn connect(peer: ComponentId) -> Result<IpcClient, Error> {
    let options = clawos_ipc::client::ClientOptions::new(ComponentId::AgentLoop.into());
    IpcClient::connect(peer, options)
        .await
        .map(|(client, _events)| client)
        .map_err(|source| Error::Connect { peer, source })
}

/// Runs a turn's tool calls, in two halves so the turn can checkpoint
/// between them (`specs/agent/README.md`, "Checkpoints and resume"): the
/// decision, then the run.
pub trait Runner: Send + Sync {
    /// Whether `name` may run with `arguments` as action `action_id` (the
    /// same each time this call is asked about: `<session>/<message>/<call
    /// id>`): `None` when it may; else the result the model reads (a
    /// refusal, an unknown tool), or one whose `waiting` says it waits for the
    /// operator. `resumed`: the call was running when the daemon stopped
    /// and is asked about again to run once more (`CheckPolicy::resumed`).
    fn check<'a>(
        &'a self,
        action_id: &'a str,
        name: &'a str,
        arguments: &'a Value,
        resumed: bool,
    ) -> futures::future::BoxFuture<'a, Option<CallResult>>;
    /// Runs an allowed call. `action_id` is its idempotency key too: a call
    /// already recorded with it is answered from its record, not run again.
    /// Every failure (a tool error, a component down) is a result the model
    /// reads, never an error of the turn.
    fn run<'a>(
        &'a self,
        action_id: &'a str,
        name: &'a str,
        arguments: &'a Value,
    ) -> futures::future::BoxFuture<'a, CallResult>;
    /// [`Runner::check`], then [`Runner::run`] when allowed.
    fn call<'a>(
        &'a self,
        action_id: &'a str,
        name: &'a str,
        arguments: &'a Value,
    ) -> futures::future::BoxFuture<'a, CallResult> {
        Box::pin(async move {
            match self.check(action_id, name, arguments, false).await {
                Some(refused) => refused,
                None => self.run(action_id, name, arguments).await,
            }
        })
    }
}

/// Who a call is made for, and the components that run it.
#[derive(Clone, Copy)]
pub struct CallContext<'a> {
    /// The components that run the calls.
    pub peers: &'a Peers,
    /// The tools the agent may call.
    pub tools: &'a [Tool],
    /// The agent.
    pub agent: &'a str,
    /// Its database, where built-in calls are recorded.
    pub agent_db: &'a Path,
    /// The session.
    pub session_id: &'a str,
    /// The session an approval of a call continues: the turn's own, or
    /// for a sub-agent's call its parent's (whose `delegate` call then runs
    /// again and continues the sub-agent).
    pub approval_session: &'a str,
    /// A sub-agent's paths: its file tools' calls outside them are refused.
    pub paths: Option<&'a [String]>,
    /// What a `delegate` call starts a sub-agent with; `None` in a
    /// sub-agent, which cannot delegate.
    pub delegation: Option<&'a crate::delegate::Delegation<'a>>,
    /// The user workspace `memory_search` searches.
    pub memory_workspace: &'a str,
    /// The agent's policy, sent with each `check_policy`.
    pub policy: &'a AgentPolicy,
    /// The agents' MCP servers.
    pub mcp: &'a crate::mcp_servers::Servers,
    /// Cancels the turn: a running MCP call is cancelled at its server.
    pub cancel: &'a tokio_util::sync::CancellationToken,
    /// Shown each progress notification of a running MCP call, with the
    /// tool's name (the turn publishes them as `tool.progress`).
    pub progress: Option<&'a ShowProgress<'a>>,
}

/// What is done with an MCP call's progress notification: given the tool's
/// name and the update.
pub type ShowProgress<'a> = dyn Fn(&str, &mcp::Progress) + Send + Sync + 'a;

impl Runner for CallContext<'_> {
    fn check<'a>(
        &'a self,
        action_id: &'a str,
        name: &'a str,
        arguments: &'a Value,
        resumed: bool,
    ) -> futures::future::BoxFuture<'a, Option<CallResult>> {
        Box::pin(check(self, action_id, name, arguments, resumed))
    }

    fn run<'a>(
        &'a self,
        action_id: &'a str,
        name: &'a str,
        arguments: &'a Value,
    ) -> futures::future::BoxFuture<'a, CallResult> {
        Box::pin(run(self, action_id, name, arguments))
    }
}

fn unknown(cx: &CallContext<'_>, name: &str) -> CallResult {
    let known: Vec<&str> = cx.tools.iter().map(|tool| tool.spec.name.as_str()).collect();
    CallResult::new(format!("error: there is no tool `{name}` (tools: {})", known.join(", ")), true)
}

/// How much of a call's arguments the notice that it waits quotes.
const WAITING_ARGUMENTS_CHARS: usize = 200;

async fn check(
    cx: &CallContext<'_>,
    action_id: &str,
    name: &str,
    arguments: &Value,
    resumed: bool,
) -> Option<CallResult> {
    let Some(tool) = cx.tools.iter().find(|tool| tool.spec.name == name) else { return Some(unknown(cx, name)) };
    // It reads what the agent's own configuration gave it to call.
    if tool.runs == Runs::McpSchema {
        return None;
    }
    if let (Some(paths), Runs::BuiltIn(BuiltIn::FileRead | BuiltIn::FileWrite | BuiltIn::FileList)) =
        (cx.paths, tool.runs)
    {
        if !crate::delegate::within(paths, arguments) {
            let message = format!("error: not run: a sub-agent's files are held to {}", paths.join(", "));
            return Some(CallResult::new(message, true));
        }
    }
    let check = CheckPolicy {
        agent: cx.agent.into(),
        action_id: action_id.into(),
        session_id: cx.approval_session.into(),
        tool_name: name.into(),
        permissions: tool.needs.clone(),
        arguments: arguments.clone(),
        policy: cx.policy.clone(),
        resumed,
    };
    // Fail closed: a check that cannot be made is a refusal.
    match security_agent::Client::new(&cx.peers.security_agent).check_policy(&check).await {
        Ok(decision) if decision.decision == Decision::Allow => None,
        Ok(decision) if decision.decision == Decision::Pending => {
            let id = decision.approval_id.unwrap_or_default();
            // What the call would do, so the operator who reads this knows
            // what the approval is for (in full: clawctl approvals list).
            let shown = arguments.to_string();
            let shown = match shown.char_indices().nth(WAITING_ARGUMENTS_CHARS) {
                Some((end, _)) => format!("{}...", &shown[..end]),
                None => shown,
            };
            let waiting = format!(
                "waiting for the operator: {} for {name} {shown} (clawctl approvals approve {id}, or deny {id})",
                decision.reason
            );
            Some(CallResult::waiting(waiting))
        }
        Ok(decision) => Some(CallResult::new(format!("error: not run: {}", decision.reason), true)),
        Err(error) => Some(CallResult::new(format!("error: not run: the policy check failed: {error}"), true)),
    }
}

async fn run(cx: &CallContext<'_>, action_id: &str, name: &str, arguments: &Value) -> CallResult {
    let Some(tool) = cx.tools.iter().find(|tool| tool.spec.name == name) else { return unknown(cx, name) };
    let outcome = match tool.runs {
        // wasm-daemon keeps the key with the call and answers a recorded
        // (or still running) one instead of running it again.
        Runs::Wasm => {
            let params = ExecuteTool {
                tool_name: name.into(),
                arguments: arguments.clone(),
                agent: cx.agent.into(),
                session_id: Some(cx.session_id.into()),
                idempotency_key: Some(action_id.into()),
            };
            // The protocol's longest request (a tool's own timeout_seconds
            // caps its run; the rest covers compiling it, when it is not yet).
            let daemon =
                wasm_daemon::Client::new(&cx.peers.wasm_daemon).with_timeout(clawos_ipc::timeouts::MAX_REQUEST_TIMEOUT);
            daemon.execute_tool(&params).await.map(|answer| answer.result).map_err(|e| e.to_string())
        }
        runs => match run_here(cx, runs, action_id, name, arguments).await {
            Ok(outcome) => outcome,
            Err(waiting) => return waiting,
        },
    };
    match outcome {
        Ok(record) if tool.runs == Runs::Delegate => {
            let (content, is_error) = crate::delegate::shown(&record);
            CallResult { spent: crate::delegate::spent(&record), ..CallResult::new(content, is_error) }
        }
        Ok(Value::String(text)) => CallResult::new(text, false),
        Ok(value) => CallResult::new(value.to_string(), false),
        Err(error) => CallResult::new(format!("error: {error}"), true),
    }
}

/// Runs a call that agent-loop records itself (a built-in tool, a
/// sub-agent, an MCP tool) once per action ID: a call recorded with `action_id` is
/// answered from its record. `Err` is the result when a sub-agent's call
/// waits for the operator: nothing is recorded then, and the call runs
/// again (continuing the sub-agent) once they have answered.
async fn run_here(
    cx: &CallContext<'_>,
    runs: Runs,
    action_id: &str,
    name: &str,
    arguments: &Value,
) -> Result<Result<Value, String>, CallResult> {
    let agent = cx.agent;
    let (db, key) = (cx.agent_db.to_owned(), action_id.to_owned());
    match tokio::task::spawn_blocking(move || recorded(&db, &key)).await.map_err(RecordError::from).and_then(|r| r) {
        Ok(Some(outcome)) => {
            tracing::info!(agent, tool = name, "answered from the call recorded with its idempotency key");
            return Ok(outcome);
        }
        Ok(None) => {}
        Err(error) => return Ok(Err(format!("reading the tool-call records: {error}"))),
    }
    let started = SystemTime::now();
    // As text from here: the model reads it, the record keeps it.
    let outcome = match (runs, cx.delegation) {
        (Runs::BuiltIn(built_in), _) => built_in
            .call(&cx.peers.fs_engine, agent, arguments, cx.memory_workspace, action_id)
            .await
            .map_err(|e| e.to_string()),
        (Runs::Mcp, _) => {
            let (sender, mut updates) = tokio::sync::mpsc::channel(16);
            let call = cx.mcp.call(agent, name, arguments, cx.cancel, cx.progress.map(|_| sender));
            // Ends when the call does (its sender is dropped with it).
            let shown = async {
                while let Some(update) = updates.recv().await {
                    if let Some(show) = cx.progress {
                        show(name, &update);
                    }
                }
            };
            tokio::join!(call, shown).0
        }
        (Runs::McpSchema, _) => cx.mcp.schema(agent, arguments).await,
        (_, Some(delegation)) => match crate::delegate::run(cx, delegation, action_id, arguments).await {
            Ok(crate::delegate::Ended::Outcome(record)) => Ok(record),
            Ok(crate::delegate::Ended::Waiting { what, spent }) => {
                return Err(CallResult { spent, ..CallResult::waiting(what) })
            }
            Err(why) => Err(why),
        },
        (_, None) => Err("a sub-agent cannot delegate".to_owned()),
    };
    let (db, record_of) = (
        cx.agent_db.to_owned(),
        CallRecord { session_id: cx.session_id.to_owned(), key: action_id.to_owned(), name: name.to_owned() },
    );
    let (arguments_owned, outcome_owned) = (arguments.clone(), outcome.clone());
    let written =
        tokio::task::spawn_blocking(move || record(&db, &record_of, &arguments_owned, &outcome_owned, started)).await;
    if let Err(error) = written.map_err(RecordError::from).and_then(|r| r) {
        tracing::error!(agent, tool = name, "writing the tool-call record: {error}");
    }
    Ok(outcome)
}

/// The outcome of the call agent-loop ran recorded with idempotency key `key`
/// in the agent's `tool_calls`, if there is one.
fn recorded(db: &Path, key: &str) -> Result<Option<Result<Value, String>>, RecordError> {
    let agentfs = agentfs::AgentFs::open(db).map_err(|source| RecordError::Open { db: db.to_owned(), source })?;
    Ok(agentfs.tool_call_by_key(key)?.map(|call| call.outcome()))
}

/// What the record of a call agent-loop ran says it was.
struct CallRecord {
    session_id: String,
    key: String,
    name: String,
}

/// Writes the tool-call record of a finished call agent-loop ran in the
/// agent's `tool_calls`, with its session and idempotency key
/// (wasm-daemon writes the WASM calls').
fn record(
    db: &Path,
    of: &CallRecord,
    arguments: &Value,
    outcome: &Result<Value, String>,
    started: SystemTime,
) -> Result<(), RecordError> {
    let mut agentfs = agentfs::AgentFs::open(db).map_err(|source| RecordError::Open { db: db.to_owned(), source })?;
    let call = agentfs::NewToolCall {
        name: &of.name,
        parameters: Some(arguments),
        outcome: outcome.as_ref().map_err(String::as_str),
        started,
        completed: SystemTime::now(),
        session_id: Some(&of.session_id),
        parent_call_id: None,
        idempotency_key: Some(&of.key),
    };
    agentfs.record_tool_call(&call)?;
    Ok(())
}

/// Cuts `content` to at most `max` bytes (at a character boundary), with a
/// note saying how much was left out.
pub fn cut(content: String, max: usize) -> String {
    if content.len() <= max {
        return content;
    }
    let mut end = max;
    while !content.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[result cut: {} of {} bytes shown]", &content[..end], end, content.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_are_cut_with_a_note() {
        assert_eq!(cut("short".into(), 10), "short");
        let cut = cut("é".repeat(10), 5);
        assert!(cut.starts_with("éé\n[result cut: 4 of 20 bytes shown]"), "{cut}");
    }

    #[test]
    fn built_in_schemas_are_objects() {
        for tool in built_in() {
            assert_eq!(tool.spec.parameters["type"], "object", "{}", tool.spec.name);
        }
    }
}

//! The agents' MCP servers (specs/mcp/README.md): one connection per
//! (agent, server), kept from turn to turn, made again when the server's
//! table changes, and after a crash or a hang with backoff; the servers'
//! tools as the agent's own (`mcp.<server>.<tool>`), shown names first
//! when their schemas would pass the agent's budget.
//!
//! Owns: the connections and each one's state (what `clawctl mcp status`
//! shows), and carrying a call to its server. Must not own: whether a call
//! may run (`tools::check`, security-agent's `check_policy`, as for every
//! tool), recording it (`tools::run_here`, with its idempotency key), the
//! protocol (the `mcp` crate).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawos_api::security_agent::Permission;
use mcp::{CallOptions, Connection, Secret, Secrets, ServerConfig};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::config::McpConfig;
use crate::provider::{estimate_tokens, KeySource, ToolSpec};
use crate::tools::{Runs, Tool};

/// The tool that gives an MCP tool's arguments when the model was shown
/// its name only.
pub const SCHEMA_TOOL: &str = "mcp_schema";
/// The longest first line of a description shown names first.
const SHORT_DESCRIPTION_CHARS: usize = 160;
/// The first wait before a server that failed is tried again; it doubles
/// with each failure in a row, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// (agent, server): a server of an agent's `[mcp.servers]`.
type Key = (String, String);

/// Every agent's MCP servers.
pub struct Servers {
    /// How a local server is started: on the box, in a sandbox unit.
    launch: mcp::Launch,
    slots: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Slot>>>>,
    /// What each server's slot last said, for status without waiting on a
    /// slot that is connecting.
    shown: Mutex<HashMap<Key, ServerStatus>>,
}

/// One server's state, as `clawctl mcp status` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ServerStatus {
    /// The agent.
    pub agent: String,
    /// The server's name in the agent's `[mcp.servers]`.
    pub server: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// The program, or the URL.
    pub endpoint: String,
    /// `connected`, or `failed` (tried again after `retry_in_s`).
    pub state: &'static str,
    /// The tools the agent is given.
    pub tools: Vec<String>,
    /// Tools of the server the agent is not given, with why.
    pub refused: Vec<(String, String)>,
    /// Failures in a row.
    pub failures: u32,
    /// The last failure.
    pub last_error: Option<String>,
    /// Seconds until the next try, when failed.
    pub retry_in_s: Option<u64>,
}

struct Slot {
    config: ServerConfig,
    failures: u32,
    last_error: Option<String>,
    state: State,
}

enum State {
    Connected { connection: Arc<Connection>, tools: mcp::Tools },
    Failed { retry_at: Instant },
}

impl Servers {
    /// Servers whose local programs start as `launch` says.
    pub fn new(launch: mcp::Launch) -> Self {
        Servers { launch, slots: Mutex::default(), shown: Mutex::default() }
    }

    /// The tools of `agent`'s servers as `config` lists them. Servers not
    /// connected are connected now (all at once), unless one failed and
    /// its backoff has not passed; one that cannot be reached is left out,
    /// and its status says why. Servers gone from `config` are closed.
    pub async fn tools(&self, agent: &str, config: &McpConfig, keys: &dyn KeySource) -> Vec<Tool> {
        let slots: Vec<_> = {
            let mut all = lock(&self.slots);
            all.retain(|(owner, server), _| owner != agent || config.servers.contains_key(server));
            lock(&self.shown).retain(|(owner, server), _| owner != agent || config.servers.contains_key(server));
            config
                .servers
                .iter()
                .map(|(server, table)| {
                    let slot = all.entry((agent.to_owned(), server.clone())).or_insert_with(|| {
                        Arc::new(tokio::sync::Mutex::new(Slot {
                            config: table.clone(),
                            failures: 0,
                            last_error: None,
                            state: State::Failed { retry_at: Instant::now() },
                        }))
                    });
                    (server.clone(), table.clone(), slot.clone())
                })
                .collect()
        };
        let ready = slots.iter().map(|(server, table, slot)| self.ready(agent, server, table, slot, keys));
        let tools: Vec<Tool> = futures::future::join_all(ready).await.into_iter().flatten().collect();
        names_first(tools, config.schema_budget_tokens)
    }

    /// Connects the slot when it is not connected (or its table changed)
    /// and its backoff has passed; its tools for the agent.
    async fn ready(
        &self,
        agent: &str,
        server: &str,
        table: &ServerConfig,
        slot: &tokio::sync::Mutex<Slot>,
        keys: &dyn KeySource,
    ) -> Vec<Tool> {
        let mut slot = slot.lock().await;
        if slot.config != *table {
            // A changed table: the old connection closes (a local server
            // is stopped) and the new one is tried at once.
            *slot = Slot {
                config: table.clone(),
                failures: 0,
                last_error: None,
                state: State::Failed { retry_at: Instant::now() },
            };
        }
        if matches!(slot.state, State::Failed { retry_at } if retry_at <= Instant::now()) {
            match self.connect(agent, server, table, keys).await {
                Ok((connection, tools)) => {
                    if !tools.refused.is_empty() {
                        tracing::warn!(agent, server, refused = ?tools.refused, "MCP tools not given to the agent");
                    }
                    tracing::info!(agent, server, tools = tools.usable.len(), "MCP server connected");
                    slot.state = State::Connected { connection: Arc::new(connection), tools };
                }
                Err(why) => {
                    let why = bounded(why);
                    // Debug: a server's words with their control characters escaped.
                    tracing::warn!(agent, server, why = ?why, "MCP server unavailable");
                    fail(&mut slot, why);
                }
            }
        }
        self.show(agent, server, &slot);
        match &slot.state {
            State::Connected { tools, .. } => tools
                .usable
                .iter()
                .map(|tool| Tool {
                    spec: ToolSpec {
                        name: tool.name.clone(),
                        description: tool.description.clone(),
                        parameters: tool.input_schema.clone(),
                    },
                    runs: Runs::Mcp,
                    // A remote server is the network.
                    needs: match table.url {
                        Some(_) => vec![Permission::Tool, Permission::Network],
                        None => vec![Permission::Tool],
                    },
                })
                .collect(),
            State::Failed { .. } => Vec::new(),
        }
    }

    async fn connect(
        &self,
        agent: &str,
        server: &str,
        table: &ServerConfig,
        keys: &dyn KeySource,
    ) -> Result<(Connection, mcp::Tools), String> {
        let mut secrets = Secrets::default();
        if let Some(secret) = &table.bearer_secret {
            let value = keys.key(secret).await.map_err(|e| format!("bearer_secret: {e}"))?;
            secrets.bearer = Some(Secret::new(value.to_string()));
        }
        for (variable, secret) in &table.secret_env {
            let value = keys.key(secret).await.map_err(|e| format!("secret_env.{variable}: {e}"))?;
            secrets.env.insert(variable.clone(), Secret::new(value.to_string()));
        }
        let connection =
            Connection::connect(agent, server, table, &self.launch, &secrets).await.map_err(|e| e.to_string())?;
        let tools = connection.tools().await.map_err(|e| e.to_string())?;
        Ok((connection, tools))
    }

    /// Calls the MCP tool `name` (`mcp.<server>.<tool>`) of `agent`; the
    /// server's progress notifications go to `progress` while it runs. A
    /// server that crashed or hung is closed and tried again with backoff
    /// (the call fails and says so); a tool's own error is the result.
    pub async fn call(
        &self,
        agent: &str,
        name: &str,
        arguments: &Value,
        cancel: &CancellationToken,
        progress: Option<tokio::sync::mpsc::Sender<mcp::Progress>>,
    ) -> Result<Value, String> {
        let (server, tool) = split(name).ok_or_else(|| format!("`{name}` is not an MCP tool's name"))?;
        let Value::Object(arguments) = arguments.clone() else {
            return Err("the arguments of an MCP tool are a JSON object".into());
        };
        let slot = lock(&self.slots).get(&(agent.to_owned(), server.to_owned())).cloned();
        let Some(slot) = slot else { return Err(format!("no MCP server `{server}`")) };
        let connection = match &slot.lock().await.state {
            State::Connected { connection, .. } => connection.clone(),
            State::Failed { .. } => return Err(format!("MCP server `{server}` is not connected")),
        };
        let options = CallOptions { cancel: cancel.child_token(), progress };
        match connection.call(tool, arguments, options).await {
            Ok(output) if output.is_error => Err(output.text),
            Ok(output) => Ok(match output.structured {
                Some(structured) if output.text.is_empty() => structured,
                Some(structured) => json!({"text": output.text, "structured": structured}),
                None => Value::String(output.text),
            }),
            Err(error @ (mcp::Error::Closed { .. } | mcp::Error::Timeout { .. })) => {
                let mut slot = slot.lock().await;
                let why = error.to_string();
                // The connection this call used, not a newer one.
                if matches!(&slot.state, State::Connected { connection: now, .. } if Arc::ptr_eq(now, &connection)) {
                    fail(&mut slot, bounded(why.clone()));
                    self.show(agent, server, &slot);
                }
                Err(format!("{why}; the server is started again"))
            }
            Err(error) => Err(error.to_string()),
        }
    }

    /// Closes `agent`'s server `server` (a local one is stopped) and
    /// forgets its failures: it is started again at its next use. False
    /// when the agent has no such server connected or tried.
    pub async fn restart(&self, agent: &str, server: &str) -> bool {
        let slot = lock(&self.slots).get(&(agent.to_owned(), server.to_owned())).cloned();
        let Some(slot) = slot else { return false };
        let mut slot = slot.lock().await;
        slot.failures = 0;
        slot.last_error = None;
        slot.state = State::Failed { retry_at: Instant::now() };
        self.show(agent, server, &slot);
        true
    }

    /// What `agent`'s servers (every agent's, for `None`) last said.
    pub fn status(&self, agent: Option<&str>) -> Vec<ServerStatus> {
        let mut all: Vec<ServerStatus> = lock(&self.shown)
            .values()
            .filter(|status| agent.is_none_or(|agent| status.agent == agent))
            .cloned()
            .collect();
        all.sort_by(|a, b| (&a.agent, &a.server).cmp(&(&b.agent, &b.server)));
        all
    }

    fn show(&self, agent: &str, server: &str, slot: &Slot) {
        let now = Instant::now();
        let (state, tools, refused, retry_in_s) = match &slot.state {
            State::Connected { tools, .. } => {
                ("connected", tools.usable.iter().map(|tool| tool.name.clone()).collect(), tools.refused.clone(), None)
            }
            State::Failed { retry_at } => {
                ("failed", Vec::new(), Vec::new(), Some(retry_at.saturating_duration_since(now).as_secs()))
            }
        };
        let (transport, endpoint) = match &slot.config.url {
            Some(url) => ("http", url.clone()),
            None => ("stdio", slot.config.command.first().cloned().unwrap_or_default()),
        };
        let status = ServerStatus {
            agent: agent.to_owned(),
            server: server.to_owned(),
            transport,
            endpoint,
            state,
            tools,
            refused,
            failures: slot.failures,
            last_error: slot.last_error.clone(),
            retry_in_s,
        };
        lock(&self.shown).insert((agent.to_owned(), server.to_owned()), status);
    }
}

/// The longest failure kept for status and the journal: a server's error
/// body may be long.
const MAX_ERROR_CHARS: usize = 1000;

/// `why` cut at [`MAX_ERROR_CHARS`].
fn bounded(why: String) -> String {
    match why.char_indices().nth(MAX_ERROR_CHARS) {
        Some((end, _)) => format!("{}...", &why[..end]),
        None => why,
    }
}

/// Marks a slot failed with `why`, its next try after the backoff.
fn fail(slot: &mut Slot, why: String) {
    slot.failures += 1;
    let backoff = FIRST_BACKOFF.saturating_mul(1 << slot.failures.saturating_sub(1).min(16)).min(MAX_BACKOFF);
    slot.last_error = Some(why);
    slot.state = State::Failed { retry_at: Instant::now() + backoff };
}

/// `mcp.<server>.<tool>` into its server and the server's name for the tool.
fn split(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(mcp::TOOL_PREFIX)?.strip_prefix('.')?;
    rest.split_once('.')
}

/// The tools as the model is shown them: whole, or, when their schemas
/// together would pass `budget` tokens, each with the first line of its
/// description and any arguments, and the [`SCHEMA_TOOL`] that gives a
/// tool's own.
fn names_first(tools: Vec<Tool>, budget: u64) -> Vec<Tool> {
    let tokens: u64 = tools
        .iter()
        .map(|tool| estimate_tokens(&tool.spec.name) + estimate_tokens(&tool.spec.description))
        .chain(tools.iter().map(|tool| estimate_tokens(&tool.spec.parameters.to_string())))
        .sum();
    if tools.is_empty() || tokens <= budget {
        return tools;
    }
    let mut shown: Vec<Tool> = tools
        .into_iter()
        .map(|mut tool| {
            let first = tool.spec.description.lines().next().unwrap_or_default();
            let first: String = first.chars().take(SHORT_DESCRIPTION_CHARS).collect();
            tool.spec.description = format!("{first} (its arguments: call {SCHEMA_TOOL} first)");
            tool.spec.parameters = json!({"type": "object"});
            tool
        })
        .collect();
    shown.push(Tool {
        spec: ToolSpec {
            name: SCHEMA_TOOL.into(),
            description: "The JSON Schema of an MCP tool's arguments (mcp.<server>.<tool>).".into(),
            parameters: json!({
                "type": "object",
                "properties": {"tool": {"type": "string", "description": "The tool's name, mcp.<server>.<tool>"}},
                "required": ["tool"],
            }),
        },
        runs: Runs::McpSchema,
        needs: Vec::new(),
    });
    shown
}

impl Servers {
    /// What [`SCHEMA_TOOL`] answers: the whole schema of `agent`'s MCP
    /// tool named in `arguments`.
    pub async fn schema(&self, agent: &str, arguments: &Value) -> Result<Value, String> {
        let name = arguments.get("tool").and_then(Value::as_str).ok_or("`tool` (a string) is missing")?;
        let (server, tool) = split(name).ok_or_else(|| format!("`{name}` is not an MCP tool's name"))?;
        let slot = lock(&self.slots).get(&(agent.to_owned(), server.to_owned())).cloned();
        let Some(slot) = slot else { return Err(format!("no MCP server `{server}`")) };
        let slot = slot.lock().await;
        let State::Connected { tools, .. } = &slot.state else {
            return Err(format!("MCP server `{server}` is not connected"));
        };
        let found = tools.usable.iter().find(|found| found.server_name == tool);
        let found = found.ok_or_else(|| format!("MCP server `{server}` has no tool `{tool}`"))?;
        Ok(json!({"tool": name, "description": found.description, "arguments": found.input_schema}))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str, parameters: Value) -> Tool {
        Tool {
            spec: ToolSpec { name: name.into(), description: description.into(), parameters },
            runs: Runs::Mcp,
            needs: vec![Permission::Tool],
        }
    }

    #[test]
    fn names_split_at_the_server() {
        assert_eq!(split("mcp.everything.get-sum"), Some(("everything", "get-sum")));
        assert_eq!(split("mcp.files.read.text"), Some(("files", "read.text")));
        assert_eq!(split("mcpx.a.b"), None);
        assert_eq!(split("file_read"), None);
    }

    #[test]
    fn schemas_past_the_budget_are_shown_names_first() {
        let big = json!({"type": "object", "properties": {"text": {"type": "string", "description": "x".repeat(400)}}});
        let tools = vec![tool("mcp.a.one", "First line.\nMore.", big.clone()), tool("mcp.a.two", "Two.", big)];
        assert_eq!(names_first(tools.clone(), 10_000), tools);
        let shown = names_first(tools, 100);
        assert_eq!(shown.len(), 3);
        assert_eq!(shown[0].spec.description, "First line. (its arguments: call mcp_schema first)");
        assert_eq!(shown[0].spec.parameters, json!({"type": "object"}));
        assert_eq!(shown[2].spec.name, SCHEMA_TOOL);
        assert_eq!(shown[2].runs, Runs::McpSchema);
        assert!(names_first(Vec::new(), 0).is_empty());
    }

    #[test]
    fn a_long_failure_is_cut() {
        assert_eq!(bounded("short".into()), "short");
        assert_eq!(bounded("é".repeat(1500)).chars().count(), MAX_ERROR_CHARS + 3);
    }

    #[test]
    fn backoff_doubles_to_its_cap() {
        let mut slot = Slot {
            config: ServerConfig::default(),
            failures: 0,
            last_error: None,
            state: State::Failed { retry_at: Instant::now() },
        };
        let mut waits = Vec::new();
        for _ in 0..12 {
            let before = Instant::now();
            fail(&mut slot, "down".into());
            let State::Failed { retry_at } = slot.state else { unreachable!() };
            waits.push((retry_at - before).as_secs());
        }
        assert_eq!(&waits[..4], [1, 2, 4, 8]);
        assert_eq!(waits[11], 300);
        assert_eq!(slot.last_error.as_deref(), Some("down"));
    }
}

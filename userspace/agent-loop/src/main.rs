//! `clawos-agent-loop`: runs the agents (`specs/agent/README.md`).
//!
//! Why a component of its own: it is the one place that talks to language
//! models and so the one place that holds what a model may steer. It holds
//! no permission itself: files, memory and tools are reached through the
//! components that own them, under the agent's name, and API keys come
//! from the vault for one request at a time. What a crash costs: the turns
//! running at that moment stop; systemd restarts the daemon, which resumes
//! each from its checkpoint (a tool call that was running is not run twice:
//! `specs/agent/README.md`, "Checkpoints and resume").
//!
//! Owns: agent-loop's IPC methods (`clawos_api::agent_loop`) and its
//! `[component]` settings. The methods only serve the library: the agents
//! and their state are the registry's (`registry`), turns are started,
//! resumed, cancelled and reported by the launcher (`launch`), and every
//! failure is an `error::Error` with its IPC code. Must not own: an agent's
//! directory layout (fs-engine), tool execution (wasm-daemon), or secrets
//! (security-agent).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clawos_agent_loop::config::{AgentConfig, DEFAULT_CONFIG};
use clawos_agent_loop::error::Error;
use clawos_agent_loop::launch::Launcher;
use clawos_agent_loop::mcp_servers::Servers;
use clawos_agent_loop::provider::{estimate_tokens, ToolSpec};
use clawos_agent_loop::registry::{self, Agent, Registry};
use clawos_agent_loop::thinker::{self, VaultKeys};
use clawos_agent_loop::{guard, persona, store, tools, turn};
use clawos_api::agent_loop::{
    self, AgentCreate, AgentDetails, AgentInfo, AgentList, AgentName, AgentState, ChatSend, ContextPart, GuardDecision,
    GuardHold, GuardHolds, McpRefusedTool, McpServerRef, McpServerStatus, McpStatus, SessionContext, SessionList,
    SessionRef, SessionSummary, Spend, Transcript, TranscriptEntry, TurnCancelled, TurnOutcome, TurnRef, TurnStarted,
};
use clawos_api::fs_engine::{self, AgentDirCreate, AgentRef, WriteFile};
use clawos_api::{Call, Done, NoParams};
use clawos_ipc::client::IpcClient;
use clawos_ipc::server::MethodError;
use clawos_ipc::{ComponentId, Object, Request};
use clawos_runtime::{Component, Runtime};
use serde::Deserialize;

/// `[component]` of `/etc/clawos/agent-loop.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoopConfig {
    /// Where ClawFS is mounted. Default `/clawfs`.
    #[serde(default = "default_root")]
    clawfs_root: PathBuf,
    /// Finished turns whose outcome `turn_result` still answers from
    /// memory (older ones from the agent's database). Default 256.
    #[serde(default = "default_kept_turns")]
    kept_turns: usize,
}

fn default_root() -> PathBuf {
    PathBuf::from("/clawfs")
}
fn default_kept_turns() -> usize {
    256
}

struct Daemon {
    runtime: Runtime,
    agents: Registry,
    turns: Launcher,
}

impl Daemon {
    /// Agent `agent` with its state, which counts its running turn.
    fn agent(&self, agent: &str) -> Result<Agent, Error> {
        self.agents.find(agent, self.turns.running(agent))
    }

    async fn connect(&self, peer: ComponentId) -> Result<IpcClient, Error> {
        Ok(tools::connect(peer).await?)
    }

    /// The system prompt agent `agent`'s next turn would send, with what
    /// it is made of: its persona (through the soul guard, within its
    /// budget) and the built-in and WASM tools its config allows (an MCP
    /// server's tools join when a turn connects it).
    async fn prompt(
        &self,
        agent: &str,
        dir: &Path,
        store: &store::Store,
        config: AgentConfig,
    ) -> Result<Prompt, Error> {
        let budget = config.persona.budget_tokens;
        let persona = persona::compile(&guard::check(dir, store, budget)?.sources, budget);
        let mut tools = tools::built_in();
        if let Ok(wasm) = self.connect(ComponentId::WasmDaemon).await {
            if let Ok(found) = tools::wasm_tools(&wasm).await {
                tools.extend(found);
            }
            wasm.goodbye().await;
        }
        let specs = turn::allowed_specs(&config, &tools);
        let native = thinker::native_tools(&config, None);
        let text = turn::system_prompt(agent, &config, &persona.text, &specs, native);
        Ok(Prompt { config, persona, specs, native, text })
    }
}

/// An agent's system prompt and its parts (`Daemon::prompt`).
struct Prompt {
    config: AgentConfig,
    persona: persona::Persona,
    specs: Vec<ToolSpec>,
    native: bool,
    text: String,
}

impl Prompt {
    /// Each tool schema's tokens, as a request with native tools carries
    /// them beside the prompt; none without native tools.
    fn schema_tokens(&self) -> Vec<u64> {
        if !self.native {
            return Vec::new();
        }
        self.specs.iter().map(|s| estimate_tokens(&serde_json::to_string(s).unwrap_or_default())).collect()
    }

    /// The tokens of the prompt's tool list, for a model without native tools.
    fn hint_tokens(&self) -> u64 {
        if self.native || self.specs.is_empty() {
            0
        } else {
            estimate_tokens(&turn::text_calls_hint(&self.specs))
        }
    }
}

/// The characters of a message `session_context` shows.
const CONTEXT_EXCERPT: usize = 160;

/// RFC 3339 of a time in ms since the epoch.
fn rfc3339(ms: i64) -> String {
    fsutil::rfc3339(u64::try_from(ms / 1000).unwrap_or(0))
}

/// The data of an event about `agent` (`agent.created`, `agent.removed`).
fn agent_event(agent: &str) -> Object {
    Object::from_iter([("agent".to_owned(), agent.into())])
}

impl agent_loop::Service for Daemon {
    async fn agent_create(&self, _call: &Call, p: AgentCreate) -> Result<AgentInfo, MethodError> {
        let text = p.config.unwrap_or_else(|| DEFAULT_CONFIG.to_owned());
        AgentConfig::parse(&text).map_err(Error::Config)?;
        let fs = self.connect(ComponentId::FsEngine).await?;
        let created = fs_engine::Client::new(&fs)
            .agent_dir_create(&AgentDirCreate { agent: p.agent.clone(), config: text })
            .await;
        fs.goodbye().await;
        created.map_err(Error::AgentDirCreate)?;
        self.runtime.publish("agent.created", agent_event(&p.agent));
        Ok(self.agent(&p.agent)?.info)
    }

    async fn agent_list(&self, _call: &Call, _p: NoParams) -> Result<AgentList, MethodError> {
        let names = self.agents.names()?;
        // One agent whose database does not open is listed as stopped, with
        // why; it does not hide the others.
        let agents = names
            .into_iter()
            .map(|agent| match self.agent(&agent) {
                Ok(found) => found.info,
                Err(e) => AgentInfo { agent, state: AgentState::Stopped, error: Some(e.to_string()), model: None },
            })
            .collect();
        Ok(AgentList { agents })
    }

    async fn agent_show(&self, _call: &Call, p: AgentName) -> Result<AgentDetails, MethodError> {
        let Agent { info, config, store, dir } = self.agent(&p.agent)?;
        let prompt = self.prompt(&p.agent, &dir, &store, config.unwrap_or_default()).await?;
        let (day, month) = store::day_and_month_start(store::now_ms());
        let spent = |since| store.spent_since(since).map_err(Error::from);
        let sessions = store.sessions().map_err(Error::from)?.len() as u64;
        let config = &prompt.config;
        Ok(AgentDetails {
            info,
            limits: serde_json::to_value(&config.limits).expect("limits serialize"),
            autonomy: serde_json::to_value(&config.autonomy).expect("autonomy serializes"),
            tools: prompt.specs.iter().map(|s| s.name.clone()).collect(),
            system_prompt_tokens: estimate_tokens(&prompt.text) + prompt.schema_tokens().iter().sum::<u64>(),
            today: Spend { spent_usd: spent(day)?, limit_usd: config.limits.max_cost_per_day_usd },
            month: Spend { spent_usd: spent(month)?, limit_usd: config.limits.max_cost_per_month_usd },
            sessions,
            persona: prompt.persona.included,
            persona_left_out: prompt.persona.left_out,
        })
    }

    async fn agent_pause(&self, _call: &Call, p: AgentName) -> Result<AgentInfo, MethodError> {
        self.agents.set_paused(&p.agent, true)?;
        Ok(self.agent(&p.agent)?.info)
    }

    async fn agent_resume(&self, _call: &Call, p: AgentName) -> Result<AgentInfo, MethodError> {
        self.agents.set_paused(&p.agent, false)?;
        Ok(self.agent(&p.agent)?.info)
    }

    async fn agent_guard(&self, _call: &Call, p: AgentName) -> Result<GuardHolds, MethodError> {
        let dir = self.agents.dir(&p.agent)?;
        let store = registry::open_store(&dir)?;
        let budget = AgentConfig::load(&dir).unwrap_or_default().persona.budget_tokens;
        let holds = guard::check(&dir, &store, budget).map_err(Error::from)?.holds;
        let holds = holds
            .into_iter()
            .map(|hold| {
                let approved = store.approved(&hold.file)?.unwrap_or_default();
                Ok(GuardHold {
                    diff: guard::diff(&hold.file, &approved, &hold.content),
                    held_at: rfc3339(hold.held_at_ms),
                    file: hold.file,
                    reason: hold.reason,
                })
            })
            .collect::<Result<_, store::Error>>()
            .map_err(Error::from)?;
        Ok(GuardHolds { holds })
    }

    async fn agent_guard_decide(&self, _call: &Call, p: GuardDecision) -> Result<AgentInfo, MethodError> {
        let store = registry::open_store(&self.agents.dir(&p.agent)?)?;
        let holds = store.holds().map_err(Error::from)?;
        if holds.is_empty() {
            return Err(Error::NoHold { agent: p.agent }.into());
        }
        let fs = if p.approve { None } else { Some(self.connect(ComponentId::FsEngine).await?) };
        for hold in &holds {
            match &fs {
                None => store.release(&hold.file, Some(&hold.content)).map_err(Error::from)?,
                Some(fs) => {
                    // Written back as the agent through fs-engine, so the
                    // restore is in the ClawFS audit log like the change was.
                    let approved = store.approved(&hold.file).map_err(Error::from)?.unwrap_or_default();
                    let params = WriteFile {
                        path: hold.file.clone(),
                        agent: Some(p.agent.clone()),
                        content: Some(approved),
                        ..WriteFile::default()
                    };
                    fs_engine::Client::new(fs)
                        .write_file(&params)
                        .await
                        .map_err(|source| Error::Restore { file: hold.file.clone(), source })?;
                    store.release(&hold.file, None).map_err(Error::from)?;
                }
            }
            tracing::warn!(
                agent = p.agent,
                file = hold.file,
                approved = p.approve,
                "soul guard: the operator decided a held change"
            );
        }
        if let Some(fs) = fs {
            fs.goodbye().await;
        }
        Ok(self.agent(&p.agent)?.info)
    }

    async fn agent_remove(&self, _call: &Call, p: AgentName) -> Result<Done, MethodError> {
        self.agents.dir(&p.agent)?;
        if self.turns.running(&p.agent) {
            return Err(Error::TurnRunning { agent: p.agent }.into());
        }
        let fs = self.connect(ComponentId::FsEngine).await?;
        let removed = fs_engine::Client::new(&fs).agent_dir_remove(&AgentRef { agent: p.agent.clone() }).await;
        fs.goodbye().await;
        removed.map_err(Error::AgentDirRemove)?;
        self.agents.forget(&p.agent);
        self.runtime.publish("agent.removed", agent_event(&p.agent));
        Ok(Done {})
    }

    async fn chat_send(&self, call: &Call, p: ChatSend) -> Result<TurnStarted, MethodError> {
        let agent = self.agent(&p.agent)?;
        Ok(self.turns.start(agent, &call.connection, p.session_id, Some(p.message), p.hint)?)
    }

    async fn chat_continue(&self, call: &Call, p: SessionRef) -> Result<TurnStarted, MethodError> {
        let agent = self.agent(&p.agent)?;
        Ok(self.turns.start(agent, &call.connection, Some(p.session_id), None, None)?)
    }

    async fn chat_cancel(&self, _call: &Call, p: TurnRef) -> Result<TurnCancelled, MethodError> {
        Ok(self.turns.cancel(p.turn_id)?)
    }

    async fn turn_result(&self, _call: &Call, p: TurnRef) -> Result<TurnOutcome, MethodError> {
        Ok(self.turns.result(&p.turn_id)?)
    }

    async fn session_list(&self, _call: &Call, p: AgentName) -> Result<SessionList, MethodError> {
        let store = registry::open_store(&self.agents.dir(&p.agent)?)?;
        let rows = store.sessions().map_err(Error::from)?;
        let sessions = rows
            .into_iter()
            .map(|row| SessionSummary {
                session_id: row.session_id,
                created_at: rfc3339(row.created_at_ms),
                updated_at: rfc3339(row.updated_at_ms),
                messages: row.messages,
            })
            .collect();
        Ok(SessionList { sessions })
    }

    async fn mcp_status(&self, _call: &Call, p: AgentName) -> Result<McpStatus, MethodError> {
        let config = AgentConfig::load(&self.agents.dir(&p.agent)?).map_err(Error::from)?;
        let servers = self.turns.mcp().clone();
        // The answer within the method's 30 s; a server still starting
        // after 25 s goes on starting in its own task (a slow start, Node.js
        // under emulation, is not cut off and begun again by the next
        // status), and its state is the one before.
        let (agent, mcp) = (p.agent.clone(), config.mcp.clone());
        let tried = tokio::spawn(async move { servers.tools(&agent, &mcp, &VaultKeys).await });
        let _ = tokio::time::timeout(std::time::Duration::from_secs(25), tried).await;
        let servers = self
            .turns
            .mcp()
            .status(Some(&p.agent))
            .into_iter()
            .map(|status| McpServerStatus {
                server: status.server,
                transport: status.transport.into(),
                endpoint: status.endpoint,
                state: status.state.into(),
                tools: status.tools,
                refused: status.refused.into_iter().map(|(tool, reason)| McpRefusedTool { tool, reason }).collect(),
                failures: status.failures,
                last_error: status.last_error,
                retry_in_s: status.retry_in_s,
            })
            .collect();
        Ok(McpStatus { agent: p.agent, servers })
    }

    async fn mcp_restart(&self, _call: &Call, p: McpServerRef) -> Result<Done, MethodError> {
        self.agents.dir(&p.agent)?;
        if !self.turns.mcp().restart(&p.agent, &p.server).await {
            return Err(Error::NoMcpServer { agent: p.agent, server: p.server }.into());
        }
        tracing::info!(agent = p.agent, server = p.server, "MCP server restarted by the operator");
        Ok(Done {})
    }

    async fn session_context(&self, _call: &Call, p: SessionRef) -> Result<SessionContext, MethodError> {
        let Agent { config, store, dir, .. } = self.agent(&p.agent)?;
        if !store.has_session(&p.session_id).map_err(Error::from)? {
            return Err(Error::NoSession { agent: p.agent, session_id: p.session_id }.into());
        }
        let prompt = self.prompt(&p.agent, &dir, &store, config.unwrap_or_default()).await?;
        let part = |kind: &str, name: String, tokens| ContextPart { kind: kind.into(), name, tokens, excerpt: None };
        let persona_tokens: u64 = prompt.persona.included_tokens.iter().sum();
        let schema_tokens = prompt.schema_tokens();
        let mut parts = vec![part(
            "instructions",
            "system prompt".into(),
            // The prompt's own text: what is not a persona source's part
            // or, for a model without native tools, the tool list.
            estimate_tokens(&prompt.text).saturating_sub(persona_tokens + prompt.hint_tokens()),
        )];
        for (name, tokens) in prompt.persona.included.iter().zip(&prompt.persona.included_tokens) {
            parts.push(part("persona", name.clone(), *tokens));
        }
        if prompt.native {
            for (spec, tokens) in prompt.specs.iter().zip(schema_tokens) {
                parts.push(part("tool", spec.name.clone(), tokens));
            }
        } else if !prompt.specs.is_empty() {
            parts.push(part("tool", "the tool list in the prompt".into(), prompt.hint_tokens()));
        }
        for stored in store.context(&p.session_id).map_err(Error::from)? {
            let excerpt: String = stored.message.content.chars().take(CONTEXT_EXCERPT).collect();
            parts.push(ContextPart {
                kind: "message".into(),
                name: format!("#{} {}", stored.seq, stored.role),
                tokens: stored.tokens,
                excerpt: Some(excerpt),
            });
        }
        Ok(SessionContext {
            session_id: p.session_id,
            model: prompt.config.route(None).map(|route| route.model).unwrap_or_default(),
            context_window: thinker::context_window(&prompt.config),
            total_tokens: parts.iter().map(|part| part.tokens).sum(),
            system_prompt: prompt.text,
            parts,
            left_out: prompt.persona.left_out,
        })
    }

    async fn session_show(&self, _call: &Call, p: SessionRef) -> Result<Transcript, MethodError> {
        let store = registry::open_store(&self.agents.dir(&p.agent)?)?;
        if !store.has_session(&p.session_id).map_err(Error::from)? {
            return Err(Error::NoSession { agent: p.agent, session_id: p.session_id }.into());
        }
        let entries = store
            .transcript(&p.session_id)
            .map_err(Error::from)?
            .into_iter()
            .map(|stored| TranscriptEntry {
                seq: stored.seq as u64,
                role: stored.role,
                content: stored.message.content,
                tool_calls: stored
                    .message
                    .tool_calls
                    .iter()
                    .map(|c| serde_json::to_value(c).expect("calls serialize"))
                    .collect(),
                tool_call_id: stored.message.tool_call_id,
                at: rfc3339(stored.at_ms),
            })
            .collect();
        Ok(Transcript { session_id: p.session_id, entries })
    }
}

impl Component for Daemon {
    async fn handle_request(&self, call: &Call, request: Request) -> Option<Result<Object, MethodError>> {
        agent_loop::dispatch(self, call, request).await
    }
}

/// The daemon: its settings, and every turn a restart cut off resumed
/// before it takes a request.
fn build(runtime: &Runtime) -> Result<Daemon, String> {
    let config: LoopConfig =
        runtime.config().component.clone().try_into().map_err(|e| format!("[component] settings: {e}"))?;
    let daemon = Daemon {
        runtime: runtime.clone(),
        agents: Registry::new(config.clawfs_root),
        turns: Launcher::new(
            runtime.clone(),
            Arc::new(VaultKeys),
            // Each local MCP server in a unit of its own, started by the
            // sandbox launcher (specs/mcp/README.md, "Where local servers run").
            Arc::new(Servers::new(mcp::Launch::Sandbox { socket: mcp_launch::SOCKET.into() })),
            config.kept_turns,
        ),
    };
    daemon.turns.resume_all(&daemon.agents);
    Ok(daemon)
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::AgentLoop, env!("CARGO_PKG_VERSION"), build)
}

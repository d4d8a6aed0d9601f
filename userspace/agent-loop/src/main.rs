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
//! Owns: the agents' registry (which exist, paused or stopped by a bad
//! config), starting, cancelling and reporting turns, sessions over IPC.
//! Must not own: an agent's directory layout (fs-engine), tool execution
//! (wasm-daemon), or secrets (security-agent).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clawos_agent_loop::config::{AgentConfig, Route, DEFAULT_CONFIG};
use clawos_agent_loop::provider::KeySource;
use clawos_agent_loop::store::{self, Store};
use clawos_agent_loop::thinker::{self, VaultKeys};
use clawos_agent_loop::tools::{self, CallContext, Peers};
use clawos_agent_loop::turn::{self, Reporter, Turn};
use clawos_agent_loop::{guard, persona};
use clawos_api::agent_loop::{
    self, AgentCreate, AgentDetails, AgentInfo, AgentList, AgentName, AgentState, ChatSend, GuardDecision, GuardHold,
    GuardHolds, SessionList, SessionRef, SessionSummary, Spend, Transcript, TranscriptEntry, TurnCancelled,
    TurnOutcome, TurnRef, TurnStarted, TurnStatus, TurnStep, TURN_END, TURN_STEP, TURN_TEXT,
};
use clawos_api::fs_engine::{self, AgentDirCreate, AgentRef, WriteFile};
use clawos_api::{Call, Done, NoParams};
use clawos_ipc::client::IpcClient;
use clawos_ipc::server::{Connection, MethodError};
use clawos_ipc::{ComponentId, ErrorCode, Object, Request};
use clawos_runtime::{Component, Runtime};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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

/// A turn the daemon knows of.
struct TurnEntry {
    agent: String,
    session_id: String,
    cancel: CancellationToken,
    outcome: Option<TurnOutcome>,
}

/// The turns by id: running ones, and the last `kept` finished ones
/// (older outcomes are in the agents' databases).
#[derive(Default)]
struct TurnTable {
    by_id: HashMap<String, TurnEntry>,
    finished: VecDeque<String>,
}

type Turns = Arc<Mutex<TurnTable>>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl TurnTable {
    fn running(&self, agent: &str) -> bool {
        self.by_id.values().any(|t| t.agent == agent && t.outcome.is_none())
    }

    fn finish(&mut self, turn_id: &str, outcome: TurnOutcome, kept: usize) {
        if let Some(entry) = self.by_id.get_mut(turn_id) {
            entry.outcome = Some(outcome);
        }
        self.finished.push_back(turn_id.to_owned());
        while self.finished.len() > kept {
            if let Some(old) = self.finished.pop_front() {
                self.by_id.remove(&old);
            }
        }
    }
}

struct Daemon {
    runtime: Runtime,
    config: LoopConfig,
    keys: Arc<dyn KeySource>,
    turns: Turns,
    /// Agents paused by the operator, as read from (and written to) their
    /// databases, so a pause survives a restart.
    paused: Mutex<BTreeMap<String, bool>>,
}

/// RFC 3339 of a time in ms since the epoch.
fn rfc3339(ms: i64) -> String {
    fsutil::rfc3339(u64::try_from(ms / 1000).unwrap_or(0))
}

fn error(code: ErrorCode, message: impl Into<String>) -> MethodError {
    MethodError::new(code, message)
}

/// A random id with a prefix (`s-`, `t-`).
fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

impl Daemon {
    /// Starts a turn: for `message` (`chat_send`), or without one to go on
    /// with the calls a `waiting` turn left (`chat_continue`).
    fn start_turn(
        &self,
        call: &Call,
        agent: String,
        session_id: Option<String>,
        message: Option<String>,
        hint: Option<String>,
    ) -> Result<TurnStarted, MethodError> {
        let (info, config, store) = self.info(&agent)?;
        let config = match (info.state, config) {
            (AgentState::Stopped, _) | (_, None) => {
                return Err(error(
                    ErrorCode::Eperm,
                    format!("agent `{}` is stopped: {}", agent, info.error.unwrap_or_default()),
                ))
            }
            (AgentState::Paused, _) => {
                return Err(error(
                    ErrorCode::Eperm,
                    format!("agent `{}` is paused (clawctl agent resume {})", agent, agent),
                ))
            }
            (AgentState::Halted, _) => {
                return Err(error(ErrorCode::Eperm, format!("agent `{}` is {}", agent, info.error.unwrap_or_default())))
            }
            (_, Some(config)) => config,
        };
        let route = config.route(hint.as_deref()).map_err(|e| error(ErrorCode::Eproto, e))?;
        let session_id = match session_id {
            Some(session) if store.has_session(&session).map_err(|e| error(ErrorCode::Eio, e))? => session,
            Some(session) => {
                return Err(error(ErrorCode::Enoent, format!("agent `{agent}` has no session `{session}`")))
            }
            None => new_id("s-"),
        };
        let db = self.agent_dir(&agent)?.join(clawfs::DATABASE_FILE);
        let turn_id = new_id("t-");
        let cancel = CancellationToken::new();
        {
            let mut turns = lock(&self.turns);
            if turns.by_id.values().any(|t| t.agent == agent && t.session_id == session_id && t.outcome.is_none()) {
                return Err(error(ErrorCode::Eagain, format!("session `{session_id}` is running a turn")));
            }
            // A call waiting for the operator must be answered before the
            // session goes on: a new message after a call without its
            // result is a conversation no model takes.
            let waiting = turn::pending_calls(&store.context(&session_id).map_err(|e| error(ErrorCode::Eio, e))?);
            match (&message, waiting) {
                (Some(_), Some((_, calls))) => {
                    let what = format!(
                        "session `{session_id}` waits for the operator's answer to {} (clawctl approvals list)",
                        calls[0].name
                    );
                    return Err(error(ErrorCode::Eagain, what));
                }
                (None, None) => {
                    return Err(error(
                        ErrorCode::Enoent,
                        format!("session `{session_id}` has no call waiting to continue"),
                    ))
                }
                _ => {}
            }
            turns.by_id.insert(
                turn_id.clone(),
                TurnEntry {
                    agent: agent.clone(),
                    session_id: session_id.clone(),
                    cancel: cancel.clone(),
                    outcome: None,
                },
            );
        }
        store.ensure_session(&session_id).map_err(|e| error(ErrorCode::Eio, e))?;
        store.turn_started(&turn_id, &session_id, hint.as_deref()).map_err(|e| error(ErrorCode::Eio, e))?;
        let started = TurnStarted { agent: agent.clone(), session_id: session_id.clone(), turn_id: turn_id.clone() };
        let begin = match message {
            Some(message) => Begin::Message(message),
            None => Begin::Continue,
        };
        let launch = Launch { agent, db, config, route, store, session_id, turn_id, begin };
        self.spawn_turn(launch, cancel, Some(call.connection.clone()));
        Ok(started)
    }

    /// Runs `launch` in a task of its own, reporting on `connection` (the
    /// operator's, when one waits) and the event bus; the outcome goes to
    /// the turn table.
    fn spawn_turn(&self, launch: Launch, cancel: CancellationToken, connection: Option<Connection>) {
        let (queue, mut events) = mpsc::unbounded_channel::<(&'static str, Object)>();
        if let Some(connection) = connection {
            tokio::spawn(async move {
                while let Some((name, data)) = events.recv().await {
                    if connection.send(connection.event(name, data)).await.is_err() {
                        // The operator went away; the turn goes on and its
                        // outcome stays readable (`turn_result`, the transcript).
                        break;
                    }
                }
            });
        }
        let reporter = ConnectionReporter {
            agent: launch.agent.clone(),
            turn_id: launch.turn_id.clone(),
            queue: queue.clone(),
            runtime: self.runtime.clone(),
        };
        let (turns, kept, keys) = (self.turns.clone(), self.config.kept_turns, self.keys.clone());
        tokio::spawn(async move {
            let turn_id = launch.turn_id.clone();
            let outcome = run_turn(launch, keys, cancel, &reporter).await;
            let _ = queue.send((TURN_END, object(serde_json::to_value(&outcome).expect("outcomes serialize"))));
            lock(&turns).finish(&turn_id, outcome, kept);
        });
    }

    /// Resumes every turn a crash or a reboot cut off (`specs/agent/README.md`,
    /// "Checkpoints and resume"), registered before the daemon takes a
    /// request, so a message to its session waits for it (EAGAIN). A turn
    /// whose agent cannot run now (paused, halted, stopped) or that never
    /// stored its message is ended instead, saying why.
    fn resume_turns(&self) {
        let names = match clawfs::namespace::list_agents(&self.config.clawfs_root) {
            Ok(names) => names,
            Err(e) => return tracing::error!("listing the agents to resume their turns: {e}"),
        };
        for agent in names {
            let Ok(dir) = self.agent_dir(&agent) else { continue };
            let unfinished = match Self::store(&dir).map_err(|e| e.message).and_then(|store| store.unfinished_turns()) {
                Ok(unfinished) if unfinished.is_empty() => continue,
                Ok(unfinished) => unfinished,
                Err(e) => {
                    tracing::error!(agent, "reading the unfinished turns: {e}");
                    continue;
                }
            };
            // The agent's state (its config, the soul guard's review) only
            // for an agent that has a turn to resume: a start costs the
            // others one query.
            let Ok((info, config, store)) = self.info(&agent) else { continue };
            for turn in unfinished {
                let found_ms = store::now_ms();
                let cannot = match (&turn.progress, &info.state, &config) {
                    (None, _, _) => Some("it ended before its message was stored".to_owned()),
                    (_, AgentState::Idle, Some(_)) => None,
                    (_, state, _) => Some(format!(
                        "agent `{agent}` is {}",
                        info.error.clone().unwrap_or_else(|| format!("{state:?}").to_lowercase())
                    )),
                };
                let route = config.as_ref().map(|config| config.route(turn.hint.as_deref()));
                let (Some(progress), None, Some(config), Some(Ok(route))) =
                    (turn.progress, &cannot, config.clone(), route)
                else {
                    let why = cannot.unwrap_or_else(|| {
                        format!("its route `{}` is gone from the config", turn.hint.clone().unwrap_or_default())
                    });
                    tracing::warn!(agent, turn = turn.turn_id, "not resumed: {why}");
                    turn::abandon(&store, &turn.session_id, &turn.turn_id, &why);
                    continue;
                };
                // A store of its own: the turn's task keeps it.
                let store = match Self::store(&dir) {
                    Ok(store) => store,
                    Err(e) => {
                        tracing::error!(agent, turn = turn.turn_id, "not resumed: {}", e.message);
                        continue;
                    }
                };
                tracing::info!(
                    agent,
                    turn = turn.turn_id,
                    step = progress.steps,
                    in_flight = turn.in_flight.as_deref().unwrap_or("none"),
                    "resuming the turn from its checkpoint"
                );
                let cancel = CancellationToken::new();
                lock(&self.turns).by_id.insert(
                    turn.turn_id.clone(),
                    TurnEntry {
                        agent: agent.clone(),
                        session_id: turn.session_id.clone(),
                        cancel: cancel.clone(),
                        outcome: None,
                    },
                );
                let begin = Begin::Resume { progress, in_flight: turn.in_flight, since_ms: found_ms };
                let launch = Launch {
                    agent: agent.clone(),
                    db: dir.join(clawfs::DATABASE_FILE),
                    config,
                    route,
                    store,
                    session_id: turn.session_id,
                    turn_id: turn.turn_id,
                    begin,
                };
                self.spawn_turn(launch, cancel, None);
            }
        }
    }

    fn start(runtime: &Runtime) -> Result<Daemon, String> {
        let config: LoopConfig =
            runtime.config().component.clone().try_into().map_err(|e| format!("[component] settings: {e}"))?;
        let keys: Arc<dyn KeySource> = Arc::new(VaultKeys);
        let daemon =
            Daemon { runtime: runtime.clone(), config, keys, turns: Turns::default(), paused: Mutex::default() };
        daemon.resume_turns();
        Ok(daemon)
    }

    fn agent_dir(&self, agent: &str) -> Result<PathBuf, MethodError> {
        clawfs::names::validate_agent_name(agent).map_err(|e| error(ErrorCode::Enoent, e.to_string()))?;
        let dir = clawfs::layout::agents_dir(&self.config.clawfs_root).join(agent);
        if !clawfs::namespace::agent_exists(&self.config.clawfs_root, agent) {
            return Err(error(ErrorCode::Enoent, format!("no agent `{agent}`")));
        }
        Ok(dir)
    }

    fn store(dir: &Path) -> Result<Store, MethodError> {
        Store::open(&dir.join(clawfs::DATABASE_FILE)).map_err(|e| error(ErrorCode::Eio, e))
    }

    /// The agent's config: its `config.toml`, the default when there is none.
    fn load_config(dir: &Path) -> Result<AgentConfig, String> {
        let path = dir.join(clawfs::layout::AGENT_CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => AgentConfig::parse(&text).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(AgentConfig::default()),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    fn is_paused(&self, agent: &str, store: &Store) -> bool {
        let mut paused = lock(&self.paused);
        *paused.entry(agent.to_owned()).or_insert_with(|| store.paused().unwrap_or(false))
    }

    fn info(&self, agent: &str) -> Result<(AgentInfo, Option<AgentConfig>, Store), MethodError> {
        let dir = self.agent_dir(agent)?;
        let store = Self::store(&dir)?;
        let config = Self::load_config(&dir);
        let running = lock(&self.turns).running(agent);
        let (state, error, model) = match &config {
            Err(why) => (AgentState::Stopped, Some(why.clone()), None),
            Ok(config) => {
                let route = config.model.route();
                // The soul guard first: a change it cannot review halts too.
                let (state, error) = match guard::check(&dir, &store) {
                    Err(why) => {
                        (AgentState::Halted, Some(format!("the soul guard cannot review the brain files: {why}")))
                    }
                    Ok(holds) if !holds.is_empty() => (AgentState::Halted, Some(guard::summary(agent, &holds))),
                    Ok(_) if self.is_paused(agent, &store) => (AgentState::Paused, None),
                    Ok(_) if running => (AgentState::Running, None),
                    Ok(_) => (AgentState::Idle, None),
                };
                (state, error, Some(format!("{}/{}", route.provider, route.model)))
            }
        };
        Ok((AgentInfo { agent: agent.to_owned(), state, error, model }, config.ok(), store))
    }

    async fn connect(&self, peer: ComponentId) -> Result<IpcClient, MethodError> {
        tools::connect(peer).await.map_err(|e| error(ErrorCode::Eio, e))
    }
}

/// Reports a turn on the connection that started it (in order, through one
/// queue drained by a task, so a slow reader never stalls the model) and
/// to the event bus.
struct ConnectionReporter {
    agent: String,
    turn_id: String,
    queue: mpsc::UnboundedSender<(&'static str, Object)>,
    runtime: Runtime,
}

fn object(value: Value) -> Object {
    match value {
        Value::Object(object) => object,
        _ => Object::new(),
    }
}

impl Reporter for ConnectionReporter {
    fn text(&self, text: &str) {
        let _ = self.queue.send((TURN_TEXT, object(serde_json::json!({"turn_id": self.turn_id, "text": text}))));
    }

    fn step(&self, step: &TurnStep) {
        let data = object(serde_json::to_value(step).expect("steps serialize"));
        let _ = self.queue.send((TURN_STEP, data.clone()));
        let mut published = data;
        published.insert("agent".into(), self.agent.clone().into());
        self.runtime.publish("agent.step", published);
    }

    fn publish(&self, event_name: &str, data: Value) {
        self.runtime.publish(event_name, object(data));
    }
}

impl agent_loop::Service for Daemon {
    async fn agent_create(&self, _call: &Call, p: AgentCreate) -> Result<AgentInfo, MethodError> {
        let text = p.config.unwrap_or_else(|| DEFAULT_CONFIG.to_owned());
        AgentConfig::parse(&text).map_err(|e| error(ErrorCode::Eproto, format!("config.toml: {e}")))?;
        let fs = self.connect(ComponentId::FsEngine).await?;
        let created = fs_engine::Client::new(&fs)
            .agent_dir_create(&AgentDirCreate { agent: p.agent.clone(), config: text })
            .await;
        fs.goodbye().await;
        created.map_err(|e| match e {
            clawos_api::CallError::Ipc(ipc) => error(ipc.code(), ipc.to_string()),
            other => error(ErrorCode::Eio, other.to_string()),
        })?;
        self.runtime.publish("agent.created", object(serde_json::json!({"agent": p.agent})));
        Ok(self.info(&p.agent)?.0)
    }

    async fn agent_list(&self, _call: &Call, _p: NoParams) -> Result<AgentList, MethodError> {
        let names = clawfs::namespace::list_agents(&self.config.clawfs_root)
            .map_err(|e| error(ErrorCode::Eio, e.to_string()))?;
        // One agent whose database does not open is listed as stopped, with
        // why; it does not hide the others.
        let agents = names
            .into_iter()
            .map(|agent| match self.info(&agent) {
                Ok((info, _, _)) => info,
                Err(e) => AgentInfo { agent, state: AgentState::Stopped, error: Some(e.message), model: None },
            })
            .collect();
        Ok(AgentList { agents })
    }

    async fn agent_show(&self, _call: &Call, p: AgentName) -> Result<AgentDetails, MethodError> {
        let (info, config, store) = self.info(&p.agent)?;
        let config = config.unwrap_or_default();
        let persona = persona::compile(&self.agent_dir(&p.agent)?, config.persona.budget_tokens);
        let (day, month) = store::day_and_month_start(store::now_ms());
        let spent = |since| store.spent_since(since).map_err(|e| error(ErrorCode::Eio, e));
        let sessions = store.sessions().map_err(|e| error(ErrorCode::Eio, e))?.len() as u64;
        let mut tools = tools::built_in();
        if let Ok(wasm) = self.connect(ComponentId::WasmDaemon).await {
            if let Ok(found) = tools::wasm_tools(&wasm).await {
                tools.extend(found);
            }
            wasm.goodbye().await;
        }
        let specs = turn::allowed_specs(&config, &tools);
        let native = thinker::native_tools(&config, None);
        let prompt = turn::system_prompt(&p.agent, &config, &persona.text, &specs, native);
        let specs_tokens: u64 = if native {
            specs
                .iter()
                .map(|s| clawos_agent_loop::provider::estimate_tokens(&serde_json::to_string(s).unwrap_or_default()))
                .sum()
        } else {
            0
        };
        Ok(AgentDetails {
            info,
            limits: serde_json::to_value(&config.limits).expect("limits serialize"),
            tools: specs.iter().map(|s| s.name.clone()).collect(),
            system_prompt_tokens: clawos_agent_loop::provider::estimate_tokens(&prompt) + specs_tokens,
            today: Spend { spent_usd: spent(day)?, limit_usd: config.limits.max_cost_per_day_usd },
            month: Spend { spent_usd: spent(month)?, limit_usd: config.limits.max_cost_per_month_usd },
            sessions,
            persona: persona.included,
            persona_left_out: persona.left_out,
        })
    }

    async fn agent_pause(&self, _call: &Call, p: AgentName) -> Result<AgentInfo, MethodError> {
        let dir = self.agent_dir(&p.agent)?;
        Self::store(&dir)?.set_paused(true).map_err(|e| error(ErrorCode::Eio, e))?;
        lock(&self.paused).insert(p.agent.clone(), true);
        Ok(self.info(&p.agent)?.0)
    }

    async fn agent_resume(&self, _call: &Call, p: AgentName) -> Result<AgentInfo, MethodError> {
        let dir = self.agent_dir(&p.agent)?;
        Self::load_config(&dir).map_err(|e| error(ErrorCode::Eproto, e))?;
        Self::store(&dir)?.set_paused(false).map_err(|e| error(ErrorCode::Eio, e))?;
        lock(&self.paused).insert(p.agent.clone(), false);
        Ok(self.info(&p.agent)?.0)
    }

    async fn agent_guard(&self, _call: &Call, p: AgentName) -> Result<GuardHolds, MethodError> {
        let dir = self.agent_dir(&p.agent)?;
        let store = Self::store(&dir)?;
        let holds = guard::check(&dir, &store).map_err(|e| error(ErrorCode::Eio, e))?;
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
            .collect::<Result<_, String>>()
            .map_err(|e| error(ErrorCode::Eio, e))?;
        Ok(GuardHolds { holds })
    }

    async fn agent_guard_decide(&self, _call: &Call, p: GuardDecision) -> Result<AgentInfo, MethodError> {
        let dir = self.agent_dir(&p.agent)?;
        let store = Self::store(&dir)?;
        let holds = store.holds().map_err(|e| error(ErrorCode::Eio, e))?;
        if holds.is_empty() {
            return Err(error(ErrorCode::Enoent, format!("the soul guard holds no change of agent `{}`", p.agent)));
        }
        let fs = if p.approve { None } else { Some(self.connect(ComponentId::FsEngine).await?) };
        for hold in &holds {
            match &fs {
                None => store.release(&hold.file, Some(&hold.content)).map_err(|e| error(ErrorCode::Eio, e))?,
                Some(fs) => {
                    // Written back as the agent through fs-engine, so the
                    // restore is in the ClawFS audit log like the change was.
                    let approved =
                        store.approved(&hold.file).map_err(|e| error(ErrorCode::Eio, e))?.unwrap_or_default();
                    let params = WriteFile {
                        path: hold.file.clone(),
                        agent: Some(p.agent.clone()),
                        content: Some(approved),
                        ..WriteFile::default()
                    };
                    fs_engine::Client::new(fs)
                        .write_file(&params)
                        .await
                        .map_err(|e| error(ErrorCode::Eio, format!("restoring {}: {e}", hold.file)))?;
                    store.release(&hold.file, None).map_err(|e| error(ErrorCode::Eio, e))?;
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
        Ok(self.info(&p.agent)?.0)
    }

    async fn agent_remove(&self, _call: &Call, p: AgentName) -> Result<Done, MethodError> {
        self.agent_dir(&p.agent)?;
        if lock(&self.turns).running(&p.agent) {
            return Err(error(ErrorCode::Eperm, format!("agent `{}` is running a turn; cancel it first", p.agent)));
        }
        let fs = self.connect(ComponentId::FsEngine).await?;
        let removed = fs_engine::Client::new(&fs).agent_dir_remove(&AgentRef { agent: p.agent.clone() }).await;
        fs.goodbye().await;
        removed.map_err(|e| error(ErrorCode::Eio, e.to_string()))?;
        lock(&self.paused).remove(&p.agent);
        self.runtime.publish("agent.removed", object(serde_json::json!({"agent": p.agent})));
        Ok(Done {})
    }

    async fn chat_send(&self, call: &Call, p: ChatSend) -> Result<TurnStarted, MethodError> {
        self.start_turn(call, p.agent, p.session_id, Some(p.message), p.hint)
    }

    async fn chat_continue(&self, call: &Call, p: SessionRef) -> Result<TurnStarted, MethodError> {
        self.start_turn(call, p.agent, Some(p.session_id), None, None)
    }

    async fn chat_cancel(&self, _call: &Call, p: TurnRef) -> Result<TurnCancelled, MethodError> {
        let turns = lock(&self.turns);
        let entry = turns
            .by_id
            .get(&p.turn_id)
            .ok_or_else(|| error(ErrorCode::Enoent, format!("no running turn `{}`", p.turn_id)))?;
        let running = entry.outcome.is_none();
        entry.cancel.cancel();
        Ok(TurnCancelled { turn_id: p.turn_id, cancelled: running })
    }

    async fn turn_result(&self, _call: &Call, p: TurnRef) -> Result<TurnOutcome, MethodError> {
        let turns = lock(&self.turns);
        let entry = turns.by_id.get(&p.turn_id).ok_or_else(|| {
            error(
                ErrorCode::Enoent,
                format!("no turn `{}` (finished turns are in the session's transcript)", p.turn_id),
            )
        })?;
        Ok(entry
            .outcome
            .clone()
            .unwrap_or_else(|| turn::outcome(&p.turn_id, &entry.session_id, TurnStatus::Running, None)))
    }

    async fn session_list(&self, _call: &Call, p: AgentName) -> Result<SessionList, MethodError> {
        let store = Self::store(&self.agent_dir(&p.agent)?)?;
        let rows = store.sessions().map_err(|e| error(ErrorCode::Eio, e))?;
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

    async fn session_show(&self, _call: &Call, p: SessionRef) -> Result<Transcript, MethodError> {
        let store = Self::store(&self.agent_dir(&p.agent)?)?;
        if !store.has_session(&p.session_id).map_err(|e| error(ErrorCode::Eio, e))? {
            return Err(error(ErrorCode::Enoent, format!("agent `{}` has no session `{}`", p.agent, p.session_id)));
        }
        let entries = store
            .transcript(&p.session_id)
            .map_err(|e| error(ErrorCode::Eio, e))?
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

/// Where a turn begins (`turn::Turn::run`, `turn::Turn::resume`).
enum Begin {
    /// The operator's message.
    Message(String),
    /// The calls a `waiting` turn left.
    Continue,
    /// A turn cut off by a restart: its last checkpoint, the call that was
    /// running, and when the daemon found it (ms since the epoch).
    Resume { progress: TurnOutcome, in_flight: Option<String>, since_ms: i64 },
}

/// A turn to run.
struct Launch {
    agent: String,
    db: PathBuf,
    config: AgentConfig,
    route: Route,
    store: Store,
    session_id: String,
    turn_id: String,
    begin: Begin,
}

/// The peers a turn calls through. A resumed turn may start before them
/// (agent-loop comes up first at boot): it tries for a minute.
async fn connect_peers(patient: bool) -> Result<Peers, String> {
    let mut tries = if patient { 60 } else { 1 };
    loop {
        let connected = async {
            Ok::<_, String>(Peers {
                fs_engine: tools::connect(ComponentId::FsEngine).await?,
                wasm_daemon: tools::connect(ComponentId::WasmDaemon).await?,
                security_agent: tools::connect(ComponentId::SecurityAgent).await?,
            })
        };
        match connected.await {
            Ok(peers) => return Ok(peers),
            Err(why) if tries <= 1 => return Err(why),
            Err(_) => {
                tries -= 1;
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
}

/// Connects the turn's peers, finds its tools and model, and runs it. A
/// turn that cannot start (a peer down, a provider misconfigured) ends as
/// failed with the reason, stored like any other outcome.
async fn run_turn(
    launch: Launch,
    keys: Arc<dyn KeySource>,
    cancel: CancellationToken,
    reporter: &ConnectionReporter,
) -> TurnOutcome {
    let Launch { agent, db, config, route, store, session_id, turn_id, begin } = launch;
    let (agent, session_id, turn_id) = (agent.as_str(), session_id.as_str(), turn_id.as_str());
    let message = match &begin {
        Begin::Message(message) => Some(message.as_str()),
        _ => None,
    };
    let prepared = async {
        let thinker = thinker::build(&config, &route, keys)?;
        let peers = connect_peers(matches!(begin, Begin::Resume { .. })).await?;
        let mut all = tools::built_in();
        match tools::wasm_tools(&peers.wasm_daemon).await {
            Ok(found) => all.extend(found),
            Err(why) => tracing::warn!(agent, "WASM tools unavailable for this turn: {why}"),
        }
        Ok::<_, String>((thinker, peers, all))
    };
    let (thinker, peers, all) = match prepared.await {
        Ok(prepared) => prepared,
        Err(why) => return turn::failed_to_start(&store, session_id, turn_id, message, &why),
    };
    // Only the allowed tools can be called, whatever name the model writes.
    let allowed: Vec<tools::Tool> = all.into_iter().filter(|tool| config.tools.allows(&tool.spec.name)).collect();
    let specs: Vec<_> = allowed.iter().map(|tool| tool.spec.clone()).collect();
    let dir = db.parent().unwrap_or(Path::new("/"));
    let persona = persona::compile(dir, config.persona.budget_tokens);
    // A tool call may have rewritten soul.md or identity.md (file_write, a
    // WASM tool with file access): reviewed before the model sees anything more.
    let after_tool = || match guard::check(dir, &store) {
        Ok(holds) if holds.is_empty() => None,
        Ok(holds) => Some(guard::summary(agent, &holds)),
        Err(why) => Some(format!("the soul guard cannot review the brain files: {why}")),
    };
    if !persona.left_out.is_empty() {
        tracing::warn!(agent, left_out = persona.left_out.join("; "), "brain files left out of the system prompt");
    }
    let policy = config.policy();
    let cx = CallContext {
        peers: &peers,
        tools: &allowed,
        agent,
        agent_db: &db,
        session_id,
        memory_workspace: &config.tools.memory_workspace,
        policy: &policy,
    };
    let turn = Turn {
        agent,
        config: &config,
        store: &store,
        thinker: &*thinker,
        tools: &cx,
        session_id,
        turn_id,
        persona: &persona.text,
        after_tool: &after_tool,
        cancel,
        reporter,
    };
    let outcome = match begin {
        Begin::Resume { progress, in_flight, since_ms } => {
            tracing::info!(agent, turn = turn_id, ms = store::now_ms() - since_ms, "the resumed turn runs again");
            turn.resume(progress, in_flight, &specs).await
        }
        _ => turn.run(message, &specs).await,
    };
    drop(turn);
    peers.fs_engine.goodbye().await;
    peers.wasm_daemon.goodbye().await;
    peers.security_agent.goodbye().await;
    outcome
}

impl Component for Daemon {
    async fn handle_request(&self, call: &Call, request: Request) -> Option<Result<Object, MethodError>> {
        agent_loop::dispatch(self, call, request).await
    }
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::AgentLoop, env!("CARGO_PKG_VERSION"), Daemon::start)
}

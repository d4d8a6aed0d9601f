//! Starting, resuming and running turns (`specs/agent/README.md`, "The
//! loop" and "Checkpoints and resume"): what the daemon does between a
//! `chat_send` and the turn's outcome.
//!
//! Owns: the turn table (the running turns and the last finished ones'
//! outcomes), the checks before a turn starts (one turn per session, no new
//! message while a call waits for the operator), resuming at start every
//! turn a crash or a reboot cut off, and each turn's task: its peers, its
//! tools and model, reporting to the operator's connection and the event
//! bus. Must not own: the loop of a turn and its limits (`turn`), the
//! agents' state (`registry`), the IPC methods (the daemon).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use clawos_api::agent_loop::{
    AgentState, TurnCancelled, TurnOutcome, TurnStarted, TurnStatus, TurnStep, TURN_END, TURN_STEP, TURN_TEXT,
};
use clawos_api::fs_engine::{self, AgentCommit, AgentCommitted};
use clawos_ipc::server::Connection;
use clawos_ipc::{ComponentId, IpcClient, Object};
use clawos_runtime::Runtime;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{AgentConfig, Route};
use crate::error::Error;
use crate::mcp_servers::Servers;
use crate::provider::KeySource;
use crate::registry::{self, Agent, Registry};
use crate::store::{self, Store};
use crate::tools::{self, CallContext, Peers};
use crate::turn::{self, Reporter, Turn};
use crate::{delegate, guard, persona, thinker};

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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
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

    /// Registers a turn that is about to run.
    fn insert(&mut self, turn_id: &str, agent: &str, session_id: &str, cancel: &CancellationToken) {
        let entry = TurnEntry {
            agent: agent.to_owned(),
            session_id: session_id.to_owned(),
            cancel: cancel.clone(),
            outcome: None,
        };
        self.by_id.insert(turn_id.to_owned(), entry);
    }
}

/// A random id with a prefix (`s-`, `t-`).
fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

/// Starts, resumes and keeps the agents' turns.
pub struct Launcher {
    runtime: Runtime,
    keys: Arc<dyn KeySource>,
    mcp: Arc<Servers>,
    turns: Arc<Mutex<TurnTable>>,
    /// Finished turns whose outcome [`Launcher::result`] answers.
    kept: usize,
}

impl Launcher {
    /// A launcher whose turns fetch API keys from `keys`, reach the
    /// agents' MCP servers through `mcp`, publish on `runtime`'s event
    /// bus, and whose last `kept` outcomes stay readable.
    pub fn new(runtime: Runtime, keys: Arc<dyn KeySource>, mcp: Arc<Servers>, kept: usize) -> Self {
        Launcher { runtime, keys, mcp, turns: Arc::default(), kept }
    }

    /// The agents' MCP servers.
    pub fn mcp(&self) -> &Arc<Servers> {
        &self.mcp
    }

    /// Whether a turn of `agent` runs now.
    pub fn running(&self, agent: &str) -> bool {
        lock(&self.turns).running(agent)
    }

    /// Starts a turn of `agent` (as [`Registry::find`] found it): for
    /// `message` (`chat_send`), or without one to go on with the calls a
    /// `waiting` turn left (`chat_continue`). It reports on `connection`.
    pub fn start(
        &self,
        agent: Agent,
        connection: &Connection,
        session_id: Option<String>,
        message: Option<String>,
        hint: Option<String>,
    ) -> Result<TurnStarted, Error> {
        let Agent { info, config, store, dir } = agent;
        let agent = info.agent;
        let config = match (info.state, config) {
            (AgentState::Stopped, _) | (_, None) => {
                return Err(Error::Stopped { agent, why: info.error.unwrap_or_default() })
            }
            (AgentState::Paused, _) => return Err(Error::Paused { agent }),
            (AgentState::Halted, _) => return Err(Error::Halted { agent, why: info.error.unwrap_or_default() }),
            (_, Some(config)) => config,
        };
        let route = config.route(hint.as_deref()).map_err(Error::Route)?;
        let session_id = match session_id {
            // A sub-agent's session goes on only through its parent's call.
            Some(session_id) if session_id.starts_with(delegate::SESSION_PREFIX) => {
                return Err(Error::SubAgentSession { session_id })
            }
            Some(session) if store.has_session(&session)? => session,
            Some(session_id) => return Err(Error::NoSession { agent, session_id }),
            None => new_id("s-"),
        };
        let db = dir.join(clawfs::DATABASE_FILE);
        let turn_id = new_id("t-");
        let cancel = CancellationToken::new();
        {
            let mut turns = lock(&self.turns);
            if turns.by_id.values().any(|t| t.agent == agent && t.session_id == session_id && t.outcome.is_none()) {
                return Err(Error::SessionBusy { session_id });
            }
            // A call waiting for the operator must be answered before the
            // session goes on: a new message after a call without its
            // result is a conversation no model takes.
            let waiting = turn::pending_calls(&store.context(&session_id)?);
            match (&message, waiting) {
                (Some(_), Some((_, calls))) => {
                    let tool_name = calls[0].name.clone();
                    return Err(Error::AwaitingOperator { session_id, tool_name });
                }
                (None, None) => return Err(Error::NothingToContinue { session_id }),
                _ => {}
            }
            turns.insert(&turn_id, &agent, &session_id, &cancel);
        }
        store.ensure_session(&session_id)?;
        store.turn_started(&turn_id, &session_id, hint.as_deref())?;
        let started = TurnStarted { agent: agent.clone(), session_id: session_id.clone(), turn_id: turn_id.clone() };
        let begin = match message {
            Some(message) => Begin::Message(message),
            None => Begin::Continue,
        };
        let launch = Launch { agent, db, config, route, store, session_id, turn_id, begin };
        self.spawn(launch, cancel, Some(connection.clone()));
        Ok(started)
    }

    /// Cancels turn `turn_id`; whether it was still running.
    pub fn cancel(&self, turn_id: String) -> Result<TurnCancelled, Error> {
        let turns = lock(&self.turns);
        let entry = turns.by_id.get(&turn_id).ok_or_else(|| Error::NoRunningTurn { turn_id: turn_id.clone() })?;
        let running = entry.outcome.is_none();
        entry.cancel.cancel();
        Ok(TurnCancelled { turn_id, cancelled: running })
    }

    /// Turn `turn_id`'s outcome: `running` so far, or how it ended.
    pub fn result(&self, turn_id: &str) -> Result<TurnOutcome, Error> {
        let turns = lock(&self.turns);
        let entry = turns.by_id.get(turn_id).ok_or_else(|| Error::NoTurn { turn_id: turn_id.to_owned() })?;
        Ok(entry
            .outcome
            .clone()
            .unwrap_or_else(|| turn::outcome(turn_id, &entry.session_id, TurnStatus::Running, None)))
    }

    /// Resumes every turn a crash or a reboot cut off (`specs/agent/README.md`,
    /// "Checkpoints and resume"), registered before the daemon takes a
    /// request, so a message to its session waits for it (EAGAIN). A turn
    /// whose agent cannot run now (paused, halted, stopped) or that never
    /// stored its message is ended instead, saying why.
    pub fn resume_all(&self, agents: &Registry) {
        let names = match agents.names() {
            Ok(names) => names,
            Err(e) => return tracing::error!("listing the agents to resume their turns: {e}"),
        };
        for agent in names {
            let Ok(dir) = agents.dir(&agent) else { continue };
            let unfinished = match registry::open_store(&dir).and_then(|store| Ok(store.unfinished_turns()?)) {
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
            let Ok(Agent { info, config, store, .. }) = agents.find(&agent, self.running(&agent)) else { continue };
            // A sub-agent's turn resumes within its parent's `delegate`
            // call, which runs again when the parent's turn resumes.
            for turn in unfinished.into_iter().filter(|turn| !turn.session_id.starts_with(delegate::SESSION_PREFIX)) {
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
                let store = match registry::open_store(&dir) {
                    Ok(store) => store,
                    Err(e) => {
                        tracing::error!(agent, turn = turn.turn_id, "not resumed: {e}");
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
                lock(&self.turns).insert(&turn.turn_id, &agent, &turn.session_id, &cancel);
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
                self.spawn(launch, cancel, None);
            }
        }
    }

    /// Runs `launch` in a task of its own, reporting on `connection` (the
    /// operator's, when one waits) and the event bus; the outcome goes to
    /// the turn table.
    fn spawn(&self, launch: Launch, cancel: CancellationToken, connection: Option<Connection>) {
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
        let (turns, kept, keys, mcp) = (self.turns.clone(), self.kept, self.keys.clone(), self.mcp.clone());
        tokio::spawn(async move {
            let turn_id = launch.turn_id.clone();
            let outcome = run_turn(launch, keys, &mcp, cancel, &reporter).await;
            let _ = queue.send((TURN_END, object(serde_json::to_value(&outcome).expect("outcomes serialize"))));
            lock(&turns).finish(&turn_id, outcome, kept);
        });
    }
}

/// The longest progress message of an MCP server an event carries.
const PROGRESS_MESSAGE_CHARS: usize = 200;
/// The least time between two `tool.progress` events of a turn: a server
/// may notify as often as it likes, the router's subscribers are not
/// flooded.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// What a turn does with an MCP call's progress: `tool.progress` events
/// (specs/agent/README.md, the events on the router's stream), at most one
/// per [`PROGRESS_EVERY`].
fn progress_events<'a>(
    reporter: &'a dyn Reporter,
    agent: &'a str,
    turn_id: &'a str,
) -> impl Fn(&str, &mcp::Progress) + Send + Sync + 'a {
    let last = Mutex::new(None::<std::time::Instant>);
    move |tool, update| {
        {
            let mut last = lock(&last);
            if last.is_some_and(|at| at.elapsed() < PROGRESS_EVERY) {
                return;
            }
            *last = Some(std::time::Instant::now());
        }
        let message =
            update.message.as_deref().map(|text| text.chars().take(PROGRESS_MESSAGE_CHARS).collect::<String>());
        reporter.publish(
            "tool.progress",
            serde_json::json!({"agent": agent, "turn_id": turn_id, "tool_name": tool,
                               "progress": update.progress, "total": update.total, "message": message}),
        );
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
async fn connect_peers(patient: bool) -> Result<Peers, tools::Error> {
    let mut tries = if patient { 60 } else { 1 };
    loop {
        let connected = async {
            Ok::<_, tools::Error>(Peers {
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

/// Why a turn could not start; it ends `failed` saying so.
#[derive(Debug, thiserror::Error)]
enum CannotStart {
    /// Its model could not be built from the agent's config.
    #[error(transparent)]
    Thinker(#[from] thinker::Error),
    /// A component it calls through is not reachable.
    #[error(transparent)]
    Peer(#[from] tools::Error),
}

/// Connects the turn's peers, finds its tools and model, and runs it. A
/// turn that cannot start (a peer down, a provider misconfigured) ends as
/// failed with the reason, stored like any other outcome.
async fn run_turn(
    launch: Launch,
    keys: Arc<dyn KeySource>,
    mcp: &Servers,
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
        let thinker = thinker::build(&config, &route, keys.clone())?;
        let peers = connect_peers(matches!(begin, Begin::Resume { .. })).await?;
        let mut all = tools::built_in();
        all.push(delegate::tool());
        match tools::wasm_tools(&peers.wasm_daemon).await {
            Ok(found) => all.extend(found),
            Err(why) => tracing::warn!(agent, "WASM tools unavailable for this turn: {why}"),
        }
        all.extend(mcp.tools(agent, &config.mcp, &*keys).await);
        Ok::<_, CannotStart>((thinker, peers, all))
    };
    let (thinker, peers, all) = match prepared.await {
        Ok(prepared) => prepared,
        Err(why) => return turn::failed_to_start(&store, session_id, turn_id, message, &why.to_string()),
    };
    // Only the allowed tools can be called, whatever name the model writes.
    let allowed: Vec<tools::Tool> = all.into_iter().filter(|tool| config.allows_tool(&tool.spec.name)).collect();
    let specs: Vec<_> = allowed.iter().map(|tool| tool.spec.clone()).collect();
    let dir = db.parent().unwrap_or(Path::new("/"));
    let budget = config.persona.budget_tokens;
    // The prompt is compiled from what the guard approved, reviewed now:
    // a change since the agent was found to be idle is held, not read.
    let persona = match guard::check(dir, &store, budget) {
        Ok(review) if review.holds.is_empty() => persona::compile(&review.sources, budget),
        Ok(review) => {
            let why = guard::summary(agent, &review.holds);
            return turn::failed_to_start(&store, session_id, turn_id, message, &why);
        }
        Err(why) => {
            let why = format!("the soul guard cannot review the brain files: {why}");
            return turn::failed_to_start(&store, session_id, turn_id, message, &why);
        }
    };
    // A tool call may have rewritten a source of the persona (file_write, a
    // WASM tool with file access): reviewed before the model sees anything more.
    let after_tool = || match guard::check(dir, &store, budget) {
        Ok(review) if review.holds.is_empty() => None,
        Ok(review) => Some(guard::summary(agent, &review.holds)),
        Err(why) => Some(format!("the soul guard cannot review the brain files: {why}")),
    };
    if !persona.left_out.is_empty() {
        tracing::warn!(agent, left_out = persona.left_out.join("; "), "brain files left out of the system prompt");
    }
    let policy = config.policy();
    let progress = progress_events(reporter, agent, turn_id);
    let delegation = delegate::Delegation {
        config: &config,
        store: &store,
        thinker: &*thinker,
        persona: &persona.text,
        after_tool: &after_tool,
        reporter,
        cancel: &cancel,
        turn_id,
    };
    let cx = CallContext {
        peers: &peers,
        tools: &allowed,
        agent,
        agent_db: &db,
        session_id,
        approval_session: session_id,
        paths: None,
        delegation: Some(&delegation),
        memory_workspace: &config.tools.memory_workspace,
        policy: &policy,
        mcp,
        cancel: &cancel,
        progress: Some(&progress),
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
        cancel: cancel.clone(),
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
    if outcome.tool_calls > 0 {
        commit_turn(&peers.fs_engine, agent, session_id, &outcome).await;
    }
    peers.fs_engine.goodbye().await;
    peers.wasm_daemon.goodbye().await;
    peers.security_agent.goodbye().await;
    outcome
}

/// Commits what a turn with tool calls changed to the agent's history
/// (`specs/clawfs/README.md`, "History"): the subject is the first line of
/// the agent's answer (its words on what it did), the body names the turn.
/// A failure is logged: the files are there, the next commit takes them.
async fn commit_turn(fs: &IpcClient, agent: &str, session_id: &str, outcome: &TurnOutcome) {
    let subject = outcome.answer.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or("");
    let subject: String = match subject.char_indices().nth(COMMIT_SUBJECT_CHARS) {
        Some((cut, _)) => format!("{}…", &subject[..cut]),
        None if subject.is_empty() => format!("Turn {}", outcome.turn_id),
        None => subject.to_owned(),
    };
    let message = format!("{subject}\n\nturn {} of session {session_id}, ended {:?}", outcome.turn_id, outcome.status);
    let params = AgentCommit { agent: agent.to_owned(), message };
    match fs_engine::Client::new(fs).agent_commit(&params).await {
        Ok(AgentCommitted { commit: Some(commit) }) => {
            tracing::info!(
                agent,
                turn = outcome.turn_id,
                commit = commit.id,
                files = commit.files.len(),
                "committed the turn's changes"
            );
        }
        Ok(AgentCommitted { commit: None }) => {}
        Err(why) => tracing::warn!(agent, turn = outcome.turn_id, "committing the turn's changes: {why}"),
    }
}

/// The longest commit subject, characters (git's convention is about 72).
const COMMIT_SUBJECT_CHARS: usize = 72;

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

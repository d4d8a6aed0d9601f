//! The console's calls to the components, as the `console` principal
//! (specs/ipc/README.md, "Operator extension"; its grants are the rules of
//! `ipc-acl.toml` that name `console`).
//!
//! A page makes its calls on a connection of its own, opened for the
//! request and closed with it: the console holds no state of the box, so a
//! component's restart costs at most the page being loaded.
//!
//! Owns: connecting and calling. Must not own: what a page makes of an
//! answer, or any retry (the operator reloads).

use clawos_api::agent_loop::{
    self, AgentDetails, AgentInfo, AgentList, AgentName, ChatSend, SessionContext, SessionList, SessionRef, Transcript,
    TurnRef, TurnStarted,
};
use clawos_api::fs_engine::{self, DirListing, FileContent, FilePath, MemoryRecall, ReadFile, Recall, WriteFile};
use clawos_api::observability::{self, ComponentStatuses};
use clawos_api::router::{self, SubscribeEvents};
use clawos_api::scheduler::{self, NotificationQuery, Notifications, ScheduleQuery, Schedules};
use clawos_api::security_agent::{self, Approval, ApprovalDecide, ApprovalFilter, ApprovalList, SecretList};
use clawos_api::wasm_daemon::{self, ToolList};
use clawos_api::NoParams;
use clawos_ipc::{ClientOptions, ComponentId, ErrorCode, IpcClient, Message, Principal};
use tokio::sync::mpsc;

/// A call that did not get its answer: the component could not be reached
/// or refused. Shown on the page as it is: the operator is the one to act.
#[derive(Debug, thiserror::Error)]
pub enum CallFailed {
    /// No connection (the component is down or restarting).
    #[error("{component} cannot be reached: {reason}")]
    Unreachable {
        /// The component called.
        component: ComponentId,
        /// Why.
        reason: String,
    },
    /// It answered with an error.
    #[error("{0}")]
    Refused(#[from] clawos_api::CallError),
}

async fn connect_with_events(component: ComponentId) -> Result<(IpcClient, mpsc::Receiver<Message>), CallFailed> {
    IpcClient::connect(component, ClientOptions::new(Principal::Console))
        .await
        .map_err(|error| CallFailed::Unreachable { component, reason: error.to_string() })
}

async fn connect(component: ComponentId) -> Result<IpcClient, CallFailed> {
    Ok(connect_with_events(component).await?.0)
}

/// A turn that was started, with the connection it reports on.
pub type Started = (TurnStarted, IpcClient, mpsc::Receiver<Message>);

/// Every component's health, as observability sees their heartbeats.
pub async fn components() -> Result<ComponentStatuses, CallFailed> {
    let client = connect(ComponentId::Observability).await?;
    Ok(observability::Client::new(&client).component_status(&NoParams {}).await?)
}

/// Every agent and its state.
pub async fn agents() -> Result<AgentList, CallFailed> {
    let client = connect(ComponentId::AgentLoop).await?;
    Ok(agent_loop::Client::new(&client).agent_list(&NoParams {}).await?)
}

/// One agent's details: limits, spend, sessions.
pub async fn agent(agent: &str) -> Result<AgentDetails, CallFailed> {
    let client = connect(ComponentId::AgentLoop).await?;
    Ok(agent_loop::Client::new(&client).agent_show(&AgentName { agent: agent.to_owned() }).await?)
}

/// Pauses (`pause`) or resumes an agent.
pub async fn set_paused(agent: &str, pause: bool) -> Result<AgentInfo, CallFailed> {
    let client = connect(ComponentId::AgentLoop).await?;
    let agents = agent_loop::Client::new(&client);
    let name = AgentName { agent: agent.to_owned() };
    Ok(if pause { agents.agent_pause(&name).await? } else { agents.agent_resume(&name).await? })
}

/// Starts a turn: the operator's message to an agent.
pub async fn chat_send(send: &ChatSend) -> Result<Started, CallFailed> {
    let (client, events) = connect_with_events(ComponentId::AgentLoop).await?;
    let started = agent_loop::Client::new(&client).chat_send(send).await?;
    Ok((started, client, events))
}

/// Continues a session whose turn waited for an approval, once answered.
pub async fn chat_continue(session: &SessionRef) -> Result<Started, CallFailed> {
    let (client, events) = connect_with_events(ComponentId::AgentLoop).await?;
    let started = agent_loop::Client::new(&client).chat_continue(session).await?;
    Ok((started, client, events))
}

/// Cancels a running turn.
pub async fn chat_cancel(turn_id: &str) -> Result<(), CallFailed> {
    let client = connect(ComponentId::AgentLoop).await?;
    agent_loop::Client::new(&client).chat_cancel(&TurnRef { turn_id: turn_id.to_owned() }).await?;
    Ok(())
}

/// An agent's sessions, newest first.
pub async fn sessions(agent: &str) -> Result<SessionList, CallFailed> {
    let client = connect(ComponentId::AgentLoop).await?;
    Ok(agent_loop::Client::new(&client).session_list(&AgentName { agent: agent.to_owned() }).await?)
}

/// A session's transcript.
pub async fn transcript(session: &SessionRef) -> Result<Transcript, CallFailed> {
    let client = connect(ComponentId::AgentLoop).await?;
    Ok(agent_loop::Client::new(&client).session_show(session).await?)
}

/// What a session's next request puts in the model's context window.
pub async fn context(session: &SessionRef) -> Result<SessionContext, CallFailed> {
    let client = connect(ComponentId::AgentLoop).await?;
    Ok(agent_loop::Client::new(&client).session_context(session).await?)
}

/// The approvals waiting for the operator.
pub async fn approvals() -> Result<ApprovalList, CallFailed> {
    let client = connect(ComponentId::SecurityAgent).await?;
    Ok(security_agent::Client::new(&client).approval_list(&ApprovalFilter { all: false }).await?)
}

/// Approves or denies a waiting approval.
pub async fn approval_decide(id: &str, approve: bool) -> Result<Approval, CallFailed> {
    let client = connect(ComponentId::SecurityAgent).await?;
    Ok(security_agent::Client::new(&client).approval_decide(&ApprovalDecide { id: id.to_owned(), approve }).await?)
}

/// A file of `agent`'s, read as the agent (its rules, not the operator's):
/// `path` relative to its directory. `None` when there is no such file.
pub async fn read_file(agent: &str, path: &str) -> Result<Option<FileContent>, CallFailed> {
    let client = connect(ComponentId::FsEngine).await?;
    let read = ReadFile { path: path.to_owned(), agent: Some(agent.to_owned()), offset: 0, length: None };
    match fs_engine::Client::new(&client).read_file(&read).await {
        Ok(content) => Ok(Some(content)),
        Err(clawos_api::CallError::Ipc(error)) if error.code() == ErrorCode::Enoent => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// Replaces a file of `agent`'s with `content`, as the agent: the same
/// rules as the agent's own `file_write`; the audit log names the console.
pub async fn write_file(agent: &str, path: &str, content: String) -> Result<(), CallFailed> {
    let client = connect(ComponentId::FsEngine).await?;
    let write = WriteFile {
        path: path.to_owned(),
        agent: Some(agent.to_owned()),
        content: Some(content),
        ..WriteFile::default()
    };
    fs_engine::Client::new(&client).write_file(&write).await?;
    Ok(())
}

/// A directory of `agent`'s, as the agent; `None` when it does not exist.
pub async fn list_dir(agent: &str, path: &str) -> Result<Option<DirListing>, CallFailed> {
    let client = connect(ComponentId::FsEngine).await?;
    let dir = FilePath { path: path.to_owned(), agent: Some(agent.to_owned()) };
    match fs_engine::Client::new(&client).list_dir(&dir).await {
        Ok(listing) => Ok(Some(listing)),
        Err(clawos_api::CallError::Ipc(error)) if error.code() == ErrorCode::Enoent => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// What `agent`'s memory holds about `query`: both legs, fused.
pub async fn memory_recall(agent: &str, query: &str, limit: usize) -> Result<Recall, CallFailed> {
    let client = connect(ComponentId::FsEngine).await?;
    let recall = MemoryRecall { agent: agent.to_owned(), query: query.to_owned(), category: None, limit: Some(limit) };
    Ok(fs_engine::Client::new(&client).memory_recall(&recall).await?)
}

/// The tools the tool host can run, with their grants.
pub async fn tools() -> Result<ToolList, CallFailed> {
    let client = connect(ComponentId::WasmDaemon).await?;
    Ok(wasm_daemon::Client::new(&client).tool_list(&NoParams {}).await?)
}

/// The vault's secrets: names and versions, never a value.
pub async fn secrets() -> Result<SecretList, CallFailed> {
    let client = connect(ComponentId::SecurityAgent).await?;
    Ok(security_agent::Client::new(&client).secret_list(&NoParams {}).await?)
}

/// Every agent's scheduled jobs.
pub async fn schedules() -> Result<Schedules, CallFailed> {
    let client = connect(ComponentId::Scheduler).await?;
    Ok(scheduler::Client::new(&client).schedule_list(&ScheduleQuery { agent: None }).await?)
}

/// The notifications, read ones too, newest first.
pub async fn notifications() -> Result<Notifications, CallFailed> {
    let client = connect(ComponentId::Scheduler).await?;
    Ok(scheduler::Client::new(&client).notification_list(&NotificationQuery { agent: None, all: true }).await?)
}

/// A connection subscribed to every event the router fans out, and the
/// events as they come; dropping the connection ends the subscription.
pub async fn subscribe_all() -> Result<(IpcClient, mpsc::Receiver<Message>), CallFailed> {
    let (client, events) = connect_with_events(ComponentId::Router).await?;
    router::Client::new(&client).subscribe_events(&SubscribeEvents { events: vec!["*".to_owned()] }).await?;
    Ok((client, events))
}

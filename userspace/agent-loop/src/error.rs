//! What agent-loop's IPC methods fail with (`clawos_api::agent_loop`): one
//! enum whose variants each carry their IPC error code ([`Error::code`]),
//! and the one conversion into the IPC error the methods answer
//! ([`MethodError`]), whose message is the variant's text.
//!
//! Owns: the code and the message an IPC client sees for every refusal and
//! failure of an agent-loop method. Must not own: the errors of the parts
//! (`store`, `config`, `guard`, `tools`), which are wrapped here unchanged.
//!
//! The messages are read by people (`clawctl` prints them) and by the boot
//! checks (`tests/vm/checks/58-agents.guest.sh` greps "stopped", "paused",
//! "already exists", "agent name" and the config's "max_step"): change one
//! only with its check.

use clawos_ipc::server::MethodError;
use clawos_ipc::ErrorCode;

use crate::{config, guard, store, tools};

/// Everything an agent-loop method can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The name is not a valid agent name (ENOENT: no agent can have it).
    #[error(transparent)]
    AgentName(#[from] clawfs::names::NameError),
    /// No agent of that name (ENOENT).
    #[error("no agent `{agent}`")]
    NoAgent {
        /// The name asked for.
        agent: String,
    },
    /// The agents' directory could not be listed (EIO).
    #[error(transparent)]
    ListAgents(clawfs::Error),
    /// The agent's database failed (EIO).
    #[error(transparent)]
    Store(#[from] store::Error),
    /// The soul guard could not review the agent's brain files (EIO).
    #[error(transparent)]
    Guard(#[from] guard::Error),
    /// The `config.toml` the operator gave is refused (EPROTO).
    #[error("config.toml: {0}")]
    Config(#[source] config::Error),
    /// The agent's `config.toml` does not load (EPROTO).
    #[error(transparent)]
    ConfigFile(#[from] config::LoadError),
    /// The turn's route hint is not in the agent's config (EPROTO).
    #[error(transparent)]
    Route(config::Error),
    /// The agent cannot run: its config does not load, or its database does
    /// not open (EPERM).
    #[error("agent `{agent}` is stopped: {why}")]
    Stopped {
        /// The agent.
        agent: String,
        /// Why (the config's or the database's error).
        why: String,
    },
    /// The operator paused the agent (EPERM).
    #[error("agent `{agent}` is paused (clawctl agent resume {agent})")]
    Paused {
        /// The agent.
        agent: String,
    },
    /// The soul guard halted the agent (EPERM).
    #[error("agent `{agent}` is {why}")]
    Halted {
        /// The agent.
        agent: String,
        /// What the guard holds, and how to decide it.
        why: String,
    },
    /// The agent has a turn running; it cannot be removed (EPERM).
    #[error("agent `{agent}` is running a turn; cancel it first")]
    TurnRunning {
        /// The agent.
        agent: String,
    },
    /// The agent has no MCP server of that name connected or tried (ENOENT).
    #[error("agent `{agent}` has no MCP server `{server}` connected or tried (clawctl mcp status {agent})")]
    NoMcpServer {
        /// The agent.
        agent: String,
        /// The server asked for.
        server: String,
    },
    /// No session of that id (ENOENT).
    #[error("agent `{agent}` has no session `{session_id}`")]
    NoSession {
        /// The agent.
        agent: String,
        /// The session asked for.
        session_id: String,
    },
    /// The session is a sub-agent's (EPERM): it goes on only through the
    /// `delegate` call of its parent's turn.
    #[error("session `{session_id}` is a sub-agent's: it goes on through its parent's turn")]
    SubAgentSession {
        /// The session asked for.
        session_id: String,
    },
    /// The session runs a turn already (EAGAIN: a session takes one turn
    /// at a time).
    #[error("session `{session_id}` is running a turn")]
    SessionBusy {
        /// The session.
        session_id: String,
    },
    /// A call of the session waits for the operator's approval: a new
    /// message would leave it without a result (EAGAIN).
    #[error("session `{session_id}` waits for the operator's answer to {tool_name} (clawctl approvals list)")]
    AwaitingOperator {
        /// The session.
        session_id: String,
        /// The first waiting call's tool.
        tool_name: String,
    },
    /// `chat_continue` of a session with no call waiting (ENOENT).
    #[error("session `{session_id}` has no call waiting to continue")]
    NothingToContinue {
        /// The session.
        session_id: String,
    },
    /// `chat_cancel` of a turn the daemon does not know (ENOENT).
    #[error("no running turn `{turn_id}`")]
    NoRunningTurn {
        /// The turn asked for.
        turn_id: String,
    },
    /// `turn_result` of a turn the daemon no longer keeps (ENOENT).
    #[error("no turn `{turn_id}` (finished turns are in the session's transcript)")]
    NoTurn {
        /// The turn asked for.
        turn_id: String,
    },
    /// The operator decided on holds there are not (ENOENT).
    #[error("the soul guard holds no change of agent `{agent}`")]
    NoHold {
        /// The agent.
        agent: String,
    },
    /// A component agent-loop needs is not reachable (EIO).
    #[error(transparent)]
    Peer(#[from] tools::Error),
    /// fs-engine did not make the agent's directory: its code is passed on
    /// (an existing agent, an invalid name), EIO when it gave none.
    #[error(transparent)]
    AgentDirCreate(clawos_api::CallError),
    /// fs-engine did not remove the agent's directory (EIO).
    #[error(transparent)]
    AgentDirRemove(clawos_api::CallError),
    /// A rejected change to a guarded file could not be written back (EIO).
    #[error("restoring {file}: {source}")]
    Restore {
        /// The file, relative to the agent's directory.
        file: String,
        /// fs-engine's error.
        #[source]
        source: clawos_api::CallError,
    },
}

impl Error {
    /// The IPC error code this error answers with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::AgentName(_)
            | Error::NoAgent { .. }
            | Error::NoSession { .. }
            | Error::NoMcpServer { .. }
            | Error::NothingToContinue { .. }
            | Error::NoRunningTurn { .. }
            | Error::NoTurn { .. }
            | Error::NoHold { .. } => ErrorCode::Enoent,
            Error::Config(_) | Error::ConfigFile(_) | Error::Route(_) => ErrorCode::Eproto,
            Error::Stopped { .. }
            | Error::Paused { .. }
            | Error::Halted { .. }
            | Error::TurnRunning { .. }
            | Error::SubAgentSession { .. } => ErrorCode::Eperm,
            Error::SessionBusy { .. } | Error::AwaitingOperator { .. } => ErrorCode::Eagain,
            Error::AgentDirCreate(clawos_api::CallError::Ipc(ipc)) => ipc.code(),
            Error::ListAgents(_)
            | Error::Store(_)
            | Error::Guard(_)
            | Error::Peer(_)
            | Error::AgentDirCreate(_)
            | Error::AgentDirRemove(_)
            | Error::Restore { .. } => ErrorCode::Eio,
        }
    }
}

/// The one conversion into the IPC error: the variant's code and text.
impl From<Error> for MethodError {
    fn from(error: Error) -> Self {
        MethodError::new(error.code(), error.to_string())
    }
}

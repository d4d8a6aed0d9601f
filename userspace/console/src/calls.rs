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

use clawos_api::agent_loop::{self, AgentDetails, AgentInfo, AgentList, AgentName};
use clawos_api::observability::{self, ComponentStatuses};
use clawos_api::NoParams;
use clawos_ipc::{ClientOptions, ComponentId, IpcClient, Principal};

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

async fn connect(component: ComponentId) -> Result<IpcClient, CallFailed> {
    let (client, _events) = IpcClient::connect(component, ClientOptions::new(Principal::Console))
        .await
        .map_err(|error| CallFailed::Unreachable { component, reason: error.to_string() })?;
    Ok(client)
}

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

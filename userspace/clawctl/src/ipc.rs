//! `clawctl ipc call <component> <method> [json-params]`, and the
//! connections every other subcommand makes as the `operator`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use clawos_api::fs_engine;
use clawos_ipc::{ClientOptions, ComponentId, IpcClient, Object, Principal};
use serde_json::Value;

#[derive(Subcommand)]
pub enum IpcCommand {
    /// Call a method and print its result as JSON.
    Call(CallArgs),
}

#[derive(Args)]
pub struct CallArgs {
    /// Component ID, e.g. router, observability, agent-loop.
    component: ComponentId,
    /// Method name, e.g. ping, get_metrics.
    method: String,
    /// Params as a JSON object (default `{}`).
    params: Option<String>,
    /// Timeout in milliseconds (default: the method's, from the API, capped at 30000).
    #[arg(long)]
    timeout_ms: Option<u64>,
}

/// The operator's fs-engine calls may move whole files or databases: they
/// all get the longest fs-engine method's timeout.
const FS_ENGINE_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Connects to `component` as the operator.
pub async fn connect(
    component: ComponentId,
) -> anyhow::Result<(IpcClient, tokio::sync::mpsc::Receiver<clawos_ipc::Message>)> {
    Ok(IpcClient::connect(component, ClientOptions::new(Principal::Operator)).await?)
}

/// Connects to fs-engine, which serves ClawFS (`clawctl fs`, `workspace`,
/// `memory`, `identity`).
pub async fn connect_fs_engine() -> anyhow::Result<IpcClient> {
    let (client, _events) = connect(ComponentId::FsEngine).await.context("cannot reach fs-engine")?;
    Ok(client)
}

/// Typed fs-engine calls over `client`, each with [`FS_ENGINE_CALL_TIMEOUT`].
pub fn fs_engine(client: &IpcClient) -> fs_engine::Client<'_> {
    fs_engine::Client::new(client).with_timeout(FS_ENGINE_CALL_TIMEOUT)
}

pub async fn run(command: IpcCommand) -> anyhow::Result<ExitCode> {
    let IpcCommand::Call(args) = command;
    let params: Object = match args.params.as_deref() {
        None => Object::new(),
        Some(text) => match serde_json::from_str(text).context("params are not valid JSON")? {
            Value::Object(params) => params,
            other => bail!("params must be a JSON object, got {other}"),
        },
    };
    let (client, _events) = connect(args.component).await?;
    // Any method, typed or not (this is the escape hatch for trying new
    // ones): the timeout is still the API's for a method it knows.
    let timeout =
        args.timeout_ms.map_or_else(|| clawos_api::timeout(args.component, &args.method), Duration::from_millis);
    let result = client.call(&args.method, params, Some(timeout)).await?;
    println!("{}", crate::shown::json(&result)?);
    Ok(ExitCode::SUCCESS)
}

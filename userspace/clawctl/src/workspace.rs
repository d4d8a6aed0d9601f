//! `clawctl workspace`: create, list and delete ClawFS user workspaces, and
//! their snapshots, through fs-engine.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use clawos_ipc::{ComponentId, IpcClient, Object};
use serde_json::{json, Value};

/// Workspace calls create or delete a database; a few seconds is plenty.
const FS_ENGINE_CALL_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Subcommand)]
pub enum WorkspaceCommand {
    /// Create a workspace (name: lower-case letters, digits and `-`, at most 64).
    Create(CreateArgs),
    /// List workspaces with their vector dimension and owner.
    List(ListArgs),
    /// Delete a workspace with its database, index and snapshots.
    Delete(DeleteArgs),
    /// Daily snapshots of a workspace: create, list, restore, prune.
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
}

#[derive(Subcommand)]
pub enum SnapshotCommand {
    /// Take today's consistent online snapshot (replacing today's if any).
    Create(DeleteArgs),
    /// List a workspace's snapshots, oldest first.
    List(DeleteArgs),
    /// Replace the workspace's database with a snapshot (checked first).
    Restore(RestoreArgs),
    /// Keep only the newest snapshots.
    Prune(PruneArgs),
}

#[derive(Args)]
pub struct RestoreArgs {
    name: String,
    /// `snapshot-YYYY-MM-DD.db`, as `snapshot list` shows.
    file: String,
}

#[derive(Args)]
pub struct PruneArgs {
    name: String,
    /// How many of the newest to keep.
    #[arg(long)]
    keep: usize,
}

#[derive(Args)]
pub struct CreateArgs {
    name: String,
    /// Recorded as the workspace's owner in metadata.json.
    #[arg(long, default_value = "user")]
    owner: String,
}

#[derive(Args)]
pub struct ListArgs {
    /// Print the fs-engine answer as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct DeleteArgs {
    name: String,
}

/// Connects to fs-engine, which serves ClawFS.
pub async fn connect_fs_engine() -> anyhow::Result<IpcClient> {
    let (client, _events) = crate::ipc::connect(ComponentId::FsEngine).await.context("cannot reach fs-engine")?;
    Ok(client)
}

/// Calls an fs-engine method.
pub async fn call(client: &IpcClient, method: &str, params: Value) -> anyhow::Result<Object> {
    let Value::Object(params) = params else { bail!("fs-engine params must be a JSON object") };
    Ok(client.call(method, params, Some(FS_ENGINE_CALL_TIMEOUT)).await?)
}

pub async fn run(command: WorkspaceCommand) -> anyhow::Result<ExitCode> {
    let client = connect_fs_engine().await?;
    match command {
        WorkspaceCommand::Create(args) => {
            let created = call(&client, "workspace_create", json!({ "name": args.name, "owner": args.owner })).await?;
            println!("created {} ({} dimensions)", created["workspace_id"], created["vector_dimension"]);
        }
        WorkspaceCommand::List(args) => {
            let answer = call(&client, "workspace_list", json!({})).await?;
            if args.json {
                println!("{}", Value::Object(answer));
            } else {
                println!("{:<40} {:>9} {:<12} CREATED", "NAME", "DIMENSION", "OWNER");
                for workspace in answer["workspaces"].as_array().into_iter().flatten() {
                    println!(
                        "{:<40} {:>9} {:<12} {}",
                        workspace["workspace_id"].as_str().unwrap_or("?"),
                        workspace["vector_dimension"],
                        workspace["owner"].as_str().unwrap_or("?"),
                        workspace["created_at"].as_str().unwrap_or("?")
                    );
                }
            }
        }
        WorkspaceCommand::Delete(args) => {
            call(&client, "workspace_delete", json!({ "name": args.name })).await?;
            println!("deleted {}", args.name);
        }
        WorkspaceCommand::Snapshot(SnapshotCommand::Create(args)) => {
            let snapshot = call(&client, "snapshot_create", json!({ "workspace": args.name })).await?;
            println!("{} ({} bytes)", snapshot["file"].as_str().unwrap_or("?"), snapshot["bytes"]);
        }
        WorkspaceCommand::Snapshot(SnapshotCommand::List(args)) => {
            let answer = call(&client, "snapshot_list", json!({ "workspace": args.name })).await?;
            for snapshot in answer["snapshots"].as_array().into_iter().flatten() {
                println!("{} {}", snapshot["file"].as_str().unwrap_or("?"), snapshot["bytes"]);
            }
        }
        WorkspaceCommand::Snapshot(SnapshotCommand::Restore(args)) => {
            call(&client, "snapshot_restore", json!({ "workspace": args.name, "file": args.file })).await?;
            println!("restored {} from {}", args.name, args.file);
        }
        WorkspaceCommand::Snapshot(SnapshotCommand::Prune(args)) => {
            let answer = call(&client, "snapshot_prune", json!({ "workspace": args.name, "keep": args.keep })).await?;
            for removed in answer["removed"].as_array().into_iter().flatten() {
                println!("removed {}", removed.as_str().unwrap_or("?"));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

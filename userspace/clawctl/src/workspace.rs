//! `clawctl workspace`: create, list and delete ClawFS user workspaces, and
//! their snapshots, through fs-engine.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use clawos_api::fs_engine::{SnapshotPrune, SnapshotRestore, WorkspaceCreate, WorkspaceName, WorkspaceRef};
use clawos_api::NoParams;
use serde_json::Value;

use crate::ipc::{connect_fs_engine, fs_engine};
use crate::shown::Line;

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

pub async fn run(command: WorkspaceCommand) -> anyhow::Result<ExitCode> {
    let client = connect_fs_engine().await?;
    let fs = fs_engine(&client);
    match command {
        WorkspaceCommand::Create(args) => {
            let created = fs.workspace_create(&WorkspaceCreate { name: args.name, owner: args.owner }).await?;
            println!("created {} ({} dimensions)", Value::from(created.workspace_id), created.vector_dimension);
        }
        WorkspaceCommand::List(args) => {
            let answer = fs.workspace_list(&NoParams {}).await?;
            if args.json {
                println!("{}", crate::shown::json_line(&answer)?);
            } else {
                println!("{:<40} {:>9} {:<12} CREATED", "NAME", "DIMENSION", "OWNER");
                for workspace in answer.workspaces {
                    println!(
                        "{:<40} {:>9} {:<12} {}",
                        workspace.workspace_id, workspace.vector_dimension, workspace.owner, workspace.created_at
                    );
                }
            }
        }
        WorkspaceCommand::Delete(args) => {
            fs.workspace_delete(&WorkspaceName { name: args.name.clone() }).await?;
            println!("deleted {}", args.name);
        }
        WorkspaceCommand::Snapshot(SnapshotCommand::Create(args)) => {
            let snapshot = fs.snapshot_create(&WorkspaceRef { workspace: args.name }).await?;
            println!("{} ({} bytes)", Line(&snapshot.file), snapshot.bytes);
        }
        WorkspaceCommand::Snapshot(SnapshotCommand::List(args)) => {
            for snapshot in fs.snapshot_list(&WorkspaceRef { workspace: args.name }).await?.snapshots {
                println!("{} {}", Line(&snapshot.file), snapshot.bytes);
            }
        }
        WorkspaceCommand::Snapshot(SnapshotCommand::Restore(args)) => {
            fs.snapshot_restore(&SnapshotRestore { workspace: args.name.clone(), file: args.file.clone() }).await?;
            println!("restored {} from {}", args.name, args.file);
        }
        WorkspaceCommand::Snapshot(SnapshotCommand::Prune(args)) => {
            for removed in fs.snapshot_prune(&SnapshotPrune { workspace: args.name, keep: args.keep }).await?.removed {
                println!("removed {}", Line(&removed));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

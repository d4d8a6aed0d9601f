//! `clawctl identity`: agents' identity files (ClawFS spec §5) through
//! fs-engine, which verifies every read and keeps the backups.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::workspace::{call, connect_fs_engine};

#[derive(Subcommand)]
pub enum IdentityCommand {
    /// Print an agent's verified identity file (a corrupt one is reported
    /// with the last good backup).
    Show(AgentArgs),
    /// Record a finished task in an agent's history.
    Record(RecordArgs),
    /// List an agent's identity backups, oldest first.
    Backups(AgentArgs),
    /// Put a backup back as the agent's identity file.
    Restore(RestoreArgs),
}

#[derive(Args)]
pub struct AgentArgs {
    /// One of the eight agents (e.g. fs-engine).
    agent: String,
}

#[derive(Args)]
pub struct RecordArgs {
    agent: String,
    /// The task's id, e.g. A-01.
    task: String,
    /// The task failed (default: it succeeded).
    #[arg(long)]
    failed: bool,
    /// How long it ran.
    #[arg(long, default_value_t = 0)]
    duration_ms: u64,
}

#[derive(Args)]
pub struct RestoreArgs {
    agent: String,
    /// A name from `clawctl identity backups`.
    backup: String,
}

pub async fn run(command: IdentityCommand) -> anyhow::Result<ExitCode> {
    let client = connect_fs_engine().await?;
    let answer = match command {
        IdentityCommand::Show(args) => call(&client, "identity_get", json!({ "agent": args.agent })).await?,
        IdentityCommand::Record(args) => {
            let params = json!({ "agent": args.agent, "task": args.task, "success": !args.failed, "duration_ms": args.duration_ms });
            call(&client, "identity_record_task", params).await?
        }
        IdentityCommand::Backups(args) => {
            let answer = call(&client, "identity_backups", json!({ "agent": args.agent })).await?;
            for name in answer["backups"].as_array().into_iter().flatten() {
                println!("{}", name.as_str().unwrap_or("?"));
            }
            return Ok(ExitCode::SUCCESS);
        }
        IdentityCommand::Restore(args) => {
            call(&client, "identity_restore", json!({ "agent": args.agent, "backup": args.backup })).await?
        }
    };
    println!("{}", serde_json::to_string_pretty(&Value::Object(answer))?);
    Ok(ExitCode::SUCCESS)
}

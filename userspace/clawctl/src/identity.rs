//! `clawctl identity`: agents' identity files (specs/clawfs/README.md,
//! "Identity files") through fs-engine, which verifies every read and keeps
//! the backups.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use clawos_api::fs_engine::{AgentRef, IdentityRecordTask, IdentityRestore};

use crate::ipc::{connect_fs_engine, fs_engine};

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
    let fs = fs_engine(&client);
    let identity = match command {
        IdentityCommand::Show(args) => fs.identity_get(&AgentRef { agent: args.agent }).await?,
        IdentityCommand::Record(args) => {
            let task = IdentityRecordTask {
                agent: args.agent,
                task: args.task,
                success: !args.failed,
                duration_ms: args.duration_ms,
            };
            fs.identity_record_task(&task).await?
        }
        IdentityCommand::Backups(args) => {
            for name in fs.identity_backups(&AgentRef { agent: args.agent }).await?.backups {
                println!("{}", crate::shown::Line(&name));
            }
            return Ok(ExitCode::SUCCESS);
        }
        IdentityCommand::Restore(args) => {
            fs.identity_restore(&IdentityRestore { agent: args.agent, backup: args.backup }).await?
        }
    };
    println!("{}", crate::shown::json(&identity)?);
    Ok(ExitCode::SUCCESS)
}

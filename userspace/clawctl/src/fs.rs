//! `clawctl fs check|mount`: AgentFS workspace databases opened directly,
//! with no component involved: the consistency checker, and the FUSE mount
//! (served by this process until unmounted or sent SIGTERM/SIGINT).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;

#[derive(Subcommand)]
pub enum FsCommand {
    /// Verify every AgentFS consistency rule of a workspace database (exit 1 on a violation).
    Check(CheckArgs),
    /// Mount a workspace through FUSE; runs until unmounted or sent SIGTERM/SIGINT.
    Mount(MountArgs),
}

#[derive(Args)]
pub struct CheckArgs {
    /// The workspace database (opened read-only).
    db: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct MountArgs {
    /// The workspace database (created if missing).
    db: PathBuf,
    /// An existing empty directory to mount on.
    dir: PathBuf,
    /// A read-only lower layer: a host directory or another AgentFS database.
    #[arg(long)]
    base: Option<PathBuf>,
    /// Let other users use the mount (FUSE allow_other).
    #[arg(long)]
    allow_other: bool,
    /// Commit changes to the database at least this often (fsync always
    /// commits at once); 0 commits every request on its own.
    #[arg(long, default_value_t = agentfs_fuse::commit::DEFAULT_COMMIT_INTERVAL.as_millis() as u64)]
    commit_interval_ms: u64,
}

pub fn run(command: FsCommand) -> anyhow::Result<ExitCode> {
    match command {
        FsCommand::Check(args) => {
            let report = agentfs::check::check_database(&args.db)
                .with_context(|| format!("cannot check {}", args.db.display()))?;
            if args.json {
                let violations: Vec<_> = report
                    .violations
                    .iter()
                    .map(|v| json!({ "rule": v.rule, "description": v.description, "detail": v.detail }))
                    .collect();
                println!("{}", json!({ "consistent": report.is_clean(), "violations": violations }));
            } else {
                print!("{report}");
            }
            Ok(if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        FsCommand::Mount(args) => {
            let options = agentfs_fuse::MountOptions {
                base: args.base,
                allow_other: args.allow_other,
                commit: agentfs_fuse::CommitPolicy { interval: Duration::from_millis(args.commit_interval_ms) },
            };
            agentfs_fuse::mount_with(&args.db, &args.dir, &options)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

//! `clawctl fs`: files under `/clawfs` through fs-engine (`read`, `write`,
//! `ls`, `rm`: checked against RULE-001 and written to the ClawFS audit
//! log, like an agent's requests), and AgentFS workspace databases opened
//! directly, with no component involved: the consistency checker (`check`)
//! and the FUSE mount (`mount`, served by this process until unmounted or
//! sent SIGTERM/SIGINT).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use std::io::{Read as _, Write as _};

use anyhow::Context;
use base64::Engine as _;
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::workspace::{call, connect_fs_engine};

/// fs-engine takes at most this much per write (`clawfs::files::MAX_TRANSFER_BYTES`).
const WRITE_PART_BYTES: usize = 1024 * 1024;

#[derive(Subcommand)]
pub enum FsCommand {
    /// Verify every AgentFS consistency rule of a workspace database (exit 1 on a violation).
    Check(CheckArgs),
    /// Mount a workspace through FUSE; runs until unmounted or sent SIGTERM/SIGINT.
    Mount(MountArgs),
    /// Print a file under /clawfs (through fs-engine).
    Read(FileArgs),
    /// Write standard input to a file under /clawfs (through fs-engine).
    Write(WriteArgs),
    /// List a directory under /clawfs (through fs-engine).
    Ls(FileArgs),
    /// Remove a file or empty directory under /clawfs (through fs-engine).
    Rm(FileArgs),
}

#[derive(Args)]
pub struct FileArgs {
    /// A /clawfs path (or, with --as, one relative to that agent's directory).
    path: String,
    /// Act as this agent, with its rights only (RULE-001).
    #[arg(long = "as", value_name = "AGENT")]
    agent: Option<String>,
}

#[derive(Args)]
pub struct WriteArgs {
    #[command(flatten)]
    file: FileArgs,
    /// Append instead of replacing the file.
    #[arg(long)]
    append: bool,
    /// Create missing parent directories.
    #[arg(long, short)]
    parents: bool,
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

pub async fn run(command: FsCommand) -> anyhow::Result<ExitCode> {
    match command {
        FsCommand::Read(args) => {
            let client = connect_fs_engine().await?;
            let mut offset = 0u64;
            let mut stdout = std::io::stdout().lock();
            loop {
                let answer = call(&client, "read_file", json!({ "path": args.path, "agent": args.agent, "offset": offset })).await?;
                let bytes = match (answer.get("content"), answer.get("content_base64")) {
                    (Some(Value::String(text)), _) => text.clone().into_bytes(),
                    (_, Some(Value::String(encoded))) => base64::engine::general_purpose::STANDARD.decode(encoded).context("fs-engine sent bad base64")?,
                    _ => anyhow::bail!("fs-engine answered read_file without content"),
                };
                stdout.write_all(&bytes)?;
                offset += bytes.len() as u64;
                if answer.get("eof") != Some(&Value::Bool(false)) || bytes.is_empty() {
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
        FsCommand::Write(args) => {
            let mut data = Vec::new();
            std::io::stdin().read_to_end(&mut data).context("cannot read standard input")?;
            let client = connect_fs_engine().await?;
            // One request per part: the first replaces (or appends), the rest append.
            let parts: Vec<&[u8]> = if data.is_empty() { vec![&[]] } else { data.chunks(WRITE_PART_BYTES).collect() };
            let mut append = args.append;
            let mut written = Value::Null;
            for part in parts {
                let encoded = base64::engine::general_purpose::STANDARD.encode(part);
                let params = json!({ "path": args.file.path, "agent": args.file.agent, "content_base64": encoded, "append": append, "create_dirs": args.parents });
                written = call(&client, "write_file", params).await?.remove("path").unwrap_or_default();
                append = true;
            }
            eprintln!("{}: {} bytes", written.as_str().unwrap_or("?"), data.len());
            Ok(ExitCode::SUCCESS)
        }
        FsCommand::Ls(args) => {
            let answer = call(&connect_fs_engine().await?, "list_dir", json!({ "path": args.path, "agent": args.agent })).await?;
            for entry in answer["entries"].as_array().into_iter().flatten() {
                let mode = entry["mode"].as_u64().unwrap_or(0);
                let suffix = if entry["kind"] == "dir" { "/" } else { "" };
                println!("{mode:04o} {:>10}  {}{suffix}", entry["size"], entry["name"].as_str().unwrap_or("?"));
            }
            Ok(ExitCode::SUCCESS)
        }
        FsCommand::Rm(args) => {
            let answer = call(&connect_fs_engine().await?, "delete_file", json!({ "path": args.path, "agent": args.agent })).await?;
            eprintln!("removed {}", answer["path"].as_str().unwrap_or("?"));
            Ok(ExitCode::SUCCESS)
        }
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

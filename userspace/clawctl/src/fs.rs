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
use clawos_api::fs_engine::{EntryKind, FilePath, ReadFile, WriteFile};
use serde_json::json;

use crate::ipc::{connect_fs_engine, fs_engine};
use crate::shown::{Line, Text};

/// fs-engine takes at most this much per write (`clawfs::files::MAX_TRANSFER_BYTES`).
const WRITE_PART_BYTES: usize = 1024 * 1024;

#[derive(Subcommand)]
pub enum FsCommand {
    /// Verify every AgentFS consistency rule of a workspace database (exit 1 on a violation).
    Check(CheckArgs),
    /// Print a workspace database's file size limit, or set it (EFBIG past it).
    FileSizeLimit(FileSizeLimitArgs),
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
    /// A /clawfs path (or, with --agent, one relative to that agent's directory).
    path: String,
    /// Act as this agent, with its rights only (RULE-001).
    #[arg(long)]
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
pub struct FileSizeLimitArgs {
    /// The workspace database.
    db: PathBuf,
    /// The new limit in bytes (at most 64 GiB); without it, print the limit.
    bytes: Option<u64>,
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
            let fs = fs_engine(&client);
            let mut offset = 0u64;
            let mut stdout = std::io::stdout().lock();
            loop {
                let answer = fs
                    .read_file(&ReadFile { path: args.path.clone(), agent: args.agent.clone(), offset, length: None })
                    .await?;
                let bytes = match (answer.content, answer.content_base64) {
                    (Some(text), _) => text.into_bytes(),
                    (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                        .decode(encoded)
                        .context("fs-engine sent bad base64")?,
                    (None, None) => anyhow::bail!("fs-engine answered read_file without content"),
                };
                stdout.write_all(&bytes)?;
                offset += bytes.len() as u64;
                if answer.eof || bytes.is_empty() {
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
        FsCommand::Write(args) => {
            let mut data = Vec::new();
            std::io::stdin().read_to_end(&mut data).context("cannot read standard input")?;
            let client = connect_fs_engine().await?;
            let fs = fs_engine(&client);
            // One request per part: the first replaces (or appends), the rest append.
            let parts: Vec<&[u8]> = if data.is_empty() { vec![&[]] } else { data.chunks(WRITE_PART_BYTES).collect() };
            let mut append = args.append;
            let mut written = String::new();
            for part in parts {
                let params = WriteFile {
                    path: args.file.path.clone(),
                    agent: args.file.agent.clone(),
                    content: None,
                    content_base64: Some(base64::engine::general_purpose::STANDARD.encode(part)),
                    append,
                    create_dirs: args.parents,
                };
                written = fs.write_file(&params).await?.path;
                append = true;
            }
            eprintln!("{}: {} bytes", Line(&written), data.len());
            Ok(ExitCode::SUCCESS)
        }
        FsCommand::Ls(args) => {
            let client = connect_fs_engine().await?;
            let listing = fs_engine(&client).list_dir(&FilePath { path: args.path, agent: args.agent }).await?;
            for entry in listing.entries {
                let suffix = if entry.kind == EntryKind::Dir { "/" } else { "" };
                println!("{:04o} {:>10}  {}{suffix}", entry.mode, entry.size, Line(&entry.name));
            }
            Ok(ExitCode::SUCCESS)
        }
        FsCommand::Rm(args) => {
            let client = connect_fs_engine().await?;
            let deleted = fs_engine(&client).delete_file(&FilePath { path: args.path, agent: args.agent }).await?;
            eprintln!("removed {}", Line(&deleted.path));
            Ok(ExitCode::SUCCESS)
        }
        FsCommand::FileSizeLimit(args) => {
            if !args.db.exists() {
                anyhow::bail!("{}: no such workspace database", args.db.display());
            }
            let mut workspace =
                agentfs::AgentFs::open(&args.db).with_context(|| format!("cannot open {}", args.db.display()))?;
            if let Some(bytes) = args.bytes {
                workspace
                    .set_file_size_limit(bytes)
                    .with_context(|| format!("cannot set the limit of {}", args.db.display()))?;
            }
            println!("{}", workspace.file_size_limit());
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
                let not_hardened = &report.not_hardened;
                let whole =
                    json!({ "consistent": report.is_clean(), "violations": violations, "not_hardened": not_hardened });
                println!("{}", crate::shown::json_line(&whole)?);
            } else {
                print!("{}", Text(&report.to_string()));
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

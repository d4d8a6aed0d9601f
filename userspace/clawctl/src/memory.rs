//! `clawctl memory`: index Markdown files into a workspace's memory and
//! run hybrid searches on it, through fs-engine.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use clawos_api::fs_engine::{Fusion, LegReport, MemoryIndex, MemorySearch};

use crate::ipc::{connect_fs_engine, fs_engine};

#[derive(Subcommand)]
pub enum MemoryCommand {
    /// Index (or re-index) Markdown files; unchanged chunks are skipped.
    Index(IndexArgs),
    /// Hybrid keyword + vector search.
    Search(SearchArgs),
}

#[derive(Args)]
pub struct IndexArgs {
    /// The workspace.
    #[arg(long, short, default_value = "default")]
    workspace: String,
    /// Files to index; each is stored under the path given here.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(Args)]
pub struct SearchArgs {
    /// The workspace.
    #[arg(long, short, default_value = "default")]
    workspace: String,
    /// How many results.
    #[arg(long, default_value_t = 10)]
    limit: usize,
    /// Reciprocal rank fusion instead of weighted scores.
    #[arg(long, conflicts_with_all = ["vector_weight", "keyword_weight"])]
    rrf: bool,
    /// Weight of the vector leg (scores normalized to 0..1 first).
    #[arg(long, default_value_t = 0.7)]
    vector_weight: f32,
    /// Weight of the keyword leg.
    #[arg(long, default_value_t = 0.3)]
    keyword_weight: f32,
    /// Print the fs-engine answer as JSON.
    #[arg(long)]
    json: bool,
    /// The query.
    #[arg(required = true)]
    query: Vec<String>,
}

/// `ran (N candidates)` or `NOT RUN: reason`.
fn leg(report: &LegReport) -> String {
    match report {
        LegReport::Ran { candidates } => format!("ran ({candidates} candidates)"),
        LegReport::NotRun { reason } => format!("NOT RUN: {reason}"),
    }
}

pub async fn run(command: MemoryCommand) -> anyhow::Result<ExitCode> {
    match command {
        MemoryCommand::Index(args) => {
            let client = connect_fs_engine().await?;
            let fs = fs_engine(&client);
            for file in &args.files {
                let content = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
                let params = MemoryIndex { workspace: args.workspace.clone(), path: file.display().to_string(), content };
                let report = fs.memory_index(&params).await?;
                println!("{}: {} added, {} removed, {} unchanged", file.display(), report.added, report.removed, report.unchanged);
            }
        }
        MemoryCommand::Search(args) => return search(args).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// `clawctl memory search` and its short form `clawctl search`.
pub async fn search(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let client = connect_fs_engine().await?;
    let fusion = if args.rrf {
        Fusion::Rrf { k: 60.0 }
    } else {
        Fusion::Weighted { vector: args.vector_weight, keyword: args.keyword_weight }
    };
    let params = MemorySearch { workspace: args.workspace, query: args.query.join(" "), limit: Some(args.limit), fusion: Some(fusion) };
    let answer = fs_engine(&client).memory_search(&params).await?;
    if args.json {
        println!("{}", serde_json::to_value(&answer)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("keyword leg: {}", leg(&answer.keyword));
    println!("vector leg:  {}", leg(&answer.vector));
    for (rank, hit) in answer.results.iter().enumerate() {
        let first_line = hit.content.lines().next().unwrap_or("");
        println!("{:>2}. {:.3}  {}#{} [{}]  {}", rank + 1, hit.score, hit.path, hit.heading, hit.workspace, first_line);
    }
    Ok(ExitCode::SUCCESS)
}

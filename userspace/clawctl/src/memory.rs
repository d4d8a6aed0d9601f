//! `clawctl memory`: index Markdown files into a workspace's memory and
//! run hybrid searches on it, through fs-engine.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::workspace::{call, connect_fs_engine};

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
fn leg(report: &Value) -> String {
    match report["status"].as_str() {
        Some("ran") => format!("ran ({} candidates)", report["candidates"]),
        _ => format!("NOT RUN: {}", report["reason"].as_str().unwrap_or("no reason given")),
    }
}

pub async fn run(command: MemoryCommand) -> anyhow::Result<ExitCode> {
    match command {
        MemoryCommand::Index(args) => {
            let client = connect_fs_engine().await?;
            for file in &args.files {
                let content = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
                let params = json!({ "workspace": args.workspace, "path": file.display().to_string(), "content": content });
                let report = call(&client, "memory_index", params).await?;
                println!(
                    "{}: {} added, {} removed, {} unchanged",
                    file.display(),
                    report["added"],
                    report["removed"],
                    report["unchanged"]
                );
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
        json!({ "method": "rrf", "k": 60.0 })
    } else {
        json!({ "method": "weighted", "vector": args.vector_weight, "keyword": args.keyword_weight })
    };
    let params = json!({ "workspace": args.workspace, "query": args.query.join(" "), "limit": args.limit, "fusion": fusion });
    let answer = call(&client, "memory_search", params).await?;
    if args.json {
        println!("{}", Value::Object(answer));
        return Ok(ExitCode::SUCCESS);
    }
    println!("keyword leg: {}", leg(&answer["keyword"]));
    println!("vector leg:  {}", leg(&answer["vector"]));
    for (rank, hit) in answer["results"].as_array().into_iter().flatten().enumerate() {
        let first_line = hit["content"].as_str().unwrap_or("").lines().next().unwrap_or("");
        println!(
            "{:>2}. {:.3}  {}#{} [{}]  {}",
            rank + 1,
            hit["score"].as_f64().unwrap_or(0.0),
            hit["path"].as_str().unwrap_or("?"),
            hit["heading"].as_str().unwrap_or(""),
            hit["workspace"].as_str().unwrap_or("?"),
            first_line
        );
    }
    Ok(ExitCode::SUCCESS)
}

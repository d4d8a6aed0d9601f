//! `clawctl memory`: an agent's memory (store, recall, get, list, forget,
//! count, reindex, hygiene: specs/agent/README.md, "Memory"), and a user
//! workspace's memory index (index, search), through fs-engine.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use clawos_api::fs_engine::{
    AgentRef, Fusion, LegReport, MemoryCount, MemoryEntry, MemoryHygiene, MemoryId, MemoryIndex, MemoryList,
    MemoryRecall, MemorySearch, MemoryStore,
};

use crate::ipc::{connect_fs_engine, fs_engine};
use crate::shown::Line;

#[derive(Subcommand)]
pub enum MemoryCommand {
    /// Index (or re-index) Markdown files; unchanged chunks are skipped.
    Index(IndexArgs),
    /// Hybrid keyword + vector search.
    Search(SearchArgs),
    /// Store a memory of an agent (a new entry in its Markdown files).
    Store(StoreArgs),
    /// Hybrid search of an agent's memory files.
    Recall(RecallArgs),
    /// One memory entry.
    Get(IdArgs),
    /// The newest memory entries, newest first.
    List(ListArgs),
    /// Remove a memory entry from its file and the index.
    Forget(IdArgs),
    /// How many memory entries an agent has.
    Count(ListArgs),
    /// Rebuild an agent's memory index from its files alone.
    Reindex(AgentArgs),
    /// Archive daily logs older than --archive-after-days, delete archives
    /// older than --purge-after-days.
    Hygiene(HygieneArgs),
}

#[derive(Args)]
pub struct AgentArgs {
    /// The agent.
    #[arg(long, short, default_value = "default")]
    agent: String,
    /// Print fs-engine's answer as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct StoreArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// core (default), daily, conversation or a name of your own.
    #[arg(long, short)]
    category: Option<String>,
    /// The text.
    #[arg(required = true)]
    content: Vec<String>,
}

#[derive(Args)]
pub struct RecallArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// Only entries of this category.
    #[arg(long, short)]
    category: Option<String>,
    /// How many results.
    #[arg(long, default_value_t = 5)]
    limit: usize,
    /// What to look for.
    #[arg(required = true)]
    query: Vec<String>,
}

#[derive(Args)]
pub struct IdArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// The entry's ID (`m` and 12 hex digits).
    id: String,
}

#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// Only entries of this category.
    #[arg(long, short)]
    category: Option<String>,
    /// How many (list only).
    #[arg(long, default_value_t = 20)]
    limit: usize,
}

#[derive(Args)]
pub struct HygieneArgs {
    #[command(flatten)]
    agent: AgentArgs,
    #[arg(long, default_value_t = clawos_api::fs_engine::default_archive_after_days())]
    archive_after_days: u32,
    #[arg(long, default_value_t = clawos_api::fs_engine::default_purge_after_days())]
    purge_after_days: u32,
}

/// Prints `answer` as JSON when asked, else as `human` says.
fn show<T: serde::Serialize>(json: bool, answer: &T, human: impl FnOnce(&T)) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", crate::shown::json_line(answer)?);
    } else {
        human(answer);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_entry(entry: &MemoryEntry) {
    println!("{}  {}  {}  {}", entry.id, entry.at, Line(&entry.category), Line(&entry.path));
    for line in entry.content.lines() {
        println!("    {}", Line(line));
    }
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
                let content =
                    std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
                let params =
                    MemoryIndex { workspace: args.workspace.clone(), path: file.display().to_string(), content };
                let report = fs.memory_index(&params).await?;
                println!(
                    "{}: {} added, {} removed, {} unchanged",
                    file.display(),
                    report.added,
                    report.removed,
                    report.unchanged
                );
            }
        }
        MemoryCommand::Search(args) => return search(args).await,
        command => return agent_memory(command).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// The commands on an agent's memory.
async fn agent_memory(command: MemoryCommand) -> anyhow::Result<ExitCode> {
    let client = connect_fs_engine().await?;
    let fs = fs_engine(&client);
    match command {
        MemoryCommand::Store(StoreArgs { agent, category, content }) => {
            let params =
                MemoryStore { agent: agent.agent, content: content.join(" "), category, idempotency_key: None };
            show(agent.json, &fs.memory_store(&params).await?, |entry| {
                println!("stored {} in {}", entry.id, Line(&entry.path))
            })
        }
        MemoryCommand::Recall(RecallArgs { agent, category, limit, query }) => {
            let params = MemoryRecall { agent: agent.agent, query: query.join(" "), category, limit: Some(limit) };
            show(agent.json, &fs.memory_recall(&params).await?, |recall| {
                println!("keyword leg: {}", leg(&recall.keyword));
                println!("vector leg:  {}", leg(&recall.vector));
                for (rank, hit) in recall.results.iter().enumerate() {
                    let first_line = hit.content.lines().next().unwrap_or("");
                    println!(
                        "{:>2}. {:.3}  {} {}  {}",
                        rank + 1,
                        hit.score,
                        hit.id.as_deref().unwrap_or("-"),
                        Line(&hit.path),
                        Line(first_line)
                    );
                }
            })
        }
        MemoryCommand::Get(IdArgs { agent, id }) => {
            show(agent.json, &fs.memory_get(&MemoryId { agent: agent.agent, id }).await?, print_entry)
        }
        MemoryCommand::Forget(IdArgs { agent, id }) => {
            show(agent.json, &fs.memory_forget(&MemoryId { agent: agent.agent, id }).await?, |entry| {
                println!("forgot {} from {}", entry.id, Line(&entry.path))
            })
        }
        MemoryCommand::List(ListArgs { agent, category, limit }) => {
            let answer = fs.memory_list(&MemoryList { agent: agent.agent, category, limit: Some(limit) }).await?;
            show(agent.json, &answer, |answer| answer.entries.iter().for_each(print_entry))
        }
        MemoryCommand::Count(ListArgs { agent, category, .. }) => {
            show(agent.json, &fs.memory_count(&MemoryCount { agent: agent.agent, category }).await?, |answer| {
                println!("{}", answer.count)
            })
        }
        MemoryCommand::Reindex(agent) => {
            show(agent.json, &fs.memory_reindex(&AgentRef { agent: agent.agent }).await?, |report| {
                println!("{} files, {} chunks, {} vectors", report.files, report.chunks, report.vectors)
            })
        }
        MemoryCommand::Hygiene(HygieneArgs { agent, archive_after_days, purge_after_days }) => {
            let params = MemoryHygiene { agent: agent.agent, archive_after_days, purge_after_days };
            show(agent.json, &fs.memory_hygiene(&params).await?, |report| {
                println!("archived: {}", Line(&report.archived.join(", ")));
                println!("purged: {}", Line(&report.purged.join(", ")));
            })
        }
        MemoryCommand::Index(_) | MemoryCommand::Search(_) => unreachable!("workspace commands are run by `run`"),
    }
}

/// `clawctl memory search` and its short form `clawctl search`.
pub async fn search(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let client = connect_fs_engine().await?;
    let fusion = if args.rrf {
        Fusion::Rrf { k: 60.0 }
    } else {
        Fusion::Weighted { vector: args.vector_weight, keyword: args.keyword_weight }
    };
    let params = MemorySearch {
        workspace: args.workspace,
        query: args.query.join(" "),
        limit: Some(args.limit),
        fusion: Some(fusion),
    };
    let answer = fs_engine(&client).memory_search(&params).await?;
    if args.json {
        println!("{}", crate::shown::json_line(&answer)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("keyword leg: {}", leg(&answer.keyword));
    println!("vector leg:  {}", leg(&answer.vector));
    for (rank, hit) in answer.results.iter().enumerate() {
        let first_line = hit.content.lines().next().unwrap_or("");
        let (path, heading, first_line) = (Line(&hit.path), Line(&hit.heading), Line(first_line));
        println!("{:>2}. {:.3}  {path}#{heading} [{}]  {first_line}", rank + 1, hit.score, hit.workspace);
    }
    Ok(ExitCode::SUCCESS)
}

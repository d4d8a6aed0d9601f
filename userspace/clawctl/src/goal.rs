//! `clawctl goal`: an agent's goals (specs/clawfs/README.md, "Goals") through
//! fs-engine. `log` shows the history commits that touched a goal's file.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use clawos_api::fs_engine::{self, AgentHistory, Goal, GoalQuery, GoalState};
use clawos_ipc::ComponentId;

use crate::shown::Line;

#[derive(Subcommand)]
pub enum GoalCommand {
    /// An agent's goals, by state.
    List {
        agent: String,
        /// Only goals in this state (proposed, active, blocked, completed, abandoned).
        #[arg(long)]
        state: Option<String>,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// One goal: its description, artifacts and log.
    Show {
        agent: String,
        id: String,
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The history commits that touched a goal's file, newest first.
    Log { agent: String, id: String },
}

fn print_goal(goal: &Goal) {
    let parent = goal.parent.as_deref().map(|p| format!(" (part of {p})")).unwrap_or_default();
    println!("{:<10} {}  {}{parent}", goal.state.as_str(), goal.id, Line(&goal.title));
}

pub async fn run(command: GoalCommand) -> anyhow::Result<ExitCode> {
    let (client, _events) = crate::ipc::connect(ComponentId::FsEngine).await.context("cannot reach fs-engine")?;
    let fs = fs_engine::Client::new(&client);
    match command {
        GoalCommand::List { agent, state, json } => {
            let state = state
                .map(|s| serde_json::from_value::<GoalState>(serde_json::Value::String(s.clone())))
                .transpose()
                .context("--state is proposed, active, blocked, completed or abandoned")?;
            let goals = fs.goal_list(&GoalQuery { agent: agent.clone(), state }).await?;
            if json {
                println!("{}", crate::shown::json(&goals)?);
            } else if goals.goals.is_empty() {
                println!("{agent} has no goals");
            }
            goals.goals.iter().filter(|_| !json).for_each(print_goal);
        }
        GoalCommand::Show { agent, id, json } => {
            let goals = fs.goal_list(&GoalQuery { agent: agent.clone(), state: None }).await?;
            let goal =
                goals.goals.into_iter().find(|g| g.id == id).with_context(|| format!("{agent} has no goal `{id}`"))?;
            if json {
                println!("{}", crate::shown::json(&goal)?);
            } else {
                print_goal(&goal);
                println!("file: {}", Line(&goal.path));
                for line in goal.description.lines() {
                    println!("  {}", Line(line));
                }
                for artifact in &goal.artifacts {
                    println!("artifact: {}", Line(artifact));
                }
                for line in &goal.log {
                    println!("- {}", Line(line));
                }
            }
        }
        GoalCommand::Log { agent, id } => {
            let history = fs.agent_history(&AgentHistory { agent: agent.clone(), limit: Some(500) }).await?;
            let file = format!("/{id}.md");
            let touched = |path: &String| path.starts_with("goals/") && path.ends_with(&file);
            for commit in history.commits.iter().filter(|c| c.files.iter().any(touched)) {
                let when = fsutil::rfc3339(u64::try_from(commit.time).unwrap_or(0));
                let subject = commit.message.lines().next().unwrap_or("");
                println!("{}  {when}  {}  {}", &commit.id[..12], Line(&commit.author), Line(subject));
            }
        }
    }
    client.goodbye().await;
    Ok(ExitCode::SUCCESS)
}

//! `clawctl schedule`: the agents' jobs (specs/scheduler/README.md). `list`,
//! `show`, `run`, `pause` and `resume` ask the scheduler; `add` and `rm` edit
//! the agent's `cron/jobs.toml` (the jobs' source of truth) through
//! fs-engine as the operator, keeping the file's comments, and check the
//! result with the scheduler's own parser before writing it. `clawctl
//! notifications` lists and marks read what jobs, heartbeats and agents raised.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use clawos_api::fs_engine::{self, ReadFile, WriteFile};
use clawos_api::scheduler::{
    self, JobDetails, JobRef, JobRun, Notification, NotificationQuery, NotificationRef, ScheduleQuery, ScheduledJob,
};
use clawos_ipc::{ComponentId, ErrorCode};
use clawos_schedule::jobs;
use jiff::tz::TimeZone;

use crate::shown::Line;

#[derive(Subcommand)]
pub enum ScheduleCommand {
    /// Every job (or one agent's): schedule, next fire, last run; and each
    /// jobs file that has an error.
    List {
        /// Only this agent's jobs.
        #[arg(long)]
        agent: Option<String>,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// One job: its prompt and its last runs.
    Show(JobArgs),
    /// Fire a job now, as a run of its own.
    Run(JobArgs),
    /// Pause a job: nothing fires until it is resumed.
    Pause(JobArgs),
    /// Resume a job from now (the slots it missed are not replayed).
    Resume(JobArgs),
    /// Add a job to the agent's cron/jobs.toml.
    Add(Box<AddArgs>),
    /// Remove a job from the agent's cron/jobs.toml (its runs stay in the history).
    Rm {
        /// The agent.
        agent: String,
        /// The job.
        job: String,
    },
}

#[derive(Args)]
pub struct JobArgs {
    /// The agent.
    agent: String,
    /// The job.
    job: String,
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

/// Exactly one of `--cron`, `--at`, `--every`, `--delay`: the jobs file's
/// parser says so when it is not (nothing is written).
#[derive(Args)]
pub struct AddArgs {
    /// The agent.
    agent: String,
    /// The job's name (1-64 of a-z, 0-9, - and _).
    job: String,
    /// Five-field cron expression (minute hour day month weekday).
    #[arg(long)]
    cron: Option<String>,
    /// Once, at this time: RFC 3339 with an offset, or a civil time in --tz.
    #[arg(long)]
    at: Option<String>,
    /// Every interval (15m, 1h 30m), at least 1m.
    #[arg(long)]
    every: Option<String>,
    /// Once, this long after the scheduler first reads the job.
    #[arg(long)]
    delay: Option<String>,
    /// The IANA time zone of --cron or --at (default: the box's).
    #[arg(long)]
    tz: Option<String>,
    /// The message each run sends the agent.
    #[arg(long)]
    prompt: String,
    /// The session every run continues (default: the job's own).
    #[arg(long)]
    session: Option<String>,
    /// What slots missed beyond their grace do: skip or once.
    #[arg(long)]
    missed: Option<String>,
    /// How late a slot may be reached and still be on time (default 5m).
    #[arg(long)]
    grace: Option<String>,
    /// When a run raises a notification: always, on_failure (default), on_success, never.
    #[arg(long)]
    notify: Option<String>,
}

fn print_run(run: &JobRun) {
    println!(
        "  {}  {:<8} slot {}{}  {}",
        run.started_at,
        run.status,
        run.slot,
        if run.manual { " (by hand)" } else { "" },
        Line(run.message.as_deref().unwrap_or(""))
    );
}

fn print_job(job: &ScheduledJob) {
    let next = match (&job.next_fire, job.paused) {
        (_, true) => "paused".to_owned(),
        (Some(next), false) => format!("next {next}"),
        (None, false) => "no next fire".to_owned(),
    };
    println!("{}/{}  {}  {next}  missed={}", job.agent, job.job, job.schedule, job.missed);
    if let Some(run) = &job.last_run {
        print_run(run);
    }
}

pub async fn run(command: ScheduleCommand) -> anyhow::Result<ExitCode> {
    match command {
        ScheduleCommand::Add(args) => return add(*args).await,
        ScheduleCommand::Rm { agent, job } => return remove(&agent, &job).await,
        _ => {}
    }
    let (client, _events) = crate::ipc::connect(ComponentId::Scheduler).await.context("cannot reach the scheduler")?;
    let scheduler = scheduler::Client::new(&client);
    let job_ref = |args: &JobArgs| JobRef { agent: args.agent.clone(), job: args.job.clone() };
    match command {
        ScheduleCommand::List { agent, json } => {
            let list = scheduler.schedule_list(&ScheduleQuery { agent }).await?;
            if json {
                println!("{}", crate::shown::json(&list)?);
                return Ok(ExitCode::SUCCESS);
            }
            if list.waiting_for_clock {
                println!("(waiting for the clock to be synchronised before firing)");
            }
            if list.jobs.is_empty() {
                println!("no jobs");
            }
            list.jobs.iter().for_each(print_job);
            for error in &list.file_errors {
                let line = error.line.map(|l| format!(", line {l}")).unwrap_or_default();
                println!(
                    "{}: {}{line}: {} (its previous jobs keep running)",
                    error.agent,
                    jobs::JOBS_FILE,
                    Line(&error.reason)
                );
            }
        }
        ScheduleCommand::Show(args) => {
            let JobDetails { job, prompt, runs } = scheduler.schedule_show(&job_ref(&args)).await?;
            if args.json {
                println!("{}", crate::shown::json(&JobDetails { job, prompt, runs })?);
            } else {
                print_job(&ScheduledJob { last_run: None, ..job });
                println!("prompt: {}", Line(&prompt));
                runs.iter().for_each(print_run);
            }
        }
        ScheduleCommand::Run(args) | ScheduleCommand::Pause(args) | ScheduleCommand::Resume(args) if args.json => {
            anyhow::bail!("--json is for list and show (job {})", args.job)
        }
        ScheduleCommand::Run(args) => {
            let run = scheduler.schedule_run(&job_ref(&args)).await?;
            println!("fired {}/{}: run {} (follow it with `clawctl schedule show`)", run.agent, run.job, run.fire_id);
        }
        ScheduleCommand::Pause(args) => print_job(&scheduler.schedule_pause(&job_ref(&args)).await?),
        ScheduleCommand::Resume(args) => print_job(&scheduler.schedule_resume(&job_ref(&args)).await?),
        ScheduleCommand::Add(_) | ScheduleCommand::Rm { .. } => unreachable!("handled above"),
    }
    client.goodbye().await;
    Ok(ExitCode::SUCCESS)
}

fn jobs_path(agent: &str) -> String {
    format!("/clawfs/agents/{agent}/{}", jobs::JOBS_FILE)
}

/// The agent's jobs file as text (empty when it has none).
async fn read_jobs(fs: &fs_engine::Client<'_>, agent: &str) -> anyhow::Result<String> {
    let read = fs.read_file(&ReadFile { path: jobs_path(agent), agent: None, offset: 0, length: None }).await;
    match read {
        Ok(file) => file.content.context("cron/jobs.toml is not UTF-8 text"),
        Err(clawos_api::CallError::Ipc(e)) if e.code() == ErrorCode::Enoent => Ok(String::new()),
        Err(e) => Err(e.into()),
    }
}

/// Reads the agent's jobs file, changes it with `change` (which checks
/// the result with the scheduler's parser) and writes it back.
async fn edit(agent: &str, change: impl FnOnce(&str, &TimeZone) -> Result<String, String>) -> anyhow::Result<()> {
    let (client, _events) = crate::ipc::connect(ComponentId::FsEngine).await.context("cannot reach fs-engine")?;
    let fs = fs_engine::Client::new(&client);
    let text = read_jobs(&fs, agent).await?;
    let local = TimeZone::try_system().unwrap_or(TimeZone::UTC);
    let text = change(&text, &local).map_err(|e| anyhow::anyhow!("agent `{agent}`: {e}; nothing written"))?;
    let write = WriteFile {
        path: jobs_path(agent),
        agent: None,
        content: Some(text),
        create_dirs: true,
        ..WriteFile::default()
    };
    fs.write_file(&write).await?;
    client.goodbye().await;
    Ok(())
}

async fn add(args: AddArgs) -> anyhow::Result<ExitCode> {
    let fields = [
        ("cron", &args.cron),
        ("at", &args.at),
        ("every", &args.every),
        ("delay", &args.delay),
        ("tz", &args.tz),
        ("prompt", &Some(args.prompt.clone())),
        ("session", &args.session),
        ("missed", &args.missed),
        ("grace", &args.grace),
        ("notify", &args.notify),
    ];
    let fields: Vec<(&str, &str)> = fields.iter().filter_map(|(k, v)| Some((*k, v.as_deref()?))).collect();
    edit(&args.agent, |text, local| jobs::with_job_added(text, &args.job, &fields, local)).await?;
    println!("added {}/{} to {}; the scheduler reads it within its pass", args.agent, args.job, jobs::JOBS_FILE);
    Ok(ExitCode::SUCCESS)
}

async fn remove(agent: &str, job: &str) -> anyhow::Result<ExitCode> {
    edit(agent, |text, local| jobs::with_job_removed(text, job, local)).await?;
    println!("removed {agent}/{job} from {}", jobs::JOBS_FILE);
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct NotificationsArgs {
    /// Only this agent's.
    #[arg(long)]
    agent: Option<String>,
    /// Read ones too.
    #[arg(long)]
    all: bool,
    /// Mark this one read.
    #[arg(long, value_name = "ID", conflicts_with_all = ["agent", "all"])]
    read: Option<i64>,
    /// Print them as JSON.
    #[arg(long)]
    json: bool,
}

fn print_notification(n: &Notification) {
    let read = if n.read_at.is_some() { "" } else { " (unread)" };
    println!("#{} {} {} {} [{}]{read}: {}", n.id, n.created_at, n.level, n.agent, n.source, Line(&n.title));
    for line in n.body.lines() {
        println!("    {}", Line(line));
    }
}

/// `clawctl notifications`: what jobs, heartbeats and agents raised.
pub async fn notifications(args: NotificationsArgs) -> anyhow::Result<ExitCode> {
    let (client, _events) = crate::ipc::connect(ComponentId::Scheduler).await.context("cannot reach the scheduler")?;
    let scheduler = scheduler::Client::new(&client);
    if let Some(id) = args.read {
        let read = scheduler.notification_read(&NotificationRef { id }).await?;
        if args.json {
            println!("{}", crate::shown::json(&read)?);
        } else {
            print_notification(&read);
        }
    } else {
        let list = scheduler.notification_list(&NotificationQuery { agent: args.agent, all: args.all }).await?;
        if args.json {
            println!("{}", crate::shown::json(&list)?);
        } else if list.notifications.is_empty() {
            println!("no {}notifications", if args.all { "" } else { "unread " });
        } else {
            list.notifications.iter().for_each(print_notification);
        }
    }
    client.goodbye().await;
    Ok(ExitCode::SUCCESS)
}

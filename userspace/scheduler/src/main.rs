//! `clawos-scheduler`: fires the agents' jobs (`specs/scheduler/README.md`).
//!
//! Why a component of its own: it is the one thing that acts when nobody
//! types, so it holds no permission an agent would not have. It reads each
//! agent's `cron/jobs.toml` and `HEARTBEAT.md` and nothing else of /clawfs,
//! starts every run as
//! a turn through agent-loop (the agent's own limits, autonomy and
//! approvals apply) and writes the daily log line through fs-engine as the
//! agent. What a crash costs: nothing is run twice (each slot is claimed in
//! its database before its turn starts); a run that was starting is ended
//! `failed` at the next start, one whose turn runs is followed again, and
//! slots that passed meanwhile follow their job's missed-run policy.
//!
//! Owns: the scheduler's methods (`clawos_api::scheduler`), the pass that
//! reads the files and fires what is due (the heartbeat's checklist
//! included), following each run's turn, `task_completed`/`task_failed`,
//! and the notifications (stored, published). The rules themselves (the
//! file, slots, claims) are the library's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use clawos_api::agent_loop::{self, ChatSend, TurnRef, TurnStatus};
use clawos_api::fs_engine::{self, WriteFile};
use clawos_api::scheduler::{
    self, JobDetails, JobRef, JobRun, JobsFileError, NewNotification, Notification, NotificationQuery, NotificationRef,
    Notifications, ScheduleQuery, ScheduledJob, Schedules,
};
use clawos_api::Call;
use clawos_ipc::client::{ClientOptions, IpcClient};
use clawos_ipc::server::MethodError;
use clawos_ipc::{ComponentId, ErrorCode, Object, Request};
use clawos_runtime::{Component, Runtime};
use clawos_schedule::jobs::{self, FileError, Job};
use clawos_schedule::slots::{self, Due};
use clawos_schedule::store::{self, JobRow, Run, Status, Store};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use notify::event::CreateKind;
use notify::{EventKind, RecursiveMode, Watcher};
use serde::Deserialize;

/// `[component]` of `/etc/clawos/scheduler.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Where ClawFS is mounted. Default `/clawfs`.
    #[serde(default = "default_root")]
    clawfs_root: PathBuf,
    /// The database. Default `/var/lib/clawos/scheduler/schedule.db`.
    #[serde(default = "default_db")]
    database: PathBuf,
    /// The longest wait between passes, seconds. Default 15.
    #[serde(default = "default_pass")]
    pass_seconds: u64,
    /// How long after boot to wait for a synchronised clock before firing
    /// anyway, seconds. Default 120.
    #[serde(default = "default_clock_wait")]
    clock_wait_seconds: u64,
}

fn default_root() -> PathBuf {
    PathBuf::from("/clawfs")
}
fn default_db() -> PathBuf {
    PathBuf::from("/var/lib/clawos/scheduler/schedule.db")
}
fn default_pass() -> u64 {
    15
}
fn default_clock_wait() -> u64 {
    120
}

/// systemd-timesyncd makes this once it has synchronised the clock.
const CLOCK_SYNCHRONISED: &str = "/run/systemd/timesync/synchronized";
/// How often a run's turn is asked whether it ended.
const FOLLOW_EVERY: Duration = Duration::from_secs(2);
/// How long after a jobs file's change the pass that reads it runs.
const SETTLE: Duration = Duration::from_millis(200);
/// The runs `schedule_show` lists.
const SHOWN_RUNS: u32 = 50;
/// The notifications `notification_list` answers.
const SHOWN_NOTIFICATIONS: u32 = 200;
/// How much of an answer a run keeps and logs, characters.
const ANSWER_KEPT: usize = 200;

/// What a pass does with a job.
enum Step {
    /// Nothing now; its next slot, if any.
    Next(Option<Timestamp>),
    /// A run to claim and start.
    Fire(Box<Firing>),
}

/// A run due in this pass, before its claim.
struct Firing {
    agent: String,
    job: Job,
    row: JobRow,
    slot: Timestamp,
    /// What the run tells the agent.
    message: String,
    /// Why it is late or folds earlier slots, if it does.
    note: String,
}

/// One agent's jobs file as last read.
struct AgentFile {
    /// Its text (empty: no file).
    text: String,
    /// The jobs of the last text that parsed.
    jobs: Vec<Job>,
    /// Why the current text does not parse.
    error: Option<FileError>,
}

struct Shared {
    runtime: Runtime,
    config: Config,
    local: TimeZone,
    store: Mutex<Store>,
    files: Mutex<BTreeMap<String, AgentFile>>,
    clock_trusted: AtomicBool,
    /// Wakes the loop for a pass now: an operator's pause or resume, a
    /// change of a jobs file.
    wake: Arc<tokio::sync::Notify>,
    /// The inotify watch on the agents' directories (`None`: inotify
    /// failed, and passes every `pass_seconds` are all there is).
    watch: Mutex<Option<Watch>>,
}

/// Watches `agents/`, each `agents/<agent>/` and each `agents/<agent>/cron/`,
/// none of them recursively: what a jobs file's change, or its making,
/// touches, and nothing of what an agent's turn writes elsewhere.
struct Watch {
    watcher: notify::RecommendedWatcher,
    /// The directories watched.
    dirs: BTreeSet<PathBuf>,
    /// The directories that could not be watched at the last pass (said
    /// once, not at every pass).
    failing: BTreeSet<PathBuf>,
}

impl Watch {
    /// Watches `agents` for a change of a jobs file; every such change
    /// wakes the loop.
    fn start(agents: &Path, wake: Arc<tokio::sync::Notify>) -> notify::Result<Self> {
        let jobs_file = Path::new(jobs::JOBS_FILE).file_name().map(ToOwned::to_owned);
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // An error is an overflowed queue: what it lost is read by the
            // pass it wakes.
            let wanted = event.map_or(true, |event| {
                matches!(event.kind, EventKind::Create(CreateKind::Folder))
                    || event.paths.iter().any(|path| path.file_name() == jobs_file.as_deref())
            });
            if wanted {
                wake.notify_one();
            }
        })?;
        watcher.watch(agents, RecursiveMode::NonRecursive)?;
        Ok(Watch { watcher, dirs: BTreeSet::new(), failing: BTreeSet::new() })
    }

    /// Brings the watched directories in step with `agents`' directories.
    /// Each is watched again at every pass: a directory removed and made
    /// again under its name is a new one, which the old watch does not see.
    fn follow(&mut self, agents_dir: &Path, agents: &[String]) {
        let wanted: BTreeSet<PathBuf> = agents
            .iter()
            .flat_map(|agent| {
                let dir = agents_dir.join(agent);
                let cron = Path::new(jobs::JOBS_FILE).parent().map(|cron| dir.join(cron));
                cron.into_iter().chain([dir])
            })
            .filter(|dir| dir.is_dir())
            .collect();
        for gone in self.dirs.difference(&wanted) {
            // A removed directory took its watch with it.
            let _ = self.watcher.unwatch(gone);
        }
        let mut failing = BTreeSet::new();
        self.dirs = wanted
            .into_iter()
            .filter(|dir| match self.watcher.watch(dir, RecursiveMode::NonRecursive) {
                Ok(()) => true,
                Err(e) => {
                    if !self.failing.contains(dir) {
                        tracing::warn!("watching {}: {e}; its changes are read at each pass", dir.display());
                    }
                    failing.insert(dir.clone());
                    false
                }
            })
            .collect();
        self.failing = failing;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn eio(error: impl std::fmt::Display) -> MethodError {
    MethodError::new(ErrorCode::Eio, error.to_string())
}

fn rfc3339(at: Timestamp) -> String {
    at.round(jiff::Unit::Second).unwrap_or(at).to_string()
}

fn shown_run(run: Run) -> JobRun {
    JobRun {
        agent: run.agent,
        job: run.job,
        fire_id: run.fire_id,
        slot: rfc3339(run.slot),
        manual: run.manual,
        started_at: rfc3339(run.started),
        ended_at: run.ended.map(rfc3339),
        status: run.status.as_str().to_owned(),
        turn_id: run.turn_id,
        session_id: run.session_id,
        message: run.message,
    }
}

/// What a run of `job` for `slot` tells the agent.
fn scheduled_message(job: &Job, slot: Timestamp) -> String {
    format!("[scheduled job {}, due {}]\n{}", job.name, rfc3339(slot), job.prompt)
}

fn shown_notification(n: store::Notification) -> Notification {
    Notification {
        id: n.id,
        agent: n.agent,
        source: n.source,
        level: n.level,
        title: n.title,
        body: n.body,
        fire_id: n.fire_id,
        created_at: rfc3339(n.created),
        read_at: n.read.map(rfc3339),
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn clip_bytes(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// The first `n` characters of `text`, on one line.
fn clip(text: &str, n: usize) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(n) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

impl Shared {
    /// Re-reads every agent's jobs file that changed.
    fn read_files(&self, now: Timestamp) {
        let agents_dir = self.config.clawfs_root.join("agents");
        let agents: Vec<String> = match std::fs::read_dir(&agents_dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| !name.starts_with('.'))
                .collect(),
            Err(e) => return tracing::error!("listing {}: {e}", agents_dir.display()),
        };
        if let Some(watch) = lock(&self.watch).as_mut() {
            watch.follow(&agents_dir, &agents);
        }
        let mut files = lock(&self.files);
        let mut store = lock(&self.store);
        for gone in files.keys().filter(|a| !agents.contains(a)).cloned().collect::<Vec<_>>() {
            files.remove(&gone);
            if let Err(e) = store.sync(&gone, "", &[], now) {
                tracing::error!(agent = gone, "forgetting the jobs of a removed agent: {e}");
            }
        }
        for agent in agents {
            let path = agents_dir.join(&agent).join(jobs::JOBS_FILE);
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => {
                    tracing::warn!(agent, "reading {}: {e}", path.display());
                    continue;
                }
            };
            if files.get(&agent).is_some_and(|file| file.text == text) {
                continue;
            }
            let previous = match files.remove(&agent) {
                Some(file) => file.jobs,
                // First read since start: the last text that parsed.
                None => store
                    .last_good(&agent)
                    .ok()
                    .flatten()
                    .and_then(|good| jobs::parse(&good, &self.local).ok())
                    .unwrap_or_default(),
            };
            let file = match jobs::parse(&text, &self.local) {
                Ok(parsed) => {
                    let shown: Vec<(String, String)> =
                        parsed.iter().map(|job| (job.name.clone(), job.schedule.to_string())).collect();
                    match store.sync(&agent, &text, &shown, now) {
                        Ok(()) => {
                            tracing::info!(agent, jobs = parsed.len(), "read {}", jobs::JOBS_FILE);
                            AgentFile { text, jobs: parsed, error: None }
                        }
                        Err(e) => {
                            tracing::error!(agent, "recording the jobs: {e}");
                            AgentFile { text: String::new(), jobs: previous, error: None }
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(agent, "{error}; its previous jobs keep running");
                    AgentFile { text, jobs: previous, error: Some(error) }
                }
            };
            files.insert(agent, file);
        }
    }

    /// One pass: reads the files, fires what is due, records what was
    /// missed. Returns the earliest next slot.
    fn pass(self: &Arc<Self>) -> Option<Timestamp> {
        let now = Timestamp::now();
        self.read_files(now);
        let jobs: Vec<(String, Job)> = lock(&self.files)
            .iter()
            .flat_map(|(agent, file)| file.jobs.iter().map(move |job| (agent.clone(), job.clone())))
            .collect();
        let mut earliest: Option<Timestamp> = None;
        let mut firings = Vec::new();
        for (agent, job) in jobs {
            match self.step(&agent, &job, now) {
                Ok(Step::Next(Some(next))) => earliest = Some(earliest.map_or(next, |e| e.min(next))),
                Ok(Step::Next(None)) => {}
                Ok(Step::Fire(firing)) => firings.push(firing),
                Err(e) => tracing::error!(agent, job = job.name, "{e}"),
            }
        }
        // Every slot due in this pass is claimed in one transaction: one
        // flush for all of them, not one each (schedule-bench's lateness).
        let due: Vec<(&str, &str, Timestamp)> =
            firings.iter().map(|f| (f.agent.as_str(), f.job.name.as_str(), f.slot)).collect();
        let claimed = match lock(&self.store).claim_all(&due, now) {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::error!("claiming {} due run(s): {e}", due.len());
                return earliest;
            }
        };
        for (firing, fire_id) in firings.into_iter().zip(claimed) {
            if let Some(fire_id) = fire_id {
                let Firing { agent, job, row, message, note, .. } = *firing;
                self.start_run(&agent, &job, &row, fire_id, message, note);
            }
        }
        earliest
    }

    /// What is due for one job: its next slot, or a run to claim. Missed
    /// and skipped slots are recorded here.
    fn step(self: &Arc<Self>, agent: &str, job: &Job, now: Timestamp) -> Result<Step, store::Error> {
        let mut store = lock(&self.store);
        let Some(row) = store.job(agent, &job.name)? else { return Ok(Step::Next(None)) };
        if row.paused {
            return Ok(Step::Next(None));
        }
        match slots::decide(job, row.first_seen, row.last_slot, now) {
            Due::Wait(next) => Ok(Step::Next(next)),
            Due::Missed { latest, count } => {
                let message = format!(
                    "{count} slot(s) passed more than {} late, the latest {}; missed = \"skip\"",
                    format_grace(job.grace),
                    rfc3339(latest)
                );
                if store.record_unrun(agent, &job.name, latest, Status::Missed, &message, now)? {
                    tracing::info!(agent, job = job.name, "{message}");
                }
                Ok(Step::Next(None))
            }
            Due::Fire { slot, earlier, late } => {
                let message = if job.is_heartbeat() {
                    match self.checklist(agent, job, slot) {
                        Some(checklist) => format!(
                            "[heartbeat, due {}]\nGo through your checklist below (your {}) and act on what needs \
                             it. If nothing needs attention, answer only {}.\n\n{checklist}",
                            rfc3339(slot),
                            jobs::HEARTBEAT_FILE,
                            jobs::HEARTBEAT_OK
                        ),
                        None => {
                            store.advance(agent, &job.name, slot)?;
                            return Ok(Step::Next(None));
                        }
                    }
                } else {
                    scheduled_message(job, slot)
                };
                if store.running(agent, &job.name)? {
                    let message = "not started: the job's previous run is still running";
                    store.record_unrun(agent, &job.name, slot, Status::Skipped, message, now)?;
                    return Ok(Step::Next(None));
                }
                let mut why = Vec::new();
                if earlier > 0 {
                    why.push(format!("{earlier} earlier slot(s) folded into this run"));
                }
                if late {
                    why.push("run late: missed = \"once\"".to_owned());
                }
                let note = why.join("; ");
                Ok(Step::Fire(Box::new(Firing { agent: agent.to_owned(), job: job.clone(), row, slot, message, note })))
            }
        }
    }

    /// The heartbeat's checklist when its slot is in its active hours and
    /// the checklist has something to do; else `None`, and no model call.
    fn checklist(&self, agent: &str, job: &Job, slot: Timestamp) -> Option<String> {
        if job.active_hours.as_ref().is_some_and(|hours| !hours.contain(slot)) {
            return None;
        }
        let path = self.config.clawfs_root.join("agents").join(agent).join(jobs::HEARTBEAT_FILE);
        let checklist = std::fs::read_to_string(path).unwrap_or_default();
        if checklist.len() > jobs::MAX_PROMPT {
            tracing::warn!(
                agent,
                bytes = checklist.len(),
                "heartbeat: {} is over {} bytes, no turn",
                jobs::HEARTBEAT_FILE,
                jobs::MAX_PROMPT
            );
            return None;
        }
        if jobs::effectively_empty(&checklist) {
            tracing::info!(agent, "heartbeat: nothing on the checklist, no turn");
            return None;
        }
        Some(checklist)
    }

    /// Starts the turn of a claimed run and follows it, in a task of its own.
    fn start_run(
        self: &Arc<Self>,
        agent: &str,
        job: &Job,
        row: &JobRow,
        fire_id: String,
        message: String,
        note: String,
    ) {
        let shared = Arc::clone(self);
        let params = ChatSend {
            agent: agent.to_owned(),
            session_id: job.session.clone().or_else(|| row.session_id.clone()),
            message,
            hint: None,
        };
        tracing::info!(agent, job = job.name, fire_id, "firing");
        tokio::spawn(async move {
            let started = match connect(ComponentId::AgentLoop).await {
                Ok(client) => {
                    let answer = agent_loop::Client::new(&client).chat_send(&params).await;
                    client.goodbye().await;
                    answer.map_err(|e| format!("agent-loop did not start the turn: {e}"))
                }
                Err(e) => Err(e),
            };
            match started {
                Ok(turn) => {
                    if let Err(e) = lock(&shared.store).started_turn(&fire_id, &turn.turn_id, &turn.session_id) {
                        tracing::error!(fire_id, "recording the turn: {e}");
                    }
                    shared.follow(fire_id, turn.turn_id, note).await;
                }
                Err(message) => shared.finish(&fire_id, Status::Failed, &message, None).await,
            }
        });
    }

    /// Follows a run's turn until it ends, then finishes the run.
    async fn follow(&self, fire_id: String, turn_id: String, note: String) {
        let outcome = loop {
            tokio::time::sleep(FOLLOW_EVERY).await;
            let client = match connect(ComponentId::AgentLoop).await {
                Ok(client) => client,
                Err(e) => {
                    tracing::warn!(fire_id, "{e}; trying again");
                    continue;
                }
            };
            let answer = agent_loop::Client::new(&client).turn_result(&TurnRef { turn_id: turn_id.clone() }).await;
            client.goodbye().await;
            match answer {
                Ok(outcome) if outcome.status == TurnStatus::Running => continue,
                Ok(outcome) => break Ok(outcome),
                Err(e) => break Err(format!("agent-loop no longer knows turn {turn_id}: {e}")),
            }
        };
        let (status, message, answer) = match outcome {
            Ok(outcome) if outcome.status == TurnStatus::Done => {
                (Status::Ok, clip(&outcome.answer, ANSWER_KEPT), Some(outcome.answer))
            }
            Ok(outcome) => {
                let status = if outcome.status == TurnStatus::Waiting { Status::Waiting } else { Status::Failed };
                (status, outcome.message.unwrap_or_default(), None)
            }
            Err(message) => (Status::Failed, message, None),
        };
        let message = if note.is_empty() { message } else { format!("{message} ({note})") };
        self.finish(&fire_id, status, &message, answer).await;
    }

    /// Ends a run: its row, its line in the agent's daily log, its event,
    /// and the notification its job asks for. `answer`: the turn's whole
    /// answer, when it answered.
    async fn finish(&self, fire_id: &str, status: Status, message: &str, answer: Option<String>) {
        let now = Timestamp::now();
        let run = {
            let store = lock(&self.store);
            if let Err(e) = store.end(fire_id, status, message, now) {
                tracing::error!(fire_id, "recording the end of the run: {e}");
            }
            store.run(fire_id)
        };
        let run = match run {
            Ok(Some(run)) => shown_run(run),
            Ok(None) => return tracing::error!(fire_id, "the run is gone"),
            Err(e) => return tracing::error!(fire_id, "reading the run: {e}"),
        };
        tracing::info!(agent = run.agent, job = run.job, fire_id, status = run.status, "run ended");
        let utc = now.to_zoned(TimeZone::UTC);
        let line = format!(
            "- {} job {}: {} (fire {}): {}\n",
            utc.strftime("%H:%M:%S"),
            run.job,
            run.status,
            &run.fire_id[..12],
            clip(message, ANSWER_KEPT)
        );
        let log = WriteFile {
            path: format!("logs/{}.md", utc.strftime("%Y-%m-%d")),
            agent: Some(run.agent.clone()),
            content: Some(line),
            append: true,
            create_dirs: true,
            ..WriteFile::default()
        };
        match connect(ComponentId::FsEngine).await {
            Ok(client) => {
                if let Err(e) = fs_engine::Client::new(&client).write_file(&log).await {
                    tracing::warn!(agent = run.agent, "the daily log line: {e}");
                }
                client.goodbye().await;
            }
            Err(e) => tracing::warn!(agent = run.agent, "the daily log line: {e}"),
        }
        let event = if status == Status::Ok { scheduler::TASK_COMPLETED } else { scheduler::TASK_FAILED };
        self.publish(event, &run);
        let job = lock(&self.files).get(&run.agent).and_then(|f| f.jobs.iter().find(|j| j.name == run.job).cloned());
        let Some(job) = job else { return };
        let ok = status == Status::Ok;
        let all_well = job.is_heartbeat()
            && answer.as_deref().is_some_and(|a| a.trim_start().starts_with(jobs::HEARTBEAT_OK) && a.len() <= 300);
        if !job.notify.after(ok) || all_well {
            return;
        }
        let level = match status {
            Status::Ok => "info",
            Status::Waiting => "warning",
            _ => "error",
        };
        let notification = store::Notification {
            id: 0,
            agent: run.agent.clone(),
            source: if job.is_heartbeat() { jobs::HEARTBEAT.to_owned() } else { format!("job:{}", run.job) },
            level: level.to_owned(),
            title: if job.is_heartbeat() {
                format!("heartbeat of {}: {}", run.agent, run.status)
            } else {
                format!("job {} of {}: {}", run.job, run.agent, run.status)
            },
            body: clip_bytes(answer.as_deref().unwrap_or(message), scheduler::MAX_BODY),
            fire_id: Some(run.fire_id.clone()),
            created: now,
            read: None,
        };
        self.raise(&notification);
    }

    /// Stores and publishes a notification.
    fn raise(&self, notification: &store::Notification) -> Option<Notification> {
        let stored = lock(&self.store).notify(notification, Timestamp::now());
        match stored {
            Ok(stored) => {
                let shown = shown_notification(stored);
                self.publish(scheduler::NOTIFICATION, &shown);
                Some(shown)
            }
            Err(e) => {
                tracing::error!(agent = notification.agent, "storing a notification: {e}");
                None
            }
        }
    }

    fn publish(&self, event: &str, data: &impl serde::Serialize) {
        match serde_json::to_value(data) {
            Ok(serde_json::Value::Object(data)) => self.runtime.publish(event, data),
            _ => tracing::error!(event, "the event's data does not encode"),
        }
    }

    /// At start: runs a stop cut off. One that had started its turn is
    /// followed again; one that had not is ended, never run again.
    fn resume_unfinished(self: &Arc<Self>) {
        let unfinished = match lock(&self.store).unfinished() {
            Ok(runs) => runs,
            Err(e) => return tracing::error!("reading unfinished runs: {e}"),
        };
        for run in unfinished {
            let shared = Arc::clone(self);
            tokio::spawn(async move {
                match run.turn_id {
                    Some(turn_id) => shared.follow(run.fire_id, turn_id, String::new()).await,
                    None => {
                        let message = "the scheduler stopped before the turn started; the slot is not run again";
                        shared.finish(&run.fire_id, Status::Failed, message, None).await;
                    }
                }
            });
        }
    }

    /// Waits for systemd-timesyncd's word, until `clock_wait_seconds` after
    /// the box booted (not after this start: a restart later in the boot
    /// does not wait again).
    async fn wait_for_clock(&self) {
        let wait = Duration::from_secs(self.config.clock_wait_seconds);
        while !Path::new(CLOCK_SYNCHRONISED).exists() {
            match since_boot() {
                Some(up) if up < wait => tokio::time::sleep(Duration::from_secs(1)).await,
                _ => {
                    tracing::warn!(
                        "the clock is not synchronised {} s after boot; firing jobs by it anyway",
                        self.config.clock_wait_seconds
                    );
                    break;
                }
            }
        }
        self.clock_trusted.store(true, Ordering::SeqCst);
    }

    /// A job of the files, with its row.
    fn find(&self, r: &JobRef) -> Result<(Job, JobRow), MethodError> {
        let not_found = || {
            MethodError::new(
                ErrorCode::Enoent,
                format!("agent `{}` has no job `{}` in {}", r.agent, r.job, jobs::JOBS_FILE),
            )
        };
        let job = lock(&self.files)
            .get(&r.agent)
            .and_then(|file| file.jobs.iter().find(|job| job.name == r.job).cloned())
            .ok_or_else(not_found)?;
        let row = lock(&self.store).job(&r.agent, &r.job).map_err(eio)?.ok_or_else(not_found)?;
        Ok((job, row))
    }

    fn shown_job(&self, job: &Job, row: JobRow, now: Timestamp) -> Result<ScheduledJob, MethodError> {
        let next_fire = match (row.paused, slots::decide(job, row.first_seen, row.last_slot, now)) {
            (true, _) => None,
            (false, Due::Wait(next)) => next,
            (false, Due::Fire { slot, .. }) => Some(slot),
            (false, Due::Missed { .. }) => slots::next_after(&job.schedule, row.first_seen, now),
        };
        let last_run = lock(&self.store).last_run(&row.agent, &row.name).map_err(eio)?.map(shown_run);
        Ok(ScheduledJob {
            agent: row.agent,
            job: row.name,
            kind: job.schedule.kind().to_owned(),
            schedule: job.schedule.to_string(),
            missed: job.missed.as_str().to_owned(),
            next_fire: next_fire.map(rfc3339),
            paused: row.paused,
            session_id: job.session.clone().or(row.session_id),
            last_run,
        })
    }
}

/// How long the box has been up (`/proc/uptime`).
fn since_boot() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/uptime").ok()?;
    Duration::try_from_secs_f64(text.split_whitespace().next()?.parse().ok()?).ok()
}

fn format_grace(grace: Duration) -> String {
    format!("{:#}", jiff::SignedDuration::try_from(grace).unwrap_or(jiff::SignedDuration::MAX))
}

async fn connect(peer: ComponentId) -> Result<IpcClient, String> {
    IpcClient::connect(peer, ClientOptions::new(ComponentId::Scheduler.into()))
        .await
        .map(|(client, _events)| client)
        .map_err(|e| format!("connecting to {peer}: {e}"))
}

struct Daemon {
    shared: Arc<Shared>,
}

impl scheduler::Service for Daemon {
    async fn schedule_list(&self, _call: &Call, p: ScheduleQuery) -> Result<Schedules, MethodError> {
        let shared = &self.shared;
        let now = Timestamp::now();
        let (pairs, file_errors) = {
            let files = lock(&shared.files);
            let wanted = |agent: &String| p.agent.as_ref().is_none_or(|only| only == agent);
            let pairs: Vec<(String, Job)> = files
                .iter()
                .filter(|(agent, _)| wanted(agent))
                .flat_map(|(agent, file)| file.jobs.iter().map(move |job| (agent.clone(), job.clone())))
                .collect();
            let errors = files
                .iter()
                .filter(|(agent, _)| wanted(agent))
                .filter_map(|(agent, file)| {
                    file.error.as_ref().map(|e| JobsFileError {
                        agent: agent.clone(),
                        line: e.line.map(|l| l as u64),
                        reason: e.reason.clone(),
                    })
                })
                .collect();
            (pairs, errors)
        };
        let mut jobs = Vec::new();
        for (agent, job) in pairs {
            let row = lock(&shared.store).job(&agent, &job.name).map_err(eio)?;
            if let Some(row) = row {
                jobs.push(shared.shown_job(&job, row, now)?);
            }
        }
        Ok(Schedules { waiting_for_clock: !shared.clock_trusted.load(Ordering::SeqCst), jobs, file_errors })
    }

    async fn schedule_show(&self, _call: &Call, p: JobRef) -> Result<JobDetails, MethodError> {
        let (job, row) = self.shared.find(&p)?;
        let runs = lock(&self.shared.store).runs(&p.agent, &p.job, SHOWN_RUNS).map_err(eio)?;
        Ok(JobDetails {
            prompt: job.prompt.clone(),
            job: self.shared.shown_job(&job, row, Timestamp::now())?,
            runs: runs.into_iter().map(shown_run).collect(),
        })
    }

    async fn schedule_run(&self, _call: &Call, p: JobRef) -> Result<JobRun, MethodError> {
        let (job, row) = self.shared.find(&p)?;
        let now = Timestamp::now();
        let fire_id = {
            let mut store = lock(&self.shared.store);
            if store.running(&p.agent, &p.job).map_err(eio)? {
                return Err(MethodError::new(
                    ErrorCode::Eagain,
                    format!("job `{}`'s previous run is still running", p.job),
                ));
            }
            store.claim(&p.agent, &p.job, now, true, now).map_err(eio)?
        };
        let fire_id =
            fire_id.ok_or_else(|| MethodError::new(ErrorCode::Eagain, "fired by hand this millisecond already"))?;
        let message = scheduled_message(&job, now);
        self.shared.start_run(&p.agent, &job, &row, fire_id.clone(), message, "run by hand".to_owned());
        let run = lock(&self.shared.store).run(&fire_id).map_err(eio)?;
        run.map(shown_run).ok_or_else(|| eio("the run just claimed is gone"))
    }

    async fn schedule_pause(&self, _call: &Call, p: JobRef) -> Result<ScheduledJob, MethodError> {
        self.set_paused(p, true)
    }

    async fn schedule_resume(&self, _call: &Call, p: JobRef) -> Result<ScheduledJob, MethodError> {
        self.set_paused(p, false)
    }

    async fn notify(&self, _call: &Call, p: NewNotification) -> Result<Notification, MethodError> {
        let bad = |reason: String| MethodError::bad_params(format!("notify: {reason}"));
        let level = p.level.unwrap_or_else(|| "info".to_owned());
        if !["info", "warning", "error"].contains(&level.as_str()) {
            return Err(bad(format!("`level` is `{level}`: info, warning or error")));
        }
        if p.title.trim().is_empty() || p.title.chars().count() > scheduler::MAX_TITLE {
            return Err(bad(format!("`title` must be 1 to {} characters", scheduler::MAX_TITLE)));
        }
        if p.body.len() > scheduler::MAX_BODY {
            return Err(bad(format!("`body` is {} bytes; at most {}", p.body.len(), scheduler::MAX_BODY)));
        }
        let agent_dir = self.shared.config.clawfs_root.join("agents").join(&p.agent);
        if p.agent.starts_with('.') || p.agent.contains('/') || !agent_dir.is_dir() {
            return Err(MethodError::new(ErrorCode::Enoent, format!("there is no agent `{}`", p.agent)));
        }
        let notification = store::Notification {
            id: 0,
            agent: p.agent,
            source: "agent".to_owned(),
            level,
            title: p.title,
            body: p.body,
            fire_id: None,
            created: Timestamp::now(),
            read: None,
        };
        self.shared.raise(&notification).ok_or_else(|| eio("the notification could not be stored"))
    }

    async fn notification_list(&self, _call: &Call, p: NotificationQuery) -> Result<Notifications, MethodError> {
        let found = lock(&self.shared.store).notifications(p.agent.as_deref(), !p.all, SHOWN_NOTIFICATIONS);
        Ok(Notifications { notifications: found.map_err(eio)?.into_iter().map(shown_notification).collect() })
    }

    async fn notification_read(&self, _call: &Call, p: NotificationRef) -> Result<Notification, MethodError> {
        let store = lock(&self.shared.store);
        if !store.mark_read(p.id, Timestamp::now()).map_err(eio)? {
            return Err(MethodError::new(ErrorCode::Enoent, format!("there is no notification {}", p.id)));
        }
        store.notification(p.id).map_err(eio)?.map(shown_notification).ok_or_else(|| eio("the notification is gone"))
    }
}

impl Daemon {
    fn set_paused(&self, p: JobRef, paused: bool) -> Result<ScheduledJob, MethodError> {
        let (job, _) = self.shared.find(&p)?;
        let now = Timestamp::now();
        lock(&self.shared.store).set_paused(&p.agent, &p.job, paused, now).map_err(eio)?;
        tracing::info!(agent = p.agent, job = p.job, paused, "the operator paused or resumed a job");
        self.shared.wake.notify_one();
        let (_, row) = self.shared.find(&p)?;
        self.shared.shown_job(&job, row, now)
    }
}

impl Component for Daemon {
    async fn handle_request(&self, call: &Call, request: Request) -> Option<Result<Object, MethodError>> {
        scheduler::dispatch(self, call, request).await
    }
}

/// The scheduler's loop: the clock first, then the runs a stop cut off,
/// then a pass at each next slot, after each change of a jobs file, and
/// at least every `pass_seconds`.
async fn run(shared: Arc<Shared>) {
    shared.wait_for_clock().await;
    shared.resume_unfinished();
    let longest = Duration::from_secs(shared.config.pass_seconds.max(1));
    loop {
        let next = shared.pass();
        let wait = next
            .map(|at| at.duration_since(Timestamp::now()))
            .and_then(|d| Duration::try_from(d).ok())
            .map_or(longest, |d| d.min(longest));
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shared.wake.notified() => {
                // A file is written in more than one event: the pass reads
                // it once they have settled.
                tokio::time::sleep(SETTLE).await;
            }
        }
    }
}

fn build(runtime: &Runtime) -> Result<Daemon, String> {
    let config: Config =
        runtime.config().component.clone().try_into().map_err(|e| format!("[component] settings: {e}"))?;
    let store = Store::open(&config.database).map_err(|e| format!("{}: {e}", config.database.display()))?;
    let wake = Arc::new(tokio::sync::Notify::new());
    let watch = match Watch::start(&config.clawfs_root.join("agents"), Arc::clone(&wake)) {
        Ok(watch) => Some(watch),
        Err(e) => {
            tracing::warn!("inotify: {e}; jobs files are read every {} s", config.pass_seconds);
            None
        }
    };
    let shared = Arc::new(Shared {
        runtime: runtime.clone(),
        config,
        local: TimeZone::try_system().unwrap_or(TimeZone::UTC),
        store: Mutex::new(store),
        files: Mutex::new(BTreeMap::new()),
        clock_trusted: AtomicBool::new(false),
        wake,
        watch: Mutex::new(watch),
    });
    // The files are read at once, so the methods show the jobs while the
    // clock is awaited.
    shared.read_files(Timestamp::now());
    tokio::spawn(run(Arc::clone(&shared)));
    Ok(Daemon { shared })
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::Scheduler, env!("CARGO_PKG_VERSION"), build)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `wake` is notified within `within`.
    async fn woken(wake: &tokio::sync::Notify, within: Duration) -> bool {
        tokio::time::timeout(within, wake.notified()).await.is_ok()
    }

    /// Whether `wake` is notified within a second; then lets the rest of
    /// the same change's events go by.
    async fn woken_once(wake: &tokio::sync::Notify) -> bool {
        let first = woken(wake, Duration::from_secs(1)).await;
        while woken(wake, Duration::from_millis(200)).await {}
        first
    }

    #[tokio::test]
    async fn a_jobs_file_written_wakes_the_loop_also_in_a_directory_made_again_and_other_files_do_not() {
        let root = tempfile::tempdir().unwrap();
        let agents = root.path().join("agents");
        let agent = ["a".to_owned()];
        std::fs::create_dir_all(agents.join("a")).unwrap();
        let wake = Arc::new(tokio::sync::Notify::new());
        let mut watch = Watch::start(&agents, Arc::clone(&wake)).unwrap();
        watch.follow(&agents, &agent);
        std::fs::write(agents.join("a/memory.md"), "an agent's turn writes here").unwrap();
        assert!(!woken_once(&wake).await, "another file of the agent's directory woke the loop");
        // The directory of the jobs made: its pass watches it.
        std::fs::create_dir(agents.join("a/cron")).unwrap();
        assert!(woken_once(&wake).await, "cron/ made");
        watch.follow(&agents, &agent);
        std::fs::write(agents.join("a/cron/jobs.toml"), "").unwrap();
        assert!(woken_once(&wake).await, "cron/jobs.toml written");
        // Removed and made again under its name, between two passes.
        std::fs::remove_dir_all(agents.join("a")).unwrap();
        std::fs::create_dir_all(agents.join("a/cron")).unwrap();
        assert!(woken_once(&wake).await, "the agent's directory removed and made again");
        watch.follow(&agents, &agent);
        std::fs::write(agents.join("a/cron/jobs.toml"), "").unwrap();
        assert!(woken_once(&wake).await, "cron/jobs.toml written in the directory made again");
    }
}

//! scheduler: the agents' jobs (`specs/scheduler/README.md`). Jobs are
//! written in each agent's `cron/jobs.toml`; these methods show them, their
//! runs and the files' errors, and pause, resume or fire one by hand.

use serde::{Deserialize, Serialize};

service! {
    component: Some(clawos_ipc::ComponentId::Scheduler);
    /// Every job (or one agent's) with its next fire and last run, and each
    /// jobs file that does not parse, with its line.
    fn schedule_list(ScheduleQuery) -> Schedules { timeout_ms: 5000, errors: [Eio] }
    /// One job with its prompt and its last runs, newest first.
    fn schedule_show(JobRef) -> JobDetails { timeout_ms: 5000, errors: [Enoent, Eio] }
    /// Fires a job now, as a run of its own (`manual`), whatever its schedule.
    fn schedule_run(JobRef) -> JobRun { timeout_ms: 5000, errors: [Enoent, Eagain, Eio] }
    /// Pauses a job: nothing fires until it is resumed.
    fn schedule_pause(JobRef) -> ScheduledJob { timeout_ms: 5000, errors: [Enoent, Eio] }
    /// Resumes a paused job from now: the slots it missed are not replayed.
    fn schedule_resume(JobRef) -> ScheduledJob { timeout_ms: 5000, errors: [Enoent, Eio] }
    /// Raises a notification about an agent (agent-loop for the agent's
    /// `notify` tool); stored and published as [`NOTIFICATION`].
    fn notify(NewNotification) -> Notification { timeout_ms: 5000, errors: [Enoent, Eio] }
    /// Notifications, newest first (unread ones unless `all`).
    fn notification_list(NotificationQuery) -> Notifications { timeout_ms: 5000, errors: [Eio] }
    /// Marks a notification read.
    fn notification_read(NotificationRef) -> Notification { timeout_ms: 5000, errors: [Enoent, Eio] }
}

/// Published when a notification is raised: a [`Notification`].
pub const NOTIFICATION: &str = "notification";
/// The longest notification title, characters.
pub const MAX_TITLE: usize = 200;
/// The longest notification body, bytes.
pub const MAX_BODY: usize = 4096;

/// Published when a run's turn answered: a [`JobRun`].
pub const TASK_COMPLETED: &str = "task_completed";
/// Published when a run failed, or its turn did (a limit, a failure, a
/// halt), or waits for an approval: a [`JobRun`].
pub const TASK_FAILED: &str = "task_failed";

/// `schedule_list` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleQuery {
    /// Only this agent's jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// Params naming one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobRef {
    /// The agent.
    pub agent: String,
    /// The job's name in the agent's `cron/jobs.toml`.
    pub job: String,
}

/// `schedule_list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Schedules {
    /// Nothing fires yet: the clock is not synchronised and the wait for it
    /// has not run out (`specs/scheduler/README.md`, "A clock that cannot be
    /// trusted yet").
    pub waiting_for_clock: bool,
    /// The jobs, by agent and name.
    pub jobs: Vec<ScheduledJob>,
    /// Jobs files that do not parse; the jobs they held before keep running.
    pub file_errors: Vec<JobsFileError>,
}

/// One job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScheduledJob {
    /// Its agent.
    pub agent: String,
    /// Its name.
    pub job: String,
    /// `cron`, `at`, `every` or `delay`.
    pub kind: String,
    /// Its schedule as shown (`cron 0 9 * * * (Europe/London)`, `every 15m`).
    pub schedule: String,
    /// `skip` or `once`: what slots missed beyond their grace do.
    pub missed: String,
    /// Its next slot (RFC 3339), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire: Option<String>,
    /// Paused by the operator.
    pub paused: bool,
    /// Its session, once its first run made one (or the one its file names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Its last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<JobRun>,
}

/// `schedule_show` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobDetails {
    /// The job.
    pub job: ScheduledJob,
    /// The message its runs send the agent.
    pub prompt: String,
    /// Its last runs, newest first (at most 50).
    pub runs: Vec<JobRun>,
}

/// One run of a job, and the data of [`TASK_COMPLETED`] and [`TASK_FAILED`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobRun {
    /// Its agent.
    pub agent: String,
    /// Its job.
    pub job: String,
    /// The run's fire ID: one per job and slot.
    pub fire_id: String,
    /// The slot it ran, or the latest it missed (RFC 3339).
    pub slot: String,
    /// Fired by hand.
    pub manual: bool,
    /// When it was claimed (RFC 3339).
    pub started_at: String,
    /// When it ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// `started`, `ok`, `failed`, `waiting`, `skipped` or `missed`.
    pub status: String,
    /// Its turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Its turn's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// What happened: the answer's start, the reason it failed, the slots missed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A jobs file that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobsFileError {
    /// Its agent.
    pub agent: String,
    /// The line of the error, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// What is wrong.
    pub reason: String,
}

/// `notify` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewNotification {
    /// The agent it is about.
    pub agent: String,
    /// One line, at most [`MAX_TITLE`] characters.
    pub title: String,
    /// The text, at most [`MAX_BODY`] bytes.
    #[serde(default)]
    pub body: String,
    /// `info` (the default), `warning` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
}

/// `notification_list` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotificationQuery {
    /// Only this agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Read ones too.
    #[serde(default)]
    pub all: bool,
}

/// Params naming one notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotificationRef {
    /// Its number.
    pub id: i64,
}

/// `notification_list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Notifications {
    /// Newest first, at most 200.
    pub notifications: Vec<Notification>,
}

/// One notification, and the data of [`NOTIFICATION`]: a stable shape the
/// console and the channels deliver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Notification {
    /// Its number, rising.
    pub id: i64,
    /// The agent it is about.
    pub agent: String,
    /// What raised it: `job:<name>`, `heartbeat`, or `agent` (its `notify` tool).
    pub source: String,
    /// `info`, `warning` or `error`.
    pub level: String,
    /// One line.
    pub title: String,
    /// The text (written by a model or a job's run: shown escaped).
    pub body: String,
    /// The run that raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fire_id: Option<String>,
    /// When it was raised (RFC 3339).
    pub created_at: String,
    /// When it was marked read (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at: Option<String>,
}

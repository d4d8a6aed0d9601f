//! The pages that show what the box holds (specs/console/README.md):
//! the installed tools with their grants, the vault's secrets by name and
//! version, the agents' schedules with their next fire times and last
//! runs, and the notifications. Each is one call to the component that
//! owns it, shown as it answers.
//!
//! Owns: these pages. Must not own: a secret's value (no method the
//! console may call returns one: `secret_get` is not in its grant).

use askama::Template;
use axum::http::StatusCode;
use axum::response::Response;

use crate::calls;
use crate::pages::{call_failed, render, wire};

/// A tool's row.
struct ToolRow {
    name: String,
    version: String,
    source: String,
    description: String,
    grants: String,
    limits: String,
}

#[derive(Template)]
#[template(path = "tools.html")]
struct Tools {
    tools: Vec<ToolRow>,
}

/// `GET /tools`.
pub async fn tools() -> Response {
    let list = match calls::tools().await {
        Ok(list) => list,
        Err(error) => return call_failed("Tools", &error),
    };
    let tools = list
        .tools
        .into_iter()
        .map(|tool| ToolRow {
            source: wire(&tool.source),
            description: tool.description.unwrap_or_default(),
            grants: if tool.capabilities.is_empty() { "none".to_owned() } else { tool.capabilities.join(", ") },
            limits: format!(
                "{} MB, {} % of a core, {} s a call",
                tool.memory_limit_mb, tool.cpu_quota_percent, tool.timeout_seconds
            ),
            name: tool.tool_name,
            version: tool.version,
        })
        .collect();
    render(StatusCode::OK, &Tools { tools })
}

/// A secret's row: never its value.
struct SecretRow {
    name: String,
    version: u32,
    updated: String,
    generation: u32,
}

#[derive(Template)]
#[template(path = "secrets.html")]
struct Secrets {
    secrets: Vec<SecretRow>,
}

/// `GET /secrets`.
pub async fn secrets() -> Response {
    let list = match calls::secrets().await {
        Ok(list) => list,
        Err(error) => return call_failed("Secrets", &error),
    };
    let secrets = list
        .secrets
        .into_iter()
        .map(|s| SecretRow {
            name: s.secret_id,
            version: s.version,
            updated: s.updated_at,
            generation: s.key_generation,
        })
        .collect();
    render(StatusCode::OK, &Secrets { secrets })
}

/// A job's row.
struct JobRow {
    agent: String,
    job: String,
    schedule: String,
    next: String,
    paused: bool,
    last: String,
}

#[derive(Template)]
#[template(path = "schedules.html")]
struct SchedulesPage {
    waiting_for_clock: bool,
    jobs: Vec<JobRow>,
    errors: Vec<String>,
}

/// `GET /schedules`.
pub async fn schedules() -> Response {
    let list = match calls::schedules().await {
        Ok(list) => list,
        Err(error) => return call_failed("Schedules", &error),
    };
    let jobs = list
        .jobs
        .into_iter()
        .map(|job| JobRow {
            last: job
                .last_run
                .map(|run| {
                    let mut last = format!("{} at {}", run.status, run.started_at);
                    if let Some(message) = run.message {
                        last.push_str(": ");
                        last.push_str(&message);
                    }
                    last
                })
                .unwrap_or_else(|| "never ran".to_owned()),
            next: job.next_fire.unwrap_or_else(|| "none".to_owned()),
            paused: job.paused,
            schedule: job.schedule,
            agent: job.agent,
            job: job.job,
        })
        .collect();
    let errors = list
        .file_errors
        .into_iter()
        .map(|e| match e.line {
            Some(line) => format!("{}'s cron/jobs.toml, line {line}: {}", e.agent, e.reason),
            None => format!("{}'s cron/jobs.toml: {}", e.agent, e.reason),
        })
        .collect();
    render(StatusCode::OK, &SchedulesPage { waiting_for_clock: list.waiting_for_clock, jobs, errors })
}

/// A notification, as the page lists it.
struct NotificationRow {
    agent: String,
    level: String,
    source: String,
    title: String,
    body: String,
    at: String,
    read: bool,
}

#[derive(Template)]
#[template(path = "notifications.html")]
struct NotificationsPage {
    notifications: Vec<NotificationRow>,
}

/// `GET /notifications`: read ones too, newest first.
pub async fn notifications() -> Response {
    let list = match calls::notifications().await {
        Ok(list) => list,
        Err(error) => return call_failed("Notifications", &error),
    };
    let notifications = list
        .notifications
        .into_iter()
        .map(|n| NotificationRow {
            read: n.read_at.is_some(),
            agent: n.agent,
            level: n.level,
            source: n.source,
            title: n.title,
            body: n.body,
            at: n.created_at,
        })
        .collect();
    render(StatusCode::OK, &NotificationsPage { notifications })
}

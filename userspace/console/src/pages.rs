//! The console's pages: askama templates (`templates/`), checked when the
//! crate compiles, filled by handlers. Every page extends `base.html`.
//!
//! Owns: what the operator sees and the forms they post. Must not own: who
//! may see it (`crate::guard`) or how tokens work (`crate::auth`).

use std::sync::Arc;
use std::time::Instant;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::header::{self, HeaderMap};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::calls::{self, CallFailed};
use crate::guard;
use crate::Console;

/// Renders `template` as `status`; a template that fails to render (a
/// bug: every value it reads is a plain field) is a 500 with no detail.
pub(crate) fn render(status: StatusCode, template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(error) => {
            tracing::error!("rendering a page: {error}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// A page that only says something: a refusal, a failure, a login hint.
#[derive(Template)]
#[template(path = "message.html")]
pub(crate) struct Message<'a> {
    pub(crate) title: &'a str,
    pub(crate) text: &'a str,
    pub(crate) show_login_help: bool,
}

/// The answer to a request without a live session: a page saying how to
/// log in, or a bare 401 for htmx's partial requests (`HX-Request`).
pub fn logged_out(partial: bool) -> Response {
    if partial {
        return (StatusCode::UNAUTHORIZED, "Your console session ended: log in again.\n").into_response();
    }
    let page = Message { title: "Log in", text: "This page needs a console session.", show_login_help: true };
    render(StatusCode::UNAUTHORIZED, &page)
}

/// The wire name of an enum the API serialises as a string (a state, a
/// health), as the page shows it.
pub(crate) fn wire(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        other => format!("{other:?}"),
    }
}

/// A call that failed, as the page that needed it: `502 Bad Gateway`, what
/// failed, and that nothing was changed.
pub(crate) fn call_failed(title: &str, error: &CallFailed) -> Response {
    tracing::warn!("{title}: {error}");
    let text = format!("{error}. Nothing was changed.");
    render(StatusCode::BAD_GATEWAY, &Message { title, text: &text, show_login_help: false })
}

/// A component's row on the overview.
struct ComponentRow {
    name: String,
    health: String,
    version: String,
    heartbeat: String,
    uptime: String,
}

#[derive(Template)]
#[template(path = "home.html")]
struct Home<'a> {
    box_name: &'a str,
    version: &'a str,
    components: Vec<ComponentRow>,
    error: Option<String>,
}

/// Seconds as the overview shows a duration: `42 s`, `7 min`, `3 h 5 min`.
fn duration(seconds: u64) -> String {
    match seconds {
        0..=119 => format!("{seconds} s"),
        120..=7199 => format!("{} min", seconds / 60),
        _ => format!("{} h {} min", seconds / 3600, seconds / 60 % 60),
    }
}

/// `GET /`: the box at a glance, with each component's health. When
/// observability cannot be asked, the page says so and shows the rest.
pub async fn home(State(console): State<Arc<Console>>) -> Response {
    let (components, error) = match calls::components().await {
        Ok(statuses) => (
            statuses
                .components
                .into_iter()
                .map(|row| ComponentRow {
                    name: row.component.to_string(),
                    health: wire(&row.health),
                    version: row.component_version.unwrap_or_default(),
                    heartbeat: row.last_heartbeat_age_ms.map(|ms| duration(ms / 1000) + " ago").unwrap_or_default(),
                    uptime: row.uptime_ns.map(|ns| duration(ns / 1_000_000_000)).unwrap_or_default(),
                })
                .collect(),
            None,
        ),
        Err(error) => {
            tracing::warn!("the overview's component health: {error}");
            (Vec::new(), Some(error.to_string()))
        }
    };
    render(StatusCode::OK, &Home { box_name: &console.box_name, version: &console.version, components, error })
}

/// An agent's row on the agents page.
struct AgentRow {
    name: String,
    state: String,
    /// Whether its button resumes it (it is paused or stopped) or pauses it.
    resumes: bool,
    error: String,
    model: String,
    today: String,
    month: String,
    limits: String,
    autonomy: String,
    sessions: u64,
}

#[derive(Template)]
#[template(path = "agents.html")]
struct Agents {
    agents: Vec<AgentRow>,
}

/// Dollars spent against an optional limit: `$0.0123 of $1.00`.
fn spend(spend: &clawos_api::agent_loop::Spend) -> String {
    match spend.limit_usd {
        Some(limit) => format!("${:.4} of ${limit:.2}", spend.spent_usd),
        None => format!("${:.4}", spend.spent_usd),
    }
}

/// `GET /agents`: every agent with its state, model, spend, limits, and a
/// button to pause or resume it.
pub async fn agents(State(_): State<Arc<Console>>) -> Response {
    let list = match calls::agents().await {
        Ok(list) => list,
        Err(error) => return call_failed("Agents", &error),
    };
    let mut agents = Vec::with_capacity(list.agents.len());
    for info in list.agents {
        use clawos_api::agent_loop::AgentState;
        // The details of one that cannot be read (removed since) leave its
        // row with what the list said.
        let details = calls::agent(&info.agent).await.ok();
        agents.push(AgentRow {
            state: wire(&info.state),
            resumes: matches!(info.state, AgentState::Paused | AgentState::Stopped),
            error: info.error.clone().unwrap_or_default(),
            model: info.model.clone().unwrap_or_default(),
            today: details.as_ref().map(|d| spend(&d.today)).unwrap_or_default(),
            month: details.as_ref().map(|d| spend(&d.month)).unwrap_or_default(),
            limits: details.as_ref().map(|d| limits(&d.limits)).unwrap_or_default(),
            autonomy: details.as_ref().map(|d| limits(&d.autonomy)).unwrap_or_default(),
            sessions: details.as_ref().map_or(0, |d| d.sessions),
            name: info.agent,
        });
    }
    render(StatusCode::OK, &Agents { agents })
}

/// A table of an agent's config (`[limits]`, `[autonomy]`) as `key value` pairs.
fn limits(limits: &serde_json::Value) -> String {
    match limits {
        serde_json::Value::Object(map) => {
            map.iter().map(|(key, value)| format!("{key} {value}")).collect::<Vec<_>>().join(", ")
        }
        other => other.to_string(),
    }
}

/// `POST /agents/{agent}/pause` and `.../resume`: then back to the agents
/// page (303, so a reload does not post again); a refusal is its own page.
pub async fn set_paused(axum::extract::Path((agent, action)): axum::extract::Path<(String, String)>) -> Response {
    let pause = match action.as_str() {
        "pause" => true,
        "resume" => false,
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    match calls::set_paused(&agent, pause).await {
        Ok(_) => Redirect::to("/agents").into_response(),
        Err(error) => call_failed(if pause { "Pause" } else { "Resume" }, &error),
    }
}

/// `GET /login`'s query.
#[derive(Deserialize)]
pub struct LoginQuery {
    token: Option<String>,
}

/// `GET /login?token=`: redeems a login link for a session cookie and
/// goes to the overview; a bad link says so and how to get a new one.
pub async fn login(State(console): State<Arc<Console>>, Query(query): Query<LoginQuery>) -> Response {
    let redeemed = query.token.as_deref().map(|token| console.tokens.redeem_login(token, Instant::now()));
    match redeemed {
        Some(Ok(session)) => {
            ([(header::SET_COOKIE, guard::session_cookie(&session))], Redirect::to("/")).into_response()
        }
        Some(Err(error)) => {
            tracing::info!("a login link was refused: {error}");
            let page = Message { title: "Log in", text: "This login link is not valid.", show_login_help: true };
            render(StatusCode::FORBIDDEN, &page)
        }
        None => logged_out(false),
    }
}

/// `POST /logout`: ends the session here and in the browser.
pub async fn logout(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if let Some(session) = guard::session_of(&headers) {
        console.tokens.end_session(session);
    }
    let page = Message { title: "Logged out", text: "Your console session has ended.", show_login_help: true };
    ([(header::SET_COOKIE, guard::expired_cookie())], render(StatusCode::OK, &page)).into_response()
}

/// The vendored and own files of `static/`, in the binary.
const STATIC_FILES: [(&str, &str, &[u8]); 3] = [
    ("htmx.min.js", "text/javascript; charset=utf-8", include_bytes!("../static/htmx.min.js")),
    ("sse.min.js", "text/javascript; charset=utf-8", include_bytes!("../static/sse.min.js")),
    ("console.css", "text/css; charset=utf-8", include_bytes!("../static/console.css")),
];

/// `GET /static/{file}`.
pub async fn static_file(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    match STATIC_FILES.iter().find(|(name, _, _)| *name == file) {
        // The image's files change only with the image, and every page
        // load after an update revalidates (no `immutable`).
        Some((_, kind, bytes)) => {
            ([(header::CONTENT_TYPE, *kind), (header::CACHE_CONTROL, "no-cache")], *bytes).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::STATIC_FILES;

    /// The vendored scripts are the pinned releases (`static/README.md`).
    #[test]
    fn vendored_scripts_are_the_pinned_releases() {
        let pinned = [
            ("htmx.min.js", "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717"),
            ("sse.min.js", "98a46496de0c3605fbffdce9167ba427bdd9553184f83f149c261891a92c0136"),
        ];
        for (name, sha256) in pinned {
            let (_, _, bytes) = STATIC_FILES.iter().find(|(file, _, _)| *file == name).unwrap();
            let actual: String = Sha256::digest(bytes).iter().map(|byte| format!("{byte:02x}")).collect();
            assert_eq!(actual, sha256, "{name}");
        }
    }
}

//! The chat and approvals pages (specs/console/README.md, "Chat",
//! "Approvals"): a session's transcript, a message that starts a turn, the
//! turn's answer streamed as it comes (htmx's SSE extension; without
//! JavaScript the page reloads itself until the turn ends), cancelling it,
//! and the approvals a turn waits on, whose answer continues it here.
//!
//! Owns: these pages and the turn's event stream. Must not own: following
//! a turn (`crate::turns`) or the checks every request passed (`guard`).

use std::convert::Infallible;
use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::header::HeaderMap;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use clawos_api::agent_loop::{ChatSend, SessionRef, StepKind, TranscriptEntry, TurnOutcome, TurnStatus, TurnStep};
use serde::Deserialize;

use crate::calls::{self, CallFailed};
use crate::diff;
use crate::pages::{call_failed, render, wire};
use crate::turns::{Part, Turn};
use crate::Console;

/// Whether the request is htmx's (it wants a fragment, not a page).
fn partial(headers: &HeaderMap) -> bool {
    headers.contains_key("hx-request")
}

/// A tool call of an assistant message, as a card.
struct Call {
    name: String,
    arguments: String,
}

/// One message of the transcript.
struct Entry {
    role: String,
    content: String,
    calls: Vec<Call>,
    at: String,
}

impl From<TranscriptEntry> for Entry {
    fn from(entry: TranscriptEntry) -> Self {
        let calls = entry
            .tool_calls
            .iter()
            .map(|call| Call {
                name: call["name"].as_str().unwrap_or("?").to_owned(),
                arguments: serde_json::to_string_pretty(&call["arguments"]).unwrap_or_default(),
            })
            .collect();
        Entry { role: entry.role, content: entry.content, calls, at: entry.at }
    }
}

/// How a turn ended, as the page says it.
fn outcome_line(outcome: &TurnOutcome) -> String {
    let how = match outcome.status {
        TurnStatus::Done => "Done".to_owned(),
        status => wire(&status),
    };
    let mut line = format!(
        "{how}: {} steps, {} tool calls, {} tokens in, {} out, ${:.4}",
        outcome.steps, outcome.tool_calls, outcome.input_tokens, outcome.output_tokens, outcome.cost_usd
    );
    if let Some(message) = &outcome.message {
        line.push_str(". ");
        line.push_str(message);
    }
    line
}

const LOST: &str = "agent-loop closed the connection before the turn ended; the transcript has the rest";

/// A step as the page lists it; a think step's start is not worth a line.
fn step_line(step: &TurnStep) -> Option<String> {
    let tool = step.tool_name.as_deref().unwrap_or("a tool");
    match (step.kind, step.ok) {
        (StepKind::Think, None) => None,
        (StepKind::Think, Some(ok)) => {
            Some(format!("step {}: the model {}", step.step, if ok { "answered" } else { "failed" }))
        }
        (StepKind::Tool, None) => Some(format!("step {}: {tool} runs", step.step)),
        (StepKind::Tool, Some(ok)) => Some(format!(
            "step {}: {tool} {} in {} ms",
            step.step,
            if ok { "ended" } else { "failed" },
            step.duration_ms.unwrap_or(0)
        )),
    }
}

/// A turn block: what the turn has said so far, and whether it goes on.
#[derive(Template)]
#[template(path = "turn.html")]
struct TurnBlock {
    id: String,
    text: String,
    steps: Vec<String>,
    outcome: Option<String>,
    waiting: bool,
}

impl TurnBlock {
    fn of(turn: &Turn) -> Self {
        let (parts, _) = turn.parts_from(0);
        let mut block = TurnBlock {
            id: turn.started.turn_id.clone(),
            text: String::new(),
            steps: Vec::new(),
            outcome: None,
            waiting: false,
        };
        for part in parts {
            match part {
                Part::Text(text) => block.text.push_str(&text),
                Part::Step(step) => block.steps.extend(step_line(&step)),
                Part::End(outcome) => {
                    block.waiting = outcome.status == TurnStatus::Waiting;
                    block.outcome = Some(outcome_line(&outcome));
                }
                Part::Lost => block.outcome = Some(LOST.to_owned()),
            }
        }
        block
    }
}

#[derive(Template)]
#[template(path = "chat.html")]
struct ChatPage {
    agent: String,
    session: String,
    sessions: Vec<String>,
    entries: Vec<Entry>,
    /// The running turn's block, rendered ([`TurnBlock`]).
    live: Option<String>,
}

/// `GET /chat/{agent}`'s query.
#[derive(Deserialize)]
pub struct ChatQuery {
    session: Option<String>,
}

/// The sessions shown beside the chat.
const SESSIONS_SHOWN: usize = 10;

/// `GET /chat/{agent}[?session=]`: a session's transcript (a new session
/// without one), the turn the console follows in it, and the message box.
pub async fn page(
    State(console): State<Arc<Console>>,
    Path(agent): Path<String>,
    Query(query): Query<ChatQuery>,
) -> Response {
    let sessions = match calls::sessions(&agent).await {
        Ok(list) => list.sessions.into_iter().take(SESSIONS_SHOWN).map(|s| s.session_id).collect(),
        Err(error) => return call_failed("Chat", &error),
    };
    let session = query.session.unwrap_or_default();
    let entries = if session.is_empty() {
        Vec::new()
    } else {
        match calls::transcript(&SessionRef { agent: agent.clone(), session_id: session.clone() }).await {
            Ok(transcript) => transcript.entries.into_iter().map(Entry::from).collect(),
            Err(error) => return call_failed("Chat", &error),
        }
    };
    let live = (!session.is_empty()).then(|| console.turns.running_in(&session)).flatten();
    let live = live.and_then(|turn| TurnBlock::of(&turn).render().ok());
    render(StatusCode::OK, &ChatPage { agent, session, sessions, entries, live })
}

/// `POST /chat/{agent}`'s form.
#[derive(Deserialize)]
pub struct SendForm {
    message: String,
    #[serde(default)]
    session: String,
}

/// The longest message the form takes; agent-loop has its own bound.
const MAX_MESSAGE: usize = 64 * 1024;

#[derive(Template)]
#[template(path = "sent.html")]
struct Sent<'a> {
    session: &'a str,
    message: &'a str,
    /// The turn's block, rendered ([`TurnBlock`]).
    block: String,
}

/// Answers a turn just started: htmx gets the message and the turn's block
/// (and the session's ID for the form's next message); a plain form goes
/// to the session's page, which follows the turn.
fn started(
    console: &Console,
    started: Result<calls::Started, CallFailed>,
    message: &str,
    headers: &HeaderMap,
) -> Response {
    let (turn, client, events) = match started {
        Ok(started) => started,
        Err(error) => return call_failed("Chat", &error),
    };
    let turn = match console.turns.follow(turn, client, events) {
        Ok(turn) => turn,
        Err(full) => {
            return render(
                StatusCode::SERVICE_UNAVAILABLE,
                &crate::pages::Message { title: "Chat", text: &full.to_string(), show_login_help: false },
            )
        }
    };
    if partial(headers) {
        return match TurnBlock::of(&turn).render() {
            Ok(block) => render(StatusCode::OK, &Sent { session: &turn.started.session_id, message, block }),
            Err(error) => {
                tracing::error!("rendering a turn: {error}");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        };
    }
    let started = &turn.started;
    Redirect::to(&format!("/chat/{}?session={}", started.agent, started.session_id)).into_response()
}

/// `POST /chat/{agent}`: the operator's message starts a turn.
pub async fn send(
    State(console): State<Arc<Console>>,
    Path(agent): Path<String>,
    headers: HeaderMap,
    Form(form): Form<SendForm>,
) -> Response {
    let message = form.message.trim();
    if message.is_empty() || message.len() > MAX_MESSAGE {
        let text = format!("A message is 1 to {MAX_MESSAGE} bytes. Nothing was sent.");
        return render(
            StatusCode::BAD_REQUEST,
            &crate::pages::Message { title: "Chat", text: &text, show_login_help: false },
        );
    }
    let send = ChatSend {
        agent,
        session_id: (!form.session.is_empty()).then_some(form.session),
        message: message.to_owned(),
        hint: None,
    };
    started(&console, calls::chat_send(&send).await, message, &headers)
}

/// `POST /turns/{turn}/cancel`: cancels the turn; it ends as cancelled,
/// which its stream shows.
pub async fn cancel(State(console): State<Arc<Console>>, Path(turn_id): Path<String>, headers: HeaderMap) -> Response {
    if let Err(error) = calls::chat_cancel(&turn_id).await {
        return call_failed("Cancel", &error);
    }
    match console.turns.get(&turn_id) {
        Some(_) if partial(&headers) => StatusCode::NO_CONTENT.into_response(),
        Some(turn) => {
            Redirect::to(&format!("/chat/{}?session={}", turn.started.agent, turn.started.session_id)).into_response()
        }
        None => Redirect::to("/agents").into_response(),
    }
}

#[derive(Template)]
#[template(source = "{{ text }}", ext = "html")]
struct Escaped<'a> {
    text: &'a str,
}

#[derive(Template)]
#[template(source = "<li>{{ line }}</li>", ext = "html")]
struct StepItem<'a> {
    line: &'a str,
}

#[derive(Template)]
#[template(path = "outcome.html")]
struct Outcome<'a> {
    line: &'a str,
    waiting: bool,
}

/// One part as a server-sent event: `text`, `step` or `end`, its data the
/// HTML that the block's matching element takes.
fn event_of(part: &Part) -> Option<Event> {
    let (name, html) = match part {
        Part::Text(text) => ("text", Escaped { text }.render()),
        Part::Step(step) => ("step", StepItem { line: &step_line(step)? }.render()),
        Part::End(outcome) => {
            ("end", Outcome { line: &outcome_line(outcome), waiting: outcome.status == TurnStatus::Waiting }.render())
        }
        Part::Lost => ("end", Outcome { line: LOST, waiting: false }.render()),
    };
    Some(Event::default().event(name).data(html.ok()?))
}

/// `GET /turns/{turn}/events`: the turn's parts as server-sent events,
/// each with its index as ID; a reconnect's `Last-Event-ID` resumes after
/// it. The stream ends after the turn's end.
pub async fn events(State(console): State<Arc<Console>>, Path(turn_id): Path<String>, headers: HeaderMap) -> Response {
    let Some(turn) = console.turns.get(&turn_id) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let from =
        headers.get("last-event-id").and_then(|id| id.to_str().ok()?.parse::<usize>().ok()).map_or(0, |seen| seen + 1);
    let stream = futures_util::stream::unfold((turn, from, false), |(turn, next, over)| async move {
        if over {
            return None;
        }
        let mut next = next;
        loop {
            let (parts, ended) = turn.parts_from(next);
            for part in parts {
                let index = next;
                next += 1;
                let last = matches!(part, Part::End(_) | Part::Lost);
                if let Some(event) = event_of(&part) {
                    return Some((Ok::<_, Infallible>(event.id(index.to_string())), (turn, next, last)));
                }
            }
            if ended {
                return None;
            }
            turn.wait_past(next).await;
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// One waiting approval.
struct Waiting {
    id: String,
    agent: String,
    tool: String,
    needs: String,
    reason: String,
    arguments: String,
    expires_at: String,
    /// A `file_write`'s change to its file; the note says why there is none.
    diff: Vec<diff::Line>,
    diff_note: String,
}

/// What a waiting `file_write` would change: the file as the agent reads
/// it now against the call's `content`.
async fn write_diff(agent: &str, tool: &str, arguments: &serde_json::Value) -> (Vec<diff::Line>, String) {
    let (true, Some(path), Some(new)) =
        (tool == "file_write", arguments["path"].as_str(), arguments["content"].as_str())
    else {
        return (Vec::new(), String::new());
    };
    match calls::read_file(agent, path).await {
        Ok(None) => (diff::lines("", new), format!("{path} does not exist yet: the write makes it.")),
        Ok(Some(file)) => match (file.eof, file.content) {
            (true, Some(old)) => {
                let lines = diff::lines(&old, new);
                let note = if lines.is_empty() { format!("The write leaves {path} as it is.") } else { String::new() };
                (lines, note)
            }
            _ => (Vec::new(), format!("{path} is not text of one message's size: no diff.")),
        },
        Err(error) => (Vec::new(), format!("{path} could not be read for a diff: {error}")),
    }
}

#[derive(Template)]
#[template(path = "approvals.html")]
struct Approvals {
    approvals: Vec<Waiting>,
}

/// `GET /approvals`: the calls waiting for the operator, with their
/// arguments.
pub async fn approvals() -> Response {
    let list = match calls::approvals().await {
        Ok(list) => list,
        Err(error) => return call_failed("Approvals", &error),
    };
    let mut approvals = Vec::with_capacity(list.approvals.len());
    for approval in list.approvals {
        let (diff, diff_note) = write_diff(&approval.agent, &approval.tool_name, &approval.arguments).await;
        approvals.push(Waiting {
            needs: approval.permissions.iter().map(wire).collect::<Vec<_>>().join(", "),
            arguments: serde_json::to_string_pretty(&approval.arguments).unwrap_or_default(),
            id: approval.id,
            agent: approval.agent,
            tool: approval.tool_name,
            reason: approval.reason,
            expires_at: approval.expires_at,
            diff,
            diff_note,
        });
    }
    render(StatusCode::OK, &Approvals { approvals })
}

/// `POST /approvals/{id}/approve` and `.../deny`: records the answer, then
/// continues the session whose turn waited, followed on its chat page.
pub async fn decide(
    State(console): State<Arc<Console>>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let approve = match action.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let approval = match calls::approval_decide(&id, approve).await {
        Ok(approval) => approval,
        Err(error) => return call_failed(if approve { "Approve" } else { "Deny" }, &error),
    };
    let session = SessionRef { agent: approval.agent, session_id: approval.session_id };
    let continued = calls::chat_continue(&session).await;
    // The page of the session, never a fragment: the decision came from
    // the approvals page.
    let mut headers = headers;
    headers.remove("hx-request");
    started(&console, continued, "", &headers)
}

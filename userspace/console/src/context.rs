//! The context page (specs/console/README.md, "Context"): what a
//! session's next request would put in the model's context window, part by
//! part (the prompt's instructions, each persona source, each tool schema,
//! each message in context) with each part's tokens, against the model's
//! window; and the system prompt itself.
//!
//! Owns: this page. Must not own: how the prompt is made (agent-loop's
//! `session_context` answers it).

use askama::Template;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::Response;
use clawos_api::agent_loop::{ContextPart, SessionRef};

use crate::calls;
use crate::pages::{call_failed, render};

#[derive(Template)]
#[template(path = "context.html")]
struct ContextPage {
    agent: String,
    session: String,
    model: String,
    window: String,
    total: u64,
    parts: Vec<ContextPart>,
    left_out: Vec<String>,
    system_prompt: String,
}

/// `GET /context/{agent}/{session}`.
pub async fn page(Path((agent, session)): Path<(String, String)>) -> Response {
    let context = match calls::context(&SessionRef { agent: agent.clone(), session_id: session.clone() }).await {
        Ok(context) => context,
        Err(error) => return call_failed("Context", &error),
    };
    let window = match context.context_window {
        Some(window) => format!(
            "{} of {window} tokens ({:.0} %)",
            context.total_tokens,
            100.0 * context.total_tokens as f64 / window.max(1) as f64
        ),
        None => format!("{} tokens (the model's window is not known)", context.total_tokens),
    };
    let page = ContextPage {
        agent,
        session,
        model: context.model,
        window,
        total: context.total_tokens,
        parts: context.parts,
        left_out: context.left_out,
        system_prompt: context.system_prompt,
    };
    render(StatusCode::OK, &page)
}

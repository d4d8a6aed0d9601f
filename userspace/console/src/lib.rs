//! `clawos-console`: the operator's web pages for one box
//! (specs/console/README.md).
//!
//! Served on a Unix socket that only the operator's SSH tunnel reaches:
//! no TCP listener, so neither the network nor a sandboxed tool on the box
//! can open it. Every request passes [`guard`] (Host, Origin, session)
//! before a page sees it; pages are server-rendered templates with the
//! vendored htmx for partial updates.
//!
//! Owns: HTTP, login and sessions, the pages. Must not own: any state of
//! the box; a page reads and changes it through the components' IPC
//! methods, under the console's own grant.
#![deny(missing_docs)]

pub mod auth;
pub mod calls;
pub mod chat;
pub mod context;
pub mod diff;
pub mod events;
pub mod guard;
pub mod inventory;
pub mod memory;
pub mod pages;
pub mod turns;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use tower_http::limit::RequestBodyLimitLayer;

/// The largest request body: a memory file's edit is the largest form.
pub const MAX_BODY: usize = 1 << 20;

/// What every handler shares.
pub struct Console {
    /// Login links and sessions.
    pub tokens: auth::Tokens,
    /// The turns started from the chat pages.
    pub turns: turns::Turns,
    /// The box's name, as the overview shows it.
    pub box_name: String,
    /// The image's version.
    pub version: String,
}

/// The console's routes behind its guard.
pub fn app(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(pages::home))
        .route("/events", get(events::stream))
        .route("/agents", get(pages::agents))
        .route("/agents/{agent}/{action}", post(pages::set_paused))
        .route("/chat/{agent}", get(chat::page).post(chat::send))
        .route("/context/{agent}/{session}", get(context::page))
        .route("/turns/{turn}/events", get(chat::events))
        .route("/turns/{turn}/cancel", post(chat::cancel))
        .route("/approvals", get(chat::approvals))
        .route("/approvals/{id}/{action}", post(chat::decide))
        .route("/memory/{agent}", get(memory::page))
        .route("/memory/{agent}/edit", get(memory::edit).post(memory::save))
        .route("/tools", get(inventory::tools))
        .route("/secrets", get(inventory::secrets))
        .route("/schedules", get(inventory::schedules))
        .route("/notifications", get(inventory::notifications))
        .route("/login", get(pages::login))
        .route("/logout", post(pages::logout))
        .route("/static/{file}", get(pages::static_file))
        .layer(RequestBodyLimitLayer::new(MAX_BODY))
        // Outermost: a refusal of the body limit carries the headers too.
        .layer(axum::middleware::from_fn_with_state(console.clone(), guard::guard))
        .with_state(console)
}

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

use crate::guard;
use crate::Console;

/// Renders `template` as `status`; a template that fails to render (a
/// bug: every value it reads is a plain field) is a 500 with no detail.
fn render(status: StatusCode, template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(error) => {
            tracing::error!("rendering a page: {error}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[derive(Template)]
#[template(path = "message.html")]
struct Message<'a> {
    title: &'a str,
    text: &'a str,
    show_login_help: bool,
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

#[derive(Template)]
#[template(path = "home.html")]
struct Home<'a> {
    box_name: &'a str,
    version: &'a str,
}

/// `GET /`: the box at a glance.
pub async fn home(State(console): State<Arc<Console>>) -> Response {
    render(StatusCode::OK, &Home { box_name: &console.box_name, version: &console.version })
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

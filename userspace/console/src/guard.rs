//! What every request passes and every answer carries
//! (specs/console/README.md, "What every request passes").
//!
//! The console is reached through an SSH tunnel to `localhost`, so a
//! request naming another host is a DNS-rebinding page using the tunnel,
//! and a request that changes something without this console's origin is
//! another site's form or script (the session cookie is `SameSite=Strict`
//! as well: two independent walls). Every answer, a refusal included,
//! carries a Content-Security-Policy that lets only the console's own
//! files run.
//!
//! Owns: the Host, Origin, `Sec-Fetch-Site` and session checks, the session
//! cookie's name and attributes, the security headers. Must not own: what
//! a page shows or does.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::pages;
use crate::Console;

/// The session cookie's name.
pub const COOKIE: &str = "clawos_console";

/// The headers every answer carries.
const SECURITY_HEADERS: [(&str, &str); 6] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
         form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    // Not `no-referrer`: under it a browser sends `Origin: null` with a
    // form's POST (the Fetch standard), and the Origin check refuses the
    // console's own forms. `same-origin` keeps the page's address from
    // every other site and the Origin on the console's own requests.
    ("referrer-policy", "same-origin"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    ("x-frame-options", "DENY"),
];

/// `Set-Cookie` for a new session.
pub fn session_cookie(session: &str) -> String {
    format!("{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/")
}

/// `Set-Cookie` that ends the session in the browser.
pub fn expired_cookie() -> String {
    format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")
}

/// Whether `host` (a `Host` header) names this machine's loopback, with or
/// without a port: the only names the tunnel's end has.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // `[::1]` or `[::1]:8080`.
        Some(bracketed) => match bracketed.split_once(']') {
            Some((name, rest)) if rest.is_empty() || port(rest.strip_prefix(':')) => return name == "::1",
            _ => return false,
        },
        None => match host.split_once(':') {
            Some((name, rest)) if port(Some(rest)) => name,
            Some(_) => return false,
            None => host,
        },
    };
    name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1"
}

fn port(digits: Option<&str>) -> bool {
    digits.is_some_and(|digits| !digits.is_empty() && digits.len() <= 5 && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// The value of `Cookie`'s pair named [`COOKIE`].
pub fn session_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .filter(|value| !value.is_empty())
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// Why a request is refused before it reaches a page, or `None`.
fn refusal(console: &Console, request: &Request) -> Option<Response> {
    let headers = request.headers();
    let Some(host) = header_str(headers, header::HOST).filter(|host| loopback_host(host)) else {
        return Some(
            (StatusCode::MISDIRECTED_REQUEST, "The console answers only at localhost, through its SSH tunnel.\n")
                .into_response(),
        );
    };
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let expected = format!("http://{host}");
        if header_str(headers, header::ORIGIN) != Some(expected.as_str()) {
            return Some((StatusCode::FORBIDDEN, "A change must come from the console's own pages.\n").into_response());
        }
    }
    if let Some(site) = header_str(headers, header::HeaderName::from_static("sec-fetch-site")) {
        if site != "same-origin" && site != "none" {
            return Some(
                (StatusCode::FORBIDDEN, "The console opens only from its own pages or its link.\n").into_response(),
            );
        }
    }
    let path = request.uri().path();
    let open = path == "/login" || path.starts_with("/static/");
    if !open && !session_of(headers).is_some_and(|session| console.tokens.touch_session(session, Instant::now())) {
        return Some(pages::logged_out(headers.contains_key("hx-request")));
    }
    None
}

/// The middleware: refuses what fails a check, and adds the security
/// headers to every answer.
pub async fn guard(State(console): State<Arc<Console>>, request: Request, next: Next) -> Response {
    let mut response = match refusal(&console, &request) {
        Some(refused) => refused,
        None => next.run(request).await,
    };
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_pass_as_host() {
        for good in
            ["localhost", "localhost:8080", "LOCALHOST:1", "127.0.0.1", "127.0.0.1:65535", "[::1]", "[::1]:8080"]
        {
            assert!(loopback_host(good), "{good}");
        }
        for bad in [
            "evil.example",
            "localhost.evil.example",
            "evil.example:8080",
            "127.0.0.2",
            "10.0.2.15:8080",
            "localhost:",
            "localhost:80a",
            "localhost:123456",
            "[::2]:8080",
            "[::1]x",
            "",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn the_session_is_read_from_its_own_cookie_only() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("other=1; clawos_console=abc; x=2"));
        assert_eq!(session_of(&headers), Some("abc"));
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("clawos_consolex=abc; clawos_console="));
        assert_eq!(session_of(&headers), None);
    }
}

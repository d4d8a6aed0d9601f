//! The live event stream on the overview (specs/console/README.md,
//! "Overview"): what the router fans out, as `clawctl events` shows it,
//! streamed into the page as server-sent events while it is open.
//!
//! Each open stream is one router subscription on a connection of its own,
//! closed when the browser goes away (the stream is dropped with the
//! connection). The router drops what a slow subscriber cannot take
//! (specs/ipc/README.md, "Events"), so a stalled page never holds up the
//! box; the page says events may be missing, not that none happened.
//!
//! Owns: the stream. Must not own: which events exist or who may see them
//! (the router's grants: the console acts for the operator).

use std::convert::Infallible;

use askama::Template;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use clawos_ipc::Body;

use crate::calls;
use crate::pages::call_failed;

/// The most of an event's data a line shows.
const DATA_SHOWN: usize = 400;

#[derive(Template)]
#[template(
    source = "<li><time>{{ at }}</time> <strong>{{ sender }}</strong> {{ name }} <code>{{ data }}</code></li>",
    ext = "html"
)]
struct Line<'a> {
    at: &'a str,
    sender: &'a str,
    name: &'a str,
    data: &'a str,
}

/// `HH:MM:SS` (UTC) of a message's send time.
fn clock(timestamp_ns: u64) -> String {
    let seconds = timestamp_ns / 1_000_000_000;
    format!("{:02}:{:02}:{:02}", seconds / 3600 % 24, seconds / 60 % 60, seconds % 60)
}

/// The data, cut to `DATA_SHOWN` characters.
fn clipped(data: &serde_json::Map<String, serde_json::Value>) -> String {
    let text = serde_json::Value::Object(data.clone()).to_string();
    match text.char_indices().nth(DATA_SHOWN) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// `GET /events`: every event the router fans out, as server-sent events
/// (`event`, an HTML list item), from now until the page is closed.
pub async fn stream() -> Response {
    let (client, events) = match calls::subscribe_all().await {
        Ok(subscribed) => subscribed,
        Err(error) => return call_failed("Events", &error),
    };
    let stream = futures_util::stream::unfold((client, events), |(client, mut events)| async move {
        loop {
            let message = events.recv().await?;
            let Body::Event(event) = &message.body else { continue };
            let line = Line {
                at: &clock(message.timestamp_ns),
                sender: &message.sender.to_string(),
                name: &event.event_name,
                data: &clipped(&event.event_data),
            };
            match line.render() {
                Ok(html) => {
                    return Some((Ok::<_, Infallible>(Event::default().event("event").data(html)), (client, events)))
                }
                Err(error) => tracing::error!("rendering an event: {error}"),
            }
        }
    });
    (StatusCode::OK, Sse::new(stream).keep_alive(KeepAlive::default())).into_response()
}

#[cfg(test)]
mod tests {
    use super::{clipped, clock};

    #[test]
    fn a_line_shows_the_utc_time_and_at_most_the_first_characters_of_the_data() {
        assert_eq!(clock(1_764_000_000_000_000_000 + 3_723_000_000_000), "17:02:03");
        let mut data = serde_json::Map::new();
        data.insert("text".into(), "x".repeat(1000).into());
        let shown = clipped(&data);
        assert_eq!(shown.chars().count(), 401);
        assert!(shown.ends_with('…'));
    }
}

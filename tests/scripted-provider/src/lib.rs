//! `clawos-scripted-provider`: a scripted language-model provider for tests.
//!
//! A test double for what lies outside the box: the remote LLM APIs that
//! agent-loop's providers stream from. It is a real HTTP/1.1 server on
//! loopback that speaks the OpenAI Chat Completions streaming protocol
//! (`POST /v1/chat/completions`) and the Anthropic Messages streaming
//! protocol (`POST /v1/messages`), and answers each request with the next
//! [`Reply`] of a [`Script`]: a server-sent event stream, an error status
//! with its body and headers (`Retry-After`), or a fault (a stream cut
//! without its end, a slow stream, an event that is not JSON). It is never
//! shipped in the image: agent-loop's integration tests use the library as
//! a dev-dependency, and the boot checks copy the binary
//! (`clawos-scripted-provider --script FILE`) into the booted VM over SSH,
//! so a turn can run against a provider whose every answer is known.
//!
//! Replies are served in order, one per request to either endpoint,
//! whichever protocol it speaks: the script is the conversation as the
//! provider would have answered it. When the replies run out the server
//! answers 500 with an error saying so, so a test that makes one request too
//! many fails on that error rather than hanging. Every request (method,
//! path, headers, body) is recorded ([`Server::requests`]) so a test can
//! check what was sent: the tool result in the second request, the key in
//! `authorization: Bearer` or `x-api-key`.
//!
//! Owns: the script format (JSON, [`Script`], unknown fields refused), the
//! server ([`Server`]), and builders of correct protocol streams
//! ([`openai`], [`anthropic`]) so a test reads as the conversation it
//! scripts. Does not own: any client; what a provider does with the
//! events is agent-loop's and is what the tests check.
//!
//! ```
//! use clawos_scripted_provider::{openai, Reply, Script, Server};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let script = Script::new()
//!     .reply(Reply::status(429).retry_after(1))
//!     .reply(openai::tool_call("call_1", "read_file", r#"{"path":"notes.md"}"#, 3))
//!     .reply(openai::text(["The file has ", "12 words."], Some((120, 8))).cut_after(2));
//! let server = Server::start(script).await?;
//! // The provider under test gets `server.api_url()` (http://127.0.0.1:PORT/v1)
//! // as its base_url; then the test checks what it sent:
//! for request in server.requests() {
//!     assert_eq!(request.header("authorization"), Some("Bearer KEY"));
//! }
//! # std::io::Result::Ok(())
//! # }).unwrap();
//! ```

pub mod anthropic;
pub mod openai;
mod server;

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

pub use server::{Recorded, Server};

/// The replies, served in order, one per request to
/// `POST /v1/chat/completions` or `POST /v1/messages`; and web pages, each
/// served to every `GET` of its path (the web a tool of the agent fetches
/// in a scenario).
///
/// As JSON: `{"replies": [{"status": 200, "events": [...]}, ...],
/// "pages": {"/path": "text"}}`; unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    pub replies: Vec<Reply>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub pages: std::collections::BTreeMap<String, String>,
}

impl Script {
    /// An empty script: every request is answered 500 (exhausted).
    pub fn new() -> Script {
        Script::default()
    }

    /// This script with `reply` served after the ones it has.
    pub fn reply(mut self, reply: Reply) -> Script {
        self.replies.push(reply);
        self
    }

    /// This script with a page: `text` (as `text/plain`) to every `GET path`.
    pub fn page(mut self, path: &str, text: &str) -> Script {
        self.pages.insert(path.to_owned(), text.to_owned());
        self
    }

    /// Parses and checks a script.
    pub fn from_json(text: &str) -> Result<Script, String> {
        let script: Script = serde_json::from_str(text).map_err(|e| e.to_string())?;
        script.check()?;
        Ok(script)
    }

    /// Reads, parses and checks a script file.
    pub fn from_file(path: &Path) -> Result<Script, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Script::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The script as JSON (what [`Script::from_json`] reads back).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a script serializes")
    }

    /// Whether every reply can be served: a valid status, valid header
    /// names and values, not both `events` and `body`, no `cut_after` with
    /// a `body`.
    pub fn check(&self) -> Result<(), String> {
        for (index, reply) in self.replies.iter().enumerate() {
            reply.check().map_err(|e| format!("replies[{index}]: {e}"))?;
        }
        Ok(())
    }
}

impl From<Vec<Reply>> for Script {
    fn from(replies: Vec<Reply>) -> Script {
        Script { replies, pages: Default::default() }
    }
}

impl FromIterator<Reply> for Script {
    fn from_iter<I: IntoIterator<Item = Reply>>(replies: I) -> Script {
        Script { replies: replies.into_iter().collect(), pages: Default::default() }
    }
}

/// One answer.
///
/// With `events` (or neither `events` nor `body` on a 2xx), a server-sent
/// event stream (`content-type: text/event-stream`, chunked). With `body`,
/// that body as it is. With neither on an error status, the protocol's
/// error JSON for that status (OpenAI's `{"error": {...}}` or Anthropic's
/// `{"type": "error", "error": {...}}`, by the path asked).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// The HTTP status.
    #[serde(default = "ok")]
    pub status: u16,
    /// Extra response headers (`retry-after`, `retry-after-ms`,
    /// `content-type` to replace the default...).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Wait before the status and headers are sent, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// The stream's events, written in order.
    #[serde(default)]
    pub events: Vec<Event>,
    /// Wait between two events, in milliseconds (a slow stream).
    #[serde(default)]
    pub event_delay_ms: u64,
    /// Drop the connection after this many events: no terminal marker, no
    /// end of the chunked body; the client sees the connection close
    /// mid-body. `0` cuts right after the headers; a number larger than
    /// the events cuts after all of them.
    #[serde(default)]
    pub cut_after: Option<usize>,
    /// A body that is not an event stream: a JSON string is sent as it is
    /// (malformed text, an error body written by hand), any other JSON
    /// value is sent serialized. Its content type is `application/json`
    /// when it parses as JSON, `text/plain` otherwise, unless `headers`
    /// say.
    #[serde(default)]
    pub body: Option<Value>,
}

fn ok() -> u16 {
    200
}

impl Default for Reply {
    fn default() -> Reply {
        Reply {
            status: 200,
            headers: BTreeMap::new(),
            delay_ms: 0,
            events: Vec::new(),
            event_delay_ms: 0,
            cut_after: None,
            body: None,
        }
    }
}

impl Reply {
    /// A 200 event stream of `events` (see [`openai`] and [`anthropic`] for
    /// whole, correct streams).
    pub fn sse(events: impl IntoIterator<Item = Event>) -> Reply {
        Reply { events: events.into_iter().collect(), ..Reply::default() }
    }

    /// A reply with this status: with nothing else, an error status gets
    /// the protocol's error JSON and a 2xx an empty event stream.
    pub fn status(status: u16) -> Reply {
        Reply { status, ..Reply::default() }
    }

    /// A 500, the protocol's error JSON.
    pub fn server_error() -> Reply {
        Reply::status(500)
    }

    /// With `retry-after: secs`.
    pub fn retry_after(self, secs: u64) -> Reply {
        self.header("retry-after", &secs.to_string())
    }

    /// With the response header `name: value` (replacing one of that name).
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.insert(name.to_ascii_lowercase(), value.to_owned());
        self
    }

    /// With `event` written after the ones it has.
    pub fn event(mut self, event: Event) -> Reply {
        self.events.push(event);
        self
    }

    /// With the body `text`, sent as it is.
    pub fn body_text(mut self, text: &str) -> Reply {
        self.body = Some(Value::String(text.to_owned()));
        self
    }

    /// With the body `json`, serialized.
    pub fn body_json(mut self, json: Value) -> Reply {
        self.body = Some(json);
        self
    }

    /// Waiting `ms` milliseconds before the status and headers.
    pub fn delay_ms(mut self, ms: u64) -> Reply {
        self.delay_ms = ms;
        self
    }

    /// Waiting `ms` milliseconds between two events.
    pub fn event_delay_ms(mut self, ms: u64) -> Reply {
        self.event_delay_ms = ms;
        self
    }

    /// Dropping the connection after `events` events.
    pub fn cut_after(mut self, events: usize) -> Reply {
        self.cut_after = Some(events);
        self
    }

    /// Whether the reply can be served (see [`Script::check`]).
    pub fn check(&self) -> Result<(), String> {
        if hyper::StatusCode::from_u16(self.status).is_err() {
            return Err(format!("status {} is not an HTTP status", self.status));
        }
        for (name, value) in &self.headers {
            hyper::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("header name `{name}` is not valid"))?;
            hyper::header::HeaderValue::from_str(value)
                .map_err(|_| format!("header `{name}`: value `{value}` is not valid"))?;
        }
        if self.body.is_some() && !self.events.is_empty() {
            return Err("a reply has either `events` or `body`, not both".into());
        }
        if self.body.is_some() && self.cut_after.is_some() {
            return Err("`cut_after` counts events: a reply with `body` has none".into());
        }
        Ok(())
    }
}

/// One server-sent event.
///
/// In a script: a JSON string is a data payload (OpenAI's chunks, `[DONE]`,
/// or `{not json`); `{"event": NAME, "data": ...}` a named event
/// (Anthropic's), its data a JSON value serialized or a string sent as it
/// is; `{"raw": TEXT}` text written to the stream as it is (comments,
/// `retry:` fields, CRLF line ends, an event split oddly).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `data: <payload>\n\n` (each line of a payload with several gets its
    /// own `data: `).
    Data(String),
    /// `event: <event>\ndata: <data>\n\n`.
    Named { event: String, data: Value },
    /// Written as it is.
    Raw(String),
}

impl Event {
    /// A data payload.
    pub fn data(payload: impl Into<String>) -> Event {
        Event::Data(payload.into())
    }

    /// A named event whose data is `data` serialized (a string is sent as
    /// it is).
    pub fn named(event: &str, data: Value) -> Event {
        Event::Named { event: event.to_owned(), data }
    }

    /// Text written to the stream as it is.
    pub fn raw(text: impl Into<String>) -> Event {
        Event::Raw(text.into())
    }

    /// The event as written on the wire.
    pub fn to_wire(&self) -> String {
        fn data_lines(out: &mut String, payload: &str) {
            for line in payload.split('\n') {
                out.push_str("data: ");
                out.push_str(line);
                out.push('\n');
            }
        }
        let mut out = String::new();
        match self {
            Event::Data(payload) => data_lines(&mut out, payload),
            Event::Named { event, data } => {
                out.push_str("event: ");
                out.push_str(event);
                out.push('\n');
                match data {
                    Value::String(text) => data_lines(&mut out, text),
                    json => data_lines(&mut out, &json.to_string()),
                }
            }
            Event::Raw(text) => return text.clone(),
        }
        out.push('\n');
        out
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Event::Data(payload) => serializer.serialize_str(payload),
            Event::Named { event, data } => {
                #[derive(Serialize)]
                struct Named<'a> {
                    event: &'a str,
                    data: &'a Value,
                }
                Named { event, data }.serialize(serializer)
            }
            Event::Raw(raw) => {
                #[derive(Serialize)]
                struct Raw<'a> {
                    raw: &'a str,
                }
                Raw { raw }.serialize(serializer)
            }
        }
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Event, D::Error> {
        const EXPECTED: &str =
            "an event is a string (a data payload), {\"event\": NAME, \"data\": ...} or {\"raw\": TEXT}";
        match Value::deserialize(deserializer)? {
            Value::String(payload) => Ok(Event::Data(payload)),
            Value::Object(mut fields) => {
                let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
                keys.sort_unstable();
                match keys.as_slice() {
                    ["data", "event"] => {
                        let data = fields.remove("data").unwrap_or_default();
                        match fields.remove("event") {
                            Some(Value::String(event)) => Ok(Event::Named { event, data }),
                            _ => Err(D::Error::custom("an event's `event` is a string")),
                        }
                    }
                    ["raw"] => match fields.remove("raw") {
                        Some(Value::String(raw)) => Ok(Event::Raw(raw)),
                        _ => Err(D::Error::custom("an event's `raw` is a string")),
                    },
                    _ => Err(D::Error::custom(format!("{EXPECTED}; got the fields {keys:?}"))),
                }
            }
            _ => Err(D::Error::custom(EXPECTED)),
        }
    }
}

/// `text` in `parts` pieces of nearly equal length (in characters; the
/// first ones take the remainder), empty ones included when `text` is
/// shorter than `parts`; `parts` 0 counts as 1.
pub(crate) fn split(text: &str, parts: usize) -> Vec<String> {
    let parts = parts.max(1);
    let chars: Vec<char> = text.chars().collect();
    let (size, extra) = (chars.len() / parts, chars.len() % parts);
    let mut pieces = Vec::with_capacity(parts);
    let mut start = 0;
    for i in 0..parts {
        let len = size + usize::from(i < extra);
        pieces.push(chars[start..start + len].iter().collect());
        start += len;
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_brief_example_parses() {
        let script = Script::from_json(
            r#"{"replies": [ {"status": 200, "headers": {"retry-after": "1"}, "delay_ms": 0,
               "events": ["{\"a\":1}", "[DONE]", {"event": "message_stop", "data": {"type": "message_stop"}}, {"raw": ": ping\n\n"}],
               "event_delay_ms": 0, "cut_after": null, "body": null}, {"status": 429}]}"#,
        )
        .unwrap();
        assert_eq!(script.replies.len(), 2);
        let events = &script.replies[0].events;
        assert_eq!(events[0], Event::data("{\"a\":1}"));
        assert_eq!(events[2], Event::named("message_stop", json!({"type": "message_stop"})));
        assert_eq!(events[3], Event::raw(": ping\n\n"));
        assert_eq!(script.replies[1], Reply::status(429));
        assert_eq!(Script::from_json(&script.to_json()).unwrap(), script);
    }

    #[test]
    fn unknown_fields_and_bad_replies_are_refused() {
        assert!(Script::from_json(r#"{"replies": [], "extra": 1}"#).unwrap_err().contains("extra"));
        assert!(Script::from_json(r#"{"replies": [{"stauts": 200}]}"#).unwrap_err().contains("stauts"));
        assert!(Script::from_json(r#"{"replies": [{"events": [{"event": "x"}]}]}"#)
            .unwrap_err()
            .contains("an event is"));
        assert!(Script::from_json(r#"{"replies": [{"events": [{"event": "x", "data": 1, "id": 2}]}]}"#).is_err());
        assert!(Script::from_json(r#"{"replies": [{"events": [1]}]}"#).is_err());
        let both = Script::from_json(r#"{"replies": [{"events": ["x"], "body": "y"}]}"#).unwrap_err();
        assert!(both.starts_with("replies[0]: "), "{both}");
        assert!(Script::from_json(r#"{"replies": [{"status": 1000}]}"#).is_err());
        assert!(Script::from_json(r#"{"replies": [{"headers": {"bad name": "x"}}]}"#).is_err());
    }

    #[test]
    fn events_on_the_wire() {
        assert_eq!(Event::data("[DONE]").to_wire(), "data: [DONE]\n\n");
        assert_eq!(Event::data("{not json").to_wire(), "data: {not json\n\n");
        assert_eq!(Event::data("a\nb").to_wire(), "data: a\ndata: b\n\n");
        assert_eq!(
            Event::named("ping", json!({"type": "ping"})).to_wire(),
            "event: ping\ndata: {\"type\":\"ping\"}\n\n"
        );
        assert_eq!(Event::named("x", json!("{not json")).to_wire(), "event: x\ndata: {not json\n\n");
        assert_eq!(Event::raw(": keep-alive\r\n\r\n").to_wire(), ": keep-alive\r\n\r\n");
    }

    #[test]
    fn split_keeps_every_character() {
        assert_eq!(split("{\"a\":1}", 3), ["{\"a", "\":", "1}"]);
        assert_eq!(split("ab", 4), ["a", "b", "", ""]);
        assert_eq!(split("é€x", 2), ["é€", "x"]);
        assert_eq!(split("abc", 0), ["abc"]);
    }
}

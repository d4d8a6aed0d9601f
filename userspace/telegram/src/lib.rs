//! The Telegram channel's protocol (specs/channels/README.md, "Telegram"):
//! the Bot API's `getUpdates` long polling and `sendMessage`, as the pure
//! functions of the channel interface (`specs/wit/channel/channel.wit`). The host
//! makes the requests; the bot token is the `{secret}` of their paths, put
//! in by the host, never seen here.
//!
//! Owns: building the requests and reading the answers: the cursor
//! (`offset`, the last `update_id` + 1), which updates are text messages
//! (others are skipped, unreadable ones counted), splitting an answer at
//! the message limit, and what an error answer means. Must not own: the
//! network, the store, the loop, the allowlist (the host's).
#![deny(missing_docs)]

use serde_json::{json, Value};

/// The most UTF-16 code units a message may have: Telegram's 4096
/// characters, counted as it counts them, so a text of emoji and other
/// characters beyond the BMP fits too.
pub const MAX_MESSAGE: usize = 4096;

/// A request for the host to make; `path` is relative to the API origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `POST`.
    pub method: String,
    /// `/bot{secret}/<method>`.
    pub path: String,
    /// Its headers.
    pub headers: Vec<(String, String)>,
    /// Its body (JSON).
    pub body: Vec<u8>,
}

/// What the host got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

/// A text message in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// Its `update_id`.
    pub id: String,
    /// Its chat's ID.
    pub chat: String,
    /// Its sender's user ID.
    pub sender: String,
    /// Its text.
    pub text: String,
}

/// A poll's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Batch {
    /// The text messages, in order.
    pub messages: Vec<Inbound>,
    /// Past every update read (messages, others and unreadable ones).
    pub cursor: Option<String>,
    /// Updates that could not be read.
    pub malformed: u32,
}

/// What an error answer means for the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelError {
    /// `429`: ask again after this many seconds.
    RetryAfter(u32),
    /// `409`: another poller, or a webhook is set.
    Conflict(String),
    /// Another `4xx`: asking again will not help (a wrong token, a text
    /// Telegram refuses).
    Rejected(String),
    /// A `5xx`, or an answer that is not the Bot API's.
    Failed(String),
}

fn request(method: &str, body: &Value) -> Request {
    Request {
        method: "POST".into(),
        path: format!("/bot{{secret}}/{method}"),
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_string().into_bytes(),
    }
}

/// The next long poll from `cursor` (none: from the oldest kept update),
/// waiting up to `timeout_seconds` for one. Only messages are asked for.
pub fn poll_request(cursor: Option<&str>, timeout_seconds: u32) -> Request {
    let mut body = json!({"timeout": timeout_seconds, "allowed_updates": ["message"]});
    if let Some(offset) = cursor.and_then(|c| c.parse::<i64>().ok()) {
        body["offset"] = offset.into();
    }
    request("getUpdates", &body)
}

/// The Bot API's answer: its `result`, or what its error means.
fn result(response: &Response) -> Result<Value, ChannelError> {
    let answer: Value = serde_json::from_slice(&response.body)
        .map_err(|_| ChannelError::Failed(format!("HTTP {}: not the Bot API's JSON", response.status)))?;
    if answer["ok"] == json!(true) && response.status == 200 {
        return Ok(answer["result"].clone());
    }
    let description = shown(answer["description"].as_str().unwrap_or("no description"));
    Err(match response.status {
        429 => ChannelError::RetryAfter(
            answer["parameters"]["retry_after"].as_u64().and_then(|s| u32::try_from(s).ok()).unwrap_or(5),
        ),
        409 => ChannelError::Conflict(description),
        400..=499 => ChannelError::Rejected(format!("HTTP {}: {description}", response.status)),
        status => ChannelError::Failed(format!("HTTP {status}: {description}")),
    })
}

/// The most characters of the service's own words kept in an error.
const DESCRIPTION_SHOWN: usize = 200;

/// The service's text as an error carries it into the host's logs: at most
/// [`DESCRIPTION_SHOWN`] characters, control characters escaped.
fn shown(text: &str) -> String {
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n == DESCRIPTION_SHOWN {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A poll's answer, read: its text messages, and the cursor past every
/// update it brought, so nothing is asked for twice and an update that
/// cannot be read does not stop the ones after it.
pub fn poll_response(response: &Response) -> Result<Batch, ChannelError> {
    let Value::Array(updates) = result(response)? else {
        return Err(ChannelError::Failed("getUpdates: the result is not a list".into()));
    };
    let mut batch = Batch::default();
    let mut last = None;
    for update in &updates {
        let Some(id) = update["update_id"].as_i64() else {
            batch.malformed += 1;
            continue;
        };
        last = Some(last.map_or(id, |l: i64| l.max(id)));
        let message = &update["message"];
        if message.is_null() {
            // Another kind of update (an edit, a member change): not a message.
            continue;
        }
        match (message["chat"]["id"].as_i64(), message["from"]["id"].as_i64(), message["text"].as_str()) {
            (Some(chat), Some(sender), Some(text)) => batch.messages.push(Inbound {
                id: id.to_string(),
                chat: chat.to_string(),
                sender: sender.to_string(),
                text: text.to_owned(),
            }),
            // A photo or a sticker has no text: not for the agent.
            (Some(_), Some(_), None) if message.is_object() => {}
            _ => batch.malformed += 1,
        }
    }
    batch.cursor = last.map(|id| (id + 1).to_string());
    Ok(batch)
}

/// `text` in parts of at most [`MAX_MESSAGE`] UTF-16 code units: cut at
/// the last line end in the part's second half, else the last space, else
/// anywhere (never inside a character). Empty text is one empty part,
/// which Telegram refuses: the host sends none.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while utf16_len(rest) > limit {
        // The longest prefix within the limit.
        let mut units = 0;
        let mut end = 0;
        for (at, c) in rest.char_indices() {
            if units + c.len_utf16() > limit {
                break;
            }
            units += c.len_utf16();
            end = at + c.len_utf8();
        }
        let window = &rest[..end];
        let cut =
            window[end / 2..].rfind('\n').or_else(|| window[end / 2..].rfind(' ')).map_or(end, |at| end / 2 + at + 1);
        parts.push(rest[..cut].to_owned());
        rest = &rest[cut..];
    }
    parts.push(rest.to_owned());
    parts
}

fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// The requests that send `text` to `chat`, one per part, in order.
pub fn send_requests(chat: &str, text: &str) -> Vec<Request> {
    let chat_id = chat.parse::<i64>().map_or_else(|_| Value::from(chat), Value::from);
    split(text, MAX_MESSAGE)
        .into_iter()
        .filter(|part| !part.trim().is_empty())
        .map(|part| request("sendMessage", &json!({"chat_id": chat_id, "text": part})))
        .collect()
}

/// One send's answer, read.
pub fn send_response(response: &Response) -> Result<(), ChannelError> {
    result(response).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::{poll_request, poll_response, send_requests, split, utf16_len, ChannelError, Response};

    fn answer(status: u16, body: &str) -> Response {
        Response { status, body: body.as_bytes().to_vec() }
    }

    #[test]
    fn a_poll_asks_from_its_cursor_for_messages_with_the_token_left_to_the_host() {
        let first = poll_request(None, 30);
        assert_eq!(first.path, "/bot{secret}/getUpdates");
        let body: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
        assert_eq!(body, serde_json::json!({"timeout": 30, "allowed_updates": ["message"]}));
        let next: serde_json::Value = serde_json::from_slice(&poll_request(Some("42"), 30).body).unwrap();
        assert_eq!(next["offset"], 42);
    }

    #[test]
    fn the_cursor_moves_past_every_update_read_and_unreadable_ones_are_counted() {
        let body = r#"{"ok": true, "result": [
            {"update_id": 10, "message": {"message_id": 1, "from": {"id": 7}, "chat": {"id": 70}, "text": "hi"}},
            {"update_id": 11, "edited_message": {"text": "an edit"}},
            {"update_id": 12, "message": {"message_id": 2, "from": {"id": 7}, "chat": {"id": 70}, "photo": []}},
            {"update_id": 13, "message": "not a message"},
            {"no_update_id": true},
            {"update_id": 14, "message": {"message_id": 3, "from": {"id": 8}, "chat": {"id": -5}, "text": "there"}}
        ]}"#;
        let batch = poll_response(&answer(200, body)).unwrap();
        let texts: Vec<(&str, &str, &str)> =
            batch.messages.iter().map(|m| (m.id.as_str(), m.sender.as_str(), m.text.as_str())).collect();
        assert_eq!(texts, [("10", "7", "hi"), ("14", "8", "there")]);
        assert_eq!(batch.messages[1].chat, "-5");
        assert_eq!((batch.cursor.as_deref(), batch.malformed), (Some("15"), 2));
        let empty = poll_response(&answer(200, r#"{"ok": true, "result": []}"#)).unwrap();
        assert_eq!(empty.cursor, None, "an empty poll keeps the cursor");
    }

    #[test]
    fn error_answers_say_whether_and_when_to_ask_again() {
        let retry = r#"{"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 7", "parameters": {"retry_after": 7}}"#;
        assert_eq!(poll_response(&answer(429, retry)), Err(ChannelError::RetryAfter(7)));
        assert!(matches!(
            poll_response(&answer(409, r#"{"ok": false, "description": "Conflict"}"#)),
            Err(ChannelError::Conflict(_))
        ));
        assert!(matches!(
            poll_response(&answer(401, r#"{"ok": false, "description": "Unauthorized"}"#)),
            Err(ChannelError::Rejected(_))
        ));
        assert!(matches!(poll_response(&answer(502, "<html>bad gateway</html>")), Err(ChannelError::Failed(_))));
        assert!(matches!(poll_response(&answer(200, r#"{"ok": true, "result": {}}"#)), Err(ChannelError::Failed(_))));
    }

    #[test]
    fn the_services_words_reach_the_log_bounded_and_with_control_characters_escaped() {
        let long =
            serde_json::json!({"ok": false, "description": format!("{}\u{1b}[2Jgone", "x".repeat(500))}).to_string();
        let outcome = poll_response(&answer(400, &long));
        let Err(ChannelError::Rejected(why)) = outcome else { panic!("not rejected: {outcome:?}") };
        assert!(why.chars().count() < 230 && why.ends_with('…'), "{why}");
        let conflict = serde_json::json!({"ok": false, "description": "a\u{1b}[2Jb"}).to_string();
        let Err(ChannelError::Conflict(why)) = poll_response(&answer(409, &conflict)) else { panic!("not a conflict") };
        assert_eq!(why, "a\\u{1b}[2Jb");
    }

    #[test]
    fn a_long_answer_is_split_within_the_limit_at_line_ends_and_loses_nothing() {
        let paragraph = format!("{}\n", "word ".repeat(300));
        let text = paragraph.repeat(10);
        let parts = split(&text, 4096);
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|p| utf16_len(p) <= 4096));
        assert_eq!(parts.concat(), text);
        assert!(parts[..parts.len() - 1].iter().all(|p| p.ends_with('\n')), "cut at line ends");
        // Characters outside the BMP count twice, as Telegram counts them.
        let emoji = "🦀".repeat(3000);
        let parts = split(&emoji, 4096);
        assert_eq!((parts.len(), parts.concat() == emoji), (2, true));
        assert!(parts.iter().all(|p| utf16_len(p) <= 4096));
        assert_eq!(send_requests("70", "   ").len(), 0, "nothing to send");
        assert_eq!(send_requests("70", &text).len(), split(&text, 4096).len());
    }
}

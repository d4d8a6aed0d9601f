//! A fake Telegram Bot API (specs/channels/README.md, "Telegram") for the
//! channels' tests: real HTTP on loopback, speaking the methods a channel
//! uses as the Bot API does (`getMe`, `getUpdates` with its offset and long
//! poll, `sendMessage` with its 4096-character limit), with updates the
//! test scripts and faults it injects: a poll that stalls past the client's
//! timeout, `409 Conflict`, `429` with `retry_after`, a connection reset,
//! a `500`, malformed updates, a flood.
//!
//! The offset works as Telegram's does: a poll with `offset` N confirms
//! every update below N, which is then gone for good; a poll without one
//! gets the oldest kept. A poll with nothing to give waits up to its
//! `timeout` seconds for an update.
//!
//! A test drives it from Rust ([`Fake`]) or, from a shell, over its
//! control paths: `POST /control/message` (`{"from", "chat", "text"}`),
//! `/control/raw` (an update as given, malformed or not), `/control/flood`
//! (`{"from", "chat", "count"}`), `/control/fault` (`{"on": "poll" |
//! "send", "kind": "stall" | "conflict" | "retry_after" | "reset" |
//! "error", "seconds"}`), `GET /control/sent` and `/control/polls`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinSet;

/// The most characters `sendMessage` takes, as Telegram's limit.
pub const MAX_TEXT: usize = 4096;
/// The most updates one poll returns (Telegram's `limit` at most).
const MAX_LIMIT: usize = 100;

/// A fault for the next poll or send.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Answer only after this long (an empty result): past a client's
    /// timeout, a stalled connection.
    Stall(Duration),
    /// `409 Conflict`: another poller, or a webhook is set.
    Conflict,
    /// `429 Too Many Requests` with `parameters.retry_after`.
    RetryAfter(u32),
    /// The connection closed with no answer.
    Reset,
    /// `500 Internal Server Error`.
    Error,
}

impl Fault {
    fn parse(spec: &Value) -> Option<Fault> {
        let seconds = spec["seconds"].as_u64().unwrap_or(1);
        Some(match spec["kind"].as_str()? {
            "stall" => Fault::Stall(Duration::from_secs(seconds)),
            "conflict" => Fault::Conflict,
            "retry_after" => Fault::RetryAfter(u32::try_from(seconds).ok()?),
            "reset" => Fault::Reset,
            "error" => Fault::Error,
            _ => return None,
        })
    }
}

#[derive(Default)]
struct State {
    next_update: i64,
    next_message: i64,
    /// Kept updates: (update_id, the update as sent).
    updates: VecDeque<(i64, Value)>,
    poll_faults: VecDeque<Fault>,
    send_faults: VecDeque<Fault>,
    sent: Vec<Value>,
    polls: Vec<Value>,
}

struct Shared {
    token: String,
    state: Mutex<State>,
    arrived: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `update` (its `update_id` set to the next one) and wakes a waiting poll.
    fn push(&self, mut update: Value) -> i64 {
        let id = {
            let mut state = self.lock();
            state.next_update += 1;
            let id = state.next_update;
            if let Value::Object(fields) = &mut update {
                fields.insert("update_id".into(), id.into());
            }
            state.updates.push_back((id, update));
            id
        };
        self.arrived.notify_waiters();
        id
    }
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// A private chat's text message from user `from`, as Telegram sends it.
fn message_update(from: i64, chat: i64, text: &str) -> Value {
    json!({
        "message": {
            "message_id": 1,
            "from": {"id": from, "is_bot": false, "first_name": format!("user{from}")},
            "chat": {"id": chat, "type": "private"},
            "date": unix_now(),
            "text": text,
        }
    })
}

/// A running fake, on loopback. Dropping it stops it.
pub struct Fake {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
}

impl Fake {
    /// Serves a bot whose token is `token` at a free port of 127.0.0.1, on
    /// the current tokio runtime.
    pub async fn start(token: &str) -> std::io::Result<Fake> {
        Fake::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), token).await
    }

    /// Serves on `listen`.
    pub async fn start_on(listen: SocketAddr, token: &str) -> std::io::Result<Fake> {
        let shared = Arc::new(Shared { token: token.to_owned(), state: Mutex::default(), arrived: Notify::new() });
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(accept(listener, shared.clone(), stopped));
        Ok(Fake { addr, shared, stop: Some(stop) })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API's base, as a channel's config names it: `http://127.0.0.1:PORT`.
    pub fn api_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// User `from` writes `text` in chat `chat`; returns its update ID.
    pub fn message(&self, from: i64, chat: i64, text: &str) -> i64 {
        self.shared.push(message_update(from, chat, text))
    }

    /// An update as given (its `update_id` set when it is an object):
    /// malformed ones included.
    pub fn raw(&self, update: Value) -> i64 {
        self.shared.push(update)
    }

    /// The next poll (`send: false`) or send meets `fault`.
    pub fn fault(&self, send: bool, fault: Fault) {
        let mut state = self.shared.lock();
        if send {
            state.send_faults.push_back(fault)
        } else {
            state.poll_faults.push_back(fault)
        }
    }

    /// The messages sent, in order: `{"chat_id", "text"}`.
    pub fn sent(&self) -> Vec<Value> {
        self.shared.lock().sent.clone()
    }

    /// The polls made, in order: `{"offset", "timeout", "limit"}`.
    pub fn polls(&self) -> Vec<Value> {
        self.shared.lock().polls.clone()
    }

    /// Serves until the process ends (the binary).
    pub async fn run_forever(mut self) {
        let _keep = self.stop.take();
        std::future::pending::<()>().await;
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>, mut stopped: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let shared = shared.clone();
                    connections.spawn(async move {
                        let service = hyper::service::service_fn(move |request| handle(shared.clone(), request));
                        // A reset fault is an error of the service: hyper
                        // then closes the connection without an answer.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(TokioTimer::new())
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// The connection is reset: the service fails, and hyper drops it.
#[derive(Debug)]
struct Reset;

impl std::fmt::Display for Reset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a reset the test asked for")
    }
}

impl std::error::Error for Reset {}

type Answer = Result<Response<Full<Bytes>>, Reset>;

fn reply(status: StatusCode, body: &Value) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", "application/json".parse().expect("a valid header"));
    Ok(response)
}

fn ok(result: Value) -> Answer {
    reply(StatusCode::OK, &json!({"ok": true, "result": result}))
}

/// The Bot API's error answer.
fn failure(status: StatusCode, description: &str, parameters: Option<Value>) -> Answer {
    let mut body = json!({"ok": false, "error_code": status.as_u16(), "description": description});
    if let Some(parameters) = parameters {
        body["parameters"] = parameters;
    }
    reply(status, &body)
}

/// A method's parameters from the query string and a JSON or form body,
/// as the Bot API takes them.
fn parameters(query: Option<&str>, content_type: &str, body: &[u8]) -> Result<serde_json::Map<String, Value>, String> {
    let mut params = serde_json::Map::new();
    let mut add_form = |text: &[u8]| {
        for (key, value) in form_urlencoded::parse(text) {
            let value = value.parse::<i64>().map_or_else(|_| Value::from(value.as_ref()), Value::from);
            params.insert(key.into_owned(), value);
        }
    };
    add_form(query.unwrap_or_default().as_bytes());
    if body.is_empty() {
        return Ok(params);
    }
    if content_type.starts_with("application/json") {
        match serde_json::from_slice(body) {
            Ok(Value::Object(fields)) => params.extend(fields),
            _ => return Err("Bad Request: can't parse JSON object".into()),
        }
    } else {
        add_form(body);
    }
    Ok(params)
}

async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Answer {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|collected| collected.to_bytes()).unwrap_or_default();
    let content_type = parts.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let path = parts.uri.path().to_owned();
    if let Some(control) = path.strip_prefix("/control/") {
        return control_call(&shared, control, &body);
    }
    let Some((token, method)) = path.strip_prefix("/bot").and_then(|rest| rest.split_once('/')) else {
        return failure(StatusCode::NOT_FOUND, "Not Found", None);
    };
    if token != shared.token {
        return failure(StatusCode::UNAUTHORIZED, "Unauthorized", None);
    }
    let params = match parameters(parts.uri.query(), &content_type, &body) {
        Ok(params) => params,
        Err(why) => return failure(StatusCode::BAD_REQUEST, &why, None),
    };
    match method {
        "getMe" => ok(json!({"id": 1, "is_bot": true, "first_name": "ClawOS test bot", "username": "clawos_test_bot"})),
        "getUpdates" => get_updates(&shared, &params).await,
        "sendMessage" => send_message(&shared, &params),
        _ => failure(StatusCode::NOT_FOUND, "Not Found: method not found", None),
    }
}

/// What a fault answers, when it is not a stall.
fn faulted(fault: &Fault) -> Option<Answer> {
    Some(match fault {
        Fault::Stall(_) => return None,
        Fault::Conflict => failure(
            StatusCode::CONFLICT,
            "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
            None,
        ),
        Fault::RetryAfter(seconds) => failure(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("Too Many Requests: retry after {seconds}"),
            Some(json!({"retry_after": seconds})),
        ),
        Fault::Reset => Err(Reset),
        Fault::Error => failure(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error", None),
    })
}

async fn get_updates(shared: &Shared, params: &serde_json::Map<String, Value>) -> Answer {
    let offset = params.get("offset").and_then(Value::as_i64);
    let timeout = params.get("timeout").and_then(Value::as_u64).unwrap_or(0);
    let limit = params.get("limit").and_then(Value::as_u64).map_or(MAX_LIMIT, |l| (l as usize).clamp(1, MAX_LIMIT));
    let fault = {
        let mut state = shared.lock();
        state.polls.push(json!({"offset": offset, "timeout": timeout, "limit": limit}));
        // The offset confirms what is below it: gone for good.
        if let Some(offset) = offset {
            state.updates.retain(|(id, _)| *id >= offset);
        }
        state.poll_faults.pop_front()
    };
    if let Some(fault) = fault {
        if let Some(answer) = faulted(&fault) {
            return answer;
        }
        if let Fault::Stall(time) = fault {
            tokio::time::sleep(time).await;
            return ok(json!([]));
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    loop {
        // Registered before the look, so an update pushed in between wakes it.
        let arrived = shared.arrived.notified();
        let batch: Vec<Value> = {
            let state = shared.lock();
            let from = offset.unwrap_or(i64::MIN);
            state.updates.iter().filter(|(id, _)| *id >= from).take(limit).map(|(_, u)| u.clone()).collect()
        };
        if !batch.is_empty() || tokio::time::Instant::now() >= deadline {
            return ok(Value::Array(batch));
        }
        let _ = tokio::time::timeout_at(deadline, arrived).await;
    }
}

fn send_message(shared: &Shared, params: &serde_json::Map<String, Value>) -> Answer {
    if let Some(fault) = shared.lock().send_faults.pop_front() {
        if let Some(answer) = faulted(&fault) {
            return answer;
        }
    }
    let (Some(chat), Some(text)) = (params.get("chat_id"), params.get("text").and_then(Value::as_str)) else {
        return failure(StatusCode::BAD_REQUEST, "Bad Request: chat_id and text are required", None);
    };
    let length = text.chars().count();
    if length == 0 {
        return failure(StatusCode::BAD_REQUEST, "Bad Request: message text is empty", None);
    }
    if length > MAX_TEXT {
        return failure(StatusCode::BAD_REQUEST, "Bad Request: message is too long", None);
    }
    let mut state = shared.lock();
    state.next_message += 1;
    state.sent.push(json!({"chat_id": chat, "text": text}));
    let chat_id = chat.as_i64().unwrap_or_default();
    ok(json!({
        "message_id": state.next_message,
        "from": {"id": 1, "is_bot": true, "first_name": "ClawOS test bot"},
        "chat": {"id": chat_id, "type": "private"},
        "date": unix_now(),
        "text": text,
    }))
}

fn control_call(shared: &Shared, call: &str, body: &[u8]) -> Answer {
    let spec: Value = if body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice(body) {
            Ok(spec) => spec,
            Err(e) => return failure(StatusCode::BAD_REQUEST, &format!("the control body: {e}"), None),
        }
    };
    let user = |name: &str| spec[name].as_i64();
    match call {
        "message" => match (user("from"), user("chat"), spec["text"].as_str()) {
            (Some(from), Some(chat), Some(text)) => ok(json!(shared.push(message_update(from, chat, text)))),
            _ => failure(StatusCode::BAD_REQUEST, "message: from, chat and text", None),
        },
        "raw" => ok(json!(shared.push(spec))),
        "flood" => match (user("from"), user("chat"), spec["count"].as_u64()) {
            (Some(from), Some(chat), Some(count)) => {
                let ids: Vec<i64> =
                    (1..=count).map(|n| shared.push(message_update(from, chat, &format!("flood {n}")))).collect();
                ok(json!(ids))
            }
            _ => failure(StatusCode::BAD_REQUEST, "flood: from, chat and count", None),
        },
        "fault" => match Fault::parse(&spec) {
            Some(fault) => {
                let send = spec["on"].as_str() == Some("send");
                let mut state = shared.lock();
                if send {
                    state.send_faults.push_back(fault)
                } else {
                    state.poll_faults.push_back(fault)
                }
                ok(json!(true))
            }
            None => failure(StatusCode::BAD_REQUEST, "fault: kind stall, conflict, retry_after, reset or error", None),
        },
        "sent" => ok(Value::Array(shared.lock().sent.clone())),
        "polls" => ok(Value::Array(shared.lock().polls.clone())),
        _ => failure(StatusCode::NOT_FOUND, "no such control", None),
    }
}

//! The HTTP server: one hyper HTTP/1.1 connection per accepted socket, each
//! request recorded, then answered with the script's next reply.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::{Reply, Script};

/// How long a cut waits after its last event before the connection is
/// dropped, so that hyper has written that event to the socket: hyper
/// drops a connection whose body fails without flushing what it holds.
const CUT_GRACE: Duration = Duration::from_millis(20);

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    /// `POST`, ...
    pub method: String,
    /// The path and query, as sent (`/v1/chat/completions`).
    pub path: String,
    /// The headers in the order sent, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `null` when empty or not JSON.
    pub body: Value,
    /// The body as text (invalid UTF-8 replaced).
    pub body_text: String,
    /// Which of the script's replies answered it (its index); `None` for a
    /// request past the end of the script or to another path.
    pub reply: Option<usize>,
    /// When its head arrived, milliseconds since the Unix epoch (a client's
    /// backoff is the time between two of these).
    #[serde(default)]
    pub at_ms: u64,
    /// The host and port an absolute-form request line named
    /// (`POST http://host:port/v1/... HTTP/1.1`): the client used this
    /// server as its HTTP proxy to reach that origin. `None` for a request
    /// sent to the server as the origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxied_to: Option<String>,
}

impl Recorded {
    /// The value of the header `name` (any case), the first if sent twice.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// The protocol a path speaks, for the error bodies the server writes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Protocol {
    OpenAi,
    Anthropic,
}

/// What the connections share.
struct Shared {
    replies: Vec<Reply>,
    pages: std::collections::BTreeMap<String, String>,
    state: Mutex<State>,
    log: Option<Mutex<std::fs::File>>,
    /// Where each streamed event's departure is noted, when given.
    events_log: Option<Mutex<std::fs::File>>,
}

#[derive(Default)]
struct State {
    next: usize,
    requests: Vec<Recorded>,
}

/// A running scripted provider, on loopback. Dropping it stops it: the
/// listener closes and open connections are dropped.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves `script` on `127.0.0.1` at a free port, on the current tokio
    /// runtime.
    pub async fn start(script: Script) -> std::io::Result<Server> {
        Server::start_on(script, SocketAddr::from(([127, 0, 0, 1], 0)), None, None).await
    }

    /// Serves `script` on `listen`, on the current tokio runtime, appending
    /// each recorded request to `requests_log` as a JSON line when given,
    /// and to `events_log` a line `{"reply", "event", "at_ms"}` as each
    /// streamed event is handed to the connection (the time a token leaves
    /// the provider, for the console's latency figure).
    pub async fn start_on(
        script: Script,
        listen: SocketAddr,
        requests_log: Option<&Path>,
        events_log: Option<&Path>,
    ) -> std::io::Result<Server> {
        let shared = Arc::new(Shared::new(script, requests_log, events_log)?);
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(accept(listener, shared.clone(), stopped));
        Ok(Server { addr, shared, stop: Some(stop), thread: None })
    }

    /// Serves `script` on `127.0.0.1` at a free port from a thread of its
    /// own with its own runtime: for tests whose client blocks.
    pub fn start_background(script: Script) -> std::io::Result<Server> {
        let shared = Arc::new(Shared::new(script, None, None)?);
        let listener = std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (stop, stopped) = oneshot::channel();
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new().name("scripted-provider".into()).spawn(move || {
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => accept(listener, thread_shared, stopped).await,
                    Err(e) => eprintln!("clawos-scripted-provider: {e}"),
                }
            });
        })?;
        Ok(Server { addr, shared, stop: Some(stop), thread: Some(thread) })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: the API root a provider's `base_url`
    /// names (it POSTs to `{api_url}/chat/completions` or
    /// `{api_url}/messages`).
    pub fn api_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    /// Every request received so far, in order of arrival.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state.lock().expect("state lock").requests.clone()
    }

    /// How many of the script's replies have been served (or begun).
    pub fn served(&self) -> usize {
        self.shared.state.lock().expect("state lock").next.min(self.shared.replies.len())
    }

    /// How many of the script's replies are still to be served.
    pub fn remaining(&self) -> usize {
        self.shared.replies.len() - self.served()
    }

    /// Serves until the process ends (the binary's main loop).
    pub async fn run_forever(self) {
        let _serving = self;
        std::future::pending::<()>().await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn new(script: Script, requests_log: Option<&Path>, events_log: Option<&Path>) -> std::io::Result<Shared> {
        script.check().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let open = |path: Option<&Path>| -> std::io::Result<Option<Mutex<std::fs::File>>> {
            path.map(|path| Ok(Mutex::new(std::fs::OpenOptions::new().create(true).append(true).open(path)?)))
                .transpose()
        };
        Ok(Shared {
            replies: script.replies,
            pages: script.pages,
            state: Mutex::new(State::default()),
            log: open(requests_log)?,
            events_log: open(events_log)?,
        })
    }

    /// Notes that event `event` of reply `reply` leaves now.
    fn note_sent(&self, reply: usize, event: usize) {
        let Some(log) = &self.events_log else { return };
        let line = serde_json::json!({"reply": reply, "event": event, "at_ms": now_ms()}).to_string() + "\n";
        let mut file = log.lock().expect("events log lock");
        if let Err(e) = file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
            eprintln!("clawos-scripted-provider: the events log: {e}");
        }
    }

    /// Records a request and picks its reply: the next one for an
    /// endpoint, none for another path.
    fn record(&self, mut request: Recorded, endpoint: bool) -> (usize, Option<Reply>) {
        let mut state = self.state.lock().expect("state lock");
        let number = state.next;
        let reply = if endpoint {
            state.next += 1;
            self.replies.get(number).cloned()
        } else {
            None
        };
        request.reply = reply.as_ref().map(|_| number);
        if let Some(log) = &self.log {
            let mut line = serde_json::to_string(&request).expect("a request serializes");
            line.push('\n');
            let mut file = log.lock().expect("log lock");
            if let Err(e) = file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
                eprintln!("clawos-scripted-provider: the requests log: {e}");
            }
        }
        state.requests.push(request);
        (number, reply)
    }
}

/// Accepts connections until `stopped`; dropping the set of connections
/// then drops every one still open.
async fn accept(listener: TcpListener, shared: Arc<Shared>, mut stopped: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let shared = shared.clone();
                    connections.spawn(async move {
                        let service = hyper::service::service_fn(move |request| handle(shared.clone(), request));
                        // A connection's error is the test's business (a
                        // client that went away, a cut the script asked for).
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(TokioTimer::new())
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                // Out of descriptors and the like: try again shortly.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Records `request` and answers it.
async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Result<Response<ReplyBody>, Infallible> {
    let at_ms = now_ms();
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|collected| collected.to_bytes()).unwrap_or_default();
    let path = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    let protocol = match parts.uri.path() {
        "/v1/chat/completions" => Some(Protocol::OpenAi),
        "/v1/messages" => Some(Protocol::Anthropic),
        _ => None,
    };
    let endpoint = protocol.is_some() && parts.method == Method::POST;
    let recorded = Recorded {
        method: parts.method.to_string(),
        path: path.clone(),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        body_text: String::from_utf8_lossy(&body).into_owned(),
        reply: None,
        at_ms,
        proxied_to: parts.uri.authority().map(ToString::to_string),
    };
    let (number, reply) = shared.record(recorded, endpoint);
    let page = (parts.method == Method::GET).then(|| shared.pages.get(parts.uri.path())).flatten();
    let response = match (protocol, endpoint, reply) {
        (None, _, _) if page.is_some() => {
            full(StatusCode::OK, "text/plain; charset=utf-8", page.cloned().unwrap_or_default())
        }
        (None, _, _) => error(Protocol::OpenAi, StatusCode::NOT_FOUND, "not_found", &format!("no such path: {path}")),
        (Some(protocol), false, _) => error(
            protocol,
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            &format!("{} {path}: only POST", parts.method),
        ),
        (Some(protocol), true, None) => error(
            protocol,
            StatusCode::INTERNAL_SERVER_ERROR,
            "script_exhausted",
            &format!(
                "clawos-scripted-provider: the script is exhausted: this is request {} and it has {} replies",
                number + 1,
                shared.replies.len()
            ),
        ),
        (Some(protocol), true, Some(reply)) => {
            let sent = Sent { shared: shared.clone(), reply: number, next: 0 };
            serve(protocol, reply, sent).await
        }
    };
    Ok(response)
}

/// The wall clock, milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

/// The response for one scripted reply (number `number` of the script).
async fn serve(protocol: Protocol, reply: Reply, sent: Sent) -> Response<ReplyBody> {
    if reply.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(reply.delay_ms)).await;
    }
    let status = StatusCode::from_u16(reply.status).expect("checked when the script was loaded");
    let mut response = if let Some(body) = reply.body {
        let (text, content_type) = match body {
            Value::String(text) => {
                let json = serde_json::from_str::<Value>(&text).is_ok();
                (text, if json { "application/json" } else { "text/plain; charset=utf-8" })
            }
            json => (json.to_string(), "application/json"),
        };
        full(status, content_type, text)
    } else if reply.events.is_empty() && reply.cut_after.is_none() && !status.is_success() {
        let reason = status.canonical_reason().unwrap_or("error");
        error(protocol, status, error_type(protocol, status), &format!("scripted {}: {reason}", status.as_u16()))
    } else {
        let events = reply.events.iter().map(|event| Bytes::from(event.to_wire()));
        let body = match reply.cut_after {
            Some(count) => Stream::new(events.take(count), reply.event_delay_ms, true, sent),
            None => Stream::new(events, reply.event_delay_ms, false, sent),
        };
        let mut response = Response::new(ReplyBody::Stream(body));
        *response.status_mut() = status;
        response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        response
    };
    for (name, value) in &reply.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("checked when the script was loaded");
        let value = HeaderValue::from_str(value).expect("checked when the script was loaded");
        response.headers_mut().insert(name, value);
    }
    response
}

/// The error `type` the real API gives for `status`.
fn error_type(protocol: Protocol, status: StatusCode) -> &'static str {
    match (protocol, status.as_u16()) {
        (Protocol::OpenAi, 400) => "invalid_request_error",
        (Protocol::OpenAi, 401) => "invalid_api_key",
        (Protocol::OpenAi, 429) => "rate_limit_exceeded",
        (Protocol::OpenAi, _) => "server_error",
        (Protocol::Anthropic, 400) => "invalid_request_error",
        (Protocol::Anthropic, 401) => "authentication_error",
        (Protocol::Anthropic, 403) => "permission_error",
        (Protocol::Anthropic, 404) => "not_found_error",
        (Protocol::Anthropic, 413) => "request_too_large",
        (Protocol::Anthropic, 429) => "rate_limit_error",
        (Protocol::Anthropic, 529) => "overloaded_error",
        (Protocol::Anthropic, _) => "api_error",
    }
}

/// The protocol's error JSON.
fn error(protocol: Protocol, status: StatusCode, kind: &str, message: &str) -> Response<ReplyBody> {
    let body = match protocol {
        Protocol::OpenAi => crate::openai::error_json(kind, message),
        Protocol::Anthropic => crate::anthropic::error_json(kind, message),
    };
    full(status, "application/json", body.to_string())
}

fn full(status: StatusCode, content_type: &'static str, body: String) -> Response<ReplyBody> {
    let mut response = Response::new(ReplyBody::Full(Some(Bytes::from(body))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A response body: whole, or a scripted event stream.
enum ReplyBody {
    Full(Option<Bytes>),
    Stream(Stream),
}

/// The error that makes hyper drop the connection mid-body.
#[derive(Debug)]
struct Cut;

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the script cuts the stream here")
    }
}

impl std::error::Error for Cut {}

/// The events still to write, the wait before the next, and whether the
/// stream ends cut.
struct Stream {
    events: VecDeque<Bytes>,
    delay: Duration,
    cut: bool,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    cut_armed: bool,
    sent: Sent,
}

/// Where a stream notes its events' departures: the shared state (its
/// events log), its reply's number, and the next event's.
struct Sent {
    shared: Arc<Shared>,
    reply: usize,
    next: usize,
}

impl Stream {
    fn new(events: impl Iterator<Item = Bytes>, delay_ms: u64, cut: bool, sent: Sent) -> Stream {
        let delay = Duration::from_millis(delay_ms);
        Stream { events: events.collect(), delay, cut, sleep: None, cut_armed: false, sent }
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Cut;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Cut>>> {
        let stream = match self.get_mut() {
            ReplyBody::Full(bytes) => return Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            ReplyBody::Stream(stream) => stream,
        };
        if let Some(sleep) = stream.sleep.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            stream.sleep = None;
        }
        if let Some(event) = stream.events.pop_front() {
            stream.sent.shared.note_sent(stream.sent.reply, stream.sent.next);
            stream.sent.next += 1;
            if !stream.events.is_empty() && !stream.delay.is_zero() {
                stream.sleep = Some(Box::pin(tokio::time::sleep(stream.delay)));
            }
            return Poll::Ready(Some(Ok(Frame::data(event))));
        }
        if !stream.cut {
            return Poll::Ready(None);
        }
        if !stream.cut_armed {
            // Let hyper flush the last event first (it does when the body
            // is pending), then fail the body.
            stream.cut_armed = true;
            let mut sleep = Box::pin(tokio::time::sleep(CUT_GRACE));
            if sleep.as_mut().poll(cx).is_pending() {
                stream.sleep = Some(sleep);
                return Poll::Pending;
            }
        }
        Poll::Ready(Some(Err(Cut)))
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ReplyBody::Full(bytes) => bytes.is_none(),
            ReplyBody::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReplyBody::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            ReplyBody::Stream(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_bodies_follow_each_protocol() {
        let openai = crate::openai::error_json("rate_limit_exceeded", "slow down");
        assert_eq!(openai["error"]["type"], "rate_limit_exceeded");
        assert_eq!(openai["error"]["message"], "slow down");
        let anthropic = crate::anthropic::error_json("rate_limit_error", "slow down");
        assert_eq!(anthropic, json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}));
        assert_eq!(error_type(Protocol::Anthropic, StatusCode::TOO_MANY_REQUESTS), "rate_limit_error");
    }
}

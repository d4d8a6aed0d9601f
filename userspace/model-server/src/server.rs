//! HTTP/1.1 on the Unix socket: the three routes, the queue in front of the
//! model (one answer at a time), the lazy load, and the answer as one JSON
//! body or as server-sent events.

use std::convert::Infallible;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, Mutex, OwnedMutexGuard, Semaphore};
use tracing::{debug, info, warn};

use crate::api::{self, ApiError, MODEL_ID};
use crate::engine::{Finish, GenerateError, Model, Outcome, Progress};

/// The largest request body: a long conversation is far less (the whole
/// context window is 4096 tokens, some 16 KiB of text).
const MAX_BODY: usize = 4 << 20;
/// Requests waiting for the model beyond the one it answers; more get 429,
/// which a client retries, rather than an ever longer wait.
const MAX_QUEUE: usize = 16;

type Body = BoxBody<Bytes, Infallible>;

/// What one client may hold of the server before the model sees its
/// request (specs/agent/README.md, "The in-box model"). The socket is
/// agent-loop's (mode 0660, its group), but a stuck or hostile client must
/// still not hold the answers of every other agent: so connections are
/// capped, a request's head and body must arrive in time, and a request
/// takes its place in the queue before its body is read.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; more wait in the socket's backlog until
    /// one closes. agent-loop holds one per answer it waits for.
    pub connections: usize,
    /// From a connection's start (or its last answer) to a whole request
    /// head; then hyper closes it.
    pub header_timeout: Duration,
    /// From the head to the whole body; then 408.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { connections: 32, header_timeout: Duration::from_secs(10), body_timeout: Duration::from_secs(30) }
    }
}

/// The server's state: the model (loaded at the first request) behind the
/// queue, and counters for `/health`.
pub struct Server {
    model_dir: PathBuf,
    limits: Limits,
    /// Where the system turns' states it computes are kept, and the cap
    /// in bytes ([`crate::prefix`]).
    prefix_cache: Option<(PathBuf, u64)>,
    /// Whoever holds the lock is the one answer running; tokio's mutex
    /// serves waiters in order. None until a load succeeds.
    model: Arc<Mutex<Option<Arc<Model>>>>,
    loaded: AtomicBool,
    busy: AtomicBool,
    queued: AtomicUsize,
    answers: AtomicU64,
    cancelled: AtomicU64,
    completion_tokens: AtomicU64,
    load_error: std::sync::Mutex<Option<String>>,
    next_id: AtomicU64,
}

impl Server {
    /// A server of the model in `model_dir`, not loaded yet, with the
    /// default [`Limits`].
    pub fn new(model_dir: impl Into<PathBuf>) -> Arc<Self> {
        Self::with_limits(model_dir, Limits::default())
    }

    /// A server of the model in `model_dir` with `limits`.
    pub fn with_limits(model_dir: impl Into<PathBuf>, limits: Limits) -> Arc<Self> {
        Self::with_options(model_dir, limits, None)
    }

    /// A server of the model in `model_dir` with `limits`, keeping the
    /// states of the system turns it reads in `prefix_cache` (a
    /// directory and its cap in bytes).
    pub fn with_options(
        model_dir: impl Into<PathBuf>,
        limits: Limits,
        prefix_cache: Option<(PathBuf, u64)>,
    ) -> Arc<Self> {
        Arc::new(Server {
            model_dir: model_dir.into(),
            limits,
            prefix_cache,
            model: Arc::new(Mutex::new(None)),
            loaded: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            answers: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            completion_tokens: AtomicU64::new(0),
            load_error: std::sync::Mutex::new(None),
            next_id: AtomicU64::new(0),
        })
    }

    /// Serves connections from `listener` until the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: UnixListener) {
        let connections = Arc::new(Semaphore::new(self.limits.connections));
        loop {
            // Never closed, so acquiring fails only if that changes.
            let Ok(permit) = connections.clone().acquire_owned().await else { return };
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // EMFILE and the like: wait for a connection to close.
                    warn!(%error, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let server = self.clone();
            let header_timeout = self.limits.header_timeout;
            tokio::spawn(async move {
                let _permit = permit;
                let service = hyper::service::service_fn(move |request| {
                    let server = server.clone();
                    async move { Ok::<_, Infallible>(server.route(request).await) }
                });
                if let Err(error) = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    debug!(%error, "connection ended");
                }
            });
        }
    }

    async fn route(self: Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        let (method, path) = (request.method().clone(), request.uri().path().to_owned());
        let allowed = match path.as_str() {
            "/health" | "/v1/models" => (Method::GET, "GET"),
            "/v1/chat/completions" => (Method::POST, "POST"),
            _ => {
                return error(&ApiError {
                    status: 404,
                    kind: "invalid_request_error",
                    code: Some("unknown_url"),
                    param: None,
                    message: format!("no route {path}"),
                })
            }
        };
        if method != allowed.0 {
            let mut response = error(&ApiError {
                status: 405,
                kind: "invalid_request_error",
                code: None,
                param: None,
                message: format!("{path} takes {}", allowed.1),
            });
            response.headers_mut().insert(ALLOW, HeaderValue::from_static(allowed.1));
            return response;
        }
        match path.as_str() {
            "/health" => json_response(StatusCode::OK, &self.health()),
            "/v1/models" => json_response(StatusCode::OK, &api::models()),
            _ => match self.chat(request).await {
                Ok(response) => response,
                Err(failure) => {
                    if failure.status >= 500 {
                        warn!(status = failure.status, message = %failure.message, "refused a chat completion");
                    } else {
                        debug!(status = failure.status, message = %failure.message, "refused a chat completion");
                    }
                    error(&failure)
                }
            },
        }
    }

    fn health(&self) -> Value {
        let load_error = self.load_error.lock().map(|e| e.clone()).unwrap_or_default();
        let state = match (self.loaded.load(Ordering::Relaxed), &load_error) {
            (true, _) => "loaded",
            (false, Some(_)) => "failed",
            (false, None) => "unloaded",
        };
        json!({
            "status": "ok",
            "model": MODEL_ID,
            "model_state": state,
            "weights": crate::engine::choose_weights().name(),
            "load_error": load_error,
            "busy": self.busy.load(Ordering::Relaxed),
            "queued": self.queued.load(Ordering::Relaxed),
            "answers": self.answers.load(Ordering::Relaxed),
            "cancelled": self.cancelled.load(Ordering::Relaxed),
            "completion_tokens": self.completion_tokens.load(Ordering::Relaxed),
        })
    }

    /// The model, loaded now if it is not yet: the caller holds the lock, so
    /// the requests behind it wait for the load instead of loading too. A
    /// failed load is retried by the next request (the file may be fixed).
    async fn loaded_model(&self, slot: &mut OwnedMutexGuard<Option<Arc<Model>>>) -> Result<Arc<Model>, ApiError> {
        if let Some(model) = slot.as_ref() {
            return Ok(model.clone());
        }
        let (dir, cache) = (self.model_dir.clone(), self.prefix_cache.clone());
        info!(dir = %dir.display(), "loading the model");
        let started = Instant::now();
        let loaded = tokio::task::spawn_blocking(move || Model::load_with_cache(&dir, cache)).await;
        let failure = |message: String| ApiError {
            status: 503,
            kind: "server_error",
            code: Some("model_unavailable"),
            param: None,
            message,
        };
        match loaded {
            Ok(Ok(model)) => {
                info!(
                    seconds = started.elapsed().as_secs_f64(),
                    context = model.context(),
                    weights = model.weights().name(),
                    "model loaded"
                );
                let model = Arc::new(model);
                **slot = Some(model.clone());
                self.loaded.store(true, Ordering::Relaxed);
                if let Ok(mut error) = self.load_error.lock() {
                    *error = None;
                }
                Ok(model)
            }
            Ok(Err(load)) => {
                let message = format!("the model cannot be loaded: {load}");
                if let Ok(mut error) = self.load_error.lock() {
                    *error = Some(load.to_string());
                }
                Err(failure(message))
            }
            Err(panic) => Err(failure(format!("loading the model panicked: {panic}"))),
        }
    }

    async fn chat(self: Arc<Self>, request: Request<Incoming>) -> Result<Response<Body>, ApiError> {
        let too_large = || ApiError {
            status: 413,
            kind: "invalid_request_error",
            code: None,
            param: None,
            message: format!("the body is over {MAX_BODY} bytes"),
        };
        // Refused before a byte of the body is read: a declared length over
        // the cap, then a full queue.
        let declared = request.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|length| length > MAX_BODY as u64) {
            return Err(too_large());
        }
        let waiting = Waiting::enter(&self.queued)?;
        let reading = Limited::new(request.into_body(), MAX_BODY).collect();
        let body = match tokio::time::timeout(self.limits.body_timeout, reading).await {
            Err(_) => {
                return Err(ApiError {
                    status: 408,
                    kind: "invalid_request_error",
                    code: Some("request_timeout"),
                    param: None,
                    message: format!("the body did not arrive within {} s", self.limits.body_timeout.as_secs()),
                })
            }
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
            Ok(Err(e)) => return Err(ApiError::invalid(None, format!("reading the body: {e}"))),
            Ok(Ok(body)) => body,
        };
        let number = self.next_id.fetch_add(1, Ordering::Relaxed);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let seed = (now.as_nanos() as u64) ^ number.rotate_left(32);
        let checked = api::parse_chat(&body.to_bytes(), seed)?;
        let id = format!("chatcmpl-{:x}{number:x}", now.as_micros());
        let created = now.as_secs();

        // Wait for the model: in order, and not in an unbounded line (the
        // place was taken before the body was read).
        let mut slot = self.model.clone().lock_owned().await;
        drop(waiting);
        let model = self.loaded_model(&mut slot).await?;
        let prompt = model.prompt(&checked.messages).map_err(|e| ApiError::invalid(Some("messages"), e))?;
        if prompt.len() >= model.context() {
            return Err(ApiError {
                status: 400,
                kind: "invalid_request_error",
                code: Some("context_length_exceeded"),
                param: Some("messages".into()),
                message: format!(
                    "the prompt is {} tokens; the context window is {} tokens, answer included",
                    prompt.len(),
                    model.context()
                ),
            });
        }
        if let Some(token) = checked.generation.logit_bias.keys().find(|&&t| t as usize >= model.vocab_size()) {
            return Err(ApiError::invalid(
                Some("logit_bias"),
                format!("token {token} is not in the vocabulary ({} tokens)", model.vocab_size()),
            ));
        }

        // The answer runs on a blocking thread, which holds the lock until it
        // ends. Text goes out through the channel; once the receiver is gone
        // (the client closed the connection, so hyper dropped the body or
        // this future) the next send fails and the generation stops.
        let (sender, receiver) = mpsc::unbounded_channel();
        let server = self.clone();
        let generation = checked.generation;
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            server.busy.store(true, Ordering::Relaxed);
            let result = model.generate(&prompt, &generation, &mut |progress| {
                let event = match progress {
                    Progress::Text(text) => Event::Text(text.to_owned()),
                    Progress::Prompt { done, total } => Event::Prompt { done, total },
                };
                sender.send(event).is_ok()
            });
            server.record(&result);
            server.busy.store(false, Ordering::Relaxed);
            // Nobody may listen any more; that is fine.
            let _ = sender.send(Event::Done(result));
        });

        if checked.stream {
            let body = EventStream { receiver, id, created, started: false, ended: false };
            let mut response = Response::new(body.boxed());
            response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            return Ok(response);
        }
        let mut receiver = receiver;
        let mut text = String::new();
        while let Some(event) = receiver.recv().await {
            match event {
                Event::Prompt { .. } => {}
                Event::Text(piece) => text.push_str(&piece),
                Event::Done(Ok(outcome)) => {
                    return Ok(json_response(StatusCode::OK, &api::completion(&id, created, &text, &outcome)))
                }
                Event::Done(Err(failure)) => return Err(generation_failed(&failure)),
            }
        }
        Err(ApiError {
            status: 500,
            kind: "server_error",
            code: None,
            param: None,
            message: "the generation ended without an outcome".into(),
        })
    }

    fn record(&self, result: &Result<Outcome, GenerateError>) {
        match result {
            Ok(outcome) => {
                self.answers.fetch_add(1, Ordering::Relaxed);
                self.completion_tokens.fetch_add(outcome.completion_tokens as u64, Ordering::Relaxed);
                if outcome.finish == Finish::Cancelled {
                    self.cancelled.fetch_add(1, Ordering::Relaxed);
                }
                let seconds = outcome.elapsed.as_secs_f64();
                let decode = (outcome.elapsed - outcome.time_to_first_token).as_secs_f64();
                let per_second =
                    if decode > 0.0 { outcome.completion_tokens.saturating_sub(1) as f64 / decode } else { 0.0 };
                info!(
                    finish = ?outcome.finish,
                    prompt_tokens = outcome.prompt_tokens,
                    cached_tokens = outcome.cached_tokens,
                    completion_tokens = outcome.completion_tokens,
                    time_to_first_token_ms = outcome.time_to_first_token.as_millis() as u64,
                    tokens_per_second = format!("{per_second:.1}"),
                    seconds = format!("{seconds:.2}"),
                    "answered"
                );
            }
            Err(failure) => warn!(%failure, "an answer failed"),
        }
    }
}

fn generation_failed(failure: &GenerateError) -> ApiError {
    ApiError { status: 500, kind: "server_error", code: None, param: None, message: failure.to_string() }
}

/// One request counted in the queue while it waits (also when its client
/// goes away meanwhile and the future is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn enter(queued: &'a AtomicUsize) -> Result<Self, ApiError> {
        if queued.fetch_add(1, Ordering::Relaxed) >= MAX_QUEUE {
            queued.fetch_sub(1, Ordering::Relaxed);
            return Err(ApiError {
                status: 429,
                kind: "server_busy",
                code: Some("queue_full"),
                param: None,
                message: format!("{MAX_QUEUE} requests already wait for the model; retry later"),
            });
        }
        Ok(Waiting(queued))
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the generation thread reports.
enum Event {
    Prompt { done: usize, total: usize },
    Text(String),
    Done(Result<Outcome, GenerateError>),
}

/// The streamed answer: a first chunk with the role, a chunk per piece of
/// text, a last chunk with `finish_reason` and `usage`, then `[DONE]`.
/// While a long prompt goes through the model (seconds before the first
/// token), an SSE comment per 256 tokens, `: prompt 256/1100`, which
/// clients ignore: the stream is not silent, and a client that went away
/// is noticed then, not only at the first token.
struct EventStream {
    receiver: mpsc::UnboundedReceiver<Event>,
    id: String,
    created: u64,
    started: bool,
    ended: bool,
}

fn sse(value: &Value) -> String {
    format!("data: {value}\n\n")
}

impl http_body::Body for EventStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        if !this.started {
            this.started = true;
            let first = api::chunk(&this.id, this.created, json!({"role": "assistant", "content": ""}), None, None);
            return Poll::Ready(Some(Ok(Frame::data(sse(&first).into()))));
        }
        let text = match this.receiver.poll_recv(context) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Event::Prompt { done, total })) => format!(": prompt {done}/{total}\n\n"),
            Poll::Ready(Some(Event::Text(piece))) => {
                sse(&api::chunk(&this.id, this.created, json!({"content": piece}), None, None))
            }
            Poll::Ready(Some(Event::Done(Ok(outcome)))) => {
                this.ended = true;
                let last =
                    api::chunk(&this.id, this.created, json!({}), Some(outcome.finish), Some(api::usage(&outcome)));
                format!("{}data: [DONE]\n\n", sse(&last))
            }
            Poll::Ready(Some(Event::Done(Err(failure)))) => {
                this.ended = true;
                format!("{}data: [DONE]\n\n", sse(&generation_failed(&failure).body()))
            }
            // The thread ended without a word: not expected; end the stream
            // without [DONE] so the client sees it was cut.
            Poll::Ready(None) => {
                this.ended = true;
                return Poll::Ready(None);
            }
        };
        Poll::Ready(Some(Ok(Frame::data(text.into()))))
    }
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error(failure: &ApiError) -> Response<Body> {
    json_response(StatusCode::from_u16(failure.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), &failure.body())
}

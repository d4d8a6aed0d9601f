//! What both protocols share on the wire: one POST whose answer is a
//! server-sent event stream, the key fetched for that request only and sent
//! in a sensitive header, the body fields both name alike, HTTP
//! errors with their `Retry-After`, and reading events under an idle
//! timeout and the turn's cancellation. The idle timer counts bytes, not
//! events: a provider that sends SSE comments (`: keep-alive`) while its
//! model thinks is not idle, though the parser drops the comments.
//!
//! Owns: turning transport failures into [`ProviderError`]s and keeping
//! the key out of every one of them ([`redact`]); the [`limits`] of one
//! answer. Must not own: what the events mean (`openai`, `anthropic`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eventsource_stream::{Event, Eventsource as _};
use futures::future::BoxFuture;
use futures::{FutureExt as _, Stream, StreamExt as _};
use reqwest::header::{HeaderMap, HeaderValue};
use tokio_util::sync::CancellationToken;
use zeroize::Zeroizing;

use super::config::{origin, ProviderConfig};
use super::{Capabilities, ChatRequest, ChatResponse, KeySource, Provider, ProviderError, TextSink, ToolSpec};

/// Longest part of an error body quoted in an error.
const QUOTED_CHARS: usize = 300;

/// What one answer may hold (specs/agent/providers.md, "Limits"). A
/// provider that streams without bound ends its own turn with
/// [`ProviderError::TooLarge`], instead of growing agent-loop to its
/// MemoryMax, where the kill would end every agent's turn and resume would
/// ask the same provider again.
pub mod limits {
    /// The answer's text, in bytes: a 128k-token answer is about 512 KiB.
    pub const TEXT_BYTES: usize = 2 << 20;
    /// Tool calls in one answer (Anthropic: content blocks of any kind).
    pub const CALLS: usize = 64;
    /// One call's name and arguments, in bytes: a file a model writes whole.
    pub const CALL_BYTES: usize = 2 << 20;
    /// One server-sent event, in bytes: what the parser holds before the
    /// event is complete.
    pub const EVENT_BYTES: usize = 4 << 20;
}

/// How much an answer holds so far; [`Answer::within_limits`] checks it
/// after each event.
pub(super) struct Sizes {
    /// Bytes of text.
    pub text: usize,
    /// Tool calls (content blocks).
    pub calls: usize,
    /// Bytes of the largest call's name and arguments.
    pub largest_call: usize,
}

/// The events of one answer, and when its bytes last arrived.
struct Events {
    stream: Pin<Box<dyn Stream<Item = Result<Event, eventsource_stream::EventStreamError<reqwest::Error>>> + Send>>,
    /// When the answer's headers arrived.
    opened: Instant,
    /// When bytes last arrived, in milliseconds after `opened`.
    last_bytes_ms: Arc<AtomicU64>,
    /// Set when the stream was cut for an event over [`limits::EVENT_BYTES`].
    event_too_large: Arc<AtomicBool>,
}

impl Events {
    /// When the stream turns idle if nothing more arrives.
    fn idle_at(&self, idle: Duration) -> Instant {
        self.opened + Duration::from_millis(self.last_bytes_ms.load(Ordering::Relaxed)) + idle
    }
}

/// One provider's connection settings, shared by its requests.
struct Wire {
    /// The provider's name in the agent's config.
    name: String,
    /// Its table.
    config: ProviderConfig,
    /// Its HTTP client.
    client: reqwest::Client,
    /// Where its key comes from.
    keys: Arc<dyn KeySource>,
}

/// A wire protocol: what one request carries and what its events mean.
/// Sending it and reading the stream is the same for every protocol
/// ([`HttpProvider`], [`Answer`]).
pub(super) trait Protocol: Send + Sync + 'static {
    /// Where requests go, under the provider's base URL.
    const PATH: &'static str;
    /// Headers every request carries besides the key's.
    const HEADERS: &'static [(&'static str, &'static str)] = &[];

    /// The header carrying `key`: its name and value.
    fn key_header(key: &str) -> (&'static str, String);

    /// The request body.
    fn body(request: &ChatRequest) -> serde_json::Value;

    /// Assembles the answer from its events; text goes to `on_text` as it
    /// arrives.
    fn read(
        answer: Answer<'_>,
        on_text: TextSink<'_>,
    ) -> impl Future<Output = Result<ChatResponse, ProviderError>> + Send;
}

/// A provider: a protocol over one table's connection.
pub(super) struct HttpProvider<P> {
    wire: Wire,
    protocol: std::marker::PhantomData<P>,
}

impl<P: Protocol> HttpProvider<P> {
    /// The provider `name` of `config`.
    pub fn new(name: &str, config: ProviderConfig, client: reqwest::Client, keys: Arc<dyn KeySource>) -> Self {
        HttpProvider { wire: Wire { name: name.into(), config, client, keys }, protocol: std::marker::PhantomData }
    }
}

impl<P: Protocol> Provider for HttpProvider<P> {
    fn name(&self) -> &str {
        &self.wire.name
    }

    fn capabilities(&self, model: &str) -> Capabilities {
        let settings = self.wire.config.model(model);
        Capabilities { native_tools: settings.native_tools, context_window: settings.context_window }
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: TextSink<'a>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        async move {
            let key = self.wire.key().await?;
            let key = key.as_deref().map(String::as_str);
            let headers = self.wire.headers::<P>(key)?;
            let events = self.wire.post_stream(P::PATH, headers, &P::body(request), key, cancel).await?;
            P::read(Answer { wire: &self.wire, request, key, cancel, events }, on_text).await
        }
        .boxed()
    }
}

/// One request's answer as it streams in: its events, and what reading them
/// needs (the request, the key to redact from anything quoted, the turn's
/// cancellation).
pub(super) struct Answer<'a> {
    wire: &'a Wire,
    /// The request answered.
    pub request: &'a ChatRequest,
    key: Option<&'a str>,
    cancel: &'a CancellationToken,
    events: Events,
}

impl Answer<'_> {
    /// The next event, `None` at the end of the stream; idle when no byte
    /// arrived for the idle timeout.
    pub async fn next(&mut self) -> Result<Option<Event>, ProviderError> {
        let idle = self.wire.config.idle_timeout();
        loop {
            let idle_at = self.events.idle_at(idle);
            tokio::select! {
                // `next` is cancel-safe: an event is never lost to the timer.
                next = self.events.stream.next() => return match next {
                    None if self.events.event_too_large.load(Ordering::Relaxed) => {
                        Err(self.too_large("one event", limits::EVENT_BYTES))
                    }
                    None => Ok(None),
                    Some(Ok(event)) => Ok(Some(event)),
                    Some(Err(e)) => Err(self.interrupted(&e.to_string())),
                },
                () = tokio::time::sleep_until(idle_at.into()) => {
                    if self.events.idle_at(idle) <= Instant::now() {
                        return Err(ProviderError::Idle { provider: self.wire.name.clone(), idle_ms: idle.as_millis() as u64 });
                    }
                }
                () = self.cancel.cancelled() => return Err(ProviderError::Cancelled),
            }
        }
    }

    /// Whether the answer so far keeps within [`limits`].
    pub fn within_limits(&self, sizes: Sizes) -> Result<(), ProviderError> {
        if sizes.text > limits::TEXT_BYTES {
            return Err(self.too_large("its text", limits::TEXT_BYTES));
        }
        if sizes.calls > limits::CALLS {
            return Err(ProviderError::TooLarge {
                provider: self.wire.name.clone(),
                what: format!("more than {} tool calls", limits::CALLS),
            });
        }
        if sizes.largest_call > limits::CALL_BYTES {
            return Err(self.too_large("one tool call", limits::CALL_BYTES));
        }
        Ok(())
    }

    fn too_large(&self, what: &str, bytes: usize) -> ProviderError {
        ProviderError::TooLarge { provider: self.wire.name.clone(), what: format!("{what} over {} KiB", bytes >> 10) }
    }

    /// The stream ended before its terminal marker.
    pub fn interrupted(&self, reason: &str) -> ProviderError {
        ProviderError::Interrupted { provider: self.wire.name.clone(), reason: reason.to_owned() }
    }

    /// An event that is not the protocol.
    pub fn malformed(&self, reason: impl std::fmt::Display) -> ProviderError {
        ProviderError::Malformed {
            provider: self.wire.name.clone(),
            reason: redact(&cut(&reason.to_string()), self.key),
        }
    }

    /// An error the provider sent in the stream, as its HTTP `status` would
    /// have been.
    pub fn status(&self, status: u16, message: &str) -> ProviderError {
        ProviderError::Status {
            provider: self.wire.name.clone(),
            status,
            message: redact(message, self.key),
            retry_after_ms: None,
        }
    }
}

/// `text` with every occurrence of `key` replaced: nothing a provider
/// echoes (an error body quoting the request, a header) carries it on.
fn redact(text: &str, key: Option<&str>) -> String {
    match key {
        Some(key) if key.len() >= 4 => text.replace(key, "[redacted]"),
        _ => text.to_owned(),
    }
}

/// `Retry-After` (seconds, or an HTTP date) or OpenAI's `retry-after-ms`,
/// in milliseconds.
fn retry_after_ms(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(ms.max(0.0) as u64);
    }
    let value = text("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return Some((seconds.max(0.0) * 1000.0) as u64);
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(std::time::SystemTime::now()).unwrap_or_default().as_millis() as u64)
}

impl Wire {
    /// The key for one request, when the provider has one.
    async fn key(&self) -> Result<Option<Zeroizing<String>>, ProviderError> {
        let Some(secret) = &self.config.api_key_secret else { return Ok(None) };
        self.keys
            .key(secret)
            .await
            .map(Some)
            .map_err(|reason| ProviderError::Key { provider: self.name.clone(), reason })
    }

    /// POSTs `body` to `path` under `base_url` with `headers` and answers
    /// the event stream of a 2xx answer; any other status is
    /// [`ProviderError::Status`] with the provider's message.
    async fn post_stream(
        &self,
        path: &str,
        headers: HeaderMap,
        body: &serde_json::Value,
        key: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Events, ProviderError> {
        let url = format!("{}/{}", self.config.base_url.trim_end_matches('/'), path);
        let request = self.client.post(url).headers(headers).header("accept", "text/event-stream").json(body).send();
        let response = tokio::select! {
            response = request => response,
            () = cancel.cancelled() => return Err(ProviderError::Cancelled),
        };
        let response = response.map_err(|e| ProviderError::Connect {
            provider: self.name.clone(),
            endpoint: self.config.endpoint(),
            reason: redact(&error_chain(&e.without_url()), key),
        })?;
        let status = response.status();
        if status.is_redirection() {
            // Never followed (the client's policy): said with where it
            // points, scheme, host and port only, so the operator can set
            // base_url to it.
            let to = response.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or("nowhere");
            let to = reqwest::Url::parse(to).map(|url| origin(&url)).unwrap_or_else(|_| cut(to));
            return Err(ProviderError::Status {
                provider: self.name.clone(),
                status: status.as_u16(),
                message: redact(&format!("redirected to {to}; provider requests follow no redirect: set base_url to the provider's own URL"), key),
                retry_after_ms: None,
            });
        }
        if !status.is_success() {
            let retry_after_ms = retry_after_ms(response.headers());
            let body = tokio::select! {
                body = tokio::time::timeout(self.config.idle_timeout(), response.text()) => body.ok().and_then(Result::ok).unwrap_or_default(),
                () = cancel.cancelled() => return Err(ProviderError::Cancelled),
            };
            return Err(ProviderError::Status {
                provider: self.name.clone(),
                status: status.as_u16(),
                message: error_message(&body, key),
                retry_after_ms,
            });
        }
        let (opened, last_bytes_ms) = (Instant::now(), Arc::new(AtomicU64::new(0)));
        let seen = Arc::clone(&last_bytes_ms);
        let event_too_large = Arc::new(AtomicBool::new(false));
        let (cut, mut event_bytes) = (Arc::clone(&event_too_large), EventBytes::new());
        let bytes = response
            .bytes_stream()
            .inspect(move |_| seen.store(opened.elapsed().as_millis() as u64, Ordering::Relaxed))
            // Ends the stream at an event too large to hold; `next` says why.
            .take_while(move |chunk| {
                let within = chunk.as_ref().map_or(true, |bytes| event_bytes.take(bytes));
                cut.store(!within, Ordering::Relaxed);
                futures::future::ready(within)
            });
        Ok(Events { stream: Box::pin(bytes.eventsource()), opened, last_bytes_ms, event_too_large })
    }

    /// The headers of a request of protocol `P`: its own, and the key's
    /// when the provider has one (marked sensitive: never logged).
    fn headers<P: Protocol>(&self, key: Option<&str>) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        for &(name, value) in P::HEADERS {
            headers.insert(name, HeaderValue::from_static(value));
        }
        if let Some(key) = key {
            let (name, value) = P::key_header(key);
            let mut value = HeaderValue::from_str(&value).map_err(|_| ProviderError::Key {
                provider: self.name.clone(),
                reason: "the key is not a valid header value".into(),
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(headers)
    }
}

/// Counts the bytes of the event being received, which the SSE parser
/// holds until the empty line that ends it (lines end in CR, LF or CRLF).
struct EventBytes {
    /// Bytes since the last empty line, line ends not counted.
    since_boundary: usize,
    /// The line being received has no byte yet.
    line_empty: bool,
    /// The last byte was a CR (its LF, if one follows, ends no line).
    last_cr: bool,
}

impl EventBytes {
    fn new() -> EventBytes {
        EventBytes { since_boundary: 0, line_empty: true, last_cr: false }
    }

    /// Counts `chunk`; false once one event passed [`limits::EVENT_BYTES`].
    fn take(&mut self, chunk: &[u8]) -> bool {
        for &byte in chunk {
            match byte {
                b'\n' if self.last_cr => self.last_cr = false,
                b'\r' | b'\n' => {
                    if self.line_empty {
                        self.since_boundary = 0;
                    }
                    self.line_empty = true;
                    self.last_cr = byte == b'\r';
                }
                _ => {
                    self.since_boundary += 1;
                    self.line_empty = false;
                    self.last_cr = false;
                }
            }
        }
        self.since_boundary <= limits::EVENT_BYTES
    }
}

/// Sets what both protocols send under the same names, and only when the
/// request has it: `temperature`, and `tools`, each as `tool` describes it.
pub(super) fn optional_fields(
    body: &mut serde_json::Value,
    request: &ChatRequest,
    tool: impl Fn(&ToolSpec) -> serde_json::Value,
) {
    if let Some(temperature) = request.temperature {
        body["temperature"] = temperature.into();
    }
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(tool).collect();
    }
}

/// An error and its sources, on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// At most [`QUOTED_CHARS`] characters of `text`.
fn cut(text: &str) -> String {
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// The message of an error body: `error.message` (both protocols), else
/// the body itself, cut and redacted.
fn error_message(body: &str, key: Option<&str>) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/message").or_else(|| v.get("message")).or_else(|| v.get("error")))
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| body.trim().to_owned());
    redact(&cut(&message), key)
}

/// How long to wait before retry `attempt` (0-based): full jitter over an
/// exponential ceiling, or the provider's `Retry-After` when longer.
pub(super) fn backoff(attempt: u32, base: Duration, max: Duration, retry_after_ms: Option<u64>) -> Duration {
    let ceiling = base.saturating_mul(1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX)).min(max);
    let jittered = Duration::from_millis(fastrand::u64(0..=ceiling.as_millis() as u64));
    match retry_after_ms {
        Some(ms) => jittered.max(Duration::from_millis(ms)),
        None => jittered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_redacted_from_quoted_errors() {
        let body = r#"{"error": {"message": "Incorrect API key provided: sk-canary-1234"}}"#;
        assert_eq!(error_message(body, Some("sk-canary-1234")), "Incorrect API key provided: [redacted]");
        assert_eq!(error_message("upstream <html> down", None), "upstream <html> down");
        assert_eq!(error_message(&"x".repeat(1000), None).len(), QUOTED_CHARS + 3);
    }

    #[test]
    fn retry_after_in_seconds_milliseconds_or_a_date() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after_ms(&headers), Some(2000));
        headers.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after_ms(&headers), Some(150));
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
        assert_eq!(retry_after_ms(&headers), Some(0));
    }

    #[test]
    fn backoff_stays_under_its_ceiling_and_honours_retry_after() {
        let (base, max) = (Duration::from_millis(100), Duration::from_millis(1000));
        for attempt in 0..40 {
            assert!(backoff(attempt, base, max, None) <= max);
        }
        assert!(backoff(0, base, max, None) <= base);
        assert_eq!(backoff(0, base, max, Some(5000)), Duration::from_millis(5000));
    }
}

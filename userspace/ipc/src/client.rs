//! `IpcClient`: one connection to a component: handshake, correlated calls
//! with timeouts, events in both directions.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::codec::decode;
use crate::component::{ComponentId, Principal};
use crate::error_code::ErrorCode;
use crate::framing::{Frame, FrameReader};
use crate::message::{Body, Message, Object, Response, GOODBYE, HELLO};
use crate::outbox::{write_loop, Outbound, OUTBOX_CAPACITY};
use crate::socket::{connect_abstract, socket_name};
use crate::timeouts::{effective_timeout, DEFAULT_REQUEST_TIMEOUT, MAX_CONSECUTIVE_TIMEOUTS};
use crate::version::{ProtocolVersion, SUPPORTED_VERSIONS};

/// Why a call did not return a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The peer answered with an error.
    #[error("{code} from {peer}: {message}")]
    Remote {
        /// The answering component.
        peer: ComponentId,
        /// The error code.
        code: ErrorCode,
        /// The peer's reason.
        message: String,
    },
    /// No answer within the timeout.
    #[error("ETIMEOUT: `{method}` on {peer} got no answer within {after:?}")]
    Timeout {
        /// The called component.
        peer: ComponentId,
        /// The method.
        method: String,
        /// The timeout that expired.
        after: Duration,
    },
    /// The connection is closed.
    #[error("connection to {peer} is closed")]
    Closed {
        /// The component.
        peer: ComponentId,
    },
}

impl CallError {
    /// The IPC error code this failure corresponds to.
    pub fn code(&self) -> ErrorCode {
        match self {
            CallError::Remote { code, .. } => *code,
            CallError::Timeout { .. } => ErrorCode::Etimeout,
            CallError::Closed { .. } => ErrorCode::Eio,
        }
    }
}

/// Why a connection could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The socket could not be reached.
    // The cause is part of the message (not a `#[source]`), so printing
    // the error chain does not repeat it.
    #[error("cannot connect to {peer} (@{socket}): {error}")]
    Connect {
        /// The component.
        peer: ComponentId,
        /// The abstract socket name.
        socket: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// The handshake was refused or failed.
    #[error("handshake with {peer} failed: {error}")]
    Handshake {
        /// The component.
        peer: ComponentId,
        /// What happened.
        error: CallError,
    },
}

/// How a client connects.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Who we are (must match what our UID authenticates as).
    pub identity: Principal,
    /// Versions offered in `hello`.
    pub protocol_versions: Vec<ProtocolVersion>,
    /// Incoming events buffered before new ones are dropped (and counted).
    pub event_capacity: usize,
}

impl ClientOptions {
    /// Defaults for `identity`: this crate's versions, 1024 buffered events.
    pub fn new(identity: Principal) -> Self {
        ClientOptions { identity, protocol_versions: SUPPORTED_VERSIONS.to_vec(), event_capacity: 1024 }
    }
}

type Pending = Arc<Mutex<HashMap<Uuid, oneshot::Sender<Message>>>>;
/// The last `error` message the server sent correlated to nothing: code and reason.
type Uncorrelated = Arc<Mutex<Option<(ErrorCode, String)>>>;

/// A handshaken connection to one component.
pub struct IpcClient {
    identity: Principal,
    peer: ComponentId,
    version: ProtocolVersion,
    server_info: Object,
    outbox: mpsc::Sender<Outbound>,
    pending: Pending,
    consecutive_timeouts: AtomicU32,
    closed: Arc<AtomicBool>,
    dropped_events: Arc<AtomicU64>,
    uncorrelated: Uncorrelated,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl IpcClient {
    /// Connects to `peer`'s socket (see [`socket_name`]) and says hello.
    /// Returns the client and the stream of events the peer sends.
    pub async fn connect(
        peer: ComponentId,
        options: ClientOptions,
    ) -> Result<(Self, mpsc::Receiver<Message>), ConnectError> {
        let socket = socket_name(peer);
        let stream = connect_abstract(&socket).map_err(|error| ConnectError::Connect { peer, socket, error })?;
        IpcClient::handshake(stream, peer, options).await
    }

    /// Says hello over an already connected stream.
    pub async fn handshake(
        stream: tokio::net::UnixStream,
        peer: ComponentId,
        options: ClientOptions,
    ) -> Result<(Self, mpsc::Receiver<Message>), ConnectError> {
        let (read_half, write_half) = stream.into_split();
        let (outbox, outbox_rx) = mpsc::channel(OUTBOX_CAPACITY);
        let (events_tx, events) = mpsc::channel(options.event_capacity.max(1));
        let pending: Pending = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let dropped_events = Arc::new(AtomicU64::new(0));
        let uncorrelated: Uncorrelated = Arc::default();
        let writer = tokio::spawn(write_loop(write_half, outbox_rx));
        let reader = tokio::spawn(read_loop(
            FrameReader::new(read_half),
            Arc::clone(&pending),
            events_tx,
            Arc::clone(&closed),
            Arc::clone(&dropped_events),
            Arc::clone(&uncorrelated),
        ));
        let mut client = IpcClient {
            identity: options.identity,
            peer,
            version: options.protocol_versions.iter().max().copied().unwrap_or(ProtocolVersion::V1_0),
            server_info: Object::new(),
            outbox,
            pending,
            consecutive_timeouts: AtomicU32::new(0),
            closed,
            dropped_events,
            uncorrelated,
            reader,
            writer,
        };
        let offered: Vec<Value> = options.protocol_versions.iter().map(|v| Value::String(v.to_string())).collect();
        let mut params = Object::new();
        params.insert("supported_versions".into(), Value::Array(offered));
        let info = client.call(HELLO, params, None).await.map_err(|error| {
            // A server refuses some connections before reading anything (a
            // UID that is nobody, one over its connection cap, no hello in
            // time: specs/ipc/README.md, "Connection limits"): it sends an
            // `error` correlated to nothing, then closes. That error, not
            // the close, is the handshake's answer.
            let refusal = client.uncorrelated.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
            let error = match (error, refusal) {
                (CallError::Closed { .. }, Some((code, message))) => CallError::Remote { peer, code, message },
                (error, _) => error,
            };
            ConnectError::Handshake { peer, error }
        })?;
        client.version =
            info.get("version").and_then(Value::as_str).and_then(|text| text.parse().ok()).ok_or_else(|| {
                ConnectError::Handshake {
                    peer,
                    error: CallError::Remote {
                        peer,
                        code: ErrorCode::Eproto,
                        message: "hello result has no valid version".into(),
                    },
                }
            })?;
        client.server_info = info;
        Ok((client, events))
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> ProtocolVersion {
        self.version
    }

    /// The `hello` result (component, component_version, version, peer).
    pub fn server_info(&self) -> &Object {
        &self.server_info
    }

    /// The component on the other end.
    pub fn peer(&self) -> ComponentId {
        self.peer
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Events dropped because the event receiver was full.
    pub fn dropped_events(&self) -> u64 {
        self.dropped_events.load(Ordering::Relaxed)
    }

    /// Calls `method` and waits for the correlated answer, at most
    /// `timeout` (sent with the request, so the server gives up at the same
    /// time) or, without one, the server's default for the method and
    /// [`DEFAULT_REQUEST_TIMEOUT`] here; capped at 30 s. Typed calls
    /// (`clawos-api`) always pass the method's own timeout. Three timeouts in
    /// a row close the connection.
    pub async fn call(&self, method: &str, params: Object, timeout: Option<Duration>) -> Result<Object, CallError> {
        let peer = self.peer;
        let timeout_ms = timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        let limit = effective_timeout(timeout_ms, DEFAULT_REQUEST_TIMEOUT);
        let request = Message::request(self.version, self.identity, peer.into(), method, params, timeout_ms);
        let (answer_tx, answer_rx) = oneshot::channel();
        self.lock_pending().insert(request.message_id, answer_tx);
        let id = request.message_id;
        if self.is_closed() || self.outbox.send(Outbound::Send(request)).await.is_err() {
            self.lock_pending().remove(&id);
            return Err(CallError::Closed { peer });
        }
        let answer = match tokio::time::timeout(limit, answer_rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => return Err(CallError::Closed { peer }),
            Err(_) => {
                self.lock_pending().remove(&id);
                if self.consecutive_timeouts.fetch_add(1, Ordering::Relaxed) + 1 >= MAX_CONSECUTIVE_TIMEOUTS {
                    tracing::warn!(%peer, "closing connection after {MAX_CONSECUTIVE_TIMEOUTS} consecutive timeouts");
                    self.close().await;
                }
                return Err(CallError::Timeout { peer, method: method.to_owned(), after: limit });
            }
        };
        self.consecutive_timeouts.store(0, Ordering::Relaxed);
        match answer.body {
            Body::Response(Response::Success { result }) => Ok(result),
            Body::Response(Response::Error { error_code, error_message, .. }) => {
                Err(CallError::Remote { peer, code: error_code, message: error_message })
            }
            Body::Error(error) => Err(CallError::Remote { peer, code: error.error_code, message: error.error_message }),
            Body::Request(_) | Body::Event(_) => unreachable!("the reader only correlates responses and errors"),
        }
    }

    /// [`IpcClient::call`], retried as the error code's policy says
    /// (EAGAIN: backoff; EIO: 3 times; ETIMEOUT: 2 times).
    pub async fn call_with_retry(
        &self,
        method: &str,
        params: Object,
        timeout: Option<Duration>,
    ) -> Result<Object, CallError> {
        let mut attempt = 0;
        loop {
            match self.call(method, params.clone(), timeout).await {
                Err(error) if !matches!(error, CallError::Closed { .. }) => {
                    let Some(delay) = error.code().retry_policy().delay_before_retry(attempt) else {
                        return Err(error);
                    };
                    attempt += 1;
                    tokio::time::sleep(delay).await;
                }
                outcome => return outcome,
            }
        }
    }

    /// Sends an event to the peer.
    pub async fn send_event(&self, event_name: &str, event_data: Object) -> Result<(), CallError> {
        let event = Message::event(self.version, self.identity, self.peer.into(), event_name, event_data);
        self.send(event).await
    }

    /// Sends a prepared message as is.
    pub async fn send(&self, message: Message) -> Result<(), CallError> {
        if self.is_closed() {
            return Err(CallError::Closed { peer: self.peer });
        }
        self.outbox.send(Outbound::Send(message)).await.map_err(|_| CallError::Closed { peer: self.peer })
    }

    /// Sends `goodbye`, waits (at most 1 s) until everything queued has
    /// been written, and closes the connection.
    pub async fn goodbye(mut self) {
        let _ = self.send_event(GOODBYE, Object::new()).await;
        self.close().await;
        // Without this, a process exiting right after goodbye could drop
        // messages still queued for the writer (e.g. component_shutdown).
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut self.writer).await;
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        let _ = self.outbox.send(Outbound::Close).await;
        self.reader.abort();
        self.lock_pending().clear();
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, oneshot::Sender<Message>>> {
        // The map stays consistent even if a holder panicked: every operation is a single insert/remove.
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for IpcClient {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

async fn read_loop(
    mut frames: FrameReader<tokio::net::unix::OwnedReadHalf>,
    pending: Pending,
    events: mpsc::Sender<Message>,
    closed: Arc<AtomicBool>,
    dropped_events: Arc<AtomicU64>,
    uncorrelated: Uncorrelated,
) {
    while let Ok(Some(frame)) = frames.next_frame().await {
        let Frame::Line(line) = frame else {
            tracing::warn!("server sent an oversized or truncated frame");
            continue;
        };
        let message = match decode(line) {
            Ok(message) => message,
            Err(error) => {
                tracing::warn!(%error, "server sent an invalid message");
                continue;
            }
        };
        match (&message.body, message.correlation_id) {
            (Body::Response(_) | Body::Error(_), Some(correlation_id)) => {
                let waiter = pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&correlation_id);
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send(message);
                    }
                    None => tracing::debug!(%correlation_id, "answer to a request nobody waits for (timed out?)"),
                }
            }
            (Body::Event(_), _) => {
                if events.try_send(message).is_err() {
                    dropped_events.fetch_add(1, Ordering::Relaxed);
                }
            }
            (Body::Error(error), None) => {
                tracing::warn!(code = %error.error_code, reason = %error.error_message, "error from server");
                let last = (error.error_code, error.error_message.clone());
                *uncorrelated.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(last);
            }
            _ => {
                tracing::debug!(message_id = %message.message_id, "ignoring unexpected {}", message.body.message_type())
            }
        }
    }
    closed.store(true, Ordering::Relaxed);
    // Waking every waiter with "closed" instead of letting them time out.
    pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
}

//! `IpcServer`: accepts connections and enforces the protocol on each one:
//! peer authentication (SO_PEERCRED), the connection limits, the `hello`
//! handshake, schema validation, the rate limit, the ACL, per-request
//! timeouts, and request/response correlation. What a method does is up to
//! the [`Handler`].
//!
//! A connection costs nothing until its peer is known to be someone: the
//! peer UID is mapped to a principal and checked against its connection
//! cap before any buffer exists or any byte is read, and until `hello`
//! succeeded the peer may send only [`HANDSHAKE_MAX_BYTES`] within
//! [`HANDSHAKE_TIMEOUT`] (`specs/ipc/README.md`, "Connection limits").

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::codec::{decode, encode};
use crate::component::{ComponentId, Principal};
use crate::error_code::ErrorCode;
use crate::framing::{Frame, FrameReader, MAX_MESSAGE_BYTES};
use crate::message::{Body, ErrorPayload, Event, Message, Object, Request, Response, Severity, GOODBYE, HELLO};
use crate::outbox::{write_loop, Outbound, OUTBOX_CAPACITY};
use crate::policy::AccessPolicy;
use crate::rate_limit::{RateLimit, TokenBucket};
use crate::timeouts::{effective_timeout, DEFAULT_REQUEST_TIMEOUT, MAX_CONSECUTIVE_TIMEOUTS};
use crate::version::{negotiate, ProtocolVersion};

/// Largest first line a connection may send, i.e. before its `hello`
/// succeeded. A hello is about 300 bytes (envelope, two UUIDs, the version
/// list); 4 KiB leaves room for a client offering many versions, while a
/// peer that has not said hello holds at most this much of a line instead
/// of the 4 MiB ([`MAX_MESSAGE_BYTES`]) a handshaken peer may send. A
/// larger first line is answered EPROTO and the connection closed.
pub const HANDSHAKE_MAX_BYTES: usize = 4 * 1024;

/// How long a connection may stay open without completing `hello`. It is
/// the spec's default request timeout ([`DEFAULT_REQUEST_TIMEOUT`], 5 s),
/// which is also how long [`crate::IpcClient`] waits for the hello's
/// answer: a client that has not been answered by then has given up
/// itself, so the server waits no longer than any real client would,
/// while an idle connection holds a descriptor and one of its UID's
/// [`MAX_CONNECTIONS_PER_UID`] slots for at most this long. Expiry is
/// answered ETIMEOUT and the connection closed.
pub const HANDSHAKE_TIMEOUT: Duration = DEFAULT_REQUEST_TIMEOUT;

/// Connections one peer UID may have open on one server at once,
/// handshaken or not; one more is answered EAGAIN and closed before
/// anything is read. 64 is twice what a component needs at most:
/// wasm-daemon runs up to 32 tool calls at once, each of which may hold a
/// connection to a peer (fs-engine's memory search, security-agent's
/// secrets), beside its event connection to the router. With the eight
/// component users and the operator all at the cap a server holds
/// 9 x 64 = 576 descriptors, below the units' `LimitNOFILE=1024` with room
/// for the daemon's own files; UIDs that are nobody hold none.
pub const MAX_CONNECTIONS_PER_UID: usize = 64;

/// How long a closing connection's queued messages may take to be written
/// before the writer is stopped: a peer that stopped reading would
/// otherwise keep the writer, and the descriptor, forever, after its UID's
/// slot was given back.
const CLOSE_FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// A method failure, answered as an error response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct MethodError {
    /// The IPC error code.
    pub code: ErrorCode,
    /// Human-readable reason.
    pub message: String,
}

impl MethodError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        MethodError { code, message: message.into() }
    }

    /// ENOENT for a method this component does not implement.
    pub fn unknown_method(method: &str) -> Self {
        MethodError::new(ErrorCode::Enoent, format!("unknown method `{method}`"))
    }

    /// EPROTO for params that do not fit the method.
    pub fn bad_params(reason: impl std::fmt::Display) -> Self {
        MethodError::new(ErrorCode::Eproto, format!("invalid params: {reason}"))
    }
}

/// What a component does with requests and events. Protocol rules are
/// already enforced when these are called.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request (not `hello`, which the server answers itself).
    fn handle_request(
        &self,
        connection: Connection,
        request: Request,
    ) -> impl Future<Output = Result<Object, MethodError>> + Send;

    /// Takes one event addressed to this component.
    fn handle_event(&self, connection: Connection, event: Event) -> impl Future<Output = ()> + Send {
        let _ = (connection, event);
        async {}
    }

    /// Called once when a handshaken connection ends.
    fn connection_closed(&self, connection_id: u64) {
        let _ = connection_id;
    }
}

/// How a server behaves.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// The component this server speaks for.
    pub component: ComponentId,
    /// Software version reported in `hello` (the daemon's crate version).
    pub software_version: String,
    /// Protocol versions this server speaks.
    pub protocol_versions: Vec<ProtocolVersion>,
    /// Identity and ACL.
    pub policy: Arc<AccessPolicy>,
    /// Per-connection rate limit.
    pub rate_limit: RateLimit,
    /// Each method's default timeout (its entry in `clawos-api`), used when
    /// a request carries no `timeout_ms`.
    pub method_timeout: fn(&str) -> Duration,
}

/// Counters a server keeps, for heartbeats and `get_metrics`.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Messages received and handled (valid or not).
    pub messages_processed: AtomicU64,
    /// Messages rejected or whose handling failed, and connections refused
    /// (peer UID is nobody, or over [`MAX_CONNECTIONS_PER_UID`]).
    pub messages_failed: AtomicU64,
    /// Connections past the handshake, now open.
    pub active_connections: AtomicU64,
}

/// One accepted, handshaken connection, as seen by a [`Handler`]. Cheap to
/// clone; a handler may keep it to push events later (subscriptions).
#[derive(Clone)]
pub struct Connection {
    id: u64,
    peer: Principal,
    uid: u32,
    local: ComponentId,
    version: ProtocolVersion,
    outbox: mpsc::Sender<Outbound>,
}

/// Why a message could not be queued on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The connection's outbox is full (the peer reads too slowly).
    #[error("connection outbox is full")]
    Full,
    /// The connection is gone.
    #[error("connection is closed")]
    Closed,
}

impl Connection {
    /// Server-unique connection number.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The authenticated peer.
    pub fn peer(&self) -> Principal {
        self.peer
    }

    /// The peer's UID (SO_PEERCRED).
    pub fn peer_uid(&self) -> u32 {
        self.uid
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.outbox.is_closed()
    }

    /// An event message from this server to the peer.
    pub fn event(&self, event_name: &str, event_data: Object) -> Message {
        Message::event(self.version, self.local.into(), self.peer, event_name, event_data)
    }

    /// Queues `message` without waiting.
    pub fn try_send(&self, message: Message) -> Result<(), SendError> {
        self.outbox.try_send(Outbound::Send(message)).map_err(|error| match error {
            mpsc::error::TrySendError::Full(_) => SendError::Full,
            mpsc::error::TrySendError::Closed(_) => SendError::Closed,
        })
    }

    /// Queues `message`, waiting for room.
    pub async fn send(&self, message: Message) -> Result<(), SendError> {
        self.outbox.send(Outbound::Send(message)).await.map_err(|_| SendError::Closed)
    }
}

/// Accepts connections on `listener` forever, one task per connection.
pub struct IpcServer<H> {
    shared: Arc<Shared<H>>,
}

struct Shared<H> {
    settings: ServerSettings,
    handler: Arc<H>,
    stats: Arc<ServerStats>,
    next_id: AtomicU64,
    open_by_uid: OpenByUid,
}

impl<H: Handler> IpcServer<H> {
    /// A server with `settings` dispatching to `handler`, counting into `stats`.
    pub fn new(settings: ServerSettings, handler: Arc<H>, stats: Arc<ServerStats>) -> Self {
        let open_by_uid = OpenByUid::default();
        IpcServer { shared: Arc::new(Shared { settings, handler, stats, next_id: AtomicU64::new(1), open_by_uid }) }
    }

    /// Serves until the listener fails; drop the future to stop accepting.
    pub async fn serve(&self, listener: UnixListener) -> std::io::Result<()> {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                // Out of fds or memory: keep serving existing connections and retry.
                Err(error) if is_transient_accept_error(&error) => {
                    tracing::warn!(%error, "accept failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
                Err(error) => return Err(error),
            };
            let shared = Arc::clone(&self.shared);
            let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move { serve_connection(shared, stream, id).await });
        }
    }
}

fn is_transient_accept_error(error: &std::io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(nix::libc::EMFILE | nix::libc::ENFILE | nix::libc::ENOBUFS | nix::libc::ENOMEM | nix::libc::ECONNABORTED)
    )
}

/// Open connections per peer UID, held to [`MAX_CONNECTIONS_PER_UID`].
#[derive(Default)]
struct OpenByUid(Mutex<HashMap<u32, usize>>);

impl OpenByUid {
    fn lock(&self) -> MutexGuard<'_, HashMap<u32, usize>> {
        // Every critical section is one update of one count, so a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for one more connection of `uid`, or `None` when it has the
    /// maximum open.
    fn take(&self, uid: u32) -> Option<UidSlot<'_>> {
        let mut open = self.lock();
        let count = open.entry(uid).or_insert(0);
        if *count >= MAX_CONNECTIONS_PER_UID {
            return None;
        }
        *count += 1;
        Some(UidSlot { open: self, uid })
    }
}

/// One connection's place in its UID's count, given back when dropped.
struct UidSlot<'a> {
    open: &'a OpenByUid,
    uid: u32,
}

impl Drop for UidSlot<'_> {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        if let Some(count) = open.get_mut(&self.uid) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.uid);
            }
        }
    }
}

/// Per-connection protocol state.
struct Session<'a, H> {
    shared: &'a Shared<H>,
    outbox: mpsc::Sender<Outbound>,
    uid: u32,
    peer: Principal,
}

impl<H: Handler> Session<'_, H> {
    fn local(&self) -> ComponentId {
        self.shared.settings.component
    }

    fn count_failure(&self) {
        self.shared.stats.messages_failed.fetch_add(1, Ordering::Relaxed);
    }

    async fn send(&self, message: Message) {
        // A closed outbox means the writer is gone with the peer; nothing to tell.
        let _ = self.outbox.send(Outbound::Send(message)).await;
    }

    /// Tells the peer why `offending` (or an unreadable frame) was refused:
    /// an error response for a request, else an `error` message.
    async fn reject(&self, offending: Option<&Message>, correlation_id: Option<Uuid>, code: ErrorCode, reason: String) {
        self.count_failure();
        tracing::debug!(peer_uid = self.uid, %code, %reason, "rejecting message");
        let version = offending.map_or(self.shared.settings.protocol_versions[0], |message| message.version);
        let recipient = offending.map_or(self.peer, |message| message.sender);
        let body = match offending.map(|message| &message.body) {
            Some(Body::Request(_)) => {
                Body::Response(Response::Error { error_code: code, error_message: reason, traceback: None })
            }
            _ => Body::Error(ErrorPayload {
                error_code: code,
                error_message: reason,
                component: self.local(),
                severity: Severity::Error,
                context: None,
                traceback: None,
            }),
        };
        let mut message = Message::new(version, self.local().into(), recipient, body);
        message.correlation_id = offending.map(|message| message.message_id).or(correlation_id);
        self.send(message).await;
    }

    /// Checks what every message must satisfy; `Err` carries the rejection.
    fn check_envelope(&self, message: &Message, peer: Principal) -> Result<(), (ErrorCode, String)> {
        if message.sender != peer {
            return Err((
                ErrorCode::Eperm,
                format!(
                    "sender `{}` does not match the authenticated peer `{peer}` (uid {})",
                    message.sender, self.uid
                ),
            ));
        }
        if message.recipient != Principal::Component(self.local()) {
            return Err((
                ErrorCode::Enoent,
                format!(
                    "unknown recipient `{}` on this socket (this is `{}`; each component serves its own socket)",
                    message.recipient,
                    self.local()
                ),
            ));
        }
        Ok(())
    }

    /// Runs the handshake on a reader limited to [`HANDSHAKE_MAX_BYTES`];
    /// returns the negotiated version or `None` (the rejection has been
    /// queued and the connection must close).
    async fn handshake(
        &mut self,
        frames: &mut FrameReader<tokio::net::unix::OwnedReadHalf>,
    ) -> Option<ProtocolVersion> {
        let hello = match tokio::time::timeout(HANDSHAKE_TIMEOUT, frames.next_frame()).await {
            Ok(Ok(Some(Frame::Line(line)))) => match decode(line) {
                Ok(message) => message,
                Err(error) => {
                    self.reject(None, error.message_id(), ErrorCode::Eproto, error.to_string()).await;
                    return None;
                }
            },
            Ok(Ok(Some(Frame::Oversized { limit }))) => {
                let reason = format!("the first message exceeds {limit} bytes, the limit until hello succeeded");
                self.reject(None, None, ErrorCode::Eproto, reason).await;
                return None;
            }
            Ok(_) => return None,
            Err(_) => {
                tracing::debug!(uid = self.uid, peer = %self.peer, "no hello within {HANDSHAKE_TIMEOUT:?}; closing");
                let reason = format!("no hello within {} ms of connecting", HANDSHAKE_TIMEOUT.as_millis());
                self.reject(None, None, ErrorCode::Etimeout, reason).await;
                return None;
            }
        };
        self.shared.stats.messages_processed.fetch_add(1, Ordering::Relaxed);
        let peer = self.peer;
        if let Err((code, reason)) = self.check_envelope(&hello, peer) {
            self.reject(Some(&hello), None, code, reason).await;
            return None;
        }
        let Body::Request(request) = &hello.body else {
            self.reject(Some(&hello), None, ErrorCode::Eproto, "the first message must be a hello request".into())
                .await;
            return None;
        };
        if request.method != HELLO {
            let reason = format!("the first message must be `hello`, not `{}`", request.method);
            self.reject(Some(&hello), None, ErrorCode::Eproto, reason).await;
            return None;
        }
        let offered = match parse_supported_versions(&request.params) {
            Ok(offered) => offered,
            Err(reason) => {
                self.reject(Some(&hello), None, ErrorCode::Eproto, reason).await;
                return None;
            }
        };
        let supported = &self.shared.settings.protocol_versions;
        let Some(version) = negotiate(&offered, supported) else {
            let list =
                |versions: &[ProtocolVersion]| versions.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            let reason = format!(
                "no common protocol version: client offers [{}], server speaks [{}]",
                list(&offered),
                list(supported)
            );
            self.reject(Some(&hello), None, ErrorCode::Eproto, reason).await;
            return None;
        };
        let mut result = Object::new();
        result.insert("version".into(), Value::String(version.to_string()));
        result.insert("component".into(), Value::String(self.local().to_string()));
        result.insert("component_version".into(), Value::String(self.shared.settings.software_version.clone()));
        result.insert("peer".into(), Value::String(peer.to_string()));
        let mut reply = hello.reply(self.local().into(), Body::Response(Response::Success { result }));
        reply.version = version;
        self.send(reply).await;
        Some(version)
    }
}

fn parse_supported_versions(params: &Object) -> Result<Vec<ProtocolVersion>, String> {
    let Some(Value::Array(entries)) = params.get("supported_versions") else {
        return Err("hello needs params.supported_versions, an array of \"MAJOR.MINOR\" strings".into());
    };
    entries
        .iter()
        .map(|entry| {
            entry
                .as_str()
                .ok_or_else(|| format!("supported_versions entry {entry} is not a string"))?
                .parse()
                .map_err(|error: crate::version::InvalidVersion| error.to_string())
        })
        .collect()
}

/// Tells a peer why its connection is refused, with one `error` message
/// (correlated to nothing, since nothing was read), without waiting: the
/// message is written only if the socket takes it at once, which a fresh
/// connection's empty send buffer does. The caller then drops the stream.
fn refuse<H>(shared: &Shared<H>, stream: &UnixStream, recipient: Principal, code: ErrorCode, reason: String) {
    shared.stats.messages_failed.fetch_add(1, Ordering::Relaxed);
    let body = Body::Error(ErrorPayload {
        error_code: code,
        error_message: reason,
        component: shared.settings.component,
        severity: Severity::Error,
        context: None,
        traceback: None,
    });
    let message = Message::new(shared.settings.protocol_versions[0], shared.settings.component.into(), recipient, body);
    let _ = stream.try_write(&encode(&message));
}

async fn serve_connection<H: Handler>(shared: Arc<Shared<H>>, stream: UnixStream, id: u64) {
    let uid = match stream.peer_cred() {
        Ok(credentials) => credentials.uid(),
        Err(error) => {
            tracing::warn!(%error, "SO_PEERCRED failed; dropping connection");
            return;
        }
    };
    // Who the peer is, and whether its UID may open one more connection,
    // is settled before any buffer exists for it or any byte is read.
    let Some(peer) = shared.settings.policy.principal_for_uid(uid) else {
        tracing::warn!(uid, "connection from a UID that is neither a component nor an operator; closed");
        let reason = format!("peer uid {uid} is not a ClawOS component or operator");
        // An unknown peer has no principal to address; `operator` is the one the envelope allows that is no component.
        refuse(&shared, &stream, Principal::Operator, ErrorCode::Eperm, reason);
        return;
    };
    let Some(_slot) = shared.open_by_uid.take(uid) else {
        tracing::warn!(uid, %peer, "connection refused: the UID has {MAX_CONNECTIONS_PER_UID} connections open");
        let reason =
            format!("peer uid {uid} already has {MAX_CONNECTIONS_PER_UID} connections open; retry after closing one");
        refuse(&shared, &stream, peer, ErrorCode::Eagain, reason);
        return;
    };
    let (read_half, write_half) = stream.into_split();
    let (outbox, outbox_rx) = mpsc::channel(OUTBOX_CAPACITY);
    let mut writer = tokio::spawn(write_loop(write_half, outbox_rx));
    let mut frames = FrameReader::with_limit(read_half, HANDSHAKE_MAX_BYTES);
    let mut session = Session { shared: &shared, outbox: outbox.clone(), uid, peer };
    let mut bucket = TokenBucket::new(shared.settings.rate_limit, Instant::now());
    // The hello counts against the rate limit like any message.
    bucket.try_take(Instant::now());

    if let Some(version) = session.handshake(&mut frames).await {
        frames.set_limit(MAX_MESSAGE_BYTES);
        let connection =
            Connection { id, peer, uid, local: shared.settings.component, version, outbox: outbox.clone() };
        shared.stats.active_connections.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(connection = id, %peer, uid, %version, "connection established");
        session_loop(&session, &connection, &mut frames, &mut bucket).await;
        shared.stats.active_connections.fetch_sub(1, Ordering::Relaxed);
        shared.handler.connection_closed(id);
    }
    drop(session);
    // Flush what is queued (e.g. the final rejection), then close.
    let flush = async {
        let _ = outbox.send(Outbound::Close).await;
        let _ = (&mut writer).await;
    };
    if tokio::time::timeout(CLOSE_FLUSH_TIMEOUT, flush).await.is_err() {
        writer.abort();
    }
}

async fn session_loop<H: Handler>(
    session: &Session<'_, H>,
    connection: &Connection,
    frames: &mut FrameReader<tokio::net::unix::OwnedReadHalf>,
    bucket: &mut TokenBucket,
) {
    let shared = session.shared;
    let mut consecutive_timeouts = 0;
    loop {
        let message = match frames.next_frame().await {
            Ok(Some(Frame::Line(line))) => {
                shared.stats.messages_processed.fetch_add(1, Ordering::Relaxed);
                match decode(line) {
                    Ok(message) => message,
                    Err(error) => {
                        session.reject(None, error.message_id(), ErrorCode::Eproto, error.to_string()).await;
                        continue;
                    }
                }
            }
            Ok(Some(Frame::Oversized { limit })) => {
                shared.stats.messages_processed.fetch_add(1, Ordering::Relaxed);
                let reason = format!("message exceeds {limit} bytes; the rest of the line is discarded");
                session.reject(None, None, ErrorCode::Eproto, reason).await;
                continue;
            }
            Ok(Some(Frame::Truncated { received })) => {
                let reason = format!("connection closed inside a message ({received} bytes without a newline)");
                session.reject(None, None, ErrorCode::Eproto, reason).await;
                return;
            }
            Ok(None) => return,
            Err(error) => {
                tracing::debug!(connection = connection.id, %error, "read failed");
                return;
            }
        };
        if !bucket.try_take(Instant::now()) {
            session
                .reject(Some(&message), None, ErrorCode::Eagain, "rate limit exceeded; retry with backoff".into())
                .await;
            continue;
        }
        if let Err((code, reason)) = session.check_envelope(&message, connection.peer) {
            session.reject(Some(&message), None, code, reason).await;
            continue;
        }
        if message.version.major != connection.version.major {
            let reason = format!(
                "message version {} is incompatible with the negotiated {}",
                message.version, connection.version
            );
            session.reject(Some(&message), None, ErrorCode::Eproto, reason).await;
            continue;
        }
        let request = match &message.body {
            Body::Request(request) => request.clone(),
            Body::Event(event) if event.event_name == GOODBYE => return,
            Body::Event(event) => {
                shared.handler.handle_event(connection.clone(), event.clone()).await;
                continue;
            }
            Body::Response(_) | Body::Error(_) => {
                // Servers send no requests on accepted connections, so nothing can be waiting for this.
                tracing::debug!(connection = connection.id, message_id = %message.message_id, "ignoring unsolicited {}", message.body.message_type());
                continue;
            }
        };
        if request.method == HELLO {
            session.reject(Some(&message), None, ErrorCode::Eproto, "hello was already negotiated".into()).await;
            continue;
        }
        if !shared.settings.policy.allows(connection.peer, session.local(), &request.method) {
            tracing::warn!(peer = %connection.peer, uid = connection.uid, method = %request.method, "ACL denied request");
            let reason = format!("`{}` may not call `{}` on `{}`", connection.peer, request.method, session.local());
            session.reject(Some(&message), None, ErrorCode::Eperm, reason).await;
            continue;
        }
        let timeout = effective_timeout(request.timeout_ms, (shared.settings.method_timeout)(&request.method));
        let method = request.method.clone();
        let reply_body = match tokio::time::timeout(timeout, shared.handler.handle_request(connection.clone(), request))
            .await
        {
            Ok(Ok(result)) => Body::Response(Response::Success { result }),
            Ok(Err(error)) => {
                session.count_failure();
                Body::Response(Response::Error {
                    error_code: error.code,
                    error_message: error.message,
                    traceback: None,
                })
            }
            Err(_) => {
                consecutive_timeouts += 1;
                tracing::warn!(connection = connection.id, %method, ?timeout, consecutive_timeouts, "request timed out");
                let mut context = Object::new();
                context.insert("method".into(), Value::String(method.clone()));
                context
                    .insert("timeout_ms".into(), Value::from(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)));
                session.count_failure();
                let error = Body::Error(ErrorPayload {
                    error_code: ErrorCode::Etimeout,
                    error_message: format!("ETIMEOUT: `{method}` did not finish within {} ms", timeout.as_millis()),
                    component: session.local(),
                    severity: Severity::Error,
                    context: Some(context),
                    traceback: None,
                });
                session.send(message.reply(session.local().into(), error)).await;
                if consecutive_timeouts >= MAX_CONSECUTIVE_TIMEOUTS {
                    tracing::warn!(
                        connection = connection.id,
                        "closing after {consecutive_timeouts} consecutive timeouts"
                    );
                    return;
                }
                continue;
            }
        };
        consecutive_timeouts = 0;
        session.send(message.reply(session.local().into(), reply_body)).await;
    }
}

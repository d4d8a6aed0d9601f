//! The envelope and the four message types with their payloads (spec
//! "Message Format"). Unknown fields are ignored on decode, as the spec's
//! forward-compatibility rule asks.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::component::{ComponentId, Principal};
use crate::error_code::ErrorCode;
use crate::version::ProtocolVersion;

/// A JSON object, the type of `params`, `result`, `event_data` and `context`.
pub type Object = Map<String, Value>;

/// Method name of the handshake request.
pub const HELLO: &str = "hello";
/// Event name of the graceful close notice.
pub const GOODBYE: &str = "goodbye";
/// Event name of the periodic heartbeat.
pub const HEARTBEAT: &str = "heartbeat";

/// One IPC message: the envelope with its typed payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Protocol version of this message.
    pub version: ProtocolVersion,
    /// Send time, Unix nanoseconds (UTC).
    pub timestamp_ns: u64,
    /// Who sent it.
    pub sender: Principal,
    /// Who it is for.
    pub recipient: Principal,
    /// Unique ID of this message.
    pub message_id: Uuid,
    /// For a response: the request's `message_id`.
    #[serde(default)]
    pub correlation_id: Option<Uuid>,
    /// `message_type` and `payload`.
    #[serde(flatten)]
    pub body: Body,
}

/// The `message_type` tag with the matching `payload`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "message_type", content = "payload", rename_all = "lowercase")]
pub enum Body {
    /// Ask for an action or data.
    Request(Request),
    /// Answer a request.
    Response(Response),
    /// Notify of something that happened.
    Event(Event),
    /// Report an error that prevents normal operation.
    Error(ErrorPayload),
}

/// The wire name of a message type.
impl Body {
    /// `request`, `response`, `event` or `error`.
    pub fn message_type(&self) -> &'static str {
        match self {
            Body::Request(_) => "request",
            Body::Response(_) => "response",
            Body::Event(_) => "event",
            Body::Error(_) => "error",
        }
    }
}

/// A request payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Method to invoke.
    pub method: String,
    /// Method parameters.
    pub params: Object,
    /// Caller's timeout; the server caps it (see [`crate::timeouts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// A response payload, tagged by `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Response {
    /// The call succeeded.
    Success {
        /// Method result.
        result: Object,
    },
    /// The call failed.
    Error {
        /// Why.
        error_code: ErrorCode,
        /// Human-readable reason.
        error_message: String,
        /// Where, for debugging.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceback: Option<String>,
    },
}

/// An event payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Event identifier, e.g. `heartbeat`.
    pub event_name: String,
    /// Event-specific data.
    pub event_data: Object,
}

/// Severity of an [`ErrorPayload`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Degraded but working.
    Warning,
    /// An operation failed.
    Error,
    /// The component cannot go on.
    Critical,
}

/// An error message payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorPayload {
    /// Error code.
    pub error_code: ErrorCode,
    /// Human-readable description.
    pub error_message: String,
    /// Component reporting the error.
    pub component: ComponentId,
    /// How bad it is.
    pub severity: Severity,
    /// Additional context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Object>,
    /// Stack trace for debugging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceback: Option<String>,
}

/// Health reported in a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    /// Operating normally.
    Ok,
    /// Having issues but functional.
    Degraded,
    /// Near failure.
    Critical,
}

/// `event_data` of a `heartbeat` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Heartbeat {
    /// Self-reported health.
    pub status: HealthStatus,
    /// The spec's metrics.
    pub metrics: HeartbeatMetrics,
}

/// The spec's heartbeat metrics, plus two ClawOS additions the schema allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HeartbeatMetrics {
    /// Component uptime, nanoseconds.
    pub uptime_ns: u64,
    /// Messages handled since start.
    pub messages_processed: u64,
    /// Messages rejected or failed since start.
    pub messages_failed: u64,
    /// Resident set size, bytes.
    pub memory_usage_bytes: u64,
    /// CPU used since the previous sample, percent of the whole machine.
    pub cpu_usage_percent: f64,
    /// Open IPC connections.
    pub active_connections: u64,
    /// Open file descriptors (ClawOS addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_fds: Option<u64>,
    /// OS threads (ClawOS addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u64>,
}

/// Current Unix time in nanoseconds (0 if the clock is before 1970).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Message {
    /// A new message with a fresh v4 `message_id` and the current time.
    pub fn new(version: ProtocolVersion, sender: Principal, recipient: Principal, body: Body) -> Self {
        Message {
            version,
            timestamp_ns: now_ns(),
            sender,
            recipient,
            message_id: Uuid::new_v4(),
            correlation_id: None,
            body,
        }
    }

    /// A request to `method` on `recipient`.
    pub fn request(
        version: ProtocolVersion,
        sender: Principal,
        recipient: Principal,
        method: impl Into<String>,
        params: Object,
        timeout_ms: Option<u64>,
    ) -> Self {
        let body = Body::Request(Request { method: method.into(), params, timeout_ms });
        let mut request = Message::new(version, sender, recipient, body);
        // The spec requires a non-null correlation_id on requests; a fresh ID
        // names the exchange (the response correlates to `message_id`).
        request.correlation_id = Some(Uuid::new_v4());
        request
    }

    /// An event from `sender` to `recipient`.
    pub fn event(
        version: ProtocolVersion,
        sender: Principal,
        recipient: Principal,
        event_name: impl Into<String>,
        event_data: Object,
    ) -> Self {
        let body = Body::Event(Event { event_name: event_name.into(), event_data });
        Message::new(version, sender, recipient, body)
    }

    /// The answer to `self`, correlated by `message_id`, sent back to its sender.
    pub fn reply(&self, responder: Principal, body: Body) -> Message {
        let mut reply = Message::new(self.version, responder, self.sender, body);
        reply.correlation_id = Some(self.message_id);
        reply
    }
}

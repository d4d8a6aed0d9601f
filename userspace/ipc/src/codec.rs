//! Turning one frame into a validated [`Message`] and back.

use serde_json::Value;
use uuid::Uuid;

use crate::message::Message;
use crate::schema::{self, SchemaViolation};

/// Why a frame is not a valid message. Every variant is answered with EPROTO.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The frame is not JSON (or not UTF-8).
    #[error("not JSON: {reason}")]
    NotJson {
        /// The parser's reason.
        reason: String,
    },
    /// JSON, but the schemas reject it.
    #[error("schema-invalid message: {violation}")]
    Schema {
        /// What the schema rejected.
        #[source]
        violation: SchemaViolation,
        /// The offending message's `message_id`, when readable, so the error
        /// can be correlated.
        message_id: Option<Uuid>,
    },
    /// Schema-valid, but not a message this implementation can represent
    /// (e.g. a number beyond u64).
    #[error("unsupported message: {reason}")]
    Unsupported {
        /// The deserializer's reason.
        reason: String,
        /// The offending message's `message_id`.
        message_id: Option<Uuid>,
    },
}

impl DecodeError {
    /// The offending message's `message_id`, when it could be read.
    pub fn message_id(&self) -> Option<Uuid> {
        match self {
            DecodeError::NotJson { .. } => None,
            DecodeError::Schema { message_id, .. } | DecodeError::Unsupported { message_id, .. } => *message_id,
        }
    }
}

/// Parses and validates one frame (without its `\n`).
pub fn decode(frame: &[u8]) -> Result<Message, DecodeError> {
    let value: Value =
        serde_json::from_slice(frame).map_err(|error| DecodeError::NotJson { reason: error.to_string() })?;
    let message_id = || value.get("message_id").and_then(Value::as_str).and_then(|id| Uuid::parse_str(id).ok());
    if let Err(violation) = schema::validate_message(&value) {
        return Err(DecodeError::Schema { violation, message_id: message_id() });
    }
    let id = message_id();
    serde_json::from_value(value)
        .map_err(|error| DecodeError::Unsupported { reason: error.to_string(), message_id: id })
}

/// Appends `message` as one compact JSON line (with its `\n`) to `out`.
pub fn encode_into(message: &Message, out: &mut Vec<u8>) {
    // Serializing these types cannot fail: every map key is a string and no
    // Serialize impl returns an error.
    serde_json::to_writer(&mut *out, message).expect("IPC messages always serialize");
    out.push(b'\n');
}

/// `message` as one compact JSON line, `\n` included.
pub fn encode(message: &Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    encode_into(message, &mut out);
    out
}

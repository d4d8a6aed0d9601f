//! Runtime validation against the JSON Schemas in `specs/ipc/schemas/`.
//!
//! The schema files are embedded at build time, so a daemon validates with
//! exactly the schemas its source tree shipped; the image also installs the
//! same files under `/usr/share/clawos/specs/ipc/schemas/` for operators and
//! other tools.

use std::sync::OnceLock;

use jsonschema::Validator;
use serde_json::Value;

use crate::message::HEARTBEAT;

/// The schema files, by name: `(file stem, JSON text)`.
pub const SCHEMA_FILES: [(&str, &str); 6] = [
    ("envelope", include_str!("../../../specs/ipc/schemas/envelope.json")),
    ("request", include_str!("../../../specs/ipc/schemas/request.json")),
    ("response", include_str!("../../../specs/ipc/schemas/response.json")),
    ("event", include_str!("../../../specs/ipc/schemas/event.json")),
    ("error", include_str!("../../../specs/ipc/schemas/error.json")),
    ("heartbeat", include_str!("../../../specs/ipc/schemas/heartbeat.json")),
];

/// Which schema a document is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaKind {
    /// The message envelope.
    Envelope,
    /// A request payload.
    Request,
    /// A response payload.
    Response,
    /// An event payload.
    Event,
    /// An error payload.
    Error,
    /// The `event_data` of a heartbeat event.
    Heartbeat,
}

impl SchemaKind {
    /// All kinds, in [`SCHEMA_FILES`] order.
    pub const ALL: [SchemaKind; 6] = [
        SchemaKind::Envelope,
        SchemaKind::Request,
        SchemaKind::Response,
        SchemaKind::Event,
        SchemaKind::Error,
        SchemaKind::Heartbeat,
    ];

    /// The schema's file stem.
    pub fn name(self) -> &'static str {
        SCHEMA_FILES[self as usize].0
    }

    fn payload_schema_for(message_type: &str) -> Option<SchemaKind> {
        match message_type {
            "request" => Some(SchemaKind::Request),
            "response" => Some(SchemaKind::Response),
            "event" => Some(SchemaKind::Event),
            "error" => Some(SchemaKind::Error),
            _ => None,
        }
    }
}

/// A document the schemas reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{schema} schema: {location}: {reason}")]
pub struct SchemaViolation {
    /// The schema that rejected it.
    pub schema: &'static str,
    /// JSON pointer into the message.
    pub location: String,
    /// The validator's reason.
    pub reason: String,
}

fn validators() -> &'static [Validator; 6] {
    static VALIDATORS: OnceLock<[Validator; 6]> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        SCHEMA_FILES.map(|(name, text)| {
            let schema: Value = serde_json::from_str(text)
                .unwrap_or_else(|error| panic!("embedded schema {name}.json is not JSON: {error}"));
            jsonschema::draft7::options()
                .should_validate_formats(true)
                .build(&schema)
                .unwrap_or_else(|error| panic!("embedded schema {name}.json does not compile: {error}"))
        })
    })
}

/// Checks `document` against one schema; `prefix` is the JSON pointer of
/// `document` inside the whole message, for the error's location.
pub fn validate(kind: SchemaKind, document: &Value, prefix: &str) -> Result<(), SchemaViolation> {
    validators()[kind as usize].validate(document).map_err(|error| SchemaViolation {
        schema: kind.name(),
        location: format!("{prefix}{}", error.instance_path()),
        reason: error.to_string(),
    })
}

/// Checks a whole message: the envelope, the payload schema its
/// `message_type` selects, and for `heartbeat` events the heartbeat data.
pub fn validate_message(message: &Value) -> Result<(), SchemaViolation> {
    validate(SchemaKind::Envelope, message, "")?;
    // The envelope schema guarantees both fields exist with the right types.
    let message_type = message["message_type"].as_str().unwrap_or_default();
    let payload = &message["payload"];
    if let Some(kind) = SchemaKind::payload_schema_for(message_type) {
        validate(kind, payload, "/payload")?;
    }
    if message_type == "event" && payload["event_name"] == HEARTBEAT {
        validate(SchemaKind::Heartbeat, &payload["event_data"], "/payload/event_data")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_schema_compiles_and_is_draft_07() {
        for (kind, (name, text)) in SchemaKind::ALL.into_iter().zip(SCHEMA_FILES) {
            assert_eq!(kind.name(), name);
            let schema: Value = serde_json::from_str(text).unwrap();
            assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#", "{name}");
        }
        assert_eq!(validators().len(), 6);
    }

    #[test]
    fn format_uuid_is_enforced() {
        let envelope = serde_json::json!({
            "version": "1.0", "timestamp_ns": 1, "sender": "router", "recipient": "scheduler",
            "message_id": "not-a-uuid", "message_type": "event",
            "payload": {"event_name": "x", "event_data": {}}
        });
        let violation = validate_message(&envelope).unwrap_err();
        assert_eq!(violation.location, "/message_id");
    }
}

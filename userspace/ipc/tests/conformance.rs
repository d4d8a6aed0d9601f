//! Every JSON example and schema in the frozen spec, checked against the
//! shipped schema files and the message types.

use clawos_ipc::codec::{decode, encode};
use clawos_ipc::schema::{validate, validate_message, SchemaKind, SCHEMA_FILES};
use serde_json::Value;

/// One negative case: what it breaks, how, and what the error must mention.
type Case = (&'static str, Box<dyn Fn(&mut Value)>, &'static str);

const SPEC: &str = include_str!("../../../specs/ipc/protocol-v1.0.md");

/// Every ```json block of the spec that parses (the envelope sketch uses
/// `{ ... }` and is the only one that does not).
fn spec_json_blocks() -> (Vec<Value>, usize) {
    let mut blocks = Vec::new();
    let mut unparsable = 0;
    for chunk in SPEC.split("```json").skip(1) {
        let text = chunk.split("```").next().unwrap();
        match serde_json::from_str(text) {
            Ok(value) => blocks.push(value),
            Err(_) => {
                assert!(text.contains("{ ... }"), "unexpected unparsable block: {text}");
                unparsable += 1;
            }
        }
    }
    (blocks, unparsable)
}

fn payload_kind(payload: &Value) -> SchemaKind {
    if payload.get("method").is_some() {
        SchemaKind::Request
    } else if payload.get("status").is_some() && payload.get("metrics").is_none() {
        SchemaKind::Response
    } else if payload.get("event_name").is_some() {
        SchemaKind::Event
    } else if payload.get("severity").is_some() {
        SchemaKind::Error
    } else {
        panic!("unclassified example {payload}")
    }
}

#[test]
fn every_spec_example_message_validates_decodes_and_round_trips() {
    let (blocks, unparsable) = spec_json_blocks();
    assert_eq!(unparsable, 1);
    let messages: Vec<&Value> = blocks.iter().filter(|b| b.get("message_type").is_some()).collect();
    // Heartbeat format + Appendix A's 5 messages.
    assert_eq!(messages.len(), 6);
    for example in messages {
        validate_message(example).unwrap_or_else(|e| panic!("{e}\n{example}"));
        let message = decode(&serde_json::to_vec(example).unwrap()).unwrap();
        let encoded = encode(&message);
        assert_eq!(encoded.iter().filter(|&&b| b == b'\n').count(), 1, "one line, newline-terminated");
        let reparsed: Value = serde_json::from_slice(&encoded).unwrap();
        assert_eq!(&reparsed, example, "round trip changed the message");
    }
}

#[test]
fn every_spec_example_payload_validates_against_its_schema() {
    let (blocks, _) = spec_json_blocks();
    let payloads: Vec<&Value> =
        blocks.iter().filter(|b| b.get("message_type").is_none() && b.get("$schema").is_none()).collect();
    // Request, success response, error response, event, error payloads.
    assert_eq!(payloads.len(), 5);
    for payload in payloads {
        validate(payload_kind(payload), payload, "").unwrap_or_else(|e| panic!("{e}\n{payload}"));
    }
}

#[test]
fn shipped_schemas_are_the_spec_schemas_plus_documented_extensions() {
    let (blocks, _) = spec_json_blocks();
    let spec_schemas: Vec<&Value> = blocks.iter().filter(|b| b.get("$schema").is_some()).collect();
    assert_eq!(spec_schemas.len(), SCHEMA_FILES.len());
    for spec_schema in spec_schemas {
        let id = spec_schema["$id"].as_str().unwrap();
        let (name, text) = SCHEMA_FILES
            .iter()
            .find(|(_, text)| serde_json::from_str::<Value>(text).unwrap()["$id"] == id)
            .unwrap_or_else(|| panic!("no shipped schema for {id}"));
        let mut shipped: Value = serde_json::from_str(text).unwrap();
        if *name == "envelope" {
            // ClawOS extensions (specs/ipc/README.md): the operator and
            // console principals, and a UUID pattern, because draft-07 has
            // no "uuid" format.
            for field in ["sender", "recipient"] {
                let values = shipped["properties"][field]["enum"].as_array_mut().unwrap();
                assert_eq!(values.pop(), Some(Value::from("console")));
                assert_eq!(values.pop(), Some(Value::from("operator")));
                shipped["properties"][field]["description"] = spec_schema["properties"][field]["description"].clone();
            }
            for field in ["message_id", "correlation_id"] {
                let property = shipped["properties"][field].as_object_mut().unwrap();
                assert!(property.remove("pattern").is_some());
                property.remove("$comment");
            }
            shipped["description"] = spec_schema["description"].clone();
        }
        assert_eq!(&shipped, spec_schema, "{name}.json differs from the spec");
    }
}

#[test]
fn shipped_schema_files_on_disk_match_the_embedded_ones() {
    let dir = clawos_test_require::package_path("../../specs/ipc/schemas");
    for (name, text) in SCHEMA_FILES {
        assert_eq!(std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap(), text);
    }
}

fn base() -> Value {
    serde_json::from_str(
        r#"{"version":"1.0","timestamp_ns":5,"sender":"router","recipient":"scheduler",
            "message_id":"550e8400-e29b-41d4-a716-446655440000","correlation_id":null,
            "message_type":"event","payload":{"event_name":"x","event_data":{}}}"#,
    )
    .unwrap()
}

/// Each schema rejects a violation of each of its rules, naming where.
#[test]
fn schemas_reject_invalid_messages_with_a_location() {
    let cases: Vec<Case> = vec![
        ("missing version", Box::new(|m| drop(m.as_object_mut().unwrap().remove("version"))), "version"),
        ("bad version", Box::new(|m| m["version"] = "1".into()), "/version"),
        ("string timestamp", Box::new(|m| m["timestamp_ns"] = "5".into()), "/timestamp_ns"),
        ("negative timestamp", Box::new(|m| m["timestamp_ns"] = (-1).into()), "/timestamp_ns"),
        ("unknown sender", Box::new(|m| m["sender"] = "kernel".into()), "/sender"),
        ("unknown recipient", Box::new(|m| m["recipient"] = "nobody".into()), "/recipient"),
        ("bad message_id", Box::new(|m| m["message_id"] = "42".into()), "/message_id"),
        ("bad correlation_id", Box::new(|m| m["correlation_id"] = 7.into()), "/correlation_id"),
        ("bad message_type", Box::new(|m| m["message_type"] = "notice".into()), "/message_type"),
        ("payload not object", Box::new(|m| m["payload"] = Value::Array(vec![])), "/payload"),
        ("event without data", Box::new(|m| drop(m["payload"].as_object_mut().unwrap().remove("event_data"))), "event"),
        ("request payload", Box::new(|m| m["message_type"] = "request".into()), "request"),
        (
            "timeout over cap",
            Box::new(|m| {
                m["message_type"] = "request".into();
                m["payload"] = serde_json::json!({"method": "x", "params": {}, "timeout_ms": 30001});
            }),
            "/payload/timeout_ms",
        ),
        (
            "success without result",
            Box::new(|m| {
                m["message_type"] = "response".into();
                m["payload"] = serde_json::json!({"status": "success"});
            }),
            "response",
        ),
        (
            "error response without code",
            Box::new(|m| {
                m["message_type"] = "response".into();
                m["payload"] = serde_json::json!({"status": "error", "error_message": "x"});
            }),
            "response",
        ),
        (
            "error code 9",
            Box::new(|m| {
                m["message_type"] = "error".into();
                m["payload"] = serde_json::json!({"error_code": 9, "error_message": "x", "component": "router", "severity": "error"});
            }),
            "/payload/error_code",
        ),
        (
            "bad severity",
            Box::new(|m| {
                m["message_type"] = "error".into();
                m["payload"] = serde_json::json!({"error_code": 1, "error_message": "x", "component": "router", "severity": "fatal"});
            }),
            "/payload/severity",
        ),
        (
            "heartbeat without metrics",
            Box::new(|m| m["payload"] = serde_json::json!({"event_name": "heartbeat", "event_data": {"status": "ok"}})),
            "heartbeat",
        ),
        (
            "heartbeat cpu over 100",
            Box::new(|m| {
                m["payload"] = serde_json::json!({"event_name": "heartbeat", "event_data": {"status": "ok", "metrics": {
                    "uptime_ns": 1, "messages_processed": 1, "messages_failed": 0, "memory_usage_bytes": 1,
                    "cpu_usage_percent": 100.5, "active_connections": 0}}})
            }),
            "/payload/event_data/metrics/cpu_usage_percent",
        ),
    ];
    validate_message(&base()).unwrap();
    for (what, mutate, expected) in cases {
        let mut message = base();
        mutate(&mut message);
        let error = validate_message(&message).expect_err(what).to_string();
        assert!(error.contains(expected), "{what}: {error}");
        assert!(decode(&serde_json::to_vec(&message).unwrap()).is_err(), "{what}");
    }
}

#[test]
fn unknown_fields_are_ignored_for_forward_compatibility() {
    let mut message = base();
    message["added_in_1_1"] = "x".into();
    message["payload"]["added_too"] = 1.into();
    let decoded = decode(&serde_json::to_vec(&message).unwrap()).unwrap();
    assert_eq!(decoded.sender.as_str(), "router");
}

#[test]
fn non_json_and_non_utf8_are_rejected() {
    for frame in [&b"hello"[..], b"{\"version\":", b"\xff\xfe", b"", b"[]", b"null"] {
        assert!(decode(frame).is_err(), "{frame:?}");
    }
}

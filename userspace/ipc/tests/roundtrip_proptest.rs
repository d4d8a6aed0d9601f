//! Encode/decode round trip of arbitrary valid messages.

use clawos_ipc::codec::{decode, encode};
use clawos_ipc::message::Severity;
use clawos_ipc::{
    Body, ComponentId, ErrorCode, ErrorPayload, Event, Message, Object, Principal, ProtocolVersion, Request, Response,
};
use proptest::prelude::*;
use serde_json::Value;

fn component() -> impl Strategy<Value = ComponentId> {
    prop::sample::select(ComponentId::ALL.to_vec())
}

fn principal() -> impl Strategy<Value = Principal> {
    prop_oneof![component().prop_map(Principal::Component), Just(Principal::Operator)]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Strings with newlines, quotes and non-ASCII: framing must escape them.
        ".*".prop_map(Value::from),
    ]
}

fn object() -> impl Strategy<Value = Object> {
    let value = json_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop::collection::btree_map(".{0,12}", value, 0..5).prop_map(|m| m.into_iter().collect())
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        ("[a-z_]{1,16}", object(), prop::option::of(0u64..=30_000))
            .prop_map(|(method, params, timeout_ms)| Body::Request(Request { method, params, timeout_ms })),
        object().prop_map(|result| Body::Response(Response::Success { result })),
        (prop::sample::select(ErrorCode::ALL.to_vec()), ".*", prop::option::of(".*")).prop_map(
            |(error_code, error_message, traceback)| Body::Response(Response::Error {
                error_code,
                error_message,
                traceback
            })
        ),
        // "heartbeat" has its own schema; arbitrary data would not satisfy it.
        ("[a-z_]{1,16}".prop_filter("not heartbeat", |n| n != "heartbeat"), object())
            .prop_map(|(event_name, event_data)| Body::Event(Event { event_name, event_data })),
        (
            prop::sample::select(ErrorCode::ALL.to_vec()),
            ".*",
            component(),
            prop::sample::select(vec![Severity::Warning, Severity::Error, Severity::Critical]),
            prop::option::of(object()),
            prop::option::of(".*"),
        )
            .prop_map(|(error_code, error_message, component, severity, context, traceback)| {
                Body::Error(ErrorPayload { error_code, error_message, component, severity, context, traceback })
            }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (
        (0u16..5, 0u16..20),
        any::<u64>(),
        principal(),
        principal(),
        any::<u128>(),
        prop::option::of(any::<u128>()),
        body(),
    )
        .prop_map(|((major, minor), timestamp_ns, sender, recipient, id, correlation, body)| Message {
            version: ProtocolVersion::new(major, minor),
            timestamp_ns,
            sender,
            recipient,
            message_id: uuid::Uuid::from_u128(id),
            correlation_id: correlation.map(uuid::Uuid::from_u128),
            body,
        })
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(message in message()) {
        let line = encode(&message);
        prop_assert_eq!(line.last(), Some(&b'\n'));
        prop_assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1, "exactly one newline: the terminator");
        let decoded = decode(&line[..line.len() - 1]).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decoded, message);
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&bytes);
    }
}

//! Streams and errors of Anthropic's Messages API (`POST /v1/messages` with
//! `"stream": true`).
//!
//! Each event is named and its data's `type` is the same name:
//! `message_start` (the message with empty content and
//! `usage.input_tokens`), per content block `content_block_start`,
//! `content_block_delta`s (`text_delta`, `input_json_delta`) and
//! `content_block_stop`, then `message_delta` (`stop_reason`, the final
//! `usage.output_tokens`) and `message_stop`. `ping` may come anywhere; an
//! `error` event may end a stream.

use serde_json::{json, Value};

use crate::{split, Event, Reply};

/// The message `id` of every stream.
pub const ID: &str = "msg_scripted";
/// The `model` of every stream.
pub const MODEL: &str = "scripted-model";

/// The event whose name is `data`'s `type`.
pub fn event(data: Value) -> Event {
    let name = data["type"].as_str().expect("an Anthropic event's data has a `type`").to_owned();
    Event::Named { event: name, data }
}

/// `message_start`: the message, no content yet, `input_tokens`, and the
/// placeholder `output_tokens: 1` the real API sends.
pub fn message_start(input_tokens: u64) -> Event {
    event(json!({
        "type": "message_start",
        "message": {
            "id": ID,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": MODEL,
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        },
    }))
}

/// A text block at `index`: its start, one `text_delta` per part, its stop.
pub fn text_block<I>(index: usize, parts: I) -> Vec<Event>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut events = vec![event(
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    )];
    events.extend(
        parts.into_iter().map(|part| {
            event(json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": part.as_ref()}}))
        }),
    );
    events.push(event(json!({"type": "content_block_stop", "index": index})));
    events
}

/// A tool_use block at `index`: its start (`id`, `name`, `input: {}`),
/// `args_json` in `split_into` `input_json_delta` fragments, its stop.
pub fn tool_use_block(index: usize, id: &str, name: &str, args_json: &str, split_into: usize) -> Vec<Event> {
    let mut events = vec![event(json!({
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}},
    }))];
    events.extend(split(args_json, split_into).into_iter().map(|fragment| {
        event(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": fragment}}))
    }));
    events.push(event(json!({"type": "content_block_stop", "index": index})));
    events
}

/// The end of a message: `message_delta` with `stop_reason` and the final
/// `output_tokens`, then `message_stop`.
pub fn message_end(stop_reason: &str, output_tokens: u64) -> Vec<Event> {
    vec![
        event(json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output_tokens},
        })),
        event(json!({"type": "message_stop"})),
    ]
}

/// `ping`.
pub fn ping() -> Event {
    event(json!({"type": "ping"}))
}

/// The `error` event a stream may end with (`overloaded_error`, ...).
pub fn error_event(kind: &str, message: &str) -> Event {
    event(error_json(kind, message))
}

/// A text answer: `message_start` (input tokens), one text block of
/// `parts`, `message_delta` with `stop_reason` `"end_turn"` (output
/// tokens), `message_stop`. `usage` is (input, output) tokens; without it
/// both are 0.
pub fn text<I>(parts: I, usage: Option<(u64, u64)>) -> Reply
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let (input, output) = usage.unwrap_or((0, 0));
    let mut events = vec![message_start(input)];
    events.extend(text_block(0, parts));
    events.extend(message_end("end_turn", output));
    Reply::sse(events)
}

/// A tool call: `message_start`, one tool_use block (`args_json` in
/// `split_into` fragments), `message_delta` with `stop_reason`
/// `"tool_use"`, `message_stop`; usage 0.
pub fn tool_use(id: &str, name: &str, args_json: &str, split_into: usize) -> Reply {
    let mut events = vec![message_start(0)];
    events.extend(tool_use_block(0, id, name, args_json, split_into));
    events.extend(message_end("tool_use", 0));
    Reply::sse(events)
}

/// A stream that starts well and then sends a `content_block_delta` whose
/// data is `{not json`.
pub fn malformed() -> Reply {
    let mut events = vec![message_start(0)];
    events.extend(text_block(0, ["ok"]).into_iter().take(1));
    events.push(Event::named("content_block_delta", Value::String("{not json".into())));
    Reply::sse(events)
}

/// Anthropic's error body: `{"type":"error","error":{"type","message"}}`.
pub fn error_json(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// An error answer: `status` with Anthropic's error body.
pub fn error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::status(status).body_json(error_json(kind, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(reply: &Reply) -> Vec<(String, Value)> {
        reply
            .events
            .iter()
            .map(|event| match event {
                Event::Named { event, data } => {
                    assert_eq!(data["type"], event.as_str());
                    (event.clone(), data.clone())
                }
                other => panic!("not a named event: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn text_is_a_complete_message() {
        let events = named(&text(["Hel", "lo"], Some((7, 2))));
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 7);
        assert_eq!(events[0].1["message"]["content"], json!([]));
        assert_eq!(events[1].1["content_block"], json!({"type": "text", "text": ""}));
        assert_eq!(events[2].1["delta"], json!({"type": "text_delta", "text": "Hel"}));
        assert_eq!(events[5].1["delta"]["stop_reason"], "end_turn");
        assert_eq!(events[5].1["usage"]["output_tokens"], 2);
        assert!(text(["x"], None).events[0].to_wire().starts_with("event: message_start\ndata: {"));
    }

    #[test]
    fn tool_use_streams_partial_json() {
        let events = named(&tool_use("toolu_1", "read_file", "{\"path\":\"a\"}", 4));
        assert_eq!(
            events[1].1["content_block"],
            json!({"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}})
        );
        let args: String = events[2..6]
            .iter()
            .map(|(_, data)| {
                assert_eq!(data["delta"]["type"], "input_json_delta");
                data["delta"]["partial_json"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(args, "{\"path\":\"a\"}");
        assert_eq!(events[6].0, "content_block_stop");
        assert_eq!(events[7].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(events[8].0, "message_stop");
    }

    #[test]
    fn malformed_data_is_sent_as_it_is() {
        let reply = malformed();
        assert_eq!(reply.events.last().unwrap().to_wire(), "event: content_block_delta\ndata: {not json\n\n");
    }
}

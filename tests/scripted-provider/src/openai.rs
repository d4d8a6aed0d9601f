//! Streams and errors of OpenAI's Chat Completions API
//! (`POST /v1/chat/completions` with `"stream": true`).
//!
//! Each chunk is one `data:` event:
//! `{"id":"chatcmpl-..","object":"chat.completion.chunk","created":..,"model":..,
//! "choices":[{"index":0,"delta":{..},"logprobs":null,"finish_reason":null}]}`;
//! the first delta carries `"role":"assistant"`, the last choice its
//! `finish_reason`; with usage (`stream_options.include_usage`) every chunk
//! has `"usage":null` and one more chunk with `"choices":[]` carries the
//! usage; `data: [DONE]` ends the stream.

use serde::Serialize;
use serde_json::{json, Value};

use crate::{split, Event, Reply};

/// The `id` of every chunk.
pub const ID: &str = "chatcmpl-scripted";
/// The `model` of every chunk.
pub const MODEL: &str = "scripted-model";
/// The `created` of every chunk (a fixed time, so streams compare equal).
pub const CREATED: u64 = 1_700_000_000;

#[derive(Serialize)]
struct Chunk {
    id: &'static str,
    object: &'static str,
    created: u64,
    model: &'static str,
    choices: Vec<Choice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Value>,
}

#[derive(Serialize)]
struct Choice {
    index: u32,
    delta: Value,
    logprobs: Value,
    finish_reason: Option<String>,
}

fn chunk_event(delta: Value, finish_reason: Option<&str>, with_usage: bool) -> Event {
    let chunk = Chunk {
        id: ID,
        object: "chat.completion.chunk",
        created: CREATED,
        model: MODEL,
        choices: vec![Choice {
            index: 0,
            delta,
            logprobs: Value::Null,
            finish_reason: finish_reason.map(str::to_owned),
        }],
        usage: with_usage.then_some(Value::Null),
    };
    Event::Data(serde_json::to_string(&chunk).expect("a chunk serializes"))
}

/// One chunk whose only choice has `delta` and `finish_reason`.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Event {
    chunk_event(delta, finish_reason, false)
}

/// The usage chunk: `"choices":[]` and `usage` with `prompt_tokens`,
/// `completion_tokens` and their `total_tokens`.
pub fn usage_chunk(prompt_tokens: u64, completion_tokens: u64) -> Event {
    let chunk = Chunk {
        id: ID,
        object: "chat.completion.chunk",
        created: CREATED,
        model: MODEL,
        choices: Vec::new(),
        usage: Some(json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        })),
    };
    Event::Data(serde_json::to_string(&chunk).expect("a chunk serializes"))
}

/// `data: [DONE]`, the end of the stream.
pub fn done() -> Event {
    Event::data("[DONE]")
}

/// A text answer: a first chunk with the role (and empty content), one
/// chunk per part in `delta.content`, a chunk with `finish_reason`
/// `"stop"`, the usage chunk when `usage` (prompt, completion tokens) is
/// given, and `[DONE]`.
pub fn text<I>(parts: I, usage: Option<(u64, u64)>) -> Reply
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let with_usage = usage.is_some();
    let mut events = vec![chunk_event(json!({"role": "assistant", "content": ""}), None, with_usage)];
    events.extend(parts.into_iter().map(|part| chunk_event(json!({"content": part.as_ref()}), None, with_usage)));
    events.push(chunk_event(json!({}), Some("stop"), with_usage));
    if let Some((prompt, completion)) = usage {
        events.push(usage_chunk(prompt, completion));
    }
    events.push(done());
    Reply::sse(events)
}

/// The first delta of tool call `index`: its id, `"type":"function"`, the
/// function's name and empty arguments.
fn call_head(index: usize, id: &str, name: &str) -> Value {
    json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}})
}

/// A later delta of tool call `index`: a fragment of its arguments.
fn call_fragment(index: usize, fragment: &str) -> Value {
    json!({"index": index, "function": {"arguments": fragment}})
}

/// One tool call: a first delta (role, `content: null`, the call's `index`
/// 0, `id`, type, name and empty arguments), then `args_json` in
/// `split_into` fragments of `function.arguments`, one delta each, then
/// `finish_reason` `"tool_calls"` and `[DONE]`.
pub fn tool_call(id: &str, name: &str, args_json: &str, split_into: usize) -> Reply {
    parallel_tool_calls(&[(id, name, args_json)], split_into)
}

/// Several tool calls in one answer, interleaved by `index`: first each
/// call's head, then the first argument fragment of each call, then the
/// second of each, and so on (`split_into` fragments per call); then
/// `finish_reason` `"tool_calls"` and `[DONE]`. `calls` are
/// `(id, name, args_json)`.
pub fn parallel_tool_calls(calls: &[(&str, &str, &str)], split_into: usize) -> Reply {
    let mut events = Vec::new();
    for (index, (id, name, _)) in calls.iter().enumerate() {
        let mut delta = json!({"tool_calls": [call_head(index, id, name)]});
        if index == 0 {
            delta["role"] = json!("assistant");
            delta["content"] = Value::Null;
        }
        events.push(chunk(delta, None));
    }
    let fragments: Vec<Vec<String>> = calls.iter().map(|(_, _, args)| split(args, split_into)).collect();
    for round in 0..split_into.max(1) {
        for (index, pieces) in fragments.iter().enumerate() {
            events.push(chunk(json!({"tool_calls": [call_fragment(index, &pieces[round])]}), None));
        }
    }
    events.push(chunk(json!({}), Some("tool_calls")));
    events.push(done());
    Reply::sse(events)
}

/// A stream that starts well and then sends `data: {not json`, then
/// `[DONE]`.
pub fn malformed() -> Reply {
    Reply::sse([chunk(json!({"role": "assistant", "content": ""}), None), Event::data("{not json"), done()])
}

/// OpenAI's error body: `{"error":{"message","type","param","code"}}`.
pub fn error_json(kind: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

/// An error answer: `status` with OpenAI's error body.
pub fn error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::status(status).body_json(error_json(kind, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payloads(reply: &Reply) -> Vec<Value> {
        reply
            .events
            .iter()
            .map(|event| match event {
                Event::Data(data) if data == "[DONE]" => json!("[DONE]"),
                Event::Data(data) => serde_json::from_str(data).unwrap(),
                other => panic!("not a data event: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn text_is_a_complete_stream() {
        let reply = text(["Hel", "lo"], Some((3, 2)));
        let wire: String = reply.events.iter().map(Event::to_wire).collect();
        assert!(wire.starts_with(
            "data: {\"id\":\"chatcmpl-scripted\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"scripted-model\",\"choices\":[{\"index\":0,\"delta\":"
        ));
        assert!(wire.ends_with("data: [DONE]\n\n"));
        let chunks = payloads(&reply);
        assert_eq!(chunks.len(), 6);
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        let content: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
        assert_eq!(content, "Hello");
        assert_eq!(chunks[3]["choices"][0]["finish_reason"], "stop");
        assert!(chunks[..4].iter().all(|c| c.get("usage") == Some(&Value::Null)));
        assert_eq!(chunks[4]["choices"], json!([]));
        assert_eq!(chunks[4]["usage"], json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}));
        let plain = payloads(&text(["x"], None));
        assert_eq!(plain.len(), 4);
        assert!(plain[..3].iter().all(|c| c.get("usage").is_none()));
    }

    #[test]
    fn a_tool_call_is_split_by_index() {
        let chunks = payloads(&tool_call("call_1", "read_file", "{\"path\":\"notes.md\"}", 3));
        assert_eq!(chunks.len(), 6);
        let head = &chunks[0]["choices"][0]["delta"];
        assert_eq!(head["role"], "assistant");
        assert_eq!(head["content"], Value::Null);
        assert_eq!(
            head["tool_calls"][0],
            json!({"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ""}})
        );
        let args: String = chunks[1..4]
            .iter()
            .map(|c| {
                let call = &c["choices"][0]["delta"]["tool_calls"][0];
                assert_eq!(call.as_object().unwrap().len(), 2, "{call}");
                assert_eq!(call["index"], 0);
                call["function"]["arguments"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(args, "{\"path\":\"notes.md\"}");
        assert_eq!(chunks[4]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(chunks[5], "[DONE]");
    }

    #[test]
    fn parallel_calls_interleave() {
        let chunks = payloads(&parallel_tool_calls(&[("c0", "a", "{\"x\":1}"), ("c1", "b", "{\"y\":2}")], 2));
        let indexes: Vec<u64> =
            chunks[..6].iter().map(|c| c["choices"][0]["delta"]["tool_calls"][0]["index"].as_u64().unwrap()).collect();
        assert_eq!(indexes, [0, 1, 0, 1, 0, 1]);
        assert_eq!(chunks[1]["choices"][0]["delta"]["tool_calls"][0]["id"], "c1");
        let mut args = [String::new(), String::new()];
        for c in &chunks[2..6] {
            let call = &c["choices"][0]["delta"]["tool_calls"][0];
            args[call["index"].as_u64().unwrap() as usize].push_str(call["function"]["arguments"].as_str().unwrap());
        }
        assert_eq!(args, ["{\"x\":1}", "{\"y\":2}"]);
        assert_eq!(chunks[6]["choices"][0]["finish_reason"], "tool_calls");
    }
}

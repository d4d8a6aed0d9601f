//! Anthropic Messages, native and streamed (`specs/agent/providers.md`):
//! the system prompt apart, content blocks, `tool_use` answered by
//! `tool_result` blocks in the next user message.
//!
//! Owns: this protocol's request body (consecutive messages of one side
//! merged, as the API wants them to alternate) and assembling its events:
//! `message_start` (prompt tokens), `content_block_start` /
//! `content_block_delta` (`text_delta`, `input_json_delta`) /
//! `content_block_stop` per block index, `message_delta` (stop reason,
//! answer tokens), `message_stop`. An answer is complete only on
//! `message_stop`; an `error` event is the provider's error.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::http::{optional_fields, Answer, Protocol, Sizes};
use super::openai::arguments;
use super::{
    estimate_request, ChatRequest, ChatResponse, FinishReason, ProviderError, Role, TextSink, ToolCall, Usage,
};

/// The API version this client speaks.
const API_VERSION: &str = "2023-06-01";

/// The Messages protocol.
pub struct Anthropic;

/// The request body.
pub fn body(request: &ChatRequest) -> Value {
    let mut system = Vec::new();
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = match message.role {
            Role::System => {
                system.push(message.content.clone());
                continue;
            }
            Role::User => ("user", vec![json!({"type": "text", "text": message.content})]),
            Role::Tool => (
                "user",
                vec![json!({"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content})],
            ),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !message.content.is_empty() {
                    blocks.push(json!({"type": "text", "text": message.content}));
                }
                for call in &message.tool_calls {
                    let input = if call.arguments.is_object() { call.arguments.clone() } else { json!({}) };
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                ("assistant", blocks)
            }
        };
        match messages.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": true,
        "messages": messages.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect::<Vec<_>>(),
    });
    if !system.is_empty() {
        body["system"] = system.join("\n\n").into();
    }
    optional_fields(
        &mut body,
        request,
        |tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters}),
    );
    body
}

/// A content block being assembled.
enum Block {
    Text,
    ToolUse { id: String, name: String, input: String },
}

/// Assembles one answer from the stream's events.
#[derive(Default)]
struct Assembly {
    text: String,
    blocks: BTreeMap<u64, Block>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    finish: Option<FinishReason>,
    model: String,
    stopped: bool,
}

impl Assembly {
    /// Takes one event (its name and data).
    fn event(&mut self, name: &str, data: &Value, on_text: TextSink<'_>) -> Result<(), String> {
        let index = || data.get("index").and_then(Value::as_u64).ok_or_else(|| format!("`{name}` without an index"));
        match name {
            "message_start" => {
                let message = data.get("message").ok_or("`message_start` without a message")?;
                if let Some(model) = message.get("model").and_then(Value::as_str) {
                    model.clone_into(&mut self.model);
                }
                self.input_tokens = message.pointer("/usage/input_tokens").and_then(Value::as_u64);
                self.output_tokens = message.pointer("/usage/output_tokens").and_then(Value::as_u64).filter(|&n| n > 0);
            }
            "content_block_start" => {
                let block = data.get("content_block").ok_or("`content_block_start` without a block")?;
                let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
                let block = match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => Block::ToolUse { id: text("id"), name: text("name"), input: String::new() },
                    _ => Block::Text,
                };
                self.blocks.insert(index()?, block);
            }
            "content_block_delta" => {
                let delta = data.get("delta").ok_or("`content_block_delta` without a delta")?;
                match (delta.get("type").and_then(Value::as_str), self.blocks.get_mut(&index()?)) {
                    (Some("text_delta"), Some(Block::Text)) => {
                        let text = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        self.text.push_str(text);
                        if !text.is_empty() {
                            on_text(text);
                        }
                    }
                    (Some("input_json_delta"), Some(Block::ToolUse { input, .. })) => {
                        input.push_str(delta.get("partial_json").and_then(Value::as_str).unwrap_or(""));
                    }
                    // Thinking and signature deltas are not shown.
                    (Some(_), Some(_)) => {}
                    (_, None) => return Err("a delta for a block that did not start".into()),
                    (None, _) => return Err("a delta without a type".into()),
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.finish = Some(match reason {
                        "end_turn" | "stop_sequence" => FinishReason::Stop,
                        "tool_use" => FinishReason::ToolCalls,
                        "max_tokens" => FinishReason::Length,
                        _ => FinishReason::Other,
                    });
                }
                if let Some(tokens) = data.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.output_tokens = Some(tokens);
                }
                if let Some(tokens) = data.pointer("/usage/input_tokens").and_then(Value::as_u64) {
                    self.input_tokens = Some(tokens);
                }
            }
            "message_stop" => self.stopped = true,
            "content_block_stop" | "ping" => {}
            // Event types added later are ignored, as the API asks.
            _ => {}
        }
        Ok(())
    }

    /// How much it holds so far.
    fn sizes(&self) -> Sizes {
        let call = |block: &Block| match block {
            Block::ToolUse { name, input, .. } => name.len() + input.len(),
            Block::Text => 0,
        };
        Sizes {
            text: self.text.len(),
            calls: self.blocks.len(),
            largest_call: self.blocks.values().map(call).max().unwrap_or(0),
        }
    }

    fn finish(self, request: &ChatRequest) -> ChatResponse {
        let tool_calls: Vec<ToolCall> = self
            .blocks
            .into_values()
            .filter_map(|block| match block {
                Block::ToolUse { id, name, input } => Some(ToolCall { id, name, arguments: arguments(&input) }),
                Block::Text => None,
            })
            .collect();
        let usage = match (self.input_tokens, self.output_tokens) {
            (Some(input_tokens), Some(output_tokens)) => Usage { input_tokens, output_tokens, estimated: false },
            _ => estimate_request(request, &self.text, &tool_calls),
        };
        let finish =
            self.finish.unwrap_or(if tool_calls.is_empty() { FinishReason::Stop } else { FinishReason::ToolCalls });
        let model = if self.model.is_empty() { request.model.clone() } else { self.model };
        ChatResponse { text: self.text, tool_calls, usage, finish, model }
    }
}

impl Protocol for Anthropic {
    const PATH: &'static str = "messages";
    const HEADERS: &'static [(&'static str, &'static str)] = &[("anthropic-version", API_VERSION)];

    fn key_header(key: &str) -> (&'static str, String) {
        ("x-api-key", key.to_owned())
    }

    fn body(request: &ChatRequest) -> Value {
        body(request)
    }

    async fn read(mut answer: Answer<'_>, on_text: TextSink<'_>) -> Result<ChatResponse, ProviderError> {
        let mut assembly = Assembly::default();
        while !assembly.stopped {
            let Some(event) = answer.next().await? else {
                return Err(answer.interrupted("the stream ended before message_stop"));
            };
            if event.data.trim().is_empty() {
                continue;
            }
            let data: Value = serde_json::from_str(&event.data)
                .map_err(|e| answer.malformed(format!("an event is not JSON ({e}): {}", event.data)))?;
            let name = if event.event.is_empty() {
                data.get("type").and_then(Value::as_str).unwrap_or("").to_owned()
            } else {
                event.event.clone()
            };
            if name == "error" {
                // Mid-stream errors (`overloaded_error`, `api_error`) are
                // the provider's: as transient as their HTTP statuses.
                let kind = data.pointer("/error/type").and_then(Value::as_str).unwrap_or("error");
                let message = data.pointer("/error/message").and_then(Value::as_str).unwrap_or("");
                let status = match kind {
                    "overloaded_error" => 529,
                    "rate_limit_error" => 429,
                    "api_error" => 500,
                    _ => 400,
                };
                return Err(answer.status(status, &format!("{kind}: {message}")));
            }
            assembly.event(&name, &data, on_text).map_err(|e| answer.malformed(e))?;
            answer.within_limits(assembly.sizes())?;
        }
        Ok(assembly.finish(answer.request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ChatMessage;

    #[test]
    fn tool_results_follow_their_calls_in_one_user_message() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![
                ChatMessage::text(Role::System, "sys"),
                ChatMessage::text(Role::User, "hi"),
                ChatMessage::calls(
                    "let me look",
                    vec![
                        ToolCall { id: "a".into(), name: "t".into(), arguments: json!({"x": 1}) },
                        ToolCall { id: "b".into(), name: "t".into(), arguments: json!({}) },
                    ],
                ),
                ChatMessage::tool_result("a", "1"),
                ChatMessage::tool_result("b", "2"),
            ],
            tools: Vec::new(),
            max_tokens: 10,
            temperature: Some(0.0),
        };
        let body = body(&request);
        assert_eq!(body["system"], "sys");
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["content"][1], json!({"type": "tool_use", "id": "a", "name": "t", "input": {"x": 1}}));
        assert_eq!(messages[2]["role"], "user");
        assert_eq!(messages[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(messages[2]["content"][1]["tool_use_id"], "b");
    }

    #[test]
    fn input_json_deltas_make_the_call() {
        let mut assembly = Assembly::default();
        let events = [
            (
                "message_start",
                json!({"message": {"model": "claude", "usage": {"input_tokens": 12, "output_tokens": 1}}}),
            ),
            (
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "tool_use", "id": "tu_1", "name": "t", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"q\": "}}),
            ),
            (
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": "\"x\"}"}}),
            ),
            ("content_block_stop", json!({"index": 0})),
            ("message_delta", json!({"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}})),
            ("message_stop", json!({})),
        ];
        for (name, data) in &events {
            assembly.event(name, data, &|_| {}).unwrap();
        }
        assert!(assembly.stopped);
        let response = assembly.finish(&ChatRequest {
            model: "m".into(),
            messages: Vec::new(),
            tools: Vec::new(),
            max_tokens: 1,
            temperature: None,
        });
        assert_eq!(
            response.tool_calls,
            vec![ToolCall { id: "tu_1".into(), name: "t".into(), arguments: json!({"q": "x"}) }]
        );
        assert_eq!(response.usage, Usage { input_tokens: 12, output_tokens: 7, estimated: false });
        assert_eq!(response.finish, FinishReason::ToolCalls);
        assert_eq!(response.model, "claude");
    }
}

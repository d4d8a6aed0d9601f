//! OpenAI-compatible Chat Completions, streamed (`specs/agent/providers.md`):
//! OpenAI itself, OpenRouter, Ollama's /v1, vLLM, llama.cpp's server, Groq,
//! Mistral, DeepSeek, Together, and the in-box model's server.
//!
//! Owns: the request body of this protocol and assembling its stream: text
//! deltas, tool-call deltas by `index` (the id and name come in the first
//! delta of a call, the arguments in fragments after), the finish reason,
//! the usage chunk. An answer is complete only on `data: [DONE]` or a
//! finish reason; a stream that ends before either is interrupted.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::http::{optional_fields, Answer, Protocol, Sizes};
use super::{
    estimate_request, ChatRequest, ChatResponse, FinishReason, ProviderError, Role, TextSink, ToolCall, Usage,
};

/// The Chat Completions protocol.
pub struct OpenAi;

/// The request body.
pub fn body(request: &ChatRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|message| match message.role {
            Role::Assistant if !message.tool_calls.is_empty() => json!({
                "role": "assistant",
                "content": if message.content.is_empty() { Value::Null } else { message.content.clone().into() },
                "tool_calls": message.tool_calls.iter().map(|call| json!({
                    "id": call.id, "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments.to_string()},
                })).collect::<Vec<_>>(),
            }),
            Role::Tool => json!({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}),
            role => json!({"role": role, "content": message.content}),
        })
        .collect();
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": request.max_tokens,
    });
    optional_fields(
        &mut body,
        request,
        |tool| json!({"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters}}),
    );
    body
}

/// A tool call being assembled from its deltas.
#[derive(Default)]
struct Partial {
    id: String,
    name: String,
    arguments: String,
}

/// The arguments of a finished call: its JSON object, `{}` when empty; a
/// fragment that is not JSON is kept as a string, so the tool answers the
/// model that its arguments were wrong instead of the turn failing.
pub(super) fn arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// Assembles one answer from the stream's chunks.
#[derive(Default)]
pub(super) struct Assembly {
    text: String,
    calls: BTreeMap<u64, Partial>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    model: String,
}

impl Assembly {
    /// Takes one chunk; text goes to `on_text` as it arrives.
    fn chunk(&mut self, chunk: &Value, on_text: TextSink<'_>) -> Result<(), String> {
        if let Some(error) = chunk.get("error") {
            return Err(format!(
                "the stream carried an error: {}",
                error.get("message").and_then(Value::as_str).unwrap_or("(no message)")
            ));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            model.clone_into(&mut self.model);
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Some(Usage {
                input_tokens: count("prompt_tokens"),
                output_tokens: count("completion_tokens"),
                estimated: false,
            });
        }
        let choices = chunk.get("choices").and_then(Value::as_array).ok_or("a chunk without `choices`")?;
        for choice in choices.iter().filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0) {
            let delta = choice.get("delta").or_else(|| choice.get("message")).unwrap_or(&Value::Null);
            if let Some(text) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                self.text.push_str(text);
                on_text(text);
            }
            for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(self.calls.len() as u64);
                let partial = self.calls.entry(index).or_default();
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    id.clone_into(&mut partial.id);
                }
                let function = call.get("function").unwrap_or(&Value::Null);
                if let Some(name) = function.get("name").and_then(Value::as_str) {
                    partial.name.push_str(name);
                }
                if let Some(fragment) = function.get("arguments").and_then(Value::as_str) {
                    partial.arguments.push_str(fragment);
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(match reason {
                    "stop" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    _ => FinishReason::Other,
                });
            }
        }
        Ok(())
    }

    /// How much it holds so far.
    fn sizes(&self) -> Sizes {
        Sizes {
            text: self.text.len(),
            calls: self.calls.len(),
            largest_call: self.calls.values().map(|call| call.name.len() + call.arguments.len()).max().unwrap_or(0),
        }
    }

    /// The answer, its usage estimated when the provider sent none.
    fn finish(self, request: &ChatRequest) -> Result<ChatResponse, String> {
        let mut tool_calls = Vec::new();
        for (index, partial) in self.calls {
            if partial.name.is_empty() {
                return Err(format!("tool call {index} has no name"));
            }
            let id = if partial.id.is_empty() { format!("call_{index}") } else { partial.id };
            tool_calls.push(ToolCall { id, name: partial.name, arguments: arguments(&partial.arguments) });
        }
        let usage = self.usage.unwrap_or_else(|| estimate_request(request, &self.text, &tool_calls));
        let finish =
            self.finish.unwrap_or(if tool_calls.is_empty() { FinishReason::Stop } else { FinishReason::ToolCalls });
        let model = if self.model.is_empty() { request.model.clone() } else { self.model };
        Ok(ChatResponse { text: self.text, tool_calls, usage, finish, model })
    }
}

impl Protocol for OpenAi {
    const PATH: &'static str = "chat/completions";

    fn key_header(key: &str) -> (&'static str, String) {
        ("authorization", format!("Bearer {key}"))
    }

    fn body(request: &ChatRequest) -> Value {
        body(request)
    }

    async fn read(mut answer: Answer<'_>, on_text: TextSink<'_>) -> Result<ChatResponse, ProviderError> {
        let mut assembly = Assembly::default();
        loop {
            let Some(event) = answer.next().await? else {
                if assembly.finish.is_some() {
                    break;
                }
                return Err(answer.interrupted("the stream ended before [DONE] or a finish reason"));
            };
            let data = event.data.trim();
            if data == "[DONE]" {
                break;
            }
            if data.is_empty() {
                continue;
            }
            let chunk: Value = serde_json::from_str(data)
                .map_err(|e| answer.malformed(format!("a chunk is not JSON ({e}): {data}")))?;
            assembly.chunk(&chunk, on_text).map_err(|e| answer.malformed(e))?;
            answer.within_limits(assembly.sizes())?;
        }
        assembly.finish(answer.request).map_err(|e| answer.malformed(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ChatMessage, ToolSpec};

    fn request() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![
                ChatMessage::text(Role::System, "sys"),
                ChatMessage::text(Role::User, "hi"),
                ChatMessage::calls(
                    "",
                    vec![ToolCall { id: "c1".into(), name: "t".into(), arguments: json!({"a": 1}) }],
                ),
                ChatMessage::tool_result("c1", "42"),
            ],
            tools: vec![ToolSpec { name: "t".into(), description: "d".into(), parameters: json!({"type": "object"}) }],
            max_tokens: 10,
            temperature: None,
        }
    }

    #[test]
    fn the_body_is_the_protocol() {
        let body = body(&request());
        assert_eq!(body["messages"][2]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(body["messages"][3], json!({"role": "tool", "tool_call_id": "c1", "content": "42"}));
        assert_eq!(body["tools"][0]["function"]["name"], "t");
        assert!(body.get("temperature").is_none());
    }

    #[test]
    fn tool_call_deltas_are_assembled_by_index() {
        let mut assembly = Assembly::default();
        let chunks = [
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "two", "arguments": ""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "one", "arguments": "{\"x\""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}, "finish_reason": "tool_calls"}]}),
        ];
        for chunk in &chunks {
            assembly.chunk(chunk, &|_| {}).unwrap();
        }
        let response = assembly.finish(&request()).unwrap();
        assert_eq!(response.finish, FinishReason::ToolCalls);
        assert_eq!(response.tool_calls[0], ToolCall { id: "a".into(), name: "one".into(), arguments: json!({"x": 1}) });
        assert_eq!(response.tool_calls[1], ToolCall { id: "b".into(), name: "two".into(), arguments: json!({}) });
        assert!(response.usage.estimated);
    }
}

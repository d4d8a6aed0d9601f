//! The subset of OpenAI's Chat Completions this server speaks: the request
//! it accepts (every object refuses fields it does not know, so a client
//! never believes a setting applied when it was ignored), the checks on
//! it, and the JSON of answers, stream chunks and errors.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::engine::{Finish, Generation, Message, Outcome};

/// The model's name on this server (`GET /v1/models`, `model` of requests).
pub const MODEL_ID: &str = "smollm2-135m-instruct";
/// `max_tokens` when the request gives none.
pub const DEFAULT_MAX_TOKENS: usize = 256;
/// The most a request may ask for: a 135M model does not stay on topic
/// longer, and one answer must not hold the model for minutes.
pub const MAX_MAX_TOKENS: usize = 1024;
/// SmolLM2's recommended sampling, used when the request says nothing.
pub const DEFAULT_TEMPERATURE: f64 = 0.2;
pub const DEFAULT_TOP_P: f64 = 0.9;
/// OpenAI's limit on stop strings.
const MAX_STOP: usize = 4;

/// `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    pub max_tokens: Option<u64>,
    /// OpenAI's newer name for `max_tokens`.
    pub max_completion_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed: Option<u64>,
    pub stop: Option<Stop>,
    /// Token id (as a string) to a bias in [-100, 100].
    pub logit_bias: Option<HashMap<String, f64>>,
    pub frequency_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    /// Only 1.
    pub n: Option<u64>,
    /// Accepted and ignored: an end-user id for abuse tracking.
    pub user: Option<String>,
    /// Only absent or empty: the model does not call tools (`native_tools = false`).
    pub tools: Option<Vec<Value>>,
    /// Only `none` or `auto` (with no tools both mean none).
    pub tool_choice: Option<Value>,
}

/// `stream_options`: usage is always in the last chunk, so `include_usage`
/// changes nothing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// `stop`: one string or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// One message. `name`, `tool_calls` and `tool_call_id` are accepted so a
/// client may replay a transcript; the ChatML template renders the role and
/// the text only.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
    pub name: Option<String>,
    pub tool_calls: Option<Value>,
    pub tool_call_id: Option<String>,
}

/// `content`: text, or a list of parts of which only text parts are served.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

/// An error answered as OpenAI's `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub code: Option<&'static str>,
    pub param: Option<String>,
    pub message: String,
}

impl ApiError {
    /// 400: the request is wrong.
    pub fn invalid(param: Option<&str>, message: impl Into<String>) -> Self {
        ApiError {
            status: 400,
            kind: "invalid_request_error",
            code: None,
            param: param.map(Into::into),
            message: message.into(),
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

/// A request that passed every check: the conversation and how to answer.
#[derive(Debug)]
pub struct Checked {
    pub messages: Vec<Message>,
    pub generation: Generation,
    pub stream: bool,
}

/// Parses and checks the body of `POST /v1/chat/completions`; `seed` is
/// used when the request has none. What needs the model (the prompt's
/// length, `logit_bias` ids in the vocabulary) the server checks once it
/// is loaded.
pub fn parse_chat(body: &[u8], seed: u64) -> Result<Checked, ApiError> {
    let request: ChatRequest = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(None, format!("the body is not a valid chat completion request: {e}")))?;
    if request.model != MODEL_ID {
        return Err(ApiError {
            status: 404,
            kind: "invalid_request_error",
            code: Some("model_not_found"),
            param: Some("model".into()),
            message: format!("the model `{}` does not exist; this server has `{MODEL_ID}`", request.model),
        });
    }
    if request.messages.is_empty() {
        return Err(ApiError::invalid(Some("messages"), "`messages` is empty"));
    }
    let mut messages = Vec::with_capacity(request.messages.len());
    for (index, message) in request.messages.into_iter().enumerate() {
        let role = match message.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            "tool" => "tool",
            other => {
                return Err(ApiError::invalid(
                    Some(&format!("messages[{index}].role")),
                    format!("unknown role `{other}`"),
                ))
            }
        };
        let content = match message.content {
            None => String::new(),
            Some(Content::Text(text)) => text,
            Some(Content::Parts(parts)) => {
                let mut text = String::new();
                for part in parts {
                    match (part.kind.as_str(), part.text) {
                        ("text", Some(piece)) => text.push_str(&piece),
                        (kind, _) => {
                            return Err(ApiError::invalid(
                                Some(&format!("messages[{index}].content")),
                                format!("a content part of type `{kind}`: only text is served"),
                            ))
                        }
                    }
                }
                text
            }
        };
        messages.push(Message { role: role.into(), content });
    }
    if request.tools.as_ref().is_some_and(|tools| !tools.is_empty()) {
        return Err(ApiError::invalid(
            Some("tools"),
            format!("`{MODEL_ID}` does not call tools (native_tools = false): describe them in the prompt"),
        ));
    }
    if let Some(choice) = &request.tool_choice {
        if !matches!(choice.as_str(), Some("none" | "auto")) {
            return Err(ApiError::invalid(Some("tool_choice"), "only `none` or `auto`: this model calls no tools"));
        }
    }
    if request.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid(Some("n"), "only one choice (n = 1) is served"));
    }
    let max_tokens = match (request.max_completion_tokens, request.max_tokens) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => DEFAULT_MAX_TOKENS as u64,
    };
    if max_tokens == 0 {
        return Err(ApiError::invalid(Some("max_tokens"), "`max_tokens` must be at least 1"));
    }
    let max_tokens = max_tokens.min(MAX_MAX_TOKENS as u64) as usize;
    let temperature = request.temperature.unwrap_or(DEFAULT_TEMPERATURE);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(ApiError::invalid(Some("temperature"), "`temperature` must be between 0 and 2"));
    }
    let top_p = request.top_p.unwrap_or(DEFAULT_TOP_P);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::invalid(Some("top_p"), "`top_p` must be above 0 and at most 1"));
    }
    let stop = match request.stop {
        None => Vec::new(),
        Some(Stop::One(stop)) => vec![stop],
        Some(Stop::Many(stops)) => stops,
    };
    if stop.len() > MAX_STOP || stop.iter().any(String::is_empty) {
        return Err(ApiError::invalid(Some("stop"), format!("at most {MAX_STOP} stop strings, none empty")));
    }
    let mut logit_bias = HashMap::new();
    for (token, bias) in request.logit_bias.unwrap_or_default() {
        let id: u32 =
            token.parse().map_err(|_| ApiError::invalid(Some("logit_bias"), format!("`{token}` is not a token id")))?;
        if !(-100.0..=100.0).contains(&bias) {
            return Err(ApiError::invalid(
                Some("logit_bias"),
                format!("the bias of token {id} is not between -100 and 100"),
            ));
        }
        logit_bias.insert(id, bias as f32);
    }
    let penalty = |value: Option<f64>, name: &str| -> Result<f32, ApiError> {
        let value = value.unwrap_or(0.0);
        if !(-2.0..=2.0).contains(&value) {
            return Err(ApiError::invalid(Some(name), format!("`{name}` must be between -2 and 2")));
        }
        Ok(value as f32)
    };
    let frequency_penalty = penalty(request.frequency_penalty, "frequency_penalty")?;
    let presence_penalty = penalty(request.presence_penalty, "presence_penalty")?;
    let _ = (request.user, request.stream_options.map(|o| o.include_usage));
    Ok(Checked {
        messages,
        generation: Generation {
            max_tokens,
            temperature,
            top_p: Some(top_p),
            seed: request.seed.unwrap_or(seed),
            stop,
            logit_bias,
            frequency_penalty,
            presence_penalty,
        },
        stream: request.stream,
    })
}

/// `usage` of an answer.
pub fn usage(outcome: &Outcome) -> Value {
    json!({
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": outcome.cached_tokens},
    })
}

/// The whole answer of a request without `stream`.
pub fn completion(id: &str, created: u64, text: &str, outcome: &Outcome) -> Value {
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": MODEL_ID,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": outcome.finish.reason(),
        }],
        "usage": usage(outcome),
    })
}

/// A stream chunk carrying `delta`, and `finish_reason` and `usage` in the
/// last one.
pub fn chunk(id: &str, created: u64, delta: Value, finish: Option<Finish>, usage: Option<Value>) -> Value {
    let mut chunk = json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish.map(Finish::reason)}],
    });
    if let Some(usage) = usage {
        chunk["usage"] = usage;
    }
    chunk
}

/// `GET /v1/models`.
pub fn models() -> Value {
    json!({"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "clawos"}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: Value) -> Result<Checked, ApiError> {
        parse_chat(body.to_string().as_bytes(), 7)
    }

    #[test]
    fn a_minimal_request_gets_the_defaults() {
        let checked = parse(json!({"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}]})).unwrap();
        assert!(!checked.stream);
        assert_eq!(checked.messages, vec![Message { role: "user".into(), content: "hi".into() }]);
        let generation = checked.generation;
        assert_eq!(generation.max_tokens, DEFAULT_MAX_TOKENS);
        assert_eq!(
            (generation.temperature, generation.top_p, generation.seed),
            (DEFAULT_TEMPERATURE, Some(DEFAULT_TOP_P), 7)
        );
    }

    #[test]
    fn what_agent_loop_sends_is_accepted() {
        // The body of userspace/agent-loop's OpenAI provider, with a replayed tool call.
        let checked = parse(json!({
            "model": MODEL_ID, "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 5000, "temperature": 0,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "count "}, {"type": "text", "text": "words"}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "wc", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "3"},
            ],
        }))
        .unwrap();
        assert!(checked.stream);
        assert_eq!(checked.generation.max_tokens, MAX_MAX_TOKENS);
        assert_eq!(checked.generation.temperature, 0.0);
        let roles: Vec<_> = checked.messages.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect();
        assert_eq!(roles, [("system", "be brief"), ("user", "count words"), ("assistant", ""), ("tool", "3")]);
    }

    #[test]
    fn wrong_requests_are_refused_naming_what_is_wrong() {
        let user = json!([{"role": "user", "content": "hi"}]);
        let refused = |body: Value, needle: &str, status: u16| {
            let error = parse(body.clone()).unwrap_err();
            assert_eq!(error.status, status, "{body}: {error:?}");
            assert!(error.message.contains(needle) || error.param.as_deref() == Some(needle), "{body}: {error:?}");
        };
        let err = parse_chat(b"{not json", 0).unwrap_err();
        assert_eq!(err.status, 400);
        assert_eq!(err.body()["error"]["type"], "invalid_request_error");
        refused(json!({"model": MODEL_ID, "messages": user, "frobnicate": 1}), "frobnicate", 400);
        refused(json!({"model": MODEL_ID, "messages": [{"role": "user", "content": "hi", "extra": 1}]}), "extra", 400);
        refused(json!({"messages": user}), "model", 400);
        refused(json!({"model": "gpt-4o", "messages": user}), "model", 404);
        refused(json!({"model": MODEL_ID, "messages": []}), "messages", 400);
        refused(json!({"model": MODEL_ID, "messages": [{"role": "wizard", "content": "hi"}]}), "messages[0].role", 400);
        refused(
            json!({"model": MODEL_ID, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
            "messages[0].content",
            400,
        );
        refused(json!({"model": MODEL_ID, "messages": user, "tools": [{"type": "function"}]}), "tools", 400);
        refused(json!({"model": MODEL_ID, "messages": user, "max_tokens": 0}), "max_tokens", 400);
        refused(json!({"model": MODEL_ID, "messages": user, "temperature": 3}), "temperature", 400);
        refused(json!({"model": MODEL_ID, "messages": user, "top_p": 0}), "top_p", 400);
        refused(json!({"model": MODEL_ID, "messages": user, "n": 2}), "n", 400);
        refused(json!({"model": MODEL_ID, "messages": user, "stop": ["a", "b", "c", "d", "e"]}), "stop", 400);
        refused(json!({"model": MODEL_ID, "messages": user, "logit_bias": {"x": 1}}), "logit_bias", 400);
        refused(json!({"model": MODEL_ID, "messages": user, "logit_bias": {"2": -101}}), "logit_bias", 400);
    }
}

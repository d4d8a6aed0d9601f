//! Language-model providers: one trait ([`Provider`]) and the types a turn
//! exchanges with it, whatever the wire protocol (`specs/agent/providers.md`).
//!
//! Owns: the provider-neutral chat types, the trait, token estimation and
//! the error kinds the loop acts on (retry, fall back, end the turn).
//! Must not own: which provider an agent uses (the agent's config), the
//! turn's limits (the loop), or any secret beyond the one request that
//! needs it: a key is fetched from the vault through [`KeySource`] for each
//! request and dropped with it.

pub mod anthropic;
pub mod config;
mod http;
pub mod openai;
pub mod reliable;
pub mod text_calls;

pub use http::limits;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt (persona, tools, rules).
    System,
    /// The operator.
    User,
    /// The model.
    Assistant,
    /// A tool's result, answering one [`ToolCall`] by its id.
    Tool,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (made up when the model printed the
    /// call as text); the result message names it.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments (a JSON object; `{}` when the model gave none).
    pub arguments: serde_json::Value,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who said it.
    pub role: Role,
    /// Its text (may be empty for an assistant message that only calls tools).
    #[serde(default)]
    pub content: String,
    /// The tools an assistant message calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a [`Role::Tool`] message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A message of `role` with text only.
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        ChatMessage { role, content: content.into(), tool_calls: Vec::new(), tool_call_id: None }
    }

    /// The model's answer calling `tool_calls`, with its text.
    pub fn calls(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        ChatMessage { role: Role::Assistant, content: content.into(), tool_calls, tool_call_id: None }
    }

    /// The result of the tool call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }
}

/// A tool as the model is told about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: serde_json::Value,
}

/// One request to a model.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The model, as the provider names it.
    pub model: String,
    /// The conversation, system prompt first.
    pub messages: Vec<ChatMessage>,
    /// The tools it may call. When the model has no native tool calling
    /// the loop describes them in the system prompt instead and leaves
    /// this empty.
    pub tools: Vec<ToolSpec>,
    /// Most tokens the answer may have.
    pub max_tokens: u32,
    /// Sampling temperature, when the agent sets one.
    pub temperature: Option<f32>,
}

/// Tokens a request used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Answer tokens.
    pub output_tokens: u64,
    /// True when the provider sent no usage and these are estimates
    /// ([`estimate_tokens`]).
    pub estimated: bool,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It wants tools run.
    ToolCalls,
    /// It hit `max_tokens`.
    Length,
    /// The provider stopped it for another reason (content filter, ...).
    Other,
}

/// A complete answer: the stream ended with its terminal marker.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The text (everything that was streamed, joined).
    pub text: String,
    /// Native tool calls, assembled from their deltas by index.
    pub tool_calls: Vec<ToolCall>,
    /// Tokens used.
    pub usage: Usage,
    /// Why it stopped.
    pub finish: FinishReason,
    /// The model that answered, as the provider reported it.
    pub model: String,
}

/// What the provider knows about a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The model takes `tools` and answers native tool calls; else the
    /// loop describes the tools in the prompt and parses calls out of the
    /// text ([`text_calls`]).
    pub native_tools: bool,
    /// Its context window in tokens.
    pub context_window: u32,
}

/// Where a request's API key comes from: the vault, through
/// security-agent, at the moment of the request.
pub trait KeySource: Send + Sync {
    /// The value of vault secret `secret_id`.
    fn key(&self, secret_id: &str) -> futures::future::BoxFuture<'_, Result<zeroize::Zeroizing<String>, String>>;
}

/// Receives text as it streams; the loop shows it to the operator.
pub type TextSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// Why a request failed. Messages never contain a key: every provider
/// redacts the key it used from anything it quotes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// Could not connect or send.
    #[error("{provider}: cannot reach {endpoint}: {reason}")]
    Connect {
        /// The provider's name.
        provider: String,
        /// Scheme, host and port (never the path's query or a key).
        endpoint: String,
        /// What failed.
        reason: String,
    },
    /// The provider answered with an HTTP error status.
    #[error("{provider}: HTTP {status}: {message}")]
    Status {
        /// The provider's name.
        provider: String,
        /// The status.
        status: u16,
        /// The provider's error message (cut to 300 characters, redacted).
        message: String,
        /// Its `Retry-After`, in milliseconds, when it sent one.
        retry_after_ms: Option<u64>,
    },
    /// The stream ended (or the connection closed) before its terminal
    /// marker: `[DONE]`, `message_stop` or a finish reason.
    #[error("{provider}: the stream was interrupted: {reason}")]
    Interrupted {
        /// The provider's name.
        provider: String,
        /// What happened.
        reason: String,
    },
    /// Nothing arrived for the idle timeout.
    #[error("{provider}: no data for {idle_ms} ms")]
    Idle {
        /// The provider's name.
        provider: String,
        /// The idle timeout.
        idle_ms: u64,
    },
    /// The answer is not the protocol (bad JSON, a missing field).
    #[error("{provider}: malformed answer: {reason}")]
    Malformed {
        /// The provider's name.
        provider: String,
        /// What was wrong.
        reason: String,
    },
    /// The answer passed one of the [`limits`] of an answer:
    /// read no further, and not asked again.
    #[error("{provider}: the answer is too large: {what}")]
    TooLarge {
        /// The provider's name.
        provider: String,
        /// Which limit, and its size.
        what: String,
    },
    /// The key could not be had (vault sealed, secret missing, access denied).
    #[error("{provider}: API key: {reason}")]
    Key {
        /// The provider's name.
        provider: String,
        /// Why.
        reason: String,
    },
    /// The turn was cancelled while the request ran.
    #[error("cancelled")]
    Cancelled,
}

impl ProviderError {
    /// Whether the same request may succeed if tried again (connection
    /// errors, 408, 409, 429, 5xx, interrupted or idle streams).
    pub fn is_transient(&self) -> bool {
        match self {
            ProviderError::Connect { .. } | ProviderError::Interrupted { .. } | ProviderError::Idle { .. } => true,
            ProviderError::Status { status, .. } => matches!(status, 408 | 409 | 429) || *status >= 500,
            ProviderError::Malformed { .. }
            | ProviderError::TooLarge { .. }
            | ProviderError::Key { .. }
            | ProviderError::Cancelled => false,
        }
    }
}

/// A language model behind some protocol.
pub trait Provider: Send + Sync {
    /// The provider's name in the agent's config.
    fn name(&self) -> &str;

    /// What `model` can do.
    fn capabilities(&self, model: &str) -> Capabilities;

    /// Sends `request` and streams the answer: text to `on_text` as it
    /// arrives, tool-call deltas assembled by index. Complete only when the
    /// stream's terminal marker arrived; stops with
    /// [`ProviderError::Cancelled`] when `cancel` fires.
    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: TextSink<'a>,
        cancel: &'a CancellationToken,
    ) -> futures::future::BoxFuture<'a, Result<ChatResponse, ProviderError>>;

    /// [`Provider::chat_stream`] without showing anything.
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        cancel: &'a CancellationToken,
    ) -> futures::future::BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        self.chat_stream(request, &|_| {}, cancel)
    }

    /// Tokens `text` takes for this provider's models ([`estimate_tokens`]
    /// unless it knows better).
    fn count_tokens(&self, text: &str) -> u64 {
        estimate_tokens(text)
    }
}

/// A shared provider.
pub type SharedProvider = Arc<dyn Provider>;

/// Tokens of `text` when no tokenizer is at hand: one per four bytes,
/// rounded up, the rule of thumb for English BPE vocabularies.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// The usage of an answer whose provider sent none: the request's
/// messages and tool schemas in, the text and calls out, all estimated.
pub fn estimate_request(request: &ChatRequest, text: &str, calls: &[ToolCall]) -> Usage {
    let input = request
        .messages
        .iter()
        .map(|m| {
            estimate_tokens(&m.content)
                + m.tool_calls.iter().map(|c| estimate_tokens(&c.arguments.to_string())).sum::<u64>()
        })
        .sum::<u64>()
        + request
            .tools
            .iter()
            .map(|t| estimate_tokens(&t.parameters.to_string()) + estimate_tokens(&t.description))
            .sum::<u64>();
    let output = estimate_tokens(text)
        + calls.iter().map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.arguments.to_string())).sum::<u64>();
    Usage { input_tokens: input, output_tokens: output, estimated: true }
}

/// Tool names as the providers' APIs take them: OpenAI's and Anthropic's
/// allow `A-Z a-z 0-9 _ -`, at most 64 characters, where an agent's tool
/// names may hold more (an MCP tool is `mcp.<server>.<tool>`,
/// specs/mcp/README.md). A request's names are spelt so on the wire and
/// the answer's calls named back; a name already fit for the wire is kept.
#[derive(Debug, Default)]
pub struct WireNames {
    to_wire: std::collections::HashMap<String, String>,
    from_wire: std::collections::HashMap<String, String>,
}

/// The longest tool name both APIs take.
const MAX_WIRE_NAME: usize = 64;

impl WireNames {
    /// The wire names of `request`'s tools and of the calls in its
    /// messages: each character the APIs refuse becomes `_`, a name cut at
    /// 64 characters, and a name another already took ends in `_2`, `_3`, ...
    pub fn of(request: &ChatRequest) -> Self {
        let fits = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        let fit = |name: &str| name.len() <= MAX_WIRE_NAME && name.chars().all(fits);
        let mut all: Vec<&str> = request.tools.iter().map(|tool| tool.name.as_str()).collect();
        all.extend(
            request.messages.iter().flat_map(|message| message.tool_calls.iter().map(|call| call.name.as_str())),
        );
        let mut names = WireNames::default();
        let mut taken: std::collections::HashSet<String> =
            all.iter().filter(|name| fit(name)).map(|name| (*name).to_owned()).collect();
        for name in all.into_iter().filter(|name| !fit(name)) {
            if names.to_wire.contains_key(name) {
                continue;
            }
            let spelt: String = name.chars().map(|c| if fits(c) { c } else { '_' }).take(MAX_WIRE_NAME).collect();
            let mut wire = spelt.clone();
            for n in 2.. {
                if taken.insert(wire.clone()) {
                    break;
                }
                let suffix = format!("_{n}");
                wire = format!("{}{suffix}", &spelt[..spelt.len().min(MAX_WIRE_NAME - suffix.len())]);
            }
            names.to_wire.insert(name.to_owned(), wire.clone());
            names.from_wire.insert(wire, name.to_owned());
        }
        names
    }

    /// `request` with its tools and its messages' calls named for the wire;
    /// `None` when no name changes.
    pub fn request(&self, request: &ChatRequest) -> Option<ChatRequest> {
        if self.to_wire.is_empty() {
            return None;
        }
        let mut wire = request.clone();
        let rename = |name: &mut String| {
            if let Some(spelt) = self.to_wire.get(name) {
                name.clone_from(spelt);
            }
        };
        wire.tools.iter_mut().for_each(|tool| rename(&mut tool.name));
        wire.messages
            .iter_mut()
            .flat_map(|message| message.tool_calls.iter_mut())
            .for_each(|call| rename(&mut call.name));
        Some(wire)
    }

    /// The answer's calls named back as the agent knows its tools.
    pub fn response(&self, response: &mut ChatResponse) {
        for call in &mut response.tool_calls {
            if let Some(name) = self.from_wire.get(&call.name) {
                call.name.clone_from(name);
            }
        }
    }
}

#[cfg(test)]
mod wire_names_tests {
    use super::*;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec { name: name.into(), description: String::new(), parameters: serde_json::json!({"type": "object"}) }
    }

    #[test]
    fn names_the_apis_refuse_are_spelt_for_the_wire_and_named_back() {
        let long = format!("mcp.files.{}", "x".repeat(80));
        let tools = [spec("file_read"), spec("mcp.everything.get-sum"), spec("mcp_everything_get-sum"), spec(&long)];
        let mut request = ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::calls(
                "",
                vec![ToolCall {
                    id: "a".into(),
                    name: "mcp.everything.get-sum".into(),
                    arguments: serde_json::json!({}),
                }],
            )],
            tools: tools.to_vec(),
            max_tokens: 16,
            temperature: None,
        };
        let names = WireNames::of(&request);
        let wire = names.request(&request).expect("names changed");
        let spelt: Vec<&str> = wire.tools.iter().map(|tool| tool.name.as_str()).collect();
        assert_eq!(spelt[..3], ["file_read", "mcp_everything_get-sum_2", "mcp_everything_get-sum"]);
        assert_eq!(spelt[3].len(), 64);
        assert_eq!(wire.messages[0].tool_calls[0].name, "mcp_everything_get-sum_2");
        let mut response = ChatResponse {
            text: String::new(),
            tool_calls: vec![
                ToolCall { id: "b".into(), name: "mcp_everything_get-sum_2".into(), arguments: serde_json::json!({}) },
                ToolCall { id: "c".into(), name: "file_read".into(), arguments: serde_json::json!({}) },
            ],
            usage: Usage::default(),
            finish: FinishReason::ToolCalls,
            model: "m".into(),
        };
        names.response(&mut response);
        assert_eq!(response.tool_calls[0].name, "mcp.everything.get-sum");
        assert_eq!(response.tool_calls[1].name, "file_read");
        // A call in the history is named for the wire even without its tool.
        request.tools.truncate(1);
        assert_eq!(
            WireNames::of(&request).request(&request).unwrap().messages[0].tool_calls[0].name,
            "mcp_everything_get-sum"
        );
        request.messages.clear();
        assert!(WireNames::of(&request).request(&request).is_none());
    }
}

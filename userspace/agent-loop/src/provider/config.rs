//! A provider's table in an agent's `config.toml`, `[providers.<name>]`
//! (`specs/agent/providers.md`): which protocol, where, which vault secret
//! holds its key, and what each of its models can do and costs.
//!
//! Owns: the table's shape (unknown keys refused), building a provider
//! from it, and pricing an answer. Must not own: the protocols themselves
//! (`openai`, `anthropic`) or retries (`reliable`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::http::HttpProvider;
use super::{anthropic, openai, KeySource, SharedProvider, Usage};

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`):
    /// OpenAI, OpenRouter, Ollama's /v1, vLLM, llama.cpp's server, Groq,
    /// Mistral, DeepSeek, Together, and the in-box model.
    Openai,
    /// Anthropic Messages (`POST {base_url}/messages`), native.
    Anthropic,
}

/// `[providers.<name>]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The protocol.
    pub kind: Kind,
    /// The API's root, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Connect to this Unix socket instead of the URL's host (the in-box
    /// model's server); the URL then gives only the path.
    #[serde(default)]
    pub unix_socket: Option<PathBuf>,
    /// Every request goes through this HTTP proxy (`http://proxy:3128`;
    /// HTTPS through `CONNECT`, so the proxy sees only the host). Taken
    /// only from here, never from the environment: the config says where
    /// the conversation goes.
    #[serde(default)]
    pub proxy: Option<String>,
    /// The vault secret holding the API key, fetched for each request;
    /// none for a server that needs no key.
    #[serde(default)]
    pub api_key_secret: Option<String>,
    /// A stream with no data for this long is an error. Default 60000.
    #[serde(default = "default_idle_ms")]
    pub idle_timeout_ms: u64,
    /// Connecting may take this long. Default 10000.
    #[serde(default = "default_connect_ms")]
    pub connect_timeout_ms: u64,
    /// What each model can do and costs; a model not named here gets
    /// [`ModelSettings::default`].
    #[serde(default)]
    pub models: BTreeMap<String, ModelSettings>,
}

fn default_idle_ms() -> u64 {
    60_000
}
fn default_connect_ms() -> u64 {
    10_000
}

/// `[providers.<name>.models."<model>"]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// The model takes `tools` and answers native tool calls; when false
    /// the tools are described in the prompt and calls are parsed out of
    /// its text (`text_calls`). Default true.
    #[serde(default = "default_true")]
    pub native_tools: bool,
    /// Context window, tokens. Default 8192.
    #[serde(default = "default_context_window")]
    pub context_window: u32,
    /// US dollars per million prompt tokens. Default 0.
    #[serde(default)]
    pub input_usd_per_mtok: f64,
    /// US dollars per million answer tokens. Default 0.
    #[serde(default)]
    pub output_usd_per_mtok: f64,
}

fn default_true() -> bool {
    true
}
fn default_context_window() -> u32 {
    8192
}

impl Default for ModelSettings {
    fn default() -> Self {
        toml::from_str("").expect("every key of a model's table has a default")
    }
}

impl ProviderConfig {
    /// What `model` can do and costs.
    pub fn model(&self, model: &str) -> ModelSettings {
        self.models.get(model).cloned().unwrap_or_default()
    }

    /// The idle timeout.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    /// Scheme, host and port of `base_url` (or the socket), for errors and
    /// logs: never a path's query, never a key.
    pub fn endpoint(&self) -> String {
        if let Some(socket) = &self.unix_socket {
            return format!("unix:{}", socket.display());
        }
        match reqwest::Url::parse(&self.base_url) {
            Ok(url) => origin(&url),
            Err(_) => "an invalid base_url".into(),
        }
    }

    /// The HTTP client for this table: timeouts, the socket, TLS with the
    /// system's roots (`ring` as rustls's provider, as the tool host), and
    /// no redirects: a redirect would carry the key (reqwest strips
    /// `Authorization` but not Anthropic's `x-api-key`) and, on 307/308, the
    /// whole conversation to whatever host it names (specs/agent/providers.md,
    /// "Redirects").
    pub(super) fn http_client(&self) -> Result<reqwest::Client, String> {
        // One process-wide provider; a second install is a no-op error.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = reqwest::Url::parse(&self.base_url).map_err(|e| format!("base_url `{}`: {e}", self.base_url))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("base_url `{}`: the scheme must be http or https", self.base_url));
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(self.connect_timeout_ms))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if let Some(socket) = &self.unix_socket {
            builder = builder.unix_socket(socket.clone());
        }
        if let Some(proxy) = &self.proxy {
            builder = builder.proxy(self.proxied(proxy)?);
        }
        builder.build().map_err(|e| format!("HTTP client: {e}"))
    }
}

impl ProviderConfig {
    /// `proxy` checked: an `http` or `https` URL without credentials (a
    /// password in `config.toml` would be a secret on disk in plaintext),
    /// and not with `unix_socket` (a socket has no proxy).
    fn proxied(&self, proxy: &str) -> Result<reqwest::Proxy, String> {
        let url = reqwest::Url::parse(proxy).map_err(|e| format!("proxy `{proxy}`: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("proxy `{}`: an http or https URL with a host", origin(&url)));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!("proxy `{}`: no credentials in the URL (config.toml is not a secret)", origin(&url)));
        }
        if self.unix_socket.is_some() {
            return Err("proxy and unix_socket: a Unix socket is reached without a proxy".into());
        }
        reqwest::Proxy::all(url).map_err(|e| format!("proxy `{proxy}`: {e}"))
    }
}

/// Scheme, host and port of `url`: what errors and logs may say of it.
pub(super) fn origin(url: &reqwest::Url) -> String {
    format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port().map(|p| format!(":{p}")).unwrap_or_default()
    )
}

/// The provider `name` described by `config`, fetching keys from `keys`.
pub fn build(name: &str, config: &ProviderConfig, keys: Arc<dyn KeySource>) -> Result<SharedProvider, String> {
    let client = config.http_client().map_err(|e| format!("provider `{name}`: {e}"))?;
    Ok(match config.kind {
        Kind::Openai => Arc::new(HttpProvider::<openai::OpenAi>::new(name, config.clone(), client, keys)),
        Kind::Anthropic => Arc::new(HttpProvider::<anthropic::Anthropic>::new(name, config.clone(), client, keys)),
    })
}

/// What `usage` of `model` cost, from the table's prices.
pub fn cost_usd(config: &ProviderConfig, model: &str, usage: &Usage) -> f64 {
    let prices = config.model(model);
    (usage.input_tokens as f64 * prices.input_usd_per_mtok + usage.output_tokens as f64 * prices.output_usd_per_mtok)
        / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_refused_by_name() {
        let error =
            toml::from_str::<ProviderConfig>("kind = \"openai\"\nbase_url = \"http://x\"\napi_key = \"sk-1\"\n")
                .unwrap_err();
        assert!(error.to_string().contains("api_key"), "{error}");
        let error = toml::from_str::<ProviderConfig>(
            "kind = \"openai\"\nbase_url = \"http://x\"\n[models.m]\nnative_tool = true\n",
        )
        .unwrap_err();
        assert!(error.to_string().contains("native_tool"), "{error}");
    }

    #[test]
    fn a_proxy_is_an_http_url_without_credentials_and_never_with_a_socket() {
        let table = |extra: &str| -> ProviderConfig {
            toml::from_str(&format!("kind = \"openai\"\nbase_url = \"https://api.example/v1\"\n{extra}")).unwrap()
        };
        assert!(table("proxy = \"http://proxy.corp:3128\"").http_client().is_ok());
        for (extra, says) in [
            ("proxy = \"http://user:hunter2@proxy.corp:3128\"", "no credentials"),
            ("proxy = \"socks5://proxy.corp:1080\"", "an http or https URL"),
            ("proxy = \"http://proxy.corp:3128\"\nunix_socket = \"/run/x.sock\"", "a Unix socket"),
        ] {
            let error = table(extra).http_client().unwrap_err();
            assert!(error.contains(says) && !error.contains("hunter2"), "{extra}: {error}");
        }
    }

    #[test]
    fn prices_are_per_million_tokens() {
        let config: ProviderConfig =
            toml::from_str("kind = \"anthropic\"\nbase_url = \"https://api.anthropic.com/v1\"\n[models.m]\ninput_usd_per_mtok = 3.0\noutput_usd_per_mtok = 15.0\n").unwrap();
        let usage = Usage { input_tokens: 1_000, output_tokens: 2_000, estimated: false };
        assert!((cost_usd(&config, "m", &usage) - 0.033).abs() < 1e-12);
        assert_eq!(cost_usd(&config, "other", &usage), 0.0);
    }

    #[test]
    fn the_endpoint_names_host_and_port_only() {
        let config: ProviderConfig =
            toml::from_str("kind = \"openai\"\nbase_url = \"https://api.example.com:8443/v1?key=secret\"\n").unwrap();
        assert_eq!(config.endpoint(), "https://api.example.com:8443");
    }
}

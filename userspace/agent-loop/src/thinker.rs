//! The model a turn thinks with (`specs/agent/README.md`, "Providers"):
//! the route chosen for the turn, then the fallback routes, each with its
//! provider built from the agent's config, behind the reliability layer.
//!
//! Owns: turning an agent's config and a route into a [`Thinker`], the
//! built-in `local` provider (the in-box model), fetching API keys from the
//! vault per request ([`VaultKeys`]), and pricing each answer. Must not own:
//! the protocols, retries and fallback themselves (`provider`).

use std::sync::Arc;

use base64::Engine as _;
use clawos_api::security_agent::{self, SecretGet};
use clawos_ipc::ComponentId;
use futures::future::BoxFuture;
use futures::FutureExt as _;
use tokio_util::sync::CancellationToken;
use zeroize::Zeroizing;

use crate::config::{AgentConfig, Route, LOCAL_MODEL, LOCAL_MODEL_SOCKET, LOCAL_PROVIDER};
use crate::provider::config::{self as provider_config, ProviderConfig};
use crate::provider::reliable::{Reliable, RetryPolicy};
use crate::provider::{ChatRequest, ChatResponse, KeySource, ProviderError, WireNames};
use crate::turn::{Answered, Thinker};

/// Why a turn's model could not be built from the agent's config.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A route names a provider the config does not have (a route the
    /// config's own check let through cannot: this is a hint's route).
    #[error("no provider `{name}`")]
    NoProvider {
        /// The provider's name.
        name: String,
    },
    /// The provider's table does not make a provider (its `base_url`, its
    /// HTTP client): `provider::config::build`'s reason, which names it.
    #[error("{0}")]
    Provider(String),
}

/// Why a key could not be fetched from the vault. It goes to the provider
/// as text ([`KeySource`]), which ends the request with it.
#[derive(Debug, thiserror::Error)]
enum KeyError {
    /// security-agent is not reachable.
    #[error(transparent)]
    Connect(#[from] crate::tools::Error),
    /// The vault refused or failed.
    #[error("vault secret {secret_id}: {source}")]
    Vault {
        /// The secret.
        secret_id: String,
        /// security-agent's answer.
        #[source]
        source: clawos_api::CallError,
    },
    /// The answer is not base64.
    #[error("vault secret {secret_id}: {source}")]
    Base64 {
        /// The secret.
        secret_id: String,
        /// The decoding error.
        #[source]
        source: base64::DecodeError,
    },
    /// The secret is not text.
    #[error("vault secret {secret_id} is not UTF-8")]
    NotUtf8 {
        /// The secret.
        secret_id: String,
    },
}

/// API keys from the vault: security-agent's `secret_get`, as agent-loop,
/// once per request; the vault's policy decides which secrets it may read.
pub struct VaultKeys;

impl VaultKeys {
    async fn fetch(secret_id: String) -> Result<Zeroizing<String>, KeyError> {
        let client = crate::tools::connect(ComponentId::SecurityAgent).await?;
        let answer = security_agent::Client::new(&client)
            .secret_get(&SecretGet { secret_id: secret_id.clone(), version: None })
            .await;
        client.goodbye().await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(source) => return Err(KeyError::Vault { secret_id, source }),
        };
        let bytes = match base64::engine::general_purpose::STANDARD.decode(answer.value_base64.as_bytes()) {
            Ok(bytes) => Zeroizing::new(bytes),
            Err(source) => return Err(KeyError::Base64 { secret_id, source }),
        };
        let Ok(text) = std::str::from_utf8(&bytes) else { return Err(KeyError::NotUtf8 { secret_id }) };
        Ok(Zeroizing::new(text.trim_end_matches('\n').to_owned()))
    }
}

impl KeySource for VaultKeys {
    fn key(&self, secret_id: &str) -> BoxFuture<'_, Result<Zeroizing<String>, String>> {
        Self::fetch(secret_id.to_owned()).map(|key| key.map_err(|e| e.to_string())).boxed()
    }
}

/// The built-in `local` provider: the in-box model's server on its Unix
/// socket (`specs/agent/local-model.md`), which calls no tools natively.
/// Its idle timeout is long: on a slow CPU the server reads a long prompt
/// for minutes before the first token, and its progress comments are not
/// events the stream's timer sees.
pub fn local_provider() -> ProviderConfig {
    let text = format!(
        "kind = \"openai\"\nbase_url = \"http://localhost/v1\"\nunix_socket = \"{LOCAL_MODEL_SOCKET}\"\nidle_timeout_ms = 300000\n\
         [models.\"{LOCAL_MODEL}\"]\nnative_tools = false\ncontext_window = 4096\n"
    );
    toml::from_str(&text).expect("the built-in local provider parses")
}

/// `name`'s provider table: the agent's, else the built-in `local`.
fn provider_table(config: &AgentConfig, name: &str) -> Result<ProviderConfig, Error> {
    match config.providers.get(name) {
        Some(table) => Ok(table.clone()),
        None if name == LOCAL_PROVIDER => Ok(local_provider()),
        None => Err(Error::NoProvider { name: name.to_owned() }),
    }
}

/// Whether the model of `hint`'s route (the default route without one)
/// takes native tool calls.
pub fn native_tools(config: &AgentConfig, hint: Option<&str>) -> bool {
    let Ok(route) = config.route(hint) else { return false };
    provider_table(config, &route.provider).is_ok_and(|table| table.model(&route.model).native_tools)
}

/// The context window of the model of the default route, when its
/// provider table is there.
pub fn context_window(config: &AgentConfig) -> Option<u64> {
    let route = config.route(None).ok()?;
    provider_table(config, &route.provider).ok().map(|table| u64::from(table.model(&route.model).context_window))
}

/// A chain of routes behind the reliability layer.
struct Chain {
    reliable: Reliable,
    /// Each route with its table, for prices.
    routes: Vec<(Route, ProviderConfig)>,
    native_tools: bool,
    context_window: u64,
    model: String,
}

/// The thinker for `route` with the agent's fallback routes after it.
pub fn build(config: &AgentConfig, route: &Route, keys: Arc<dyn KeySource>) -> Result<Box<dyn Thinker>, Error> {
    let mut routes = vec![route.clone()];
    routes.extend(config.model.fallback.iter().filter(|fallback| *fallback != route).cloned());
    let mut chain = Vec::new();
    let mut tables = Vec::new();
    for route in routes {
        let table = provider_table(config, &route.provider)?;
        let provider = provider_config::build(&route.provider, &table, keys.clone()).map_err(Error::Provider)?;
        chain.push((provider, route.model.clone()));
        tables.push((route, table));
    }
    let first = &tables[0];
    let settings = first.1.model(&first.0.model);
    let policy = RetryPolicy {
        max_retries: config.model.max_retries,
        base: std::time::Duration::from_millis(config.model.backoff_base_ms),
        max: std::time::Duration::from_millis(config.model.backoff_max_ms),
    };
    Ok(Box::new(Chain {
        reliable: Reliable::new(chain, policy),
        native_tools: settings.native_tools,
        context_window: u64::from(settings.context_window),
        model: first.0.model.clone(),
        routes: tables,
    }))
}

impl Thinker for Chain {
    fn think<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a (dyn Fn(&str) + Send + Sync),
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(ChatResponse, Answered), ProviderError>> {
        async move {
            // An MCP tool's name has dots the providers' APIs refuse.
            let names = WireNames::of(request);
            let wire = names.request(request);
            let (mut response, index) =
                self.reliable.chat_stream_indexed(wire.as_ref().unwrap_or(request), on_text, cancel).await?;
            names.response(&mut response);
            let (route, table) = &self.routes[index];
            let cost_usd = provider_config::cost_usd(table, &route.model, &response.usage);
            Ok((response, Answered { provider: route.provider.clone(), model: route.model.clone(), cost_usd }))
        }
        .boxed()
    }

    fn native_tools(&self) -> bool {
        self.native_tools
    }

    fn context_window(&self) -> u64 {
        self.context_window
    }

    fn model(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_local_provider_parses() {
        let local = local_provider();
        assert_eq!(
            (local.model(LOCAL_MODEL).native_tools, local.model(LOCAL_MODEL).context_window, local.idle_timeout_ms),
            (false, 4096, 300_000)
        );
    }
}

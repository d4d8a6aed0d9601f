//! Retries and fallback over a chain of routes (`specs/agent/providers.md`,
//! "Reliability").
//!
//! Owns: when a failed request is tried again and where. A transient error
//! ([`ProviderError::is_transient`]) is retried on the same route after a
//! jittered exponential backoff, or the provider's `Retry-After` when that
//! is longer; when a route's retries are spent, the next route of the chain
//! is asked. Never after text was shown: the operator already read part of
//! an answer, and a second answer would not continue it, so the error ends
//! the step. A permanent error (a bad request, a key refused) ends it too:
//! asking again would fail again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::http::backoff;
use super::{ChatRequest, ChatResponse, ProviderError, SharedProvider, TextSink};

/// Retries per route.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries of a transient error on one route (0: one attempt).
    pub max_retries: u32,
    /// First backoff ceiling; it doubles with every retry.
    pub base: Duration,
    /// Longest backoff ceiling.
    pub max: Duration,
}

/// The longest `Retry-After` honoured; a provider asking for longer has
/// its route given up (the next one is asked, or the step fails).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Providers with their models, asked in order.
pub struct Reliable {
    chain: Vec<(SharedProvider, String)>,
    policy: RetryPolicy,
}

impl Reliable {
    /// `chain`: each provider with the model to ask it for.
    pub fn new(chain: Vec<(SharedProvider, String)>, policy: RetryPolicy) -> Self {
        Reliable { chain, policy }
    }

    /// Sends `request` (its model replaced by each route's) along the
    /// chain; answers the response and the index of the route that gave it.
    pub async fn chat_stream_indexed(
        &self,
        request: &ChatRequest,
        on_text: TextSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<(ChatResponse, usize), ProviderError> {
        let shown = AtomicBool::new(false);
        let sink = |text: &str| {
            shown.store(true, Ordering::Relaxed);
            on_text(text);
        };
        let mut last = None;
        for (index, (provider, model)) in self.chain.iter().enumerate() {
            let routed = ChatRequest { model: model.clone(), ..request.clone() };
            for attempt in 0..=self.policy.max_retries {
                let error = match provider.chat_stream(&routed, &sink, cancel).await {
                    Ok(response) => return Ok((response, index)),
                    Err(error) => error,
                };
                if error == ProviderError::Cancelled || shown.load(Ordering::Relaxed) || !error.is_transient() {
                    return Err(error);
                }
                let retry_after = match &error {
                    ProviderError::Status { retry_after_ms, .. } => *retry_after_ms,
                    _ => None,
                };
                let too_long = retry_after.is_some_and(|ms| Duration::from_millis(ms) > MAX_RETRY_AFTER);
                tracing::warn!(provider = provider.name(), model, attempt, "{error}");
                last = Some(error);
                if attempt == self.policy.max_retries || too_long {
                    break;
                }
                let wait = backoff(attempt, self.policy.base, self.policy.max, retry_after);
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = cancel.cancelled() => return Err(ProviderError::Cancelled),
                }
            }
        }
        Err(last.unwrap_or(ProviderError::Malformed {
            provider: "agent".into(),
            reason: "no provider is configured".into(),
        }))
    }
}

//! `clawos-router`: the ClawOS event bus.
//!
//! Owns: event fan-out (`subscribe_events`; every event sent to the router
//! is delivered to the subscribers of its name) and its counters
//! (`router_stats`). Does not own: requests between components, which go
//! straight to the recipient's socket where its own server checks the ACL,
//! or what any event means.

mod fanout;

use std::sync::Arc;

use clawos_api::router::{self, RouterStats, SubscribeEvents, Subscribed};
use clawos_api::{Call, NoParams};
use clawos_ipc::server::{Connection, MethodError};
use clawos_ipc::{ComponentId, Event, Message, Object, Request};
use clawos_runtime::{Component, Runtime};
use serde::Deserialize;

use crate::fanout::FanOut;

/// `[component]` of `/etc/clawos/router.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouterConfig {
    /// Events queued per subscriber before newer ones are dropped (and
    /// counted). Default 256.
    #[serde(default = "default_subscriber_queue")]
    subscriber_queue: usize,
}

fn default_subscriber_queue() -> usize {
    256
}

struct Router {
    fanout: Arc<FanOut>,
}

impl router::Service for Router {
    async fn subscribe_events(&self, call: &Call, params: SubscribeEvents) -> Result<Subscribed, MethodError> {
        self.fanout.subscribe(call.connection.clone(), params.events)
    }

    async fn router_stats(&self, _call: &Call, _params: NoParams) -> Result<RouterStats, MethodError> {
        Ok(self.fanout.stats())
    }
}

impl Component for Router {
    async fn handle_request(&self, call: &Call, request: Request) -> Option<Result<Object, MethodError>> {
        router::dispatch(self, call, request).await
    }

    async fn handle_event(&self, connection: Connection, event: Event) {
        self.fanout.publish(connection.peer(), &event, None);
    }

    fn connection_closed(&self, connection_id: u64) {
        self.fanout.unsubscribe(connection_id);
    }

    fn deliver_own_event(&self, message: &Message) -> bool {
        if let clawos_ipc::Body::Event(event) = &message.body {
            self.fanout.publish(message.sender, event, Some(message.message_id));
        }
        true
    }
}

fn build(runtime: &Runtime) -> Result<Router, String> {
    let config: RouterConfig =
        runtime.config().component.clone().try_into().map_err(|e| format!("[component] settings: {e}"))?;
    if config.subscriber_queue == 0 {
        return Err("component.subscriber_queue must be a positive integer".into());
    }
    Ok(Router { fanout: Arc::new(FanOut::new(config.subscriber_queue)) })
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::Router, env!("CARGO_PKG_VERSION"), build)
}

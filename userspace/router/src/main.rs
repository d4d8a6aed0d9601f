//! `clawos-router`: the ClawOS message router.
//!
//! Owns: event fan-out (`subscribe_events`; every event sent to the router
//! is delivered to the subscribers of its name) and `route_message`
//! (a request relayed to another component after checking the ACL for the
//! original sender). Does not own: what any routed method does.

mod fanout;
mod relay;

use std::sync::Arc;

use clawos_ipc::server::{Connection, MethodError};
use clawos_ipc::{AccessPolicy, ComponentId, Event, Message, Object, Request};
use clawos_runtime::{Component, Runtime};

use crate::fanout::FanOut;
use crate::relay::Relay;

/// Default per-subscriber queue length (`[component] subscriber_queue`).
const DEFAULT_SUBSCRIBER_QUEUE: usize = 256;

struct Router {
    fanout: Arc<FanOut>,
    relay: Relay,
}

impl Component for Router {
    async fn handle_request(&self, connection: Connection, request: Request) -> Option<Result<Object, MethodError>> {
        match request.method.as_str() {
            "subscribe_events" => Some(self.fanout.subscribe(connection, &request.params)),
            "route_message" => Some(self.relay.route(connection.peer(), request.params).await),
            "router_stats" => Some(clawos_runtime::to_object(&self.fanout.stats())),
            _ => None,
        }
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
    let queue = match runtime.config().component.get("subscriber_queue") {
        None => DEFAULT_SUBSCRIBER_QUEUE,
        Some(value) => value
            .as_integer()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or("component.subscriber_queue must be a positive integer")?,
    };
    let policy = AccessPolicy::load(&runtime.config().ipc.policy_path).map_err(|error| error.to_string())?;
    Ok(Router { fanout: Arc::new(FanOut::new(queue)), relay: Relay::new(Arc::new(policy)) })
}

fn main() -> std::process::ExitCode {
    clawos_runtime::main(ComponentId::Router, env!("CARGO_PKG_VERSION"), build)
}

//! router: event fan-out. Every event a component sends to the router is
//! delivered to the connections subscribed to its name.

use serde::{Deserialize, Serialize};

use crate::NoParams;

service! {
    component: Some(clawos_ipc::ComponentId::Router);
    /// Subscribes this connection to events by name (`*`: all of them);
    /// they arrive on it until it closes.
    fn subscribe_events(SubscribeEvents) -> Subscribed { timeout_ms: 2000, errors: [] }
    /// Events fanned out and each subscriber's deliveries and drops.
    fn router_stats(NoParams) -> RouterStats { timeout_ms: 2000, errors: [] }
}

/// `subscribe_events` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscribeEvents {
    /// Event names, or `*`; at least one, none empty.
    pub events: Vec<String>,
}

/// `subscribe_events` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Subscribed {
    /// The names subscribed to, sorted.
    pub events: Vec<String>,
    /// Events queued for this connection before newer ones are dropped.
    pub queue_capacity: usize,
}

/// `router_stats` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RouterStats {
    /// Events fanned out since start.
    pub events_published: u64,
    /// Current subscribers.
    pub subscribers: Vec<SubscriberStats>,
}

/// One subscribed connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SubscriberStats {
    /// The connection's id in the router.
    pub connection: u64,
    /// Who subscribed.
    pub peer: String,
    /// The names it subscribed to.
    pub events: Vec<String>,
    /// Events delivered to it.
    pub delivered: u64,
    /// Events dropped because its queue was full.
    pub dropped: u64,
}

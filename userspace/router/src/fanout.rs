//! Event fan-out. Each subscriber has its own bounded queue drained by its
//! own task; publishing only ever `try_send`s, so a subscriber that reads
//! slowly loses events (counted) instead of delaying anyone else.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use clawos_api::router::{RouterStats, Subscribed, SubscriberStats};
use clawos_ipc::message::now_ns;
use clawos_ipc::server::{Connection, MethodError};
use clawos_ipc::{Body, Event, Message, Principal, ProtocolVersion};
use tokio::sync::mpsc;

/// Subscribing to this name receives every event.
const ALL_EVENTS: &str = "*";

struct Subscriber {
    peer: Principal,
    events: BTreeSet<String>,
    queue: mpsc::Sender<Message>,
    delivered: Arc<AtomicU64>,
    dropped: AtomicU64,
}

impl Subscriber {
    fn wants(&self, event_name: &str) -> bool {
        self.events.contains(ALL_EVENTS) || self.events.contains(event_name)
    }
}

/// All subscriptions, by connection.
pub struct FanOut {
    queue_capacity: usize,
    subscribers: Mutex<HashMap<u64, Subscriber>>,
    published: AtomicU64,
}

impl FanOut {
    pub fn new(queue_capacity: usize) -> Self {
        FanOut { queue_capacity, subscribers: Mutex::default(), published: AtomicU64::new(0) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Subscriber>> {
        // Every critical section is a single map operation, so a poisoned map is still consistent.
        self.subscribers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `subscribe_events {"events": ["name", ...]}` (`"*"` for all). A
    /// connection subscribing again replaces its subscription.
    pub fn subscribe(&self, connection: Connection, events: Vec<String>) -> Result<Subscribed, MethodError> {
        if events.is_empty() || events.iter().any(String::is_empty) {
            return Err(MethodError::bad_params(
                "expected {\"events\": [\"<event_name>\" | \"*\", ...]} with no empty name",
            ));
        }
        let names: BTreeSet<String> = events.into_iter().collect();
        let (queue, mut pending) = mpsc::channel::<Message>(self.queue_capacity);
        let delivered = Arc::new(AtomicU64::new(0));
        let id = connection.id();
        let peer = connection.peer();
        let counter = Arc::clone(&delivered);
        tokio::spawn(async move {
            while let Some(message) = pending.recv().await {
                if connection.send(message).await.is_err() {
                    return;
                }
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
        let result = Subscribed { events: names.iter().cloned().collect(), queue_capacity: self.queue_capacity };
        tracing::info!(connection = id, %peer, events = ?names, "subscribed");
        self.lock().insert(id, Subscriber { peer, events: names, queue, delivered, dropped: AtomicU64::new(0) });
        Ok(result)
    }

    pub fn unsubscribe(&self, connection_id: u64) {
        self.lock().remove(&connection_id);
    }

    /// Delivers `event`, sent by `sender`, to every matching subscriber.
    pub fn publish(&self, sender: Principal, event: &Event, message_id: Option<uuid::Uuid>) {
        self.published.fetch_add(1, Ordering::Relaxed);
        // Events the router relays keep their ID; its own get a fresh one.
        let message_id = message_id.unwrap_or_else(uuid::Uuid::new_v4);
        let timestamp_ns = now_ns();
        let mut gone = Vec::new();
        let subscribers = self.lock();
        for (id, subscriber) in subscribers.iter().filter(|(_, s)| s.wants(&event.event_name)) {
            let message = Message {
                version: ProtocolVersion::V1_0,
                timestamp_ns,
                sender,
                recipient: subscriber.peer,
                message_id,
                correlation_id: None,
                body: Body::Event(event.clone()),
            };
            match subscriber.queue.try_send(message) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    subscriber.dropped.fetch_add(1, Ordering::Relaxed);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => gone.push(*id),
            }
        }
        drop(subscribers);
        for id in gone {
            self.unsubscribe(id);
        }
    }

    pub fn stats(&self) -> RouterStats {
        let subscribers = self.lock();
        RouterStats {
            events_published: self.published.load(Ordering::Relaxed),
            subscribers: subscribers
                .iter()
                .map(|(id, s)| SubscriberStats {
                    connection: *id,
                    peer: s.peer.to_string(),
                    events: s.events.iter().cloned().collect(),
                    delivered: s.delivered.load(Ordering::Relaxed),
                    dropped: s.dropped.load(Ordering::Relaxed),
                })
                .collect(),
        }
    }
}

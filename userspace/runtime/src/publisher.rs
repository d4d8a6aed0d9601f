//! Publishing events through the router, over one long-lived connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clawos_ipc::version::ProtocolVersion;
use clawos_ipc::{ClientOptions, ComponentId, IpcClient, Message, Object};
use tokio::sync::mpsc;

/// Events waiting to be published before new ones are dropped.
const QUEUE_CAPACITY: usize = 256;
/// Longest pause between reconnection attempts to the router.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(10);

/// Hands events to the publisher task. Publishing never blocks: a full
/// queue (router down for long) drops the event and counts it.
#[derive(Clone)]
pub struct EventPublisher {
    component: ComponentId,
    queue: mpsc::Sender<Option<Message>>,
    dropped: Arc<AtomicU64>,
}

impl EventPublisher {
    pub(crate) fn new(component: ComponentId) -> (Self, mpsc::Receiver<Option<Message>>) {
        let (queue, outgoing) = mpsc::channel(QUEUE_CAPACITY);
        (EventPublisher { component, queue, dropped: Arc::default() }, outgoing)
    }

    /// Queues an event for the router.
    pub fn publish(&self, event_name: &str, event_data: Object) {
        let event = Message::event(
            ProtocolVersion::V1_0,
            self.component.into(),
            ComponentId::Router.into(),
            event_name,
            event_data,
        );
        if self.queue.try_send(Some(event)).is_err() {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::warn!(event_name, dropped, "event queue full; event dropped");
        }
    }

    /// Events dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Asks the task to stop once everything queued is sent.
    pub(crate) fn close(&self) {
        let _ = self.queue.try_send(None);
    }
}

/// Sends queued events to the router, reconnecting with backoff. `local`
/// gets each event first and may consume it (the router itself).
pub(crate) async fn run(
    component: ComponentId,
    mut outgoing: mpsc::Receiver<Option<Message>>,
    local: impl Fn(&Message) -> bool + Send + 'static,
) {
    let mut client: Option<IpcClient> = None;
    let mut delay = Duration::from_millis(100);
    while let Some(Some(event)) = outgoing.recv().await {
        if local(&event) {
            continue;
        }
        loop {
            if client.as_ref().is_none_or(IpcClient::is_closed) {
                client = match IpcClient::connect(ComponentId::Router, ClientOptions::new(component.into())).await {
                    Ok((connected, _events)) => {
                        delay = Duration::from_millis(100);
                        Some(connected)
                    }
                    Err(error) => {
                        tracing::debug!(%error, "router unreachable; retrying in {delay:?}");
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(MAX_RECONNECT_DELAY);
                        continue;
                    }
                };
            }
            let Some(connected) = client.as_ref() else { continue };
            match connected.send(event.clone()).await {
                Ok(()) => break,
                Err(error) => {
                    tracing::debug!(%error, "router connection lost; reconnecting");
                    client = None;
                }
            }
        }
    }
    if let Some(connected) = client {
        connected.goodbye().await;
    }
}

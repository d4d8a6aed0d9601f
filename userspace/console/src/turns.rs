//! The turns the console started, followed from agent-loop's events to the
//! chat pages (specs/console/README.md, "Chat").
//!
//! A turn reports on the connection that started it (`chat_send`,
//! `chat_continue`), so the console keeps that connection for as long as
//! the turn runs, in a task of its own, and records what arrives: the
//! answer's text, each step, the outcome. A page shows the record so far
//! and follows it as a server-sent event stream, each event numbered so a
//! browser that reconnects (`Last-Event-ID`) gets only what it missed.
//!
//! Owns: following a turn, its record in memory, the record's bounds.
//! Must not own: the turn (agent-loop), or how a part is shown (`pages`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clawos_api::agent_loop::{TurnOutcome, TurnStarted, TurnStep, TURN_END, TURN_STEP, TURN_TEXT};
use clawos_ipc::{Body, Message};
use tokio::sync::{mpsc, watch};

/// Turns remembered at once; an ended one goes first to make room.
const MAX_TURNS: usize = 32;
/// How long an ended turn's record is kept for a page that comes back.
const KEEP_ENDED: Duration = Duration::from_secs(10 * 60);
/// The answer's text kept per turn; beyond it the page says the rest is in
/// the transcript (the model's output limit keeps real answers far below).
const MAX_TEXT: usize = 1 << 20;

/// One thing a turn reported, in order.
#[derive(Debug, Clone)]
pub enum Part {
    /// A piece of the answer.
    Text(String),
    /// A step began or ended.
    Step(TurnStep),
    /// The turn ended: the last part.
    End(TurnOutcome),
    /// The connection closed before the turn ended (agent-loop restarted):
    /// the last part. The transcript, which agent-loop keeps whatever
    /// happens here, has the rest.
    Lost,
}

/// A turn being followed, or followed to its end.
pub struct Turn {
    /// Who started it, and where.
    pub started: TurnStarted,
    parts: Mutex<Record>,
    /// Bumped at each part: the event streams wait on it.
    changed: watch::Sender<usize>,
}

#[derive(Default)]
struct Record {
    parts: Vec<Part>,
    text_bytes: usize,
    ended_at: Option<Instant>,
}

impl Turn {
    fn push(&self, part: Part) {
        let mut record = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
        if record.ended_at.is_some() {
            return;
        }
        if let Part::Text(text) = &part {
            if record.text_bytes + text.len() > MAX_TEXT {
                return;
            }
            record.text_bytes += text.len();
        }
        if matches!(part, Part::End(_) | Part::Lost) {
            record.ended_at = Some(Instant::now());
        }
        record.parts.push(part);
        let count = record.parts.len();
        drop(record);
        self.changed.send_replace(count);
    }

    /// Whether its last part has come.
    pub fn ended(&self) -> bool {
        self.parts.lock().unwrap_or_else(PoisonError::into_inner).ended_at.is_some()
    }

    /// The parts from `from` on, and whether the turn has ended.
    pub fn parts_from(&self, from: usize) -> (Vec<Part>, bool) {
        let record = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
        (record.parts.get(from..).unwrap_or_default().to_vec(), record.ended_at.is_some())
    }

    /// Waits until there are more than `seen` parts (or the turn is gone).
    pub async fn wait_past(&self, seen: usize) {
        let mut changed = self.changed.subscribe();
        let _ = changed.wait_for(|count| *count > seen).await;
    }
}

/// Why a turn could not be taken on.
#[derive(Debug, thiserror::Error)]
#[error("the console follows {MAX_TURNS} running turns already: wait for one to end")]
pub struct Full;

/// The turns the console follows.
#[derive(Default)]
pub struct Turns {
    turns: Mutex<HashMap<String, Arc<Turn>>>,
}

impl Turns {
    /// Follows the turn `started` from `events` until it ends or they stop,
    /// holding `connection` (the IPC client that started it, whose events
    /// they are) open meanwhile.
    pub fn follow<C: Send + 'static>(
        &self,
        started: TurnStarted,
        connection: C,
        events: mpsc::Receiver<Message>,
    ) -> Result<Arc<Turn>, Full> {
        let turn = Arc::new(Turn { started, parts: Mutex::default(), changed: watch::channel(0).0 });
        {
            let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            turns.retain(|_, turn| {
                let ended = turn.parts.lock().unwrap_or_else(PoisonError::into_inner).ended_at;
                ended.is_none_or(|at| now.duration_since(at) < KEEP_ENDED)
            });
            if turns.len() >= MAX_TURNS {
                let oldest_ended = turns
                    .iter()
                    .filter_map(|(id, turn)| Some((turn.parts.lock().ok()?.ended_at?, id.clone())))
                    .min()
                    .map(|(_, id)| id);
                match oldest_ended {
                    Some(id) => turns.remove(&id),
                    None => return Err(Full),
                };
            }
            turns.insert(turn.started.turn_id.clone(), turn.clone());
        }
        tokio::spawn(record(turn.clone(), connection, events));
        Ok(turn)
    }

    /// The turn `turn_id`, if the console follows it or did recently.
    pub fn get(&self, turn_id: &str) -> Option<Arc<Turn>> {
        self.turns.lock().unwrap_or_else(PoisonError::into_inner).get(turn_id).cloned()
    }

    /// The running turn of `session_id`, if the console follows one.
    pub fn running_in(&self, session_id: &str) -> Option<Arc<Turn>> {
        self.turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .find(|turn| turn.started.session_id == session_id && !turn.ended())
            .cloned()
    }
}

/// The part an event of the turn is, if it is one of this turn's.
fn part_of(turn_id: &str, message: Message) -> Option<Part> {
    let Body::Event(event) = message.body else { return None };
    if event.event_data.get("turn_id").and_then(|id| id.as_str()) != Some(turn_id) {
        return None;
    }
    let data = serde_json::Value::Object(event.event_data);
    match event.event_name.as_str() {
        TURN_TEXT => Some(Part::Text(data.get("text")?.as_str()?.to_owned())),
        TURN_STEP => serde_json::from_value(data).ok().map(Part::Step),
        TURN_END => serde_json::from_value(data).ok().map(Part::End),
        _ => None,
    }
}

/// Records the turn's events until its end, or [`Part::Lost`] when the
/// connection closes first.
async fn record<C>(turn: Arc<Turn>, connection: C, mut events: mpsc::Receiver<Message>) {
    let turn_id = turn.started.turn_id.clone();
    while let Some(message) = events.recv().await {
        if let Some(part) = part_of(&turn_id, message) {
            let end = matches!(part, Part::End(_));
            turn.push(part);
            if end {
                drop(connection);
                return;
            }
        }
    }
    tracing::warn!(turn = turn_id, "agent-loop closed the connection before the turn ended");
    turn.push(Part::Lost);
    drop(connection);
}

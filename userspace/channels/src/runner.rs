//! One channel's loop (specs/channels/README.md, "The loop"): answer what
//! the store holds unanswered, then poll once; the caller repeats it, with
//! the wait [`Runner::step`] asks for.
//!
//! Generic over the three things the host plugs in: the channel's
//! [`Protocol`] (its WASM component in wasm-daemon), the [`Http`] that
//! makes the requests (to the channel's origin, with its secret), and the
//! [`Agent`] that answers (agent-loop's turns). The store makes it safe to
//! stop anywhere: a new runner on the same store goes on where the old one
//! was, losing and repeating nothing but an answer whose send was accepted
//! in the instant before a crash.

use std::time::Duration;

use crate::store::{self, Inbound, State, Store};

/// A request the protocol asks the host to make; `path` is relative to
/// the channel's origin and may hold `{secret}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: String,
    /// The path.
    pub path: String,
    /// Its headers.
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: Vec<u8>,
}

/// What the host got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

/// A poll's outcome, as the protocol read it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Batch {
    /// The messages, in order.
    pub messages: Vec<Inbound>,
    /// Where the next poll starts; `None` keeps the old cursor.
    pub cursor: Option<String>,
    /// Updates that could not be read.
    pub malformed: u32,
}

/// What an error answer means (the interface's `channel-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelError {
    /// Ask again after this many seconds.
    RetryAfter(u32),
    /// Another client holds what this one needs.
    Conflict(String),
    /// Refused; asking again will not help.
    Rejected(String),
    /// Failed, or unreadable.
    Failed(String),
}

/// A channel's protocol.
pub trait Protocol {
    /// The next poll's request.
    fn poll_request(&mut self, cursor: Option<&str>, timeout_seconds: u32) -> Result<Request, String>;
    /// A poll's response, read (the outer error: the component failed).
    fn poll_response(&mut self, response: Response) -> Result<Result<Batch, ChannelError>, String>;
    /// The requests that send `text` to `chat`.
    fn send_requests(&mut self, chat: &str, text: &str) -> Result<Vec<Request>, String>;
    /// A send's response, read.
    fn send_response(&mut self, response: Response) -> Result<Result<(), ChannelError>, String>;
}

/// Makes a protocol's requests.
pub trait Http {
    /// Makes `request`, giving up after `timeout`; `Err` for no answer
    /// (refused, reset, timed out).
    fn make(&self, request: Request, timeout: Duration) -> impl std::future::Future<Output = Result<Response, String>>;
}

/// A turn the agent started for a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The turn.
    pub turn_id: String,
    /// Its session: the chat's from now on.
    pub session_id: String,
}

/// Answers messages.
pub trait Agent {
    /// Starts a turn for `text` in `session` (a new one when `None`).
    fn start(&self, session: Option<&str>, text: &str) -> impl std::future::Future<Output = Result<Started, String>>;
    /// The answer of turn `turn_id` once it ended (also after a restart).
    fn answer(&self, turn_id: &str) -> impl std::future::Future<Output = Result<String, String>>;
}

/// A channel's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Its name (the store's key).
    pub channel: String,
    /// The senders it answers; anyone else's message is dropped.
    pub allow: Vec<String>,
    /// How long a poll waits at the service for a message.
    pub poll_seconds: u32,
    /// How much longer than the poll the client waits for its answer.
    pub slack: Duration,
}

/// What a step asks of the caller before the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Go on at once.
    Now,
    /// Wait this long (the service's `retry_after`, or a backoff).
    Wait(Duration),
}

/// Counters of what a runner dropped or failed, for its metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Polls that failed (no answer, or an error answer).
    pub poll_failures: u64,
    /// Updates the protocol could not read.
    pub malformed: u64,
    /// Messages from senders not allowed.
    pub dropped: u64,
    /// Answers that could not be sent (kept, tried again).
    pub send_failures: u64,
}

/// The shortest and longest backoff after a failure.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// The most characters of a component's error a log line carries.
const LOGGED: usize = 200;
/// The wait after a `409`: another poller may be shutting down.
const CONFLICT_WAIT: Duration = Duration::from_secs(60);

/// Why a step could not go on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed: nothing more can be kept safely.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// The component failed (a trap, a limit).
    #[error("the channel's component: {0}")]
    Component(String),
}

/// How an answer's sending went.
enum Sent {
    Yes,
    Refused(String),
    Later(Next),
}

/// One channel's loop over its store.
pub struct Runner<P, H, A> {
    settings: Settings,
    store: Store,
    protocol: P,
    http: H,
    agent: A,
    backoff: Duration,
    counters: Counters,
}

impl<P: Protocol, H: Http, A: Agent> Runner<P, H, A> {
    /// A runner for `settings.channel` over `store`.
    pub fn new(settings: Settings, store: Store, protocol: P, http: H, agent: A) -> Self {
        Runner { settings, store, protocol, http, agent, backoff: BACKOFF_MIN, counters: Counters::default() }
    }

    /// What it counted so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The store, for status.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The agent it answers with.
    pub fn agent(&self) -> &A {
        &self.agent
    }

    /// A failure: the wait doubles, from one second to a minute.
    fn back_off(&mut self) -> Next {
        let wait = self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        Next::Wait(wait)
    }

    /// Answers every message the store holds unanswered, in order, then
    /// polls once. An answer that cannot be sent stops the answering (the
    /// next step tries it again, so a chat's answers stay in order).
    pub async fn step(&mut self) -> Result<Next, Error> {
        if let Some(next) = self.answer_pending().await? {
            return Ok(next);
        }
        self.poll().await
    }

    async fn answer_pending(&mut self) -> Result<Option<Next>, Error> {
        let channel = self.settings.channel.clone();
        for pending in self.store.pending(&channel)? {
            let message = &pending.message;
            let turn_id = match (pending.state, pending.turn_id) {
                (State::Answering, Some(turn_id)) => turn_id,
                _ if !self.settings.allow.contains(&message.sender) => {
                    self.store.drop_message(&channel, &message.id)?;
                    self.counters.dropped += 1;
                    continue;
                }
                _ => {
                    let session = self.store.session(&channel, &message.chat)?;
                    let started = match self.agent.start(session.as_deref(), &message.text).await {
                        Ok(started) => started,
                        Err(_) => return Ok(Some(self.back_off())),
                    };
                    self.store.set_session(&channel, &message.chat, &started.session_id)?;
                    self.store.start_answer(&channel, &message.id, &started.turn_id)?;
                    started.turn_id
                }
            };
            let answer = match self.agent.answer(&turn_id).await {
                Ok(answer) => answer,
                Err(_) => return Ok(Some(self.back_off())),
            };
            match self.send(&message.chat, &answer).await? {
                Sent::Yes => {}
                // A text the service refuses will not be taken later either:
                // counted, and the chat goes on.
                Sent::Refused(why) => {
                    // The component's words: bounded, and escaped by `?`.
                    let why: String = why.chars().take(LOGGED).collect();
                    tracing::warn!(channel, message = message.id, "the service refused an answer: {why:?}");
                    self.counters.send_failures += 1;
                }
                Sent::Later(next) => {
                    self.counters.send_failures += 1;
                    return Ok(Some(next));
                }
            }
            self.store.answered(&channel, &message.id)?;
        }
        Ok(None)
    }

    /// Sends an answer part by part. A part that failed is tried again
    /// with the whole answer next time: a part sent twice is better than a
    /// part lost.
    async fn send(&mut self, chat: &str, answer: &str) -> Result<Sent, Error> {
        let timeout = self.settings.slack;
        for request in self.protocol.send_requests(chat, answer).map_err(Error::Component)? {
            let outcome = match self.http.make(request, timeout).await {
                Ok(response) => self.protocol.send_response(response).map_err(Error::Component)?,
                Err(why) => Err(ChannelError::Failed(why)),
            };
            match outcome {
                Ok(()) => {}
                Err(ChannelError::RetryAfter(seconds)) => {
                    return Ok(Sent::Later(Next::Wait(Duration::from_secs(seconds.into()))))
                }
                Err(ChannelError::Rejected(why)) => return Ok(Sent::Refused(why)),
                Err(_) => return Ok(Sent::Later(self.back_off())),
            }
        }
        Ok(Sent::Yes)
    }

    async fn poll(&mut self) -> Result<Next, Error> {
        let channel = self.settings.channel.clone();
        let cursor = self.store.cursor(&channel)?;
        let request =
            self.protocol.poll_request(cursor.as_deref(), self.settings.poll_seconds).map_err(Error::Component)?;
        // The client waits longer than the poll: a quiet chat is no error.
        let timeout = Duration::from_secs(self.settings.poll_seconds.into()) + self.settings.slack;
        let outcome = match self.http.make(request, timeout).await {
            Ok(response) => self.protocol.poll_response(response).map_err(Error::Component)?,
            Err(why) => Err(ChannelError::Failed(why)),
        };
        match outcome {
            Ok(batch) => {
                self.counters.malformed += u64::from(batch.malformed);
                self.store.record_poll(&channel, &batch.messages, batch.cursor.as_deref())?;
                self.backoff = BACKOFF_MIN;
                Ok(Next::Now)
            }
            Err(error) => {
                self.counters.poll_failures += 1;
                Ok(match error {
                    ChannelError::RetryAfter(seconds) => Next::Wait(Duration::from_secs(seconds.into())),
                    ChannelError::Conflict(_) => Next::Wait(CONFLICT_WAIT),
                    ChannelError::Rejected(_) | ChannelError::Failed(_) => self.back_off(),
                })
            }
        }
    }
}

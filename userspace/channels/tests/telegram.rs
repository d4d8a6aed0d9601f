//! A Telegram channel's runner against the fake Bot API over real HTTP:
//! the protocol is clawos-telegram (the channel component's core), the
//! host's HTTP a plain client that puts the token into the path, and the
//! agent one that echoes. Each test is one of the spec's promises: a
//! message in, its answer out; a restart between two messages loses and
//! repeats nothing; strangers are dropped and counted; the faults are met
//! with the waits they call for; a flood is answered once each, in order.

use std::cell::RefCell;
use std::time::Duration;

use bytes::Bytes;
use clawos_channels::runner::{
    Agent, Batch, ChannelError, Http, Next, Protocol, Request, Response, Runner, Settings, Started,
};
use clawos_channels::store::{Inbound, Store};
use clawos_telegram_fake::{Fake, Fault};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

const TOKEN: &str = "777:the-bots-token";
const ALLOWED: i64 = 7;

/// clawos-telegram behind the runner's trait, as the component will be.
struct Telegram;

fn to_telegram(response: Response) -> clawos_telegram::Response {
    clawos_telegram::Response { status: response.status, body: response.body }
}

fn from_telegram(request: clawos_telegram::Request) -> Request {
    Request { method: request.method, path: request.path, headers: request.headers, body: request.body }
}

fn error(error: clawos_telegram::ChannelError) -> ChannelError {
    match error {
        clawos_telegram::ChannelError::RetryAfter(s) => ChannelError::RetryAfter(s),
        clawos_telegram::ChannelError::Conflict(why) => ChannelError::Conflict(why),
        clawos_telegram::ChannelError::Rejected(why) => ChannelError::Rejected(why),
        clawos_telegram::ChannelError::Failed(why) => ChannelError::Failed(why),
    }
}

impl Protocol for Telegram {
    fn poll_request(&mut self, cursor: Option<&str>, timeout_seconds: u32) -> Result<Request, String> {
        Ok(from_telegram(clawos_telegram::poll_request(cursor, timeout_seconds)))
    }

    fn poll_response(&mut self, response: Response) -> Result<Result<Batch, ChannelError>, String> {
        Ok(clawos_telegram::poll_response(&to_telegram(response)).map_err(error).map(|batch| Batch {
            messages: batch
                .messages
                .into_iter()
                .map(|m| Inbound { id: m.id, chat: m.chat, sender: m.sender, text: m.text })
                .collect(),
            cursor: batch.cursor,
            malformed: batch.malformed,
        }))
    }

    fn send_requests(&mut self, chat: &str, text: &str) -> Result<Vec<Request>, String> {
        Ok(clawos_telegram::send_requests(chat, text).into_iter().map(from_telegram).collect())
    }

    fn send_response(&mut self, response: Response) -> Result<Result<(), ChannelError>, String> {
        Ok(clawos_telegram::send_response(&to_telegram(response)).map_err(error))
    }
}

/// The host's HTTP, as small as a test can make it: the secret into the
/// path, the request made to the fake, the timeout kept.
struct Host {
    base: String,
}

impl Http for Host {
    async fn make(&self, request: Request, timeout: Duration) -> Result<Response, String> {
        let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let path = request.path.replacen("{secret}", TOKEN, 1);
        let mut builder = hyper::Request::builder().method(request.method.as_str()).uri(format!("{}{path}", self.base));
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let call = client.request(builder.body(Full::new(Bytes::from(request.body))).map_err(|e| e.to_string())?);
        let response = tokio::time::timeout(timeout, call).await.map_err(|_| "timed out".to_owned())?;
        let response = response.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes().to_vec();
        Ok(Response { status, body })
    }
}

/// An agent that answers `echo: <text>` (or a long text, for `long`), and
/// notes the turns it started.
#[derive(Default)]
struct Echo {
    turns: RefCell<Vec<String>>,
}

impl Agent for Echo {
    async fn start(&self, session: Option<&str>, text: &str) -> Result<Started, String> {
        let mut turns = self.turns.borrow_mut();
        turns.push(text.to_owned());
        Ok(Started { turn_id: format!("t{}|{text}", turns.len()), session_id: session.unwrap_or("s-1").to_owned() })
    }

    async fn answer(&self, turn_id: &str) -> Result<String, String> {
        let text = turn_id.split_once('|').map_or("", |(_, text)| text);
        Ok(if text == "long" { "a long line of the answer\n".repeat(400) } else { format!("echo: {text}") })
    }
}

fn settings() -> Settings {
    Settings { channel: "tg".into(), allow: vec![ALLOWED.to_string()], poll_seconds: 1, slack: Duration::from_secs(2) }
}

fn runner(fake: &Fake, store: &std::path::Path) -> Runner<Telegram, Host, Echo> {
    let store = Store::open(store).unwrap();
    Runner::new(settings(), store, Telegram, Host { base: fake.api_base() }, Echo::default())
}

fn texts(fake: &Fake) -> Vec<String> {
    fake.sent().iter().map(|m| m["text"].as_str().unwrap().to_owned()).collect()
}

/// Steps until `done` or 20 steps, ignoring waits (the test's clock is not
/// the loop's); returns the waits asked for.
async fn run_until(runner: &mut Runner<Telegram, Host, Echo>, mut done: impl FnMut() -> bool) -> Vec<Next> {
    let mut waits = Vec::new();
    for _ in 0..20 {
        if done() {
            break;
        }
        let next = runner.step().await.unwrap();
        if next != Next::Now {
            waits.push(next);
        }
    }
    waits
}

#[tokio::test]
async fn a_message_in_is_answered_once_and_a_restart_between_two_loses_and_repeats_nothing() {
    let fake = Fake::start(TOKEN).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("channels.db");
    fake.message(ALLOWED, 70, "first");
    {
        let mut first = runner(&fake, &db);
        run_until(&mut first, || fake.sent().len() == 1).await;
        assert_eq!(texts(&fake), ["echo: first"]);
        assert_eq!(fake.sent()[0]["chat_id"], 70);
    }
    // The process is gone; a message comes while it is; a new one starts.
    fake.message(ALLOWED, 70, "second");
    let mut second = runner(&fake, &db);
    run_until(&mut second, || fake.sent().len() >= 2).await;
    for _ in 0..3 {
        second.step().await.unwrap();
    }
    assert_eq!(texts(&fake), ["echo: first", "echo: second"]);
    let counts = second.store().counts("tg").unwrap();
    assert_eq!((counts.answered, counts.received, counts.answering), (2, 0, 0));
    // The chat keeps its session.
    assert_eq!(second.store().session("tg", "70").unwrap().as_deref(), Some("s-1"));
}

#[tokio::test]
async fn a_turn_started_before_a_crash_has_its_answer_sent_after_it_once() {
    let fake = Fake::start(TOKEN).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("channels.db");
    // The crash came after the turn started, before the answer went out.
    {
        let mut store = Store::open(&db).unwrap();
        let message =
            Inbound { id: "41".into(), chat: "70".into(), sender: ALLOWED.to_string(), text: "resumed".into() };
        store.record_poll("tg", &[message], Some("42")).unwrap();
        store.start_answer("tg", "41", "t9|resumed").unwrap();
    }
    let mut after = runner(&fake, &db);
    run_until(&mut after, || !fake.sent().is_empty()).await;
    after.step().await.unwrap();
    assert_eq!(texts(&fake), ["echo: resumed"]);
    assert!(after.agent().turns.borrow().is_empty(), "no new turn for a message whose turn had started");
}

#[tokio::test]
async fn a_stranger_is_dropped_and_counted_and_a_malformed_update_does_not_stop_the_rest() {
    let fake = Fake::start(TOKEN).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    fake.message(99, 99, "let me in");
    fake.raw(serde_json::json!({"message": "garbage"}));
    fake.message(ALLOWED, 70, "after the garbage");
    let mut runner = runner(&fake, &dir.path().join("channels.db"));
    run_until(&mut runner, || !fake.sent().is_empty()).await;
    runner.step().await.unwrap();
    assert_eq!(texts(&fake), ["echo: after the garbage"]);
    assert_eq!((runner.counters().dropped, runner.counters().malformed), (1, 1));
    assert_eq!(runner.store().counts("tg").unwrap().dropped, 1);
}

#[tokio::test]
async fn faults_are_met_with_the_waits_they_call_for_and_nothing_is_lost() {
    let fake = Fake::start(TOKEN).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut runner = runner(&fake, &dir.path().join("channels.db"));
    fake.message(ALLOWED, 70, "through the faults");
    fake.fault(false, Fault::RetryAfter(7));
    fake.fault(false, Fault::Conflict);
    fake.fault(false, Fault::Reset);
    fake.fault(false, Fault::Stall(Duration::from_secs(6)));
    fake.fault(false, Fault::Error);
    fake.fault(true, Fault::RetryAfter(3));
    let waits = run_until(&mut runner, || !fake.sent().is_empty()).await;
    assert_eq!(
        waits,
        [
            Next::Wait(Duration::from_secs(7)),
            Next::Wait(Duration::from_secs(60)),
            Next::Wait(Duration::from_secs(1)),
            // The stall outlasted the client's timeout (1 s poll + 2 s slack).
            Next::Wait(Duration::from_secs(2)),
            Next::Wait(Duration::from_secs(4)),
            // The send's own 429.
            Next::Wait(Duration::from_secs(3)),
        ]
    );
    assert_eq!(texts(&fake), ["through the faults"].map(|t| format!("echo: {t}")));
    assert_eq!(runner.counters().poll_failures, 5);
}

#[tokio::test]
async fn a_flood_is_answered_once_each_in_order_and_a_long_answer_in_parts() {
    let fake = Fake::start(TOKEN).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut runner = runner(&fake, &dir.path().join("channels.db"));
    for n in 0..150 {
        fake.message(ALLOWED, 70, &format!("m{n}"));
    }
    fake.message(ALLOWED, 70, "long");
    run_until(&mut runner, || fake.sent().len() > 151).await;
    let sent = texts(&fake);
    let expected: Vec<String> = (0..150).map(|n| format!("echo: m{n}")).collect();
    assert_eq!(sent[..150], expected[..]);
    let long: String = sent[150..].concat();
    assert_eq!(long, "a long line of the answer\n".repeat(400));
    assert!(sent[150..].len() > 1 && sent.iter().all(|t| t.encode_utf16().count() <= 4096));
}

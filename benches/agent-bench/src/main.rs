//! agent-bench: what agent-loop itself costs per step of a turn
//! (specs/agent/README.md, "The loop"), without a model's or a tool's
//! time: the model answers at once from memory (a tool call, then text)
//! and the tool answers at once, so each step is the loop's own work:
//! limits and spend checked, the context read and sized, the request
//! built, the answer parsed, every message checkpointed in the agent's
//! real SQLite database (`store`), the spend recorded.
//!
//! Prints p50, p90 and p99 of the time per step over many turns, each
//! turn two steps (one tool call, one answer), ten turns per session; then
//! the checkpoint writes alone (`specs/agent/README.md`, "Checkpoints and
//! resume"): a checkpoint by itself (before a tool call) and one with its
//! message (after a step), each a committed transaction with
//! `synchronous=FULL` on the agent's database file.

use std::time::{Duration, Instant};

use clawos_agent_loop::config::AgentConfig;
use clawos_agent_loop::provider::{ChatMessage, Role};
use clawos_agent_loop::provider::{ChatRequest, ChatResponse, FinishReason, ProviderError, ToolCall, ToolSpec, Usage};
use clawos_agent_loop::store::{Checkpoint, Store};
use clawos_agent_loop::tools::{CallResult, Runner};
use clawos_agent_loop::turn::{Answered, Reporter, Thinker, Turn};
use clawos_api::agent_loop::{TurnStatus, TurnStep};
use futures::future::BoxFuture;
use futures::FutureExt as _;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const TURNS: usize = 500;

/// A model that answers at once: a tool call when the last message is the
/// operator's, else text.
struct Instant_;

impl Thinker for Instant_ {
    fn think<'a>(
        &'a self,
        request: &'a ChatRequest,
        _on_text: &'a (dyn Fn(&str) + Send + Sync),
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(ChatResponse, Answered), ProviderError>> {
        let after_user = request.messages.last().is_some_and(|m| m.role == clawos_agent_loop::provider::Role::User);
        let tool_calls = if after_user {
            vec![ToolCall { id: "c".into(), name: "text-stats".into(), arguments: json!({"text": "a b"}) }]
        } else {
            Vec::new()
        };
        let response = ChatResponse {
            text: if after_user { String::new() } else { "Two words.".into() },
            finish: if after_user { FinishReason::ToolCalls } else { FinishReason::Stop },
            tool_calls,
            usage: Usage { input_tokens: 100, output_tokens: 10, estimated: false },
            model: "instant".into(),
        };
        let answered = Answered { provider: "instant".into(), model: "instant".into(), cost_usd: 0.0 };
        async move { Ok((response, answered)) }.boxed()
    }
    fn native_tools(&self) -> bool {
        true
    }
    fn context_window(&self) -> u64 {
        1_000_000
    }
    fn model(&self) -> &str {
        "instant"
    }
}

struct InstantTool;

impl Runner for InstantTool {
    fn check<'a>(
        &'a self,
        _action_id: &'a str,
        _name: &'a str,
        _arguments: &'a Value,
        _resumed: bool,
    ) -> BoxFuture<'a, Option<CallResult>> {
        async { None }.boxed()
    }
    fn run<'a>(&'a self, _action_id: &'a str, _name: &'a str, _arguments: &'a Value) -> BoxFuture<'a, CallResult> {
        async { CallResult::new(json!({"words": 2}).to_string(), false) }.boxed()
    }
}

struct Quiet;

impl Reporter for Quiet {
    fn text(&self, _text: &str) {}
    fn step(&self, _step: &TurnStep) {}
    fn publish(&self, _event_name: &str, _data: Value) {}
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Store::open(&dir.path().join("workspace.db")).expect("the agent database");
    // Compaction never triggers: the bench measures the plain step.
    let config = AgentConfig::parse("[session]\nkeep_recent = 8\n[limits]\nmax_steps = 4\n").expect("the config");
    let specs = vec![ToolSpec {
        name: "text-stats".into(),
        description: "counts words".into(),
        parameters: json!({"type": "object"}),
    }];
    let mut per_step = Vec::with_capacity(TURNS);
    for i in 0..TURNS {
        let (turn_id, session_id) = (format!("t{i}"), format!("s{}", i / 10));
        store.ensure_session(&session_id).expect("a session");
        let turn = Turn {
            agent: "bench",
            config: &config,
            store: &store,
            thinker: &Instant_,
            tools: &InstantTool,
            session_id: &session_id,
            turn_id: &turn_id,
            persona: "",
            after_tool: &|| None,
            cancel: CancellationToken::new(),
            reporter: &Quiet,
        };
        store.turn_started(&turn_id, &session_id, None).expect("the turn row");
        let started = Instant::now();
        let outcome = turn.run(Some("count the words of a b"), &specs).await;
        let elapsed = started.elapsed();
        assert_eq!((outcome.status, outcome.steps), (TurnStatus::Done, 2), "{outcome:?}");
        per_step.push(elapsed / outcome.steps);
    }
    report(&format!("agent-loop per step ({TURNS} turns of 2 steps, 10 turns per session)"), per_step);

    let (alone, with_message) = checkpoint_writes(&store);
    report(&format!("checkpoint write before a tool call ({CHECKPOINTS} writes)"), alone);
    report(&format!("checkpoint write with its message after a step ({CHECKPOINTS} writes)"), with_message);
}

const CHECKPOINTS: usize = 2000;

/// Times `CHECKPOINTS` checkpoints of one turn, alone and with a message.
fn checkpoint_writes(store: &Store) -> (Vec<Duration>, Vec<Duration>) {
    let (turn_id, session_id) = ("t-checkpoints", "s-checkpoints");
    store.ensure_session(session_id).expect("a session");
    store.turn_started(turn_id, session_id, None).expect("the turn row");
    let mut progress = clawos_agent_loop::turn::outcome(turn_id, session_id, TurnStatus::Running, None);
    let (mut alone, mut with_message) = (Vec::with_capacity(CHECKPOINTS), Vec::with_capacity(CHECKPOINTS));
    for n in 0..CHECKPOINTS {
        progress.steps = n as u32;
        let action = format!("{session_id}/{n}/call-{n}");
        let started = Instant::now();
        store.checkpoint(&Checkpoint { turn_id, progress: &progress, in_flight: Some(&action) }).expect("a checkpoint");
        alone.push(started.elapsed());
        let message = ChatMessage::text(Role::Tool, format!("{{\"words\": {n}}}"));
        let started = Instant::now();
        store
            .append_checkpointed(session_id, &message, 5, &Checkpoint { turn_id, progress: &progress, in_flight: None })
            .expect("a message and its checkpoint");
        with_message.push(started.elapsed());
    }
    (alone, with_message)
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{what}: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms",
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.9)),
        ms(percentile(&samples, 0.99))
    );
}

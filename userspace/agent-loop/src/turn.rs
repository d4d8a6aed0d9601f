//! One turn of an agent (`specs/agent/README.md`, "The loop"): the
//! operator's message in, the agent's answer out, through the states
//! think → parse → execute → checkpoint, repeated until the model answers
//! without calling a tool or a limit ends the turn.
//!
//! Owns: the order of a turn's steps, every limit of `[limits]` (checked
//! before the step that would pass it, so a limit reached ends the turn
//! with a message naming it, never silently), what the prompt holds
//! (system prompt, the session's context, compaction), and what is
//! reported while it runs. Must not own: the wire protocols (`provider`),
//! storage (`store`), or tool permissions (the components that run tools).
//!
//! Every message is stored the moment it exists, with the turn's
//! checkpoint in the same transaction: the operator's before the first
//! request, each answer and each tool result as it arrives; and a
//! checkpoint names each tool call before it runs. A turn cut off by a
//! crash or a reboot is resumed from there (`Turn::resume`,
//! `specs/agent/README.md`, "Checkpoints and resume").

use std::time::{Duration, Instant};

use clawos_api::agent_loop::{StepKind, TurnOutcome, TurnStatus, TurnStep};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::compaction;
use crate::config::AgentConfig;
use crate::provider::{estimate_tokens, ChatMessage, ChatRequest, ChatResponse, ProviderError, Role, ToolSpec, Usage};
use crate::store::{self, Checkpoint, SpendRow, Store};
use crate::tools::{self, BuiltIn, Runner, Tool};

/// What a turn reports while it runs: to the operator who started it
/// (events on their connection) and to the event bus.
pub trait Reporter: Send + Sync {
    /// Text the model produced.
    fn text(&self, text: &str);
    /// A step began (`ok` absent) or ended.
    fn step(&self, step: &TurnStep);
    /// An event for the router's stream (`provider.request`, ...).
    fn publish(&self, event_name: &str, data: Value);
}

/// The model a turn asks, ready: a chain of routes with their providers
/// (the reliability layer), and what the first route's model can do.
pub trait Thinker: Send + Sync {
    /// Sends `request` along the chain (retries, fallback); `on_text` sees
    /// streamed text. Answers with the response and the route that gave it.
    fn think<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a (dyn Fn(&str) + Send + Sync),
        cancel: &'a CancellationToken,
    ) -> futures::future::BoxFuture<'a, Result<(ChatResponse, Answered), ProviderError>>;
    /// Whether the model takes native tool calls.
    fn native_tools(&self) -> bool;
    /// Its context window, tokens.
    fn context_window(&self) -> u64;
    /// The model of the first route (the request names it).
    fn model(&self) -> &str;
}

/// Which route answered, and what its answer cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// Provider name.
    pub provider: String,
    /// Model.
    pub model: String,
    /// US dollars.
    pub cost_usd: f64,
}

/// Everything a turn needs.
pub struct Turn<'a> {
    /// The agent.
    pub agent: &'a str,
    /// Its config.
    pub config: &'a AgentConfig,
    /// Its database's session tables.
    pub store: &'a Store,
    /// The model.
    pub thinker: &'a dyn Thinker,
    /// Runs its tool calls.
    pub tools: &'a dyn Runner,
    /// The session.
    pub session_id: &'a str,
    /// The turn.
    pub turn_id: &'a str,
    /// The agent's brain files compiled for the system prompt
    /// (`persona::compile`), read when the turn started.
    pub persona: &'a str,
    /// Run after each tool call: why the agent must halt now, if it must
    /// (the soul guard's review of its brain files, `guard::check`).
    pub after_tool: &'a (dyn Fn() -> Option<String> + Send + Sync),
    /// Cancelled by `chat_cancel`.
    pub cancel: CancellationToken,
    /// Where progress goes.
    pub reporter: &'a dyn Reporter,
}

/// Why the loop stopped early.
enum Stop {
    Limit(String),
    Cancelled,
    Halted(String),
    /// A call waits for the operator's approval; what they are told.
    Waiting(String),
    Failed(String),
}

/// A store that fails ends the turn: what it did so far is stored, and
/// what it would do next could not be.
impl From<store::Error> for Stop {
    fn from(error: store::Error) -> Self {
        Stop::Failed(error.to_string())
    }
}

impl From<ProviderError> for Stop {
    fn from(error: ProviderError) -> Self {
        match error {
            ProviderError::Cancelled => Stop::Cancelled,
            error => Stop::Failed(error.to_string()),
        }
    }
}

/// The system prompt: who the agent is, and for a model without native
/// tool calling, the tools and how to call them (`specs/agent/README.md`,
/// "System prompt"). Kept short: a small model drowns in a long one.
pub fn system_prompt(
    agent: &str,
    config: &AgentConfig,
    persona: &str,
    tools: &[ToolSpec],
    native_tools: bool,
) -> String {
    let mut prompt = match &config.persona.prompt {
        Some(persona) => persona.trim().to_owned(),
        None => format!(
            "You are {agent}, an AI agent on a ClawOS box, talking with its operator. Answer briefly and truthfully."
        ),
    };
    if !persona.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(persona.trim_end());
    }
    if !tools.is_empty() {
        if native_tools {
            prompt.push_str("\nUse a tool when it helps; file paths are relative to your directory.");
        } else {
            prompt.push_str(&text_calls_hint(tools));
        }
    }
    prompt
}

/// How a model without native tool calling calls `tools`: one line each.
pub fn text_calls_hint(tools: &[ToolSpec]) -> String {
    let mut hint = String::from(
        "\nTo use a tool, reply with only <tool_call>{\"name\": \"TOOL\", \"arguments\": {...}}</tool_call>. Tools:",
    );
    for tool in tools {
        let arguments = tool
            .parameters
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect::<Vec<_>>().join(", "));
        hint.push_str(&format!("\n- {}({}): {}", tool.name, arguments.unwrap_or_default(), tool.description));
    }
    hint
}

/// What the model is told in the silent turn before a compaction.
const FLUSH_PROMPT: &str = "The conversation below is about to be replaced by a short summary. \
Store with memory_store anything in it you must still know in later sessions: facts about the operator, decisions, names, open tasks. \
Store nothing you already stored. Do not answer in text.";
/// Most `memory_store` calls the silent turn runs.
const MAX_FLUSH_CALLS: usize = 5;

/// Where a turn begins.
enum Start<'a> {
    /// The operator's message (`chat_send`).
    Message(&'a str),
    /// The calls a `waiting` turn left, once answered (`chat_continue`).
    Continue,
    /// Where a turn cut off by a crash or a reboot was: its progress, and
    /// the call that was running (already allowed by the policy).
    Resume { in_flight: Option<String> },
}

/// Where the loop of a turn is (`specs/agent/README.md`, "The loop"):
/// each state's work decides the next one, until the model answers
/// without a call or a [`Stop`] ends the turn. The checkpoint is written
/// within the states: with every stored message and before each call.
enum State {
    /// Check the limits, ask the model (think), parse its answer and store it.
    Think,
    /// Run the calls of the answer stored as message `seq` at step `step`.
    /// `allowed` is the action ID of a resumed turn's call that was
    /// running: the policy allowed it then and is not asked again.
    Execute { seq: i64, step: u32, calls: Vec<crate::provider::ToolCall>, allowed: Option<String> },
    /// The model answered without calling a tool: the turn is done.
    Answered,
}

/// What every request of a turn starts with, made once per turn.
struct Prompt<'s> {
    /// The system prompt.
    system: String,
    /// Its estimated tokens.
    system_tokens: u64,
    /// Whether the model takes native tool calls (else the tools are
    /// described in the system prompt and calls parsed from its text).
    native: bool,
    /// The tools the model is told about.
    specs: &'s [ToolSpec],
    /// Their names.
    known: Vec<&'s str>,
}

impl Turn<'_> {
    /// Runs the turn for `message` to its outcome (stored, and returned);
    /// without a message, the turn continues the session: the calls of its
    /// last answer that have no result yet run first (`chat_continue`).
    pub async fn run(&self, message: Option<&str>, specs: &[ToolSpec]) -> TurnOutcome {
        let start = match message {
            Some(message) => Start::Message(message),
            None => Start::Continue,
        };
        self.run_from(start, outcome(self.turn_id, self.session_id, TurnStatus::Running, None), specs).await
    }

    /// Resumes a turn a crash or a reboot cut off, from its last
    /// checkpoint (`progress`): the calls of its last answer without a
    /// result run (`in_flight`, the one that was running, without asking
    /// the policy again: it was allowed; each with its idempotency key, so
    /// one that finished is not run twice), then the loop goes on. The
    /// wall-time limit counts from the resume.
    pub async fn resume(&self, progress: TurnOutcome, in_flight: Option<String>, specs: &[ToolSpec]) -> TurnOutcome {
        self.run_from(Start::Resume { in_flight }, progress, specs).await
    }

    async fn run_from(&self, start: Start<'_>, mut outcome: TurnOutcome, specs: &[ToolSpec]) -> TurnOutcome {
        let started = Instant::now();
        let limit = Duration::from_secs(self.config.limits.max_seconds);
        let result = tokio::select! {
            result = self.steps(start, specs, &mut outcome) => result,
            () = tokio::time::sleep(limit) => {
                self.cancel.cancel();
                Err(Stop::Limit(format!("wall time per turn ({} s)", self.config.limits.max_seconds)))
            }
        };
        match result {
            Ok(()) => outcome.status = TurnStatus::Done,
            Err(Stop::Limit(which)) => {
                outcome.status = TurnStatus::Limit;
                outcome.message = Some(format!("the turn stopped: limit reached: {which}"));
            }
            Err(Stop::Cancelled) => {
                outcome.status = TurnStatus::Cancelled;
                outcome.message = Some("the turn was cancelled by the operator".into());
            }
            Err(Stop::Halted(why)) => {
                outcome.status = TurnStatus::Halted;
                outcome.message = Some(format!("the agent is halted: {why}"));
            }
            Err(Stop::Waiting(what)) => {
                outcome.status = TurnStatus::Waiting;
                outcome.message = Some(what);
            }
            Err(Stop::Failed(why)) => {
                outcome.status = TurnStatus::Failed;
                outcome.message = Some(format!("the turn failed: {why}"));
            }
        }
        store_outcome(self.store, &outcome);
        tracing::info!(agent = self.agent, turn = self.turn_id, status = ?outcome.status, steps = outcome.steps, ms = started.elapsed().as_millis() as u64, "turn ended");
        outcome
    }

    /// The loop of the turn, state by state (`specs/agent/README.md`, "The
    /// loop"), from `start` until the model answers without a call or a
    /// [`Stop`] ends it.
    async fn steps(&self, start: Start<'_>, specs: &[ToolSpec], outcome: &mut TurnOutcome) -> Result<(), Stop> {
        let prompt = self.prompt(specs);
        let mut state = self.begin(start, outcome)?;
        loop {
            state = match state {
                State::Think => {
                    self.check_limits(outcome)?;
                    let request = self.request(&prompt).await?;
                    let (step, response) = self.think(&request, outcome).await?;
                    self.parse(&prompt, step, &response, outcome)?
                }
                State::Execute { seq, step, calls, allowed } => {
                    self.execute(seq, step, calls, allowed.as_deref(), outcome).await?;
                    State::Think
                }
                State::Answered => return Ok(()),
            };
        }
    }

    /// What the turn's prompts are made of: the system prompt (with the
    /// tools described in it for a model without native tool calls) and
    /// the tools' names, which text calls are parsed against.
    fn prompt<'s>(&self, specs: &'s [ToolSpec]) -> Prompt<'s> {
        let native = self.thinker.native_tools();
        let system = system_prompt(self.agent, self.config, self.persona, specs, native);
        let system_tokens = estimate_tokens(&system);
        let known = specs.iter().map(|spec| spec.name.as_str()).collect();
        Prompt { system, system_tokens, native, specs, known }
    }

    /// The first state: the operator's message stored with the turn's
    /// first checkpoint, then a think; or, continuing or resuming, the
    /// calls of the session's last answer that have no result yet.
    fn begin(&self, start: Start<'_>, outcome: &TurnOutcome) -> Result<State, Stop> {
        let allowed = match start {
            Start::Message(message) => {
                let user = ChatMessage::text(Role::User, message);
                let checkpoint = self.checkpoint(outcome, None);
                self.store.append_checkpointed(self.session_id, &user, estimate_tokens(message), &checkpoint)?;
                return Ok(State::Think);
            }
            Start::Continue => {
                self.store.checkpoint(&self.checkpoint(outcome, None))?;
                None
            }
            Start::Resume { in_flight } => in_flight,
        };
        Ok(match pending_calls(&self.store.context(self.session_id)?) {
            Some((seq, calls)) => State::Execute { seq, step: outcome.steps, calls, allowed },
            None => State::Think,
        })
    }

    /// The turn's limits before a request: steps, tokens, and the daily
    /// and monthly spend.
    fn check_limits(&self, outcome: &TurnOutcome) -> Result<(), Stop> {
        let limits = &self.config.limits;
        if outcome.steps >= limits.max_steps {
            return Err(Stop::Limit(format!("steps per turn ({})", limits.max_steps)));
        }
        if outcome.input_tokens + outcome.output_tokens >= limits.max_tokens {
            return Err(Stop::Limit(format!("tokens per turn ({})", limits.max_tokens)));
        }
        if let Some(limit) = limits.max_cost_per_turn_usd.filter(|limit| outcome.cost_usd >= *limit) {
            return Err(Stop::Limit(format!("cost per turn (${limit:.2}; spent ${:.4})", outcome.cost_usd)));
        }
        self.check_spend()
    }

    /// The next request: the system prompt and the session's context
    /// (compacted first when it has grown too long).
    async fn request(&self, prompt: &Prompt<'_>) -> Result<ChatRequest, Stop> {
        let context = self.context(prompt.system_tokens, prompt.specs).await?;
        let mut messages = vec![ChatMessage::text(Role::System, prompt.system.clone())];
        messages.extend(context.into_iter().map(|stored| stored.message));
        Ok(ChatRequest {
            model: self.thinker.model().to_owned(),
            messages,
            tools: if prompt.native { prompt.specs.to_vec() } else { Vec::new() },
            max_tokens: self.config.model.max_tokens,
            temperature: self.config.model.temperature,
        })
    }

    /// Think: one step, the request to the model, reported as it begins
    /// and ends; its usage and spend are counted and stored before anything
    /// else. Answers the step's number and the response.
    async fn think(&self, request: &ChatRequest, outcome: &mut TurnOutcome) -> Result<(u32, ChatResponse), Stop> {
        outcome.steps += 1;
        let step = outcome.steps;
        let began = Instant::now();
        self.reporter.step(&self.think_step(step, None, None));
        self.reporter.publish(
            "provider.request",
            json!({"agent": self.agent, "turn_id": self.turn_id, "step": step, "model": request.model}),
        );
        let on_text = |text: &str| self.reporter.text(text);
        let answer = self.thinker.think(request, &on_text, &self.cancel).await;
        let duration_ms = began.elapsed().as_millis() as u64;
        self.reporter.step(&self.think_step(step, Some(answer.is_ok()), Some(duration_ms)));
        let (response, answered) = match answer {
            Ok(answer) => answer,
            Err(error) => {
                self.reporter.publish(
                    "provider.error",
                    json!({"agent": self.agent, "turn_id": self.turn_id, "step": step, "error": error.to_string()}),
                );
                return Err(error.into());
            }
        };
        outcome.input_tokens += response.usage.input_tokens;
        outcome.output_tokens += response.usage.output_tokens;
        outcome.cost_usd += answered.cost_usd;
        self.spend(response.usage, &answered)?;
        self.reporter.publish(
            "provider.response",
            json!({"agent": self.agent, "turn_id": self.turn_id, "step": step, "provider": answered.provider, "model": answered.model,
                   "input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens,
                   "estimated": response.usage.estimated, "cost_usd": answered.cost_usd}),
        );
        Ok((step, response))
    }

    /// The think step `step` as reported: begun (`ok` absent) or ended.
    fn think_step(&self, step: u32, ok: Option<bool>, duration_ms: Option<u64>) -> TurnStep {
        TurnStep { turn_id: self.turn_id.into(), step, kind: StepKind::Think, tool_name: None, ok, duration_ms }
    }

    /// Parse: the answer's calls (native ones, else the ones the model
    /// printed as text), its text added to the turn's answer, and the
    /// answer stored with the checkpoint. Its calls run next; without a
    /// call the turn is answered.
    fn parse(
        &self,
        prompt: &Prompt<'_>,
        step: u32,
        response: &ChatResponse,
        outcome: &mut TurnOutcome,
    ) -> Result<State, Stop> {
        let (text, calls) = if response.tool_calls.is_empty() && !prompt.native && !prompt.known.is_empty() {
            crate::provider::text_calls::parse(&response.text, &prompt.known)
        } else {
            (response.text.clone(), response.tool_calls.clone())
        };
        let calls = unique_ids(calls);
        if !outcome.answer.is_empty() && !text.is_empty() {
            outcome.answer.push('\n');
        }
        outcome.answer.push_str(&text);
        let assistant = ChatMessage::calls(text, calls.clone());
        let checkpoint = self.checkpoint(outcome, None);
        let seq = self.store.append_checkpointed(
            self.session_id,
            &assistant,
            estimate_tokens(&response.text),
            &checkpoint,
        )?;
        Ok(if calls.is_empty() { State::Answered } else { State::Execute { seq, step, calls, allowed: None } })
    }

    /// Records what one answer of this turn used and cost.
    fn spend(&self, usage: Usage, answered: &Answered) -> store::Result<()> {
        self.store.spend(&SpendRow {
            turn_id: self.turn_id,
            provider: &answered.provider,
            model: &answered.model,
            usage,
            cost_usd: answered.cost_usd,
        })
    }

    /// The checkpoint of this turn at `progress`, with the call running now.
    fn checkpoint<'c>(&'c self, progress: &'c TurnOutcome, in_flight: Option<&'c str>) -> Checkpoint<'c> {
        Checkpoint { turn_id: self.turn_id, progress, in_flight }
    }

    /// Runs `calls` of the answer stored as message `seq`, storing each
    /// result as it arrives with the checkpoint. `allowed` is the action
    /// of a resumed turn's call that was running: the policy is asked
    /// whether it allowed that very call then (the checkpoint that names
    /// it is in the agent's database, which is not evidence of that).
    async fn execute(
        &self,
        seq: i64,
        step: u32,
        calls: Vec<crate::provider::ToolCall>,
        allowed: Option<&str>,
        outcome: &mut TurnOutcome,
    ) -> Result<(), Stop> {
        let limits = &self.config.limits;
        let mut halted = None;
        for call in calls {
            // The calls not run still get a result, so the stored
            // conversation stays valid for the next turn.
            let not_run = match &halted {
                Some(_) => Some("error: not run: the agent was halted"),
                None if outcome.tool_calls >= limits.max_tool_calls => {
                    Some("error: not run: the turn's tool-call limit was reached")
                }
                None => None,
            };
            if let Some(why) = not_run {
                let refused = ChatMessage::tool_result(call.id.clone(), why);
                self.store.append_checkpointed(self.session_id, &refused, 10, &self.checkpoint(outcome, None))?;
                continue;
            }
            let began = Instant::now();
            let tool_step = TurnStep {
                turn_id: self.turn_id.into(),
                step,
                kind: StepKind::Tool,
                tool_name: Some(call.name.clone()),
                ok: None,
                duration_ms: None,
            };
            self.reporter.step(&tool_step);
            self.reporter.publish(
                "tool.invoked",
                json!({"agent": self.agent, "turn_id": self.turn_id, "step": step, "tool_name": call.name}),
            );
            let action_id = format!("{}/{seq}/{}", self.session_id, call.id);
            let resumed = allowed == Some(action_id.as_str());
            let decided = tokio::select! {
                decided = self.tools.check(&action_id, &call.name, &call.arguments, resumed) => decided,
                () = self.cancel.cancelled() => return Err(Stop::Cancelled),
            };
            let result = match decided {
                Some(result) if result.waiting.is_some() => {
                    // No result is stored: this call and the ones after it
                    // run when the operator has answered (`chat_continue`).
                    self.reporter.step(&TurnStep {
                        ok: Some(false),
                        duration_ms: Some(began.elapsed().as_millis() as u64),
                        ..tool_step
                    });
                    return Err(Stop::Waiting(result.waiting.unwrap_or_default()));
                }
                Some(refused) => refused,
                None => {
                    // The checkpoint before the call: a restart from here
                    // runs it again with the same key, not twice.
                    self.store.checkpoint(&self.checkpoint(outcome, Some(&action_id)))?;
                    let result = tokio::select! {
                        result = self.tools.run(&action_id, &call.name, &call.arguments) => result,
                        () = self.cancel.cancelled() => return Err(Stop::Cancelled),
                    };
                    // A sub-agent's spend is the turn's, whatever it ended with.
                    outcome.input_tokens += result.spent.input_tokens;
                    outcome.output_tokens += result.spent.output_tokens;
                    outcome.cost_usd += result.spent.cost_usd;
                    if let Some(waiting) = result.waiting {
                        // A sub-agent's call waits: this call runs again
                        // (continuing it) once the operator has answered.
                        self.reporter.step(&TurnStep {
                            ok: Some(false),
                            duration_ms: Some(began.elapsed().as_millis() as u64),
                            ..tool_step
                        });
                        return Err(Stop::Waiting(waiting));
                    }
                    result
                }
            };
            outcome.tool_calls += 1;
            let duration_ms = began.elapsed().as_millis() as u64;
            self.reporter.step(&TurnStep { ok: Some(!result.is_error), duration_ms: Some(duration_ms), ..tool_step });
            self.reporter.publish("tool.completed", json!({"agent": self.agent, "turn_id": self.turn_id, "step": step, "tool_name": call.name, "ok": !result.is_error, "duration_ms": duration_ms}));
            let content = tools::cut(result.content, self.config.tools.max_result_bytes);
            let tokens = estimate_tokens(&content);
            let message = ChatMessage::tool_result(call.id, content);
            self.store.append_checkpointed(self.session_id, &message, tokens, &self.checkpoint(outcome, None))?;
            halted = (self.after_tool)();
        }
        if let Some(why) = halted {
            return Err(Stop::Halted(why));
        }
        if outcome.tool_calls >= limits.max_tool_calls {
            return Err(Stop::Limit(format!("tool calls per turn ({})", limits.max_tool_calls)));
        }
        Ok(())
    }

    /// Daily and monthly spend against their limits, before a request.
    fn check_spend(&self) -> Result<(), Stop> {
        let limits = &self.config.limits;
        let (day, month) = store::day_and_month_start(store::now_ms());
        for (limit, since, name) in [
            (limits.max_cost_per_day_usd, day, "cost per day"),
            (limits.max_cost_per_month_usd, month, "cost per month"),
        ] {
            if let Some(limit) = limit {
                let spent = self.store.spent_since(since)?;
                if spent >= limit {
                    return Err(Stop::Limit(format!("{name} (${limit:.2}; spent ${spent:.4})")));
                }
            }
        }
        Ok(())
    }

    /// The session's context for the next request, compacted first when
    /// it passes its share of the context window.
    async fn context(&self, system_tokens: u64, specs: &[ToolSpec]) -> Result<Vec<store::Stored>, Stop> {
        let context = self.store.context(self.session_id)?;
        let window = self.thinker.context_window().saturating_sub(u64::from(self.config.model.max_tokens));
        let threshold = (window as f64 * self.config.session.compact_at) as u64;
        let total = |messages: &[store::Stored]| system_tokens + messages.iter().map(|m| m.tokens).sum::<u64>();
        let before = total(&context);
        if before <= threshold {
            return Ok(context);
        }
        let split = compaction::split_point(&context, self.config.session.keep_recent);
        if split > 0 {
            self.flush_memory(&context[..split], specs).await;
        }
        let summary = if split > 0 { self.summarize(&context[..split]).await } else { None };
        if let Some(summary) = summary {
            let summary_tokens = estimate_tokens(&summary);
            let after = before - context[..split].iter().map(|m| m.tokens).sum::<u64>() + summary_tokens;
            if after < before {
                self.store.compact(
                    self.session_id,
                    context[split - 1].seq,
                    &summary,
                    summary_tokens,
                    before,
                    after,
                    false,
                )?;
                self.reporter.publish("session.compacted", json!({"agent": self.agent, "session_id": self.session_id, "tokens_before": before, "tokens_after": after}));
                let compacted = self.store.context(self.session_id)?;
                if total(&compacted) <= window {
                    return Ok(compacted);
                }
            }
        }
        // The breaker: summarizing did not shrink the prompt enough (or
        // failed); cut the oldest messages, and say so.
        let context = self.store.context(self.session_id)?;
        let split = compaction::truncation_point(&context, threshold.saturating_sub(system_tokens));
        if split == 0 {
            return Err(Stop::Limit(format!(
                "context window ({} tokens): the last message alone does not fit",
                self.thinker.context_window()
            )));
        }
        let notice = format!("[{split} earlier messages were dropped to fit the context window]");
        let after = total(&context[split..]) + estimate_tokens(&notice);
        self.store.compact(
            self.session_id,
            context[split - 1].seq,
            &notice,
            estimate_tokens(&notice),
            before,
            after,
            true,
        )?;
        self.reporter.text(&format!("{notice}\n"));
        Ok(self.store.context(self.session_id)?)
    }

    /// The silent turn before a compaction (`specs/agent/README.md`,
    /// "Memory"): the model sees what is about to be summarized away and
    /// may keep what matters with `memory_store`. Its text reaches no one
    /// and is not stored; its calls run and are recorded like any other.
    /// Without `memory_store` among the agent's tools there is none. A
    /// failure costs only the flush: the compaction goes on.
    async fn flush_memory(&self, prefix: &[store::Stored], specs: &[ToolSpec]) {
        const MEMORY_STORE: &str = BuiltIn::MemoryStore.name();
        let Some(spec) = specs.iter().find(|spec| spec.name == MEMORY_STORE) else { return };
        let native = self.thinker.native_tools();
        let mut system = FLUSH_PROMPT.to_owned();
        if !native {
            system.push_str(&text_calls_hint(std::slice::from_ref(spec)));
        }
        let request = ChatRequest {
            model: self.thinker.model().to_owned(),
            messages: vec![
                ChatMessage::text(Role::System, system),
                ChatMessage::text(
                    Role::User,
                    compaction::summarizer_input(prefix, self.config.session.summary_input_tokens),
                ),
            ],
            tools: if native { vec![spec.clone()] } else { Vec::new() },
            max_tokens: self.config.model.max_tokens.min(400),
            temperature: Some(0.0),
        };
        let (response, answered) = match self.thinker.think(&request, &|_| {}, &self.cancel).await {
            Ok(answer) => answer,
            Err(error) => {
                return tracing::warn!(agent = self.agent, "the memory flush before compaction failed: {error}")
            }
        };
        if let Err(error) = self.spend(response.usage, &answered) {
            tracing::error!(agent = self.agent, "recording the memory flush's spend: {error}");
        }
        let calls = unique_ids(if response.tool_calls.is_empty() && !native {
            crate::provider::text_calls::parse(&response.text, &[MEMORY_STORE]).1
        } else {
            response.tool_calls
        });
        let mut stored = 0;
        for call in calls.iter().filter(|call| call.name == MEMORY_STORE).take(MAX_FLUSH_CALLS) {
            // Its own action IDs: the flush's answer is not a stored message.
            let action_id = format!("{}/flush-{}/{}", self.session_id, self.turn_id, call.id);
            let result = self.tools.call(&action_id, &call.name, &call.arguments).await;
            if !result.is_error && result.waiting.is_none() {
                stored += 1;
            }
        }
        self.reporter.publish(
            "memory.flushed",
            json!({"agent": self.agent, "session_id": self.session_id, "turn_id": self.turn_id, "stored": stored}),
        );
    }

    /// A summary of `prefix` from the model, with a bounded input; `None`
    /// when it fails (the breaker then truncates).
    async fn summarize(&self, prefix: &[store::Stored]) -> Option<String> {
        let input = compaction::summarizer_input(prefix, self.config.session.summary_input_tokens);
        let request = ChatRequest {
            model: self.thinker.model().to_owned(),
            messages: vec![
                ChatMessage::text(
                    Role::System,
                    "Summarize this conversation in a few sentences. Keep facts, decisions, names and open tasks.",
                ),
                ChatMessage::text(Role::User, input),
            ],
            tools: Vec::new(),
            max_tokens: self.config.model.max_tokens.min(400),
            temperature: Some(0.0),
        };
        match self.thinker.think(&request, &|_| {}, &self.cancel).await {
            Ok((response, answered)) if !response.text.trim().is_empty() => {
                if let Err(error) = self.spend(response.usage, &answered) {
                    tracing::error!(agent = self.agent, "recording the summary's spend: {error}");
                }
                Some(format!("Summary of the earlier conversation: {}", response.text.trim()))
            }
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(agent = self.agent, "summarizing for compaction failed: {error}");
                None
            }
        }
    }
}

/// The calls of the session's last answer that have no result yet, with
/// that answer's message number: what a turn that ended `waiting` (or was
/// cut off) left to do. `None` when every call has its result.
pub fn pending_calls(context: &[store::Stored]) -> Option<(i64, Vec<crate::provider::ToolCall>)> {
    let asked = context
        .iter()
        .rposition(|stored| stored.message.role == Role::Assistant && !stored.message.tool_calls.is_empty())?;
    let answered: Vec<&str> =
        context[asked + 1..].iter().filter_map(|stored| stored.message.tool_call_id.as_deref()).collect();
    let pending: Vec<_> = context[asked]
        .message
        .tool_calls
        .iter()
        .filter(|call| !answered.contains(&call.id.as_str()))
        .cloned()
        .collect();
    (!pending.is_empty()).then(|| (context[asked].seq, pending))
}

/// A turn's outcome with nothing done yet.
pub fn outcome(turn_id: &str, session_id: &str, status: TurnStatus, message: Option<String>) -> TurnOutcome {
    TurnOutcome {
        turn_id: turn_id.into(),
        session_id: session_id.into(),
        status,
        answer: String::new(),
        message,
        steps: 0,
        tool_calls: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: 0.0,
    }
}

/// Stores how a turn ended: its message as a notice in the transcript, and
/// its outcome. A failure to store is logged: the operator still gets the
/// outcome.
fn store_outcome(store: &Store, outcome: &TurnOutcome) {
    if let Some(notice) = &outcome.message {
        if let Err(error) =
            store.append(&outcome.session_id, &ChatMessage::text(Role::Assistant, notice.clone()), true, 0)
        {
            tracing::error!(turn = outcome.turn_id, "storing the turn's notice: {error}");
        }
    }
    let stored = serde_json::to_value(outcome).expect("outcomes serialize");
    if let Err(error) = store.turn_ended(&outcome.turn_id, &stored) {
        tracing::error!(turn = outcome.turn_id, "storing the turn's outcome: {error}");
    }
}

/// `calls` with every call ID unique: a repeated one becomes `<id>-2`,
/// `<id>-3`, ... An ID names its call's action (`<session>/<message>/<call
/// id>`), which security-agent approves once and only for that call; a
/// model that repeats an ID in one answer must not make two calls share it.
fn unique_ids(mut calls: Vec<crate::provider::ToolCall>) -> Vec<crate::provider::ToolCall> {
    let mut seen = std::collections::HashSet::new();
    for call in &mut calls {
        if !seen.insert(call.id.clone()) {
            let id = (2..).map(|n| format!("{}-{n}", call.id)).find(|id| seen.insert(id.clone())).expect("unbounded");
            call.id = id;
        }
    }
    calls
}

/// The outcome of a turn that could not start (`why`): the operator's
/// message and the reason are stored, so the transcript shows both.
pub fn failed_to_start(
    store: &Store,
    session_id: &str,
    turn_id: &str,
    message: Option<&str>,
    why: &str,
) -> TurnOutcome {
    if let Some(message) = message {
        if let Err(error) =
            store.append(session_id, &ChatMessage::text(Role::User, message), false, estimate_tokens(message))
        {
            tracing::error!(turn = turn_id, "storing the message: {error}");
        }
    }
    let outcome = outcome(turn_id, session_id, TurnStatus::Failed, Some(format!("the turn failed: {why}")));
    store_outcome(store, &outcome);
    outcome
}

/// Ends a turn a restart cut off that cannot be resumed (`why`: its agent
/// is paused, halted or stopped, or it never stored its message): the
/// calls of its last answer that have no result get a "not run" one, so
/// the session takes new messages, and the turn ends `failed` saying why.
pub fn abandon(store: &Store, session_id: &str, turn_id: &str, why: &str) -> TurnOutcome {
    match store.context(session_id) {
        Ok(context) => {
            for call in pending_calls(&context).map(|(_, calls)| calls).unwrap_or_default() {
                let refused = ChatMessage::tool_result(call.id, format!("error: not run: {why}"));
                if let Err(error) = store.append(session_id, &refused, false, 10) {
                    tracing::error!(turn = turn_id, "storing a call's result: {error}");
                }
            }
        }
        Err(error) => tracing::error!(turn = turn_id, "reading the session: {error}"),
    }
    let outcome = outcome(
        turn_id,
        session_id,
        TurnStatus::Failed,
        Some(format!("the turn was cut off by a restart and not resumed: {why}")),
    );
    store_outcome(store, &outcome);
    outcome
}

/// The tool specs the model is told about: the allowed ones.
pub fn allowed_specs(config: &AgentConfig, tools: &[Tool]) -> Vec<ToolSpec> {
    tools.iter().filter(|tool| config.allows_tool(&tool.spec.name)).map(|tool| tool.spec.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolCall;

    #[test]
    fn a_call_id_repeated_in_one_answer_is_made_unique() {
        let call = |id: &str, path: &str| ToolCall {
            id: id.into(),
            name: "file_write".into(),
            arguments: json!({"path": path}),
        };
        let calls = unique_ids(vec![call("c1", "a"), call("c1", "b"), call("c1-2", "c"), call("c1", "d")]);
        let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["c1", "c1-2", "c1-2-2", "c1-3"]);
        assert_eq!(calls[3].arguments, json!({"path": "d"}));
    }
}

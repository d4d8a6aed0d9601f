//! The loop of a turn (specs/agent/README.md, "The loop") with a real
//! session store (an AgentFS database in a temporary directory) and models
//! scripted over real HTTP (tests/scripted-provider). The tools are a
//! stand-in here: the boot check tests/vm/checks/59-agent-turns.sh runs
//! them through fs-engine and wasm-daemon in the booted image.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use clawos_agent_loop::config::AgentConfig;
use clawos_agent_loop::provider::{KeySource, Role, ToolSpec};
use clawos_agent_loop::store::Store;
use clawos_agent_loop::thinker;
use clawos_agent_loop::tools::{CallResult, Runner};
use clawos_agent_loop::turn::{Reporter, Thinker, Turn};
use clawos_api::agent_loop::{TurnStatus, TurnStep};
use clawos_scripted_provider::{openai, Script, Server};
use futures::future::BoxFuture;
use futures::FutureExt as _;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use zeroize::Zeroizing;

struct NoKeys;

impl KeySource for NoKeys {
    fn key(&self, secret_id: &str) -> BoxFuture<'_, Result<Zeroizing<String>, String>> {
        let error = format!("no secret `{secret_id}`");
        async move { Err(error) }.boxed()
    }
}

/// Tools that answer from a table and remember their calls.
#[derive(Default)]
struct Tools {
    /// The calls that ran.
    calls: Mutex<Vec<(String, Value)>>,
    /// The actions the policy was asked about (and whether as resumed).
    actions: Mutex<Vec<(String, bool)>>,
    /// The actions the operator approved (`file_write` waits for it).
    approved: Mutex<Vec<String>>,
    /// The actions that ran.
    ran: Mutex<Vec<String>>,
    /// `hang` never answers (the process dies while it runs).
    hangs: bool,
}

impl Runner for Tools {
    fn check<'a>(
        &'a self,
        action_id: &'a str,
        name: &'a str,
        _arguments: &'a Value,
        resumed: bool,
    ) -> BoxFuture<'a, Option<CallResult>> {
        self.actions.lock().unwrap().push((action_id.to_owned(), resumed));
        let approved = self.approved.lock().unwrap().contains(&action_id.to_owned());
        let decided = match name {
            // security-agent's stand-in: this tool needs the operator's approval.
            "file_write" if !approved => Some(CallResult {
                waiting: Some(format!("waiting for the operator: approve {action_id}")),
                ..CallResult::default()
            }),
            _ => None,
        };
        async move { decided }.boxed()
    }

    fn run<'a>(&'a self, action_id: &'a str, name: &'a str, arguments: &'a Value) -> BoxFuture<'a, CallResult> {
        self.calls.lock().unwrap().push((name.to_owned(), arguments.clone()));
        self.ran.lock().unwrap().push(action_id.to_owned());
        let result = match name {
            "text-stats" => CallResult::new(json!({"words": 3}).to_string(), false),
            "huge" => CallResult::new("x".repeat(100), false),
            "memory_store" => CallResult::new(json!({"id": "m0123456789ab"}).to_string(), false),
            "file_write" => CallResult::new("written", false),
            "hang" if self.hangs => return futures::future::pending().boxed(),
            "hang" => CallResult::new("done at last", false),
            other => CallResult::new(format!("error: there is no tool `{other}`"), true),
        };
        async move { result }.boxed()
    }
}

/// What the turn reported.
#[derive(Default)]
struct Seen {
    text: Mutex<String>,
    events: Mutex<Vec<(String, Value)>>,
}

impl Reporter for Seen {
    fn text(&self, text: &str) {
        self.text.lock().unwrap().push_str(text);
    }
    fn step(&self, _step: &TurnStep) {}
    fn publish(&self, event_name: &str, data: Value) {
        self.events.lock().unwrap().push((event_name.to_owned(), data));
    }
}

fn specs() -> Vec<ToolSpec> {
    ["text-stats", "huge", "memory_store", "file_write", "hang"]
        .iter()
        .map(|name| ToolSpec {
            name: (*name).into(),
            description: "a tool".into(),
            parameters: json!({"type": "object", "properties": {"text": {}}}),
        })
        .collect()
}

type Ran = (clawos_api::agent_loop::TurnOutcome, Store, Tools, Seen, tempfile::TempDir);

/// Runs one turn of a new agent whose model is `server`, configured by `extra`.
async fn run_turn(server: &Server, extra: &str, native: bool) -> Ran {
    run_turn_in(tempfile::tempdir().unwrap(), server, extra, native).await
}

/// Runs one turn of the agent whose database is in `dir`.
async fn run_turn_in(dir: tempfile::TempDir, server: &Server, extra: &str, native: bool) -> Ran {
    run_with(dir, server, extra, native, Tools::default(), Some("count the words")).await
}

/// The config of an agent whose model is `server`, with `extra` tables.
fn agent_config(server: &Server, extra: &str, native: bool) -> AgentConfig {
    let text = format!(
        "[model]\nprovider = \"scripted\"\nmodel = \"m\"\nmax_retries = 0\n{extra}\n[providers.scripted]\nkind = \"openai\"\nbase_url = \"{}\"\n\
         [providers.scripted.models.m]\nnative_tools = {native}\ncontext_window = 1000\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n",
        server.api_url()
    );
    AgentConfig::parse(&text).unwrap()
}

/// A new turn ID (each turn of a database has its own).
fn new_turn_id() -> String {
    static TURNS: AtomicU32 = AtomicU32::new(1);
    format!("t{}", TURNS.fetch_add(1, Ordering::Relaxed))
}

/// The soul guard's stand-in: a call of `rewrite-soul` halts the agent.
fn soul_guard(tools: &Tools) -> impl Fn() -> Option<String> + Send + Sync + '_ {
    || tools.calls.lock().unwrap().iter().any(|(name, _)| name == "rewrite-soul").then(|| "soul.md: held".to_owned())
}

/// Turn `turn_id` of agent `a` in session `s1`.
fn agent_turn<'a>(
    config: &'a AgentConfig,
    store: &'a Store,
    thinker: &'a dyn Thinker,
    tools: &'a Tools,
    turn_id: &'a str,
    after_tool: &'a (dyn Fn() -> Option<String> + Send + Sync),
    reporter: &'a Seen,
) -> Turn<'a> {
    Turn {
        agent: "a",
        config,
        store,
        thinker,
        tools,
        session_id: "s1",
        turn_id,
        persona: "",
        after_tool,
        cancel: CancellationToken::new(),
        reporter,
    }
}

/// Runs one turn for `message` (a continuation without one) with `tools`.
async fn run_with(
    dir: tempfile::TempDir,
    server: &Server,
    extra: &str,
    native: bool,
    tools: Tools,
    message: Option<&str>,
) -> Ran {
    let config = agent_config(server, extra, native);
    let store = Store::open(&dir.path().join("workspace.db")).unwrap();
    store.ensure_session("s1").unwrap();
    let turn_id = new_turn_id();
    store.turn_started(&turn_id, "s1", None).unwrap();
    let thinker = thinker::build(&config, &config.model.route(), Arc::new(NoKeys)).unwrap();
    let seen = Seen::default();
    let after_tool = soul_guard(&tools);
    let turn = agent_turn(&config, &store, &*thinker, &tools, &turn_id, &after_tool, &seen);
    let outcome = turn.run(message, &specs()).await;
    drop(turn);
    drop(after_tool);
    (outcome, store, tools, seen, dir)
}

#[tokio::test]
async fn a_tool_call_goes_to_its_tool_and_its_result_back_to_the_model() {
    let script = Script::new()
        .reply(openai::tool_call("c1", "text-stats", r#"{"text": "one two three"}"#, 3))
        .reply(openai::text(["Three ", "words."], Some((50, 2))));
    let server = Server::start(script).await.unwrap();
    let (outcome, store, tools, seen, _dir) = run_turn(&server, "", true).await;
    assert_eq!(outcome.status, TurnStatus::Done, "{outcome:?}");
    assert_eq!((outcome.steps, outcome.tool_calls, outcome.answer.as_str()), (2, 1, "Three words."));
    assert_eq!(*seen.text.lock().unwrap(), "Three words.");
    assert_eq!(tools.calls.lock().unwrap()[0], ("text-stats".to_owned(), json!({"text": "one two three"})));
    let second = &server.requests()[1].body;
    let result = second["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!((result["tool_call_id"].as_str(), result["content"].as_str()), (Some("c1"), Some(r#"{"words":3}"#)));
    let roles: Vec<Role> = store.transcript("s1").unwrap().into_iter().map(|s| s.message.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    let events: Vec<String> = seen.events.lock().unwrap().iter().map(|(name, _)| name.clone()).collect();
    assert!(events.contains(&"tool.invoked".into()) && events.contains(&"provider.response".into()), "{events:?}");
}

#[tokio::test]
async fn a_halt_after_a_tool_call_ends_the_turn_and_the_calls_after_it_are_not_run() {
    let calls = [("c1", "rewrite-soul", "{}"), ("c2", "text-stats", r#"{"text": "a"}"#)];
    let server = Server::start(Script::new().reply(openai::parallel_tool_calls(&calls, 2))).await.unwrap();
    let (outcome, store, tools, _seen, _dir) = run_turn(&server, "", true).await;
    assert_eq!(
        (outcome.status, outcome.message.as_deref()),
        (TurnStatus::Halted, Some("the agent is halted: soul.md: held")),
        "{outcome:?}"
    );
    assert_eq!(tools.calls.lock().unwrap().len(), 1, "the call after the halt ran");
    assert_eq!(server.served(), 1);
    // Every call has its result, so the session stays valid for the next turn.
    let results: Vec<String> = store
        .transcript("s1")
        .unwrap()
        .into_iter()
        .filter(|s| s.message.role == Role::Tool)
        .map(|s| s.message.content)
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[1], "error: not run: the agent was halted");
}

#[tokio::test]
async fn a_model_without_native_tools_calls_them_as_text() {
    let script = Script::new()
        .reply(openai::text(
            ["<tool_call>{\"name\": \"text-stats\", ", "\"arguments\": {\"text\": \"a b c\"}}</tool_call>"],
            None,
        ))
        .reply(openai::text(["Done."], None));
    let server = Server::start(script).await.unwrap();
    let (outcome, _store, tools, _seen, _dir) = run_turn(&server, "", false).await;
    assert_eq!((outcome.status, outcome.tool_calls), (TurnStatus::Done, 1), "{outcome:?}");
    assert_eq!(tools.calls.lock().unwrap()[0].1, json!({"text": "a b c"}));
    let first = &server.requests()[0].body;
    assert!(first.get("tools").is_none(), "no schemas to a model without native tools");
    assert!(first["messages"][0]["content"].as_str().unwrap().contains("<tool_call>"), "the prompt says how to call");
}

#[tokio::test]
async fn an_unknown_tool_is_a_result_for_the_model_not_a_crash_and_long_results_are_cut() {
    let script = Script::new()
        .reply(openai::parallel_tool_calls(&[("a", "no-such-tool", "{}"), ("b", "huge", "{}")], 1))
        .reply(openai::text(["Sorry."], None));
    let server = Server::start(script).await.unwrap();
    let (outcome, _store, _tools, _seen, _dir) = run_turn(&server, "[tools]\nmax_result_bytes = 60\n", true).await;
    assert_eq!(outcome.status, TurnStatus::Done, "{outcome:?}");
    let second = &server.requests()[1].body;
    let results: Vec<&str> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(results[0].starts_with("error: there is no tool `no-such-tool`"), "{results:?}");
    assert_eq!(results[1], format!("{}\n[result cut: 60 of 100 bytes shown]", "x".repeat(60)));
}

#[tokio::test]
async fn each_limit_ends_the_turn_with_a_message_naming_it() {
    // Steps: the model keeps calling tools.
    let script: Script = (0..5).map(|i| openai::tool_call(&format!("c{i}"), "text-stats", "{}", 1)).collect();
    let server = Server::start(script).await.unwrap();
    let (outcome, store, _tools, _seen, _dir) = run_turn(&server, "[limits]\nmax_steps = 2\n", true).await;
    assert_eq!(outcome.status, TurnStatus::Limit);
    assert_eq!(outcome.message.as_deref(), Some("the turn stopped: limit reached: steps per turn (2)"));
    assert_eq!(server.served(), 2);
    let last = store.transcript("s1").unwrap().pop().unwrap();
    assert!(last.message.content.contains("steps per turn"), "the notice is in the transcript");

    // Tool calls per turn.
    let server = Server::start(
        Script::new().reply(openai::parallel_tool_calls(&[("a", "text-stats", "{}"), ("b", "text-stats", "{}")], 1)),
    )
    .await
    .unwrap();
    let (outcome, _store, tools, _seen, _dir) = run_turn(&server, "[limits]\nmax_tool_calls = 1\n", true).await;
    assert_eq!((outcome.status, tools.calls.lock().unwrap().len()), (TurnStatus::Limit, 1));
    assert!(outcome.message.unwrap().contains("tool calls per turn (1)"));

    // Tokens per turn: the first answer's usage passes the limit.
    let server = Server::start(
        Script::new().reply(openai::tool_call("a", "text-stats", "{}", 1)).reply(openai::text(["x"], None)),
    )
    .await
    .unwrap();
    let (outcome, _store, _tools, _seen, _dir) = run_turn(&server, "[limits]\nmax_tokens = 5\n", true).await;
    assert_eq!(outcome.status, TurnStatus::Limit);
    assert!(outcome.message.unwrap().contains("tokens per turn (5)"));

    // Cost per turn: the first answer (a tool call) costs more than the
    // limit, so the second request is not sent.
    let server = Server::start(
        Script::new().reply(openai::tool_call("a", "text-stats", "{}", 1)).reply(openai::text(["never sent"], None)),
    )
    .await
    .unwrap();
    let limits = "[limits]\nmax_cost_per_turn_usd = 0.000000001\n";
    let (outcome, _store, _tools, _seen, _dir) = run_turn(&server, limits, true).await;
    assert_eq!((outcome.status, outcome.steps, server.served()), (TurnStatus::Limit, 1, 1), "{outcome:?}");
    assert!(outcome.message.unwrap().contains("cost per turn ($0.00; spent $"));

    // Cost per day.
    assert_the_next_turn_is_refused_for_spend("[limits]\nmax_cost_per_day_usd = 1.0\n", "cost per day ($1.00").await;
}

/// Spend limits are checked before the request that would spend more:
/// under `limits`, a first turn spends $2, and the next one is refused
/// without a request, with a message naming the limit (`named`).
async fn assert_the_next_turn_is_refused_for_spend(limits: &str, named: &str) {
    let server = Server::start(
        Script::new()
            .reply(openai::text(["expensive"], Some((2_000_000, 10))))
            .reply(openai::text(["never sent"], None)),
    )
    .await
    .unwrap();
    let (outcome, _store, _tools, _seen, dir) = run_turn(&server, limits, true).await;
    assert_eq!(outcome.status, TurnStatus::Done);
    assert!(outcome.cost_usd > 2.0, "{outcome:?}");
    let (outcome, _store, _tools, _seen, _dir) = run_turn_in(dir, &server, limits, true).await;
    assert_eq!((outcome.status, outcome.steps), (TurnStatus::Limit, 0));
    assert!(outcome.message.unwrap().contains(named), "{named}");
    assert_eq!(server.served(), 1);
}

#[tokio::test]
async fn a_provider_that_fails_ends_the_turn_with_its_reason() {
    let server = Server::start(Script::new().reply(openai::malformed())).await.unwrap();
    let (outcome, _store, _tools, seen, _dir) = run_turn(&server, "", true).await;
    assert_eq!(outcome.status, TurnStatus::Failed);
    assert!(outcome.message.unwrap().contains("malformed answer"));
    assert!(seen.events.lock().unwrap().iter().any(|(name, _)| name == "provider.error"));
}

#[tokio::test]
async fn before_a_compaction_the_model_gets_a_silent_turn_to_store_memories() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("workspace.db")).unwrap();
    store.ensure_session("s1").unwrap();
    for n in 0..10 {
        let role = if n % 2 == 0 { Role::User } else { Role::Assistant };
        store
            .append(
                "s1",
                &clawos_agent_loop::provider::ChatMessage::text(
                    role,
                    format!("old message {n}: the boiler code is 4471"),
                ),
                false,
                60,
            )
            .unwrap();
    }
    drop(store);
    let script = Script::new()
        .reply(openai::tool_call("f1", "memory_store", r#"{"content": "The boiler code is 4471."}"#, 5))
        .reply(openai::text(["A summary."], Some((10, 3))))
        .reply(openai::text(["Done."], Some((10, 1))));
    let server = Server::start(script).await.unwrap();
    let (outcome, store, tools, seen, _dir) =
        run_turn_in(dir, &server, "[session]\nkeep_recent = 2\n[limits]\nmax_steps = 3", true).await;
    assert_eq!(outcome.status, TurnStatus::Done, "{outcome:?}");
    let flush = &server.requests()[0].body;
    assert!(flush["messages"][0]["content"].as_str().unwrap().contains("about to be replaced"), "{flush}");
    assert_eq!(flush["tools"].as_array().unwrap().len(), 1);
    assert_eq!(flush["tools"][0]["function"]["name"], "memory_store");
    assert!(flush["messages"][1]["content"].as_str().unwrap().contains("boiler code"));
    assert_eq!(
        tools.calls.lock().unwrap()[0],
        ("memory_store".to_owned(), json!({"content": "The boiler code is 4471."}))
    );
    let flushed: Vec<Value> = seen
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|(name, _)| name == "memory.flushed")
        .map(|(_, data)| data.clone())
        .collect();
    assert_eq!(flushed.len(), 1);
    assert_eq!(flushed[0]["stored"], 1);
    // The turn went on with the summary on the user's side, labelled: the
    // only system message is the system prompt.
    let after = server.requests()[2].body["messages"].as_array().unwrap().clone();
    assert_eq!(after.iter().filter(|m| m["role"] == "system").count(), 1, "{after:?}");
    let summary = after.iter().find(|m| m["content"].as_str().is_some_and(|c| c.contains("A summary."))).unwrap();
    assert_eq!(summary["role"], "user");
    assert!(summary["content"].as_str().unwrap().starts_with(clawos_agent_loop::store::SUMMARY_LABEL), "{summary}");
    // Nothing of the silent turn reaches the operator or the transcript.
    assert_eq!(*seen.text.lock().unwrap(), "Done.");
    let transcript = store.transcript("s1").unwrap();
    assert!(transcript.iter().all(|stored| stored.message.tool_calls.iter().all(|call| call.id != "f1")
        && stored.message.tool_call_id.as_deref() != Some("f1")));
}

#[tokio::test]
async fn a_call_waiting_for_approval_ends_the_turn_and_the_continuation_runs_it_once_then_answers() {
    let script = Script::new()
        .reply(openai::tool_call("c1", "file_write", r#"{"path": "a.md", "content": "x"}"#, 3))
        .reply(openai::text(["Written."], Some((20, 2))));
    let server = Server::start(script).await.unwrap();
    let (waiting, store, tools, seen, dir) = run_turn(&server, "", true).await;
    assert_eq!(waiting.status, TurnStatus::Waiting, "{waiting:?}");
    assert!(waiting.message.as_deref().unwrap().contains("approve s1/"), "{waiting:?}");
    assert_eq!((waiting.tool_calls, server.served()), (0, 1));
    assert!(!seen.text.lock().unwrap().contains("Written"));
    // The call has no result yet: the transcript ends with the model's call.
    let roles: Vec<Role> = store.context("s1").unwrap().into_iter().map(|s| s.message.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant]);
    let action = tools.actions.lock().unwrap()[0].0.clone();
    drop(store);

    // The operator approves; the session continues without a new message.
    tools.approved.lock().unwrap().push(action.clone());
    let (done, store, tools, _seen, _dir) = run_with(dir, &server, "", true, tools, None).await;
    assert_eq!((done.status, done.answer.as_str(), done.tool_calls), (TurnStatus::Done, "Written.", 1), "{done:?}");
    assert_eq!(
        *tools.actions.lock().unwrap(),
        [(action.clone(), false), (action, false)],
        "the same action both times"
    );
    let second = &server.requests()[1].body;
    let result = second["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!((result["tool_call_id"].as_str(), result["content"].as_str()), (Some("c1"), Some("written")));
    let roles: Vec<Role> = store.context("s1").unwrap().into_iter().map(|s| s.message.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
}

/// A turn cut off while a tool runs (the process killed: its future is
/// dropped, nothing more is stored) is found by the next start with its
/// checkpoint, and resumed: the call that was running runs again once with
/// the same action ID (its idempotency key), once the policy confirms it
/// allowed that call (the checkpoint is the agent's own record, which a tool
/// or a thief could have written), and the transcript holds one result for it.
#[tokio::test]
async fn a_turn_cut_off_during_a_tool_call_resumes_at_the_call_and_runs_it_once() {
    let script = Script::new()
        .reply(openai::tool_call("c1", "hang", r#"{"text": "a"}"#, 3))
        .reply(openai::text(["Resumed."], Some((20, 2))));
    let server = Server::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = agent_config(&server, "", true);
    let thinker = thinker::build(&config, &config.model.route(), Arc::new(NoKeys)).unwrap();
    let store = Store::open(&dir.path().join("workspace.db")).unwrap();
    store.ensure_session("s1").unwrap();
    store.turn_started("t-cut", "s1", None).unwrap();
    let (tools, seen) = (Tools { hangs: true, ..Tools::default() }, Seen::default());
    let after_tool = soul_guard(&tools);
    let turn = agent_turn(&config, &store, &*thinker, &tools, "t-cut", &after_tool, &seen);
    let cut = tokio::time::timeout(std::time::Duration::from_secs(2), turn.run(Some("count"), &specs())).await;
    assert!(cut.is_err(), "the hanging call returned");
    drop(turn);
    let action = tools.ran.lock().unwrap()[0].clone();

    // The next start: the turn has not ended, its checkpoint names the call.
    let store = Store::open(&dir.path().join("workspace.db")).unwrap();
    let unfinished = store.unfinished_turns().unwrap();
    assert_eq!(unfinished.len(), 1, "{unfinished:?}");
    let found = unfinished.into_iter().next().unwrap();
    assert_eq!((found.turn_id.as_str(), found.in_flight.as_deref()), ("t-cut", Some(action.as_str())));
    let progress = found.progress.expect("a checkpoint with progress");
    assert_eq!((progress.steps, progress.tool_calls), (1, 0));

    // This time the tool answers.
    let resumed_tools = Tools::default();
    let after_tool = soul_guard(&resumed_tools);
    let turn = agent_turn(&config, &store, &*thinker, &resumed_tools, "t-cut", &after_tool, &seen);
    let outcome = turn.resume(progress, found.in_flight, &specs()).await;
    assert_eq!(
        (outcome.status, outcome.answer.as_str(), outcome.steps, outcome.tool_calls),
        (TurnStatus::Done, "Resumed.", 2, 1),
        "{outcome:?}"
    );
    assert_eq!(
        *resumed_tools.actions.lock().unwrap(),
        [(action.clone(), true)],
        "the policy is asked to confirm the call in flight, as resumed"
    );
    assert_eq!(*resumed_tools.ran.lock().unwrap(), [action], "the call ran again once, with its key");
    let roles: Vec<Role> = store.transcript("s1").unwrap().into_iter().map(|s| s.message.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Assistant], "one result for the call");
    assert_eq!(server.served(), 2, "the model was asked again only for what came after the call");
    assert!(store.unfinished_turns().unwrap().is_empty(), "the checkpoint outlived the turn");
}

/// A cut-off turn that cannot be resumed (its agent paused, say) is ended
/// `failed` saying why, and the call it left gets a "not run" result, so
/// the session takes a new message.
#[tokio::test]
async fn a_cut_off_turn_that_cannot_resume_is_ended_and_its_call_answered() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("workspace.db")).unwrap();
    store.ensure_session("s1").unwrap();
    store.turn_started("t-left", "s1", None).unwrap();
    store.append("s1", &clawos_agent_loop::provider::ChatMessage::text(Role::User, "count"), false, 1).unwrap();
    let call =
        clawos_agent_loop::provider::ToolCall { id: "c1".into(), name: "text-stats".into(), arguments: json!({}) };
    let asked = clawos_agent_loop::provider::ChatMessage::calls("", vec![call]);
    store.append("s1", &asked, false, 1).unwrap();
    assert_eq!(store.unfinished_turns().unwrap().len(), 1);

    let outcome = clawos_agent_loop::turn::abandon(&store, "s1", "t-left", "agent `a` is paused");
    assert_eq!(outcome.status, TurnStatus::Failed);
    assert!(outcome.message.as_deref().unwrap().contains("not resumed: agent `a` is paused"), "{outcome:?}");
    assert!(
        clawos_agent_loop::turn::pending_calls(&store.context("s1").unwrap()).is_none(),
        "the call was left without a result"
    );
    assert!(store.unfinished_turns().unwrap().is_empty());
}

#[tokio::test]
async fn the_wall_time_limit_ends_a_turn_whose_model_answers_too_slowly() {
    // max_seconds = 1 against an answer that starts after 3 s: the turn
    // ends at the limit, not when the answer would have come.
    let server = Server::start(Script::new().reply(openai::text(["too late"], None).delay_ms(3_000))).await.unwrap();
    let started = std::time::Instant::now();
    let (outcome, store, _tools, _seen, _dir) = run_turn(&server, "[limits]\nmax_seconds = 1\n", true).await;
    let took = started.elapsed();
    assert_eq!(outcome.status, TurnStatus::Limit);
    assert_eq!(outcome.message.as_deref(), Some("the turn stopped: limit reached: wall time per turn (1 s)"));
    assert!(took < std::time::Duration::from_millis(2_500), "the turn took {took:?}");
    let last = store.transcript("s1").unwrap().pop().unwrap();
    assert!(last.message.content.contains("wall time per turn"), "the notice is in the transcript");
}

#[tokio::test]
async fn the_monthly_cost_limit_refuses_the_turn_before_its_request() {
    // No daily limit: the month's alone stops the second turn, before its
    // request is sent.
    assert_the_next_turn_is_refused_for_spend("[limits]\nmax_cost_per_month_usd = 1.0\n", "cost per month ($1.00")
        .await;
}

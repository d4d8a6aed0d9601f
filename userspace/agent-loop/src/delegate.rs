//! Sub-agents (`specs/agent/README.md`, "Sub-agents"): the `delegate`
//! tool starts a turn of the same agent in a session of its own, for one
//! task, with a scope and limits no wider than its parent's; its answer is
//! the call's result, and what it spent counts to the parent's turn.
//!
//! Owns: a sub-agent's scope (the tools it may call, the paths its file
//! tools are held to, its policy narrowed to an autonomy level, its
//! limits), its session (named from the call's action ID, so a call run
//! again after an approval or a restart finds the sub-agent where it
//! stopped), and its result as the parent reads it. Must not own: the loop
//! (`turn`) or any permission decision: each call of the sub-agent is
//! decided by security-agent's `check_policy` as the agent's, under the
//! narrowed policy, and served under the agent's name by the components'
//! own rules (RULE-001 in fs-engine), so a sub-agent can do nothing its
//! parent could not.
//!
//! A sub-agent cannot delegate (one level): its parent's turn is the only
//! one whose limits and transcript it answers to.

use std::collections::BTreeSet;

use clawos_api::agent_loop::{TurnOutcome, TurnStatus, TurnStep};
use clawos_api::security_agent::Autonomy;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::config::AgentConfig;
use crate::store::{Store, Unfinished};
use crate::tools::{BuiltIn, CallContext, Runs, Tool};
use crate::turn::{self, Reporter, Thinker, Turn};

/// The tool's name.
pub const NAME: &str = "delegate";

/// What the model is told it does.
pub const DESCRIPTION: &str =
    "Hand a task to a sub-agent with fewer tools or stricter limits; its answer is the result.";

/// A sub-agent's session names start with this: they are resumed through
/// their parent's call, never on their own (`Launcher::resume_all`).
pub const SESSION_PREFIX: &str = "d-";

/// The built-in tools whose reach a sub-agent's `paths` can hold: the file
/// tools by their path, the memory tools and `notify` by touching no file
/// of the agent's. The others (jobs, goals, WASM tools) write where a
/// path scope cannot follow, so a sub-agent given paths does not get them.
const PATH_HELD: [BuiltIn; 8] = [
    BuiltIn::FileRead,
    BuiltIn::FileWrite,
    BuiltIn::FileList,
    BuiltIn::MemoryStore,
    BuiltIn::MemoryRecall,
    BuiltIn::MemoryForget,
    BuiltIn::MemorySearch,
    BuiltIn::Notify,
];

/// `delegate`'s arguments. Each scope and limit can only narrow the
/// parent's: a wider one is held to the parent's.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// What the sub-agent is to do.
    task: String,
    /// Names among your tools it may call (default all of yours).
    #[serde(default)]
    #[schemars(transform = crate::tools::optional)]
    tools: Option<Vec<String>>,
    /// Directories or files of yours its file tools are held to.
    #[serde(default)]
    #[schemars(transform = crate::tools::optional)]
    paths: Option<Vec<String>>,
    /// read-only, supervised or full, never more than yours.
    #[serde(default)]
    #[schemars(transform = crate::tools::optional, with = "Option<String>")]
    autonomy: Option<Autonomy>,
    #[serde(default)]
    #[schemars(transform = crate::tools::optional)]
    max_steps: Option<u32>,
    #[serde(default)]
    #[schemars(transform = crate::tools::optional)]
    max_tokens: Option<u64>,
    #[serde(default)]
    #[schemars(transform = crate::tools::optional)]
    max_seconds: Option<u64>,
    #[serde(default)]
    #[schemars(transform = crate::tools::optional)]
    max_cost_usd: Option<f64>,
}

/// The `delegate` tool as the model is told of it.
pub fn tool() -> Tool {
    Tool {
        spec: crate::provider::ToolSpec {
            name: NAME.into(),
            description: DESCRIPTION.into(),
            parameters: crate::tools::schema_of::<Args>(),
        },
        runs: Runs::Delegate,
        // Starting one changes nothing: each of its calls is decided on its own.
        needs: vec![clawos_api::security_agent::Permission::Read],
    }
}

/// What a `delegate` call needs beyond the call's context: the parent
/// turn's model, store, config and persona, and where it reports.
pub struct Delegation<'a> {
    /// The parent's config (its limits and tools bound the sub-agent's).
    pub config: &'a AgentConfig,
    /// The agent's database.
    pub store: &'a Store,
    /// The parent turn's model.
    pub thinker: &'a dyn Thinker,
    /// The agent's compiled persona.
    pub persona: &'a str,
    /// The soul guard's review after each tool call.
    pub after_tool: &'a (dyn Fn() -> Option<String> + Send + Sync),
    /// The parent turn's reporter.
    pub reporter: &'a dyn Reporter,
    /// The parent turn's cancellation: cancelling it cancels the sub-agent.
    pub cancel: &'a CancellationToken,
    /// The parent turn.
    pub turn_id: &'a str,
}

/// How a `delegate` call ended: its record (what the parent reads and the
/// tool-call record keeps), or the approval it waits for.
pub enum Ended {
    /// The sub-agent's turn ended (done, limit, failed, ...).
    Outcome(Value),
    /// One of its calls waits for the operator: the parent waits too, and
    /// the parent's call runs again (continuing the sub-agent) once answered.
    Waiting {
        /// What the operator is told.
        what: String,
        /// What it spent until then.
        spent: crate::tools::Spent,
    },
}

/// The session of the sub-agent that the call `action_id` starts: the same
/// each time the call runs.
pub fn session_for(action_id: &str) -> String {
    let digest = Sha256::digest(action_id.as_bytes());
    let hex: String = digest.iter().take(16).map(|byte| format!("{byte:02x}")).collect();
    format!("{SESSION_PREFIX}{hex}")
}

/// Runs the `delegate` call `action_id` of the turn in `cx`: starts the
/// sub-agent, or resumes or continues the one this call started before.
pub async fn run(
    cx: &CallContext<'_>,
    parent: &Delegation<'_>,
    action_id: &str,
    arguments: &Value,
) -> Result<Ended, String> {
    let args: Args = serde_json::from_value(arguments.clone()).map_err(|e| format!("delegate's arguments: {e}"))?;
    if args.task.trim().is_empty() {
        return Err("`task` must say what the sub-agent is to do".into());
    }
    let tools = scope_tools(cx.tools, args.tools.as_deref(), args.paths.is_some())?;
    let paths = args.paths.as_deref().map(scope_paths).transpose()?;
    let config = scoped_config(parent.config, &args, &tools);
    let policy = cx.policy.narrowed(config.autonomy.level);
    let specs: Vec<_> = tools.iter().map(|tool| tool.spec.clone()).collect();
    let session_id = session_for(action_id);
    let store = parent.store;

    // Where it stands: a turn of it cut off by a restart resumes; one that
    // waited for an approval continues; else it starts with the task.
    let unfinished = store.unfinished_turns().map_err(|e| e.to_string())?;
    let cut_off = unfinished.into_iter().find(|turn| turn.session_id == session_id);
    let continued = !store.context(&session_id).map_err(|e| e.to_string())?.is_empty();
    let (turn_id, resume) = match cut_off {
        Some(Unfinished { turn_id, progress: Some(progress), in_flight, .. }) => (turn_id, Some((progress, in_flight))),
        found => {
            if let Some(turn) = found {
                turn::abandon(store, &session_id, &turn.turn_id, "it ended before its message was stored");
            }
            let turn_id = format!("t-{}", uuid::Uuid::new_v4().simple());
            let started =
                store.ensure_session(&session_id).and_then(|()| store.turn_started(&turn_id, &session_id, None));
            started.map_err(|e| e.to_string())?;
            (turn_id, None)
        }
    };

    let child = CallContext {
        tools: &tools,
        session_id: &session_id,
        // Its approvals name the parent's session (`cx.approval_session`,
        // kept by `..*cx`): approving one continues the parent.
        paths: paths.as_deref(),
        policy: &policy,
        delegation: None,
        ..*cx
    };
    let reporter = Forwarded(parent.reporter);
    let role = format!(
        "You are a sub-agent of {}, started for one task. Do it with the tools you have, then answer with the result: your answer goes to the agent that started you.",
        cx.agent
    );
    let persona = match parent.persona.trim_end() {
        "" => role,
        own => format!("{own}\n\n{role}"),
    };
    let sub = Turn {
        agent: cx.agent,
        config: &config,
        store,
        thinker: parent.thinker,
        tools: &child,
        session_id: &session_id,
        turn_id: &turn_id,
        persona: &persona,
        after_tool: parent.after_tool,
        cancel: parent.cancel.child_token(),
        reporter: &reporter,
    };
    parent.reporter.publish(
        "subagent.started",
        json!({"agent": cx.agent, "turn_id": parent.turn_id, "session_id": session_id, "subagent_turn_id": turn_id,
               "tools": specs.iter().map(|spec| spec.name.as_str()).collect::<Vec<_>>(), "autonomy": config.autonomy.level}),
    );
    let outcome = match resume {
        Some((progress, in_flight)) => sub.resume(progress, in_flight, &specs).await,
        None if continued => sub.run(None, &specs).await,
        None => sub.run(Some(&args.task), &specs).await,
    };
    parent.reporter.publish(
        "subagent.ended",
        json!({"agent": cx.agent, "turn_id": parent.turn_id, "session_id": session_id, "subagent_turn_id": turn_id,
               "status": outcome.status, "steps": outcome.steps, "tool_calls": outcome.tool_calls,
               "input_tokens": outcome.input_tokens, "output_tokens": outcome.output_tokens, "cost_usd": outcome.cost_usd}),
    );
    Ok(match outcome.status {
        TurnStatus::Waiting => Ended::Waiting {
            what: format!(
                "the sub-agent (session {session_id}) is {}",
                outcome.message.as_deref().unwrap_or("waiting for the operator")
            ),
            spent: spent(&record(&outcome)),
        },
        _ => Ended::Outcome(record(&outcome)),
    })
}

/// A finished sub-agent's record: what the tool-call record keeps and the
/// parent's result is shown from.
fn record(outcome: &TurnOutcome) -> Value {
    json!({
        "session_id": outcome.session_id, "turn_id": outcome.turn_id, "status": outcome.status,
        "answer": outcome.answer, "message": outcome.message, "steps": outcome.steps, "tool_calls": outcome.tool_calls,
        "input_tokens": outcome.input_tokens, "output_tokens": outcome.output_tokens, "cost_usd": outcome.cost_usd,
    })
}

/// What a sub-agent spent, from its record: counted to the parent's turn.
pub fn spent(record: &Value) -> crate::tools::Spent {
    crate::tools::Spent {
        input_tokens: record["input_tokens"].as_u64().unwrap_or(0),
        output_tokens: record["output_tokens"].as_u64().unwrap_or(0),
        cost_usd: record["cost_usd"].as_f64().unwrap_or(0.0),
    }
}

/// The parent's result of a finished sub-agent: how it ended, then its answer.
pub fn shown(record: &Value) -> (String, bool) {
    let status = record["status"].as_str().unwrap_or("failed");
    let mut text = format!(
        "sub-agent session {}: {status} after {} steps and {} tool calls ({} tokens, ${:.4})",
        record["session_id"].as_str().unwrap_or(""),
        record["steps"],
        record["tool_calls"],
        spent(record).input_tokens + spent(record).output_tokens,
        spent(record).cost_usd,
    );
    if let Some(message) = record["message"].as_str() {
        text.push_str(&format!("; {message}"));
    }
    let answer = record["answer"].as_str().unwrap_or("");
    if !answer.is_empty() {
        text.push_str("\n\n");
        text.push_str(answer);
    }
    (text, status != "done")
}

/// The tools a sub-agent may call: the parent's (never `delegate`), only
/// the ones `named` when it names some (each must be the parent's), and
/// only the ones a path scope holds when `held_to_paths`.
fn scope_tools(parent: &[Tool], named: Option<&[String]>, held_to_paths: bool) -> Result<Vec<Tool>, String> {
    let held = |tool: &Tool| !held_to_paths || matches!(tool.runs, Runs::BuiltIn(b) if PATH_HELD.contains(&b));
    let own: Vec<&Tool> = parent.iter().filter(|tool| tool.runs != Runs::Delegate).collect();
    let Some(named) = named else { return Ok(own.into_iter().filter(|tool| held(tool)).cloned().collect()) };
    let mut scoped = Vec::new();
    for name in named.iter().collect::<BTreeSet<_>>() {
        match own.iter().find(|tool| &tool.spec.name == name) {
            Some(tool) if held(tool) => scoped.push((*tool).clone()),
            Some(_) => return Err(format!("`{name}` cannot be held to `paths`: give it no paths, or leave it out")),
            None => {
                let yours: Vec<&str> = own.iter().map(|tool| tool.spec.name.as_str()).collect();
                return Err(format!("`{name}` is not one of your tools (yours: {})", yours.join(", ")));
            }
        }
    }
    Ok(scoped)
}

/// A sub-agent's paths: relative to the agent's directory, without `..`,
/// each without a trailing `/` (`.` for all of it).
fn scope_paths(paths: &[String]) -> Result<Vec<String>, String> {
    if paths.is_empty() {
        return Err("`paths` names no path: leave it out for all of yours".into());
    }
    paths.iter().map(|path| normal(path).ok_or_else(|| format!("`{path}` is not a path in your directory"))).collect()
}

/// `path` relative to the agent's directory, without `.` parts; `None` when
/// it is absolute or climbs out with `..`.
fn normal(path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            part => parts.push(part),
        }
    }
    Some(if parts.is_empty() { ".".into() } else { parts.join("/") })
}

/// Whether the file tool call `arguments` stays within `paths` (a
/// `file_list` without a path lists the agent's directory, `.`).
pub fn within(paths: &[String], arguments: &Value) -> bool {
    let path = arguments.get("path").and_then(Value::as_str).unwrap_or(".");
    let Some(path) = normal(path) else { return false };
    paths.iter().any(|scope| scope == "." || *scope == path || path.starts_with(&format!("{scope}/")))
}

/// The sub-agent's config: the parent's, its limits the smaller of the
/// parent's and the call's, its tools and autonomy the scoped ones.
fn scoped_config(parent: &AgentConfig, args: &Args, tools: &[Tool]) -> AgentConfig {
    let mut config = parent.clone();
    let limits = &mut config.limits;
    limits.max_steps = args.max_steps.map_or(limits.max_steps, |n| n.min(limits.max_steps));
    limits.max_tokens = args.max_tokens.map_or(limits.max_tokens, |n| n.min(limits.max_tokens));
    limits.max_seconds = args.max_seconds.map_or(limits.max_seconds, |n| n.min(limits.max_seconds));
    limits.max_cost_per_turn_usd = match (args.max_cost_usd, limits.max_cost_per_turn_usd) {
        (Some(asked), Some(own)) => Some(asked.min(own)),
        (asked, own) => asked.or(own),
    };
    config.autonomy.level = args.autonomy.map_or(parent.autonomy.level, |level| level.min(parent.autonomy.level));
    config.tools.allow = Some(tools.iter().map(|tool| tool.spec.name.clone()).collect());
    config
}

/// Reports a sub-agent's steps and events as the parent's are, but not
/// its text: its answer reaches the parent as the call's result.
struct Forwarded<'a>(&'a dyn Reporter);

impl Reporter for Forwarded<'_> {
    fn text(&self, _text: &str) {}

    fn step(&self, step: &TurnStep) {
        self.0.step(step);
    }

    fn publish(&self, event_name: &str, data: Value) {
        self.0.publish(event_name, data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools;

    fn names(tools: &[Tool]) -> Vec<&str> {
        tools.iter().map(|tool| tool.spec.name.as_str()).collect()
    }

    #[test]
    fn a_sub_agent_gets_no_tool_its_parent_lacks_and_never_delegate() {
        let mut parent: Vec<Tool> = tools::built_in().into_iter().filter(|t| t.spec.name != "file_write").collect();
        parent.push(tool());
        let all = scope_tools(&parent, None, false).unwrap();
        assert!(!names(&all).contains(&NAME) && !names(&all).contains(&"file_write"));
        let named = scope_tools(&parent, Some(&["file_read".into(), "memory_recall".into()]), false).unwrap();
        assert_eq!(names(&named), ["file_read", "memory_recall"]);
        let wider = scope_tools(&parent, Some(&["file_write".into()]), false).unwrap_err();
        assert!(wider.contains("not one of your tools"), "{wider}");
        assert!(scope_tools(&parent, Some(&[NAME.into()]), false).is_err(), "no deeper than one level");
        let held = scope_tools(&parent, None, true).unwrap();
        assert!(!names(&held).contains(&"schedule_add") && !names(&held).contains(&"goal_create"));
        assert!(scope_tools(&parent, Some(&["goal_update".into()]), true).unwrap_err().contains("cannot be held"));
    }

    #[test]
    fn paths_hold_file_calls_and_refuse_escapes() {
        let scope = scope_paths(&["artifacts/".into(), "./notes.md".into()]).unwrap();
        assert_eq!(scope, ["artifacts", "notes.md"]);
        for (path, inside) in [
            ("artifacts/a.md", true),
            ("./artifacts//b/c.md", true),
            ("notes.md", true),
            ("artifacts-old/a.md", false),
            ("artifacts/../soul.md", false),
            ("/etc/passwd", false),
            ("soul.md", false),
        ] {
            assert_eq!(within(&scope, &json!({"path": path})), inside, "{path}");
        }
        assert!(!within(&scope, &json!({})), "file_list of the whole directory");
        assert!(scope_paths(&["../other".into()]).is_err());
        assert!(scope_paths(&[]).is_err());
    }

    #[test]
    fn limits_and_autonomy_only_narrow() {
        let mut parent = AgentConfig::default();
        parent.autonomy.level = Autonomy::Supervised;
        parent.limits.max_cost_per_turn_usd = Some(0.5);
        let args = Args {
            autonomy: Some(Autonomy::Full),
            max_steps: Some(1000),
            max_tokens: Some(100),
            max_cost_usd: Some(2.0),
            ..Args::default()
        };
        let config = scoped_config(&parent, &args, &[]);
        assert_eq!(config.autonomy.level, Autonomy::Supervised, "never wider than the parent's");
        assert_eq!(config.limits.max_steps, parent.limits.max_steps);
        assert_eq!(config.limits.max_tokens, 100);
        assert_eq!(config.limits.max_cost_per_turn_usd, Some(0.5));
        // A parent allowed no steps (a config may say so) gives none, and asking
        // for some neither widens that nor panics.
        parent.limits.max_steps = 0;
        parent.limits.max_seconds = 0;
        let asked = Args { max_steps: Some(3), max_seconds: Some(0), ..Args::default() };
        let zero = scoped_config(&parent, &asked, &[]).limits;
        assert_eq!((zero.max_steps, zero.max_seconds), (0, 0));
        let read_only = Args { autonomy: Some(Autonomy::ReadOnly), ..Args::default() };
        assert_eq!(scoped_config(&parent, &read_only, &[]).autonomy.level, Autonomy::ReadOnly);
    }

    #[test]
    fn a_call_names_the_same_session_each_time() {
        let a = session_for("s-1/4/call-1");
        assert_eq!(a, session_for("s-1/4/call-1"));
        assert_ne!(a, session_for("s-1/4/call-2"));
        assert!(a.starts_with(SESSION_PREFIX) && a.len() == SESSION_PREFIX.len() + 32);
    }

    #[test]
    fn the_parent_reads_how_it_ended_and_its_answer() {
        let mut outcome = turn::outcome("t-1", "d-1", TurnStatus::Done, None);
        outcome.answer = "Found 3 files.".into();
        outcome.steps = 2;
        outcome.input_tokens = 100;
        outcome.output_tokens = 20;
        let (text, failed) = shown(&record(&outcome));
        assert!(!failed);
        assert!(text.starts_with("sub-agent session d-1: done after 2 steps and 0 tool calls (120 tokens"), "{text}");
        assert!(text.ends_with("\n\nFound 3 files."), "{text}");
        assert_eq!(spent(&record(&outcome)).input_tokens, 100);
    }
}

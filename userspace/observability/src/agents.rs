//! The agents' metrics (specs/agent/README.md, "The loop"): counters kept
//! from the events agent-loop publishes on the router, rendered with the
//! components' in the Prometheus exposition.
//!
//! Owns: the sums. Must not own: producing them (agent-loop's turns). Only
//! events whose authenticated sender is agent-loop count, so no other
//! component can forge an agent's spend. Labels are agent, provider and
//! tool names: never a key, a prompt or a tool's arguments.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use clawos_ipc::{Body, ComponentId, Message, Principal};
use serde_json::Value;

/// The events agent-loop publishes that these metrics are made of.
pub const EVENTS: [&str; 4] = ["provider.response", "provider.error", "tool.completed", "agent.step"];

/// A count and a sum of seconds.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Timed {
    count: u64,
    seconds: f64,
}

/// The sums, by label set.
#[derive(Debug, Default)]
pub struct AgentMetrics {
    tokens: BTreeMap<(String, String, &'static str), u64>,
    cost_usd: BTreeMap<(String, String), f64>,
    provider_errors: BTreeMap<String, u64>,
    steps: BTreeMap<(String, String), Timed>,
    tool_calls: BTreeMap<(String, String, &'static str), Timed>,
}

fn text<'a>(data: &'a serde_json::Map<String, Value>, key: &str) -> &'a str {
    data.get(key).and_then(Value::as_str).unwrap_or("unknown")
}

fn number(data: &serde_json::Map<String, Value>, key: &str) -> f64 {
    data.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// A Prometheus label value: `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl AgentMetrics {
    /// Takes one event; anything not from agent-loop is ignored.
    pub fn record(&mut self, message: &Message) {
        let (Principal::Component(ComponentId::AgentLoop), Body::Event(event)) = (message.sender, &message.body) else {
            return;
        };
        let data = &event.event_data;
        let agent = text(data, "agent").to_owned();
        match event.event_name.as_str() {
            "provider.response" => {
                let provider = text(data, "provider").to_owned();
                for (key, direction) in [("input_tokens", "input"), ("output_tokens", "output")] {
                    *self.tokens.entry((agent.clone(), provider.clone(), direction)).or_default() +=
                        number(data, key) as u64;
                }
                *self.cost_usd.entry((agent, provider)).or_default() += number(data, "cost_usd");
            }
            "provider.error" => *self.provider_errors.entry(agent).or_default() += 1,
            "tool.completed" => {
                let ok = if data.get("ok").and_then(Value::as_bool) == Some(true) { "true" } else { "false" };
                let timed = self.tool_calls.entry((agent, text(data, "tool_name").to_owned(), ok)).or_default();
                timed.count += 1;
                timed.seconds += number(data, "duration_ms") / 1000.0;
            }
            // A step's end carries its duration (a TurnStep with its agent).
            "agent.step" if data.contains_key("duration_ms") => {
                let timed = self.steps.entry((agent, text(data, "kind").to_owned())).or_default();
                timed.count += 1;
                timed.seconds += number(data, "duration_ms") / 1000.0;
            }
            _ => {}
        }
    }

    /// The exposition text of these families.
    pub fn render(&self, out: &mut String) {
        let head = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        head(
            out,
            "clawos_agent_tokens_total",
            "counter",
            "Tokens of model requests, by agent, provider and direction.",
        );
        for ((agent, provider, direction), n) in &self.tokens {
            let _ = writeln!(
                out,
                "clawos_agent_tokens_total{{agent=\"{}\",provider=\"{}\",direction=\"{direction}\"}} {n}",
                label(agent),
                label(provider)
            );
        }
        head(
            out,
            "clawos_agent_cost_usd_total",
            "counter",
            "What model requests cost, US dollars, by agent and provider.",
        );
        for ((agent, provider), usd) in &self.cost_usd {
            let _ = writeln!(
                out,
                "clawos_agent_cost_usd_total{{agent=\"{}\",provider=\"{}\"}} {usd}",
                label(agent),
                label(provider)
            );
        }
        head(
            out,
            "clawos_agent_provider_errors_total",
            "counter",
            "Model requests that failed after retries and fallback, by agent.",
        );
        for (agent, n) in &self.provider_errors {
            let _ = writeln!(out, "clawos_agent_provider_errors_total{{agent=\"{}\"}} {n}", label(agent));
        }
        head(out, "clawos_agent_steps_total", "counter", "Finished steps of turns, by agent and kind (think, tool).");
        for ((agent, kind), timed) in &self.steps {
            let _ = writeln!(
                out,
                "clawos_agent_steps_total{{agent=\"{}\",kind=\"{}\"}} {}",
                label(agent),
                label(kind),
                timed.count
            );
        }
        head(out, "clawos_agent_step_seconds_total", "counter", "Time spent in finished steps, by agent and kind.");
        for ((agent, kind), timed) in &self.steps {
            let _ = writeln!(
                out,
                "clawos_agent_step_seconds_total{{agent=\"{}\",kind=\"{}\"}} {}",
                label(agent),
                label(kind),
                timed.seconds
            );
        }
        head(out, "clawos_agent_tool_calls_total", "counter", "Tool calls made by agents, by agent, tool and outcome.");
        for ((agent, tool, ok), timed) in &self.tool_calls {
            let _ = writeln!(
                out,
                "clawos_agent_tool_calls_total{{agent=\"{}\",tool=\"{}\",ok=\"{ok}\"}} {}",
                label(agent),
                label(tool),
                timed.count
            );
        }
        head(out, "clawos_agent_tool_seconds_total", "counter", "Time spent in tool calls, by agent and tool.");
        let mut by_tool: BTreeMap<(&str, &str), f64> = BTreeMap::new();
        for ((agent, tool, _), timed) in &self.tool_calls {
            *by_tool.entry((agent, tool)).or_default() += timed.seconds;
        }
        for ((agent, tool), seconds) in by_tool {
            let _ = writeln!(
                out,
                "clawos_agent_tool_seconds_total{{agent=\"{}\",tool=\"{}\"}} {seconds}",
                label(agent),
                label(tool)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use clawos_ipc::{Message, ProtocolVersion};
    use serde_json::json;

    use super::*;

    fn event(sender: ComponentId, name: &str, data: Value) -> Message {
        let Value::Object(data) = data else { unreachable!() };
        Message::event(ProtocolVersion::V1_0, sender.into(), ComponentId::Router.into(), name, data)
    }

    #[test]
    fn agent_loop_events_are_summed_and_others_ignored() {
        let mut metrics = AgentMetrics::default();
        let response =
            json!({"agent": "default", "provider": "local", "input_tokens": 10, "output_tokens": 4, "cost_usd": 0.5});
        metrics.record(&event(ComponentId::AgentLoop, "provider.response", response.clone()));
        metrics.record(&event(ComponentId::AgentLoop, "provider.response", response.clone()));
        metrics.record(&event(ComponentId::WasmDaemon, "provider.response", response));
        metrics.record(&event(
            ComponentId::AgentLoop,
            "tool.completed",
            json!({"agent": "default", "tool_name": "text-stats", "ok": true, "duration_ms": 1500}),
        ));
        metrics.record(&event(ComponentId::AgentLoop, "provider.error", json!({"agent": "a\"b"})));
        metrics.record(&event(
            ComponentId::AgentLoop,
            "agent.step",
            json!({"agent": "default", "kind": "think", "duration_ms": 250}),
        ));
        metrics.record(&event(ComponentId::AgentLoop, "agent.step", json!({"agent": "default", "kind": "think"})));
        let mut out = String::new();
        metrics.render(&mut out);
        assert!(
            out.contains("clawos_agent_tokens_total{agent=\"default\",provider=\"local\",direction=\"input\"} 20\n"),
            "{out}"
        );
        assert!(out.contains("clawos_agent_cost_usd_total{agent=\"default\",provider=\"local\"} 1\n"), "{out}");
        assert!(
            out.contains("clawos_agent_tool_calls_total{agent=\"default\",tool=\"text-stats\",ok=\"true\"} 1\n"),
            "{out}"
        );
        assert!(out.contains("clawos_agent_tool_seconds_total{agent=\"default\",tool=\"text-stats\"} 1.5\n"), "{out}");
        assert!(out.contains("clawos_agent_steps_total{agent=\"default\",kind=\"think\"} 1\n"), "{out}");
        assert!(out.contains("clawos_agent_step_seconds_total{agent=\"default\",kind=\"think\"} 0.25\n"), "{out}");
        assert!(out.contains("clawos_agent_provider_errors_total{agent=\"a\\\"b\"} 1\n"), "{out}");
    }
}

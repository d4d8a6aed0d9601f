//! Workspace memory search for tools granted `memory:search:<workspace>`,
//! answered by fs-engine's `memory_search` (hybrid keyword + vector search;
//! specs/clawfs/README.md). The host has checked the grant; fs-engine owns
//! the workspaces, so the daemon never opens their databases itself.

use std::time::Duration;

use clawos_ipc::{ComponentId, Object};
use clawos_toolhost::{MemoryHit, MemoryResults, MemorySearch};
use serde::Deserialize;

/// How long one search may take.
const SEARCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The part of fs-engine's answer a tool gets.
#[derive(Debug, Deserialize)]
struct Answer {
    results: Vec<Hit>,
    keyword: serde_json::Value,
    vector: serde_json::Value,
}

#[derive(Debug, Deserialize)]
struct Hit {
    workspace: String,
    path: String,
    heading: String,
    content: String,
    score: f32,
}

/// fs-engine's leg report (`{"status": "ran", "candidates": n}` or
/// `{"status": "not_run", "reason": ...}`, clawfs::LegReport) as one line.
fn describe_leg(leg: &serde_json::Value) -> String {
    match (leg["status"].as_str(), &leg["candidates"], leg["reason"].as_str()) {
        (Some("ran"), candidates, _) => format!("ran ({candidates} candidates)"),
        (Some("not_run"), _, Some(reason)) => format!("not run: {reason}"),
        _ => format!("unknown: {leg}"),
    }
}

pub struct FsEngineMemory {
    runtime: tokio::runtime::Handle,
}

impl FsEngineMemory {
    pub fn new(runtime: tokio::runtime::Handle) -> FsEngineMemory {
        FsEngineMemory { runtime }
    }
}

impl MemorySearch for FsEngineMemory {
    fn search(&self, workspace: &str, query: &str, limit: u32) -> Result<MemoryResults, String> {
        let mut params = Object::new();
        params.insert("workspace".into(), workspace.into());
        params.insert("query".into(), query.into());
        params.insert("limit".into(), limit.into());
        let answer = clawos_runtime::peers::call(&self.runtime, ComponentId::WasmDaemon, ComponentId::FsEngine, "memory_search", params, SEARCH_TIMEOUT)?;
        let answer: Answer = serde_json::from_value(serde_json::Value::Object(answer)).map_err(|e| format!("fs-engine memory_search answer: {e}"))?;
        Ok(MemoryResults {
            hits: answer
                .results
                .into_iter()
                .map(|hit| MemoryHit { workspace: hit.workspace, path: hit.path, heading: hit.heading, content: hit.content, score: hit.score })
                .collect(),
            keyword_leg: describe_leg(&answer.keyword),
            vector_leg: describe_leg(&answer.vector),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leg_reports_read_as_one_line() {
        // The shapes clawfs::LegReport serializes to.
        assert_eq!(describe_leg(&serde_json::json!({"status": "ran", "candidates": 12})), "ran (12 candidates)");
        assert_eq!(describe_leg(&serde_json::json!({"status": "not_run", "reason": "no embedder"})), "not run: no embedder");
    }
}

//! `memory-recall`: `{"workspace": "notes", "query": "...", "limit": 5}` to
//! `{"results": [{"workspace", "path", "heading", "content", "score"}],
//! "keyword_leg": "...", "vector_leg": "..."}` through the host's `memory`
//! interface (hybrid search in fs-engine). Which workspaces it may search is
//! decided at install (`memory:search:<workspace>` grants).

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool-with-memory" });

use clawos::tool::memory::search;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    workspace: String,
    query: String,
    #[serde(default = "default_limit")]
    limit: u32,
}

fn default_limit() -> u32 {
    5
}

struct MemoryRecall;

impl Guest for MemoryRecall {
    fn describe() -> Descriptor {
        Descriptor {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            params_schema: r#"{"type":"object","properties":{"workspace":{"type":"string"},"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["workspace","query"],"additionalProperties":false}"#.into(),
        }
    }

    fn run(params_json: String) -> Result<String, ToolError> {
        let Params { workspace, query, limit } =
            serde_json::from_str(&params_json).map_err(|e| ToolError::InvalidParams(e.to_string()))?;
        if !(1..=50).contains(&limit) {
            return Err(ToolError::InvalidParams(format!("limit {limit} must be 1..=50")));
        }
        let found = search(&workspace, &query, limit).map_err(ToolError::Failed)?;
        let results: Vec<serde_json::Value> = found
            .hits
            .into_iter()
            .map(|hit| serde_json::json!({ "workspace": hit.workspace, "path": hit.path, "heading": hit.heading, "content": hit.content, "score": hit.score }))
            .collect();
        Ok(serde_json::json!({ "results": results, "keyword_leg": found.keyword_leg, "vector_leg": found.vector_leg })
            .to_string())
    }
}

export!(MemoryRecall);

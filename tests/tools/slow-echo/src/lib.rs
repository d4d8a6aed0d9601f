//! `slow-echo`: a test tool that takes as long as it is told. `run` sleeps
//! `ms` milliseconds, then answers `{"echo": text, "slept_ms": ms}`: a
//! tool call that is surely in flight when the resume tests kill
//! agent-loop, wasm-daemon or the whole box under it
//! (tests/vm/checks/61-agent-resume.sh). It sleeps in short slices, so
//! the host's epoch deadline can still stop it between them.

use std::time::{Duration, Instant};

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool" });

const MAX_MS: u64 = 60_000;
const SLICE: Duration = Duration::from_millis(50);

struct SlowEcho;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    #[serde(default)]
    text: String,
    ms: u64,
}

impl Guest for SlowEcho {
    fn describe() -> Descriptor {
        let schema = r#"{"type": "object", "properties": {"text": {"type": "string"}, "ms": {"type": "integer", "minimum": 0, "maximum": 60000}}, "required": ["ms"], "additionalProperties": false}"#;
        Descriptor {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            params_schema: schema.into(),
        }
    }

    fn run(params_json: String) -> Result<String, ToolError> {
        let params: Params = serde_json::from_str(&params_json).map_err(|e| ToolError::InvalidParams(e.to_string()))?;
        if params.ms > MAX_MS {
            return Err(ToolError::InvalidParams(format!("ms: at most {MAX_MS}")));
        }
        let until = Instant::now() + Duration::from_millis(params.ms);
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            std::thread::sleep(left.min(SLICE));
        }
        Ok(serde_json::json!({"echo": params.text, "slept_ms": params.ms}).to_string())
    }
}

export!(SlowEcho);

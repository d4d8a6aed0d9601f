//! `text-stats`: `{"text": "..."}` to `{"lines": n, "words": n, "bytes": n}`.
//! It needs no capability, which makes it the toolchain's smoke test.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool" });

#[derive(serde::Deserialize)]
struct Params {
    text: String,
}

#[derive(serde::Serialize)]
struct Stats {
    lines: usize,
    words: usize,
    bytes: usize,
}

struct TextStats;

impl Guest for TextStats {
    fn describe() -> Descriptor {
        Descriptor {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            params_schema: r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}"#.into(),
        }
    }

    fn run(params_json: String) -> Result<String, ToolError> {
        let Params { text } =
            serde_json::from_str(&params_json).map_err(|e| ToolError::InvalidParams(e.to_string()))?;
        let stats = Stats { lines: text.lines().count(), words: text.split_whitespace().count(), bytes: text.len() };
        serde_json::to_string(&stats).map_err(|e| ToolError::Failed(e.to_string()))
    }
}

export!(TextStats);

//! `json-query`: `{"document": <any JSON>, "path": "items[0].name"}` to
//! `{"found": true, "value": ...}` (or `{"found": false}`). Paths are
//! dot-separated keys with `[n]` array indexes; `""` is the whole document.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool" });

use serde_json::Value;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    document: Value,
    path: String,
}

/// One step of a path: an object key or an array index.
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

fn parse_path(path: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (key, mut rest) = segment.split_once('[').map_or((segment, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            steps.push(Step::Key(key.to_owned()));
        }
        while !rest.is_empty() {
            let (index, after) = rest.split_once(']').ok_or_else(|| format!("unclosed [ in {path:?}"))?;
            steps.push(Step::Index(index.parse().map_err(|_| format!("{index:?} is not an array index in {path:?}"))?));
            rest = after.strip_prefix('[').unwrap_or(after);
            if !after.is_empty() && !after.starts_with('[') {
                return Err(format!("unexpected {after:?} after ] in {path:?}"));
            }
        }
    }
    Ok(steps)
}

fn query<'a>(document: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    steps.iter().try_fold(document, |value, step| match step {
        Step::Key(key) => value.get(key.as_str()),
        Step::Index(index) => value.get(*index),
    })
}

struct JsonQuery;

impl Guest for JsonQuery {
    fn describe() -> Descriptor {
        Descriptor {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            params_schema: r#"{"type":"object","properties":{"document":{},"path":{"type":"string"}},"required":["document","path"],"additionalProperties":false}"#.into(),
        }
    }

    fn run(params_json: String) -> Result<String, ToolError> {
        let Params { document, path } =
            serde_json::from_str(&params_json).map_err(|e| ToolError::InvalidParams(e.to_string()))?;
        let steps = parse_path(&path).map_err(ToolError::InvalidParams)?;
        let result = match query(&document, &steps) {
            Some(value) => serde_json::json!({ "found": true, "value": value }),
            None => serde_json::json!({ "found": false }),
        };
        Ok(result.to_string())
    }
}

export!(JsonQuery);

//! `scratchpad`: small text notes an agent keeps between calls, through the
//! host's `kv` interface (`state:kv`; stored in the agent's workspace).
//! `{"op": "set", "key": "k", "value": "text"}`, `{"op": "get", "key": "k"}`
//! or `{"op": "delete", "key": "k"}` to `{"key": "k", "value": "text"|null}`.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool-with-kv" });

use clawos::tool::kv;

#[derive(serde::Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
enum Params {
    Set { key: String, value: String },
    Get { key: String },
    Delete { key: String },
}

struct Scratchpad;

impl Guest for Scratchpad {
    fn describe() -> Descriptor {
        Descriptor {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            params_schema: r#"{"type":"object","properties":{"op":{"enum":["set","get","delete"]},"key":{"type":"string"},"value":{"type":"string"}},"required":["op","key"],"additionalProperties":false}"#.into(),
        }
    }

    fn run(params_json: String) -> Result<String, ToolError> {
        let params: Params = serde_json::from_str(&params_json).map_err(|e| ToolError::InvalidParams(e.to_string()))?;
        let (key, value) = match params {
            Params::Set { key, value } => {
                kv::set(&key, value.as_bytes()).map_err(ToolError::Failed)?;
                (key, Some(value))
            }
            Params::Get { key } => {
                let value = kv::get(&key).map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
                (key, value)
            }
            Params::Delete { key } => {
                kv::delete(&key);
                (key, None)
            }
        };
        Ok(serde_json::json!({ "key": key, "value": value }).to_string())
    }
}

export!(Scratchpad);

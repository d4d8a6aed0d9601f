//! `web-fetch`: `{"url": "http://host/path", "method": "GET"|"POST",
//! "headers": {"name": "value"}, "body": "..."}` to `{"status": n, "headers":
//! {...}, "body": "...", "truncated": bool}` through the host's `http`
//! interface. Which hosts it may reach is decided at install
//! (`network:outbound:<host>` grants); the host adds any credentials for the
//! destination itself, so this tool never sees them.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool-with-http" });

use std::collections::BTreeMap;

use clawos::tool::http::{fetch, Header, HttpError, Request};

/// Body text handed back; the host caps the whole result at 1 MiB.
const MAX_BODY_CHARS: usize = 512 * 1024;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    url: String,
    #[serde(default = "get")]
    method: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<String>,
}

fn get() -> String {
    "GET".into()
}

struct WebFetch;

impl Guest for WebFetch {
    fn describe() -> Descriptor {
        Descriptor {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            params_schema: r#"{"type":"object","properties":{"url":{"type":"string"},"method":{"enum":["GET","POST"]},"headers":{"type":"object","additionalProperties":{"type":"string"}},"body":{"type":"string"}},"required":["url"],"additionalProperties":false}"#.into(),
        }
    }

    fn run(params_json: String) -> Result<String, ToolError> {
        let params: Params = serde_json::from_str(&params_json).map_err(|e| ToolError::InvalidParams(e.to_string()))?;
        if params.method != "GET" && params.method != "POST" {
            return Err(ToolError::InvalidParams(format!("method {:?}: only GET and POST", params.method)));
        }
        let request = Request {
            method: params.method,
            url: params.url,
            headers: params.headers.into_iter().map(|(name, value)| Header { name, value }).collect(),
            body: params.body.map(String::into_bytes),
        };
        let response = fetch(&request).map_err(|e| match e {
            HttpError::InvalidRequest(message) => ToolError::InvalidParams(message),
            HttpError::Transport(message) => ToolError::Failed(message),
        })?;
        let mut body = String::from_utf8_lossy(&response.body).into_owned();
        let truncated = body.len() > MAX_BODY_CHARS;
        if truncated {
            let cut = (0..=MAX_BODY_CHARS).rev().find(|&i| body.is_char_boundary(i)).unwrap_or(0);
            body.truncate(cut);
        }
        let headers: BTreeMap<String, String> = response.headers.into_iter().map(|h| (h.name, h.value)).collect();
        Ok(serde_json::json!({ "status": response.status, "headers": headers, "body": body, "truncated": truncated })
            .to_string())
    }
}

export!(WebFetch);

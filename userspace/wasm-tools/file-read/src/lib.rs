//! `file-read`: `{"path": "/clawfs/..."}` to `{"path": ..., "text": ...}`,
//! through the host's `filesystem` interface; the host refuses any path
//! outside the tool's `filesystem:read:` prefixes.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool-with-filesystem" });

use clawos::tool::filesystem::{read_file, FsError};

#[derive(serde::Deserialize)]
struct Params {
    path: String,
}

struct FileRead;

impl Guest for FileRead {
    fn describe() -> Descriptor {
        Descriptor {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            params_schema: r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}"#.into(),
        }
    }

    fn run(params_json: String) -> Result<String, ToolError> {
        let Params { path } =
            serde_json::from_str(&params_json).map_err(|e| ToolError::InvalidParams(e.to_string()))?;
        let bytes = read_file(&path).map_err(|e| match e {
            FsError::NotFound => ToolError::Failed(format!("{path}: not found")),
            FsError::Io(message) => ToolError::Failed(format!("{path}: {message}")),
        })?;
        let text = String::from_utf8(bytes).map_err(|_| ToolError::Failed(format!("{path}: not UTF-8")))?;
        Ok(serde_json::json!({ "path": path, "text": text }).to_string())
    }
}

export!(FileRead);

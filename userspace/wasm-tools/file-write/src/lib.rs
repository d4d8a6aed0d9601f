//! `file-write`: `{"path": "/clawfs/...", "text": "...", "append": false}` to
//! `{"path": ..., "bytes": n}`, through the host's `filesystem` interface;
//! the host refuses any path outside the tool's `filesystem:write:` prefixes
//! and never follows a symlink planted as the file itself.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool-with-filesystem" });

use clawos::tool::filesystem::{read_file, write_file, FsError};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    path: String,
    text: String,
    #[serde(default)]
    append: bool,
}

struct FileWrite;

fn failed(path: &str, error: FsError) -> ToolError {
    match error {
        FsError::NotFound => ToolError::Failed(format!("{path}: directory not found")),
        FsError::Io(message) => ToolError::Failed(format!("{path}: {message}")),
    }
}

impl Guest for FileWrite {
    fn describe() -> Descriptor {
        Descriptor {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            params_schema: r#"{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"},"append":{"type":"boolean"}},"required":["path","text"],"additionalProperties":false}"#.into(),
        }
    }

    fn run(params_json: String) -> Result<String, ToolError> {
        let Params { path, text, append } =
            serde_json::from_str(&params_json).map_err(|e| ToolError::InvalidParams(e.to_string()))?;
        let mut contents = Vec::new();
        if append {
            match read_file(&path) {
                Ok(existing) => contents = existing,
                Err(FsError::NotFound) => {}
                Err(e) => return Err(failed(&path, e)),
            }
        }
        contents.extend_from_slice(text.as_bytes());
        write_file(&path, &contents).map_err(|e| failed(&path, e))?;
        Ok(serde_json::json!({ "path": path, "bytes": contents.len() }).to_string())
    }
}

export!(FileWrite);

//! Tool definitions and `registry.json` (specs/toolhost/README.md,
//! "Registry"), with its naming rules enforced when they are parsed. The
//! rules for names (tool ids, versions, file names, workspaces) are ClawFS's
//! (`clawfs::names`, specs/clawfs/README.md, "Names"), and those for paths
//! `clawfs::files`'s; this module only applies them to a definition.

use std::path::{Path, PathBuf};

use clawfs::names::{self, SemVer};
use serde::{Deserialize, Serialize};

/// Largest memory a tool may ask for: the pooling allocator reserves this much
/// address space per instance slot.
pub const MAX_MEMORY_LIMIT_MB: u32 = 1024;
/// Longest a tool may ask to run; the IPC caller's own timeout usually ends
/// the wait sooner.
pub const MAX_TIMEOUT_SECONDS: u32 = 300;
/// Longest tool id; the id appears in file and cgroup names.
pub use clawfs::names::MAX_TOOL_ID_LEN;
/// The WIT world every tool targets (`specs/wit/tool.wit`).
pub const TOOL_WIT_INTERFACE: &str = "clawos:tool/tool@0.1.0";

/// Why a definition or registry was refused.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    /// The registry or definition file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The JSON does not have the definition's shape.
    #[error("parsing {path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A field breaks a rule; `field` names it.
    #[error("tool {tool_id:?}: {field}: {reason}")]
    Invalid { tool_id: String, field: &'static str, reason: String },
    /// Two registry entries share a tool id.
    #[error("tool {0:?} is listed twice in the registry")]
    Duplicate(String),
}

/// One capability a tool is granted. Anything not listed is denied.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Capability {
    /// `network:outbound:<host>`: HTTP requests to `host` (optionally `host:port`).
    NetworkOutbound(String),
    /// `filesystem:read:<prefix>`: read files under a `/clawfs` prefix.
    FilesystemRead(PathBuf),
    /// `filesystem:write:<prefix>`: read and write files under a `/clawfs` prefix.
    FilesystemWrite(PathBuf),
    /// `state:kv`: the per-(agent, tool) key-value store.
    StateKv,
    /// `memory:search:<workspace>`: hybrid search in a ClawFS workspace.
    MemorySearch(String),
}

impl Capability {
    /// Parses the registry's `kind:scope:value` form.
    pub fn parse(text: &str) -> Result<Capability, String> {
        let mut parts = text.splitn(3, ':');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("network"), Some("outbound"), Some(host)) => validate_host(host).map(|()| Capability::NetworkOutbound(host.to_owned())),
            (Some("filesystem"), Some("read"), Some(prefix)) => validate_prefix(prefix).map(Capability::FilesystemRead),
            (Some("filesystem"), Some("write"), Some(prefix)) => validate_prefix(prefix).map(Capability::FilesystemWrite),
            (Some("state"), Some("kv"), None) => Ok(Capability::StateKv),
            (Some("memory"), Some("search"), Some(workspace)) => names::validate_workspace_to_open(workspace)
                .map(|()| Capability::MemorySearch(workspace.to_owned()))
                .map_err(|e| format!("memory workspace: {e}")),
            _ => Err(format!(
                "unknown capability {text:?} (known: network:outbound:<host>, filesystem:read:<prefix>, filesystem:write:<prefix>, state:kv, memory:search:<workspace>)"
            )),
        }
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Capability::NetworkOutbound(host) => write!(f, "network:outbound:{host}"),
            Capability::FilesystemRead(prefix) => write!(f, "filesystem:read:{}", prefix.display()),
            Capability::FilesystemWrite(prefix) => write!(f, "filesystem:write:{}", prefix.display()),
            Capability::StateKv => f.write_str("state:kv"),
            Capability::MemorySearch(workspace) => write!(f, "memory:search:{workspace}"),
        }
    }
}

/// Hosts are lowercase DNS names or IPv4 addresses, with an optional port, so
/// that the grant compares byte for byte with the request's authority.
fn validate_host(host: &str) -> Result<(), String> {
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 253
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !name.starts_with(['.', '-']);
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p != 0));
    if name_ok && port_ok {
        Ok(())
    } else {
        Err(format!("network host {host:?} must be a lowercase DNS name or IPv4 address with an optional port"))
    }
}

/// Prefixes are `/clawfs` paths (`clawfs::files::parse`: absolute, no
/// `..`) in their normal form (no `.`, `//` or trailing `/`), so that a
/// grant reads as what it grants; `/clawfs` is the only tree a tool may be
/// pointed at. Not all of it (specs/toolhost/README.md, "Capabilities"): a
/// grant may not cover `/clawfs` itself, `agents/` or an agent's whole
/// directory (whose files the agent-loop trusts: its database, config,
/// persona), nor lie in the vault or the tool registry (the security
/// agent's and the daemon's own).
fn validate_prefix(prefix: &str) -> Result<PathBuf, String> {
    use clawfs::layout::{AGENTS_DIR, TOOLS_DIR, VAULT_DIR};
    let parts = match clawfs::files::parse(prefix) {
        Ok(parts) if clawfs::files::display(&parts) == prefix => parts,
        _ => return Err(format!("filesystem prefix {prefix:?} must be a normal absolute path under /clawfs")),
    };
    match parts.as_slice() {
        [] | [AGENTS_DIR] | [AGENTS_DIR, _] => Err(format!(
            "filesystem prefix {prefix:?} covers agents' own files; grant a directory inside an agent's, \
             such as /clawfs/agents/<agent>/notes"
        )),
        [VAULT_DIR, ..] | [TOOLS_DIR, ..] => {
            Err(format!("filesystem prefix {prefix:?} is in a component's own tree, never granted to a tool"))
        }
        _ => Ok(PathBuf::from(prefix)),
    }
}

/// A tool definition as stored in `registry.json` and `definitions/tool-<id>.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    pub tool_id: String,
    /// Semantic version `X.Y.Z`; part of the wasm file name.
    pub version: String,
    /// Absolute path, or relative to the registry's directory.
    pub wasm_path: PathBuf,
    /// `sha256:<64 lowercase hex>` of the wasm file, checked at every load.
    pub wasm_hash: String,
    pub wit_interface: String,
    #[serde(default)]
    pub capabilities: Vec<String>,
    pub memory_limit_mb: u32,
    pub cpu_quota_percent: u32,
    pub timeout_seconds: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// One-line description for `clawctl tool list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A definition that passed every rule, with its capabilities parsed and its
/// wasm path resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidTool {
    pub definition: ToolDefinition,
    pub capabilities: Vec<Capability>,
    pub wasm_path: PathBuf,
    /// The 32 bytes of `wasm_hash`.
    pub wasm_sha256: [u8; 32],
}

impl ValidTool {
    pub fn tool_id(&self) -> &str {
        &self.definition.tool_id
    }
}

impl ToolDefinition {
    /// Checks every rule and resolves a relative `wasm_path` against `base_dir`.
    pub fn validate(self, base_dir: &Path) -> Result<ValidTool, DefinitionError> {
        let invalid = |field, reason: String| DefinitionError::Invalid { tool_id: self.tool_id.clone(), field, reason };
        names::validate_tool_id(&self.tool_id).map_err(|e| invalid("tool_id", e.to_string()))?;
        let version = SemVer::parse(&self.version).map_err(|e| invalid("version", e.to_string()))?;
        let expected_file = names::tool_binary_file(&self.tool_id, version);
        if self.wasm_path.file_name().and_then(|n| n.to_str()) != Some(expected_file.as_str()) {
            return Err(invalid("wasm_path", format!("file name must be {expected_file:?} (ClawFS naming rules)")));
        }
        let wasm_sha256 = parse_hash(&self.wasm_hash).map_err(|reason| invalid("wasm_hash", reason))?;
        if self.wit_interface != TOOL_WIT_INTERFACE {
            return Err(invalid("wit_interface", format!("must be {TOOL_WIT_INTERFACE:?}")));
        }
        let capabilities = self
            .capabilities
            .iter()
            .map(|text| Capability::parse(text))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|reason| invalid("capabilities", reason))?;
        if !(1..=MAX_MEMORY_LIMIT_MB).contains(&self.memory_limit_mb) {
            return Err(invalid("memory_limit_mb", format!("must be 1..={MAX_MEMORY_LIMIT_MB}")));
        }
        if !(1..=100).contains(&self.cpu_quota_percent) {
            return Err(invalid("cpu_quota_percent", "must be 1..=100".into()));
        }
        if !(1..=MAX_TIMEOUT_SECONDS).contains(&self.timeout_seconds) {
            return Err(invalid("timeout_seconds", format!("must be 1..={MAX_TIMEOUT_SECONDS}")));
        }
        let wasm_path = base_dir.join(&self.wasm_path);
        Ok(ValidTool { definition: self, capabilities, wasm_path, wasm_sha256 })
    }

    /// Reads `definitions/tool-<id>.json`; the file name must match the id.
    pub fn load(path: &Path) -> Result<ValidTool, DefinitionError> {
        let definition: ToolDefinition = read_json(path)?;
        let expected = names::tool_definition_file(&definition.tool_id);
        if path.file_name().and_then(|n| n.to_str()) != Some(expected.as_str()) {
            return Err(DefinitionError::Invalid {
                tool_id: definition.tool_id,
                field: "file name",
                reason: format!("definition file must be named {expected:?}"),
            });
        }
        definition.validate(path.parent().unwrap_or(Path::new("/")))
    }
}

fn parse_hash(text: &str) -> Result<[u8; 32], String> {
    let hex = text.strip_prefix("sha256:").ok_or_else(|| format!("{text:?} must start with \"sha256:\""))?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err("must be \"sha256:\" and 64 lowercase hex digits".into());
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
    }
    Ok(bytes)
}

/// Formats a digest as the registry's `sha256:<hex>`.
pub fn format_hash(digest: &[u8; 32]) -> String {
    format!("sha256:{}", fsutil::hex(digest))
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, DefinitionError> {
    let text = std::fs::read(path).map_err(|source| DefinitionError::Read { path: path.into(), source })?;
    serde_json::from_slice(&text).map_err(|source| DefinitionError::Parse { path: path.into(), source })
}

/// `registry.json`: the tools a daemon may run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    tools: Vec<ToolDefinition>,
}

/// The validated registry, looked up by tool id.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    tools: std::collections::BTreeMap<String, ValidTool>,
}

impl Registry {
    /// Reads and validates `registry.json`; one bad entry refuses the whole
    /// file, so a typo never silently drops a tool.
    pub fn load(path: &Path) -> Result<Registry, DefinitionError> {
        let file: RegistryFile = read_json(path)?;
        let base_dir = path.parent().unwrap_or(Path::new("/"));
        let mut registry = Registry::default();
        for definition in file.tools {
            registry.insert(definition.validate(base_dir)?)?;
        }
        Ok(registry)
    }

    /// Adds a validated tool; ids are unique.
    pub fn insert(&mut self, tool: ValidTool) -> Result<(), DefinitionError> {
        let id = tool.tool_id().to_owned();
        if self.tools.contains_key(&id) {
            return Err(DefinitionError::Duplicate(id));
        }
        self.tools.insert(id, tool);
        Ok(())
    }

    pub fn get(&self, tool_id: &str) -> Option<&ValidTool> {
        self.tools.get(tool_id)
    }

    pub fn remove(&mut self, tool_id: &str) -> Option<ValidTool> {
        self.tools.remove(tool_id)
    }

    /// The `registry.json` text of these tools (definitions as given, so
    /// relative wasm paths stay relative).
    pub fn to_json(&self) -> String {
        let file = RegistryFile { tools: self.tools.values().map(|tool| tool.definition.clone()).collect() };
        serde_json::to_string_pretty(&file).expect("definitions serialize") + "\n"
    }

    pub fn tools(&self) -> impl Iterator<Item = &ValidTool> {
        self.tools.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definition() -> ToolDefinition {
        ToolDefinition {
            tool_id: "text-stats".into(),
            version: "0.1.0".into(),
            wasm_path: "binaries/text-stats-v0.1.0.wasm".into(),
            wasm_hash: format_hash(&[0xab; 32]),
            wit_interface: TOOL_WIT_INTERFACE.into(),
            capabilities: vec![
                "filesystem:read:/clawfs/workspaces".into(),
                "network:outbound:api.example.com:8080".into(),
            ],
            memory_limit_mb: 64,
            cpu_quota_percent: 10,
            timeout_seconds: 30,
            author: None,
            license: None,
            description: None,
        }
    }

    #[test]
    fn valid_definition_resolves_path_and_capabilities() {
        let tool = definition().validate(Path::new("/clawfs/tools")).unwrap();
        assert_eq!(tool.wasm_path, Path::new("/clawfs/tools/binaries/text-stats-v0.1.0.wasm"));
        assert_eq!(tool.wasm_sha256, [0xab; 32]);
        assert_eq!(
            tool.capabilities,
            vec![
                Capability::FilesystemRead("/clawfs/workspaces".into()),
                Capability::NetworkOutbound("api.example.com:8080".into())
            ]
        );
    }

    #[test]
    fn naming_rules_are_enforced() {
        type BreakRule = fn(&mut ToolDefinition);
        let cases: Vec<(&str, BreakRule)> = vec![
            ("tool_id", |d| d.tool_id = "Text_Stats".into()),
            ("tool_id", |d| d.tool_id = "-x".into()),
            ("tool_id", |d| d.tool_id = "1x".into()),
            ("tool_id", |d| d.tool_id = "a".repeat(MAX_TOOL_ID_LEN + 1)),
            ("version", |d| d.version = "1.0".into()),
            ("version", |d| d.version = "01.0.0".into()),
            ("wasm_path", |d| d.wasm_path = "binaries/text-stats.wasm".into()),
            ("wasm_hash", |d| d.wasm_hash = "sha256:ABC".into()),
            ("wit_interface", |d| d.wit_interface = "clawos-channel-v1".into()),
            ("capabilities", |d| d.capabilities = vec!["filesystem:read:/etc".into()]),
            ("capabilities", |d| d.capabilities = vec!["filesystem:read:/clawfs/../etc".into()]),
            ("capabilities", |d| d.capabilities = vec!["filesystem:read:/clawfs/./workspaces".into()]),
            ("capabilities", |d| d.capabilities = vec!["filesystem:read:/clawfs/workspaces/".into()]),
            ("capabilities", |d| d.capabilities = vec!["filesystem:write:/clawfsx".into()]),
            ("capabilities", |d| d.capabilities = vec!["memory:search:../vault".into()]),
            ("capabilities", |d| d.capabilities = vec!["memory:search:Notes".into()]),
            ("capabilities", |d| d.capabilities = vec!["memory:search:vault".into()]),
            ("capabilities", |d| d.capabilities = vec!["network:outbound:Evil.COM".into()]),
            ("capabilities", |d| d.capabilities = vec!["process:spawn".into()]),
            ("memory_limit_mb", |d| d.memory_limit_mb = 0),
            ("cpu_quota_percent", |d| d.cpu_quota_percent = 101),
            ("timeout_seconds", |d| d.timeout_seconds = MAX_TIMEOUT_SECONDS + 1),
        ];
        for (expected_field, break_rule) in cases {
            let mut d = definition();
            break_rule(&mut d);
            match d.validate(Path::new("/")) {
                Err(DefinitionError::Invalid { field, .. }) => assert_eq!(field, expected_field),
                other => panic!("expected {expected_field} to be refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn grants_never_cover_what_components_own() {
        for (grant, reason) in [
            ("filesystem:write:/clawfs", "covers agents' own files"),
            ("filesystem:read:/clawfs/agents", "covers agents' own files"),
            ("filesystem:write:/clawfs/agents/default", "covers agents' own files"),
            ("filesystem:read:/clawfs/vault", "a component's own tree"),
            ("filesystem:write:/clawfs/vault/policy.db", "a component's own tree"),
            ("filesystem:write:/clawfs/tools/definitions", "a component's own tree"),
        ] {
            let refused = Capability::parse(grant).unwrap_err();
            assert!(refused.contains(reason), "{grant}: {refused}");
        }
        for grant in ["filesystem:write:/clawfs/agents/default/notes", "filesystem:read:/clawfs/workspaces/w"] {
            assert!(Capability::parse(grant).is_ok(), "{grant}");
        }
    }

    #[test]
    fn registry_refuses_duplicates_and_unknown_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.json");
        let entry = serde_json::to_value(definition()).unwrap();
        std::fs::write(&path, serde_json::json!({ "tools": [entry.clone(), entry.clone()] }).to_string()).unwrap();
        assert!(matches!(Registry::load(&path), Err(DefinitionError::Duplicate(id)) if id == "text-stats"));

        let mut extra = entry;
        extra["network"] = true.into();
        std::fs::write(&path, serde_json::json!({ "tools": [extra] }).to_string()).unwrap();
        assert!(matches!(Registry::load(&path), Err(DefinitionError::Parse { .. })));
    }

    #[test]
    fn definition_file_name_must_match_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tool-other.json");
        std::fs::write(&path, serde_json::to_string(&definition()).unwrap()).unwrap();
        assert!(matches!(ToolDefinition::load(&path), Err(DefinitionError::Invalid { field: "file name", .. })));
    }
}

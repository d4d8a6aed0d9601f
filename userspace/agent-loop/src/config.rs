//! An agent's `config.toml` (`specs/agent/README.md`, "Configuration"):
//! which model it thinks with, the limits of a turn, its tools and its
//! sessions.
//!
//! Owns: the file's shape (every table refuses unknown keys, so a typo is
//! an error that names the key instead of a setting silently ignored), its
//! defaults, and reading it from an agent's directory. Must not own: what a provider does with its table
//! (`provider::config`), or the enforcement of a limit (the turn).
//!
//! The file is the operator's: ClawFS keeps it read-only to the agent
//! (`clawfs::layout::AGENT_CONFIG_FILE`), so nothing a model says can widen
//! its own limits. A missing file is the default config: the in-box model.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clawos_api::security_agent::{AgentPolicy, Autonomy, Mode, Permission};
use serde::Deserialize;

use crate::provider::config::ProviderConfig;
use crate::tools::BuiltIn;

/// The name of the in-box model's provider, always defined
/// (`specs/agent/local-model.md`); an agent's `[providers.local]` replaces it.
pub const LOCAL_PROVIDER: &str = "local";

/// The socket the in-box model's unit serves on.
pub const LOCAL_MODEL_SOCKET: &str = "/run/clawos-model/api.sock";

/// The vault lets agent-loop read only secrets whose names start so
/// (security-agent's policy, `specs/vault/`): a provider's API key.
pub const PROVIDER_SECRET_PREFIX: &str = "provider-";
/// The vault secrets an MCP server's bearer token or secret variables may
/// be read from (security-agent's default grants).
pub const MCP_SECRET_PREFIX: &str = "mcp-";
/// The in-box model's name on its server.
pub const LOCAL_MODEL: &str = "smollm2-135m-instruct";

/// Why a config is refused. Each message is one line naming what is wrong,
/// so `clawctl agent list` shows it whole.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Not TOML of this shape: a syntax error, an unknown key, a wrong
    /// type; `line` when toml knows where.
    #[error("{}{message}", line.map(|line| format!("line {line}: ")).unwrap_or_default())]
    Parse {
        /// The file's line, from 1.
        line: Option<usize>,
        /// toml's message, without the quoted source.
        message: String,
    },
    /// A route names a provider that is neither `local` nor in `[providers]`.
    #[error("[{at}] names provider `{provider}`, which is neither `local` nor in [providers]")]
    UnknownProvider {
        /// Where the route is: `model`, `model.fallback` or `routes.<hint>`.
        at: String,
        /// The provider it names.
        provider: String,
    },
    /// A provider's key is a vault secret agent-loop may not read.
    #[error(
        "[providers.{provider}] api_key_secret `{secret}`: agent-loop may read only vault secrets named {PROVIDER_SECRET_PREFIX}*"
    )]
    SecretName {
        /// The provider.
        provider: String,
        /// The secret it names.
        secret: String,
    },
    /// A limit that would end every turn before it began.
    #[error("[limits] max_steps, max_tokens and max_seconds must be at least 1")]
    ZeroLimit,
    /// `[permissions.tools]` names a built-in tool, which needs the
    /// permission of what it does, never `tool`: the entry would be
    /// silently without effect.
    #[error("[permissions.tools] names the built-in tool `{tool}`, which it does not govern: set [permissions] {permission} instead")]
    BuiltInTool {
        /// The tool.
        tool: String,
        /// The permission it needs.
        permission: String,
    },
    /// An `[mcp.servers.<name>]` table breaks a rule (the message names it).
    #[error("[mcp] {0}")]
    Mcp(String),
    /// `[session] compact_at` out of its range.
    #[error("[session] compact_at must be between 0.1 and 1.0, not {0}")]
    CompactAt(f64),
    /// A turn asked for a route hint the config does not have.
    #[error("no route `{hint}` (routes: {})", routes.join(", "))]
    NoRoute {
        /// The hint.
        hint: String,
        /// The hints there are.
        routes: Vec<String>,
    },
}

/// Why an agent's `config.toml` could not be loaded ([`AgentConfig::load`]).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file exists and cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is refused.
    #[error("{}: {source}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        #[source]
        source: Error,
    },
}

/// A whole `config.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The model a turn uses unless the message names a route.
    #[serde(default)]
    pub model: ModelConfig,
    /// Routes by hint (`fast`, `smart`, `local`, ...): `chat --hint fast`.
    #[serde(default)]
    pub routes: BTreeMap<String, Route>,
    /// Providers by name, besides the built-in `local`.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// What one turn may use.
    #[serde(default)]
    pub limits: Limits,
    /// Sessions and compaction.
    #[serde(default)]
    pub session: SessionConfig,
    /// The tools the agent may call.
    #[serde(default)]
    pub tools: ToolsConfig,
    /// Who the agent is: the start of its system prompt.
    #[serde(default)]
    pub persona: Persona,
    /// How much it may do without asking.
    #[serde(default)]
    pub autonomy: AutonomyConfig,
    /// Modes over the autonomy preset's.
    #[serde(default)]
    pub permissions: PermissionsConfig,
    /// Its MCP servers.
    #[serde(default)]
    pub mcp: McpConfig,
}

/// `[mcp]`: the agent's MCP servers (specs/mcp/README.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// `[mcp.servers.<name>]`, each a local (`command`) or remote (`url`) server.
    #[serde(default)]
    pub servers: BTreeMap<String, mcp::ServerConfig>,
    /// Above this many tokens of MCP tools' descriptions and schemas (an
    /// estimate, 4 bytes a token), the model is shown each MCP tool's name
    /// and the first line of its description only, and reads a tool's
    /// arguments with `mcp_schema` when it needs them. Default 2000.
    #[serde(default = "default_schema_budget")]
    pub schema_budget_tokens: u64,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig { servers: BTreeMap::new(), schema_budget_tokens: default_schema_budget() }
    }
}

fn default_schema_budget() -> u64 {
    2000
}

/// A provider and one of its models.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// A provider of `[providers]`, or `local`.
    pub provider: String,
    /// The model, as that provider names it.
    pub model: String,
}

/// `[model]`: the default route and how it is asked.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Provider of the default route. Default `local`.
    #[serde(default = "default_provider")]
    pub provider: String,
    /// Model of the default route. Default the in-box model.
    #[serde(default = "default_model")]
    pub model: String,
    /// Tried in order when a route fails with a transient error after its
    /// retries (never once text was shown).
    #[serde(default)]
    pub fallback: Vec<Route>,
    /// Most tokens one answer may have. Default 512.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Sampling temperature; the provider's default when absent.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Retries of a transient error per route. Default 2.
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// First backoff, milliseconds (doubles, full jitter). Default 500.
    #[serde(default = "default_backoff_base")]
    pub backoff_base_ms: u64,
    /// Longest backoff, milliseconds. Default 10000.
    #[serde(default = "default_backoff_max")]
    pub backoff_max_ms: u64,
}

impl Default for ModelConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key of [model] has a default")
    }
}

impl ModelConfig {
    /// The default route.
    pub fn route(&self) -> Route {
        Route { provider: self.provider.clone(), model: self.model.clone() }
    }
}

fn default_provider() -> String {
    LOCAL_PROVIDER.into()
}
fn default_model() -> String {
    LOCAL_MODEL.into()
}
fn default_max_tokens() -> u32 {
    512
}
fn default_retries() -> u32 {
    2
}
fn default_backoff_base() -> u64 {
    500
}
fn default_backoff_max() -> u64 {
    10_000
}

/// `[limits]`: what one turn, and the agent's spend, may reach. A limit
/// reached ends the turn with a message naming it.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Model requests per turn. Default 10.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// Tool calls per turn. Default 20.
    #[serde(default = "default_max_tool_calls")]
    pub max_tool_calls: u32,
    /// Prompt plus answer tokens over a turn's requests. Default 32000.
    #[serde(default = "default_max_turn_tokens")]
    pub max_tokens: u64,
    /// Wall time of a turn, seconds. Default 300.
    #[serde(default = "default_max_seconds")]
    pub max_seconds: u64,
    /// Spend of one turn (a sub-agent's included), US dollars; checked
    /// before every request. Default none.
    #[serde(default)]
    pub max_cost_per_turn_usd: Option<f64>,
    /// Spend per UTC day, US dollars; checked before every request.
    #[serde(default)]
    pub max_cost_per_day_usd: Option<f64>,
    /// Spend per UTC month, US dollars; checked before every request.
    #[serde(default)]
    pub max_cost_per_month_usd: Option<f64>,
}

impl Default for Limits {
    fn default() -> Self {
        toml::from_str("").expect("every key of [limits] has a default")
    }
}

fn default_max_steps() -> u32 {
    10
}
fn default_max_tool_calls() -> u32 {
    20
}
fn default_max_turn_tokens() -> u64 {
    32_000
}
fn default_max_seconds() -> u64 {
    300
}

/// `[session]`: the transcript kept in the prompt.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// Compact when the prompt passes this fraction of the model's context
    /// window. Default 0.75.
    #[serde(default = "default_compact_at")]
    pub compact_at: f64,
    /// Messages kept verbatim at the end. Default 8.
    #[serde(default = "default_keep_recent")]
    pub keep_recent: usize,
    /// Most tokens of transcript given to the summarizer. Default 2000.
    #[serde(default = "default_summary_input")]
    pub summary_input_tokens: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key of [session] has a default")
    }
}

fn default_compact_at() -> f64 {
    0.75
}
fn default_keep_recent() -> usize {
    8
}
fn default_summary_input() -> u64 {
    2000
}

/// `[tools]`: what the model may call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// Tool names the agent may call: built-in (`file_read`, `file_write`,
    /// `file_list`, `memory_store`, `memory_recall`, `memory_forget`,
    /// `memory_search`) and installed WASM tools; `"*"` for all. Default
    /// all, or none when the agent thinks with the in-box model
    /// ([`AgentConfig::allows_tool`]).
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// A tool result longer than this many bytes is cut, with a note
    /// saying so. Default 16384.
    #[serde(default = "default_max_result")]
    pub max_result_bytes: usize,
    /// The ClawFS workspace `memory_search` searches. Default `default`.
    #[serde(default = "default_memory_workspace")]
    pub memory_workspace: String,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key of [tools] has a default")
    }
}

fn default_max_result() -> usize {
    16_384
}
fn default_memory_workspace() -> String {
    "default".into()
}

/// `[persona]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Persona {
    /// Who the agent is and how it answers; a short default when absent.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Tokens the brain files may take in the system prompt
    /// (`persona::compile`); what does not fit is left out and named.
    #[serde(default = "default_persona_budget")]
    pub budget_tokens: u64,
}

impl Default for Persona {
    fn default() -> Self {
        Persona { prompt: None, budget_tokens: default_persona_budget() }
    }
}

fn default_persona_budget() -> u64 {
    1000
}

/// `[autonomy]` (`specs/agent/README.md`, "Permissions and approvals").
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AutonomyConfig {
    /// `read-only`, `supervised` (default) or `full`.
    #[serde(default)]
    pub level: Autonomy,
    /// Tool calls per agent over the last hour. Default 120.
    #[serde(default = "default_actions_per_hour")]
    pub max_actions_per_hour: u32,
    /// How long an approval may wait. Default 1440 (a day).
    #[serde(default = "default_approval_expiry")]
    pub approval_expires_minutes: u32,
}

impl Default for AutonomyConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key of [autonomy] has a default")
    }
}

fn default_actions_per_hour() -> u32 {
    120
}

fn default_approval_expiry() -> u32 {
    1440
}

/// `[permissions]`: a mode per permission over the preset's, and
/// `[permissions.tools]`, the `tool` permission's mode per tool.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsConfig {
    /// Reading the agent's files and memory.
    pub read: Option<Mode>,
    /// Writing its files.
    pub file_write: Option<Mode>,
    /// Storing and forgetting memories.
    pub memory_write: Option<Mode>,
    /// Running WASM tools.
    pub tool: Option<Mode>,
    /// WASM tools granted network access.
    pub network: Option<Mode>,
    /// Scheduling work.
    pub schedule: Option<Mode>,
    /// Paid requests.
    pub spend: Option<Mode>,
    /// Single tools.
    #[serde(default)]
    pub tools: BTreeMap<String, Mode>,
}

impl AgentConfig {
    /// The policy `check_policy` decides by.
    pub fn policy(&self) -> AgentPolicy {
        let p = &self.permissions;
        let modes = [
            (Permission::Read, p.read),
            (Permission::FileWrite, p.file_write),
            (Permission::MemoryWrite, p.memory_write),
            (Permission::Tool, p.tool),
            (Permission::Network, p.network),
            (Permission::Schedule, p.schedule),
            (Permission::Spend, p.spend),
        ];
        AgentPolicy {
            autonomy: self.autonomy.level,
            permissions: modes.into_iter().filter_map(|(permission, mode)| Some((permission, mode?))).collect(),
            tools: p.tools.clone(),
            max_actions_per_hour: self.autonomy.max_actions_per_hour,
            approval_expires_minutes: self.autonomy.approval_expires_minutes,
        }
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        toml::from_str("").expect("every table has a default")
    }
}

impl AgentConfig {
    /// Whether the agent may call tool `name`: as `[tools] allow` says or,
    /// without it, every tool unless the agent thinks with the in-box
    /// model, which calls none reliably and would read every tool's
    /// description at the start of each prompt (specs/agent/local-model.md:
    /// hundreds of tokens, minutes on a slow CPU, and a system prompt the
    /// image could not ship the state of).
    pub fn allows_tool(&self, name: &str) -> bool {
        match &self.tools.allow {
            Some(allow) => allow.iter().any(|allowed| {
                // `mcp.<server>.*`: every tool of one MCP server.
                let server_tools = allowed.strip_suffix('*').filter(|prefix| prefix.ends_with('.'));
                allowed == "*" || allowed == name || server_tools.is_some_and(|prefix| name.starts_with(prefix))
            }),
            None => self.model.provider != LOCAL_PROVIDER,
        }
    }

    /// Parses `text`; the error names the file's line and the offending key.
    pub fn parse(text: &str) -> Result<AgentConfig, Error> {
        // One line (the line number and what is wrong), so `clawctl agent
        // list` shows it whole: toml's own Display quotes the source too.
        let config: AgentConfig = toml::from_str(text).map_err(|e| Error::Parse {
            line: e.span().map(|span| text[..span.start].matches('\n').count() + 1),
            message: e.message().trim_end().to_owned(),
        })?;
        config.check()?;
        Ok(config)
    }

    /// The config of the agent whose directory is `dir`: its `config.toml`,
    /// the default when there is none.
    pub fn load(dir: &Path) -> Result<AgentConfig, LoadError> {
        let path = dir.join(clawfs::layout::AGENT_CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => AgentConfig::parse(&text).map_err(|source| LoadError::Invalid { path, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(AgentConfig::default()),
            Err(source) => Err(LoadError::Read { path, source }),
        }
    }

    /// What parsing cannot say: routes name providers that exist, limits
    /// are positive.
    fn check(&self) -> Result<(), Error> {
        let default = self.model.route();
        let routes = std::iter::once(("model".to_owned(), &default))
            .chain(self.model.fallback.iter().map(|route| ("model.fallback".to_owned(), route)))
            .chain(self.routes.iter().map(|(hint, route)| (format!("routes.{hint}"), route)));
        for (at, route) in routes {
            if route.provider != LOCAL_PROVIDER && !self.providers.contains_key(&route.provider) {
                return Err(Error::UnknownProvider { at, provider: route.provider.clone() });
            }
        }
        for (name, provider) in &self.providers {
            if let Some(secret) = &provider.api_key_secret {
                if !secret.starts_with(PROVIDER_SECRET_PREFIX) {
                    return Err(Error::SecretName { provider: name.clone(), secret: secret.clone() });
                }
            }
        }
        for (name, server) in &self.mcp.servers {
            server.endpoint(name).map_err(|e| Error::Mcp(e.to_string()))?;
            let secrets = server.bearer_secret.iter().map(|secret| ("bearer_secret".to_owned(), secret));
            let secrets =
                secrets.chain(server.secret_env.iter().map(|(key, secret)| (format!("secret_env.{key}"), secret)));
            if let Some((field, secret)) =
                secrets.into_iter().find(|(_, secret)| !secret.starts_with(MCP_SECRET_PREFIX))
            {
                return Err(Error::Mcp(format!(
                    "mcp server {name:?}: {field} {secret:?} must start with {MCP_SECRET_PREFIX:?} (the secrets agent-loop may read)"
                )));
            }
        }
        if self.limits.max_steps == 0 || self.limits.max_seconds == 0 || self.limits.max_tokens == 0 {
            return Err(Error::ZeroLimit);
        }
        if !(0.1..=1.0).contains(&self.session.compact_at) {
            return Err(Error::CompactAt(self.session.compact_at));
        }
        if let Some(tool) = self.permissions.tools.keys().find_map(|name| BuiltIn::named(name)) {
            let permission = serde_json::to_value(tool.needs()).ok().and_then(|v| v.as_str().map(str::to_owned));
            return Err(Error::BuiltInTool {
                tool: tool.name().to_owned(),
                permission: permission.unwrap_or_default(),
            });
        }
        Ok(())
    }

    /// The route a turn uses: the hint's, else the default.
    pub fn route(&self, hint: Option<&str>) -> Result<Route, Error> {
        match hint {
            None => Ok(self.model.route()),
            Some(hint) => self
                .routes
                .get(hint)
                .cloned()
                .ok_or_else(|| Error::NoRoute { hint: hint.to_owned(), routes: self.routes.keys().cloned().collect() }),
        }
    }
}

/// The `config.toml` a new agent gets when the operator gives none: the
/// defaults, written out with their meaning so the operator can edit them.
pub const DEFAULT_CONFIG: &str = r#"# This agent's configuration (specs/agent/README.md). Every key is optional;
# a key that is not listed here is an error naming it.

[model]
# The in-box model: no key, no network. It chats; it is too small to plan
# or to call tools reliably. For a remote model add a provider below and
# name it here.
provider = "local"
model = "smollm2-135m-instruct"
max_tokens = 512

[limits]
max_steps = 10
max_tool_calls = 20
max_tokens = 32000
max_seconds = 300
# max_cost_per_day_usd = 1.0
# max_cost_per_month_usd = 20.0

[tools]
# Every tool when [model] names a remote model; none with the in-box model,
# which calls none reliably. Name them (or "*" for all) to choose:
# allow = ["file_read", "memory_search"]

[persona]
# Tokens for the brain files (soul.md, identity.md, aieos.json, user.md,
# instructions/*.md) in the system prompt; what does not fit is left out
# and named by `clawctl agent show`.
budget_tokens = 1000

# [providers.openai]
# kind = "openai"
# base_url = "https://api.openai.com/v1"
# api_key_secret = "provider-openai"     # clawctl secret set provider-openai
# [providers.openai.models."gpt-4o-mini"]
# input_usd_per_mtok = 0.15
# output_usd_per_mtok = 0.6
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_is_the_in_box_model() {
        let config = AgentConfig::parse(DEFAULT_CONFIG).unwrap();
        assert_eq!(config.model.route(), Route { provider: LOCAL_PROVIDER.into(), model: LOCAL_MODEL.into() });
        assert_eq!(config.limits, Limits::default());
        assert_eq!(AgentConfig::parse("").unwrap().model.route(), config.model.route());
    }

    /// Without `[tools] allow`: no tool on the in-box model, every tool on
    /// a remote one; with it, what it names.
    #[test]
    fn the_tools_allowed_follow_the_model_unless_named() {
        let remote =
            "[model]\nprovider = \"r\"\nmodel = \"m\"\n[providers.r]\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n";
        for (text, file_read, web_fetch) in [
            ("", false, false),
            (DEFAULT_CONFIG, false, false),
            ("[tools]\nallow = [\"*\"]\n", true, true),
            ("[tools]\nallow = [\"file_read\"]\n", true, false),
            (remote, true, true),
            (&format!("{remote}[tools]\nallow = []\n"), false, false),
        ] {
            let config = AgentConfig::parse(text).unwrap();
            assert_eq!(
                (config.allows_tool("file_read"), config.allows_tool("web-fetch")),
                (file_read, web_fetch),
                "{text}"
            );
        }
    }

    #[test]
    fn a_typo_names_the_key() {
        let error = AgentConfig::parse("[limits]\nmax_step = 3\n").unwrap_err().to_string();
        assert!(error.contains("max_step") && error.starts_with("line 2: ") && !error.contains('\n'), "{error}");
        let error = AgentConfig::parse("[model]\nprovider = \"nowhere\"\n").unwrap_err().to_string();
        assert!(error.contains("nowhere"), "{error}");
    }

    #[test]
    fn the_policy_is_the_preset_and_the_modes_the_operator_wrote() {
        let policy = AgentConfig::default().policy();
        assert_eq!(
            (policy.autonomy, policy.permissions.len(), policy.max_actions_per_hour),
            (Autonomy::Supervised, 0, 120)
        );
        let error = AgentConfig::parse("[permissions.tools]\nfile_write = \"deny\"\n").unwrap_err().to_string();
        assert!(error.contains("built-in tool `file_write`") && error.contains("[permissions] file_write"), "{error}");
        let text = "[autonomy]\nlevel = \"full\"\n[permissions]\nnetwork = \"require_approval\"\n[permissions.tools]\nweb-fetch = \"deny\"\n";
        let policy = AgentConfig::parse(text).unwrap().policy();
        assert_eq!(policy.autonomy, Autonomy::Full);
        assert_eq!(policy.permissions.get(&Permission::Network), Some(&Mode::RequireApproval));
        assert_eq!(policy.tools.get("web-fetch"), Some(&Mode::Deny));
        assert!(AgentConfig::parse("[permissions]\nnetwork = \"maybe\"\n").unwrap_err().to_string().contains("maybe"));
        assert!(AgentConfig::parse("[autonomy]\nlevel = \"reckless\"\n").is_err());
    }

    #[test]
    fn an_mcp_servers_secrets_are_named_among_the_ones_agent_loop_may_read() {
        let local = "[mcp.servers.gh]\ncommand = [\"/usr/bin/gh-mcp\"]\n";
        AgentConfig::parse(&format!("{local}secret_env = {{ GH_TOKEN = \"mcp-gh\" }}\n")).unwrap();
        let error = AgentConfig::parse(&format!("{local}secret_env = {{ GH_TOKEN = \"provider-openai\" }}\n"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("secret_env.GH_TOKEN \"provider-openai\" must start with \"mcp-\""), "{error}");
        let remote = "[mcp.servers.search]\nurl = \"https://mcp.example/\"\nbearer_secret = \"vault-master\"\n";
        assert!(AgentConfig::parse(remote).unwrap_err().to_string().contains("bearer_secret \"vault-master\""));
    }

    #[test]
    fn routes_resolve_by_hint() {
        let config = AgentConfig::parse("[routes.fast]\nprovider = \"local\"\nmodel = \"tiny\"\n").unwrap();
        assert_eq!(config.route(Some("fast")).unwrap().model, "tiny");
        assert!(config.route(Some("smart")).unwrap_err().to_string().contains("fast"));
    }
}

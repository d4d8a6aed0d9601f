//! The `[component.vault]` section of `/etc/clawos/security-agent.toml`:
//! where the vault lives and who may use which secrets. Every key is
//! optional; the defaults are the image's layout and policy.

use std::path::PathBuf;

use serde::Deserialize;
use vault::{AccessPolicy, Grant, KeyringScope, SecretScope, VaultCapability, VaultConfig};

/// Caller identity of the operator (`clawctl` as an operator UID), as it
/// appears in grants and in the vault's audit log.
pub const OPERATOR_IDENTITY: &str = clawos_ipc::component::OPERATOR;

/// Secret IDs the agent loop may read by default: LLM provider keys.
pub const PROVIDER_SECRET_PREFIX: &str = "provider-";
/// Secret IDs the WASM daemon may read by default: credentials it injects
/// into tools' HTTP requests (never handed to the tools themselves).
pub const TOOL_SECRET_PREFIX: &str = "tool-";
/// Secret IDs fs-engine may read by default: the API key of an embeddings
/// service (`[component.embedder]` of fs-engine.toml).
pub const EMBEDDER_SECRET_PREFIX: &str = "embedder-";
/// Secret IDs the agent loop may read by default besides providers' keys:
/// the bearer tokens of remote MCP servers (`[mcp.servers.<name>]
/// bearer_secret`, specs/mcp/README.md).
pub const MCP_SECRET_PREFIX: &str = "mcp-";

/// Which keyring caches the unsealed keys.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum KeyringChoice {
    /// The service user's keyring: survives a service restart, not a reboot.
    User,
    /// The daemon's process keyring: gone when it exits (tests).
    Process,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ComponentSection {
    #[serde(default)]
    vault: VaultSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct VaultSection {
    vault_dir: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    pcrs: Option<Vec<u8>>,
    keyring: Option<KeyringChoice>,
    /// Replaces [`default_component_grants`]; the operator's full access
    /// is always added.
    grants: Option<Vec<Grant>>,
}

/// What the vault service runs with.
#[derive(Debug, Clone)]
pub struct VaultSettings {
    /// Where the vault is, how to reach the TPM, which PCRs, which keyring.
    pub config: VaultConfig,
    /// Who may use which secrets.
    pub policy: AccessPolicy,
}

/// The component grants used when the config names none: the agent loop
/// reads provider keys, the WASM daemon reads tool credentials, fs-engine
/// reads embeddings service keys. Nothing
/// else is granted to any component.
pub fn default_component_grants() -> Vec<Grant> {
    let read_prefix = |identity: &str, prefix: &str| Grant {
        identity: identity.to_owned(),
        capability: VaultCapability::SecretRead,
        secrets: SecretScope::Prefix(prefix.to_owned()),
    };
    vec![
        read_prefix("agent-loop", PROVIDER_SECRET_PREFIX),
        read_prefix("agent-loop", MCP_SECRET_PREFIX),
        read_prefix("wasm-daemon", TOOL_SECRET_PREFIX),
        read_prefix("fs-engine", EMBEDDER_SECRET_PREFIX),
    ]
}

/// Every capability on every secret for the operator: it is root on the
/// box, which can reach the TPM and the keyring anyway, and it is the only
/// one who can set secrets. That includes `secret-read-history`, which no
/// component default has: a component reads a secret's current version
/// only, so a rotation cuts off one that held the old value
/// (specs/vault/README.md, "Who may do what").
fn operator_grants() -> impl Iterator<Item = Grant> {
    VaultCapability::ALL.into_iter().map(|capability| Grant {
        identity: OPERATOR_IDENTITY.to_owned(),
        capability,
        secrets: SecretScope::All,
    })
}

impl VaultSettings {
    /// Reads the settings from the component's `[component]` table.
    pub fn from_component_table(table: &toml::Table) -> Result<Self, String> {
        let section: ComponentSection = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|error| format!("invalid [component.vault] settings: {error}"))?;
        let vault = section.vault;
        let mut config = VaultConfig::new();
        if let Some(dir) = vault.vault_dir {
            config.vault_dir = dir;
        }
        if let Some(path) = vault.audit_log {
            config.audit_log = path;
        }
        if let Some(pcrs) = vault.pcrs {
            if pcrs.is_empty() || pcrs.iter().any(|pcr| *pcr > vault::config::MAX_PCR) {
                return Err(format!(
                    "[component.vault] pcrs must be a non-empty list of PCR indices 0-{}",
                    vault::config::MAX_PCR
                ));
            }
            config.pcrs = pcrs;
        }
        config.keyring = match vault.keyring.unwrap_or(KeyringChoice::User) {
            KeyringChoice::User => KeyringScope::User,
            KeyringChoice::Process => KeyringScope::Process,
        };
        let grants = vault.grants.unwrap_or_else(default_component_grants);
        Ok(VaultSettings { config, policy: AccessPolicy { grants: operator_grants().chain(grants).collect() } })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vault::Caller;

    fn parse(text: &str) -> Result<VaultSettings, String> {
        VaultSettings::from_component_table(&text.parse::<toml::Table>().unwrap())
    }

    #[test]
    fn defaults_are_the_image_layout_and_policy() {
        let settings = parse("").unwrap();
        assert_eq!(settings.config.vault_dir, PathBuf::from("/clawfs/vault"));
        // Where the unit's LogsDirectory=clawos/vault lets the service write.
        assert_eq!(settings.config.audit_log, PathBuf::from("/var/log/clawos/vault/audit.log"));
        assert_eq!(settings.config.keyring, KeyringScope::User);
        let policy = &settings.policy;
        let operator = Caller::new(OPERATOR_IDENTITY);
        assert!(policy.allows(&operator, VaultCapability::VaultAdmin, None));
        assert!(policy.allows(&operator, VaultCapability::SecretWrite, Some("anything")));
        let agent_loop = Caller::new("agent-loop");
        assert!(policy.allows(&agent_loop, VaultCapability::SecretRead, Some("provider-openai")));
        assert!(policy.allows(&agent_loop, VaultCapability::SecretRead, Some("mcp-search")));
        assert!(!policy.allows(&agent_loop, VaultCapability::SecretRead, Some("tool-github")));
        assert!(!policy.allows(&Caller::new("wasm-daemon"), VaultCapability::SecretRead, Some("mcp-search")));
        assert!(!policy.allows(&agent_loop, VaultCapability::SecretWrite, Some("provider-openai")));
        assert!(policy.allows(&operator, VaultCapability::SecretReadHistory, Some("tool-github")));
        let wasm = Caller::new("wasm-daemon");
        assert!(policy.allows(&wasm, VaultCapability::SecretRead, Some("tool-github")));
        // Components read current versions only.
        for component in ["agent-loop", "wasm-daemon", "fs-engine"] {
            assert!(
                !policy.allows(&Caller::new(component), VaultCapability::SecretReadHistory, Some("tool-github")),
                "{component}"
            );
        }
        assert!(!policy.allows(&wasm, VaultCapability::SecretList, None));
        let fs_engine = Caller::new("fs-engine");
        assert!(policy.allows(&fs_engine, VaultCapability::SecretRead, Some("embedder-openai")));
        assert!(!policy.allows(&fs_engine, VaultCapability::SecretRead, Some("provider-openai")));
        // Requests relayed by the router arrive as the router: never granted.
        assert!(!policy.allows(&Caller::new("router"), VaultCapability::SecretRead, Some("provider-openai")));
    }

    #[test]
    fn configured_grants_replace_the_component_defaults_only() {
        let settings = parse(
            r#"
            [vault]
            vault_dir = "/tmp/v"
            keyring = "process"
            pcrs = [4]
            grants = [{ identity = "scheduler", capability = "secret-read", secrets = { only = ["cron-token"] } }]
            "#,
        )
        .unwrap();
        assert_eq!(settings.config.vault_dir, PathBuf::from("/tmp/v"));
        assert_eq!(settings.config.keyring, KeyringScope::Process);
        assert_eq!(settings.config.pcrs, vec![4]);
        let policy = &settings.policy;
        assert!(policy.allows(&Caller::new("scheduler"), VaultCapability::SecretRead, Some("cron-token")));
        assert!(!policy.allows(&Caller::new("agent-loop"), VaultCapability::SecretRead, Some("provider-x")));
        assert!(policy.allows(&Caller::new(OPERATOR_IDENTITY), VaultCapability::SecretRead, Some("cron-token")));
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(parse("[vault]\npcrs = []").unwrap_err().contains("pcrs"));
        assert!(parse("[vault]\npcrs = [24]").unwrap_err().contains("pcrs"));
        assert!(parse("[vault]\ntypo = 1").is_err());
        assert!(parse("[vault]\nkeyring = \"session\"").is_err());
        assert!(parse("[vault]\ngrants = [{ identity = \"x\", capability = \"root\", secrets = \"all\" }]").is_err());
    }
}

//! Credentials for tools' HTTP requests, taken from the vault at the moment
//! of each request (`secret_get` to security-agent, which lets this daemon
//! read `tool-*` secrets only), so they are never stored here and never
//! given to a tool: the host adds them after the grant check and redacts
//! them from the response.
//!
//! Which secret goes to which host is the operator's file
//! `/clawfs/tools/credentials.toml` (names only, no values), read at every
//! request so an edit takes effect without a restart:
//!
//! ```toml
//! [[credential]]
//! host = "api.example.com"          # as in network:outbound:<host>
//! header = "authorization"
//! secret = "tool-example-token"     # vault secret id
//! format = "Bearer {secret}"        # optional, default "{secret}"
//! tools = ["web-fetch"]             # optional, default: any tool granted the host
//! ```
//!
//! Fail closed: an unreadable file, an invalid entry or a vault error fails
//! the request instead of sending it without its credential.

use std::path::PathBuf;
use std::time::Duration;

use clawos_ipc::ComponentId;
use clawos_toolhost::{authority_matches, Credential, CredentialError, CredentialProvider};
use serde::Deserialize;

/// How long one `secret_get` may take.
const VAULT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialsFile {
    #[serde(default)]
    credential: Vec<CredentialRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialRule {
    host: String,
    header: String,
    secret: String,
    #[serde(default = "plain_format")]
    format: String,
    #[serde(default)]
    tools: Vec<String>,
}

fn plain_format() -> String {
    "{secret}".into()
}

impl CredentialRule {
    fn applies(&self, tool_id: &str, authority: &str) -> bool {
        authority_matches(&self.host, authority) && (self.tools.is_empty() || self.tools.iter().any(|t| t == tool_id))
    }

    fn check(&self) -> Result<(), String> {
        let header_ok = !self.header.is_empty() && self.header.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !header_ok {
            return Err(format!("credential for {}: header {:?} is not a header name", self.host, self.header));
        }
        if self.format.matches("{secret}").count() != 1 {
            return Err(format!("credential for {}: format must contain {{secret}} once", self.host));
        }
        Ok(())
    }
}

/// The vault-backed [`CredentialProvider`].
pub struct VaultCredentials {
    rules_path: PathBuf,
    runtime: tokio::runtime::Handle,
}

impl VaultCredentials {
    /// `runtime` runs the IPC call; `credentials_for` is called from tool
    /// threads (tokio's blocking pool), never from an async task.
    pub fn new(rules_path: PathBuf, runtime: tokio::runtime::Handle) -> VaultCredentials {
        VaultCredentials { rules_path, runtime }
    }

    fn rules(&self) -> Result<Vec<CredentialRule>, CredentialError> {
        let invalid = |reason: String| CredentialError::Rules { path: self.rules_path.clone(), reason };
        let text = match std::fs::read_to_string(&self.rules_path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(invalid(e.to_string())),
        };
        let file: CredentialsFile = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        file.credential.iter().try_for_each(CredentialRule::check).map_err(invalid)?;
        Ok(file.credential)
    }

    fn secret(&self, secret_id: &str) -> Result<String, CredentialError> {
        // A header value must be text.
        clawos_runtime::peers::vault_secret(&self.runtime, ComponentId::WasmDaemon, secret_id, VAULT_TIMEOUT).map_err(|message| {
            // The vault client's message names the secret already.
            let reason = message.strip_prefix(&format!("vault secret {secret_id}: ")).unwrap_or(&message).to_owned();
            CredentialError::Vault { secret_id: secret_id.to_owned(), reason }
        })
    }
}

impl CredentialProvider for VaultCredentials {
    fn credentials_for(&self, tool_id: &str, authority: &str) -> Result<Vec<Credential>, CredentialError> {
        let mut credentials = Vec::new();
        for rule in self.rules()?.into_iter().filter(|rule| rule.applies(tool_id, authority)) {
            let secret = self.secret(&rule.secret)?;
            tracing::info!(tool = tool_id, authority, secret = rule.secret, "credential injected");
            credentials.push(Credential { header: rule.header, value: rule.format.replace("{secret}", &secret), secret });
        }
        Ok(credentials)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(rules: &str) -> (tempfile::TempDir, VaultCredentials, tokio::runtime::Runtime) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("credentials.toml"), rules).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let provider = VaultCredentials::new(dir.path().join("credentials.toml"), runtime.handle().clone());
        (dir, provider, runtime)
    }

    #[test]
    fn rules_match_host_and_tool() {
        let (_dir, provider, _runtime) = provider(
            "[[credential]]\nhost = \"api.example.com\"\nheader = \"authorization\"\nsecret = \"tool-a\"\nformat = \"Bearer {secret}\"\ntools = [\"web-fetch\"]\n",
        );
        let rules = provider.rules().unwrap();
        assert!(rules[0].applies("web-fetch", "api.example.com:80"));
        assert!(!rules[0].applies("other-tool", "api.example.com"));
        assert!(!rules[0].applies("web-fetch", "api.example.com:8080"));
        // No rule for the host: no credential and no vault call.
        assert!(provider.credentials_for("web-fetch", "elsewhere.example.com").unwrap().is_empty());
    }

    /// A rule without its header and secret.
    const INCOMPLETE_RULE: &str = "[[credential]]\nhost = \"h\"\n";
    /// A header name with a space in it.
    const BAD_HEADER: &str = "[[credential]]\nhost = \"h\"\nheader = \"a b\"\nsecret = \"tool-a\"\n";
    /// A format that never puts the secret in.
    const FORMAT_WITHOUT_SECRET: &str = "[[credential]]\nhost = \"h\"\nheader = \"x\"\nsecret = \"tool-a\"\nformat = \"Bearer token\"\n";

    #[test]
    fn a_bad_file_fails_the_request_instead_of_sending_it_bare() {
        for bad in [INCOMPLETE_RULE, BAD_HEADER, FORMAT_WITHOUT_SECRET] {
            let (_dir, provider, _runtime) = provider(bad);
            let error = provider.credentials_for("t", "h").unwrap_err();
            assert!(matches!(error, CredentialError::Rules { .. }), "{bad}: {error:?}");
        }
    }

    #[test]
    fn without_a_vault_a_matching_rule_fails_closed() {
        let (_dir, provider, _runtime) = provider("[[credential]]\nhost = \"h\"\nheader = \"x-key\"\nsecret = \"tool-a\"\n");
        // No security-agent listens in the test: the request must not go out.
        let error = std::thread::scope(|s| s.spawn(|| provider.credentials_for("t", "h")).join().unwrap()).unwrap_err();
        assert!(matches!(&error, CredentialError::Vault { secret_id, .. } if secret_id == "tool-a"), "{error:?}");
        assert!(error.to_string().starts_with("vault secret tool-a: ") && !error.to_string().contains("tool-a: vault secret"), "{error}");
    }
}

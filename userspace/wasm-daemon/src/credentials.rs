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
//! host = "api.example.com"          # exact; "host:port" for another port
//! scheme = "https"                  # optional, default "https"
//! header = "authorization"
//! secret = "tool-example-token"     # vault secret id
//! format = "Bearer {secret}"        # optional, default "{secret}"
//! tools = ["web-fetch"]             # optional, default: any tool granted the host
//! ```
//!
//! A rule names one origin exactly (specs/toolhost/README.md, "HTTP"):
//! its scheme, its host and its port (the scheme's default unless `host`
//! says `host:port`). Over `https` the tool host sends the secret only on a
//! connection whose certificate verified for that host; `scheme = "http"`
//! puts it on the wire in clear text and has to be written out, so no
//! rule does that by default, and no `http://` URL, on whatever port, gets
//! an `https` rule's secret.
//!
//! Fail closed: an unreadable file, an invalid entry or a vault error fails
//! the request instead of sending it without its credential.

use std::path::PathBuf;
use std::time::Duration;

use clawos_ipc::ComponentId;
use clawos_toolhost::{Credential, CredentialError, CredentialProvider, Origin, Scheme};
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
    #[serde(default)]
    scheme: RuleScheme,
    header: String,
    secret: String,
    #[serde(default = "plain_format")]
    format: String,
    #[serde(default)]
    tools: Vec<String>,
}

/// The scheme a rule injects over.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RuleScheme {
    #[default]
    Https,
    Http,
}

impl From<RuleScheme> for Scheme {
    fn from(scheme: RuleScheme) -> Scheme {
        match scheme {
            RuleScheme::Https => Scheme::Https,
            RuleScheme::Http => Scheme::Http,
        }
    }
}

fn plain_format() -> String {
    "{secret}".into()
}

impl CredentialRule {
    /// The one origin the rule's secret goes to.
    fn origin(&self) -> Result<Origin, String> {
        let scheme = Scheme::from(self.scheme);
        let url = format!("{}://{}/", scheme.as_str(), self.host);
        match Origin::of_url(&url) {
            // Only a host or host:port, nothing a URL would read around it.
            Ok(origin) if [origin.host.clone(), origin.authority()].contains(&self.host.to_ascii_lowercase()) => {
                Ok(origin)
            }
            Ok(_) | Err(_) => Err(format!("credential host {:?} is not a host name or host:port", self.host)),
        }
    }

    fn applies(&self, tool_id: &str, origin: &Origin) -> bool {
        self.origin().is_ok_and(|own| own == *origin)
            && (self.tools.is_empty() || self.tools.iter().any(|t| t == tool_id))
    }

    fn check(&self) -> Result<(), String> {
        self.origin()?;
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
        clawos_runtime::peers::vault_secret(&self.runtime, ComponentId::WasmDaemon, secret_id, VAULT_TIMEOUT).map_err(
            |message| {
                // The vault client's message names the secret already.
                let reason =
                    message.strip_prefix(&format!("vault secret {secret_id}: ")).unwrap_or(&message).to_owned();
                CredentialError::Vault { secret_id: secret_id.to_owned(), reason }
            },
        )
    }
}

impl CredentialProvider for VaultCredentials {
    fn credentials_for(&self, tool_id: &str, origin: &Origin) -> Result<Vec<Credential>, CredentialError> {
        let mut credentials = Vec::new();
        for rule in self.rules()?.into_iter().filter(|rule| rule.applies(tool_id, origin)) {
            let secret = self.secret(&rule.secret)?;
            tracing::info!(
                tool = tool_id,
                scheme = origin.scheme.as_str(),
                authority = origin.authority(),
                secret = rule.secret,
                "credential injected"
            );
            credentials.push(Credential {
                header: rule.header,
                value: rule.format.replace("{secret}", &secret),
                secret,
            });
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

    fn origin(url: &str) -> Origin {
        Origin::of_url(url).unwrap()
    }

    /// The attack: `http://api.example.com:443/` (or `:80`) would get the
    /// secret of a rule for api.example.com in clear text.
    #[test]
    fn a_rule_injects_only_over_https_on_its_own_port() {
        let (_dir, provider, _runtime) = provider(
            "[[credential]]\nhost = \"api.example.com\"\nheader = \"authorization\"\nsecret = \"tool-a\"\nformat = \"Bearer {secret}\"\ntools = [\"web-fetch\"]\n",
        );
        let rules = provider.rules().unwrap();
        assert!(rules[0].applies("web-fetch", &origin("https://api.example.com/v1")));
        assert!(rules[0].applies("web-fetch", &origin("https://API.example.com:443/")));
        for elsewhere in [
            "http://api.example.com:443/",
            "http://api.example.com/",
            "https://api.example.com:8443/",
            "https://evil.api.example.com/",
        ] {
            assert!(!rules[0].applies("web-fetch", &origin(elsewhere)), "{elsewhere}");
        }
        assert!(!rules[0].applies("other-tool", &origin("https://api.example.com/")));
        // No rule for the origin: no credential and no vault call.
        assert!(provider.credentials_for("web-fetch", &origin("http://api.example.com:443/")).unwrap().is_empty());
    }

    #[test]
    fn plain_http_and_other_ports_are_written_out() {
        let (_dir, provider, _runtime) = provider(
            "[[credential]]\nhost = \"10.0.2.2:8080\"\nscheme = \"http\"\nheader = \"x-key\"\nsecret = \"tool-a\"\n",
        );
        let rules = provider.rules().unwrap();
        assert!(rules[0].applies("any", &origin("http://10.0.2.2:8080/")));
        assert!(!rules[0].applies("any", &origin("https://10.0.2.2:8080/")));
        assert!(!rules[0].applies("any", &origin("http://10.0.2.2/")));
    }

    /// A rule without its header and secret.
    const INCOMPLETE_RULE: &str = "[[credential]]\nhost = \"h\"\n";
    /// A header name with a space in it.
    const BAD_HEADER: &str = "[[credential]]\nhost = \"h\"\nheader = \"a b\"\nsecret = \"tool-a\"\n";
    /// A scheme that is neither.
    const BAD_SCHEME: &str = "[[credential]]\nhost = \"h\"\nscheme = \"ftp\"\nheader = \"x\"\nsecret = \"tool-a\"\n";
    /// A host that is a URL.
    const BAD_HOST: &str = "[[credential]]\nhost = \"https://h/\"\nheader = \"x\"\nsecret = \"tool-a\"\n";
    /// A format that never puts the secret in.
    const FORMAT_WITHOUT_SECRET: &str =
        "[[credential]]\nhost = \"h\"\nheader = \"x\"\nsecret = \"tool-a\"\nformat = \"Bearer token\"\n";

    #[test]
    fn a_bad_file_fails_the_request_instead_of_sending_it_bare() {
        for bad in [INCOMPLETE_RULE, BAD_HEADER, BAD_SCHEME, BAD_HOST, FORMAT_WITHOUT_SECRET] {
            let (_dir, provider, _runtime) = provider(bad);
            let error = provider.credentials_for("t", &origin("https://h/")).unwrap_err();
            assert!(matches!(error, CredentialError::Rules { .. }), "{bad}: {error:?}");
        }
    }

    #[test]
    fn without_a_vault_a_matching_rule_fails_closed() {
        let (_dir, provider, _runtime) =
            provider("[[credential]]\nhost = \"h\"\nheader = \"x-key\"\nsecret = \"tool-a\"\n");
        // No security-agent listens in the test: the request must not go out.
        let error =
            std::thread::scope(|s| s.spawn(|| provider.credentials_for("t", &origin("https://h/"))).join().unwrap())
                .unwrap_err();
        assert!(matches!(&error, CredentialError::Vault { secret_id, .. } if secret_id == "tool-a"), "{error:?}");
        assert!(
            error.to_string().starts_with("vault secret tool-a: ")
                && !error.to_string().contains("tool-a: vault secret"),
            "{error}"
        );
    }
}

//! Who may do what with which secret. The vault only evaluates the policy;
//! the service that hosts it authenticates callers (peer credentials, unit
//! name) and fills the [`AccessPolicy`]. Anything not granted is denied.

use serde::{Deserialize, Serialize};

/// What an operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VaultCapability {
    /// Read a secret's current value.
    SecretRead,
    /// Read a secret's earlier values too (with [`VaultCapability::SecretRead`]):
    /// without it a rotation cuts off every reader that held the old value
    /// (specs/vault/README.md, "Who may do what").
    SecretReadHistory,
    /// Create, update or remove a secret.
    SecretWrite,
    /// List secrets and their version history (names and dates, no values).
    SecretList,
    /// Rotate, reseal, and build the system manifest.
    VaultAdmin,
}

impl VaultCapability {
    /// Every capability (the operator's grant).
    pub const ALL: [VaultCapability; 5] = [
        VaultCapability::SecretRead,
        VaultCapability::SecretReadHistory,
        VaultCapability::SecretWrite,
        VaultCapability::SecretList,
        VaultCapability::VaultAdmin,
    ];

    /// The name used in policies and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            VaultCapability::SecretRead => "secret-read",
            VaultCapability::SecretReadHistory => "secret-read-history",
            VaultCapability::SecretWrite => "secret-write",
            VaultCapability::SecretList => "secret-list",
            VaultCapability::VaultAdmin => "vault-admin",
        }
    }
}

/// The authenticated identity of whoever asks: a component (e.g.
/// `security-agent`), a tool, or `clawctl` run by an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// Identity as established by the service, never as claimed by the caller.
    pub identity: String,
}

impl Caller {
    /// A caller with the given authenticated identity.
    pub fn new(identity: impl Into<String>) -> Self {
        Caller { identity: identity.into() }
    }
}

/// Which secrets a grant covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum SecretScope {
    /// Every secret.
    All,
    /// Exactly these secret IDs.
    Only(Vec<String>),
    /// Secret IDs starting with this prefix.
    Prefix(String),
}

impl SecretScope {
    fn covers(&self, secret_id: Option<&str>) -> bool {
        match (self, secret_id) {
            (SecretScope::All, _) => true,
            // Vault-wide operations need a grant over all secrets.
            (_, None) => false,
            (SecretScope::Only(ids), Some(id)) => ids.iter().any(|allowed| allowed == id),
            (SecretScope::Prefix(prefix), Some(id)) => id.starts_with(prefix.as_str()),
        }
    }
}

/// One permission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// The caller identity it applies to.
    pub identity: String,
    /// What it allows.
    pub capability: VaultCapability,
    /// On which secrets.
    pub secrets: SecretScope,
}

/// Deny-by-default set of grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessPolicy {
    /// The grants; order does not matter.
    pub grants: Vec<Grant>,
}

impl AccessPolicy {
    /// A policy that grants nothing.
    pub fn deny_all() -> Self {
        AccessPolicy::default()
    }

    /// Adds a grant.
    pub fn grant(mut self, identity: &str, capability: VaultCapability, secrets: SecretScope) -> Self {
        self.grants.push(Grant { identity: identity.to_owned(), capability, secrets });
        self
    }

    /// Whether `caller` may use `capability` on `secret_id` (`None`: the whole vault).
    pub fn allows(&self, caller: &Caller, capability: VaultCapability, secret_id: Option<&str>) -> bool {
        self.grants.iter().any(|grant| {
            grant.identity == caller.identity && grant.capability == capability && grant.secrets.covers(secret_id)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_by_default_and_scoped_grants() {
        let agent = Caller::new("agent");
        let policy = AccessPolicy::deny_all()
            .grant("agent", VaultCapability::SecretRead, SecretScope::Prefix("openai-".into()))
            .grant("clawctl", VaultCapability::VaultAdmin, SecretScope::All);
        assert!(policy.allows(&agent, VaultCapability::SecretRead, Some("openai-key")));
        assert!(!policy.allows(&agent, VaultCapability::SecretRead, Some("github-pat")));
        assert!(!policy.allows(&agent, VaultCapability::SecretWrite, Some("openai-key")));
        assert!(!policy.allows(&agent, VaultCapability::SecretRead, None));
        assert!(policy.allows(&Caller::new("clawctl"), VaultCapability::VaultAdmin, None));
        assert!(!AccessPolicy::deny_all().allows(&agent, VaultCapability::SecretList, None));
    }
}

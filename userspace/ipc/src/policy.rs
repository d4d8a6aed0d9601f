//! Who may connect (peer UID -> principal) and who may call what (the ACL).
//! Both come from one TOML file, by default [`DEFAULT_POLICY_PATH`]; its
//! format is documented in `specs/ipc/README.md` and shipped as
//! `rootfs-overlay/etc/clawos/ipc-acl.toml`.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::component::{ComponentId, Principal, CONSOLE_USER, SYSTEM_USER_PREFIX};

/// Where daemons read the policy from.
pub const DEFAULT_POLICY_PATH: &str = "/etc/clawos/ipc-acl.toml";
/// Matches any sender, recipient or method in a rule.
pub const WILDCARD: &str = "*";

/// Why a policy file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read IPC policy {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid policy TOML.
    #[error("invalid IPC policy {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The TOML error.
        #[source]
        source: toml::de::Error,
    },
    /// A rule or mapping names something that does not exist.
    #[error("invalid IPC policy {path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    identity: IdentityFile,
    #[serde(default)]
    allow: Vec<RuleFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityFile {
    #[serde(default = "default_operator_uids")]
    operator_uids: Vec<u32>,
    #[serde(default)]
    uids: HashMap<String, String>,
}

impl Default for IdentityFile {
    fn default() -> Self {
        IdentityFile { operator_uids: default_operator_uids(), uids: HashMap::new() }
    }
}

fn default_operator_uids() -> Vec<u32> {
    vec![0]
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    senders: Vec<String>,
    recipients: Vec<String>,
    methods: Vec<String>,
}

/// `*` or one specific value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern<T> {
    Any,
    Exactly(T),
}

impl<T: PartialEq> Pattern<T> {
    fn matches(&self, value: &T) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Exactly(expected) => expected == value,
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    senders: Vec<Pattern<Principal>>,
    recipients: Vec<Pattern<ComponentId>>,
    methods: Vec<Pattern<String>>,
}

/// The loaded policy. Deny by default: a request is allowed only if a rule
/// matches its sender, recipient and method; `hello` is always allowed
/// because it precedes any request.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    operator_uids: Vec<u32>,
    uid_map: HashMap<u32, ComponentId>,
    rules: Vec<Rule>,
}

impl AccessPolicy {
    /// Reads and validates a policy file.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PolicyError::Read { path: path.display().to_string(), source })?;
        AccessPolicy::parse(&text, &path.display().to_string())
    }

    /// Parses policy TOML; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, PolicyError> {
        let file: PolicyFile =
            toml::from_str(text).map_err(|source| PolicyError::Parse { path: origin.to_owned(), source })?;
        let invalid = |reason: String| PolicyError::Invalid { path: origin.to_owned(), reason };
        let mut uid_map = HashMap::new();
        for (uid, component) in file.identity.uids {
            let uid: u32 = uid.parse().map_err(|_| invalid(format!("identity.uids key `{uid}` is not a UID")))?;
            let component = component.parse().map_err(|error| invalid(format!("identity.uids.{uid}: {error}")))?;
            uid_map.insert(uid, component);
        }
        let mut rules = Vec::with_capacity(file.allow.len());
        for (index, rule) in file.allow.into_iter().enumerate() {
            let context = |field: &str| format!("allow[{index}].{field}");
            if rule.senders.is_empty() || rule.recipients.is_empty() || rule.methods.is_empty() {
                return Err(invalid(format!("allow[{index}] needs non-empty senders, recipients and methods")));
            }
            rules.push(Rule {
                senders: parse_patterns(&rule.senders, |name| name.parse())
                    .map_err(|error| invalid(format!("{}: {error}", context("senders"))))?,
                recipients: parse_patterns(&rule.recipients, |name| name.parse())
                    .map_err(|error| invalid(format!("{}: {error}", context("recipients"))))?,
                methods: parse_patterns(&rule.methods, |name| Ok::<_, std::convert::Infallible>(name.to_owned()))
                    .map_err(|error| invalid(format!("{}: {error}", context("methods"))))?,
            });
        }
        Ok(AccessPolicy { operator_uids: file.identity.operator_uids, uid_map, rules })
    }

    /// The principal a peer UID authenticates as, if any: an explicit
    /// `identity.uids` entry, else an operator UID, else the system user
    /// owning that UID: `clawos-console` is the console, `clawos-<component>`
    /// a component.
    pub fn principal_for_uid(&self, uid: u32) -> Option<Principal> {
        if let Some(component) = self.uid_map.get(&uid) {
            return Some(Principal::Component(*component));
        }
        if self.operator_uids.contains(&uid) {
            return Some(Principal::Operator);
        }
        let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok().flatten()?;
        if user.name == CONSOLE_USER {
            return Some(Principal::Console);
        }
        user.name.strip_prefix(SYSTEM_USER_PREFIX)?.parse().ok().map(Principal::Component)
    }

    /// Whether `sender` may call `method` on `recipient`.
    pub fn allows(&self, sender: Principal, recipient: ComponentId, method: &str) -> bool {
        method == crate::message::HELLO
            || self.rules.iter().any(|rule| {
                rule.senders.iter().any(|pattern| pattern.matches(&sender))
                    && rule.recipients.iter().any(|pattern| pattern.matches(&recipient))
                    && rule.methods.iter().any(|pattern| match pattern {
                        Pattern::Any => true,
                        Pattern::Exactly(allowed) => allowed == method,
                    })
            })
    }

    /// The rules that allow a method nobody serves: for each rule, every
    /// named method on every named recipient (or, for `*` recipients, on at
    /// least one component) must be one `served` says exists. Such a rule
    /// is dead at best and a grant waiting for a future method at worst, so
    /// components refuse a policy that has one (`clawos-runtime` checks it
    /// against `clawos-api` at start). Returns one line per dead grant.
    pub fn unserved_grants(&self, served: impl Fn(ComponentId, &str) -> bool) -> Vec<String> {
        let mut dead = Vec::new();
        for (index, rule) in self.rules.iter().enumerate() {
            for method in rule.methods.iter().filter_map(|pattern| match pattern {
                Pattern::Any => None,
                Pattern::Exactly(method) => Some(method),
            }) {
                for recipient in &rule.recipients {
                    let ok = match recipient {
                        Pattern::Any => ComponentId::ALL.into_iter().any(|component| served(component, method)),
                        Pattern::Exactly(component) => served(*component, method),
                    };
                    if !ok {
                        let on = match recipient {
                            Pattern::Any => "any component".to_owned(),
                            Pattern::Exactly(component) => format!("`{component}`"),
                        };
                        dead.push(format!("[[allow]] rule {}: `{method}` is not a method of {on}", index + 1));
                    }
                }
            }
        }
        dead
    }
}

fn parse_patterns<T, E: std::fmt::Display>(
    names: &[String],
    parse: impl Fn(&str) -> Result<T, E>,
) -> Result<Vec<Pattern<T>>, String> {
    names
        .iter()
        .map(|name| {
            if name == WILDCARD {
                Ok(Pattern::Any)
            } else {
                parse(name).map(Pattern::Exactly).map_err(|error| error.to_string())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
        [identity]
        operator_uids = [0]
        uids = { "61001" = "router" }

        [[allow]]
        senders = ["operator"]
        recipients = ["*"]
        methods = ["*"]

        [[allow]]
        senders = ["agent-loop"]
        recipients = ["wasm-daemon"]
        methods = ["execute_tool"]
    "#;

    #[test]
    fn rules_are_deny_by_default() {
        let policy = AccessPolicy::parse(POLICY, "test").unwrap();
        let agent_loop = Principal::Component(ComponentId::AgentLoop);
        assert!(policy.allows(Principal::Operator, ComponentId::Router, "anything"));
        assert!(policy.allows(agent_loop, ComponentId::WasmDaemon, "execute_tool"));
        assert!(!policy.allows(agent_loop, ComponentId::WasmDaemon, "get_metrics"));
        assert!(!policy.allows(agent_loop, ComponentId::FsEngine, "execute_tool"));
        assert!(policy.allows(agent_loop, ComponentId::FsEngine, "hello"));
    }

    #[test]
    fn uids_resolve_through_map_then_operator_list() {
        let policy = AccessPolicy::parse(POLICY, "test").unwrap();
        assert_eq!(policy.principal_for_uid(61001), Some(Principal::Component(ComponentId::Router)));
        assert_eq!(policy.principal_for_uid(0), Some(Principal::Operator));
        // A UID with no passwd entry and no mapping is nobody.
        assert_eq!(policy.principal_for_uid(3_999_999_999), None);
    }

    #[test]
    fn bad_policies_say_what_is_wrong() {
        let unknown_sender = "[[allow]]\nsenders=[\"kernel\"]\nrecipients=[\"*\"]\nmethods=[\"*\"]";
        let error = AccessPolicy::parse(unknown_sender, "p.toml").unwrap_err().to_string();
        assert!(error.contains("allow[0].senders") && error.contains("kernel"), "{error}");
        let bad_uid = "[identity]\nuids = { \"root\" = \"router\" }";
        assert!(AccessPolicy::parse(bad_uid, "p.toml").unwrap_err().to_string().contains("not a UID"));
        assert!(AccessPolicy::parse("[[allow]]\nsenders=[]\nrecipients=[\"*\"]\nmethods=[\"*\"]", "p").is_err());
        assert!(AccessPolicy::parse("typo = 1", "p").is_err());
    }
}

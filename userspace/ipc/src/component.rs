//! Who talks on the bus: the eight component IDs of the spec, plus the operator.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One of the eight ClawOS components (spec table "Component IDs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ComponentId {
    /// Central orchestration.
    AgentLoop,
    /// WASM runtime manager.
    WasmDaemon,
    /// Kernel monitoring.
    EbpfAgent,
    /// Policy enforcement.
    SecurityAgent,
    /// Filesystem operations.
    FsEngine,
    /// Metrics and logging.
    Observability,
    /// Message routing.
    Router,
    /// Task scheduling.
    Scheduler,
}

impl ComponentId {
    /// Every component, in the spec's order.
    pub const ALL: [ComponentId; 8] = [
        ComponentId::AgentLoop,
        ComponentId::WasmDaemon,
        ComponentId::EbpfAgent,
        ComponentId::SecurityAgent,
        ComponentId::FsEngine,
        ComponentId::Observability,
        ComponentId::Router,
        ComponentId::Scheduler,
    ];

    /// The wire name, e.g. `agent-loop`.
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentId::AgentLoop => "agent-loop",
            ComponentId::WasmDaemon => "wasm-daemon",
            ComponentId::EbpfAgent => "ebpf-agent",
            ComponentId::SecurityAgent => "security-agent",
            ComponentId::FsEngine => "fs-engine",
            ComponentId::Observability => "observability",
            ComponentId::Router => "router",
            ComponentId::Scheduler => "scheduler",
        }
    }

    /// The system user the component runs as (`clawos-<id>`, see sysusers.d/clawos.conf).
    pub fn system_user(self) -> String {
        format!("{SYSTEM_USER_PREFIX}{}", self.as_str())
    }
}

/// Prefix of the per-component system user names.
pub const SYSTEM_USER_PREFIX: &str = "clawos-";

/// A name that is not one of the spec's component IDs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown component id `{name}` (expected one of agent-loop, wasm-daemon, ebpf-agent, security-agent, fs-engine, observability, router, scheduler)")]
pub struct UnknownComponent {
    /// The rejected name.
    pub name: String,
}

impl FromStr for ComponentId {
    type Err = UnknownComponent;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ComponentId::ALL
            .into_iter()
            .find(|id| id.as_str() == name)
            .ok_or_else(|| UnknownComponent { name: name.to_owned() })
    }
}

impl fmt::Display for ComponentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A party that can appear as `sender` or `recipient`.
///
/// The spec only lists components. ClawOS adds `operator` (the `clawctl`
/// CLI, authenticated by an operator UID) and `console` (the web console,
/// authenticated by its system user) as documented extensions: see
/// `specs/ipc/README.md`, "Operator extension".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Principal {
    /// A component daemon.
    Component(ComponentId),
    /// The human operator (clawctl), wire name `operator`.
    Operator,
    /// The web console (specs/console/README.md), wire name `console`: the
    /// operator's pages, under a grant narrower than the operator's.
    Console,
}

/// Wire name of [`Principal::Operator`].
pub const OPERATOR: &str = "operator";

/// Wire name of [`Principal::Console`].
pub const CONSOLE: &str = "console";

/// The system user the console runs as (sysusers.d/clawos-console.conf).
pub const CONSOLE_USER: &str = "clawos-console";

impl Principal {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Principal::Component(id) => id.as_str(),
            Principal::Operator => OPERATOR,
            Principal::Console => CONSOLE,
        }
    }

    /// Whether this principal is a person's (the operator's, at a shell or
    /// through the console): what they write is authored as `operator`.
    pub fn acts_for_operator(self) -> bool {
        matches!(self, Principal::Operator | Principal::Console)
    }

    /// The component, if this principal is one.
    pub fn component(self) -> Option<ComponentId> {
        match self {
            Principal::Component(id) => Some(id),
            Principal::Operator | Principal::Console => None,
        }
    }
}

impl From<ComponentId> for Principal {
    fn from(id: ComponentId) -> Self {
        Principal::Component(id)
    }
}

impl FromStr for Principal {
    type Err = UnknownComponent;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            OPERATOR => Ok(Principal::Operator),
            CONSOLE => Ok(Principal::Console),
            _ => name.parse().map(Principal::Component),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Principal {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Principal {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_through_serde_and_from_str() {
        for id in ComponentId::ALL {
            let json = serde_json::to_string(&id).unwrap();
            assert_eq!(json, format!("\"{}\"", id.as_str()));
            assert_eq!(serde_json::from_str::<ComponentId>(&json).unwrap(), id);
            assert_eq!(id.as_str().parse::<Principal>().unwrap(), Principal::Component(id));
        }
        assert_eq!("operator".parse::<Principal>().unwrap(), Principal::Operator);
        assert_eq!("console".parse::<Principal>().unwrap(), Principal::Console);
        assert_eq!(serde_json::to_string(&Principal::Console).unwrap(), "\"console\"");
        assert!("kernel".parse::<Principal>().is_err());
        assert_eq!(ComponentId::FsEngine.system_user(), "clawos-fs-engine");
    }
}

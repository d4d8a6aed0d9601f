//! The services host functions call out to, which the embedding daemon
//! provides (specs/toolhost/README.md, "Host"): credentials for granted HTTP
//! requests (the vault), workspace memory search (fs-engine) and the `kv`
//! store (the agent's AgentFS), each with its error type, plus the stand-ins
//! a host without them uses.
//!
//! Providers never check grants: the host function has checked the call's
//! capabilities before it calls one. Nor do they decide what the guest sees
//! of a failure; `imports` does (an error result, or an aborted call).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// A header the host adds to a granted request on the tool's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// Header name, e.g. `authorization`.
    pub header: String,
    /// The full header value, e.g. `Bearer <secret>`.
    pub value: String,
    /// The secret inside `value`, redacted from responses on its own too.
    pub secret: String,
}

/// Why the credentials of a request could not be supplied. The request is
/// not sent: without its credential it would go out bare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The operator's rules of which secret goes to which host cannot be
    /// read, or one of them is invalid.
    #[error("credential rules {path}: {reason}")]
    Rules {
        /// The rules file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The vault did not hand out a secret a rule names: unreachable,
    /// sealed, refused by its policy, or not text.
    #[error("vault secret {secret_id}: {reason}")]
    Vault {
        /// The secret's id in the vault.
        secret_id: String,
        /// Why the vault did not give it.
        reason: String,
    },
}

/// Supplies credentials for outgoing requests, so the tool never holds them.
/// The daemon implements it over the vault service; the host adds the headers
/// after the tool's request has been checked against its grants, and redacts
/// every secret from the response.
pub trait CredentialProvider: Send + Sync {
    /// The credentials for `tool_id`'s request to `origin`. A credential
    /// belongs to one exact origin (scheme, host, port): for an `https`
    /// origin the host sends it only on a connection whose certificate
    /// verified for that host, so supplying one for an `http` origin puts
    /// it on the wire in clear text, which only an explicit rule may do.
    /// An error fails the request instead of sending it without them.
    fn credentials_for(&self, tool_id: &str, origin: &crate::Origin) -> Result<Vec<Credential>, CredentialError>;
}

/// The provider for a host without a vault: no credentials at all.
pub struct NoCredentials;

impl CredentialProvider for NoCredentials {
    fn credentials_for(&self, _tool_id: &str, _origin: &crate::Origin) -> Result<Vec<Credential>, CredentialError> {
        Ok(Vec::new())
    }
}

/// One search result handed to a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    pub workspace: String,
    pub path: String,
    pub heading: String,
    pub content: String,
    pub score: f32,
}

/// A search's results and which legs ran (`ran (N candidates)` or
/// `not run: <why>`), so a tool never mistakes keyword-only results for
/// hybrid ones.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryResults {
    pub hits: Vec<MemoryHit>,
    pub keyword_leg: String,
    pub vector_leg: String,
}

/// What a tool gets of ClawFS's hybrid search (the answer of fs-engine's
/// `memory_search`).
impl From<clawfs::SearchResponse> for MemoryResults {
    fn from(response: clawfs::SearchResponse) -> Self {
        MemoryResults {
            hits: response.results.into_iter().map(MemoryHit::from).collect(),
            keyword_leg: describe_leg(&response.keyword),
            vector_leg: describe_leg(&response.vector),
        }
    }
}

impl From<clawfs::SearchHit> for MemoryHit {
    fn from(clawfs::SearchHit { workspace, path, heading, content, score, .. }: clawfs::SearchHit) -> Self {
        MemoryHit { workspace, path, heading, content, score }
    }
}

/// A leg report as one line for the tool.
fn describe_leg(leg: &clawfs::LegReport) -> String {
    match leg {
        clawfs::LegReport::Ran { candidates } => format!("ran ({candidates} candidates)"),
        clawfs::LegReport::NotRun { reason } => format!("not run: {reason}"),
    }
}

/// Why a memory search returned no results. The tool gets the message as
/// its error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// The host has no memory service (no fs-engine to ask).
    #[error("no memory service is configured")]
    NotConfigured,
    /// The memory service could not be reached, did not answer in time, or
    /// refused the search (no such workspace, a bad query).
    #[error("memory search failed: {0}")]
    Failed(String),
}

/// Searches ClawFS workspace memory for tools granted `memory:search:<ws>`.
/// The daemon implements it over fs-engine's `memory_search`; the host has
/// already checked the workspace against the tool's grants.
pub trait MemorySearch: Send + Sync {
    fn search(&self, workspace: &str, query: &str, limit: u32) -> Result<MemoryResults, MemoryError>;
}

/// The provider for a host without fs-engine: every search fails.
pub struct NoMemory;

impl MemorySearch for NoMemory {
    fn search(&self, _workspace: &str, _query: &str, _limit: u32) -> Result<MemoryResults, MemoryError> {
        Err(MemoryError::NotConfigured)
    }
}

/// Why a `kv` operation failed. A full store is the tool's to handle; the
/// others mean the store itself is broken, and `get` and `delete` abort the
/// call on them rather than let a tool mistake a broken store for an empty
/// one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// The (agent, tool) pair already keeps its limit of keys; a new key
    /// would be one too many (an existing one may still be changed).
    #[error("the store already holds {max_keys} keys")]
    Full {
        /// The limit.
        max_keys: usize,
    },
    /// The agent's store cannot be opened: no such agent, or its
    /// database cannot be opened.
    #[error("the kv store of agent {agent:?} cannot be opened: {reason}")]
    Unavailable {
        /// The agent.
        agent: String,
        /// Why.
        reason: String,
    },
    /// Reading or writing the store failed.
    #[error("kv storage: {0}")]
    Storage(String),
    /// A stored value is not in the form the store writes.
    #[error("kv value for {key:?} is damaged: {reason}")]
    Corrupt {
        /// The tool's key.
        key: String,
        /// What is wrong with the value.
        reason: String,
    },
}

/// Where the `kv` interface keeps each (agent, tool) pair's keys. The
/// daemon keeps them in the agent's AgentFS `kv_store`, so they survive
/// restarts; the host enforces the size limits before calling it.
pub trait KvBackend: Send + Sync {
    fn get(&self, agent: &str, tool_id: &str, key: &str) -> Result<Option<Vec<u8>>, KvError>;
    /// Stores `value` unless that would make more than `max_keys` keys
    /// ([`KvError::Full`]).
    fn set(&self, agent: &str, tool_id: &str, key: &str, value: Vec<u8>, max_keys: usize) -> Result<(), KvError>;
    fn delete(&self, agent: &str, tool_id: &str, key: &str) -> Result<(), KvError>;
}

/// Each (agent, tool) pair's keys and values.
type KvEntries = HashMap<(String, String), HashMap<String, Vec<u8>>>;

/// Keys kept in memory for the host's lifetime (tests, benchmarks).
#[derive(Default)]
pub struct MemoryKv {
    entries: Mutex<KvEntries>,
}

impl KvBackend for MemoryKv {
    fn get(&self, agent: &str, tool_id: &str, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        let entries = self.entries.lock().expect("kv lock poisoned");
        Ok(entries.get(&(agent.to_owned(), tool_id.to_owned())).and_then(|m| m.get(key).cloned()))
    }

    fn set(&self, agent: &str, tool_id: &str, key: &str, value: Vec<u8>, max_keys: usize) -> Result<(), KvError> {
        let mut entries = self.entries.lock().expect("kv lock poisoned");
        let map = entries.entry((agent.to_owned(), tool_id.to_owned())).or_default();
        if map.len() >= max_keys && !map.contains_key(key) {
            return Err(KvError::Full { max_keys });
        }
        map.insert(key.to_owned(), value);
        Ok(())
    }

    fn delete(&self, agent: &str, tool_id: &str, key: &str) -> Result<(), KvError> {
        if let Some(map) =
            self.entries.lock().expect("kv lock poisoned").get_mut(&(agent.to_owned(), tool_id.to_owned()))
        {
            map.remove(key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leg_reports_read_as_one_line() {
        assert_eq!(describe_leg(&clawfs::LegReport::Ran { candidates: 12 }), "ran (12 candidates)");
        assert_eq!(describe_leg(&clawfs::LegReport::NotRun { reason: "no embedder".into() }), "not run: no embedder");
    }

    #[test]
    fn memory_kv_counts_keys_per_agent_and_tool() {
        let kv = MemoryKv::default();
        kv.set("agent", "tool", "a", vec![1], 1).unwrap();
        assert_eq!(kv.set("agent", "tool", "b", vec![2], 1), Err(KvError::Full { max_keys: 1 }));
        kv.set("agent", "tool", "a", vec![3], 1).unwrap();
        kv.set("agent", "other-tool", "b", vec![4], 1).unwrap();
        assert_eq!(kv.get("agent", "tool", "a").unwrap(), Some(vec![3]));
        kv.delete("agent", "tool", "a").unwrap();
        assert_eq!(kv.get("agent", "tool", "a").unwrap(), None);
        assert_eq!(KvError::Full { max_keys: 1024 }.to_string(), "the store already holds 1024 keys");
    }
}

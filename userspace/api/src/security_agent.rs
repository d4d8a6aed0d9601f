//! security-agent: the secrets vault (`specs/vault/README.md`). Secret
//! values travel base64-encoded (`value_base64`) because secrets are bytes;
//! every param or result that holds a secret, a passphrase or the recovery
//! key is wiped from memory when it drops.

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::NoParams;

service! {
    component: Some(clawos_ipc::ComponentId::SecurityAgent);
    /// Whether the vault exists, how it is protected and whether it is open.
    fn vault_status(NoParams) -> VaultStatus { timeout_ms: 30000, errors: [Eio] }
    /// Creates the vault (operator only) and answers the recovery key once.
    fn vault_init(VaultInit) -> VaultInitialized { timeout_ms: 30000, errors: [Eperm, Eio] }
    /// Opens a passphrase vault after a reboot (operator only).
    fn vault_unlock(VaultUnlock) -> VaultStatus { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Opens the vault with the recovery key when the TPM refuses (operator only).
    fn vault_recover(VaultRecover) -> VaultStatus { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Seals the master key to the current boot state again.
    fn vault_reseal(NoParams) -> VaultStatus { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Seals the master key to this boot and to the boot of an update whose
    /// UKI measures `pcr4` into PCR 4 (`clawctl update apply`, operator only).
    fn vault_prepare_update(VaultPrepareUpdate) -> VaultStatus { timeout_ms: 30000, errors: [Eperm, Enoent, Eproto, Eio] }
    /// Replaces the master key and re-encrypts every secret under it.
    fn vault_rotate(NoParams) -> VaultStatus { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Reads and decrypts every version of every secret and verifies the
    /// vault's audit chain (operator only); no value is answered.
    fn vault_check(NoParams) -> VaultCheck { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Stores a new version of a secret.
    fn secret_set(SecretSet) -> SecretVersion { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Reads a secret (its newest version, or the one asked for), if the
    /// vault policy lets the caller; any other version than the newest needs
    /// secret-read-history too, which only the operator has by default.
    fn secret_get(SecretGet) -> SecretValue { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Every secret's newest version, without values.
    fn secret_list(NoParams) -> SecretList { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Every kept version of one secret, without values.
    fn secret_history(SecretName) -> SecretHistory { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Removes a secret and all its versions.
    fn secret_remove(SecretName) -> SecretRemoved { timeout_ms: 30000, errors: [Eperm, Enoent, Eio] }
    /// Whether an agent may take an action now (`specs/agent/README.md`,
    /// "Permissions and approvals"): allow, deny, or pending an approval.
    fn check_policy(CheckPolicy) -> PolicyDecision { timeout_ms: 1000, errors: [Eio] }
    /// The approvals waiting (or all, newest first).
    fn approval_list(ApprovalFilter) -> ApprovalList { timeout_ms: 5000, errors: [Eio] }
    /// Approves or denies a waiting approval.
    fn approval_decide(ApprovalDecide) -> Approval { timeout_ms: 5000, errors: [Enoent, Eperm, Eio] }
}

/// What an action needs (`specs/agent/README.md`, "Permissions and approvals").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Reading the agent's files and memory.
    Read,
    /// Writing the agent's files.
    FileWrite,
    /// Storing or forgetting memories.
    MemoryWrite,
    /// Running a tool: a WASM tool, or an MCP server's.
    Tool,
    /// A tool that may reach the network: a WASM tool granted it, or a remote MCP server's.
    Network,
    /// Scheduling work (the scheduler's).
    Schedule,
    /// Spending money (paid requests).
    Spend,
}

/// How a policy treats a permission, from the most lenient to the
/// strictest (the order `Ord` compares by).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Allowed without asking.
    AutoGrant,
    /// Each action waits for the operator.
    RequireApproval,
    /// Never allowed.
    Deny,
}

/// The preset a policy starts from, from the narrowest to the widest (the
/// order `Ord` compares by).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Autonomy {
    /// Reads and thinks; changes nothing.
    ReadOnly,
    /// Remembers freely; every other change waits for the operator.
    #[default]
    Supervised,
    /// Acts within its permissions without asking.
    Full,
}

impl Permission {
    /// Every permission.
    pub const ALL: [Permission; 7] = [
        Permission::Read,
        Permission::FileWrite,
        Permission::MemoryWrite,
        Permission::Tool,
        Permission::Network,
        Permission::Schedule,
        Permission::Spend,
    ];
}

impl Autonomy {
    /// The mode this preset gives `permission` (`specs/agent/README.md`,
    /// "Permissions and approvals"): reading is always allowed; read-only
    /// denies the rest; supervised remembers freely and asks for the rest;
    /// full allows all.
    pub const fn preset(self, permission: Permission) -> Mode {
        match (self, permission) {
            (_, Permission::Read) => Mode::AutoGrant,
            (Autonomy::ReadOnly, _) => Mode::Deny,
            (Autonomy::Supervised, Permission::MemoryWrite) => Mode::AutoGrant,
            (Autonomy::Supervised, _) => Mode::RequireApproval,
            (Autonomy::Full, _) => Mode::AutoGrant,
        }
    }
}

/// An agent's policy as its `config.toml` gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentPolicy {
    /// The preset.
    pub autonomy: Autonomy,
    /// Modes over the preset's.
    #[serde(default)]
    pub permissions: std::collections::BTreeMap<Permission, Mode>,
    /// The `tool` permission's mode for single tools.
    #[serde(default)]
    pub tools: std::collections::BTreeMap<String, Mode>,
    /// Allowed actions per agent over the last hour.
    pub max_actions_per_hour: u32,
    /// How long an approval may wait.
    pub approval_expires_minutes: u32,
}

impl AgentPolicy {
    /// This policy held to `level` as well (a sub-agent's,
    /// `specs/agent/README.md`, "Sub-agents"): each permission, and each
    /// tool's own mode, gets the stricter of this policy's mode and
    /// `level`'s preset, so the result allows nothing this one does not.
    pub fn narrowed(&self, level: Autonomy) -> AgentPolicy {
        let own = |permission: Permission| {
            self.permissions.get(&permission).copied().unwrap_or(self.autonomy.preset(permission))
        };
        AgentPolicy {
            autonomy: self.autonomy.min(level),
            permissions: Permission::ALL
                .into_iter()
                .map(|permission| (permission, own(permission).max(level.preset(permission))))
                .collect(),
            tools: self
                .tools
                .iter()
                .map(|(tool, mode)| (tool.clone(), (*mode).max(level.preset(Permission::Tool))))
                .collect(),
            max_actions_per_hour: self.max_actions_per_hour,
            approval_expires_minutes: self.approval_expires_minutes,
        }
    }
}

/// `check_policy` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckPolicy {
    /// The agent.
    pub agent: String,
    /// The action, the same each time it is asked about:
    /// `<session>/<message>/<call id>`.
    pub action_id: String,
    /// Its session.
    pub session_id: String,
    /// The tool it calls.
    pub tool_name: String,
    /// What it needs.
    pub permissions: Vec<Permission>,
    /// The tool's arguments, shown to the operator with an approval (never logged).
    pub arguments: serde_json::Value,
    /// The agent's policy.
    pub policy: AgentPolicy,
    /// The call was running when agent-loop stopped, and its turn is being
    /// resumed: allowed only if security-agent recorded an allow for this
    /// agent, action, tool and arguments, and the policy does not deny it
    /// now; no approval or action of the cap is charged again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
}

/// What `check_policy` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// Do not; `reason` says why.
    Deny,
    /// Wait for the operator (`approval_id`).
    Pending,
}

/// `check_policy` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PolicyDecision {
    /// The decision.
    pub decision: Decision,
    /// Why.
    pub reason: String,
    /// The approval it rests on or waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for the operator.
    Pending,
    /// Approved, not yet used.
    Approved,
    /// Denied.
    Denied,
    /// Not answered in time.
    Expired,
    /// Approved and the action allowed.
    Used,
}

// The action fields repeat `CheckPolicy`'s rather than sharing a struct:
// serde cannot combine `#[serde(flatten)]` with `deny_unknown_fields`, which
// every params type keeps, and nesting them would change the approvals' wire
// format (specs/ipc/schemas/methods/). A plain comment, so the schema's
// description stays the one clients read.
/// One approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Approval {
    /// Its ID (`a` and 10 hex digits).
    pub id: String,
    /// The agent.
    pub agent: String,
    /// The action (see [`CheckPolicy`]).
    pub action_id: String,
    /// The session the action belongs to.
    pub session_id: String,
    /// The tool.
    pub tool_name: String,
    /// What the action needs.
    pub permissions: Vec<Permission>,
    /// The tool's arguments.
    pub arguments: serde_json::Value,
    /// Why it needs approval.
    pub reason: String,
    /// Where it stands.
    pub state: ApprovalState,
    /// When it was asked for, RFC 3339.
    pub created_at: String,
    /// When it expires unanswered, RFC 3339.
    pub expires_at: String,
}

/// `approval_list` params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalFilter {
    /// Every approval, not only the waiting ones.
    #[serde(default)]
    pub all: bool,
}

/// `approval_list` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalList {
    /// Newest first.
    pub approvals: Vec<Approval>,
}

/// `approval_decide` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDecide {
    /// The approval.
    pub id: String,
    /// Approve (true) or deny (false).
    pub approve: bool,
}

/// How a new vault's master key is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Protection {
    /// Sealed to the TPM 2.0 and this boot's PCRs.
    Tpm,
    /// Derived from an operator passphrase (no TPM).
    Passphrase,
}

/// `vault_init` params.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VaultInit {
    /// How the master key is protected.
    pub protection: Protection,
    /// Required with `passphrase` protection: at least 12 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub passphrase: Option<Zeroizing<String>>,
}

/// `vault_unlock` params.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VaultUnlock {
    /// The operator passphrase.
    #[schemars(with = "String")]
    pub passphrase: Zeroizing<String>,
}

/// `vault_recover` params.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VaultRecover {
    /// The recovery key `vault_init` answered.
    #[schemars(with = "String")]
    pub recovery_key: Zeroizing<String>,
}

/// `vault_prepare_update` params.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VaultPrepareUpdate {
    /// The SHA-256 PCR 4 value (64 hex digits) the update's boot will
    /// have, as `clawctl update apply` computed it from this boot's event
    /// log (specs/update/README.md, "The TPM across an update").
    pub pcr4: String,
}

/// `vault_check` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VaultCheck {
    /// Secrets found.
    pub secrets: u32,
    /// Versions, of all secrets, that decrypted and verified.
    pub versions: u32,
    /// Audit log entries whose MAC chain verified.
    pub audit_entries: u64,
    /// What did not verify; empty when the vault is consistent.
    pub problems: Vec<String>,
}

/// The vault's state (`vault_status` and the other vault methods' result).
/// `state` and `protection` are stable names for programs; the
/// `*_description` fields are for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VaultStatus {
    /// The vault's directory.
    pub vault_dir: String,
    /// Whether a vault exists.
    pub initialized: bool,
    /// `tpm2` or `passphrase`; null before init.
    pub protection: Option<String>,
    /// The protection, for people.
    pub protection_description: Option<String>,
    /// The PCRs a TPM vault is sealed to.
    pub pcrs: Option<Vec<u32>>,
    /// How many sets of their values unseal a TPM vault: 1, or 2 from
    /// `vault_prepare_update` until the update is blessed or given up.
    pub tpm_branches: Option<u32>,
    /// `not-initialized`, `unsealed`, `unsealable`, `pcr-mismatch`,
    /// `tpm-unavailable` or `passphrase-required`.
    pub state: String,
    /// The state, for people.
    pub state_description: String,
    /// The master key's generation (rotations so far + 1).
    pub generation: Option<u32>,
    /// Secrets stored.
    pub secret_count: usize,
    /// Why security-agent is degraded, if it is.
    pub degraded_reason: Option<String>,
}

/// `vault_init` result: the status and the recovery key, shown once.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VaultInitialized {
    /// The new vault's status.
    #[serde(flatten)]
    pub status: VaultStatus,
    /// The recovery key: the last resort when the TPM or passphrase fails.
    #[schemars(with = "String")]
    pub recovery_key: Zeroizing<String>,
}

/// `secret_set` params.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretSet {
    /// The secret's id.
    pub secret_id: String,
    /// The value, base64 (standard alphabet); at most 64 KiB decoded.
    #[schemars(with = "String")]
    pub value_base64: Zeroizing<String>,
}

/// `secret_set` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretVersion {
    /// The secret's id.
    pub secret_id: String,
    /// The version just stored.
    pub version: u32,
}

/// `secret_get` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretGet {
    /// The secret's id.
    pub secret_id: String,
    /// A version (from 1); the newest when absent. Another version than the
    /// newest needs secret-read-history (the operator's by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub version: Option<u32>,
}

/// `secret_get` result.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretValue {
    /// The secret's id.
    pub secret_id: String,
    /// The value, base64.
    #[schemars(with = "String")]
    pub value_base64: Zeroizing<String>,
}

/// `secret_history` and `secret_remove` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretName {
    /// The secret's id.
    pub secret_id: String,
}

/// One version of a secret, without its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretInfo {
    /// The secret's id.
    pub secret_id: String,
    /// The version.
    pub version: u32,
    /// When the secret was first stored, RFC 3339.
    pub created_at: String,
    /// When this version was stored, RFC 3339.
    pub updated_at: String,
    /// The master key generation it is encrypted under.
    pub key_generation: u32,
}

/// `secret_list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretList {
    /// Each secret's newest version.
    pub secrets: Vec<SecretInfo>,
}

/// `secret_history` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretHistory {
    /// The secret's id.
    pub secret_id: String,
    /// Every kept version, oldest first.
    pub versions: Vec<SecretInfo>,
}

/// `secret_remove` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecretRemoved {
    /// The secret's id.
    pub secret_id: String,
    /// Always true: a missing secret is ENOENT.
    pub removed: bool,
}

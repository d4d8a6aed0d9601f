//! `check_policy` and the approvals queue (`specs/agent/README.md`,
//! "Permissions and approvals"): whether an agent may take an action, decided
//! and recorded in one place.
//!
//! Owns: the autonomy presets and how a policy's modes combine, the
//! hourly action cap, the approvals (pending, approved, denied, expired,
//! used) and the record of every decision, in `policy.db` beside the vault
//! (`/clawfs/vault`, which only this component can open: an agent or a tool
//! cannot approve its own action by writing a file).
//!
//! Must not own: what an action is or which permissions it needs (agent-loop
//! says, from the tool it is about to call), the agent's configuration (the
//! operator's `config.toml`, parsed by agent-loop and sent with each check),
//! or running the action.
//!
//! A crash costs nothing decided: every decision is committed before it is
//! answered, and an approval is consumed in the same transaction that
//! answers `allow` for it, so an approved action runs at most once. An
//! approval holds the digest of the tool and the canonical arguments it was
//! asked for; a check with the same action ID and another call is refused,
//! so neither a model reusing an ID nor a forged checkpoint rides on it.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use clawos_api::security_agent::{
    AgentPolicy, Approval, ApprovalState, CheckPolicy, Decision, Mode, Permission, PolicyDecision,
};
use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

/// The policy database's file name in the vault directory.
pub const POLICY_DB: &str = "policy.db";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    action_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    permissions TEXT NOT NULL,
    arguments TEXT NOT NULL,
    reason TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    decided_at INTEGER,
    digest TEXT NOT NULL DEFAULT '',
    UNIQUE (agent, action_id)
);
CREATE TABLE IF NOT EXISTS actions (agent TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS actions_by_agent ON actions (agent, at);
CREATE TABLE IF NOT EXISTS decisions (
    at INTEGER NOT NULL,
    agent TEXT NOT NULL,
    action_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT NOT NULL,
    digest TEXT NOT NULL DEFAULT ''
);
";

/// Seconds since the epoch.
pub fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The strictest mode among the permissions an action needs: the policy's
/// own mode for each (its preset's when it sets none), a tool's own mode
/// replacing that of `tool`. An action that names no permission needs
/// nothing beyond reading.
pub fn mode(policy: &AgentPolicy, tool_name: &str, needs: &[Permission]) -> (Mode, Permission) {
    needs
        .iter()
        .map(|permission| {
            let own = match permission {
                Permission::Tool => policy.tools.get(tool_name).or_else(|| policy.permissions.get(permission)),
                other => policy.permissions.get(other),
            };
            (own.copied().unwrap_or_else(|| policy.autonomy.preset(*permission)), *permission)
        })
        .max_by_key(|(mode, _)| match mode {
            Mode::AutoGrant => 0,
            Mode::RequireApproval => 1,
            Mode::Deny => 2,
        })
        .unwrap_or((Mode::AutoGrant, Permission::Read))
}

/// The policy database.
pub struct PolicyStore {
    connection: Connection,
}

fn sql(error: rusqlite::Error) -> String {
    format!("policy database: {error}")
}

/// The name serde gives `value` (an enum of the API: `file_write`,
/// `pending`, `deny`), as the database stores it and reasons say it.
pub fn name(value: impl serde::Serialize) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

const APPROVAL_COLUMNS: &str =
    "id, agent, action_id, session_id, tool_name, permissions, arguments, reason, state, created_at, expires_at";

fn approval(row: &rusqlite::Row<'_>) -> rusqlite::Result<Approval> {
    Ok(Approval {
        id: row.get(0)?,
        agent: row.get(1)?,
        action_id: row.get(2)?,
        session_id: row.get(3)?,
        tool_name: row.get(4)?,
        permissions: serde_json::from_str(&row.get::<_, String>(5)?).unwrap_or_default(),
        arguments: serde_json::from_str(&row.get::<_, String>(6)?).unwrap_or_default(),
        reason: row.get(7)?,
        state: serde_json::from_value(serde_json::Value::String(row.get(8)?)).unwrap_or(ApprovalState::Pending),
        created_at: fsutil::rfc3339(row.get::<_, i64>(9)?.max(0) as u64),
        expires_at: fsutil::rfc3339(row.get::<_, i64>(10)?.max(0) as u64),
    })
}

impl PolicyStore {
    /// Opens (creating) the policy database in `dir`.
    pub fn open(dir: &Path) -> Result<PolicyStore, String> {
        let path = dir.join(POLICY_DB);
        let connection = Connection::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        connection.busy_timeout(std::time::Duration::from_secs(5)).map_err(sql)?;
        connection.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;").map_err(sql)?;
        connection.execute_batch(SCHEMA).map_err(sql)?;
        // A database from before approvals and decisions held their call's
        // digest: the column is added empty, which matches no call (an
        // approval is asked again, a resumed call is not confirmed).
        for table in ["approvals", "decisions"] {
            let has_digest: bool = connection
                .query_row("SELECT count(*) FROM pragma_table_info(?1) WHERE name = 'digest'", [table], |row| {
                    row.get(0)
                })
                .map_err(sql)?;
            if !has_digest {
                connection
                    .execute_batch(&format!("ALTER TABLE {table} ADD COLUMN digest TEXT NOT NULL DEFAULT ''"))
                    .map_err(sql)?;
            }
        }
        Ok(PolicyStore { connection })
    }

    /// Decides `check` at time `now` (seconds), recording the decision.
    pub fn check(&mut self, check: &CheckPolicy, now: i64) -> Result<PolicyDecision, String> {
        let transaction = self.connection.transaction().map_err(sql)?;
        expire(&transaction, now)?;
        let (mode, strictest) = mode(&check.policy, &check.tool_name, &check.permissions);
        let digest = call_digest(&check.tool_name, &check.arguments);
        let existing: Option<(String, String, String, String)> = transaction
            .query_row(
                "SELECT id, state, reason, digest FROM approvals WHERE agent = ?1 AND action_id = ?2",
                params![check.agent, check.action_id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .optional()
            .map_err(sql)?;
        let permission = name(strictest);
        let decision = match (mode, existing.map(|(id, state, reason, asked)| (id, state, reason, asked == digest))) {
            (Mode::Deny, _) => deny(format!("the agent's policy denies {permission}")),
            // The agent's own record of a call in flight is not evidence:
            // only this database's allow for the very same call is.
            _ if check.resumed => resumed(&transaction, check, &digest)?,
            (_, Some((id, _, _, false))) => PolicyDecision {
                decision: Decision::Deny,
                reason: format!(
                    "the call is not the one the operator was asked about ({id}): the same action ID with another tool or other arguments"
                ),
                approval_id: Some(id),
            },
            // The cap first: an action it refuses keeps its approval.
            (_, Some((id, state, _, true))) if state == "approved" => match within_cap(&transaction, check, now)? {
                Some(capped) => capped,
                None => {
                    transaction.execute("UPDATE approvals SET state = 'used' WHERE id = ?1", [&id]).map_err(sql)?;
                    PolicyDecision {
                        decision: Decision::Allow,
                        reason: format!("approved by the operator ({id})"),
                        approval_id: Some(id),
                    }
                }
            },
            (_, Some((id, state, _, true))) if state == "denied" => PolicyDecision {
                decision: Decision::Deny,
                reason: format!("the operator denied it ({id})"),
                approval_id: Some(id),
            },
            (_, Some((id, state, _, true))) if state == "expired" => PolicyDecision {
                decision: Decision::Deny,
                reason: format!("its approval expired ({id})"),
                approval_id: Some(id),
            },
            (_, Some((id, state, _, true))) if state == "used" => PolicyDecision {
                decision: Decision::Deny,
                reason: format!("its approval was already used ({id})"),
                approval_id: Some(id),
            },
            (_, Some((id, _, reason, true))) => PolicyDecision { decision: Decision::Pending, reason, approval_id: Some(id) },
            (Mode::RequireApproval, None) => {
                let reason = format!("{permission} needs the operator's approval");
                let id = approval_id(&check.agent, &check.action_id, now);
                let expires_at = now + check.policy.approval_expires_minutes as i64 * 60;
                transaction
                    .execute(
                        "INSERT INTO approvals (id, agent, action_id, session_id, tool_name, permissions, arguments, reason, state, created_at, expires_at, digest)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?10, ?11)",
                        params![
                            id,
                            check.agent,
                            check.action_id,
                            check.session_id,
                            check.tool_name,
                            serde_json::to_string(&check.permissions).expect("permissions serialize"),
                            check.arguments.to_string(),
                            reason,
                            now,
                            expires_at,
                            digest
                        ],
                    )
                    .map_err(sql)?;
                PolicyDecision { decision: Decision::Pending, reason, approval_id: Some(id) }
            }
            (Mode::AutoGrant, None) => within_cap(&transaction, check, now)?.unwrap_or(PolicyDecision {
                decision: Decision::Allow,
                reason: format!("{permission} is granted"),
                approval_id: None,
            }),
        };
        transaction
            .execute(
                "INSERT INTO decisions (at, agent, action_id, tool_name, decision, reason, digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![now, check.agent, check.action_id, check.tool_name, name(decision.decision), decision.reason, digest],
            )
            .map_err(sql)?;
        transaction.commit().map_err(sql)?;
        Ok(decision)
    }

    /// The approvals, newest first; only `pending` ones unless `all`.
    pub fn list(&mut self, all: bool, now: i64) -> Result<Vec<Approval>, String> {
        let transaction = self.connection.transaction().map_err(sql)?;
        expire(&transaction, now)?;
        let filter = if all { "" } else { "WHERE state = 'pending'" };
        let approvals = transaction
            .prepare(&format!("SELECT {APPROVAL_COLUMNS} FROM approvals {filter} ORDER BY created_at DESC, id"))
            .map_err(sql)?
            .query_map([], approval)
            .map_err(sql)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(sql)?;
        transaction.commit().map_err(sql)?;
        Ok(approvals)
    }

    /// Approves or denies pending approval `id`. `Ok(None)` when there is
    /// no such approval; `Err` names the state of one already decided.
    pub fn decide(&mut self, id: &str, approve: bool, now: i64) -> Result<Option<Result<Approval, String>>, String> {
        let transaction = self.connection.transaction().map_err(sql)?;
        expire(&transaction, now)?;
        let Some(current) = transaction
            .query_row(&format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"), [id], approval)
            .optional()
            .map_err(sql)?
        else {
            return Ok(None);
        };
        if current.state != ApprovalState::Pending {
            return Ok(Some(Err(format!("approval {id} is {} already", name(current.state)))));
        }
        let state = if approve { ApprovalState::Approved } else { ApprovalState::Denied };
        // An approval is good for as long after the operator's answer as it
        // waited for one at most: not for ever.
        transaction
            .execute(
                "UPDATE approvals SET state = ?1, decided_at = ?2, expires_at = ?2 + (expires_at - created_at) WHERE id = ?3",
                params![name(state), now, id],
            )
            .map_err(sql)?;
        transaction.commit().map_err(sql)?;
        Ok(Some(Ok(Approval { state, ..current })))
    }
}

/// Pending approvals past their time, and approved ones not used in theirs,
/// become `expired`.
fn expire(transaction: &rusqlite::Transaction<'_>, now: i64) -> Result<(), String> {
    transaction
        .execute(
            "UPDATE approvals SET state = 'expired' WHERE state IN ('pending', 'approved') AND expires_at <= ?1",
            [now],
        )
        .map(drop)
        .map_err(sql)
}

/// Counts an allowed action against the hourly cap: `Some(deny)` when the
/// agent already took `max_actions_per_hour` in the last hour, else the
/// action is recorded and `None` returned.
fn within_cap(
    transaction: &rusqlite::Transaction<'_>,
    check: &CheckPolicy,
    now: i64,
) -> Result<Option<PolicyDecision>, String> {
    transaction.execute("DELETE FROM actions WHERE at <= ?1", [now - 3600]).map_err(sql)?;
    let taken: u32 = transaction
        .query_row("SELECT count(*) FROM actions WHERE agent = ?1", [&check.agent], |row| row.get(0))
        .map_err(sql)?;
    if taken >= check.policy.max_actions_per_hour {
        return Ok(Some(deny(format!("limit reached: actions per hour ({})", check.policy.max_actions_per_hour))));
    }
    transaction.execute("INSERT INTO actions (agent, at) VALUES (?1, ?2)", params![check.agent, now]).map_err(sql)?;
    Ok(None)
}

fn deny(reason: String) -> PolicyDecision {
    PolicyDecision { decision: Decision::Deny, reason, approval_id: None }
}

/// SHA-256 of the tool's name and its arguments as canonical JSON (object
/// keys sorted at every level), in hex: what an approval was asked about.
/// The decision on a resumed call (`CheckPolicy::resumed`): allowed if an
/// allow of this agent's for the same action and digest is recorded (the
/// first one is quoted, not a resume's own), with
/// nothing charged again (the approval was used, the cap counted, when it
/// was first allowed); refused otherwise.
fn resumed(
    transaction: &rusqlite::Transaction<'_>,
    check: &CheckPolicy,
    digest: &str,
) -> Result<PolicyDecision, String> {
    let allowed: Option<String> = transaction
        .query_row(
            "SELECT reason FROM decisions WHERE agent = ?1 AND action_id = ?2 AND digest = ?3 AND decision = 'allow'
             ORDER BY rowid LIMIT 1",
            params![check.agent, check.action_id, digest],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql)?;
    Ok(match allowed {
        Some(reason) => PolicyDecision {
            decision: Decision::Allow,
            reason: format!("resumed: allowed before the restart ({reason})"),
            approval_id: None,
        },
        None => deny("resumed: no allow was recorded for this call with these arguments".into()),
    })
}

fn call_digest(tool_name: &str, arguments: &serde_json::Value) -> String {
    fn canonical(value: &serde_json::Value, out: &mut String) {
        match value {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (n, key) in keys.into_iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::from(key.as_str()).to_string());
                    out.push(':');
                    canonical(&map[key], out);
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    canonical(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut text = String::new();
    canonical(arguments, &mut text);
    fsutil::hex(&Sha256::new().chain_update(tool_name).chain_update([0]).chain_update(text).finalize())
}

/// `a` and 10 hex digits of a hash of the agent, the action and the time.
fn approval_id(agent: &str, action_id: &str, now: i64) -> String {
    let digest = Sha256::new()
        .chain_update(agent)
        .chain_update([0])
        .chain_update(action_id)
        .chain_update(now.to_le_bytes())
        .finalize();
    format!("a{}", &fsutil::hex(&digest)[..10])
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawos_api::security_agent::Autonomy;
    use std::collections::BTreeMap;

    fn policy(autonomy: Autonomy) -> AgentPolicy {
        AgentPolicy {
            autonomy,
            permissions: BTreeMap::new(),
            tools: BTreeMap::new(),
            max_actions_per_hour: 3,
            approval_expires_minutes: 10,
        }
    }

    fn check(action: &str, needs: &[Permission], autonomy: Autonomy) -> CheckPolicy {
        CheckPolicy {
            agent: "a".into(),
            action_id: action.into(),
            session_id: "s".into(),
            tool_name: "file_write".into(),
            permissions: needs.to_vec(),
            arguments: serde_json::json!({"path": "x.md"}),
            policy: policy(autonomy),
            resumed: false,
        }
    }

    #[test]
    fn presets_and_overrides_combine_to_the_strictest() {
        let mut supervised = policy(Autonomy::Supervised);
        assert_eq!(mode(&supervised, "t", &[Permission::Read]).0, Mode::AutoGrant);
        assert_eq!(mode(&supervised, "t", &[Permission::MemoryWrite]).0, Mode::AutoGrant);
        assert_eq!(mode(&supervised, "t", &[Permission::FileWrite]).0, Mode::RequireApproval);
        assert_eq!(mode(&policy(Autonomy::ReadOnly), "t", &[Permission::MemoryWrite]).0, Mode::Deny);
        assert_eq!(mode(&policy(Autonomy::Full), "t", &[Permission::Tool, Permission::Network]).0, Mode::AutoGrant);
        supervised.tools.insert("t".into(), Mode::AutoGrant);
        assert_eq!(mode(&supervised, "t", &[Permission::Tool]).0, Mode::AutoGrant);
        // The tool is trusted, its network use is not.
        assert_eq!(
            mode(&supervised, "t", &[Permission::Tool, Permission::Network]),
            (Mode::RequireApproval, Permission::Network)
        );
        supervised.permissions.insert(Permission::Network, Mode::Deny);
        assert_eq!(mode(&supervised, "t", &[Permission::Tool, Permission::Network]).0, Mode::Deny);
    }

    #[test]
    fn a_narrowed_policy_allows_nothing_its_own_does_not() {
        // A supervised agent that trusts its file writes and one tool.
        let mut parent = policy(Autonomy::Supervised);
        parent.permissions.insert(Permission::FileWrite, Mode::AutoGrant);
        parent.tools.insert("t".into(), Mode::AutoGrant);
        let read_only = parent.narrowed(Autonomy::ReadOnly);
        assert_eq!(mode(&read_only, "t", &[Permission::FileWrite]).0, Mode::Deny);
        assert_eq!(mode(&read_only, "t", &[Permission::Tool]).0, Mode::Deny);
        assert_eq!(mode(&read_only, "t", &[Permission::Read]).0, Mode::AutoGrant);
        // Asking for more than its own gives its own, mode by mode.
        let full = parent.narrowed(Autonomy::Full);
        assert_eq!(full.autonomy, Autonomy::Supervised);
        for needs in [Permission::FileWrite, Permission::Schedule, Permission::MemoryWrite, Permission::Tool] {
            assert_eq!(mode(&full, "t", &[needs]), mode(&parent, "t", &[needs]), "{needs:?}");
            assert_eq!(mode(&full, "u", &[needs]), mode(&parent, "u", &[needs]), "{needs:?}");
        }
        assert_eq!(
            mode(&policy(Autonomy::ReadOnly).narrowed(Autonomy::Full), "t", &[Permission::MemoryWrite]).0,
            Mode::Deny
        );
    }

    #[test]
    fn an_approval_waits_is_answered_and_is_used_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = PolicyStore::open(dir.path()).unwrap();
        let write = check("s/1/c1", &[Permission::FileWrite], Autonomy::Supervised);
        let first = db.check(&write, 100).unwrap();
        assert_eq!(first.decision, Decision::Pending);
        let id = first.approval_id.clone().unwrap();
        // Asking again while it waits is the same approval.
        assert_eq!(db.check(&write, 101).unwrap().approval_id, Some(id.clone()));
        assert_eq!(db.list(false, 102).unwrap().len(), 1);
        // It survives a reopen (a restart, a reboot).
        drop(db);
        let mut db = PolicyStore::open(dir.path()).unwrap();
        assert_eq!(db.decide(&id, true, 103).unwrap().unwrap().unwrap().state, ApprovalState::Approved);
        assert!(db.decide(&id, false, 104).unwrap().unwrap().is_err(), "decided once");
        assert_eq!(db.check(&write, 105).unwrap().decision, Decision::Allow);
        // Used: the same action is not allowed twice on one approval.
        assert_eq!(db.check(&write, 106).unwrap().decision, Decision::Deny);
        assert!(db.decide("a0000000000", true, 107).unwrap().is_none());
    }

    #[test]
    fn a_resumed_call_is_allowed_only_on_this_databases_own_allow() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = PolicyStore::open(dir.path()).unwrap();
        let resumed = |call: &CheckPolicy| CheckPolicy { resumed: true, ..call.clone() };
        // An approved call that was running: allowed again, nothing charged
        // (its approval stays used, the cap of 3 an hour is not counted).
        let write = check("s/1/c1", &[Permission::FileWrite], Autonomy::Supervised);
        let id = db.check(&write, 100).unwrap().approval_id.unwrap();
        db.decide(&id, true, 101).unwrap().unwrap().unwrap();
        assert_eq!(db.check(&write, 102).unwrap().decision, Decision::Allow);
        for at in 103..108 {
            let again = db.check(&resumed(&write), at).unwrap();
            assert_eq!(again.decision, Decision::Allow, "{again:?}");
            assert!(
                again.reason.starts_with("resumed: allowed before the restart (approved by the operator"),
                "{again:?}"
            );
        }
        // A forged checkpoint: a call never allowed, or an allowed action
        // with other arguments, is refused, and no approval is asked for.
        let forged = check("s/9/c9", &[Permission::FileWrite], Autonomy::Supervised);
        let other = CheckPolicy { arguments: serde_json::json!({"path": "soul.md"}), ..write.clone() };
        for call in [&forged, &other] {
            let refused = db.check(&resumed(call), 110).unwrap();
            assert_eq!(refused.decision, Decision::Deny, "{refused:?}");
            assert!(refused.reason.contains("no allow was recorded"), "{refused:?}");
        }
        assert!(db.list(false, 111).unwrap().is_empty(), "no approval waits");
        // A policy that denies now wins over the allow before the restart.
        let read_only = CheckPolicy { policy: policy(Autonomy::ReadOnly), ..resumed(&write) };
        assert_eq!(db.check(&read_only, 112).unwrap().decision, Decision::Deny);
    }

    #[test]
    fn an_approval_holds_for_its_call_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = PolicyStore::open(dir.path()).unwrap();
        let write = check("s/1/c1", &[Permission::FileWrite], Autonomy::Supervised);
        let id = db.check(&write, 100).unwrap().approval_id.unwrap();
        db.decide(&id, true, 101).unwrap().unwrap().unwrap();
        // The same action ID with other arguments or another tool: refused,
        // and the approval stays for the call it was given for.
        let other = CheckPolicy { arguments: serde_json::json!({"path": "soul.md"}), ..write.clone() };
        let tool = CheckPolicy { tool_name: "file_read".into(), ..write.clone() };
        for call in [&other, &tool] {
            let decision = db.check(call, 102).unwrap();
            assert_eq!(decision.decision, Decision::Deny, "{decision:?}");
            assert!(decision.reason.contains("not the one the operator was asked about"), "{}", decision.reason);
        }
        // Key order is not a different call.
        let reordered = CheckPolicy { arguments: serde_json::json!({"path": "x.md"}), ..write.clone() };
        assert_eq!(db.check(&reordered, 103).unwrap().decision, Decision::Allow);
        assert_eq!(
            call_digest("t", &serde_json::json!({"a": 1, "b": [{"d": 2, "c": 3}]})),
            call_digest("t", &serde_json::from_str(r#"{"b": [{"c": 3, "d": 2}], "a": 1}"#).unwrap())
        );
    }

    #[test]
    fn an_approval_refused_by_the_cap_is_kept_and_an_unused_one_expires() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = PolicyStore::open(dir.path()).unwrap();
        let write = check("s/1/c1", &[Permission::FileWrite], Autonomy::Supervised);
        let id = db.check(&write, 100).unwrap().approval_id.unwrap();
        db.decide(&id, true, 200).unwrap().unwrap().unwrap();
        for n in 0..3 {
            let full = check(&format!("s/2/c{n}"), &[Permission::FileWrite], Autonomy::Full);
            assert_eq!(db.check(&full, 201 + n).unwrap().decision, Decision::Allow);
        }
        let capped = db.check(&write, 210).unwrap();
        assert!(capped.reason.contains("actions per hour"), "{capped:?}");
        let state =
            |db: &mut PolicyStore, now| db.list(true, now).unwrap().into_iter().find(|a| a.id == id).unwrap().state;
        assert_eq!(state(&mut db, 211), ApprovalState::Approved, "the cap used up the approval");
        // Ten minutes after the operator's answer it is gone.
        assert_eq!(state(&mut db, 200 + 10 * 60), ApprovalState::Expired);
        assert!(db.check(&write, 200 + 10 * 60).unwrap().reason.contains("expired"));
    }

    #[test]
    fn denied_and_expired_approvals_deny_the_action() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = PolicyStore::open(dir.path()).unwrap();
        let denied = check("s/1/c1", &[Permission::Tool], Autonomy::Supervised);
        let id = db.check(&denied, 100).unwrap().approval_id.unwrap();
        db.decide(&id, false, 101).unwrap().unwrap().unwrap();
        assert!(db.check(&denied, 102).unwrap().reason.contains("denied"));
        let late = check("s/1/c2", &[Permission::Tool], Autonomy::Supervised);
        let id = db.check(&late, 100).unwrap().approval_id.unwrap();
        let decision = db.check(&late, 100 + 10 * 60).unwrap();
        assert_eq!((decision.decision, decision.reason.contains("expired")), (Decision::Deny, true));
        assert!(
            db.decide(&id, true, 100 + 11 * 60).unwrap().unwrap().is_err(),
            "an expired approval cannot be approved"
        );
    }

    #[test]
    fn the_hourly_cap_and_a_denied_permission_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = PolicyStore::open(dir.path()).unwrap();
        for n in 0..3 {
            assert_eq!(
                db.check(&check(&format!("s/{n}"), &[Permission::FileWrite], Autonomy::Full), 1000 + n)
                    .unwrap()
                    .decision,
                Decision::Allow
            );
        }
        let capped = db.check(&check("s/4", &[Permission::FileWrite], Autonomy::Full), 1010).unwrap();
        assert!(capped.reason.contains("actions per hour (3)"), "{capped:?}");
        assert_eq!(
            db.check(&check("s/5", &[Permission::FileWrite], Autonomy::Full), 1000 + 3601).unwrap().decision,
            Decision::Allow
        );
        let read_only = db.check(&check("s/6", &[Permission::FileWrite], Autonomy::ReadOnly), 5000).unwrap();
        assert_eq!(
            (read_only.decision, read_only.reason.as_str()),
            (Decision::Deny, "the agent's policy denies file_write")
        );
        let decisions: i64 = db.connection.query_row("SELECT count(*) FROM decisions", [], |row| row.get(0)).unwrap();
        assert_eq!(decisions, 6);
    }
}

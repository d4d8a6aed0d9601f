//! The vault against a real software TPM (swtpm, one per test) and the real
//! kernel keyring.

mod common;

use std::fs;
use std::path::Path;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use common::{config, files_under, operator, operator_policy, Swtpm, NO_TPM};
use tss_esapi::handles::PcrHandle;
use vault::{
    AccessPolicy, Caller, InitProtection, Passphrase, ProtectionKind, RecoveryKey, SealState, SecretScope, Vault,
    VaultCapability, VaultError,
};

/// A temporary directory with a swtpm keeping its state under it; `None`
/// (announced by [`Swtpm::start`]) when swtpm is not installed.
fn tpm_in_temp_dir() -> Option<(tempfile::TempDir, Swtpm)> {
    let temp = tempfile::tempdir().unwrap();
    let tpm = Swtpm::start(&temp.path().join("tpm"))?;
    Some((temp, tpm))
}

fn tpm_vault(dir: &Path, tpm: &Swtpm) -> (Vault, RecoveryKey) {
    let init = Vault::init(config(dir, &tpm.tcti()), InitProtection::Tpm, &operator()).unwrap();
    let mut vault = init.vault;
    vault.set_policy(operator_policy());
    (vault, init.recovery_key)
}

fn open(config: vault::VaultConfig) -> vault::Result<Vault> {
    Vault::open(config).map(|mut vault| {
        vault.set_policy(operator_policy());
        vault
    })
}

/// A vault initialized under `config` with `passphrase` (no TPM), open to the operator.
fn passphrase_vault(config: &vault::VaultConfig, passphrase: Passphrase) -> Vault {
    let init = Vault::init(config.clone(), InitProtection::Passphrase(passphrase), &operator()).unwrap();
    let mut vault = init.vault;
    vault.set_policy(operator_policy());
    vault
}

/// The vault reopened with its recovery key, open to the operator.
fn recover(config: vault::VaultConfig, recovery_key: &RecoveryKey) -> Vault {
    let mut vault = Vault::recover(config, recovery_key, &operator()).unwrap();
    vault.set_policy(operator_policy());
    vault
}

#[test]
fn tpm_seal_unseal_round_trip() {
    let Some((temp, tpm)) = tpm_in_temp_dir() else {
        return;
    };
    let cfg = config(temp.path(), &tpm.tcti());
    let (mut vault, _) = tpm_vault(temp.path(), &tpm);
    assert_eq!(vault.set(&operator(), "openai-api-key", b"sk-one").unwrap(), 1);
    assert!(Vault::master_in_keyring(&cfg).unwrap(), "an open vault's master key is in the keyring");
    vault.lock().unwrap();
    assert!(!Vault::master_in_keyring(&cfg).unwrap(), "a locked vault's master key left the keyring");

    let status = Vault::status(&cfg).unwrap();
    assert_eq!(status.protection, Some(ProtectionKind::Tpm2 { pcrs: vec![4, 12], branches: 1 }));
    assert_eq!(status.state, SealState::Unsealable);
    assert_eq!(status.secret_count, 1);

    let mut vault = open(cfg.clone()).unwrap();
    assert_eq!(vault.get(&operator(), "openai-api-key").unwrap().expose(), b"sk-one");
    assert_eq!(Vault::status(&cfg).unwrap().state, SealState::Unsealed);
    assert!(Vault::master_in_keyring(&cfg).unwrap(), "the TPM's unseal put the master key in the keyring");
    assert!(matches!(Vault::init(cfg, InitProtection::Tpm, &operator()), Err(VaultError::AlreadyInitialized { .. })));
}

/// A TPM vault in `dir` stores a secret and locks; `between` runs on the
/// TPM, which then restarts; the vault opens again (`expect` says how) and
/// the secret reads back.
fn stored_then_read_after_a_tpm_restart(dir: &Path, tpm: Swtpm, between: impl FnOnce(&Swtpm), expect: &str) {
    let (mut vault, _) = tpm_vault(dir, &tpm);
    vault.set(&operator(), "openai-api-key", b"sk-kept").unwrap();
    vault.lock().unwrap();
    between(&tpm);
    let tpm = tpm.restart();
    let mut vault = open(config(dir, &tpm.tcti())).expect(expect);
    assert_eq!(vault.get(&operator(), "openai-api-key").unwrap().expose(), b"sk-kept");
}

/// specs/clawfs/encryption.md, "The volume's anchor": once the box holds
/// the TPM's owner authorisation, no key can be created under the owner
/// hierarchy without it; the vault seals and unseals under the storage root
/// key kept persistent, across a restart of the TPM.
#[test]
fn with_the_owner_authorisation_taken_the_vault_uses_the_persistent_storage_root_key() {
    let Some((temp, tpm)) = tpm_in_temp_dir() else {
        return;
    };
    tpm.persist_srk_and_take_ownership();
    stored_then_read_after_a_tpm_restart(temp.path(), tpm, |_| {}, "unsealed under the persistent key");
}

/// A key planted at the storage root key's handle that could leave the TPM
/// is passed over: the vault seals under the key it derives (the TPM would
/// refuse its sealed object under the planted one), and the secret still
/// opens once the planted key is gone.
#[test]
fn a_planted_duplicable_key_at_the_storage_root_handle_is_not_sealed_under() {
    let Some((temp, tpm)) = tpm_in_temp_dir() else {
        return;
    };
    tpm.plant_duplicable_srk();
    stored_then_read_after_a_tpm_restart(
        temp.path(),
        tpm,
        Swtpm::evict_persistent_srk,
        "sealed under the derived key, not the planted one",
    );
}

/// A TPM vault holding one secret, prepared for an update whose boot
/// extends PCR 4 with 0x5a (another digest than this boot's); with the
/// PCR 4 that boot will have.
fn prepared_for_update() -> Option<(tempfile::TempDir, Swtpm, Vault, [u8; 32])> {
    use sha2::{Digest as _, Sha256};
    let (temp, tpm) = tpm_in_temp_dir()?;
    let (mut vault, _) = tpm_vault(temp.path(), &tpm);
    vault.set(&operator(), "github-pat", b"ghp-secret").unwrap();
    let next_pcr4: [u8; 32] = Sha256::new().chain_update(tpm.pcr_sha256(4)).chain_update([0x5a; 32]).finalize().into();
    vault.prepare_update(&operator(), next_pcr4).unwrap();
    Some((temp, tpm, vault, next_pcr4))
}

/// specs/update/README.md, "The TPM across an update": prepared for the PCR
/// 4 the next version's UKI will measure, the vault unseals under that
/// version and, after a rollback, under this one, and under no other.
#[test]
fn prepared_for_an_update_the_vault_unseals_under_both_versions_and_no_other() {
    let Some((temp, tpm, mut vault, next_pcr4)) = prepared_for_update() else {
        return;
    };
    // A rotation keeps both versions.
    vault.rotate(&operator()).unwrap();
    vault.lock().unwrap();
    assert_eq!(Vault::status(&config(temp.path(), &tpm.tcti())).unwrap().state, SealState::Unsealable);

    let tpm = tpm.restart();
    tpm.extend_pcr_with(PcrHandle::Pcr4, 0x5a);
    assert_eq!(tpm.pcr_sha256(4), next_pcr4);
    let mut vault = open(config(temp.path(), &tpm.tcti())).expect("the next version unseals");
    assert_eq!(vault.get(&operator(), "github-pat").unwrap().expose(), b"ghp-secret");
    vault.lock().unwrap();

    let tpm = tpm.restart();
    let mut vault = open(config(temp.path(), &tpm.tcti())).expect("after a rollback this version unseals");
    assert_eq!(vault.get(&operator(), "github-pat").unwrap().expose(), b"ghp-secret");
    vault.lock().unwrap();

    let tpm = tpm.restart();
    tpm.extend_pcr_with(PcrHandle::Pcr4, 0x77);
    let cfg = config(temp.path(), &tpm.tcti());
    assert_eq!(Vault::status(&cfg).unwrap().state, SealState::PcrMismatch);
    assert!(matches!(open(cfg), Err(VaultError::PcrMismatch)));
}

/// specs/update/README.md, "The TPM across an update": once the updated
/// version is blessed, the vault is resealed to its boot alone, and the
/// version before it (which a boot menu or a renamed UKI could still start)
/// no longer unseals it.
#[test]
fn resealed_after_the_update_the_previous_version_no_longer_unseals() {
    let Some((temp, tpm, vault, _)) = prepared_for_update() else {
        return;
    };
    let branches = |vault: &Vault| match vault.current_status().unwrap().protection {
        Some(ProtectionKind::Tpm2 { branches, .. }) => branches,
        other => panic!("{other:?}"),
    };
    assert_eq!(branches(&vault), 2);
    vault.lock().unwrap();

    // The update's boot: it unseals, and reseals to itself alone.
    let tpm = tpm.restart();
    tpm.extend_pcr_with(PcrHandle::Pcr4, 0x5a);
    let mut vault = open(config(temp.path(), &tpm.tcti())).expect("the next version unseals");
    vault.reseal(&operator()).unwrap();
    assert_eq!(branches(&vault), 1);
    vault.lock().unwrap();

    // The previous version's boot: refused, until the recovery key.
    let tpm = tpm.restart();
    let cfg = config(temp.path(), &tpm.tcti());
    assert_eq!(Vault::status(&cfg).unwrap().state, SealState::PcrMismatch);
    assert!(matches!(open(cfg), Err(VaultError::PcrMismatch)));
}

#[test]
fn pcr_change_needs_the_recovery_key_then_reseal_restores_unsealing() {
    let Some((temp, tpm)) = tpm_in_temp_dir() else {
        return;
    };
    let cfg = config(temp.path(), &tpm.tcti());
    let (mut vault, recovery_key) = tpm_vault(temp.path(), &tpm);
    vault.set(&operator(), "github-pat", b"ghp-secret").unwrap();
    vault.lock().unwrap();

    // A different UKI would measure differently into PCR 4.
    tpm.extend_pcr(PcrHandle::Pcr4);
    let status = Vault::status(&cfg).unwrap();
    assert_eq!(status.state, SealState::PcrMismatch);
    assert_eq!(status.state.to_string(), "sealed: PCR mismatch");
    assert!(matches!(open(cfg.clone()), Err(VaultError::PcrMismatch)));

    let wrong = RecoveryKey::parse(&"0".repeat(64)).unwrap();
    assert!(matches!(Vault::recover(cfg.clone(), &wrong, &operator()), Err(VaultError::WrongRecoveryKey)));
    let shown = recovery_key.reveal();
    let typed = RecoveryKey::parse(&shown).unwrap();
    let mut vault = recover(cfg.clone(), &typed);
    assert_eq!(vault.get(&operator(), "github-pat").unwrap().expose(), b"ghp-secret");
    vault.reseal(&operator()).unwrap();
    vault.lock().unwrap();

    assert_eq!(Vault::status(&cfg).unwrap().state, SealState::Unsealable);
    let mut vault = open(cfg).unwrap();
    assert_eq!(vault.get(&operator(), "github-pat").unwrap().expose(), b"ghp-secret");
}

#[test]
fn keyring_fallback_without_a_tpm() {
    let temp = tempfile::tempdir().unwrap();
    let cfg = config(temp.path(), NO_TPM);
    assert!(matches!(
        Vault::init(cfg.clone(), InitProtection::Tpm, &operator()),
        Err(VaultError::Tpm(vault::TpmError::Unavailable { .. }))
    ));
    let passphrase = || Passphrase::new("correct horse battery staple".to_owned());
    let mut vault = passphrase_vault(&cfg, passphrase());
    vault.set(&operator(), "near-ai-token", b"near-token").unwrap();
    let status = Vault::status(&cfg).unwrap();
    assert_eq!(status.protection, Some(ProtectionKind::Passphrase));
    assert_eq!(status.state, SealState::Unsealed);
    assert!(matches!(vault.reseal(&operator()), Err(VaultError::NotTpmProtected)));
    drop(vault);

    // Still in the keyring: a second open needs no passphrase.
    let vault = open(cfg.clone()).unwrap();
    vault.lock().unwrap();
    assert_eq!(Vault::status(&cfg).unwrap().state, SealState::PassphraseRequired);
    assert!(matches!(open(cfg.clone()), Err(VaultError::PassphraseRequired)));
    let wrong = Passphrase::new("Tr0ub4dor&3".to_owned());
    assert!(matches!(Vault::unlock_with_passphrase(cfg.clone(), &wrong), Err(VaultError::WrongPassphrase)));
    let mut vault = Vault::unlock_with_passphrase(cfg, &passphrase()).unwrap();
    vault.set_policy(operator_policy());
    assert_eq!(vault.get(&operator(), "near-ai-token").unwrap().expose(), b"near-token");
}

fn flip_base64_field(path: &Path, field: &str) {
    let mut json: serde_json::Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    let mut bytes = BASE64.decode(json[field].as_str().unwrap()).unwrap();
    bytes[0] ^= 0x01;
    json[field] = BASE64.encode(bytes).into();
    fs::write(path, serde_json::to_vec(&json).unwrap()).unwrap();
}

#[test]
fn altered_secret_files_fail_authentication() {
    let Some((temp, tpm)) = tpm_in_temp_dir() else {
        return;
    };
    let (mut vault, _) = tpm_vault(temp.path(), &tpm);
    vault.set(&operator(), "alpha", b"alpha-value").unwrap();
    let secrets = temp.path().join("vault/secrets");
    let original = fs::read(secrets.join("alpha.enc")).unwrap();

    for field in ["encrypted_value", "iv", "auth_tag"] {
        flip_base64_field(&secrets.join("alpha.enc"), field);
        assert!(
            matches!(vault.get(&operator(), "alpha"), Err(VaultError::SecretAuthentication { version: 1, .. })),
            "flipped {field}"
        );
        fs::write(secrets.join("alpha.enc"), &original).unwrap();
    }
    assert_eq!(vault.get(&operator(), "alpha").unwrap().expose(), b"alpha-value");

    // Relabelling the file as another secret changes the bound ID.
    let mut json: serde_json::Value = serde_json::from_slice(&original).unwrap();
    json["secret_id"] = "beta".into();
    json["kdf"]["salt"] = BASE64.encode("beta:v1").into();
    fs::write(secrets.join("beta.enc"), serde_json::to_vec(&json).unwrap()).unwrap();
    assert!(matches!(vault.get(&operator(), "beta"), Err(VaultError::SecretAuthentication { .. })));
    // A salt that is not `<id>:v<version>` is refused outright.
    json["secret_id"] = "alpha".into();
    fs::write(secrets.join("alpha.enc"), serde_json::to_vec(&json).unwrap()).unwrap();
    assert!(matches!(vault.get(&operator(), "alpha"), Err(VaultError::Corrupt { .. })));
}

#[test]
fn rotation_round_trip_and_rollback_when_the_tpm_fails() {
    let Some((temp, tpm)) = tpm_in_temp_dir() else {
        return;
    };
    let (mut vault, recovery_key) = tpm_vault(temp.path(), &tpm);
    vault.set(&operator(), "alpha", b"a1").unwrap();
    vault.set(&operator(), "alpha", b"a2").unwrap();
    vault.set(&operator(), "beta", b"b1").unwrap();
    let check = |vault: &mut Vault| {
        assert_eq!(vault.get_version(&operator(), "alpha", 1).unwrap().expose(), b"a1");
        assert_eq!(vault.get(&operator(), "alpha").unwrap().expose(), b"a2");
        assert_eq!(vault.get(&operator(), "beta").unwrap().expose(), b"b1");
    };

    vault.rotate(&operator()).unwrap();
    assert_eq!(vault.current_status().unwrap().generation, Some(2));
    check(&mut vault);
    let history = vault.history(&operator(), "alpha").unwrap();
    assert_eq!(history.iter().map(|info| info.version).collect::<Vec<_>>(), [1, 2]);
    assert!(history.iter().all(|info| info.key_generation == 2));

    // The TPM disappears mid-operation: sealing the new key fails.
    let mut tpm = tpm;
    tpm.stop();
    let master = temp.path().join("vault/master-key.enc");
    let before = fs::read(&master).unwrap();
    let error = vault.rotate(&operator()).unwrap_err();
    assert!(matches!(error, VaultError::RotationRolledBack { stage: "seal", .. }), "{error}");
    assert_eq!(fs::read(&master).unwrap(), before);
    check(&mut vault);
    vault.lock().unwrap();

    // Same TPM state, fresh process: the generation-2 key unseals.
    let tpm = tpm.restart();
    let cfg = config(temp.path(), &tpm.tcti());
    let mut vault = open(cfg.clone()).unwrap();
    check(&mut vault);
    vault.lock().unwrap();
    // The recovery key survives rotation.
    let mut vault = recover(cfg, &recovery_key);
    check(&mut vault);
}

#[test]
fn reads_are_authorized_and_the_audit_chain_detects_tampering() {
    let temp = tempfile::tempdir().unwrap();
    let cfg = config(temp.path(), NO_TPM);
    let mut vault = passphrase_vault(&cfg, Passphrase::new("pw".to_owned()));
    let agent = Caller::new("security-agent");
    vault.set_policy(operator_policy().grant(
        "security-agent",
        VaultCapability::SecretRead,
        SecretScope::Only(vec!["openai-api-key".to_owned()]),
    ));
    vault.set(&operator(), "openai-api-key", b"sk-agent").unwrap();
    vault.set(&operator(), "github-pat", b"ghp-operator").unwrap();
    assert_eq!(vault.get(&agent, "openai-api-key").unwrap().expose(), b"sk-agent");
    assert!(matches!(vault.get(&agent, "github-pat"), Err(VaultError::AccessDenied { .. })));
    assert!(matches!(vault.list(&agent), Err(VaultError::AccessDenied { .. })));
    assert!(matches!(vault.rotate(&agent), Err(VaultError::AccessDenied { .. })));
    vault.set_policy(AccessPolicy::deny_all());
    assert!(matches!(vault.get(&operator(), "github-pat"), Err(VaultError::AccessDenied { .. })));

    let report = vault.verify_audit_log().unwrap();
    assert_eq!(report.first_broken, None);
    assert_eq!(report.verified_entries, 8);
    let log = fs::read_to_string(&cfg.audit_log).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let denied: Vec<vault::AuditEntry> = lines
        .iter()
        .map(|line| serde_json::from_str::<vault::AuditEntry>(line).unwrap())
        .filter(|entry| entry.outcome == "denied")
        .collect();
    assert_eq!(denied.len(), 4);
    assert_eq!(denied[0].caller, "security-agent");
    assert_eq!(denied[0].secret_id.as_deref(), Some("github-pat"));

    // Rewrite a denial as allowed.
    let forged = log.replacen("\"outcome\":\"denied\"", "\"outcome\":\"allowed\"", 1);
    fs::write(&cfg.audit_log, &forged).unwrap();
    let broken_line = lines.iter().position(|line| line.contains("denied")).unwrap() as u64 + 1;
    let report = vault.verify_audit_log().unwrap();
    assert_eq!(report.first_broken.map(|(line, _)| line), Some(broken_line));

    // Drop an entry.
    let mut shortened = lines.clone();
    shortened.remove(2);
    fs::write(&cfg.audit_log, shortened.join("\n") + "\n").unwrap();
    assert_eq!(vault.verify_audit_log().unwrap().first_broken.map(|(line, _)| line), Some(3));
}

/// A rotation cuts off a reader: `secret-read` covers the current version
/// only, earlier ones need `secret-read-history` (specs/vault/README.md,
/// "Who may do what"), and each refusal is audited with the version asked.
#[test]
fn earlier_versions_need_secret_read_history() {
    let temp = tempfile::tempdir().unwrap();
    let cfg = config(temp.path(), NO_TPM);
    let mut vault = passphrase_vault(&cfg, Passphrase::new("pw".to_owned()));
    let reader = Caller::new("wasm-daemon");
    let historian = Caller::new("auditor");
    vault.set_policy(
        operator_policy()
            .grant("wasm-daemon", VaultCapability::SecretRead, SecretScope::Prefix("tool-".into()))
            .grant("auditor", VaultCapability::SecretRead, SecretScope::All)
            .grant("auditor", VaultCapability::SecretReadHistory, SecretScope::Only(vec!["tool-a".into()])),
    );
    vault.set(&operator(), "tool-a", b"old").unwrap();
    vault.set(&operator(), "tool-a", b"new").unwrap();
    vault.set(&operator(), "tool-b", b"b1").unwrap();
    vault.set(&operator(), "tool-b", b"b2").unwrap();

    assert_eq!(vault.get(&reader, "tool-a").unwrap().expose(), b"new");
    assert_eq!(vault.get_version(&reader, "tool-a", 2).unwrap().expose(), b"new");
    for version in [1, 3] {
        match vault.get_version(&reader, "tool-a", version) {
            Err(VaultError::EarlierVersionDenied { caller, id, version: asked, current }) => {
                assert_eq!((caller.as_str(), id.as_str(), asked, current), ("wasm-daemon", "tool-a", version, 2));
            }
            other => panic!("version {version}: {:?}", other.map(|v| v.expose().to_vec())),
        }
    }
    // A caller that may not read the secret at all is refused as before,
    // before anything about its versions is looked at.
    assert!(matches!(vault.get_version(&reader, "provider-x", 1), Err(VaultError::AccessDenied { .. })));
    // The grant is per secret.
    assert_eq!(vault.get_version(&historian, "tool-a", 1).unwrap().expose(), b"old");
    assert!(matches!(vault.get_version(&historian, "tool-b", 1), Err(VaultError::EarlierVersionDenied { .. })));
    assert_eq!(vault.get_version(&operator(), "tool-b", 1).unwrap().expose(), b"b1");

    let log = fs::read_to_string(&cfg.audit_log).unwrap();
    let denied: Vec<vault::AuditEntry> = log
        .lines()
        .map(|line| serde_json::from_str::<vault::AuditEntry>(line).unwrap())
        .filter(|entry| entry.outcome == "denied" && entry.capability == "secret-read-history")
        .collect();
    assert_eq!(denied.len(), 3, "{log}");
    assert_eq!(denied[0].caller, "wasm-daemon");
    assert_eq!(denied[0].version, Some(1));
}

#[test]
fn system_manifest_detects_changed_missing_and_forged_entries() {
    let temp = tempfile::tempdir().unwrap();
    let cfg = config(temp.path(), NO_TPM);
    let mut vault = passphrase_vault(&cfg, Passphrase::new("pw".to_owned()));
    let root = temp.path().join("root");
    fs::create_dir_all(root.join("seccomp")).unwrap();
    fs::write(root.join("seccomp/whitelist.json"), b"{}").unwrap();
    fs::write(root.join("quotas.json"), b"[1]").unwrap();
    let files = [Path::new("seccomp/whitelist.json"), Path::new("quotas.json")];
    let manifest = vault.write_system_manifest(&operator(), &root, &files).unwrap();
    assert_eq!(manifest.files.len(), 2);
    assert!(vault.verify_system_manifest(&root).unwrap().is_clean());
    assert!(vault.write_system_manifest(&operator(), &root, &[Path::new("../etc/passwd")]).is_err());

    fs::write(root.join("quotas.json"), b"[2]").unwrap();
    fs::remove_file(root.join("seccomp/whitelist.json")).unwrap();
    let report = vault.verify_system_manifest(&root).unwrap();
    assert_eq!(report.mismatched, ["quotas.json"]);
    assert_eq!(report.missing, ["seccomp/whitelist.json"]);

    // Re-pointing the manifest at the changed file needs the vault's key.
    let path = cfg.vault_dir.join("system-manifest.json");
    let mut json: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    json["files"]["quotas.json"] = "ca2ebdf97d7469496b1f4b78958f9dc8447efdcb623953fee7b6996b762f6fff".into();
    fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
    assert!(matches!(vault.verify_system_manifest(&root), Err(VaultError::ManifestTampered { .. })));
}

#[test]
fn canary_plaintext_never_reaches_any_file() {
    const CANARY: &[u8] = b"CANARY-7f3e9b1c-never-on-disk";
    let Some((temp, tpm)) = tpm_in_temp_dir() else {
        return;
    };
    let cfg = config(temp.path(), &tpm.tcti());
    let (mut vault, recovery_key) = tpm_vault(temp.path(), &tpm);
    vault.set(&operator(), "canary", CANARY).unwrap();
    vault.set(&operator(), "canary", CANARY).unwrap();
    assert_eq!(vault.get(&operator(), "canary").unwrap().expose(), CANARY);
    assert_eq!(vault.get_version(&operator(), "canary", 1).unwrap().expose(), CANARY);
    vault.list(&operator()).unwrap();
    vault.history(&operator(), "canary").unwrap();
    vault.rotate(&operator()).unwrap();
    vault.reseal(&operator()).unwrap();
    vault.lock().unwrap();
    let mut vault = recover(cfg.clone(), &recovery_key);
    assert_eq!(vault.get(&operator(), "canary").unwrap().expose(), CANARY);
    vault.remove(&operator(), "canary").unwrap();
    assert!(matches!(vault.get(&operator(), "canary"), Err(VaultError::SecretNotFound { .. })));

    let files = files_under(temp.path());
    assert!(files.iter().any(|path| path.ends_with("vault-audit.log")));
    assert!(files.iter().any(|path| path.ends_with("master-key.enc")));
    let recovery_text = recovery_key.reveal();
    for path in files {
        let contents = fs::read(&path).unwrap();
        for needle in [CANARY, recovery_text.as_bytes()] {
            assert!(
                !contents.windows(needle.len()).any(|window| window == needle),
                "plaintext found in {}",
                path.display()
            );
        }
    }
}

/// `Vault::check` (`clawctl vault check`): every version of every secret
/// decrypts and the audit chain verifies; an altered earlier version and an
/// edited audit line are each named.
#[test]
fn check_reads_every_version_and_the_audit_chain() {
    let Some((temp, tpm)) = tpm_in_temp_dir() else {
        return;
    };
    let (mut vault, _) = tpm_vault(temp.path(), &tpm);
    vault.set(&operator(), "alpha", b"one").unwrap();
    vault.set(&operator(), "alpha", b"two").unwrap();
    vault.set(&operator(), "beta", b"three").unwrap();
    let clean = vault.check(&operator()).unwrap();
    assert_eq!((clean.secrets, clean.versions), (2, 3));
    assert!(clean.problems.is_empty(), "{:?}", clean.problems);
    assert!(clean.audit_entries >= 4);
    assert!(vault.check(&Caller::new("agent-loop")).is_err());

    flip_base64_field(&temp.path().join("vault/secrets/history/alpha/v1.enc"), "auth_tag");
    let audit = temp.path().join("log/vault-audit.log");
    let text = fs::read_to_string(&audit).unwrap();
    fs::write(&audit, text.replacen("\"set\"", "\"get\"", 1)).unwrap();
    let broken = vault.check(&operator()).unwrap();
    assert_eq!(broken.versions, 2);
    assert_eq!(broken.problems.len(), 2, "{:?}", broken.problems);
    assert!(broken.problems[0].starts_with("alpha version 1: "), "{:?}", broken.problems);
    assert!(broken.problems[1].starts_with("audit log line "), "{:?}", broken.problems);
}

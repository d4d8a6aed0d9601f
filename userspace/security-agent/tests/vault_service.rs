//! The real `clawos-security-agent` binary hosting a vault sealed by a
//! real swtpm, driven over IPC on its own socket names: the operator
//! initializes the vault and stores secrets; components (client processes
//! under their own UIDs) read what the policy grants and are refused the
//! rest; a changed PCR leaves the restarted agent degraded until the
//! recovery key and a reseal; and no secret value, nor the recovery key,
//! ends up in any file or in the daemon's log. A component reads only the
//! current version of a secret, the operator every version
//! (specs/vault/README.md, "Who may do what").
//!
//! Needs root (to run the component clients under distinct UIDs) and swtpm.

use std::io::Read;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use clawos_ipc::{ClientOptions, ComponentId, ErrorCode, IpcClient, Object, Principal};
use serde_json::{json, Value};
use tss_esapi::handles::PcrHandle;

/// The vault's own test swtpm, started the same way for both crates' tests.
#[path = "../../vault/tests/common/swtpm.rs"]
mod swtpm;
use swtpm::Swtpm;

/// UIDs the component clients run under, mapped in the test's ACL.
const AGENT_LOOP_UID: u32 = 61_301;
const FS_ENGINE_UID: u32 = 61_302;
const WASM_DAEMON_UID: u32 = 61_303;
/// Set in a re-executed copy of this test binary: the request it makes as a component.
const PEER_REQUEST_ENV: &str = "CLAWOS_VAULT_TEST_PEER_REQUEST";
/// Long enough for a TPM seal plus a 600,000-round KDF in a debug build.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// One test setup: config, ACL, vault and logs under a temporary directory.
struct Setup {
    dir: tempfile::TempDir,
    ipc_acl: String,
    prefix: String,
    tcti: String,
}

/// A running security agent, stopped on drop.
struct Agent {
    child: Child,
}

impl Agent {
    fn stop(mut self) {
        stop(&mut self.child);
    }
}

fn stop(child: &mut Child) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.wait();
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            stop(&mut self.child);
        }
    }
}

impl Setup {
    /// `name` keeps the socket names of tests running at once apart.
    fn new(tcti: String, name: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).display().to_string();
        std::fs::write(
            dir.path().join("ipc-acl.toml"),
            format!(
                r#"
[identity]
operator_uids = [0]
uids = {{ "{AGENT_LOOP_UID}" = "agent-loop", "{FS_ENGINE_UID}" = "fs-engine", "{WASM_DAEMON_UID}" = "wasm-daemon" }}

[[allow]]
senders = ["operator"]
recipients = ["*"]
methods = ["*"]

# As in the image: the agent loop may ask for secrets; the vault policy decides which.
# vault_init is let through here only to show the service refuses it itself.
[[allow]]
senders = ["agent-loop"]
recipients = ["security-agent"]
methods = ["secret_get", "vault_init"]

[[allow]]
senders = ["wasm-daemon"]
recipients = ["security-agent"]
methods = ["secret_get"]
"#
            ),
        )
        .unwrap();
        let prefix = format!("clawos-vault-test-{}-{name}-", std::process::id());
        let setup = Setup { ipc_acl: path("ipc-acl.toml"), dir, prefix, tcti };
        setup.write_config("");
        setup
    }

    /// security-agent.toml, with `vault_extra` appended to `[component.vault]`.
    fn write_config(&self, vault_extra: &str) {
        let path = |name: &str| self.dir.path().join(name).display().to_string();
        std::fs::write(
            self.dir.path().join("security-agent.toml"),
            format!(
                "[ipc]\npolicy_path = \"{}\"\n\n[component.vault]\nvault_dir = \"{}\"\naudit_log = \"{}\"\nkeyring = \"process\"\n{vault_extra}",
                self.ipc_acl,
                path("vault"),
                path("log/audit.log"),
            ),
        )
        .unwrap();
    }

    /// Starts the agent (debug logging, to catch any leak) and waits for its socket.
    fn start_agent(&self, run: u32) -> Agent {
        let log = std::fs::File::create(self.dir.path().join(format!("agent-{run}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_clawos-security-agent"))
            .env("CLAWOS_CONFIG_DIR", self.dir.path())
            .env("CLAWOS_IPC_SOCKET_PREFIX", &self.prefix)
            .env("CLAWOS_VAULT_TCTI", &self.tcti)
            .env("RUST_LOG", "debug")
            .env_remove("JOURNAL_STREAM")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start clawos-security-agent");
        let mut agent = Agent { child };
        let deadline = Instant::now() + Duration::from_secs(20);
        let socket = format!("{}security-agent", self.prefix);
        let address = std::os::unix::net::SocketAddr::from_abstract_name(socket.as_bytes()).unwrap();
        while std::os::unix::net::UnixStream::connect_addr(&address).is_err() {
            assert!(agent.child.try_wait().unwrap().is_none(), "the agent exited: {}", self.log());
            assert!(Instant::now() < deadline, "the agent did not listen: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        agent
    }

    fn log(&self) -> String {
        let mut text = String::new();
        for entry in std::fs::read_dir(self.dir.path()).unwrap().flatten() {
            if entry.file_name().to_string_lossy().ends_with(".log") {
                text.push_str(&std::fs::read_to_string(entry.path()).unwrap());
            }
        }
        text
    }

    /// One request as `component` (or `operator`, under UID 0), from a copy
    /// of this test binary running under that component's UID: `Ok(result)`
    /// or `Err((code, message))`.
    fn call_as(&self, uid: u32, component: &str, method: &str, params: Value) -> Result<Value, (ErrorCode, String)> {
        let request = json!({ "component": component, "method": method, "params": params });
        let output = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "peer_client", "--ignored", "--nocapture", "--test-threads=1"])
            .env(PEER_REQUEST_ENV, request.to_string())
            .env("CLAWOS_IPC_SOCKET_PREFIX", &self.prefix)
            .uid(uid)
            .gid(uid)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let answer: Value = stdout
            .lines()
            .find_map(|line| line.split_once("PEER-ANSWER ").map(|(_, answer)| answer))
            .and_then(|line| serde_json::from_str(line).ok())
            .unwrap_or_else(|| panic!("peer client failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
        match answer.get("error_code") {
            None => Ok(answer["result"].clone()),
            Some(code) => {
                Err((serde_json::from_value(code.clone()).unwrap(), answer["message"].as_str().unwrap().to_owned()))
            }
        }
    }
}

/// Runs only when re-executed by [`Setup::call_as`]: makes one request as
/// the component it is told to be and prints the answer.
#[tokio::test]
#[ignore = "a client process started by the vault service test under a component UID"]
async fn peer_client() {
    let request: Value =
        serde_json::from_str(&std::env::var(PEER_REQUEST_ENV).expect("run by the service test only")).unwrap();
    let principal: Principal = request["component"].as_str().unwrap().parse().unwrap();
    let (client, _events) =
        IpcClient::connect(ComponentId::SecurityAgent, ClientOptions::new(principal)).await.unwrap();
    let params = request["params"].as_object().cloned().unwrap_or_default();
    let answer = match client.call(request["method"].as_str().unwrap(), params, Some(CALL_TIMEOUT)).await {
        Ok(result) => json!({ "result": result }),
        Err(error) => json!({ "error_code": error.code(), "message": error.to_string() }),
    };
    println!("PEER-ANSWER {answer}");
}

async fn operator() -> IpcClient {
    let (client, _events) =
        IpcClient::connect(ComponentId::SecurityAgent, ClientOptions::new(Principal::Operator)).await.unwrap();
    client
}

fn params(value: Value) -> Object {
    value.as_object().cloned().unwrap()
}

async fn call(client: &IpcClient, method: &str, value: Value) -> Result<Object, clawos_ipc::CallError> {
    client.call(method, params(value), Some(CALL_TIMEOUT)).await
}

async fn get(client: &IpcClient, id: &str) -> Result<Vec<u8>, clawos_ipc::CallError> {
    let result = call(client, "secret_get", json!({ "secret_id": id })).await?;
    Ok(BASE64.decode(result["value_base64"].as_str().unwrap()).unwrap())
}

fn set_params(id: &str, value: &str) -> Value {
    json!({ "secret_id": id, "value_base64": BASE64.encode(value) })
}

/// Every regular file under `dir`, recursively, as bytes.
fn all_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(all_files(&path));
        } else {
            let mut bytes = Vec::new();
            std::fs::File::open(&path).unwrap().read_to_end(&mut bytes).unwrap();
            files.push((path, bytes));
        }
    }
    files
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

#[tokio::test(flavor = "current_thread")]
async fn vault_service_end_to_end() {
    assert!(nix::unistd::geteuid().is_root(), "this test runs component clients under their own UIDs and needs root");
    let tpm_state = tempfile::tempdir().unwrap();
    let Some(tpm) = Swtpm::start(tpm_state.path()) else { return };
    let setup = Setup::new(tpm.tcti(), "e2e");
    // The operator client below is this process; the other tests run every
    // client as a child process with its own environment, so no thread
    // reads this variable concurrently.
    std::env::set_var(clawos_ipc::socket::SOCKET_PREFIX_ENV, &setup.prefix);
    // Unique per run, so a hit can only come from this run.
    let canary_v1 = format!("canary-v1-{:016x}", rand_u64());
    let canary_v2 = format!("canary-v2-{:016x}", rand_u64());
    let tool_canary = format!("canary-tool-{:016x}", rand_u64());

    // --- a fresh appliance: no vault, and that is not a fault ---
    let agent = setup.start_agent(1);
    let op = operator().await;
    let status = call(&op, "vault_status", json!({})).await.unwrap();
    assert_eq!(status["state"], "not-initialized", "{status:?}");
    assert_eq!(status["degraded_reason"], Value::Null);
    assert_eq!(call(&op, "health_check", json!({})).await.unwrap()["status"], "ok");
    assert_eq!(get(&op, "provider-openai").await.unwrap_err().code(), ErrorCode::Enoent);

    // --- init sealed by the TPM, set, get ---
    let init = call(&op, "vault_init", json!({ "protection": "tpm" })).await.unwrap();
    assert_eq!(init["protection"], "tpm2", "{init:?}");
    assert_eq!(init["pcrs"], json!([4, 12]));
    assert_eq!(init["state"], "unsealed");
    let recovery_key = init["recovery_key"].as_str().unwrap().to_owned();
    assert_eq!(recovery_key.len(), 64 + 15, "16 dash-separated groups of 4 hex digits");
    let again = call(&op, "vault_init", json!({ "protection": "tpm" })).await.unwrap_err();
    assert_eq!(again.code(), ErrorCode::Eproto, "{again}");

    let set = call(&op, "secret_set", set_params("provider-openai", &canary_v1)).await.unwrap();
    assert_eq!(set["version"], 1);
    let set = call(&op, "secret_set", set_params("provider-openai", &canary_v2)).await.unwrap();
    assert_eq!(set["version"], 2);
    call(&op, "secret_set", set_params("tool-github", &tool_canary)).await.unwrap();
    assert_eq!(get(&op, "provider-openai").await.unwrap(), canary_v2.as_bytes());
    let first = call(&op, "secret_get", json!({ "secret_id": "provider-openai", "version": 1 })).await.unwrap();
    assert_eq!(BASE64.decode(first["value_base64"].as_str().unwrap()).unwrap(), canary_v1.as_bytes());
    let list = call(&op, "secret_list", json!({})).await.unwrap();
    let ids: Vec<&str> = list["secrets"].as_array().unwrap().iter().map(|s| s["secret_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["provider-openai", "tool-github"]);
    assert!(!Value::Object(list.clone()).to_string().contains("canary"), "list shows no values");
    let history = call(&op, "secret_history", json!({ "secret_id": "provider-openai" })).await.unwrap();
    assert_eq!(history["versions"].as_array().unwrap().len(), 2);
    let bad = call(&op, "secret_set", json!({ "secret_id": "Bad/ID", "value_base64": "eA==" })).await.unwrap_err();
    assert_eq!(bad.code(), ErrorCode::Eproto);
    let typo = call(&op, "secret_get", json!({ "secret_id": "provider-openai", "verison": 1 })).await.unwrap_err();
    assert_eq!(typo.code(), ErrorCode::Eproto, "misspelt params are refused, not ignored");

    // --- components: what the policy grants, and nothing else ---
    let read = setup.call_as(AGENT_LOOP_UID, "agent-loop", "secret_get", json!({ "secret_id": "provider-openai" }));
    let value = BASE64.decode(read.unwrap()["value_base64"].as_str().unwrap()).unwrap();
    assert_eq!(value, canary_v2.as_bytes(), "the agent loop reads provider keys");
    let denied = setup.call_as(AGENT_LOOP_UID, "agent-loop", "secret_get", json!({ "secret_id": "tool-github" }));
    let (code, message) = denied.unwrap_err();
    assert_eq!(code, ErrorCode::Eperm, "the vault policy refuses tool credentials to the agent loop: {message}");
    let (code, _) =
        setup.call_as(AGENT_LOOP_UID, "agent-loop", "vault_init", json!({ "protection": "tpm" })).unwrap_err();
    assert_eq!(code, ErrorCode::Eperm, "administration is the operator's");
    let (code, message) =
        setup.call_as(FS_ENGINE_UID, "fs-engine", "secret_get", json!({ "secret_id": "provider-openai" })).unwrap_err();
    assert_eq!(code, ErrorCode::Eperm, "the IPC ACL refuses fs-engine: {message}");

    let audit = std::fs::read_to_string(setup.dir.path().join("log/audit.log")).unwrap();
    let entries: Vec<Value> = audit.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert!(entries
        .iter()
        .any(|e| e["caller"] == "agent-loop" && e["secret_id"] == "provider-openai" && e["outcome"] == "allowed"));
    assert!(entries
        .iter()
        .any(|e| e["caller"] == "agent-loop" && e["secret_id"] == "tool-github" && e["outcome"] == "denied"));
    assert!(entries.iter().any(|e| e["caller"] == "operator" && e["operation"] == "init"));

    call(&op, "secret_remove", json!({ "secret_id": "tool-github" })).await.unwrap();
    assert_eq!(get(&op, "tool-github").await.unwrap_err().code(), ErrorCode::Enoent);
    drop(op);
    agent.stop();

    // --- a changed boot state: sealed, degraded, recovered, resealed ---
    // A boot with an overriding kernel command line measures differently into PCR 12.
    tpm.extend_pcr(PcrHandle::Pcr12);
    let agent = setup.start_agent(2);
    let op = operator().await;
    let health = call(&op, "health_check", json!({})).await.unwrap();
    assert_eq!(health["status"], "degraded", "{health:?}");
    assert!(health["reason"].as_str().unwrap().contains("PCR mismatch"), "{health:?}");
    let status = call(&op, "vault_status", json!({})).await.unwrap();
    assert_eq!(status["state"], "pcr-mismatch", "{status:?}");
    assert_eq!(get(&op, "provider-openai").await.unwrap_err().code(), ErrorCode::Eperm);
    let wrong = "0000-".repeat(15) + "0000";
    let refused = call(&op, "vault_recover", json!({ "recovery_key": wrong })).await.unwrap_err();
    assert_eq!(refused.code(), ErrorCode::Eperm, "{refused}");
    let recovered = call(&op, "vault_recover", json!({ "recovery_key": recovery_key })).await.unwrap();
    assert_eq!(recovered["state"], "unsealed");
    assert_eq!(recovered["degraded_reason"], Value::Null);
    assert_eq!(call(&op, "health_check", json!({})).await.unwrap()["status"], "ok");
    assert_eq!(get(&op, "provider-openai").await.unwrap(), canary_v2.as_bytes());
    call(&op, "vault_reseal", json!({})).await.unwrap();
    drop(op);
    agent.stop();

    // --- the next start unseals by itself; rotation keeps everything readable ---
    let agent = setup.start_agent(3);
    let op = operator().await;
    let status = call(&op, "vault_status", json!({})).await.unwrap();
    assert_eq!(status["state"], "unsealed", "{status:?}");
    assert_eq!(status["generation"], 1);
    let rotated = call(&op, "vault_rotate", json!({})).await.unwrap();
    assert_eq!(rotated["generation"], 2);
    assert_eq!(get(&op, "provider-openai").await.unwrap(), canary_v2.as_bytes());
    drop(op);
    agent.stop();

    // --- the canary: no value and no recovery key in any file or log ---
    let files = all_files(setup.dir.path());
    assert!(files.iter().any(|(path, _)| path.ends_with("agent-1.log")));
    assert!(files.iter().any(|(path, _)| path.starts_with(setup.dir.path().join("vault/secrets"))));
    let key_digits = recovery_key.replace('-', "");
    for (path, bytes) in &files {
        for secret in
            [canary_v1.as_str(), canary_v2.as_str(), tool_canary.as_str(), recovery_key.as_str(), key_digits.as_str()]
        {
            assert!(!contains(bytes, secret.as_bytes()), "{} holds a secret in plaintext", path.display());
            assert!(!contains(bytes, BASE64.encode(secret).as_bytes()), "{} holds a secret in base64", path.display());
        }
    }
}

/// A rotation must cut off a reader holding an old credential's version:
/// any component that may read a secret reads its current version only;
/// earlier versions are the operator's, unless the vault policy grants
/// `secret-read-history` on that secret.
#[tokio::test(flavor = "current_thread")]
async fn earlier_versions_are_the_operators_unless_the_policy_grants_them() {
    assert!(nix::unistd::geteuid().is_root(), "this test runs component clients under their own UIDs and needs root");
    let tpm_state = tempfile::tempdir().unwrap();
    let Some(tpm) = Swtpm::start(tpm_state.path()) else { return };
    let setup = Setup::new(tpm.tcti(), "history");
    let agent = setup.start_agent(1);
    let operator = |method: &str, params: Value| setup.call_as(0, "operator", method, params);
    let as_wasm_daemon = |params: Value| setup.call_as(WASM_DAEMON_UID, "wasm-daemon", "secret_get", params);
    let value =
        |result: Value| String::from_utf8(BASE64.decode(result["value_base64"].as_str().unwrap()).unwrap()).unwrap();

    operator("vault_init", json!({ "protection": "tpm" })).unwrap();
    // Version 1 was compromised and rotated away: version 2 is current.
    assert_eq!(operator("secret_set", set_params("tool-github", "leaked-v1")).unwrap()["version"], 1);
    assert_eq!(operator("secret_set", set_params("tool-github", "rotated-v2")).unwrap()["version"], 2);

    // wasm-daemon may read tool-* (the default policy): the current version,
    // whether named or not.
    assert_eq!(value(as_wasm_daemon(json!({ "secret_id": "tool-github" })).unwrap()), "rotated-v2");
    assert_eq!(value(as_wasm_daemon(json!({ "secret_id": "tool-github", "version": 2 })).unwrap()), "rotated-v2");
    // Not the old one.
    let refused = as_wasm_daemon(json!({ "secret_id": "tool-github", "version": 1 }));
    let (code, message) = match refused {
        Err(refused) => refused,
        Ok(result) => panic!("wasm-daemon read the rotated-away version: {:?}", value(result)),
    };
    assert_eq!(code, ErrorCode::Eperm, "{message}");
    for needed in ["wasm-daemon", "version 1", "tool-github", "current version is 2", "secret-read-history", "operator"]
    {
        assert!(message.contains(needed), "the refusal says why ({needed:?}): {message}");
    }
    // The operator reads every version.
    assert_eq!(
        value(operator("secret_get", json!({ "secret_id": "tool-github", "version": 1 })).unwrap()),
        "leaked-v1"
    );
    assert_eq!(value(operator("secret_get", json!({ "secret_id": "tool-github" })).unwrap()), "rotated-v2");

    // The refusal is in the vault's audit log, with the version asked for.
    let audit = std::fs::read_to_string(setup.dir.path().join("log/audit.log")).unwrap();
    let entries: Vec<Value> = audit.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert!(
        entries.iter().any(|e| e["caller"] == "wasm-daemon"
            && e["capability"] == "secret-read-history"
            && e["secret_id"] == "tool-github"
            && e["version"] == 1
            && e["outcome"] == "denied"),
        "{audit}"
    );
    agent.stop();

    // A policy that says otherwise: the grant names the capability and the secret.
    setup.write_config(
        r#"grants = [
  { identity = "wasm-daemon", capability = "secret-read", secrets = { prefix = "tool-" } },
  { identity = "wasm-daemon", capability = "secret-read-history", secrets = { only = ["tool-github"] } },
]
"#,
    );
    let agent = setup.start_agent(2);
    assert_eq!(operator("secret_set", set_params("tool-other", "other-v1")).unwrap()["version"], 1);
    assert_eq!(operator("secret_set", set_params("tool-other", "other-v2")).unwrap()["version"], 2);
    assert_eq!(value(as_wasm_daemon(json!({ "secret_id": "tool-github", "version": 1 })).unwrap()), "leaked-v1");
    let (code, message) = as_wasm_daemon(json!({ "secret_id": "tool-other", "version": 1 })).unwrap_err();
    assert_eq!(code, ErrorCode::Eperm, "the grant covers tool-github only: {message}");
    agent.stop();
}

fn rand_u64() -> u64 {
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom").unwrap().read_exact(&mut bytes).unwrap();
    u64::from_ne_bytes(bytes)
}

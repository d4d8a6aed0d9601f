//! The server's protocol enforcement, over real abstract sockets.

mod common;

use std::time::Duration;

use clawos_ipc::server::{HANDSHAKE_MAX_BYTES, HANDSHAKE_TIMEOUT, MAX_CONNECTIONS_PER_UID};
use clawos_ipc::version::negotiate;
use clawos_ipc::{ClientOptions, ComponentId, ErrorCode, IpcClient, Principal, ProtocolVersion, RateLimit};
use common::{connect_as, request, start_server, RawPeer, AGENT_LOOP_POLICY};
use serde_json::{json, Value};

const V1_0: ProtocolVersion = ProtocolVersion::V1_0;

fn v(text: &str) -> ProtocolVersion {
    text.parse().unwrap()
}

async fn client(
    name: &str,
    identity: Principal,
    versions: Vec<ProtocolVersion>,
) -> Result<IpcClient, clawos_ipc::ConnectError> {
    let stream = clawos_ipc::socket::connect_abstract(name).unwrap();
    let options = ClientOptions { protocol_versions: versions, ..ClientOptions::new(identity) };
    IpcClient::handshake(stream, ComponentId::Scheduler, options).await.map(|(client, _)| client)
}

fn agent_loop() -> Principal {
    Principal::Component(ComponentId::AgentLoop)
}

/// The spec's version matrix over a real socket: for every client and server
/// version in it, the handshake agrees on what `negotiate` gives (checked
/// against the matrix row by row in src/version.rs) or fails with EPROTO.
#[tokio::test]
async fn version_matrix_over_the_wire() {
    let versions = ["1.0", "1.1", "2.0"];
    let cases = versions.iter().flat_map(|&client| versions.iter().map(move |&server| (client, server)));
    for (client_version, server_version) in cases {
        let expected = negotiate(&v(client_version).speakable(), &v(server_version).speakable());
        let name = start_server(AGENT_LOOP_POLICY, &v(server_version).speakable(), RateLimit::default());
        match (client(&name, agent_loop(), v(client_version).speakable()).await, expected) {
            (Ok(connected), Some(agreed)) => assert_eq!(connected.version(), agreed),
            (Err(error), None) => {
                let text = error.to_string();
                assert!(text.contains("EPROTO") && text.contains("no common protocol version"), "{text}");
            }
            (outcome, expected) => panic!(
                "client {client_version} / server {server_version}: {:?} vs {expected:?}",
                outcome.map(|c| c.version())
            ),
        }
    }
}

#[tokio::test]
async fn version_mismatch_closes_the_connection() {
    let name = start_server(AGENT_LOOP_POLICY, &[V1_0], RateLimit::default());
    let mut peer = RawPeer::connect(&name);
    peer.send_json(&request("agent-loop", "scheduler", "hello", json!({"supported_versions": ["2.0"]}))).await;
    let answer = peer.recv().await.unwrap();
    assert_eq!(answer["payload"]["error_code"], 5);
    assert_eq!(peer.recv().await, None, "connection must close");
}

#[tokio::test]
async fn first_message_must_be_hello() {
    let name = start_server(AGENT_LOOP_POLICY, &[V1_0], RateLimit::default());
    let mut peer = RawPeer::connect(&name);
    let ping = request("agent-loop", "scheduler", "ping", json!({}));
    peer.send_json(&ping).await;
    let answer = peer.recv().await.unwrap();
    assert_eq!(answer["payload"]["error_code"], 5, "{answer}");
    assert_eq!(answer["correlation_id"], ping["message_id"]);
    assert_eq!(peer.recv().await, None);
}

#[tokio::test]
async fn correlated_call_and_unknown_method() {
    let name = start_server(AGENT_LOOP_POLICY, &[V1_0], RateLimit::default());
    let connected = client(&name, agent_loop(), vec![V1_0]).await.unwrap();
    assert_eq!(connected.server_info()["component"], "scheduler");
    let mut params = clawos_ipc::Object::new();
    params.insert("n".into(), 7.into());
    assert_eq!(connected.call("echo", params.clone(), None).await.unwrap(), params);

    let mut peer = RawPeer::connect(&name);
    peer.hello("agent-loop").await;
    let echo = request("agent-loop", "scheduler", "echo", json!({"k": 1}));
    peer.send_json(&echo).await;
    let answer = peer.recv().await.unwrap();
    assert_eq!(answer["message_type"], "response");
    assert_eq!(answer["correlation_id"], echo["message_id"], "response correlates to the request's message_id");
    assert_eq!(answer["payload"]["result"], json!({"k": 1}));
}

/// Malformed input gets EPROTO with a reason; the connection stays usable.
#[tokio::test]
async fn malformed_messages_get_eproto_and_the_connection_survives() {
    let name = start_server(AGENT_LOOP_POLICY, &[V1_0], RateLimit::default());
    let mut peer = RawPeer::connect(&name);
    peer.hello("agent-loop").await;

    peer.send(b"this is not json\n").await;
    let answer = peer.recv().await.unwrap();
    assert_eq!(answer["message_type"], "error");
    assert_eq!(answer["payload"]["error_code"], 5);
    assert!(answer["payload"]["error_message"].as_str().unwrap().contains("not JSON"), "{answer}");

    let mut wrong_type = request("agent-loop", "scheduler", "echo", json!({}));
    wrong_type["timestamp_ns"] = "yesterday".into();
    peer.send_json(&wrong_type).await;
    let answer = peer.recv().await.unwrap();
    assert_eq!(answer["payload"]["error_code"], 5);
    assert_eq!(answer["correlation_id"], wrong_type["message_id"], "schema errors are correlated when possible");
    assert!(answer["payload"]["error_message"].as_str().unwrap().contains("/timestamp_ns"), "{answer}");

    let mut unknown = request("agent-loop", "scheduler", "echo", json!({}));
    unknown["recipient"] = "kernel".into();
    peer.send_json(&unknown).await;
    assert_eq!(peer.recv().await.unwrap()["payload"]["error_code"], 5);

    let elsewhere = request("agent-loop", "fs-engine", "echo", json!({}));
    peer.send_json(&elsewhere).await;
    let answer = peer.recv().await.unwrap();
    assert_eq!(answer["payload"]["error_code"], 3, "valid but unserved recipient is ENOENT: {answer}");
    assert!(answer["payload"]["error_message"].as_str().unwrap().contains("unknown recipient"));

    let mut oversized = vec![b'x'; clawos_ipc::framing::MAX_MESSAGE_BYTES + 1];
    oversized.push(b'\n');
    peer.send(&oversized).await;
    let answer = peer.recv().await.unwrap();
    assert_eq!(answer["payload"]["error_code"], 5);
    assert!(answer["payload"]["error_message"].as_str().unwrap().contains("exceeds"), "{answer}");

    let ping = request("agent-loop", "scheduler", "ping", json!({}));
    peer.send_json(&ping).await;
    let answer = peer.recv().await.unwrap();
    assert_eq!(answer["payload"]["status"], "success", "still usable: {answer}");

    peer.send(b"{\"version\":\"1.0\",").await;
    peer.close_write().await;
    let answer = peer.recv().await.unwrap();
    assert_eq!(answer["payload"]["error_code"], 5);
    assert!(answer["payload"]["error_message"].as_str().unwrap().contains("closed inside a message"), "{answer}");
    assert_eq!(peer.recv().await, None);
}

#[tokio::test]
async fn unknown_uid_is_rejected_with_eperm() {
    // No operator UIDs and no mapping: root (the test) is nobody.
    let name = start_server("[identity]\noperator_uids = []\n", &[V1_0], RateLimit::default());
    let error = client(&name, Principal::Operator, vec![V1_0]).await.err().expect("must be refused");
    let text = error.to_string();
    assert!(text.contains("EPERM") && text.contains("uid 0"), "{text}");
}

#[tokio::test]
async fn acl_and_sender_spoofing_are_eperm() {
    let name = start_server(AGENT_LOOP_POLICY, &[V1_0], RateLimit::default());
    let connected = client(&name, agent_loop(), vec![V1_0]).await.unwrap();
    let error = connected.call("forbidden", clawos_ipc::Object::new(), None).await.unwrap_err();
    assert_eq!(error.code(), ErrorCode::Eperm, "{error}");

    let spoofed = client(&name, Principal::Component(ComponentId::Router), vec![V1_0]).await.err().unwrap();
    assert!(spoofed.to_string().contains("does not match the authenticated peer"), "{spoofed}");
}

#[tokio::test]
async fn rate_limit_answers_eagain() {
    let limit = RateLimit { messages_per_second: 1, burst: 5 };
    let name = start_server(AGENT_LOOP_POLICY, &[V1_0], limit);
    let mut peer = RawPeer::connect(&name);
    peer.hello("agent-loop").await; // takes one token
    for _ in 0..20 {
        peer.send_json(&request("agent-loop", "scheduler", "ping", json!({}))).await;
    }
    let mut codes = Vec::new();
    for _ in 0..20 {
        let answer = peer.recv().await.unwrap();
        codes.push(answer["payload"]["error_code"].as_u64().unwrap_or(0));
    }
    let granted = codes.iter().filter(|&&code| code == 0).count();
    let throttled = codes.iter().filter(|&&code| code == 1).count();
    assert_eq!(granted + throttled, 20, "{codes:?}");
    assert!((4..=5).contains(&granted), "burst of 5 minus the hello: {codes:?}");

    // EAGAIN's retry policy (backoff) gets through once tokens refill.
    let connected = client(&name, agent_loop(), vec![V1_0]).await.unwrap();
    for _ in 0..6 {
        let _ = connected.call("ping", clawos_ipc::Object::new(), None).await;
    }
    assert!(connected.call_with_retry("ping", clawos_ipc::Object::new(), None).await.is_ok());
}

#[tokio::test]
async fn timeouts_give_etimeout_and_three_in_a_row_close_the_connection() {
    let name = start_server(AGENT_LOOP_POLICY, &[V1_0], RateLimit::default());
    let mut peer = RawPeer::connect(&name);
    peer.hello("agent-loop").await;
    for round in 0..3 {
        let mut slow = request("agent-loop", "scheduler", "sleep", json!({"ms": 2000}));
        slow["payload"]["timeout_ms"] = 50.into();
        peer.send_json(&slow).await;
        let answer = peer.recv().await.unwrap();
        assert_eq!(answer["message_type"], "error", "{answer}");
        assert_eq!(answer["payload"]["error_code"], 6, "round {round}: {answer}");
        assert_eq!(answer["correlation_id"], slow["message_id"]);
    }
    assert_eq!(peer.recv().await, None, "closed after 3 consecutive timeouts");

    // Client side: the same rule, and ETIMEOUT as the error code.
    let connected = client(&name, agent_loop(), vec![V1_0]).await.unwrap();
    let mut params = clawos_ipc::Object::new();
    params.insert("ms".into(), Value::from(2000));
    for _ in 0..3 {
        let error = connected.call("sleep", params.clone(), Some(Duration::from_millis(30))).await.unwrap_err();
        assert_eq!(error.code(), ErrorCode::Etimeout);
    }
    assert!(connected.is_closed());
}

/// UIDs with no passwd entry, used as peers other than the test (root).
const STRANGER_UID: u32 = 3_999_999_001;
const FS_ENGINE_UID: u32 = 3_999_999_002;
const AGENT_LOOP_UID: u32 = 3_999_999_003;

/// Root is the operator; two test UIDs are components; every other UID is nobody.
const TWO_UIDS_POLICY: &str = r#"
[identity]
operator_uids = [0]
uids = { "3999999002" = "fs-engine", "3999999003" = "agent-loop" }
[[allow]]
senders = ["operator", "fs-engine", "agent-loop"]
recipients = ["scheduler"]
methods = ["echo"]
"#;

async fn echo_works(peer: &mut RawPeer, sender: &str) {
    let echo = request(sender, "scheduler", "echo", json!({"still": "served"}));
    peer.send_json(&echo).await;
    let answer = peer.recv().await.unwrap();
    assert_eq!(answer["payload"]["result"], json!({"still": "served"}), "{answer}");
}

/// Issue #23, finding 4: a UID that is no principal is refused (EPERM) and
/// disconnected at once, before the server reads (or buffers) anything.
#[tokio::test]
async fn unknown_uid_is_closed_before_anything_is_read() {
    let name = start_server(TWO_UIDS_POLICY, &[V1_0], RateLimit::default());
    let mut stranger = RawPeer::from_stream(connect_as(STRANGER_UID, &name));
    // Nothing is sent: the answer cannot depend on reading a hello.
    let answer = stranger.recv().await.expect("an EPERM error before the connection closes");
    assert_eq!(answer["message_type"], "error", "{answer}");
    assert_eq!(answer["payload"]["error_code"], 4, "{answer}");
    let reason = answer["payload"]["error_message"].as_str().unwrap();
    assert!(reason.contains(&format!("uid {STRANGER_UID}")), "{answer}");
    assert_eq!(stranger.recv().await, None, "connection must close");

    // IpcClient reports that refusal as the handshake's failure.
    let stream = connect_as(STRANGER_UID, &name);
    let options = ClientOptions::new(Principal::Component(ComponentId::FsEngine));
    let error = IpcClient::handshake(stream, ComponentId::Scheduler, options).await.err().expect("refused");
    assert!(error.to_string().contains("EPERM"), "{error}");
}

/// Issue #23, finding 4: before `hello`, a frame may be only as large as a
/// hello needs; a larger one is refused (EPROTO) and the connection closed
/// instead of the server buffering up to 4 MiB of it.
#[tokio::test]
async fn oversized_first_frame_is_refused_at_the_handshake_limit() {
    let name = start_server(AGENT_LOOP_POLICY, &[V1_0], RateLimit::default());
    let mut peer = RawPeer::connect(&name);
    // 64 KiB without a newline: far below 4 MiB, far above any hello.
    peer.send(&[b'x'; 64 * 1024]).await;
    let answer = peer.recv().await.expect("an EPROTO error");
    assert_eq!(answer["payload"]["error_code"], 5, "{answer}");
    let reason = answer["payload"]["error_message"].as_str().unwrap();
    assert!(reason.contains(&format!("exceeds {HANDSHAKE_MAX_BYTES} bytes")), "{answer}");
    assert_eq!(peer.recv().await, None, "connection must close");
}

/// Issue #23, finding 4: a connection that has not completed `hello`
/// within the handshake timeout is closed (ETIMEOUT); one that has is not.
#[tokio::test]
async fn handshake_timeout_closes_idle_connections() {
    let timeout = HANDSHAKE_TIMEOUT;
    let name = start_server(AGENT_LOOP_POLICY, &[V1_0], RateLimit::default());
    let started = std::time::Instant::now();
    let mut idle = RawPeer::connect(&name);
    let mut greeted = RawPeer::connect(&name);
    greeted.hello("agent-loop").await;
    let answer = idle.recv_within(timeout + Duration::from_secs(3)).await.expect("an ETIMEOUT error");
    let waited = started.elapsed();
    assert_eq!(answer["payload"]["error_code"], 6, "{answer}");
    assert!(waited >= timeout, "closed after {waited:?}, before the timeout");
    assert_eq!(idle.recv().await, None, "connection must close");
    echo_works(&mut greeted, "agent-loop").await;
}

/// Issue #23, finding 4: a UID with its cap of connections open gets its
/// next one refused (EAGAIN) and closed; the operator and other
/// components still connect; a closed connection frees its slot.
#[tokio::test]
async fn per_uid_connection_cap_refuses_only_that_uid() {
    let cap = MAX_CONNECTIONS_PER_UID;
    let name = start_server(TWO_UIDS_POLICY, &[V1_0], RateLimit::default());
    let mut held = Vec::new();
    for _ in 0..cap {
        let mut peer = RawPeer::from_stream(connect_as(FS_ENGINE_UID, &name));
        peer.hello("fs-engine").await;
        held.push(peer);
    }
    let mut over = RawPeer::from_stream(connect_as(FS_ENGINE_UID, &name));
    let answer = over.recv().await.expect("an EAGAIN error");
    assert_eq!(answer["payload"]["error_code"], 1, "{answer}");
    assert_eq!(over.recv().await, None, "connection must close");

    let mut operator = RawPeer::connect(&name);
    operator.hello("operator").await;
    echo_works(&mut operator, "operator").await;
    let mut component = RawPeer::from_stream(connect_as(AGENT_LOOP_UID, &name));
    component.hello("agent-loop").await;
    echo_works(&mut component, "agent-loop").await;
    echo_works(&mut held[0], "fs-engine").await;

    // Closing one frees its slot (once the server has seen the close).
    drop(held.pop());
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let mut again = RawPeer::from_stream(connect_as(FS_ENGINE_UID, &name));
        // A refused connection may be closed before the hello is written.
        let hello = request("fs-engine", "scheduler", "hello", json!({"supported_versions": ["1.0"]}));
        let _ = again.try_send_json(&hello).await;
        let answer = again.recv().await.unwrap();
        if answer["payload"]["status"] == "success" {
            break;
        }
        assert_eq!(answer["payload"]["error_code"], 1, "{answer}");
        assert!(std::time::Instant::now() < deadline, "the slot was never freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

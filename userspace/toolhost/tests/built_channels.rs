//! The channel components `make tools` builds (`out/channels`), through the
//! tool host: the Telegram channel's four functions answer as its protocol
//! crate does natively, under the host's limits; a component that imports
//! a host interface is refused as a channel.

use std::path::PathBuf;
use std::time::Duration;

use clawos_toolhost::channel::{ChannelError, Response};
use clawos_toolhost::{CallError, HostConfig, ToolHost};

fn built(name: &str) -> Option<Vec<u8>> {
    let path: PathBuf = clawos_test_require::package_path("../../out").join(name);
    match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            clawos_test_require::missing(
                "the built channels' tests",
                &format!("{}: {e} (run `make tools`)", path.display()),
            );
            None
        }
    }
}

#[test]
fn the_telegram_channel_builds_its_requests_and_reads_the_bot_apis_answers() {
    let Some(wasm) = built("channels/telegram-channel-v0.1.0.wasm") else { return };
    let host = ToolHost::new(HostConfig::default()).unwrap();
    let channel = host.load_channel("telegram", &wasm, 16, Duration::from_secs(5)).unwrap();

    let poll = channel.poll_request(Some("42"), 30).unwrap();
    assert_eq!((poll.method.as_str(), poll.path.as_str()), ("POST", "/bot{secret}/getUpdates"));
    let body: serde_json::Value = serde_json::from_slice(&poll.body).unwrap();
    assert_eq!((body["offset"].as_i64(), body["timeout"].as_i64()), (Some(42), Some(30)));

    let updates = br#"{"ok": true, "result": [
        {"update_id": 42, "message": {"message_id": 1, "from": {"id": 7}, "chat": {"id": 70}, "text": "hello"}},
        {"update_id": 43, "message": "unreadable"}]}"#;
    let batch = channel.poll_response(&Response { status: 200, body: updates.to_vec() }).unwrap().unwrap();
    assert_eq!(batch.messages.len(), 1);
    assert_eq!((batch.messages[0].text.as_str(), batch.messages[0].sender.as_str()), ("hello", "7"));
    assert_eq!((batch.cursor.as_deref(), batch.malformed), (Some("44"), 1));

    let limited =
        br#"{"ok": false, "error_code": 429, "description": "Too Many Requests", "parameters": {"retry_after": 5}}"#;
    let answer = channel.send_response(&Response { status: 429, body: limited.to_vec() }).unwrap();
    assert!(matches!(answer, Err(ChannelError::RetryAfter(5))));

    let long = "line of an answer\n".repeat(500);
    let parts = channel.send_requests("70", &long).unwrap();
    assert!(parts.len() > 1);
    let sent: String = parts
        .iter()
        .map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent, long);
}

#[test]
fn a_component_that_imports_a_host_interface_is_not_loaded_as_a_channel() {
    let Some(wasm) = built("tools/text-stats-v0.1.0.wasm") else { return };
    let host = ToolHost::new(HostConfig::default()).unwrap();
    match host.load_channel("text-stats", &wasm, 16, Duration::from_secs(5)) {
        Err(CallError::CapabilityDenied { reason, .. }) => assert!(reason.contains("clawos:tool"), "{reason}"),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a tool loaded as a channel"),
    }
}

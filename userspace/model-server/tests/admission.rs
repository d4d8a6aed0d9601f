//! What a client may hold of the server before the model sees its request
//! (specs/agent/local-model.md, "How it runs"): the queue is entered before
//! the body is read, a declared body over the cap is refused unread, a
//! request's head and body must arrive in time, and connections are capped.
//! None of it needs the model: the server is given an empty directory, and
//! every client here speaks raw HTTP/1.1 so it can stop mid-request.

use std::path::{Path, PathBuf};
use std::time::Duration;

use model_server::server::{Limits, Server};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// A server with `limits` on a socket of its own, in the test's runtime.
fn start(limits: Limits) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("api.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    // No model in it: nothing here gets as far as loading one.
    let model_dir = dir.path().join("no-model");
    tokio::spawn(Server::with_limits(model_dir, limits).serve(listener));
    (dir, socket)
}

fn limits(connections: usize, header_timeout: u64, body_timeout: u64) -> Limits {
    Limits {
        connections,
        header_timeout: Duration::from_secs(header_timeout),
        body_timeout: Duration::from_secs(body_timeout),
    }
}

/// A connection that sent the head of a chat request declaring `length`
/// bytes of body, and `sent` bytes of it.
async fn chat_head(socket: &Path, length: usize, sent: usize) -> UnixStream {
    let mut stream = UnixStream::connect(socket).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {length}\r\n\r\n{}",
        "{".repeat(sent)
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// The answer on `stream` (status and JSON body) within `within`, or None.
async fn answer(stream: &mut UnixStream, within: Duration) -> Option<(u16, Value)> {
    let read = async {
        let mut bytes = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let n = stream.read(&mut buffer).await.unwrap_or(0);
            bytes.extend_from_slice(&buffer[..n]);
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))
                    .and_then(|l| l.trim().parse::<usize>().ok());
                if length.is_some_and(|length| body.len() >= length) || n == 0 {
                    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
                    return (status, serde_json::from_str(body).unwrap_or(Value::Null));
                }
            } else if n == 0 {
                return (0, Value::Null);
            }
        }
    };
    tokio::time::timeout(within, read).await.ok()
}

async fn health(socket: &Path) -> Value {
    let mut stream = UnixStream::connect(socket).await.unwrap();
    stream.write_all(b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n").await.unwrap();
    answer(&mut stream, Duration::from_secs(5)).await.expect("/health answers").1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_is_refused_before_any_body_is_read() {
    let (_dir, socket) = start(limits(64, 30, 3));
    // Sixteen requests whose bodies stall half way: each holds a place.
    let mut stalled = Vec::new();
    for _ in 0..16 {
        stalled.push(chat_head(&socket, 100, 10).await);
    }
    let mut queued = Value::Null;
    for _ in 0..50 {
        queued = health(&socket).await["queued"].clone();
        if queued == 16 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(queued, 16, "the stalled requests hold the queue's places");
    // The seventeenth sends no byte of its body and is refused all the same.
    let mut late = chat_head(&socket, 1000, 0).await;
    let (status, error) = answer(&mut late, Duration::from_secs(2)).await.expect("refused without its body");
    assert_eq!((status, error["error"]["code"].as_str()), (429, Some("queue_full")), "{error}");
    // The stalled ones time out with 408, and their places are free again.
    for stream in &mut stalled {
        let (status, error) = answer(stream, Duration::from_secs(10)).await.expect("the body timeout answers");
        assert_eq!((status, error["error"]["code"].as_str()), (408, Some("request_timeout")), "{error}");
    }
    assert_eq!(health(&socket).await["queued"], 0);
}

#[tokio::test]
async fn a_declared_body_over_the_cap_is_refused_unread() {
    let (_dir, socket) = start(Limits::default());
    let mut stream = chat_head(&socket, 5 << 20, 0).await;
    let (status, error) = answer(&mut stream, Duration::from_secs(2)).await.expect("refused at once");
    assert_eq!(status, 413, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("over 4194304 bytes"), "{error}");
}

#[tokio::test]
async fn a_connection_that_sends_no_request_is_closed() {
    let (_dir, socket) = start(limits(32, 1, 30));
    let mut idle = UnixStream::connect(&socket).await.unwrap();
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut byte)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "the idle connection is closed: {closed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_wait_for_one_to_close() {
    let (_dir, socket) = start(limits(2, 30, 30));
    let first = UnixStream::connect(&socket).await.unwrap();
    let _second = UnixStream::connect(&socket).await.unwrap();
    let mut third = UnixStream::connect(&socket).await.unwrap();
    third.write_all(b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n").await.unwrap();
    assert!(answer(&mut third, Duration::from_secs(1)).await.is_none(), "the third waits while two are open");
    drop(first);
    let (status, health) = answer(&mut third, Duration::from_secs(5)).await.expect("served once one closed");
    assert_eq!((status, &health["status"]), (200, &Value::from("ok")), "{health}");
}

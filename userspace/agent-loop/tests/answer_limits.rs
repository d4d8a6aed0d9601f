//! A provider that streams without bound (specs/agent/providers.md,
//! "Limits"): 64 MiB of text, of one event, of one call's arguments, and
//! thousands of calls, each generated as it is written so the server holds
//! none of it. Each ends the request with a too-large error, and the
//! process's peak memory grows by a few MiB, not by what was streamed.
//! Its own test binary: the peak is the process's, and no other test may
//! run beside it.

use std::io::Write as _;
use std::sync::Arc;

use clawos_agent_loop::provider::config::{self, ProviderConfig};
use clawos_agent_loop::provider::{limits, ChatMessage, ChatRequest, KeySource, ProviderError, Role};
use futures::future::BoxFuture;
use futures::FutureExt as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;
use zeroize::Zeroizing;

/// What is streamed in each case.
const STREAMED: usize = 64 << 20;

struct NoKey;

impl KeySource for NoKey {
    fn key(&self, secret_id: &str) -> BoxFuture<'_, Result<Zeroizing<String>, String>> {
        let error = format!("no secret `{secret_id}`");
        async move { Err(error) }.boxed()
    }
}

/// A server on loopback that answers one request with `head`, then `unit`
/// repeated until [`STREAMED`] bytes were written or the client left.
/// Answers how many bytes it wrote.
async fn serve_once(head: &'static str, unit: Vec<u8>) -> (String, tokio::task::JoinHandle<usize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        // The request: headers, then the body its content-length gives.
        let mut request = Vec::new();
        let mut buffer = [0u8; 8192];
        let end = loop {
            let n = socket.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the client closed before its request ended");
            request.extend_from_slice(&buffer[..n]);
            if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let headers = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
        let length: usize = headers
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .map_or(0, |value| value.trim().parse().unwrap());
        while request.len() < end + length {
            let n = socket.read(&mut buffer).await.unwrap();
            request.extend_from_slice(&buffer[..n]);
        }
        let mut written = 0;
        if socket
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            .await
            .is_err()
        {
            return written;
        }
        let mut chunk = head.as_bytes().to_vec();
        while written < STREAMED {
            while chunk.len() < 64 << 10 {
                chunk.extend_from_slice(&unit);
            }
            if socket.write_all(&chunk).await.is_err() {
                break;
            }
            written += chunk.len();
            chunk.clear();
        }
        written
    });
    (url, task)
}

/// Asks a provider of `kind` at `url`; answers its error.
async fn ask(kind: &str, url: &str) -> ProviderError {
    let table: ProviderConfig = toml::from_str(&format!("kind = \"{kind}\"\nbase_url = \"{url}\"\n")).unwrap();
    let provider = config::build("endless", &table, Arc::new(NoKey)).unwrap();
    let request = ChatRequest {
        model: "m".into(),
        messages: vec![ChatMessage::text(Role::User, "hi")],
        tools: vec![],
        max_tokens: 64,
        temperature: None,
    };
    provider.chat_stream(&request, &|_| {}, &CancellationToken::new()).await.unwrap_err()
}

/// The process's peak resident memory (VmHWM), in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// An OpenAI chunk whose delta is `delta`, as one SSE event.
fn openai_event(delta: serde_json::Value) -> Vec<u8> {
    let chunk = serde_json::json!({"model": "m", "choices": [{"index": 0, "delta": delta}]});
    format!("data: {chunk}\n\n").into_bytes()
}

#[tokio::test]
async fn an_endless_answer_ends_its_request_and_the_process_stays_small() {
    // Forgets the peak so far (Linux 4.0 and later: "5" resets VmHWM).
    std::fs::OpenOptions::new().write(true).open("/proc/self/clear_refs").unwrap().write_all(b"5").unwrap();
    let before = peak_kib();
    let text = openai_event(serde_json::json!({"content": "x".repeat(1000)}));
    let calls: Vec<u8> = (0..1000u32)
        .flat_map(|index| {
            openai_event(serde_json::json!({"tool_calls": [{"index": index, "id": format!("c{index}"),
                "function": {"name": "file_write", "arguments": ""}}]}))
        })
        .collect();
    let arguments =
        openai_event(serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": "x".repeat(1000)}}]}));
    let cases: [(&str, &str, &'static str, Vec<u8>, String); 5] = [
        ("openai", "text", "", text, format!("its text over {} KiB", limits::TEXT_BYTES >> 10)),
        ("openai", "calls", "", calls, format!("more than {} tool calls", limits::CALLS)),
        (
            "openai",
            "arguments",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"file_write\"}}]}}]}\n\n",
            arguments,
            format!("one tool call over {} KiB", limits::CALL_BYTES >> 10),
        ),
        // One event that never ends: a data line, and another, with no
        // empty line between them.
        ("openai", "one event", "", b"data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n".to_vec(), one_event()),
        ("anthropic", "one event", "event: content_block_delta\n", b"data: xxxxxxxxxxxxxxxx".to_vec(), one_event()),
    ];
    // Every case runs before anything is asserted, so a failure reports
    // them all and the memory they took.
    let mut wrong = Vec::new();
    for (kind, case, head, unit, said) in cases {
        let (url, server) = serve_once(head, unit).await;
        let error = ask(kind, &url).await;
        let written = server.await.unwrap();
        println!("{kind} {case}: {error} ({} KiB written)", written >> 10);
        let ended = matches!(error, ProviderError::TooLarge { .. }) && !error.is_transient();
        if !ended || !error.to_string().contains(&said) || written >= STREAMED {
            wrong.push(format!("{kind} {case}: `{error}` after {} KiB, not `{said}`", written >> 10));
        }
    }
    let grown_mib = (peak_kib() - before) / 1024;
    println!("peak memory grew by {grown_mib} MiB over five answers of up to {} MiB each", STREAMED >> 20);
    assert!(wrong.is_empty() && grown_mib < 48, "peak memory grew by {grown_mib} MiB; {wrong:#?}");
}

fn one_event() -> String {
    format!("one event over {} KiB", limits::EVENT_BYTES >> 10)
}

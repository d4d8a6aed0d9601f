//! The server against itself: hyper's client (and raw TCP where the bytes
//! on the wire are the point) talking to a started `Server` or the binary.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clawos_scripted_provider::{anthropic, openai, Event, Reply, Script, Server};
use http_body_util::{BodyExt as _, Full};
use hyper::{HeaderMap, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// One answer as a client saw it: the body, or the error that ended it.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Result<Bytes, hyper::Error>,
    /// Time from sending to the status line.
    head_after: Duration,
}

impl Answer {
    fn text(&self) -> String {
        String::from_utf8(self.body.as_ref().expect("a whole body").to_vec()).unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.text()).unwrap()
    }

    /// The `data:` payloads of an event stream, with their `event:` names.
    fn events(&self) -> Vec<(Option<String>, String)> {
        self.text()
            .split("\n\n")
            .filter(|block| !block.is_empty())
            .map(|block| {
                let mut name = None;
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(n) = line.strip_prefix("event: ") {
                        name = Some(n.to_owned());
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data.push(d);
                    } else {
                        panic!("not an SSE line: {line:?}");
                    }
                }
                (name, data.join("\n"))
            })
            .collect()
    }
}

/// POSTs `body` to `path` on a new connection with `headers`.
async fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: Value) -> Answer {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let mut request = Request::post(path).header("host", addr.to_string()).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    let sent = Instant::now();
    let response = sender.send_request(request).await.unwrap();
    let head_after = sent.elapsed();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map(|collected| collected.to_bytes());
    Answer { status: parts.status, headers: parts.headers, body, head_after }
}

/// Everything the server writes for one request on a raw connection, up to
/// its close.
async fn raw_exchange(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let body = "{}";
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out))
        .await
        .expect("the server closes")
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test]
async fn replies_are_served_in_order_then_the_script_is_exhausted() {
    let script = Script::new()
        .reply(openai::text(["Hel", "lo"], Some((3, 2))))
        .reply(anthropic::text(["Hi", "!"], Some((5, 1))));
    let server = Server::start(script).await.unwrap();
    assert_eq!(server.remaining(), 2);

    let first = post(server.addr(), "/v1/chat/completions", &[], json!({"stream": true})).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.headers["content-type"], "text/event-stream");
    assert_eq!(first.headers["transfer-encoding"], "chunked");
    let events = first.events();
    assert!(events.iter().all(|(name, _)| name.is_none()));
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> =
        events[..events.len() - 1].iter().map(|(_, data)| serde_json::from_str(data).unwrap()).collect();
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, "Hello");
    assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 5);

    let second = post(server.addr(), "/v1/messages", &[], json!({"stream": true})).await;
    assert_eq!(second.status, StatusCode::OK);
    let events = second.events();
    assert_eq!(events.first().unwrap().0.as_deref(), Some("message_start"));
    assert_eq!(events.last().unwrap().0.as_deref(), Some("message_stop"));
    let text: String = events
        .iter()
        .filter(|(name, _)| name.as_deref() == Some("content_block_delta"))
        .map(|(_, data)| serde_json::from_str::<Value>(data).unwrap()["delta"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "Hi!");
    assert_eq!(server.remaining(), 0);

    let third = post(server.addr(), "/v1/chat/completions", &[], json!({})).await;
    assert_eq!(third.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(third.headers["content-type"], "application/json");
    let error = third.json();
    assert_eq!(error["error"]["type"], "script_exhausted");
    assert!(error["error"]["message"].as_str().unwrap().contains("request 3 and it has 2 replies"), "{error}");
    let fourth = post(server.addr(), "/v1/messages", &[], json!({})).await;
    assert_eq!(fourth.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(fourth.json()["error"]["type"], "script_exhausted");
    assert_eq!(server.requests().iter().map(|r| r.reply).collect::<Vec<_>>(), [Some(0), Some(1), None, None]);
}

#[tokio::test]
async fn cut_after_drops_the_connection_mid_stream() {
    let script = Script::new()
        .reply(openai::text(["a", "b", "c"], None).cut_after(2))
        .reply(anthropic::text(["a", "b"], None).cut_after(3));
    let server = Server::start(script.clone()).await.unwrap();
    let answer = post(server.addr(), "/v1/chat/completions", &[], json!({})).await;
    assert_eq!(answer.status, StatusCode::OK);
    let error = answer.body.expect_err("the body is cut");
    assert!(error.is_incomplete_message() || error.to_string().contains("connection"), "{error:?}");

    // On the wire: the headers, two chunks of one event each, then the
    // close: no `[DONE]`, no last chunk `0\r\n\r\n`.
    let server = Server::start(script).await.unwrap();
    let wire = raw_exchange(server.addr(), "/v1/chat/completions").await;
    let (head, body) = wire.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let expected: Vec<String> = openai::text(["a", "b", "c"], None).events[..2].iter().map(Event::to_wire).collect();
    let chunked: String = expected.iter().map(|event| format!("{:X}\r\n{event}\r\n", event.len())).collect();
    assert_eq!(body, chunked);
    assert!(!body.contains("[DONE]"));

    let wire = raw_exchange(server.addr(), "/v1/messages").await;
    assert!(wire.contains("event: content_block_start\n"), "{wire}");
    assert!(!wire.contains("content_block_stop") && !wire.ends_with("0\r\n\r\n"), "{wire}");

    // cut_after 0: the headers, then the close.
    let server = Server::start(Script::new().reply(Reply::sse([openai::done()]).cut_after(0))).await.unwrap();
    let wire = raw_exchange(server.addr(), "/v1/chat/completions").await;
    assert!(wire.ends_with("\r\n\r\n") && !wire.contains("DONE"), "{wire}");
}

#[tokio::test]
async fn errors_carry_retry_after_and_the_protocols_body() {
    let script = Script::new()
        .reply(Reply::status(429).retry_after(1))
        .reply(Reply::status(429).retry_after(7))
        .reply(Reply::server_error())
        .reply(Reply::status(503).header("retry-after-ms", "250").body_text("{not json"))
        .reply(openai::error(400, "invalid_request_error", "bad tools"));
    let server = Server::start(script).await.unwrap();

    let limited = post(server.addr(), "/v1/chat/completions", &[], json!({})).await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.headers["retry-after"], "1");
    assert_eq!(limited.json()["error"]["type"], "rate_limit_exceeded");

    let limited = post(server.addr(), "/v1/messages", &[], json!({})).await;
    assert_eq!(limited.headers["retry-after"], "7");
    let error = limited.json();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "rate_limit_error");

    let failed = post(server.addr(), "/v1/chat/completions", &[], json!({})).await;
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(failed.json()["error"]["type"], "server_error");

    let malformed = post(server.addr(), "/v1/chat/completions", &[], json!({})).await;
    assert_eq!(malformed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(malformed.headers["retry-after-ms"], "250");
    assert_eq!(malformed.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(malformed.text(), "{not json");

    let bad = post(server.addr(), "/v1/chat/completions", &[], json!({})).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.json()["error"]["message"], "bad tools");
}

#[tokio::test]
async fn requests_are_recorded() {
    let script = Script::new()
        .reply(openai::tool_call("call_1", "read_file", "{\"path\":\"notes.md\"}", 3))
        .reply(openai::text(["done"], None));
    let server = Server::start(script).await.unwrap();
    let first = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "read it"}]});
    post(server.addr(), "/v1/chat/completions", &[("authorization", "Bearer KEY")], first.clone()).await;
    let second = json!({"model": "m", "messages": [{"role": "tool", "tool_call_id": "call_1", "content": "42"}]});
    post(server.addr(), "/v1/chat/completions", &[("authorization", "Bearer KEY")], second.clone()).await;
    let missing = post(server.addr(), "/v1/models", &[("x-api-key", "KEY2")], json!(null)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("Authorization"), Some("Bearer KEY"));
    assert_eq!(requests[0].header("content-type"), Some("application/json"));
    assert_eq!(requests[0].body, first);
    assert_eq!(requests[1].body["messages"][0]["tool_call_id"], "call_1");
    assert_eq!(requests[1].reply, Some(1));
    assert_eq!(
        (requests[2].path.as_str(), requests[2].header("x-api-key"), requests[2].reply),
        ("/v1/models", Some("KEY2"), None)
    );
    // A request to another path takes no reply.
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn delays_make_a_slow_stream() {
    let script = Script::new()
        .reply(openai::text(["a", "b"], None).delay_ms(200).event_delay_ms(100))
        .reply(openai::malformed());
    let server = Server::start(script).await.unwrap();
    let started = Instant::now();
    let slow = post(server.addr(), "/v1/chat/completions", &[], json!({})).await;
    assert!(slow.head_after >= Duration::from_millis(200), "{:?}", slow.head_after);
    // Five events, four waits of 100 ms between them.
    assert!(started.elapsed() >= Duration::from_millis(600), "{:?}", started.elapsed());
    assert_eq!(slow.events().len(), 5);

    let malformed = post(server.addr(), "/v1/chat/completions", &[], json!({})).await;
    assert!(malformed.text().contains("\n\ndata: {not json\n\n"), "{}", malformed.text());
}

#[test]
fn a_background_server_serves_blocking_clients() {
    use std::io::{Read as _, Write as _};
    let server = Server::start_background(Script::new().reply(anthropic::tool_use("toolu_1", "f", "{}", 1))).unwrap();
    let mut stream = std::net::TcpStream::connect(server.addr()).unwrap();
    write!(stream, "POST /v1/messages HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{{}}")
        .unwrap();
    let mut wire = String::new();
    stream.read_to_string(&mut wire).unwrap();
    assert!(wire.starts_with("HTTP/1.1 200 OK\r\n"), "{wire}");
    assert!(wire.contains("\"stop_reason\":\"tool_use\""), "{wire}");
    assert!(wire.ends_with("0\r\n\r\n"), "{wire}");
    assert_eq!(server.requests()[0].body, json!({}));
}

/// The binary, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_binary_serves_a_script_file_and_logs_requests() {
    let dir = std::env::temp_dir().join(format!("clawos-scripted-provider-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script_path = dir.join("script.json");
    let log_path = dir.join("requests.jsonl");
    let _ = std::fs::remove_file(&log_path);
    let script = Script::new().reply(Reply::status(429).retry_after(1)).reply(openai::text(["ok"], None));
    std::fs::write(&script_path, script.to_json()).unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_clawos-scripted-provider"))
        .args(["--script".as_ref(), script_path.as_os_str(), "--listen".as_ref(), "127.0.0.1:0".as_ref()])
        .args(["--requests-log".as_ref(), log_path.as_os_str()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _running = Running(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let url = line.strip_prefix("listening on http://").unwrap_or_else(|| panic!("{line:?}")).trim_end();
    let addr: SocketAddr = url.parse().unwrap();
    assert_eq!(addr.ip().to_string(), "127.0.0.1");

    let limited = post(addr, "/v1/chat/completions", &[("authorization", "Bearer K")], json!({"n": 1})).await;
    assert_eq!(
        (limited.status, limited.headers["retry-after"].to_str().unwrap()),
        (StatusCode::TOO_MANY_REQUESTS, "1")
    );
    let answer = post(addr, "/v1/chat/completions", &[], json!({"n": 2})).await;
    assert!(answer.text().ends_with("data: [DONE]\n\n"));

    let log = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<Value> = log.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["body"], json!({"n": 1}));
    assert_eq!(lines[0]["path"], "/v1/chat/completions");
    assert!(lines[0]["headers"].as_array().unwrap().contains(&json!(["authorization", "Bearer K"])));
    assert_eq!(lines[1]["reply"], 1);

    // A bad script is refused before anything listens.
    std::fs::write(&script_path, r#"{"replies": [{"status": 200, "evnets": []}]}"#).unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_clawos-scripted-provider"))
        .arg("--script")
        .arg(&script_path)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("evnets"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The whole answer to `GET path` on a new connection.
async fn get(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

/// A page is served to every GET of its path, beside the script's replies,
/// and takes none of them; another path is still a 404.
#[tokio::test]
async fn pages_are_served_to_get_without_taking_a_reply() {
    let server = Server::start(Script::new().page("/news", "CVE-2026-0001 in libfoo")).await.unwrap();
    for _ in 0..2 {
        let page = get(server.addr(), "/news").await;
        assert!(page.starts_with("HTTP/1.1 200") && page.ends_with("CVE-2026-0001 in libfoo"), "{page}");
    }
    assert!(get(server.addr(), "/other").await.starts_with("HTTP/1.1 404"));
    assert!(server.requests().iter().all(|request| request.reply.is_none()));
}

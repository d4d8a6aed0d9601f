//! The console over a real Unix socket, spoken to in HTTP/1.1 as a browser
//! behind the SSH tunnel would (specs/console/README.md).

use std::sync::Arc;

use clawos_console::auth::{issue_login, Tokens};
use clawos_console::{app, Console, MAX_BODY};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

struct Server {
    socket: std::path::PathBuf,
    logins: std::path::PathBuf,
    console: Arc<Console>,
    _dir: tempfile::TempDir,
}

/// A console on a socket of its own. No component runs here: every page
/// that asks one shows that it cannot be reached.
async fn serve() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("console.sock");
    let logins = dir.path().join("logins");
    std::fs::create_dir(&logins).unwrap();
    let listener = UnixListener::bind(&socket).unwrap();
    let console = Arc::new(Console {
        tokens: Tokens::new(&logins),
        turns: Default::default(),
        box_name: "clawos-test".into(),
        version: "0.1.7".into(),
    });
    let router = app(console.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    Server { socket, logins, console, _dir: dir }
}

impl Server {
    /// Sends `method path` with `headers` (and `body`), as one request on
    /// its own connection.
    async fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
        let mut request =
            format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        let mut stream = UnixStream::connect(&self.socket).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        // A refused request may be answered before its body is read.
        let _ = stream.write_all(body).await;
        // Read up to the end, or to a reset after an early answer.
        let mut raw = Vec::new();
        let mut chunk = [0u8; 8192];
        while let Ok(read @ 1..) = stream.read(&mut chunk).await {
            raw.extend_from_slice(&chunk[..read]);
        }
        let raw = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        Answer { status, head: head.to_owned(), body: body.to_owned() }
    }

    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        self.send("GET", path, headers, b"").await
    }

    /// A live session's cookie pair, by the login link.
    async fn log_in(&self) -> String {
        let token = issue_login(&self.logins).unwrap();
        let answer = self.get(&format!("/login?token={token}"), &[("Host", "localhost:8080")]).await;
        let cookie = answer.header("set-cookie").unwrap();
        cookie.split(';').next().unwrap().to_owned()
    }
}

const HOST: (&str, &str) = ("Host", "localhost:8080");
const ORIGIN: (&str, &str) = ("Origin", "http://localhost:8080");

#[tokio::test]
async fn a_login_link_opens_a_session_once() {
    let server = serve().await;
    let token = issue_login(&server.logins).unwrap();
    let login = server.get(&format!("/login?token={token}"), &[HOST, ("Sec-Fetch-Site", "none")]).await;
    assert_eq!(login.status, 303, "{}", login.head);
    assert_eq!(login.header("location"), Some("/"));
    let cookie = login.header("set-cookie").unwrap();
    assert!(
        cookie.starts_with("clawos_console=") && cookie.contains("; HttpOnly") && cookie.contains("; SameSite=Strict")
    );
    let pair = cookie.split(';').next().unwrap();
    let home = server.get("/", &[HOST, ("Cookie", pair)]).await;
    assert_eq!(home.status, 200, "{}", home.body);
    assert!(home.body.contains("clawos-test") && home.body.contains("0.1.7"));
    assert!(home.body.contains("observability cannot be reached"), "{}", home.body);
    let again = server.get(&format!("/login?token={token}"), &[HOST]).await;
    assert_eq!(again.status, 403);
    assert!(again.body.contains("clawctl console"), "says how to get a new link");
    assert_eq!(server.get("/login?token=guessed", &[HOST]).await.status, 403);
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let server = serve().await;
    let cookie = server.log_in().await;
    for answer in [
        server.get("/", &[HOST, ("Cookie", &cookie)]).await,
        server.get("/", &[HOST]).await,
        server.get("/", &[("Host", "evil.example")]).await,
        server.send("POST", "/logout", &[HOST], b"").await,
    ] {
        let csp = answer.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{}", answer.head);
        assert!(csp.contains("frame-ancestors 'none'"));
        assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(answer.header("referrer-policy"), Some("same-origin"));
        assert_eq!(answer.header("cache-control"), Some("no-store"));
    }
}

#[tokio::test]
async fn a_request_for_another_host_is_refused_even_with_a_session() {
    let server = serve().await;
    let cookie = server.log_in().await;
    for host in ["evil.example", "evil.example:8080", "localhost.evil.example:8080", "10.0.2.15:8080"] {
        let answer = server.get("/", &[("Host", host), ("Cookie", &cookie)]).await;
        assert_eq!(answer.status, 421, "{host}");
    }
    for host in ["localhost:8080", "127.0.0.1:9999", "[::1]:8080", "localhost"] {
        assert_eq!(server.get("/", &[("Host", host), ("Cookie", &cookie)]).await.status, 200, "{host}");
    }
}

#[tokio::test]
async fn a_change_without_the_consoles_origin_is_refused() {
    let server = serve().await;
    let cookie = server.log_in().await;
    let no_origin = server.send("POST", "/logout", &[HOST, ("Cookie", &cookie)], b"").await;
    assert_eq!(no_origin.status, 403);
    let other =
        server.send("POST", "/logout", &[HOST, ("Cookie", &cookie), ("Origin", "http://evil.example")], b"").await;
    assert_eq!(other.status, 403);
    let other_port =
        server.send("POST", "/logout", &[HOST, ("Cookie", &cookie), ("Origin", "http://localhost:9090")], b"").await;
    assert_eq!(other_port.status, 403);
    let cross_site = server.get("/", &[HOST, ("Cookie", &cookie), ("Sec-Fetch-Site", "cross-site")]).await;
    assert_eq!(cross_site.status, 403);
    assert_eq!(server.get("/", &[HOST, ("Cookie", &cookie)]).await.status, 200, "still logged in");

    let logout = server
        .send("POST", "/logout", &[HOST, ORIGIN, ("Cookie", &cookie), ("Sec-Fetch-Site", "same-origin")], b"")
        .await;
    assert_eq!(logout.status, 200);
    assert!(logout.header("set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(server.get("/", &[HOST, ("Cookie", &cookie)]).await.status, 401, "the session ended");
}

#[tokio::test]
async fn without_a_session_a_page_says_how_to_log_in_and_htmx_gets_a_bare_401() {
    let server = serve().await;
    let page = server.get("/", &[HOST]).await;
    assert_eq!(page.status, 401);
    assert!(page.body.contains("clawctl console") && page.body.contains("ssh -L"));
    let made_up = server.get("/", &[HOST, ("Cookie", "clawos_console=made-up")]).await;
    assert_eq!(made_up.status, 401);
    let partial = server.get("/", &[HOST, ("HX-Request", "true")]).await;
    assert_eq!(partial.status, 401);
    assert!(!partial.body.contains("<html"));
}

#[tokio::test]
async fn the_static_files_are_served_without_a_session_and_nothing_else_is() {
    let server = serve().await;
    let htmx = server.get("/static/htmx.min.js", &[HOST]).await;
    assert_eq!(htmx.status, 200);
    assert_eq!(htmx.header("content-type"), Some("text/javascript; charset=utf-8"));
    assert!(htmx.body.contains("htmx"));
    assert_eq!(server.get("/static/console.css", &[HOST]).await.status, 200);
    assert_eq!(server.get("/static/../Cargo.toml", &[HOST]).await.status, 404);
    assert_eq!(server.get("/static/nothing.js", &[HOST]).await.status, 404);
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused() {
    let server = serve().await;
    let cookie = server.log_in().await;
    let body = vec![b'a'; MAX_BODY + 1];
    let answer = server.send("POST", "/logout", &[HOST, ORIGIN, ("Cookie", &cookie)], &body).await;
    assert_eq!(answer.status, 413);
    assert!(answer.header("content-security-policy").is_some());
}

#[tokio::test]
async fn a_page_whose_component_cannot_be_reached_says_so_and_changes_nothing() {
    let server = serve().await;
    let cookie = server.log_in().await;
    let agents = server.get("/agents", &[HOST, ("Cookie", &cookie)]).await;
    assert_eq!(agents.status, 502);
    assert!(agents.body.contains("agent-loop cannot be reached"), "{}", agents.body);
    let pause = server.send("POST", "/agents/alice/pause", &[HOST, ORIGIN, ("Cookie", &cookie)], b"").await;
    assert_eq!(pause.status, 502);
    assert!(pause.body.contains("Nothing was changed"), "{}", pause.body);
    let other = server.send("POST", "/agents/alice/delete", &[HOST, ORIGIN, ("Cookie", &cookie)], b"").await;
    assert_eq!(other.status, 404);
    let unauthenticated = server.send("POST", "/agents/alice/pause", &[HOST, ORIGIN], b"").await;
    assert_eq!(unauthenticated.status, 401, "the guard answers before any call");
}

#[tokio::test]
async fn each_page_names_the_component_it_could_not_reach() {
    let server = serve().await;
    let cookie = server.log_in().await;
    for (path, component) in [
        ("/memory/alice", "fs-engine"),
        ("/memory/alice/edit?path=memory.md", "fs-engine"),
        ("/tools", "wasm-daemon"),
        ("/secrets", "security-agent"),
        ("/schedules", "scheduler"),
        ("/notifications", "scheduler"),
        ("/approvals", "security-agent"),
    ] {
        let page = server.get(path, &[HOST, ("Cookie", &cookie)]).await;
        assert_eq!(page.status, 502, "{path}");
        assert!(page.body.contains(&format!("{component} cannot be reached")), "{path}: {}", page.body);
    }
}

#[tokio::test]
async fn only_an_agents_markdown_memory_files_are_offered_for_editing() {
    let server = serve().await;
    let cookie = server.log_in().await;
    for path in ["workspace.db", "../bob/memory.md", "logs/2026-12-01.md", "memory/..%2Fsoul.md"] {
        let page = server.get(&format!("/memory/alice/edit?path={path}"), &[HOST, ("Cookie", &cookie)]).await;
        assert_eq!(page.status, 404, "{path}: refused before fs-engine is asked");
    }
    let form = b"path=workspace.db&content=x&base=00";
    let type_ = ("Content-Type", "application/x-www-form-urlencoded");
    let save = server.send("POST", "/memory/alice/edit", &[HOST, ORIGIN, type_, ("Cookie", &cookie)], form).await;
    assert_eq!(save.status, 404);
}

/// An agent-loop event of a turn, as the turn's connection would bring it.
fn turn_event(name: &str, data: serde_json::Value) -> clawos_ipc::Message {
    let serde_json::Value::Object(data) = data else { unreachable!() };
    clawos_ipc::Message::event(
        clawos_ipc::ProtocolVersion::V1_0,
        clawos_ipc::Principal::Component(clawos_ipc::ComponentId::AgentLoop),
        clawos_ipc::Principal::Console,
        name,
        data,
    )
}

fn started(turn: &str) -> clawos_api::agent_loop::TurnStarted {
    clawos_api::agent_loop::TurnStarted { agent: "alice".into(), session_id: format!("s-{turn}"), turn_id: turn.into() }
}

#[tokio::test]
async fn a_turn_streams_as_server_sent_events_and_a_reconnect_resumes_after_what_it_saw() {
    use serde_json::json;
    let server = serve().await;
    let cookie = server.log_in().await;
    let (events, receiver) = tokio::sync::mpsc::channel(16);
    server.console.turns.follow(started("t1"), (), receiver).unwrap();
    events.send(turn_event("turn.text", json!({"turn_id": "t1", "text": "Hel"}))).await.unwrap();
    events.send(turn_event("turn.text", json!({"turn_id": "other", "text": "not this turn's"}))).await.unwrap();
    events.send(turn_event("turn.text", json!({"turn_id": "t1", "text": "lo <b>\nthere"}))).await.unwrap();
    events
        .send(turn_event(
            "turn.step",
            json!({"turn_id": "t1", "step": 2, "kind": "tool", "tool_name": "text-stats", "ok": true, "duration_ms": 12}),
        ))
        .await
        .unwrap();
    let end = json!({"turn_id": "t1", "session_id": "s-t1", "status": "done", "answer": "Hello", "steps": 2,
                     "tool_calls": 1, "input_tokens": 10, "output_tokens": 3, "cost_usd": 0.0});
    events.send(turn_event("turn.end", end)).await.unwrap();
    let stream = server.get("/turns/t1/events", &[HOST, ("Cookie", &cookie)]).await;
    assert_eq!(stream.status, 200);
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    let body = &stream.body;
    assert!(body.contains("event: text\ndata: Hel\nid: 0\n"), "{body}");
    assert!(body.contains("data: lo &#60;b&#62;\ndata: there\nid: 1\n"), "escaped, its lines kept: {body}");
    assert!(!body.contains("not this turn's"));
    assert!(body.contains("event: step\ndata: <li>step 2: text-stats ended in 12 ms</li>\nid: 2\n"), "{body}");
    assert!(body.contains("event: end\n") && body.contains("Done: 2 steps, 1 tool calls"), "{body}");
    let resumed = server.get("/turns/t1/events", &[HOST, ("Cookie", &cookie), ("Last-Event-ID", "1")]).await;
    assert!(!resumed.body.contains("Hel") && resumed.body.contains("id: 2\n"), "{}", resumed.body);
    assert_eq!(server.get("/turns/t9/events", &[HOST, ("Cookie", &cookie)]).await.status, 404);
    assert_eq!(server.get("/turns/t1/events", &[HOST]).await.status, 401);
}

#[tokio::test]
async fn a_turn_whose_connection_closes_before_its_end_says_so() {
    let server = serve().await;
    let cookie = server.log_in().await;
    let (events, receiver) = tokio::sync::mpsc::channel(16);
    server.console.turns.follow(started("t2"), (), receiver).unwrap();
    events.send(turn_event("turn.text", serde_json::json!({"turn_id": "t2", "text": "Half"}))).await.unwrap();
    drop(events);
    let stream = server.get("/turns/t2/events", &[HOST, ("Cookie", &cookie)]).await;
    assert!(stream.body.contains("data: Half"), "{}", stream.body);
    assert!(stream.body.contains("event: end") && stream.body.contains("closed the connection"), "{}", stream.body);
}

//! The client against a real MCP server nobody here wrote: the reference
//! `@modelcontextprotocol/server-everything` (npm, pinned in
//! tests/mcp-servers/package-lock.json, installed by `make mcp-servers`
//! into out/mcp-servers, or where `CLAWOS_MCP_SERVERS` says; `make test`
//! sets it, so there a missing server fails these tests), over its standard
//! input and output and over Streamable HTTP on loopback.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clawos_test_require::mcp_everything;
use mcp::{CallOptions, Connection, Error, Launch, Secrets, ServerConfig};
use serde_json::{json, Map, Value};

fn stdio(node: &str, entry: &str) -> ServerConfig {
    ServerConfig { command: vec![node.into(), entry.into(), "stdio".into()], ..ServerConfig::default() }
}

fn arguments(value: Value) -> Map<String, Value> {
    value.as_object().expect("an object").clone()
}

async fn sum(connection: &Connection) -> String {
    let output = connection.call("get-sum", arguments(json!({"a": 2, "b": 3})), CallOptions::default()).await.unwrap();
    assert!(!output.is_error, "{output:?}");
    output.text
}

#[tokio::test]
async fn tools_are_named_for_the_agent_and_called_over_stdio() {
    let Some((node, entry)) = mcp_everything("tools_are_named_for_the_agent_and_called_over_stdio") else { return };
    let connection =
        Connection::connect("test", "everything", &stdio(&node, &entry), &Launch::Child, &Secrets::default())
            .await
            .unwrap();
    let tools = connection.tools().await.unwrap();
    assert!(tools.refused.is_empty(), "{:?}", tools.refused);
    let get_sum = tools.usable.iter().find(|tool| tool.server_name == "get-sum").expect("get-sum listed");
    assert_eq!(get_sum.name, "mcp.everything.get-sum");
    assert_eq!(get_sum.description, "Returns the sum of two numbers");
    assert_eq!(get_sum.input_schema["properties"]["a"]["type"], "number", "{}", get_sum.input_schema);
    assert!(sum(&connection).await.contains('5'));

    let output = connection
        .call("get-structured-content", arguments(json!({"location": "Chicago"})), CallOptions::default())
        .await
        .unwrap();
    let structured = output.structured.expect("structured content");
    assert!(structured["temperature"].is_number(), "{structured}");
    connection.close().await;
}

#[tokio::test]
async fn a_bad_call_is_an_error_and_the_server_goes_on() {
    let Some((node, entry)) = mcp_everything("a_bad_call_is_an_error_and_the_server_goes_on") else { return };
    let connection =
        Connection::connect("test", "everything", &stdio(&node, &entry), &Launch::Child, &Secrets::default())
            .await
            .unwrap();
    // Arguments the tool's schema refuses: the tool's own error, for the model to read.
    let refused = connection.call("get-sum", arguments(json!({"a": "two"})), CallOptions::default()).await;
    match refused {
        Ok(output) => assert!(output.is_error && output.text.contains("a"), "{output:?}"),
        Err(Error::Protocol { reason, .. }) => assert!(reason.to_lowercase().contains("invalid"), "{reason}"),
        Err(other) => panic!("{other}"),
    }
    let unknown = connection.call("no-such-tool", Map::new(), CallOptions::default()).await;
    match unknown {
        Ok(output) => assert!(output.is_error && output.text.contains("no-such-tool"), "{output:?}"),
        Err(Error::Protocol { reason, .. }) => assert!(reason.contains("no-such-tool"), "{reason}"),
        Err(other) => panic!("{other}"),
    }
    assert!(sum(&connection).await.contains('5'));
}

#[tokio::test]
async fn progress_renews_the_time_limit_and_silence_ends_the_call() {
    let Some((node, entry)) = mcp_everything("progress_renews_the_time_limit_and_silence_ends_the_call") else {
        return;
    };
    let config = ServerConfig { call_timeout_s: 1, ..stdio(&node, &entry) };
    let connection =
        Connection::connect("test", "everything", &config, &Launch::Child, &Secrets::default()).await.unwrap();
    // 2.4 s in all, a step every 0.6 s: longer than the limit, never silent as long.
    let (sender, mut updates) = tokio::sync::mpsc::channel(16);
    let options = CallOptions { progress: Some(sender), ..CallOptions::default() };
    let output = connection
        .call("trigger-long-running-operation", arguments(json!({"duration": 2.4, "steps": 4})), options)
        .await
        .unwrap();
    assert!(output.text.contains("completed"), "{output:?}");
    let mut seen = Vec::new();
    while let Ok(update) = updates.try_recv() {
        seen.push(update.progress);
    }
    // The last update may reach the caller after the result (the SDK hands
    // notifications and answers to different tasks; progress is advisory).
    assert!(seen.len() >= 2 && seen.windows(2).all(|w| w[0] < w[1]) && seen.iter().all(|p| *p <= 4.0), "{seen:?}");

    // One silent step of 3 s: the call ends after the 1 s limit.
    let started = Instant::now();
    let silent = connection
        .call("trigger-long-running-operation", arguments(json!({"duration": 3, "steps": 1})), CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(silent, Error::Timeout { seconds: 1, .. }), "{silent}");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(sum(&connection).await.contains('5'));
}

#[tokio::test]
async fn a_cancelled_call_ends_at_once() {
    let Some((node, entry)) = mcp_everything("a_cancelled_call_ends_at_once") else { return };
    let connection =
        Connection::connect("test", "everything", &stdio(&node, &entry), &Launch::Child, &Secrets::default())
            .await
            .unwrap();
    let options = CallOptions::default();
    let cancel = options.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let error = connection
        .call("trigger-long-running-operation", arguments(json!({"duration": 20, "steps": 2})), options)
        .await
        .unwrap_err();
    assert!(matches!(&error, Error::Cancelled { tool, .. } if tool == "trigger-long-running-operation"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(sum(&connection).await.contains('5'));
}

#[tokio::test]
async fn a_local_server_sees_only_its_tables_environment() {
    let Some((node, entry)) = mcp_everything("a_local_server_sees_only_its_tables_environment") else { return };
    let config =
        ServerConfig { env: BTreeMap::from([("CLAWOS_GRANTED".into(), "yes".into())]), ..stdio(&node, &entry) };
    let connection =
        Connection::connect("test", "everything", &config, &Launch::Child, &Secrets::default()).await.unwrap();
    let output = connection.call("get-env", Map::new(), CallOptions::default()).await.unwrap();
    let environment: Map<String, Value> = serde_json::from_str(&output.text).unwrap();
    assert_eq!(environment.get("CLAWOS_GRANTED"), Some(&json!("yes")), "{environment:?}");
    // cargo sets these for the test process; none reaches the server.
    for inherited in ["CARGO_MANIFEST_DIR", "PATH", "HOME"] {
        assert!(!environment.contains_key(inherited), "{inherited} reached the server: {environment:?}");
    }
}

#[tokio::test]
async fn a_server_that_is_not_one_is_reported() {
    // Writes a line that is not JSON-RPC, then nothing.
    let config = ServerConfig {
        command: vec!["/bin/sh".into(), "-c".into(), "echo 'Welcome!'; exec sleep 30".into()],
        start_timeout_s: 2,
        ..ServerConfig::default()
    };
    let started = Instant::now();
    let error = Connection::connect("test", "garbage", &config, &Launch::Child, &Secrets::default()).await.unwrap_err();
    assert!(matches!(error, Error::Handshake { .. } | Error::Timeout { .. }), "{error}");
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    // A program that is not there.
    let config = ServerConfig { command: vec!["/nonexistent/mcp-server".into()], ..ServerConfig::default() };
    let error = Connection::connect("test", "missing", &config, &Launch::Child, &Secrets::default()).await.unwrap_err();
    assert!(matches!(&error, Error::Spawn { program, .. } if program == "/nonexistent/mcp-server"), "{error}");
}

#[tokio::test]
async fn a_server_that_dies_mid_call_is_reported() {
    let Some((node, entry)) = mcp_everything("a_server_that_dies_mid_call_is_reported") else { return };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let command = clawos_test_require::mcp_everything_with_pid(&node, &entry, &pid_file);
    let config = ServerConfig { command, ..ServerConfig::default() };
    let connection =
        Connection::connect("test", "everything", &config, &Launch::Child, &Secrets::default()).await.unwrap();
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        // SAFETY: a plain kill(2) of the server this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let error = connection
        .call("trigger-long-running-operation", arguments(json!({"duration": 20, "steps": 2})), CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Closed { .. }), "{error}");
}

#[tokio::test]
async fn tools_are_called_over_streamable_http() {
    let Some((node, entry)) = mcp_everything("tools_are_called_over_streamable_http") else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = tokio::process::Command::new(&node)
        .args([&entry, "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "the HTTP server did not listen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let config = ServerConfig { url: Some(format!("http://127.0.0.1:{port}/mcp")), ..ServerConfig::default() };
    let connection = Connection::connect("test", "remote", &config, &Launch::Child, &Secrets::default()).await.unwrap();
    let tools = connection.tools().await.unwrap();
    assert!(tools.usable.iter().any(|tool| tool.name == "mcp.remote.get-sum"), "{tools:?}");
    assert!(sum(&connection).await.contains('5'));
    let (sender, mut updates) = tokio::sync::mpsc::channel(16);
    let options = CallOptions { progress: Some(sender), ..CallOptions::default() };
    let output = connection
        .call("trigger-long-running-operation", arguments(json!({"duration": 1, "steps": 2})), options)
        .await
        .unwrap();
    assert!(output.text.contains("completed"), "{output:?}");
    assert!(updates.recv().await.is_some(), "no progress over HTTP");
    connection.close().await;
    server.kill().await.unwrap();
}

/// A stand-in for the sandbox launcher on a development machine (the real
/// one asks systemd, as root, and is tested in the booted image): it reads
/// the request line, answers as the launcher does, and runs the requested
/// command with the connection as its standard input and output, or
/// refuses. What it received is returned.
fn stand_in_launcher(
    socket: &std::path::Path,
    refuse: Option<&'static str>,
) -> std::thread::JoinHandle<mcp_launch::Request> {
    use std::io::{BufRead, Write};
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut line = Vec::new();
        // The launcher reads a byte at a time; one line is all a client sends first.
        std::io::BufReader::new(stream.try_clone().unwrap()).read_until(b'\n', &mut line).unwrap();
        let request: mcp_launch::Request = serde_json::from_slice(&line).unwrap();
        request.check().unwrap();
        let reply = match refuse {
            Some(reason) => mcp_launch::Reply::Refused { reason: reason.into() },
            None => mcp_launch::Reply::Started { unit: request.unit() },
        };
        stream.write_all(format!("{}\n", serde_json::to_string(&reply).unwrap()).as_bytes()).unwrap();
        if refuse.is_none() {
            // What the real launcher's --secret-env step does in the unit:
            // the line of values, a byte at a time (the server's first
            // message follows it), into the server's environment.
            let mut secrets = BTreeMap::new();
            if !request.secret_env.is_empty() {
                let mut line = Vec::new();
                let mut byte = [0u8];
                while std::io::Read::read(&mut stream, &mut byte).unwrap() == 1 && byte[0] != b'\n' {
                    line.push(byte[0]);
                }
                let names: Vec<&str> = request.secret_env.iter().map(String::as_str).collect();
                secrets = mcp_launch::parse_secret_env(&line, &names).unwrap();
            }
            let io = || std::process::Stdio::from(std::os::fd::OwnedFd::from(stream.try_clone().unwrap()));
            let mut server = std::process::Command::new(&request.command[0])
                .args(&request.command[1..])
                .envs(secrets)
                .stdin(io())
                .stdout(io())
                .spawn()
                .unwrap();
            drop(stream);
            server.wait().unwrap();
        }
        request
    })
}

#[tokio::test]
async fn a_sandboxed_server_is_asked_for_and_spoken_to_through_the_launcher() {
    let Some((node, entry)) = mcp_everything("a_sandboxed_server_is_asked_for_and_spoken_to_through_the_launcher")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("launch.sock");
    let launcher = stand_in_launcher(&socket, None);
    let config = ServerConfig {
        env: BTreeMap::from([("LANG".into(), "C.UTF-8".into())]),
        network_allow: vec!["192.0.2.7".into()],
        ..stdio(&node, &entry)
    };
    let launch = Launch::Sandbox { socket: socket.clone() };
    let connection = Connection::connect("main", "everything", &config, &launch, &Secrets::default()).await.unwrap();
    assert!(sum(&connection).await.contains('5'));
    connection.close().await;
    // The server ends with its connection; the launcher got exactly the table.
    let request = launcher.join().unwrap();
    assert_eq!((request.agent.as_str(), request.server.as_str()), ("main", "everything"));
    assert_eq!(request.command, [node.as_str(), entry.as_str(), "stdio"]);
    assert_eq!(request.env, config.env);
    assert_eq!(
        (request.memory_max_mib, request.network_allow),
        (mcp_launch::DEFAULT_MEMORY_MIB, config.network_allow.clone())
    );

    // A refusal is the connection's error, with the launcher's reason.
    let socket = dir.path().join("refusing.sock");
    let launcher = stand_in_launcher(&socket, Some("command: not an executable file on this box"));
    let error = Connection::connect("main", "everything", &config, &Launch::Sandbox { socket }, &Secrets::default())
        .await
        .unwrap_err();
    assert!(matches!(&error, Error::Sandbox { reason, .. } if reason.contains("refused: command:")), "{error}");
    launcher.join().unwrap();
    // No launcher at all: the server is not started anywhere else.
    let socket = dir.path().join("absent.sock");
    let error = Connection::connect("main", "everything", &config, &Launch::Sandbox { socket }, &Secrets::default())
        .await
        .unwrap_err();
    assert!(matches!(&error, Error::Sandbox { .. }), "{error}");
}

#[tokio::test]
async fn a_local_servers_secret_variables_reach_it_and_only_it() {
    let Some((node, entry)) = mcp_everything("a_local_servers_secret_variables_reach_it_and_only_it") else { return };
    let config =
        ServerConfig { secret_env: BTreeMap::from([("API_TOKEN".into(), "mcp-token".into())]), ..stdio(&node, &entry) };
    let secrets = || Secrets {
        env: BTreeMap::from([("API_TOKEN".into(), mcp::Secret::new("s3cret-canary".into()))]),
        ..Secrets::default()
    };
    let token_of = |output: mcp::Output| {
        let environment: Map<String, Value> = serde_json::from_str(&output.text).unwrap();
        environment.get("API_TOKEN").cloned()
    };
    // Unconfined, as on a development machine.
    let connection = Connection::connect("test", "everything", &config, &Launch::Child, &secrets()).await.unwrap();
    let output = connection.call("get-env", Map::new(), CallOptions::default()).await.unwrap();
    assert_eq!(token_of(output), Some(json!("s3cret-canary")));
    connection.close().await;

    // Through the launcher: the request names the variable, the value
    // follows the reply on the connection.
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("launch.sock");
    let launcher = stand_in_launcher(&socket, None);
    let launch = Launch::Sandbox { socket };
    let connection = Connection::connect("main", "everything", &config, &launch, &secrets()).await.unwrap();
    let output = connection.call("get-env", Map::new(), CallOptions::default()).await.unwrap();
    assert_eq!(token_of(output), Some(json!("s3cret-canary")));
    connection.close().await;
    let request = launcher.join().unwrap();
    assert_eq!(request.secret_env, ["API_TOKEN"]);
    assert!(!serde_json::to_string(&request).unwrap().contains("s3cret-canary"));

    // A table naming a variable whose value was not read is not started.
    let error =
        Connection::connect("test", "everything", &config, &Launch::Child, &Secrets::default()).await.unwrap_err();
    assert!(matches!(&error, Error::Config { field: "secret_env", .. }), "{error}");
}

#[tokio::test]
async fn a_remote_server_gets_its_bearer_token_and_a_redirect_is_not_followed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Where a redirect would lead: it must never be asked anything.
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere_port = elsewhere.local_addr().unwrap().port();
    // The configured server: answers every request with a redirect there,
    // after recording the request's head.
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = server.local_addr().unwrap().port();
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let recorded = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = server.accept().await {
            let mut head = Vec::new();
            let mut byte = [0u8];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            recorded.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
            let answer = format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{elsewhere_port}/mcp\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    let config = ServerConfig {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        start_timeout_s: 5,
        ..ServerConfig::default()
    };
    let secrets = Secrets { bearer: Some(mcp::Secret::new("tok-canary".into())), ..Secrets::default() };
    let error = Connection::connect("test", "remote", &config, &Launch::Child, &secrets).await.unwrap_err();
    assert!(matches!(error, Error::Handshake { .. }), "{error}");
    assert!(!error.to_string().contains("tok-canary"), "{error}");
    let heads = heads.lock().unwrap().clone();
    assert!(!heads.is_empty(), "the server was never asked");
    for head in &heads {
        assert!(head.to_lowercase().contains("authorization: bearer tok-canary\r\n"), "{head}");
    }
    let asked = tokio::time::timeout(Duration::from_millis(500), elsewhere.accept()).await;
    assert!(asked.is_err(), "the redirect was followed");
}

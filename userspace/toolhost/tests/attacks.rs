//! A hostile tool against the real host: each test replays one attack of a
//! tool steering its granted capabilities (specs/toolhost/README.md,
//! "Hostile tools") and asserts that it fails.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use clawos_toolhost::{
    CallError, CallRequest, Credential, CredentialError, CredentialProvider, HostConfig, Origin, ToolHost,
};
use common::{echo_server, install, Fixture};
use serde_json::{json, Value};

/// The vault of these tests: one bearer token for every request it is asked about.
struct OneToken;

const TOKEN: &str = "s3cret-token-9f2c71";

impl CredentialProvider for OneToken {
    fn credentials_for(&self, _tool_id: &str, _origin: &Origin) -> Result<Vec<Credential>, CredentialError> {
        Ok(vec![Credential { header: "authorization".into(), value: format!("Bearer {TOKEN}"), secret: TOKEN.into() }])
    }
}

fn host(dir: &std::path::Path) -> ToolHost {
    ToolHost::new(HostConfig { clawfs_root: dir.into(), credentials: Arc::new(OneToken), ..HostConfig::default() })
        .unwrap()
}

fn call(host: &ToolHost, tool: &clawos_toolhost::definition::ValidTool, params: Value) -> Result<Value, CallError> {
    host.call(tool, &CallRequest { agent: "wasm-agent", params: &params, timeout: None })
}

/// A `Host` header of the tool's choosing would let a shared front end
/// route the injected credential to another site; a tool-set
/// `Authorization` would replace it; `Accept-Encoding` would let the tool
/// get the response in a coding the host cannot redact.
#[test]
fn tool_set_host_credential_and_coding_headers_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (authority, server) = echo_server(1);
    const HEADERS: &[(&str, &str)] = &[
        ("Host", "attacker-app.example"),
        ("Authorization", "Bearer tool-chosen"),
        ("Accept-Encoding", "deflate"),
        ("X-Kept", "yes"),
    ];
    let getter =
        install(dir.path(), &Fixture::HttpGetWith(HEADERS), &[&format!("network:outbound:{authority}")], 16, 5);
    call(&host(dir.path()), &getter, json!(format!("http://{authority}/"))).unwrap();
    let seen = &server.join().unwrap()[0]["headers"];
    assert_eq!(seen["host"], json!(authority), "{seen}");
    assert_eq!(seen["authorization"], json!(format!("Bearer {TOKEN}")), "{seen}");
    assert_eq!(seen["accept-encoding"], "identity", "{seen}");
    assert_eq!(seen["x-kept"], "yes", "{seen}");
}

/// Framing headers set by the tool would desynchronise the request from its
/// body (request smuggling through a front end); the host frames the body.
#[test]
fn tool_set_framing_headers_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (authority, server) = echo_server(1);
    const HEADERS: &[(&str, &str)] =
        &[("Content-Length", "5"), ("Transfer-Encoding", "chunked"), ("Connection", "upgrade"), ("Upgrade", "h2c")];
    let getter =
        install(dir.path(), &Fixture::HttpGetWith(HEADERS), &[&format!("network:outbound:{authority}")], 16, 5);
    call(&host(dir.path()), &getter, json!(format!("http://{authority}/"))).unwrap();
    let seen = &server.join().unwrap()[0]["headers"];
    for dropped in ["transfer-encoding", "upgrade"] {
        assert!(seen.get(dropped).is_none(), "{dropped} reached the server: {seen}");
    }
    // The host's own framing of the empty body, not the tool's 5.
    assert_eq!(seen["content-length"], "0", "{seen}");
    assert_ne!(seen["connection"], "upgrade", "{seen}");
}

/// A server that answers in `deflate` whatever it was asked, and echoes the
/// request's credential in the body (as many APIs do in a 401): the host
/// must not hand the tool a body it could not redact.
#[test]
fn a_response_in_a_content_coding_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let authority = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut asked = String::new();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 2 {
            if line.to_ascii_lowercase().starts_with("accept-encoding:") {
                asked = line.trim_end().to_owned();
            }
            line.clear();
        }
        let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(format!("{{\"error\": \"invalid key Bearer {TOKEN}\"}}").as_bytes()).unwrap();
        let body = encoder.finish().unwrap();
        write!(
            stream,
            "HTTP/1.1 401 Unauthorized\r\ncontent-encoding: deflate\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .unwrap();
        stream.write_all(&body).unwrap();
        asked
    });
    const HEADERS: &[(&str, &str)] = &[("Accept-Encoding", "deflate")];
    let getter =
        install(dir.path(), &Fixture::HttpGetWith(HEADERS), &[&format!("network:outbound:{authority}")], 16, 5);
    let outcome = call(&host(dir.path()), &getter, json!(format!("http://{authority}/")));
    assert_eq!(server.join().unwrap().to_ascii_lowercase(), "accept-encoding: identity");
    // The fixture traps on an http-error: the body never reached it.
    assert!(matches!(outcome, Err(CallError::Trap { .. })), "{outcome:?}");
}

/// A granted name that resolves to loopback (or any private address)
/// would reach the box's own services; only a grant naming the address
/// literally reaches it.
#[test]
fn a_granted_name_that_resolves_to_loopback_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let getter = install(dir.path(), &Fixture::HttpGet, &[&format!("network:outbound:localhost:{port}")], 16, 5);
    let outcome = call(&host(dir.path()), &getter, json!(format!("http://localhost:{port}/")));
    assert!(matches!(outcome, Err(CallError::Trap { .. })), "{outcome:?}");
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "the host connected to loopback through a name");
}

fn file_tool(dir: &std::path::Path, fixture: &Fixture, memory_limit_mb: u32) -> clawos_toolhost::definition::ValidTool {
    std::fs::create_dir_all(dir.join("workspaces")).unwrap();
    install(dir, fixture, &["filesystem:read:/clawfs/workspaces"], memory_limit_mb, 10)
}

/// A file far larger than the tool's memory is refused before the host
/// reads it (the host's memory is the daemon's, shared by every call), so
/// the guest gets an error (the fixture traps on it) instead of the host
/// loading it all and the copy into the guest running out of memory.
#[test]
fn a_file_larger_than_the_calls_memory_is_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let reader = file_tool(dir.path(), &Fixture::FileRead, 16);
    std::fs::File::create(dir.path().join("workspaces/huge.bin")).unwrap().set_len(256 << 20).unwrap();
    let host = host(dir.path());
    // Reset this process's peak RSS (proc(5), clear_refs "5"), then read.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = kib_of("VmRSS");
    let outcome = call(&host, &reader, json!("/clawfs/workspaces/huge.bin"));
    let grown = kib_of("VmHWM").saturating_sub(before);
    assert!(matches!(outcome, Err(CallError::Trap { .. })), "{outcome:?}");
    assert!(grown < 64 << 10, "the host's peak memory grew by {grown} KiB reading a 256 MiB file for a 16 MiB tool");
}

/// A `Vm*` line of /proc/self/status, in KiB.
fn kib_of(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|line| line.starts_with(&format!("{field}:"))).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A FIFO would block the host's thread in `open` forever, past the call's
/// deadline (epoch interruption only stops guest code); it is refused as
/// fs-engine refuses it, as not a regular file.
#[test]
fn reading_a_fifo_fails_instead_of_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let reader = file_tool(dir.path(), &Fixture::FileRead, 16);
    let fifo =
        std::ffi::CString::new(dir.path().join("workspaces/pipe").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let host = host(dir.path());
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(call(&host, &reader, json!("/clawfs/workspaces/pipe"))).unwrap());
    match outcome.recv_timeout(Duration::from_secs(20)) {
        Ok(outcome) => assert!(
            matches!(&outcome, Err(CallError::CapabilityDenied { reason, .. }) if reason.contains("not a regular file")),
            "{outcome:?}"
        ),
        Err(_) => panic!("reading a FIFO blocked the host for 20 s"),
    }
}

/// A directory whose listing is larger than the tool's memory is refused
/// before the host collects it.
#[test]
fn a_listing_larger_than_the_calls_memory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lister = file_tool(dir.path(), &Fixture::ListDir, 1);
    let many = dir.path().join("workspaces/many");
    std::fs::create_dir(&many).unwrap();
    // 6,000 names of 200 bytes: 1.2 MB of names for a 1 MiB tool.
    for i in 0..6000 {
        std::fs::File::create(many.join(format!("{i:0>200}"))).unwrap();
    }
    let outcome = call(&host(dir.path()), &lister, json!("/clawfs/workspaces/many"));
    assert!(matches!(outcome, Err(CallError::Trap { .. })), "{outcome:?}");
    // A listing that fits still works.
    assert_eq!(call(&host(dir.path()), &lister, json!("/clawfs/workspaces")).unwrap(), json!({}));
}

/// A symlink swapped in for a directory after the path was checked must not
/// be followed: the open itself refuses every symlink on the way.
#[test]
fn a_symlink_in_the_path_is_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let reader = file_tool(dir.path(), &Fixture::FileRead, 16);
    std::fs::write(dir.path().join("outside.json"), "\"outside\"").unwrap();
    std::os::unix::fs::symlink(dir.path(), dir.path().join("workspaces/link")).unwrap();
    let outcome = call(&host(dir.path()), &reader, json!("/clawfs/workspaces/link/outside.json"));
    assert!(matches!(outcome, Err(CallError::CapabilityDenied { .. })), "{outcome:?}");
}

//! A real IPC server on a unique abstract socket, and raw-socket helpers.

#![allow(dead_code)] // Each test binary uses a different subset.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clawos_ipc::server::{Connection, Handler, MethodError, ServerSettings, ServerStats};
use clawos_ipc::{AccessPolicy, ComponentId, IpcServer, Object, ProtocolVersion, RateLimit, Request};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Policy: the test process (root) is `agent-loop`; agent-loop may call
/// everything on scheduler except `forbidden`.
pub const AGENT_LOOP_POLICY: &str = r#"
[identity]
operator_uids = []
uids = { "0" = "agent-loop" }
[[allow]]
senders = ["agent-loop"]
recipients = ["scheduler"]
methods = ["echo", "sleep", "ping"]
"#;

/// Answers `echo` (params back), `sleep` (`{"ms": n}`), else ENOENT.
pub struct TestHandler;

impl Handler for TestHandler {
    async fn handle_request(&self, _connection: Connection, request: Request) -> Result<Object, MethodError> {
        match request.method.as_str() {
            "echo" | "ping" => Ok(request.params),
            "sleep" => {
                let ms = request.params.get("ms").and_then(Value::as_u64).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(Object::new())
            }
            other => Err(MethodError::unknown_method(other)),
        }
    }
}

/// A server for `scheduler` with `policy`, `versions`, `rate_limit`,
/// listening on a fresh abstract name; returns the name.
pub fn start_server(policy: &str, versions: &[ProtocolVersion], rate_limit: RateLimit) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("clawos-ipc-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let listener = clawos_ipc::socket::bind_abstract(&name).unwrap();
    let settings = ServerSettings {
        component: ComponentId::Scheduler,
        software_version: "test".into(),
        protocol_versions: versions.to_vec(),
        policy: Arc::new(AccessPolicy::parse(policy, "test policy").unwrap()),
        rate_limit,
        method_timeout: |_| clawos_ipc::timeouts::DEFAULT_REQUEST_TIMEOUT,
    };
    let server = IpcServer::new(settings, Arc::new(TestHandler), Arc::new(ServerStats::default()));
    tokio::spawn(async move {
        let listener = tokio::net::UnixListener::from_std(listener).unwrap();
        server.serve(listener).await
    });
    name
}

/// A line-level connection, for sending what a well-behaved client never would.
pub struct RawPeer {
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    writer: tokio::net::unix::OwnedWriteHalf,
}

impl RawPeer {
    pub fn connect(name: &str) -> RawPeer {
        RawPeer::from_stream(clawos_ipc::socket::connect_abstract(name).unwrap())
    }

    pub fn from_stream(stream: tokio::net::UnixStream) -> RawPeer {
        let (read, writer) = stream.into_split();
        RawPeer { reader: BufReader::new(read), writer }
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.unwrap();
    }

    pub async fn send_json(&mut self, value: &Value) {
        self.try_send_json(value).await.unwrap();
    }

    /// Sends `value`; fails if the server has already closed the connection.
    pub async fn try_send_json(&mut self, value: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(value).unwrap();
        line.push(b'\n');
        self.writer.write_all(&line).await
    }

    pub async fn close_write(&mut self) {
        self.writer.shutdown().await.unwrap();
    }

    /// The next line as JSON, or `None` at EOF. Fails the test after 5 s.
    pub async fn recv(&mut self) -> Option<Value> {
        self.recv_within(Duration::from_secs(5)).await
    }

    /// The next line as JSON, or `None` once the server has closed the
    /// connection. Fails the test after `limit`.
    pub async fn recv_within(&mut self, limit: Duration) -> Option<Value> {
        let mut line = String::new();
        let read = match tokio::time::timeout(limit, self.reader.read_line(&mut line)).await {
            Ok(Ok(read)) => read,
            // A server closing with bytes of ours still unread resets the
            // connection (Linux, AF_UNIX): closed as well.
            Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionReset => 0,
            Ok(Err(error)) => panic!("read failed: {error}"),
            Err(_) => panic!("no answer within {limit:?}"),
        };
        (read > 0).then(|| serde_json::from_str(&line).unwrap())
    }

    /// Performs a valid hello as `sender`, asserting success.
    pub async fn hello(&mut self, sender: &str) {
        self.send_json(&request(sender, "scheduler", "hello", serde_json::json!({"supported_versions": ["1.0"]})))
            .await;
        let answer = self.recv().await.unwrap();
        assert_eq!(answer["payload"]["status"], "success", "{answer}");
    }
}

/// Connects to `name` with the effective UID `uid`, so the server's
/// SO_PEERCRED sees `uid`, a UID other than the test's. The connect runs
/// on a thread of its own that ends right after it: the raw `setresuid`
/// system call changes only the calling thread's credentials (glibc's
/// `setresuid` would change every thread of the test). Needs root.
pub fn connect_as(uid: u32, name: &str) -> tokio::net::UnixStream {
    use std::os::linux::net::SocketAddrExt;
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let stream = std::thread::spawn(move || {
        let unchanged = nix::libc::uid_t::MAX;
        // SAFETY: setresuid takes three integers and touches no memory.
        let outcome = unsafe { nix::libc::syscall(nix::libc::SYS_setresuid, unchanged, uid, unchanged) };
        assert_eq!(outcome, 0, "setresuid(-1, {uid}, -1): {} (these tests need root)", std::io::Error::last_os_error());
        std::os::unix::net::UnixStream::connect_addr(&address)
    })
    .join()
    .unwrap()
    .unwrap();
    stream.set_nonblocking(true).unwrap();
    tokio::net::UnixStream::from_std(stream).unwrap()
}

/// A schema-valid request envelope.
pub fn request(sender: &str, recipient: &str, method: &str, params: Value) -> Value {
    serde_json::json!({
        "version": "1.0",
        "timestamp_ns": 1,
        "sender": sender,
        "recipient": recipient,
        "message_id": uuid::Uuid::new_v4().to_string(),
        "correlation_id": uuid::Uuid::new_v4().to_string(),
        "message_type": "request",
        "payload": {"method": method, "params": params}
    })
}

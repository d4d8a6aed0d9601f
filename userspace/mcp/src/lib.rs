//! The Model Context Protocol client of ClawOS (`specs/mcp/README.md`): one
//! agent's connection to one MCP server, on the official Rust SDK (`rmcp`),
//! over either transport the protocol has: a local server's standard input
//! and output, or a remote server's Streamable HTTP endpoint.
//!
//! Owns: an `[mcp.servers.<name>]` table and its rules ([`ServerConfig`]),
//! connecting and the handshake within a time limit, the server's tools as
//! the agent will see them (`mcp.<server>.<tool>`, [`Tools`]), and a call:
//! its time limit (renewed by the server's progress), its cancellation,
//! its progress and its result, every failure a documented [`Error`].
//!
//! Must not own: whether a call may run (the agent's permissions, autonomy
//! and approvals are decided where WASM tools' are), the sandbox a local
//! server runs in (the [`Launch`] the caller gives says how its process is
//! started: on the box, in a unit of its own through the `clawos-mcp-launch`
//! helper, whose crate owns the unit's properties), secrets (a bearer token
//! and a local server's secret variables arrive as [`Secrets`], read from
//! the vault by the caller, and are never logged), and recording calls.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, ClientCapabilities, ClientConfig, ClientRequest, Implementation,
    ProgressNotificationParam, ProtocolVersion, Request, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde::Deserialize;
use tokio_stream::StreamExt as _;
use tokio_util::sync::CancellationToken;

/// The prefix of every MCP tool's name as an agent sees it.
pub const TOOL_PREFIX: &str = "mcp";
/// Longest server name: it is part of every tool name of the server.
pub const MAX_SERVER_NAME_LEN: usize = 32;
/// Longest tool name a server may use (the protocol's own limit).
pub const MAX_TOOL_NAME_LEN: usize = 128;
/// Longest time limit a call or a connection may be given.
pub const MAX_TIMEOUT_S: u64 = 600;
/// Largest response of an HTTP server, and longest line of a local one.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Longest tool description passed on: it goes into every prompt.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;

/// Why a server could not be used, or a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server's table breaks a rule; `field` names the key.
    #[error("mcp server {server:?}: {field}: {reason}")]
    Config { server: String, field: &'static str, reason: String },
    /// A local server's program could not be started.
    #[error("mcp server {server:?}: starting {program:?}: {source}")]
    Spawn {
        server: String,
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// The sandbox launcher refused to start a local server, or could not
    /// be reached (specs/mcp/README.md, "Where local servers run").
    #[error("mcp server {server:?}: the sandbox: {reason}")]
    Sandbox { server: String, reason: String },
    /// The connection or the protocol's handshake failed: the program
    /// exited, wrote something that is not the protocol, or the endpoint
    /// refused or does not speak it.
    #[error("mcp server {server:?}: handshake: {reason}")]
    Handshake { server: String, reason: String },
    /// No answer within the time limit (the connection's, or a call's
    /// since the server's last progress). A call is cancelled at the server.
    #[error("mcp server {server:?}: no answer within {seconds} s ({what})")]
    Timeout { server: String, what: String, seconds: u64 },
    /// The connection ended (the server exited, crashed or hung up).
    #[error("mcp server {server:?}: the connection closed ({what})")]
    Closed { server: String, what: String },
    /// The caller cancelled the call; the server was told.
    #[error("mcp server {server:?}: {tool} cancelled")]
    Cancelled { server: String, tool: String },
    /// The server answered with a protocol error (an unknown tool, bad
    /// arguments as the server judges them, an internal error).
    #[error("mcp server {server:?}: {what}: {reason}")]
    Protocol { server: String, what: String, reason: String },
}

/// `[mcp.servers.<name>]` of an agent's configuration: exactly one of
/// `command` (a local server) and `url` (a remote one).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// A local server: its program and arguments. It speaks the protocol
    /// on its standard input and output.
    #[serde(default)]
    pub command: Vec<String>,
    /// A remote server's Streamable HTTP endpoint (`https://`, or `http://`
    /// to a loopback address).
    pub url: Option<String>,
    /// A local server's whole environment: these variables and no others
    /// (nothing of the agent's own environment reaches it).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A local server's secret variables: each variable's name and the
    /// vault secret its value is read from when the server starts. Names
    /// only: the values are never in a configuration file, the request to
    /// the sandbox launcher or its unit (`mcp_launch::SECRET_ENV_FLAG`).
    #[serde(default)]
    pub secret_env: BTreeMap<String, String>,
    /// The vault secret whose value a remote server gets as its bearer
    /// token. The name only: the value is never in a configuration file.
    pub bearer_secret: Option<String>,
    /// Longest a call may go without an answer or progress (seconds).
    #[serde(default = "default_call_timeout")]
    pub call_timeout_s: u64,
    /// Longest the start and the handshake may take (seconds).
    #[serde(default = "default_start_timeout")]
    pub start_timeout_s: u64,
    /// A local server's memory limit in its sandbox (MiB; default
    /// [`mcp_launch::DEFAULT_MEMORY_MIB`]).
    pub memory_max_mib: Option<u32>,
    /// The IP addresses and prefixes a local server may reach from its
    /// sandbox; none (the default): no network at all.
    #[serde(default)]
    pub network_allow: Vec<String>,
}

impl Default for ServerConfig {
    /// Neither a command nor a url yet; the default time limits.
    fn default() -> Self {
        ServerConfig {
            command: Vec::new(),
            url: None,
            env: BTreeMap::new(),
            secret_env: BTreeMap::new(),
            bearer_secret: None,
            call_timeout_s: default_call_timeout(),
            start_timeout_s: default_start_timeout(),
            memory_max_mib: None,
            network_allow: Vec::new(),
        }
    }
}

fn default_call_timeout() -> u64 {
    60
}

fn default_start_timeout() -> u64 {
    30
}

/// Where a server is, once its table passed [`ServerConfig::endpoint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A program to start, with exactly this environment and the values
    /// of the secret variables `secret_env`; in a sandbox, with this much
    /// memory and these addresses to reach.
    Stdio {
        program: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        secret_env: Vec<String>,
        memory_max_mib: u32,
        network_allow: Vec<String>,
    },
    /// A Streamable HTTP endpoint.
    Http { url: String },
}

impl ServerConfig {
    /// Checks the table of server `name` and says where the server is.
    pub fn endpoint(&self, name: &str) -> Result<Endpoint, Error> {
        let fail = |field, reason: String| Error::Config { server: name.to_owned(), field, reason };
        check_server_name(name).map_err(|reason| fail("name", reason))?;
        for (field, value) in [("call_timeout_s", self.call_timeout_s), ("start_timeout_s", self.start_timeout_s)] {
            if !(1..=MAX_TIMEOUT_S).contains(&value) {
                return Err(fail(field, format!("{value} is not within 1..={MAX_TIMEOUT_S}")));
            }
        }
        match (&self.command[..], &self.url) {
            ([], None) => Err(fail("command", "a server needs a command or a url".into())),
            ([_, ..], Some(_)) => Err(fail("url", "a server has a command or a url, not both".into())),
            ([program, args @ ..], None) => {
                if self.bearer_secret.is_some() {
                    return Err(fail("bearer_secret", "only a url server is sent a bearer token".into()));
                }
                if let Some(bad) = self.env.keys().find(|key| !mcp_launch::is_env_name(key)) {
                    return Err(fail("env", format!("{bad:?} is not a variable name (A-Z, 0-9, _)")));
                }
                let secret_env: Vec<String> = self.secret_env.keys().cloned().collect();
                mcp_launch::check_secret_env(&secret_env, &self.env).map_err(|reason| fail("secret_env", reason))?;
                let memory_max_mib = self.memory_max_mib.unwrap_or(mcp_launch::DEFAULT_MEMORY_MIB);
                mcp_launch::check_limits(memory_max_mib, &self.network_allow)
                    .map_err(|(field, reason)| fail(field, reason))?;
                Ok(Endpoint::Stdio {
                    program: program.clone(),
                    args: args.to_vec(),
                    env: self.env.clone(),
                    secret_env,
                    memory_max_mib,
                    network_allow: self.network_allow.clone(),
                })
            }
            ([], Some(url)) => {
                let local_only = [
                    ("env", !self.env.is_empty()),
                    ("secret_env", !self.secret_env.is_empty()),
                    ("memory_max_mib", self.memory_max_mib.is_some()),
                    ("network_allow", !self.network_allow.is_empty()),
                ];
                if let Some((field, _)) = local_only.into_iter().find(|(_, set)| *set) {
                    return Err(fail(field, "only a command server has it (it runs on the box)".into()));
                }
                check_url(url).map_err(|reason| fail("url", reason))?;
                Ok(Endpoint::Http { url: url.clone() })
            }
        }
    }
}

/// A server's name: lower-case letters, digits and `-`, starting with a
/// letter, at most [`MAX_SERVER_NAME_LEN`]; it becomes part of tool names
/// (`mcp.<server>.<tool>`).
pub fn check_server_name(name: &str) -> Result<(), String> {
    if mcp_launch::is_name(name, MAX_SERVER_NAME_LEN) {
        Ok(())
    } else {
        Err(format!("{name:?}: a-z, 0-9 and -, starting with a letter, at most {MAX_SERVER_NAME_LEN}"))
    }
}

/// Asks the sandbox launcher at `socket` to start the server of `request`;
/// the connection, now the server's standard input and output. The values
/// of the request's secret variables (from `values`) are the connection's
/// first line after the launcher's reply, read in the unit before the
/// server starts (`mcp_launch::SECRET_ENV_FLAG`).
async fn sandboxed(
    socket: &std::path::Path,
    request: &mcp_launch::Request,
    values: &BTreeMap<String, Secret>,
) -> Result<(tokio::net::unix::OwnedReadHalf, tokio::net::unix::OwnedWriteHalf), String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| format!("{}: {e}", socket.display()))?;
    let mut line = serde_json::to_vec(request).map_err(|e| e.to_string())?;
    line.push(b'\n');
    stream.write_all(&line).await.map_err(|e| format!("sending the request: {e}"))?;
    // The reply, a byte at a time: what follows it is the server's.
    let mut reply = Vec::new();
    loop {
        match stream.read_u8().await.map_err(|e| format!("reading the reply: {e}"))? {
            b'\n' => break,
            _ if reply.len() >= mcp_launch::MAX_REQUEST_BYTES => return Err("the reply has no end".into()),
            byte => reply.push(byte),
        }
    }
    match serde_json::from_slice(&reply).map_err(|e| format!("the reply is not one: {e}"))? {
        mcp_launch::Reply::Started { .. } if request.secret_env.is_empty() => Ok(stream.into_split()),
        mcp_launch::Reply::Started { .. } => {
            let values: BTreeMap<&str, &str> = request
                .secret_env
                .iter()
                .filter_map(|key| values.get(key).map(|Secret(value)| (key.as_str(), value.as_str())))
                .collect();
            // Wiped when sent; the newline written on its own, so the
            // buffer is never grown (a reallocation would leave a copy).
            let line = zeroize::Zeroizing::new(serde_json::to_vec(&values).map_err(|e| e.to_string())?);
            let failed = |e: std::io::Error| format!("sending the secret variables: {e}");
            stream.write_all(&line).await.map_err(failed)?;
            stream.write_all(b"\n").await.map_err(failed)?;
            Ok(stream.into_split())
        }
        mcp_launch::Reply::Refused { reason } => Err(format!("refused: {reason}")),
    }
}

/// `https://` anywhere, `http://` only to this box's loopback (a token or a
/// tool's arguments must not cross a network in clear text).
fn check_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?}: {e}"))?;
    match parsed.scheme() {
        "https" => Ok(()),
        "http" => match parsed.host() {
            Some(url::Host::Domain("localhost")) => Ok(()),
            Some(url::Host::Ipv4(address)) if address.is_loopback() => Ok(()),
            Some(url::Host::Ipv6(address)) if address.is_loopback() => Ok(()),
            _ => Err(format!("{url:?}: http:// only to a loopback address; use https://")),
        },
        other => Err(format!("{url:?}: the scheme {other:?} is not http or https")),
    }
}

/// How a local server's process is started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Launch {
    /// As a child of this process, with the environment of its table only,
    /// unconfined: for tests and benchmarks on a development machine.
    #[default]
    Child,
    /// By the sandbox launcher listening at `socket` (on the box,
    /// [`mcp_launch::SOCKET`]), as a transient systemd service of its own;
    /// the connection to the launcher becomes the server's standard input
    /// and output.
    Sandbox { socket: PathBuf },
}

/// A value from the vault. Wiped when dropped; its `Debug` does not show it.
pub struct Secret(zeroize::Zeroizing<String>);

impl Secret {
    /// The secret `value`.
    pub fn new(value: String) -> Self {
        Secret(zeroize::Zeroizing::new(value))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Secret(..)")
    }
}

/// What a server is given from the vault (its table names the secrets;
/// the caller reads them): a remote server's bearer token, a local
/// server's secret variables by name.
#[derive(Debug, Default)]
pub struct Secrets {
    /// The bearer token of a `url` server with a `bearer_secret`.
    pub bearer: Option<Secret>,
    /// The value of each of a `command` server's `secret_env` variables.
    pub env: BTreeMap<String, Secret>,
}

/// One tool of a server, as an agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// `mcp.<server>.<tool>`: the name the agent calls.
    pub name: String,
    /// The server's own name for it.
    pub server_name: String,
    /// What the server says the tool does (empty if it says nothing).
    pub description: String,
    /// The JSON Schema of its arguments, as the server gave it.
    pub input_schema: serde_json::Value,
}

/// A server's tools: those an agent may be shown, and those refused with
/// the reason (a name the protocol does not allow, a schema WASM tools
/// could not have either: `clawfs::names::check_params_schema`, a name
/// given twice). A description is passed on without control characters,
/// at most [`MAX_DESCRIPTION_BYTES`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tools {
    /// In the server's order.
    pub usable: Vec<Tool>,
    /// `(the server's name for it, why it is not shown)`.
    pub refused: Vec<(String, String)>,
}

/// Progress a server reported during a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// How far (the server's unit).
    pub progress: f64,
    /// Out of how much, if the server knows.
    pub total: Option<f64>,
    /// The server's words, if any.
    pub message: Option<String>,
}

/// What a call may wait for, and who may end it.
#[derive(Debug, Default)]
pub struct CallOptions {
    /// Ends the call at once, telling the server.
    pub cancel: CancellationToken,
    /// Where the server's progress goes; a full channel drops an update.
    pub progress: Option<tokio::sync::mpsc::Sender<Progress>>,
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The tool said the call failed (a result, not a protocol error: the
    /// text says why, for the model to read).
    pub is_error: bool,
    /// The text of its content blocks, in order, one per line; a block of
    /// another kind (an image, a resource) is named, not embedded.
    pub text: String,
    /// Its structured result, if it gave one.
    pub structured: Option<serde_json::Value>,
}

/// The client's side of a connection: it forwards the server's progress to
/// the call it belongs to.
struct Handler {
    progress: ProgressDispatcher,
}

impl ClientHandler for Handler {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.progress.handle_notification(params).await;
    }

    fn get_info(&self) -> ClientConfig {
        // The newest protocol version that has the `initialize` handshake
        // this client makes (the SDK's default, its newest, has none); a
        // server answers with the version it speaks, which the SDK takes.
        // The conformance suite's `initialize` scenario checks it
        // (tests/mcp-conformance).
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("clawos", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// A connection to one server, ready for calls. Dropping it closes the
/// connection; a local server started as a [`Launch::Child`] is killed,
/// one in a [`Launch::Sandbox`] is stopped with its unit.
pub struct Connection {
    server: String,
    call_timeout: Duration,
    service: RunningService<RoleClient, Handler>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Connection").field("server", &self.server).finish_non_exhaustive()
    }
}

impl Connection {
    /// Starts or reaches server `name` of agent `agent` as its table says
    /// (a sandbox's unit is named after both), and makes the protocol's
    /// handshake, within the table's `start_timeout_s`.
    pub async fn connect(
        agent: &str,
        name: &str,
        config: &ServerConfig,
        launch: &Launch,
        secrets: &Secrets,
    ) -> Result<Connection, Error> {
        let endpoint = config.endpoint(name)?;
        if let Some(missing) = config.secret_env.keys().find(|key| !secrets.env.contains_key(*key)) {
            let reason = format!("no value was read for {missing}");
            return Err(Error::Config { server: name.to_owned(), field: "secret_env", reason });
        }
        let handler = Handler { progress: ProgressDispatcher::new() };
        let handshake = |reason: String| Error::Handshake { server: name.to_owned(), reason };
        let start = async {
            match endpoint {
                Endpoint::Stdio { program, args, env, secret_env, memory_max_mib, network_allow } => match launch {
                    Launch::Child => {
                        let mut command = tokio::process::Command::new(&program);
                        command.args(&args).env_clear().envs(&env).kill_on_drop(true);
                        command.envs(secrets.env.iter().map(|(key, Secret(value))| (key, value.as_str())));
                        let (transport, _stderr) = TokioChildProcess::builder(command)
                            .stderr(std::process::Stdio::null())
                            .spawn()
                            .map_err(|source| Error::Spawn { server: name.to_owned(), program, source })?;
                        handler.serve(transport).await.map_err(|e| handshake(e.to_string()))
                    }
                    Launch::Sandbox { socket } => {
                        let command = std::iter::once(program).chain(args).collect();
                        let request = mcp_launch::Request {
                            agent: agent.to_owned(),
                            server: name.to_owned(),
                            command,
                            env,
                            secret_env,
                            memory_max_mib,
                            network_allow,
                        };
                        let (read, write) = sandboxed(socket, &request, &secrets.env)
                            .await
                            .map_err(|reason| Error::Sandbox { server: name.to_owned(), reason })?;
                        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(read, write)
                            .with_max_line_length(MAX_MESSAGE_BYTES);
                        handler.serve(transport).await.map_err(|e| handshake(e.to_string()))
                    }
                },
                Endpoint::Http { url } => {
                    let client = http_client().map_err(handshake)?;
                    let mut transport_config =
                        StreamableHttpClientTransportConfig::with_uri(url).max_json_response_size(MAX_MESSAGE_BYTES);
                    transport_config.max_sse_event_size = MAX_MESSAGE_BYTES;
                    if let Some(Secret(token)) = &secrets.bearer {
                        transport_config = transport_config.auth_header(token.as_str());
                    }
                    let transport = StreamableHttpClientTransport::with_client(client, transport_config);
                    handler.serve(transport).await.map_err(|e| handshake(e.to_string()))
                }
            }
        };
        let seconds = config.start_timeout_s;
        let service = tokio::time::timeout(Duration::from_secs(seconds), start)
            .await
            .map_err(|_| Error::Timeout { server: name.to_owned(), what: "the handshake".into(), seconds })??;
        Ok(Connection { server: name.to_owned(), call_timeout: Duration::from_secs(config.call_timeout_s), service })
    }

    /// The server this connects to.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The server's tools, every page of them.
    pub async fn tools(&self) -> Result<Tools, Error> {
        let listed = self.service.peer().list_all_tools().await.map_err(|e| self.failed("tools/list", e))?;
        let mut tools = Tools::default();
        let mut seen = std::collections::BTreeSet::new();
        for tool in listed {
            let server_name = tool.name.to_string();
            let input_schema = serde_json::Value::Object((*tool.input_schema).clone());
            let checked = check_tool_name(&server_name)
                .and_then(|()| clawfs::names::check_params_schema(&input_schema.to_string()));
            if let Err(reason) = checked {
                tools.refused.push((server_name, reason));
            } else if !seen.insert(server_name.clone()) {
                tools.refused.push((server_name, "the server lists this name twice".into()));
            } else {
                tools.usable.push(Tool {
                    name: format!("{TOOL_PREFIX}.{}.{server_name}", self.server),
                    description: shown_description(tool.description.as_deref().unwrap_or_default()),
                    input_schema,
                    server_name,
                });
            }
        }
        Ok(tools)
    }

    /// Calls the server's tool `tool` (its own name) with `arguments`.
    /// The call fails with [`Error::Timeout`] when the server neither
    /// answers nor reports progress for the table's `call_timeout_s`, and
    /// with [`Error::Cancelled`] when `options.cancel` fires; either way
    /// the server is told to stop.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        options: CallOptions,
    ) -> Result<Output, Error> {
        let what = format!("tools/call {tool}");
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(Request::new(params));
        let request_options = PeerRequestOptions::with_timeout(self.call_timeout).reset_timeout_on_progress();
        let handle = self
            .service
            .peer()
            .send_cancellable_request(request, request_options)
            .await
            .map_err(|e| self.failed(&what, e))?;
        // Progress goes on while the call waits: a subscription made after
        // the request was sent may miss an update sent before it, which
        // only the caller's display loses (the time limit is renewed by
        // the SDK itself).
        let token = handle.progress_token.clone();
        let dispatcher = &self.service.service().progress;
        let progress = async move {
            if let Some(sender) = options.progress {
                let mut updates = dispatcher.subscribe(token).await;
                while let Some(update) = updates.next().await {
                    // A full channel drops this update: progress is advisory.
                    let _ = sender.try_send(Progress {
                        progress: update.progress,
                        total: update.total,
                        message: update.message,
                    });
                }
            }
            std::future::pending::<()>().await;
        };
        let peer = handle.peer.clone();
        let id = handle.id.clone();
        let answer = tokio::select! {
            answer = handle.await_response() => answer.map_err(|e| self.failed(&what, e))?,
            () = options.cancel.cancelled() => {
                let cancelled = CancelledNotificationParam::new(Some(id), Some("cancelled by the agent".into()));
                // The call ends here even if the server cannot be told.
                let _ = peer.notify_cancelled(cancelled).await;
                return Err(Error::Cancelled { server: self.server.clone(), tool: tool.to_owned() });
            }
            () = progress => unreachable!("the progress future never ends"),
        };
        match answer {
            ServerResult::CallToolResult(result) => Ok(Output {
                is_error: result.is_error.unwrap_or(false),
                text: result.content.iter().map(describe_block).collect::<Vec<_>>().join("\n"),
                structured: result.structured_content,
            }),
            other => Err(Error::Protocol {
                server: self.server.clone(),
                what,
                reason: format!("not a tool result: {}", kind_of(&other)),
            }),
        }
    }

    /// Closes the connection and waits for its end (a child is killed).
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }

    fn failed(&self, what: &str, error: ServiceError) -> Error {
        let server = self.server.clone();
        let what = what.to_owned();
        match error {
            ServiceError::Timeout { timeout } => Error::Timeout { server, what, seconds: timeout.as_secs() },
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => Error::Closed { server, what },
            ServiceError::McpError(data) => Error::Protocol { server, what, reason: data.message.to_string() },
            other => Error::Protocol { server, what, reason: other.to_string() },
        }
    }
}

/// A tool name as the protocol allows it: 1 to [`MAX_TOOL_NAME_LEN`]
/// characters of `A-Z a-z 0-9 _ - .`. Anything else (spaces, words to the
/// model, control characters) is refused, not rewritten.
pub fn check_tool_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_LEN
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(format!("not a tool name (A-Z, a-z, 0-9, _, -, ., at most {MAX_TOOL_NAME_LEN})"))
    }
}

/// A server's description as a prompt may carry it: control characters
/// but the newline left out, cut at [`MAX_DESCRIPTION_BYTES`].
fn shown_description(text: &str) -> String {
    let mut shown = String::new();
    for c in text.chars().filter(|c| *c == '\n' || !c.is_control()) {
        if shown.len() + c.len_utf8() > MAX_DESCRIPTION_BYTES {
            break;
        }
        shown.push(c);
    }
    shown
}

fn describe_block(block: &rmcp::model::ContentBlock) -> String {
    use rmcp::model::ContentBlock;
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!("[image, {}]", image.mime_type),
        ContentBlock::Audio(audio) => format!("[audio, {}]", audio.mime_type),
        ContentBlock::Resource(_) => "[embedded resource]".into(),
        ContentBlock::ResourceLink(link) => format!("[resource {}]", link.uri),
        _ => "[content of a kind this client does not know]".into(),
    }
}

fn kind_of(result: &ServerResult) -> String {
    serde_json::to_value(result)
        .ok()
        .and_then(|value| value.as_object().map(|object| object.keys().cloned().collect::<Vec<_>>().join(",")))
        .unwrap_or_default()
}

/// The HTTP client for remote servers: rustls with the process's `ring`
/// provider, no proxy, and no redirects at all (a redirect could carry the
/// bearer token or a call's arguments to another host).
fn http_client() -> Result<reqwest::Client, String> {
    // One process-wide provider; a second install is a no-op error.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("the HTTP client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> ServerConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_table_names_a_command_or_a_url() {
        let local = table("command = [\"node\", \"server.js\"]\nenv = { LANG = \"C\" }");
        assert_eq!(
            local.endpoint("files").unwrap(),
            Endpoint::Stdio {
                program: "node".into(),
                args: vec!["server.js".into()],
                env: BTreeMap::from([("LANG".into(), "C".into())]),
                secret_env: Vec::new(),
                memory_max_mib: mcp_launch::DEFAULT_MEMORY_MIB,
                network_allow: Vec::new(),
            }
        );
        let with_secret = table("command = [\"node\"]\nsecret_env = { API_TOKEN = \"mcp-token\" }");
        assert!(
            matches!(with_secret.endpoint("x").unwrap(), Endpoint::Stdio { secret_env, .. } if secret_env == ["API_TOKEN"])
        );
        let remote = table("url = \"https://mcp.example/mcp\"\nbearer_secret = \"mcp-token\"");
        assert_eq!(remote.endpoint("search").unwrap(), Endpoint::Http { url: "https://mcp.example/mcp".into() });
        let refused = |text: &str, name: &str| table(text).endpoint(name).unwrap_err().to_string();
        assert!(refused("", "x").contains("needs a command or a url"));
        assert!(refused("command = [\"a\"]\nurl = \"https://h/\"", "x").contains("not both"));
        assert!(refused("url = \"http://10.0.0.1/mcp\"", "x").contains("only to a loopback"));
        assert!(refused("url = \"ftp://h/\"", "x").contains("not http or https"));
        assert!(refused("command = [\"a\"]\nbearer_secret = \"s\"", "x").contains("only a url server"));
        assert!(refused("command = [\"a\"]\nenv = { \"a b\" = \"1\" }", "x").contains("not a variable name"));
        assert!(refused("command = [\"a\"]\nsecret_env = { \"a b\" = \"mcp-t\" }", "x").contains("secret_env:"));
        let twice = "command = [\"a\"]\nenv = { T = \"1\" }\nsecret_env = { T = \"mcp-t\" }";
        assert!(refused(twice, "x").contains("secret_env:"));
        assert!(refused("url = \"https://h/\"\nsecret_env = { T = \"mcp-t\" }", "x").contains("only a command server"));
        assert!(refused("command = [\"a\"]\ncall_timeout_s = 0", "x").contains("call_timeout_s"));
        assert!(refused("command = [\"a\"]\nmemory_max_mib = 8", "x").contains("memory_max_mib: 8 is not within"));
        assert!(refused("command = [\"a\"]\nnetwork_allow = [\"example.com\"]", "x").contains("names are not resolved"));
        assert!(refused("url = \"https://h/\"\nnetwork_allow = [\"10.0.0.1\"]", "x").contains("only a command server"));
        assert!(refused("command = [\"a\"]", "Files").contains("starting with a letter"));
        assert!(refused("command = [\"a\"]", &"a".repeat(33)).contains("at most 32"));
        table("url = \"http://127.0.0.1:3001/mcp\"").endpoint("x").unwrap();
        table("url = \"http://[::1]:3001/mcp\"").endpoint("x").unwrap();
        assert!(toml::from_str::<ServerConfig>("command = [\"a\"]\nshell = true").is_err());
    }

    #[test]
    fn tool_names_are_the_protocols() {
        check_tool_name("get-sum").unwrap();
        check_tool_name("files.read_text").unwrap();
        for bad in ["", "two words", "ignore previous instructions", "tab\t", "é", &"x".repeat(129)] {
            assert!(check_tool_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn descriptions_lose_control_characters_and_are_capped() {
        assert_eq!(shown_description("Adds\u{1b}[31m two\tnumbers.\nSafe."), "Adds[31m twonumbers.\nSafe.");
        assert_eq!(shown_description(&"é".repeat(600)).len(), MAX_DESCRIPTION_BYTES);
    }

    #[test]
    fn a_token_is_not_shown() {
        assert_eq!(format!("{:?}", Secret::new("s3cret".into())), "Secret(..)");
    }
}

//! Host side of the `clawos:tool` interfaces a tool may import. Each checks
//! the call's grants; a request outside them aborts the call with
//! [`Abort::Denied`] rather than returning an error the guest could probe with.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clawfs::audit::{AuditLog, Entry};
use clawfs::files::{self, OpenFor};

use crate::bindings::clawos::tool::{filesystem, http, kv, logging, memory, types};
use crate::definition::Capability;
use crate::error::Abort;
use crate::host::CallState;
use crate::http::{self as rules, Origin, Redactor};
use crate::providers::{CredentialProvider, KvBackend, KvError, MemorySearch};

/// Longest log message kept; the rest is cut.
const MAX_LOG_MESSAGE_BYTES: usize = 4096;
/// Log lines one call may write; later ones are dropped.
const MAX_LOG_LINES_PER_CALL: usize = 100;
/// Largest HTTP response body handed to a tool (less when the call has
/// less memory left).
const MAX_HTTP_BODY_BYTES: usize = 8 << 20;
/// Bytes a listed name costs the guest beyond its text: the string's
/// pointer and length in the list.
const LISTED_NAME_OVERHEAD_BYTES: usize = 8;
/// Keys and values one (agent, tool) pair may keep in the kv store.
const MAX_KV_ENTRIES: usize = 1024;
const MAX_KV_VALUE_BYTES: usize = 64 << 10;
const MAX_KV_KEY_BYTES: usize = 256;

/// What a call is allowed, derived once from the tool's capabilities.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grants {
    /// Granted prefixes as their components below `/clawfs`.
    read_prefixes: Vec<Vec<String>>,
    write_prefixes: Vec<Vec<String>>,
    hosts: Vec<String>,
    memory_workspaces: Vec<String>,
    pub(crate) kv: bool,
}

impl Grants {
    pub(crate) fn new(capabilities: &[Capability]) -> Grants {
        let mut grants = Grants::default();
        // A prefix that is not a /clawfs path (only possible for a Capability
        // built by hand, not parsed) grants nothing.
        let parts = |prefix: &std::path::Path| {
            let parts = files::parse(prefix.to_str()?).ok()?;
            Some(parts.into_iter().map(str::to_owned).collect::<Vec<_>>())
        };
        for capability in capabilities {
            match capability {
                Capability::FilesystemRead(prefix) => grants.read_prefixes.extend(parts(prefix)),
                Capability::FilesystemWrite(prefix) => {
                    grants.read_prefixes.extend(parts(prefix));
                    grants.write_prefixes.extend(parts(prefix));
                }
                Capability::NetworkOutbound(host) => grants.hosts.push(host.clone()),
                Capability::StateKv => grants.kv = true,
                Capability::MemorySearch(workspace) => grants.memory_workspaces.push(workspace.clone()),
            }
        }
        grants
    }

    pub(crate) fn filesystem(&self) -> bool {
        !self.read_prefixes.is_empty()
    }

    pub(crate) fn network(&self) -> bool {
        !self.hosts.is_empty()
    }

    pub(crate) fn memory(&self) -> bool {
        !self.memory_workspaces.is_empty()
    }
}

fn deny(reason: String) -> wasmtime::Error {
    wasmtime::Error::new(Abort::Denied(reason))
}

impl types::Host for CallState {}

impl logging::Host for CallState {
    fn log(&mut self, level: logging::Level, mut message: String) -> wasmtime::Result<()> {
        if self.log_lines >= MAX_LOG_LINES_PER_CALL {
            return Ok(());
        }
        self.log_lines += 1;
        if message.len() > MAX_LOG_MESSAGE_BYTES {
            let cut = (0..=MAX_LOG_MESSAGE_BYTES).rev().find(|&i| message.is_char_boundary(i)).unwrap_or(0);
            message.truncate(cut);
        }
        let (tool, agent) = (self.tool_id.as_str(), self.agent.as_str());
        match level {
            logging::Level::Debug => tracing::debug!(tool, agent, "{message}"),
            logging::Level::Info => tracing::info!(tool, agent, "{message}"),
            logging::Level::Warn => tracing::warn!(tool, agent, "{message}"),
            logging::Level::Error => tracing::error!(tool, agent, "{message}"),
        }
        Ok(())
    }
}

impl CallState {
    /// Checks a guest path (`/clawfs/...`) against the call's grants: it
    /// must lie under one of the granted prefixes for `purpose`. Returns
    /// its components; `Err` says why not, and the caller aborts the call
    /// with it.
    fn granted<'p>(&self, guest_path: &'p str, purpose: OpenFor) -> Result<Vec<&'p str>, String> {
        let access = if purpose == OpenFor::Write { "write" } else { "read" };
        let parts =
            files::parse(guest_path).map_err(|e| format!("{access} of {guest_path:?}: {}", refusal_reason(e)))?;
        let prefixes = if purpose == OpenFor::Write { &self.grants.write_prefixes } else { &self.grants.read_prefixes };
        let granted = |prefix: &Vec<String>| {
            prefix.len() <= parts.len() && prefix.iter().zip(&parts).all(|(granted, part)| granted == part)
        };
        if !prefixes.iter().any(granted) {
            return Err(format!("{access} of {guest_path:?} is outside the granted filesystem prefixes"));
        }
        // fs-engine's rule for the same files (specs/clawfs/README.md,
        // "Files and RULE-001"): whatever the grant, a tool never writes a
        // database, index, identity, configuration or snapshot directly.
        if let Some(name) = files::maintained(&parts).filter(|_| purpose == OpenFor::Write) {
            return Err(format!(
                "write of {guest_path:?}: {name} is maintained by ClawFS and changes only through its own methods"
            ));
        }
        Ok(parts)
    }

    /// Opens a granted path under the configured ClawFS root. How a path
    /// is opened is ClawFS's rule (`clawfs::files::open_beneath`: never
    /// through a symlink, beneath the root, checked by the kernel in the
    /// open itself; the same rule as for an agent's request to fs-engine).
    fn open_granted(&self, guest_path: &str, parts: &[&str], purpose: OpenFor) -> Result<Opened, Refusal> {
        let access = if purpose == OpenFor::Write { "write" } else { "read" };
        match files::open_beneath(&self.services.clawfs_root, guest_path, parts, purpose) {
            Ok(file) => Ok(Opened { file, display: files::display(parts) }),
            Err(clawfs::Error::Io { source, .. }) => Err(Refusal::Failed(io_error(source))),
            Err(e) => Err(Refusal::Denied(format!("{access} of {guest_path:?}: {}", refusal_reason(e)))),
        }
    }

    /// [`Self::granted`], then [`Self::open_granted`].
    fn open(&self, guest_path: &str, purpose: OpenFor) -> Result<Opened, Refusal> {
        let parts = self.granted(guest_path, purpose).map_err(Refusal::Denied)?;
        self.open_granted(guest_path, &parts, purpose)
    }

    /// Appends a line for this call's tool to the ClawFS audit log, in
    /// fs-engine's format with `caller=tool:<tool-id>`. `Err` is the
    /// refusal the write fails with.
    fn audit(&self, operation: &str, path: &str, bytes: Option<u64>, denied: Option<&str>) -> Result<(), String> {
        let log = self.services.audit_log.as_ref().map_err(|reason| format!("refused: {reason}"))?;
        let caller = format!("tool:{}", self.tool_id);
        log.record(&Entry { agent: &self.agent, operation, path, bytes, denied, caller: &caller })
            .map_err(|e| e.to_string())
    }
}

/// A granted path, opened.
struct Opened {
    file: std::fs::File,
    /// Its normal `/clawfs/...` form, for the audit log.
    display: String,
}

/// Why a path was not opened.
enum Refusal {
    /// Outside the grants or ClawFS's path rules: the call is aborted.
    Denied(String),
    /// It could not be opened (missing, not a regular file...): the guest
    /// gets the error.
    Failed(filesystem::FsError),
}

/// A ClawFS refusal's reason on its own (the caller names the path).
fn refusal_reason(error: clawfs::Error) -> String {
    match error {
        clawfs::Error::Denied { reason, .. } => reason,
        other => other.to_string(),
    }
}

impl Refusal {
    /// What the host function returns for it: an aborted call, or the
    /// guest's error.
    fn answer<T>(self) -> wasmtime::Result<Result<T, filesystem::FsError>> {
        match self {
            Refusal::Denied(reason) => Err(deny(reason)),
            Refusal::Failed(error) => Ok(Err(error)),
        }
    }
}

fn io_error(e: std::io::Error) -> filesystem::FsError {
    match e.kind() {
        std::io::ErrorKind::NotFound => filesystem::FsError::NotFound,
        _ => filesystem::FsError::Io(e.to_string()),
    }
}

/// More than the call's memory holds: the host refuses before it reads, so
/// the daemon's memory (shared by every call) never holds more for one call
/// than the call itself may.
fn too_large(what: &str, bytes: u64, left: usize) -> filesystem::FsError {
    filesystem::FsError::Io(format!(
        "{what} is at least {bytes} bytes, more than the {left} bytes of memory the call has left"
    ))
}

impl filesystem::Host for CallState {
    fn read_file(&mut self, path: String) -> wasmtime::Result<Result<Vec<u8>, filesystem::FsError>> {
        let opened = match self.open(&path, OpenFor::Read) {
            Ok(opened) => opened,
            Err(refusal) => return refusal.answer(),
        };
        let left = self.memory_left();
        let size = opened.file.metadata().map_err(wasmtime::Error::from)?.len();
        if size > left as u64 {
            return Ok(Err(too_large(&opened.display, size, left)));
        }
        // The file may grow after the stat: read one byte past what fits.
        let mut contents = Vec::with_capacity(size as usize);
        if let Err(e) = (&opened.file).take(left as u64 + 1).read_to_end(&mut contents) {
            return Ok(Err(io_error(e)));
        }
        if contents.len() > left {
            return Ok(Err(too_large(&opened.display, contents.len() as u64, left)));
        }
        Ok(Ok(contents))
    }

    /// Audited like a `write_file` to fs-engine (specs/clawfs/README.md,
    /// "Audit log"): `open` before, `write` with the size after, a refusal
    /// as a `[WARN]` line; a write whose line cannot be written fails.
    fn write_file(&mut self, path: String, contents: Vec<u8>) -> wasmtime::Result<Result<(), filesystem::FsError>> {
        let refuse = |state: &Self, reason: String| {
            // The call is aborted whether or not the line could be written.
            if let Err(e) = state.audit("write", &path, None, Some(&reason)) {
                tracing::error!(tool = state.tool_id, agent = state.agent, "auditing a refused write: {e}");
            }
            Err(deny(reason))
        };
        let parts = match self.granted(&path, OpenFor::Write) {
            Ok(parts) => parts,
            Err(reason) => return refuse(self, reason),
        };
        if let Err(refusal) = self.audit("open", &files::display(&parts), None, None) {
            return Ok(Err(filesystem::FsError::Io(refusal)));
        }
        let opened = match self.open_granted(&path, &parts, OpenFor::Write) {
            Ok(opened) => opened,
            Err(Refusal::Failed(error)) => return Ok(Err(error)),
            Err(Refusal::Denied(reason)) => return refuse(self, reason),
        };
        if let Err(e) = (&opened.file).write_all(&contents) {
            return Ok(Err(io_error(e)));
        }
        Ok(self.audit("write", &opened.display, Some(contents.len() as u64), None).map_err(filesystem::FsError::Io))
    }

    fn list_dir(&mut self, path: String) -> wasmtime::Result<Result<Vec<String>, filesystem::FsError>> {
        let opened = match self.open(&path, OpenFor::List) {
            Ok(opened) => opened,
            Err(refusal) => return refusal.answer(),
        };
        let left = self.memory_left();
        let (mut names, mut bytes) = (Vec::new(), 0);
        for entry in rustix::fs::Dir::read_from(&opened.file).map_err(wasmtime::Error::from)? {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => return Ok(Err(io_error(e.into()))),
            };
            let name = entry.file_name().to_string_lossy();
            if name == "." || name == ".." {
                continue;
            }
            bytes += name.len() + LISTED_NAME_OVERHEAD_BYTES;
            if bytes > left {
                return Ok(Err(too_large(&format!("the listing of {}", opened.display), bytes as u64, left)));
            }
            names.push(name.into_owned());
        }
        names.sort();
        Ok(Ok(names))
    }
}

impl http::Host for CallState {
    fn fetch(&mut self, request: http::Request) -> wasmtime::Result<Result<http::Response, http::HttpError>> {
        let origin = match Origin::of_url(&request.url) {
            Ok(origin) => origin,
            Err(reason) => return Ok(Err(http::HttpError::InvalidRequest(reason))),
        };
        let authority = origin.authority();
        if !self.grants.hosts.iter().any(|grant| rules::authority_matches(grant, &authority)) {
            return Err(deny(format!("HTTP request to {authority:?}, which is not a granted network:outbound host")));
        }
        let credentials = match self.services.credentials.credentials_for(&self.tool_id, &origin) {
            Ok(credentials) => credentials,
            Err(e) => return Ok(Err(http::HttpError::Transport(format!("credentials for {authority}: {e}")))),
        };
        let mut builder = ureq::http::Request::builder().method(request.method.as_str()).uri(request.url.as_str());
        for header in &request.headers {
            let credential = credentials.iter().any(|c| c.header.eq_ignore_ascii_case(&header.name));
            if rules::tool_may_set(&header.name) && !credential {
                builder = builder.header(header.name.as_str(), header.value.as_str());
            }
        }
        builder = builder.header(ureq::http::header::ACCEPT_ENCODING, "identity");
        for credential in &credentials {
            builder = builder.header(credential.header.as_str(), credential.value.as_str());
        }
        let outgoing = match builder.body(request.body.unwrap_or_default()) {
            Ok(outgoing) => outgoing,
            Err(e) => return Ok(Err(http::HttpError::InvalidRequest(e.to_string()))),
        };
        let mut response = match rules::agent(&self.services.tls, self.remaining()).run(outgoing) {
            Ok(response) => response,
            Err(e) => return Ok(Err(http::HttpError::Transport(e.to_string()))),
        };
        let coding =
            response.headers().get(ureq::http::header::CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("(not text)"));
        if let Some(refusal) = rules::refused_coding(coding) {
            return Ok(Err(http::HttpError::Transport(refusal)));
        }
        let secrets: Vec<String> = credentials.into_iter().flat_map(|c| [c.value, c.secret]).collect();
        let redactor = Redactor::new(&secrets);
        let limit = MAX_HTTP_BODY_BYTES.min(self.memory_left());
        let body = match response.body_mut().with_config().limit(limit as u64).read_to_vec() {
            Ok(body) => redactor.redact(body),
            Err(e) => return Ok(Err(http::HttpError::Transport(e.to_string()))),
        };
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| http::Header {
                name: name.to_string(),
                // The length of the body the tool gets, not the server's,
                // which would tell the length of a redacted secret.
                value: if name == ureq::http::header::CONTENT_LENGTH {
                    body.len().to_string()
                } else {
                    String::from_utf8_lossy(&redactor.redact(value.as_bytes().to_vec())).into_owned()
                },
            })
            .collect();
        Ok(Ok(http::Response { status: response.status().as_u16(), headers, body }))
    }
}

/// A backend failure aborts the call: `get` has no error to return, and a
/// tool must not mistake a broken store for an empty one.
fn kv_unavailable(e: KvError) -> wasmtime::Error {
    wasmtime::Error::msg(format!("kv store unavailable: {e}"))
}

impl kv::Host for CallState {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
        self.services.kv.get(&self.agent, &self.tool_id, &key).map_err(kv_unavailable)
    }

    fn set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), String>> {
        if value.len() > MAX_KV_VALUE_BYTES {
            return Ok(Err(format!("value of {} bytes exceeds {MAX_KV_VALUE_BYTES}", value.len())));
        }
        if key.is_empty() || key.len() > MAX_KV_KEY_BYTES {
            return Ok(Err(format!("keys are 1 to {MAX_KV_KEY_BYTES} bytes")));
        }
        Ok(self.services.kv.set(&self.agent, &self.tool_id, &key, value, MAX_KV_ENTRIES).map_err(|e| e.to_string()))
    }

    fn delete(&mut self, key: String) -> wasmtime::Result<()> {
        self.services.kv.delete(&self.agent, &self.tool_id, &key).map_err(kv_unavailable)
    }
}

/// Largest number of hits a tool may ask for at once.
const MAX_MEMORY_HITS: u32 = 50;

impl memory::Host for CallState {
    fn search(
        &mut self,
        workspace: String,
        query: String,
        limit: u32,
    ) -> wasmtime::Result<Result<memory::Results, String>> {
        if !self.grants.memory_workspaces.contains(&workspace) {
            return Err(deny(format!(
                "memory search in workspace {workspace:?}, which no memory:search capability grants"
            )));
        }
        if !(1..=MAX_MEMORY_HITS).contains(&limit) {
            return Ok(Err(format!("limit {limit} must be 1..={MAX_MEMORY_HITS}")));
        }
        Ok(self
            .services
            .memory
            .search(&workspace, &query, limit)
            .map(|found| memory::Results {
                hits: found
                    .hits
                    .into_iter()
                    .map(|hit| memory::Hit {
                        workspace: hit.workspace,
                        path: hit.path,
                        heading: hit.heading,
                        content: hit.content,
                        score: hit.score,
                    })
                    .collect(),
                keyword_leg: found.keyword_leg,
                vector_leg: found.vector_leg,
            })
            .map_err(|e| e.to_string()))
    }
}

/// What every call's host functions share.
pub(crate) struct Services {
    pub(crate) clawfs_root: PathBuf,
    pub(crate) credentials: Arc<dyn CredentialProvider>,
    pub(crate) memory: Arc<dyn MemorySearch>,
    pub(crate) kv: Arc<dyn KvBackend>,
    /// Which roots HTTPS trusts (web roots, or the configured CA bundle).
    pub(crate) tls: ureq::tls::TlsConfig,
    /// Where tools' file writes are audited, or why nowhere (they are refused).
    pub(crate) audit_log: Result<Arc<AuditLog>, String>,
}

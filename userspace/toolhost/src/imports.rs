//! Host side of the `clawos:tool` interfaces a tool may import. Each checks
//! the call's grants; a request outside them aborts the call with
//! [`Abort::Denied`] rather than returning an error the guest could probe with.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clawfs::audit::{AuditLog, Entry};
use clawfs::files::{self, Resolved};

use crate::bindings::clawos::tool::{filesystem, http, kv, logging, memory, types};
use crate::definition::Capability;
use crate::error::Abort;
use crate::host::CallState;
use crate::providers::{CredentialProvider, KvBackend, KvError, MemorySearch};

/// Longest log message kept; the rest is cut.
const MAX_LOG_MESSAGE_BYTES: usize = 4096;
/// Log lines one call may write; later ones are dropped.
const MAX_LOG_LINES_PER_CALL: usize = 100;
/// Largest HTTP response body handed to a tool.
const MAX_HTTP_BODY_BYTES: u64 = 8 << 20;
/// Keys and values one (agent, tool) pair may keep in the kv store.
const MAX_KV_ENTRIES: usize = 1024;
const MAX_KV_VALUE_BYTES: usize = 64 << 10;
const MAX_KV_KEY_BYTES: usize = 256;
/// What replaces a credential value found in a response.
pub const REDACTED: &str = "[REDACTED]";

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
        let (tool, agent) = (self.tool_id.as_str(), self.agent_id.as_str());
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
    /// Maps a guest path (`/clawfs/...`) to the host path under the
    /// configured ClawFS root. How a path is read is ClawFS's rule
    /// (`clawfs::files`: no `..`, never through a symlink), the same as for
    /// an agent's request to fs-engine; whether the tool may reach it is its
    /// grants': the path must lie under one of its granted prefixes. `Err`
    /// says why not; the caller aborts the call with it.
    fn resolve(&self, guest_path: &str, write: bool) -> Result<Resolved, String> {
        let access = if write { "write" } else { "read" };
        let refused = |error: clawfs::Error| match error {
            clawfs::Error::Denied { reason, .. } => format!("{access} of {guest_path:?}: {reason}"),
            other => format!("{access} of {guest_path:?}: {other}"),
        };
        let parts = files::parse(guest_path).map_err(refused)?;
        let prefixes = if write { &self.grants.write_prefixes } else { &self.grants.read_prefixes };
        let granted = |prefix: &Vec<String>| prefix.len() <= parts.len() && prefix.iter().zip(&parts).all(|(granted, part)| granted == part);
        if !prefixes.iter().any(granted) {
            return Err(format!("{access} of {guest_path:?} is outside the granted filesystem prefixes"));
        }
        let real = files::beneath(&self.services.clawfs_root, guest_path, &parts).map_err(refused)?;
        Ok(Resolved { real, display: files::display(&parts) })
    }

    /// Appends a line for this call's tool to the ClawFS audit log, in
    /// fs-engine's format with `caller=tool:<tool-id>`. `Err` is the
    /// refusal the write fails with.
    fn audit(&self, operation: &str, path: &str, bytes: Option<u64>, denied: Option<&str>) -> Result<(), String> {
        let log = self.services.audit_log.as_ref().map_err(|reason| format!("refused: {reason}"))?;
        let caller = format!("tool:{}", self.tool_id);
        log.record(&Entry { agent: &self.agent_id, operation, path, bytes, denied, caller: &caller }).map_err(|e| e.to_string())
    }
}

/// Opens `path` for reading without following a symlink planted there
/// after it was resolved.
fn open_no_follow(path: &std::path::Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path)
}

fn io_error(e: std::io::Error) -> filesystem::FsError {
    match e.kind() {
        std::io::ErrorKind::NotFound => filesystem::FsError::NotFound,
        _ => filesystem::FsError::Io(e.to_string()),
    }
}

impl filesystem::Host for CallState {
    fn read_file(&mut self, path: String) -> wasmtime::Result<Result<Vec<u8>, filesystem::FsError>> {
        let file = self.resolve(&path, false).map_err(deny)?;
        let mut contents = Vec::new();
        Ok(open_no_follow(&file.real).and_then(|mut handle| handle.read_to_end(&mut contents)).map(|_| contents).map_err(io_error))
    }

    /// Audited like a `write_file` to fs-engine (specs/clawfs/README.md,
    /// "Audit log"): `open` before, `write` with the size after, a refusal
    /// as a `[WARN]` line; a write whose line cannot be written fails.
    fn write_file(&mut self, path: String, contents: Vec<u8>) -> wasmtime::Result<Result<(), filesystem::FsError>> {
        let file = match self.resolve(&path, true) {
            Ok(file) => file,
            Err(reason) => {
                // The call is aborted whether or not the line could be written.
                if let Err(e) = self.audit("write", &path, None, Some(&reason)) {
                    tracing::error!(tool = self.tool_id, agent = self.agent_id, "auditing a refused write: {e}");
                }
                return Err(deny(reason));
            }
        };
        if let Err(refusal) = self.audit("open", &file.display, None, None) {
            return Ok(Err(filesystem::FsError::Io(refusal)));
        }
        // O_NOFOLLOW: a symlink planted as the last component is not followed.
        let written = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&file.real)
            .and_then(|mut handle| handle.write_all(&contents));
        if let Err(e) = written {
            return Ok(Err(io_error(e)));
        }
        Ok(self.audit("write", &file.display, Some(contents.len() as u64), None).map_err(filesystem::FsError::Io))
    }

    fn list_dir(&mut self, path: String) -> wasmtime::Result<Result<Vec<String>, filesystem::FsError>> {
        let dir = self.resolve(&path, false).map_err(deny)?;
        let mut names = Vec::new();
        let listed = std::fs::read_dir(&dir.real).and_then(|entries| {
            for entry in entries {
                names.push(entry?.file_name().to_string_lossy().into_owned());
            }
            Ok(())
        });
        names.sort();
        Ok(listed.map(|()| names).map_err(io_error))
    }
}

/// The authority of an `http://` or `https://` URL as `host:port`, with the
/// scheme's default port made explicit so grants compare exactly.
fn authority_of(url: &str) -> Result<String, String> {
    let (rest, default_port) = if let Some(rest) = url.strip_prefix("https://") {
        (rest, 443)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (rest, 80)
    } else {
        return Err(format!("{url:?}: only http:// and https:// URLs are supported"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default().to_ascii_lowercase();
    if authority.is_empty() || authority.contains(['@', '[']) {
        return Err(format!("{url:?}: the URL needs a host name or IPv4 address and may not carry user info"));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0) => Ok(authority),
        Some(_) => Err(format!("{url:?}: bad port")),
        None => Ok(format!("{authority}:{default_port}")),
    }
}

/// Whether `grant` (`host` or `host:port`) covers `authority` (`host:port`):
/// a grant with a port covers exactly that port, one without covers the web
/// ports, 80 and 443.
pub fn authority_matches(grant: &str, authority: &str) -> bool {
    let authority = authority.to_ascii_lowercase();
    grant == authority || (!grant.contains(':') && (authority == format!("{grant}:80") || authority == format!("{grant}:443")))
}

fn host_granted(grants: &[String], authority: &str) -> bool {
    grants.iter().any(|grant| authority_matches(grant, authority))
}

/// The forms a secret is redacted in: as is, and base64 and hex encoded,
/// since an echoing server may hand it back encoded.
fn redaction_needles(secrets: &[String]) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let mut needles = Vec::new();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        needles.push(secret.as_bytes().to_vec());
        for engine in [&base64::engine::general_purpose::STANDARD, &base64::engine::general_purpose::STANDARD_NO_PAD] {
            needles.push(engine.encode(secret).into_bytes());
        }
        needles.push(fsutil::hex(secret.as_bytes()).into_bytes());
    }
    // Longest first, so a padded form is replaced whole before its prefix.
    needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
    needles
}

fn redact(mut text: Vec<u8>, needles: &[Vec<u8>]) -> Vec<u8> {
    for needle in needles {
        if !text.windows(needle.len()).any(|w| w == needle.as_slice()) {
            continue;
        }
        let mut out = Vec::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            if text[i..].starts_with(needle) {
                out.extend_from_slice(REDACTED.as_bytes());
                i += needle.len();
            } else {
                out.push(text[i]);
                i += 1;
            }
        }
        text = out;
    }
    text
}

impl http::Host for CallState {
    fn fetch(&mut self, request: http::Request) -> wasmtime::Result<Result<http::Response, http::HttpError>> {
        let authority = match authority_of(&request.url) {
            Ok(authority) => authority,
            Err(reason) => return Ok(Err(http::HttpError::InvalidRequest(reason))),
        };
        if !host_granted(&self.grants.hosts, &authority) {
            return Err(deny(format!("HTTP request to {authority:?}, which is not a granted network:outbound host")));
        }
        let credentials = match self.services.credentials.credentials_for(&self.tool_id, &authority) {
            Ok(credentials) => credentials,
            Err(e) => return Ok(Err(http::HttpError::Transport(format!("credentials for {authority}: {e}")))),
        };
        let mut builder = ureq::http::Request::builder().method(request.method.as_str()).uri(request.url.as_str());
        for header in &request.headers {
            if !credentials.iter().any(|c| c.header.eq_ignore_ascii_case(&header.name)) {
                builder = builder.header(header.name.as_str(), header.value.as_str());
            }
        }
        for credential in &credentials {
            builder = builder.header(credential.header.as_str(), credential.value.as_str());
        }
        let outgoing = match builder.body(request.body.unwrap_or_default()) {
            Ok(outgoing) => outgoing,
            Err(e) => return Ok(Err(http::HttpError::InvalidRequest(e.to_string()))),
        };
        let mut response = match self.services.http_agent(self.remaining()).run(outgoing) {
            Ok(response) => response,
            Err(e) => return Ok(Err(http::HttpError::Transport(e.to_string()))),
        };
        let secrets: Vec<String> = credentials.into_iter().flat_map(|c| [c.value, c.secret]).collect();
        let needles = redaction_needles(&secrets);
        let body = match response.body_mut().with_config().limit(MAX_HTTP_BODY_BYTES).read_to_vec() {
            Ok(body) => redact(body, &needles),
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
                    String::from_utf8_lossy(&redact(value.as_bytes().to_vec(), &needles)).into_owned()
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
        self.services.kv.get(&self.agent_id, &self.tool_id, &key).map_err(kv_unavailable)
    }

    fn set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), String>> {
        if value.len() > MAX_KV_VALUE_BYTES {
            return Ok(Err(format!("value of {} bytes exceeds {MAX_KV_VALUE_BYTES}", value.len())));
        }
        if key.is_empty() || key.len() > MAX_KV_KEY_BYTES {
            return Ok(Err(format!("keys are 1 to {MAX_KV_KEY_BYTES} bytes")));
        }
        Ok(self.services.kv.set(&self.agent_id, &self.tool_id, &key, value, MAX_KV_ENTRIES).map_err(|e| e.to_string()))
    }

    fn delete(&mut self, key: String) -> wasmtime::Result<()> {
        self.services.kv.delete(&self.agent_id, &self.tool_id, &key).map_err(kv_unavailable)
    }
}

/// Largest number of hits a tool may ask for at once.
const MAX_MEMORY_HITS: u32 = 50;

impl memory::Host for CallState {
    fn search(&mut self, workspace: String, query: String, limit: u32) -> wasmtime::Result<Result<memory::Results, String>> {
        if !self.grants.memory_workspaces.contains(&workspace) {
            return Err(deny(format!("memory search in workspace {workspace:?}, which no memory:search capability grants")));
        }
        if !(1..=MAX_MEMORY_HITS).contains(&limit) {
            return Ok(Err(format!("limit {limit} must be 1..={MAX_MEMORY_HITS}")));
        }
        Ok(self.services.memory.search(&workspace, &query, limit).map(|found| memory::Results {
            hits: found
                .hits
                .into_iter()
                .map(|hit| memory::Hit { workspace: hit.workspace, path: hit.path, heading: hit.heading, content: hit.content, score: hit.score })
                .collect(),
            keyword_leg: found.keyword_leg,
            vector_leg: found.vector_leg,
        }).map_err(|e| e.to_string()))
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

impl Services {
    /// An HTTP client that follows no redirect (a redirect could leave the
    /// granted host), ignores proxy environment variables, and verifies
    /// HTTPS servers against the configured roots.
    fn http_agent(&self, timeout: Duration) -> ureq::Agent {
        ureq::Agent::config_builder()
            .tls_config(self.tls.clone())
            .max_redirects(0)
            .proxy(None)
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .build()
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_and_grants() {
        assert_eq!(authority_of("http://example.com:8080/x?y").unwrap(), "example.com:8080");
        assert_eq!(authority_of("http://Example.com/").unwrap(), "example.com:80");
        assert_eq!(authority_of("https://example.com#x").unwrap(), "example.com:443");
        for bad in ["ftp://example.com/", "http://user@example.com/", "http:///x", "http://example.com:0/", "http://[::1]/", "file:///etc/shadow"] {
            assert!(authority_of(bad).is_err(), "{bad}");
        }
        let grants = vec!["example.com".to_owned(), "127.0.0.1:9000".to_owned()];
        assert!(host_granted(&grants, "example.com:80"));
        assert!(host_granted(&grants, "example.com:443"));
        assert!(!host_granted(&grants, "example.com:81"));
        assert!(host_granted(&grants, "127.0.0.1:9000"));
        assert!(!host_granted(&grants, "127.0.0.1:80"));
        assert!(!host_granted(&grants, "evil.example.com:443"));
    }

    #[test]
    fn redact_replaces_every_occurrence_plain_and_encoded() {
        let needles = redaction_needles(&["s3cret".to_owned()]);
        let out = redact(b"a s3cret b s3cret c czNjcmV0 d 733363726574".to_vec(), &needles);
        assert_eq!(out, format!("a {REDACTED} b {REDACTED} c {REDACTED} d {REDACTED}").into_bytes());
    }
}

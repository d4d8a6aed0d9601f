//! Host side of the `clawos:tool` interfaces a tool may import. Each checks
//! the call's grants; a request outside them aborts the call with
//! [`Abort::Denied`] rather than returning an error the guest could probe with.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::bindings::clawos::tool::{filesystem, http, kv, logging, memory, types};
use crate::definition::Capability;
use crate::error::Abort;
use crate::host::CallState;

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

/// A header the host adds to a granted request on the tool's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// Header name, e.g. `authorization`.
    pub header: String,
    /// The full header value, e.g. `Bearer <secret>`.
    pub value: String,
    /// The secret inside `value`, redacted from responses on its own too.
    pub secret: String,
}

/// Supplies credentials for outgoing requests, so the tool never holds them.
/// The daemon implements it over the vault service; the host adds the headers
/// after the tool's request has been checked against its grants, and redacts
/// every secret from the response.
pub trait CredentialProvider: Send + Sync {
    /// The credentials for `tool_id`'s request to `authority` (`host:port`,
    /// the port always explicit; match grants with [`authority_matches`]).
    /// An error fails the request instead of sending it without them.
    fn credentials_for(&self, tool_id: &str, authority: &str) -> Result<Vec<Credential>, String>;
}

/// The provider for a host without a vault: no credentials at all.
pub struct NoCredentials;

impl CredentialProvider for NoCredentials {
    fn credentials_for(&self, _tool_id: &str, _authority: &str) -> Result<Vec<Credential>, String> {
        Ok(Vec::new())
    }
}

/// One search result handed to a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    pub workspace: String,
    pub path: String,
    pub heading: String,
    pub content: String,
    pub score: f32,
}

/// A search's results and which legs ran (`ran (N candidates)` or
/// `not run: <why>`), so a tool never mistakes keyword-only results for
/// hybrid ones.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryResults {
    pub hits: Vec<MemoryHit>,
    pub keyword_leg: String,
    pub vector_leg: String,
}

/// Searches ClawFS workspace memory for tools granted `memory:search:<ws>`.
/// The daemon implements it over fs-engine's `memory_search`; the host has
/// already checked the workspace against the tool's grants.
pub trait MemorySearch: Send + Sync {
    fn search(&self, workspace: &str, query: &str, limit: u32) -> Result<MemoryResults, String>;
}

/// The provider for a host without fs-engine: every search fails.
pub struct NoMemory;

impl MemorySearch for NoMemory {
    fn search(&self, _workspace: &str, _query: &str, _limit: u32) -> Result<MemoryResults, String> {
        Err("no memory service is configured".into())
    }
}

/// Where the `kv` interface keeps each (agent, tool) pair's keys. The
/// daemon keeps them in the agent's AgentFS `kv_store`, so they survive
/// restarts; the host enforces the size limits before calling it.
pub trait KvBackend: Send + Sync {
    fn get(&self, agent_id: &str, tool_id: &str, key: &str) -> Result<Option<Vec<u8>>, String>;
    /// Stores `value` unless that would make more than `max_keys` keys.
    fn set(&self, agent_id: &str, tool_id: &str, key: &str, value: Vec<u8>, max_keys: usize) -> Result<(), String>;
    fn delete(&self, agent_id: &str, tool_id: &str, key: &str) -> Result<(), String>;
}

/// Keys kept in memory for the host's lifetime (tests, benchmarks).
#[derive(Default)]
pub struct MemoryKv {
    entries: Mutex<HashMap<(String, String), HashMap<String, Vec<u8>>>>,
}

impl KvBackend for MemoryKv {
    fn get(&self, agent_id: &str, tool_id: &str, key: &str) -> Result<Option<Vec<u8>>, String> {
        let entries = self.entries.lock().expect("kv lock poisoned");
        Ok(entries.get(&(agent_id.to_owned(), tool_id.to_owned())).and_then(|m| m.get(key).cloned()))
    }

    fn set(&self, agent_id: &str, tool_id: &str, key: &str, value: Vec<u8>, max_keys: usize) -> Result<(), String> {
        let mut entries = self.entries.lock().expect("kv lock poisoned");
        let map = entries.entry((agent_id.to_owned(), tool_id.to_owned())).or_default();
        if map.len() >= max_keys && !map.contains_key(key) {
            return Err(format!("the store already holds {max_keys} keys"));
        }
        map.insert(key.to_owned(), value);
        Ok(())
    }

    fn delete(&self, agent_id: &str, tool_id: &str, key: &str) -> Result<(), String> {
        if let Some(map) = self.entries.lock().expect("kv lock poisoned").get_mut(&(agent_id.to_owned(), tool_id.to_owned())) {
            map.remove(key);
        }
        Ok(())
    }
}

/// What a call is allowed, derived once from the tool's capabilities.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grants {
    read_prefixes: Vec<PathBuf>,
    write_prefixes: Vec<PathBuf>,
    hosts: Vec<String>,
    memory_workspaces: Vec<String>,
    pub(crate) kv: bool,
}

impl Grants {
    pub(crate) fn new(capabilities: &[Capability]) -> Grants {
        let mut grants = Grants::default();
        for capability in capabilities {
            match capability {
                Capability::FilesystemRead(prefix) => grants.read_prefixes.push(prefix.clone()),
                Capability::FilesystemWrite(prefix) => {
                    grants.read_prefixes.push(prefix.clone());
                    grants.write_prefixes.push(prefix.clone());
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
    /// configured ClawFS root, refusing anything outside the granted prefixes:
    /// `..` and `.` are refused outright, and the resolved real path (after
    /// symlinks) must still lie inside the prefix's real path.
    fn resolve(&self, guest_path: &str, write: bool) -> wasmtime::Result<Result<PathBuf, filesystem::FsError>> {
        let path = Path::new(guest_path);
        let lexical_ok = path.is_absolute() && path.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        let prefixes = if write { &self.grants.write_prefixes } else { &self.grants.read_prefixes };
        let access = if write { "write" } else { "read" };
        let Some(prefix) = prefixes.iter().find(|p| lexical_ok && path.starts_with(p)) else {
            return Err(deny(format!("{access} of {guest_path:?} is outside the granted filesystem prefixes")));
        };
        let to_host = |p: &Path| self.services.clawfs_root.join(p.strip_prefix("/clawfs").expect("prefixes are under /clawfs"));
        let host_prefix = match to_host(prefix).canonicalize() {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Err(filesystem::FsError::NotFound)),
            Err(e) => return Ok(Err(filesystem::FsError::Io(e.to_string()))),
        };
        let host_path = to_host(path);
        // For a write the file may not exist yet: resolve its directory and
        // open the last component with O_NOFOLLOW (see write_file).
        let (resolve_target, last) = match (write, host_path.parent(), host_path.file_name()) {
            (true, Some(parent), Some(name)) => (parent.to_path_buf(), Some(name.to_owned())),
            _ => (host_path.clone(), None),
        };
        let real = match resolve_target.canonicalize() {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Err(filesystem::FsError::NotFound)),
            Err(e) => return Ok(Err(filesystem::FsError::Io(e.to_string()))),
        };
        if !real.starts_with(&host_prefix) {
            return Err(deny(format!("{guest_path:?} resolves (through a symlink) outside its granted prefix")));
        }
        Ok(Ok(match last {
            Some(name) => real.join(name),
            None => real,
        }))
    }
}

fn io_error(e: std::io::Error) -> filesystem::FsError {
    match e.kind() {
        std::io::ErrorKind::NotFound => filesystem::FsError::NotFound,
        _ => filesystem::FsError::Io(e.to_string()),
    }
}

impl filesystem::Host for CallState {
    fn read_file(&mut self, path: String) -> wasmtime::Result<Result<Vec<u8>, filesystem::FsError>> {
        Ok(self.resolve(&path, false)?.and_then(|p| std::fs::read(p).map_err(io_error)))
    }

    fn write_file(&mut self, path: String, contents: Vec<u8>) -> wasmtime::Result<Result<(), filesystem::FsError>> {
        use std::os::unix::fs::OpenOptionsExt;
        Ok(self.resolve(&path, true)?.and_then(|p| {
            // O_NOFOLLOW: a symlink planted as the last component is not followed.
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(p)
                .map_err(io_error)?;
            file.write_all(&contents).map_err(io_error)
        }))
    }

    fn list_dir(&mut self, path: String) -> wasmtime::Result<Result<Vec<String>, filesystem::FsError>> {
        Ok(self.resolve(&path, false)?.and_then(|p| {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(p).map_err(io_error)? {
                names.push(entry.map_err(io_error)?.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            Ok(names)
        }))
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
        needles.push(secret.bytes().flat_map(|b| format!("{b:02x}").into_bytes()).collect());
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
fn kv_unavailable(e: String) -> wasmtime::Error {
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
        Ok(self.services.kv.set(&self.agent_id, &self.tool_id, &key, value, MAX_KV_ENTRIES))
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
        }))
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

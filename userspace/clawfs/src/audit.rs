//! The ClawFS audit log, `/var/log/clawos/clawfs-audit.log`
//! (specs/clawfs/README.md, "Audit log"): one line per file and memory
//! operation performed or refused under `/clawfs`, by fs-engine for agents
//! and the operator, and by the wasm-daemon for the file writes of tools
//! (specs/toolhost/README.md, "Host"). The spec's format:
//!
//! ```text
//! 2024-02-24T12:34:56Z [INFO] agent=kernel-engine operation=read path=/clawfs/agents/kernel-engine/notes.md bytes=4096 caller=agent-loop
//! 2024-02-24T12:34:58Z [WARN] agent=unknown operation=write path=/clawfs/vault/master-key.enc denied=true reason="..." caller=agent-loop
//! ```
//!
//! Values with spaces, quotes, `=` or control characters are written as
//! JSON strings, so every line splits into `key=value` fields unambiguously
//! and a path cannot forge a field. Contents are never logged.
//!
//! A line is on disk before the operation it records goes ahead (an
//! operation whose line a power cut could take would leave no trace):
//! each append is flushed, and concurrent appends share a flush
//! ([`fsutil::SharedFlush`]).
//!
//! This module owns the line format and the appending; it must not decide
//! what is allowed (RULE-001 is [`crate::files`]'s, a tool's grants the tool
//! host's) nor what a caller does when a line cannot be written: both
//! writers refuse the operation (fail closed).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where the log is on the appliance (`audit_log` in fs-engine's and the
/// wasm-daemon's config; `tmpfiles.d/clawos-clawfs.conf` makes it).
pub const DEFAULT_PATH: &str = "/var/log/clawos/clawfs-audit.log";

/// A line that could not be appended. The operation it records must not
/// happen (or, done already, must not be reported as done).
#[derive(Debug, thiserror::Error)]
#[error("refused: cannot write the audit log {path}: {source}")]
pub struct AuditError {
    /// The log.
    pub path: PathBuf,
    /// Why the append failed.
    #[source]
    pub source: std::io::Error,
}

/// One audited operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The agent the request is for, `operator`, or `unknown`.
    pub agent: &'a str,
    /// `open`, `read`, `write`, `list` or `delete`.
    pub operation: &'a str,
    /// The /clawfs path (as asked, when it could not be resolved).
    pub path: &'a str,
    /// Bytes read or written.
    pub bytes: Option<u64>,
    /// Why it was refused; `None` when it was allowed.
    pub denied: Option<&'a str>,
    /// The IPC principal that asked, or `tool:<tool-id>` for a tool's write.
    pub caller: &'a str,
}

/// An append-only audit log file.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
    /// The same file, to flush without holding the lock appends take.
    flush: File,
    sync: fsutil::SharedFlush,
}

fn field(value: &str) -> String {
    let plain = !value.is_empty() && value.chars().all(|c| c.is_ascii_graphic() && c != '"' && c != '=' && c != '\\');
    if plain {
        value.to_owned()
    } else {
        serde_json::Value::String(value.to_owned()).to_string()
    }
}

impl Entry<'_> {
    /// The log line for this entry at `timestamp`, without the newline.
    pub fn line(&self, timestamp: &str) -> String {
        let level = if self.denied.is_some() { "WARN" } else { "INFO" };
        let mut line = format!(
            "{timestamp} [{level}] agent={} operation={} path={}",
            field(self.agent),
            self.operation,
            field(self.path)
        );
        if let Some(bytes) = self.bytes {
            line.push_str(&format!(" bytes={bytes}"));
        }
        if let Some(reason) = self.denied {
            line.push_str(&format!(" denied=true reason={}", field(reason)));
        }
        line.push_str(&format!(" caller={}", field(self.caller)));
        line
    }
}

impl AuditLog {
    /// Opens (creating, mode 0640) the log at `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).mode(0o640).open(path)?;
        let flush = file.try_clone()?;
        Ok(AuditLog { path: path.to_owned(), file: Mutex::new(file), flush, sync: fsutil::SharedFlush::new() })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry` as one write (`O_APPEND`), so concurrent lines,
    /// of this process or of the other writer, never interleave, and
    /// returns once it is on disk.
    pub fn record(&self, entry: &Entry<'_>) -> Result<(), AuditError> {
        let failed = |source| AuditError { path: self.path.clone(), source };
        let mut line = entry.line(&fsutil::now_rfc3339());
        line.push('\n');
        let written = {
            let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            file.write_all(line.as_bytes()).map_err(failed)?;
            self.sync.written()
        };
        self.sync.wait(written, || self.flush.sync_data()).map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: &str = "2024-02-24T12:34:56Z";

    #[test]
    fn lines_follow_the_spec_format() {
        let read = Entry {
            agent: "kernel-engine",
            operation: "read",
            path: "/clawfs/agents/kernel-engine/a.md",
            bytes: Some(4096),
            denied: None,
            caller: "agent-loop",
        };
        assert_eq!(read.line(AT), "2024-02-24T12:34:56Z [INFO] agent=kernel-engine operation=read path=/clawfs/agents/kernel-engine/a.md bytes=4096 caller=agent-loop");
        let denied = Entry {
            agent: "unknown",
            operation: "write",
            path: "/clawfs/vault/master-key.enc",
            bytes: None,
            denied: Some("outside the agent's directory"),
            caller: "agent-loop",
        };
        assert_eq!(
            denied.line(AT),
            "2024-02-24T12:34:56Z [WARN] agent=unknown operation=write path=/clawfs/vault/master-key.enc denied=true reason=\"outside the agent's directory\" caller=agent-loop"
        );
    }

    #[test]
    fn a_path_cannot_forge_fields_or_lines() {
        let entry = Entry {
            agent: "fs-engine",
            operation: "open",
            path: "/clawfs/a b\n2024 [INFO] denied=false",
            bytes: None,
            denied: None,
            caller: "operator",
        };
        let line = entry.line(AT);
        assert!(!line.contains('\n'));
        assert!(line.contains(r#"path="/clawfs/a b\n2024 [INFO] denied=false""#), "{line}");
    }

    #[test]
    fn entries_are_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clawfs-audit.log");
        std::fs::write(&path, "earlier line\n").unwrap();
        let log = AuditLog::open(&path).unwrap();
        let entry = Entry {
            agent: "operator",
            operation: "delete",
            path: "/clawfs/agents/fs-engine/x",
            bytes: None,
            denied: None,
            caller: "operator",
        };
        log.record(&entry).unwrap();
        log.record(&entry).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], "earlier line");
        assert!(
            lines[2]
                .ends_with("[INFO] agent=operator operation=delete path=/clawfs/agents/fs-engine/x caller=operator"),
            "{}",
            lines[2]
        );
    }
}

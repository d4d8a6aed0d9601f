//! The vault's audit log: one JSON object per line, each carrying an
//! HMAC-SHA256 over its own fields and the previous entry's MAC. Editing,
//! reordering or deleting an entry breaks the chain; recomputing it needs
//! the audit key, which only an unlocked vault has. Truncating the tail is
//! not detectable from the file alone. Entries name secrets, never values.

use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::crypto::{hmac_sha256, Key256};

/// One audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditEntry {
    /// 1 for the first entry, then +1 per entry.
    pub seq: u64,
    /// RFC 3339 UTC time.
    pub time: String,
    /// Authenticated caller identity.
    pub caller: String,
    /// The vault capability the operation needs.
    pub capability: String,
    /// Operation name (`get`, `set`, `rotate`, ...).
    pub operation: String,
    /// Secret concerned, if any.
    pub secret_id: Option<String>,
    /// Secret version concerned, if any.
    pub version: Option<u32>,
    /// `allowed`, `denied`, or `failed: <reason>`.
    pub outcome: String,
    /// MAC of the previous entry (hex), empty for the first.
    pub prev_mac: String,
    /// HMAC-SHA256 (hex) of this entry with `mac` empty, keyed by the audit key.
    pub mac: String,
}

/// What [`AuditLog::verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditReport {
    /// Entries that verified, from the top.
    pub verified_entries: u64,
    /// The first bad line (1-based) and why, if any.
    pub first_broken: Option<(u64, String)>,
}

/// Appends to and verifies one audit log file.
pub(crate) struct AuditLog {
    path: PathBuf,
    key: Key256,
    last_seq: u64,
    last_mac: String,
}

fn entry_mac(key: &Key256, entry: &AuditEntry) -> String {
    let mut unsigned = entry.clone();
    unsigned.mac.clear();
    let bytes = serde_json::to_vec(&unsigned).expect("audit entries always serialize");
    fsutil::hex(&hmac_sha256(key, &[b"clawos-vault-audit", &bytes]))
}

/// Longest audit line read back when resuming the chain.
const TAIL_WINDOW: u64 = 64 * 1024;

impl AuditLog {
    /// Opens `path`, resuming the chain from its last entry.
    pub(crate) fn open(path: &Path, key: Key256) -> io::Result<Self> {
        let mut log = AuditLog { path: path.to_owned(), key, last_seq: 0, last_mac: String::new() };
        let mut file = match OpenOptions::new().read(true).open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(log),
            Err(error) => return Err(error),
        };
        let length = file.metadata()?.len();
        file.seek(SeekFrom::Start(length.saturating_sub(TAIL_WINDOW)))?;
        let mut tail = String::new();
        file.read_to_string(&mut tail)?;
        if let Some(last) = tail.lines().rfind(|line| !line.trim().is_empty()) {
            let entry: AuditEntry =
                serde_json::from_str(last).map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
            log.last_seq = entry.seq;
            log.last_mac = entry.mac;
        }
        Ok(log)
    }

    /// Appends one entry and fsyncs it; the operation it records must not
    /// proceed if this fails.
    pub(crate) fn append(
        &mut self,
        caller: &str,
        capability: &str,
        operation: &str,
        secret: Option<(&str, Option<u32>)>,
        outcome: &str,
    ) -> io::Result<()> {
        let mut entry = AuditEntry {
            seq: self.last_seq + 1,
            time: fsutil::now_rfc3339(),
            caller: caller.to_owned(),
            capability: capability.to_owned(),
            operation: operation.to_owned(),
            secret_id: secret.map(|(id, _)| id.to_owned()),
            version: secret.and_then(|(_, version)| version),
            outcome: outcome.to_owned(),
            prev_mac: self.last_mac.clone(),
            mac: String::new(),
        };
        entry.mac = entry_mac(&self.key, &entry);
        let mut line = serde_json::to_string(&entry).expect("audit entries always serialize");
        line.push('\n');
        if let Some(dir) = self.path.parent() {
            crate::files::create_private_dir(dir)?;
        }
        let mut file = OpenOptions::new().create(true).append(true).mode(0o600).open(&self.path)?;
        file.write_all(line.as_bytes())?;
        file.sync_data()?;
        self.last_seq = entry.seq;
        self.last_mac = entry.mac;
        Ok(())
    }

    /// Checks every entry's MAC and its link to the previous one.
    pub(crate) fn verify(&self) -> io::Result<AuditReport> {
        let file = match OpenOptions::new().read(true).open(&self.path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Ok(AuditReport { verified_entries: 0, first_broken: None })
            }
            Err(error) => return Err(error),
        };
        let mut previous_mac = String::new();
        let mut verified = 0;
        for (index, line) in BufReader::new(file).lines().enumerate() {
            let line_number = index as u64 + 1;
            let broken = |reason: &str| AuditReport {
                verified_entries: verified,
                first_broken: Some((line_number, reason.to_owned())),
            };
            let Ok(entry) = serde_json::from_str::<AuditEntry>(&line?) else {
                return Ok(broken("not an audit entry"));
            };
            if entry.seq != line_number {
                return Ok(broken("sequence number out of order"));
            }
            if entry.prev_mac != previous_mac {
                return Ok(broken("does not chain to the previous entry"));
            }
            if entry.mac != entry_mac(&self.key, &entry) {
                return Ok(broken("MAC mismatch"));
            }
            previous_mac = entry.mac;
            verified += 1;
        }
        Ok(AuditReport { verified_entries: verified, first_broken: None })
    }
}

//! Decoding of the records the programs write into the ring buffers.
use std::net::Ipv6Addr;

use clawos_ebpf_common::{
    c_bytes, Decision, EventHeader, EventKind, ExecCheckEvent, ExecEvent, ExitEvent, FileOpenEvent, PrivilegeEvent,
    SocketEvent, EVENT_FORMAT_VERSION,
};

/// One decoded kernel record.
#[derive(Clone, Copy, Debug)]
pub enum Event {
    Exec(ExecEvent),
    Exit(ExitEvent),
    ExecCheck(ExecCheckEvent),
    FileOpen(FileOpenEvent),
    /// A connect or bind; [`EventHeader::kind`] tells which.
    Socket(SocketEvent),
    /// A ptrace, bpf or mount; [`EventHeader::kind`] tells which.
    Privilege(PrivilegeEvent),
}

/// Why a record was not decoded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than a header or than the record's kind needs.
    #[error("record of {len} bytes is too short")]
    Short { len: usize },
    /// Written by programs of another format version.
    #[error("record format version {version}, expected {EVENT_FORMAT_VERSION}")]
    Version { version: u16 },
    /// A kind this reader does not know.
    #[error("unknown record kind {kind}")]
    Kind { kind: u16 },
}

/// Reads a `T` from the start of `bytes`.
fn read<T: aya::Pod>(bytes: &[u8]) -> Result<T, DecodeError> {
    if bytes.len() < size_of::<T>() {
        return Err(DecodeError::Short { len: bytes.len() });
    }
    // SAFETY: `bytes` holds at least size_of::<T>() bytes and T is plain old
    // data (aya::Pod: every bit pattern valid); read_unaligned makes no
    // alignment assumption about the ring buffer slot.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

impl Event {
    /// Decodes one ring buffer record.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let header: EventHeader = read(bytes)?;
        if header.version != EVENT_FORMAT_VERSION {
            return Err(DecodeError::Version { version: header.version });
        }
        let kind = EventKind::from_u16(header.kind).ok_or(DecodeError::Kind { kind: header.kind })?;
        Ok(match kind {
            EventKind::Exec => Self::Exec(read(bytes)?),
            EventKind::Exit => Self::Exit(read(bytes)?),
            EventKind::ExecCheck => Self::ExecCheck(read(bytes)?),
            EventKind::FileOpen => Self::FileOpen(read(bytes)?),
            EventKind::Connect | EventKind::Bind => Self::Socket(read(bytes)?),
            EventKind::Ptrace | EventKind::Bpf | EventKind::Mount => Self::Privilege(read(bytes)?),
        })
    }

    /// The common header.
    pub fn header(&self) -> &EventHeader {
        match self {
            Self::Exec(event) => &event.header,
            Self::Exit(event) => &event.header,
            Self::ExecCheck(event) => &event.header,
            Self::FileOpen(event) => &event.header,
            Self::Socket(event) => &event.header,
            Self::Privilege(event) => &event.header,
        }
    }

    /// The record's kind (decoding checked it is a known one).
    pub fn kind(&self) -> EventKind {
        EventKind::from_u16(self.header().kind).unwrap_or(EventKind::Exec)
    }

    /// The policy's decision on the action.
    pub fn decision(&self) -> Decision {
        match self.header().severity {
            1 => Decision::Audited,
            2 => Decision::Denied,
            _ => Decision::Allowed,
        }
    }

    /// The path the record names (exec'd file, opened file), if any.
    pub fn path(&self) -> Option<String> {
        let bytes = match self {
            Self::Exec(event) => &event.filename[..],
            Self::ExecCheck(event) => &event.filename[..],
            Self::FileOpen(event) => &event.path[..],
            _ => return None,
        };
        Some(String::from_utf8_lossy(c_bytes(bytes)).into_owned())
    }

    /// The event as a JSON object for IPC: header fields plus the kind's own.
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::json;
        let header = self.header();
        let mut object = serde_json::Map::new();
        object.insert("kind".into(), json!(kind_name(self.kind())));
        object.insert("decision".into(), json!(decision_name(self.decision())));
        object.insert("timestamp_ns".into(), json!(header.timestamp_ns));
        object.insert("pid".into(), json!(header.pid));
        object.insert("tid".into(), json!(header.tid));
        object.insert("uid".into(), json!(header.uid));
        object.insert("gid".into(), json!(header.gid));
        object.insert("cgroup_id".into(), json!(header.cgroup_id));
        object.insert("comm".into(), json!(String::from_utf8_lossy(c_bytes(&header.comm))));
        if let Some(path) = self.path() {
            object.insert("path".into(), json!(path));
        }
        match self {
            Self::Exit(event) => {
                object.insert("exit_code".into(), json!(event.exit_code));
            }
            Self::FileOpen(event) => {
                object.insert("flags".into(), json!(event.flags));
            }
            Self::Socket(event) => {
                let addr = Ipv6Addr::from(event.addr);
                let addr = addr.to_ipv4_mapped().map_or_else(|| addr.to_string(), |v4| v4.to_string());
                object.insert("address".into(), json!(addr));
                object.insert("port".into(), json!(event.port));
            }
            Self::Privilege(event) => {
                object.insert("request".into(), json!(event.request));
                object.insert("target_pid".into(), json!(event.target_pid));
                object.insert("flags".into(), json!(event.flags));
                object.insert("detail".into(), json!(String::from_utf8_lossy(c_bytes(&event.detail))));
            }
            Self::Exec(_) | Self::ExecCheck(_) => {}
        }
        object
    }
}

/// The name of a kind in IPC payloads and rule files.
pub fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Exec => "exec",
        EventKind::Exit => "exit",
        EventKind::ExecCheck => "exec_check",
        EventKind::FileOpen => "file_open",
        EventKind::Connect => "connect",
        EventKind::Bind => "bind",
        EventKind::Ptrace => "ptrace",
        EventKind::Bpf => "bpf",
        EventKind::Mount => "mount",
    }
}

fn decision_name(decision: Decision) -> &'static str {
    match decision {
        Decision::Allowed => "allowed",
        Decision::Audited => "audited",
        Decision::Denied => "denied",
    }
}

#[cfg(test)]
mod tests {
    use clawos_ebpf_common::*;

    use super::*;

    /// The sizes documented in specs/ebpf/events.md, checked on the host too
    /// (the BPF side asserts them at compile time for its target).
    #[test]
    fn layouts_have_documented_sizes() {
        assert_eq!(size_of::<EventHeader>(), 56);
        assert_eq!(size_of::<ExecEvent>(), 312);
        assert_eq!(size_of::<ExitEvent>(), 64);
        assert_eq!(size_of::<ExecCheckEvent>(), 312);
        assert_eq!(size_of::<FileOpenEvent>(), 320);
        assert_eq!(size_of::<SocketEvent>(), 80);
        assert_eq!(size_of::<PrivilegeEvent>(), 136);
        assert_eq!(size_of::<CgroupPolicy>(), 8);
        assert_eq!(size_of::<PathGrantKey>(), 256);
        assert_eq!(size_of::<NetGrantKey>(), 24);
        assert_eq!(std::mem::offset_of!(EventHeader, timestamp_ns), 8);
        assert_eq!(std::mem::offset_of!(EventHeader, cgroup_id), 32);
        assert_eq!(std::mem::offset_of!(FileOpenEvent, path), 64);
        assert_eq!(std::mem::offset_of!(SocketEvent, addr), 64);
        assert_eq!(std::mem::offset_of!(PrivilegeEvent, detail), 72);
    }

    fn header(kind: EventKind, severity: u16) -> EventHeader {
        EventHeader {
            version: EVENT_FORMAT_VERSION,
            kind: kind as u16,
            severity,
            reserved: 0,
            timestamp_ns: 7,
            pid: 42,
            tid: 43,
            uid: 1000,
            gid: 1000,
            cgroup_id: 99,
            comm: *b"cat\0\0\0\0\0\0\0\0\0\0\0\0\0",
        }
    }

    fn bytes<T>(value: &T) -> Vec<u8> {
        // SAFETY: T is one of the padding-free repr(C) records.
        unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
    }

    #[test]
    fn decodes_a_denied_open_with_its_path() {
        let mut path = [0u8; PATH_LEN];
        path[..11].copy_from_slice(b"/etc/shadow");
        let record = FileOpenEvent { header: header(EventKind::FileOpen, 2), flags: 0, reserved: 0, path };
        let event = Event::decode(&bytes(&record)).unwrap();
        assert_eq!(event.kind(), EventKind::FileOpen);
        assert_eq!(event.decision(), Decision::Denied);
        let json = event.to_json();
        assert_eq!(json["path"], "/etc/shadow");
        assert_eq!(json["comm"], "cat");
        assert_eq!(json["decision"], "denied");
    }

    #[test]
    fn decodes_an_ipv4_connect() {
        let mut addr = [0u8; 16];
        addr[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 2, 2]);
        let record = SocketEvent { header: header(EventKind::Connect, 0), family: 2, port: 443, reserved: 0, addr };
        let json = Event::decode(&bytes(&record)).unwrap().to_json();
        assert_eq!(json["address"], "10.0.2.2");
        assert_eq!(json["port"], 443);
        assert_eq!(json["kind"], "connect");
    }

    #[test]
    fn rejects_short_foreign_and_unknown_records() {
        let record = ExitEvent { header: header(EventKind::Exit, 0), exit_code: 0, reserved: 0 };
        let good = bytes(&record);
        assert_eq!(Event::decode(&good[..60]).unwrap_err(), DecodeError::Short { len: 60 });
        let mut old = good.clone();
        old[0] = 1;
        assert_eq!(Event::decode(&old).unwrap_err(), DecodeError::Version { version: 1 });
        let mut unknown = good;
        unknown[2] = 200;
        assert_eq!(Event::decode(&unknown).unwrap_err(), DecodeError::Kind { kind: 200 });
    }
}

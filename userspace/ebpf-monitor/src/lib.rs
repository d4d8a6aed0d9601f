//! Userspace side of the ClawOS eBPF monitor: loads the `clawos-monitor` object
//! built by `make ebpf` (installed at [`DEFAULT_OBJECT`]), attaches its
//! programs, and decodes the records they write.
//!
//! Owns: loading, attaching and ring buffer reading. Must not own: anomaly
//! rules or IPC (that is the ebpf-agent component's job).
use std::path::{Path, PathBuf};

use aya::{
    maps::{MapData, RingBuf},
    programs::TracePoint,
    Ebpf,
};
use clawos_ebpf_common::{EventKind, ExecEvent, EVENT_FORMAT_VERSION};

/// Where the image installs the monitor object.
pub const DEFAULT_OBJECT: &str = "/usr/lib/clawos/ebpf/clawos-monitor.bpf.o";

/// Failure to bring a program up, naming the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// The object file could not be read or parsed.
    #[error("loading eBPF object {path}")]
    Load {
        path: PathBuf,
        #[source]
        source: aya::EbpfError,
    },
    /// The object lacks a program or map this loader expects.
    #[error("eBPF object has no {kind} named {name}")]
    Missing { kind: &'static str, name: &'static str },
    /// The kernel refused to verify, load or attach a program.
    #[error("{step} of program {name}")]
    Program {
        step: &'static str,
        name: &'static str,
        #[source]
        source: aya::programs::ProgramError,
    },
    /// A map could not be opened as the expected type.
    #[error("opening map {name}")]
    Map {
        name: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
}

/// The exec tracepoint program and its ring buffer, attached for as long as
/// this value lives.
pub struct ExecMonitor {
    // Dropping the Ebpf detaches and unloads the programs.
    _ebpf: Ebpf,
    events: RingBuf<MapData>,
}

impl ExecMonitor {
    /// Loads the object at `path` and attaches `sched/sched_process_exec`.
    pub fn attach(path: &Path) -> Result<Self, MonitorError> {
        let load_err = |source| MonitorError::Load { path: path.to_owned(), source };
        let mut ebpf = Ebpf::load_file(path).map_err(load_err)?;
        const PROG: &str = "sched_process_exec";
        let program: &mut TracePoint = ebpf
            .program_mut(PROG)
            .ok_or(MonitorError::Missing { kind: "program", name: PROG })?
            .try_into()
            .map_err(|source| MonitorError::Program { step: "typing", name: PROG, source })?;
        program
            .load()
            .map_err(|source| MonitorError::Program { step: "verifying", name: PROG, source })?;
        program
            .attach("sched", PROG)
            .map_err(|source| MonitorError::Program { step: "attaching", name: PROG, source })?;
        const MAP: &str = "EXEC_EVENTS";
        let map = ebpf.take_map(MAP).ok_or(MonitorError::Missing { kind: "map", name: MAP })?;
        let events = RingBuf::try_from(map).map_err(|source| MonitorError::Map { name: MAP, source })?;
        Ok(Self { _ebpf: ebpf, events })
    }

    /// The next pending exec record, if any, skipping records of another
    /// format version or kind.
    pub fn next_event(&mut self) -> Option<ExecEvent> {
        while let Some(item) = self.events.next() {
            if item.len() < std::mem::size_of::<ExecEvent>() {
                continue;
            }
            // SAFETY: the slice holds at least size_of::<ExecEvent>() bytes and
            // ExecEvent is plain old data (aya::Pod); read_unaligned makes no
            // alignment assumption about the ring buffer slot.
            let event = unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<ExecEvent>()) };
            if event.header.version == EVENT_FORMAT_VERSION && event.header.kind == EventKind::Exec as u16 {
                return Some(event);
            }
        }
        None
    }
}

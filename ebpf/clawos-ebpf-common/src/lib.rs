//! Fixed-layout event records written by the ClawOS eBPF programs into ring
//! buffers and read by userspace. `#![no_std]` so the BPF programs can use it.
//!
//! Owns: the binary event format and its version. Must not own: policy,
//! parsing of anything the kernel did not write, or allocation.
//!
//! Every record starts with an [`EventHeader`]. Layouts are `#[repr(C)]` with
//! explicit padding fields so that their sizes are the same on both sides; the
//! sizes are asserted at compile time below and documented in
//! `specs/ebpf/events.md`.
#![no_std]

/// Bumped whenever a record layout changes; readers reject other versions.
pub const EVENT_FORMAT_VERSION: u16 = 1;

/// Bytes of the task command name (`TASK_COMM_LEN`).
pub const COMM_LEN: usize = 16;
/// Bytes of a path copied from the kernel, NUL-terminated when shorter.
pub const PATH_LEN: usize = 256;

/// Kind of a record, stored in [`EventHeader::kind`].
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A task called execve successfully ([`ExecEvent`]).
    Exec = 1,
}

/// Common prefix of every record. 56 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EventHeader {
    /// [`EVENT_FORMAT_VERSION`] of the writer.
    pub version: u16,
    /// An [`EventKind`] discriminant.
    pub kind: u16,
    /// 0 = info, 1 = warning, 2 = critical.
    pub severity: u16,
    /// Keeps `timestamp_ns` 8-byte aligned without implicit padding.
    pub reserved: u16,
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC nanoseconds.
    pub timestamp_ns: u64,
    /// Thread group id (userspace "pid").
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    pub uid: u32,
    pub gid: u32,
    /// cgroup v2 id of the task (the inode number of its cgroup directory).
    pub cgroup_id: u64,
    pub comm: [u8; COMM_LEN],
}

/// A successful exec, from the `sched/sched_process_exec` tracepoint. 312 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExecEvent {
    pub header: EventHeader,
    /// The path passed to execve, NUL-terminated when shorter than the buffer.
    pub filename: [u8; PATH_LEN],
}

const _: () = assert!(core::mem::size_of::<EventHeader>() == 56);
const _: () = assert!(core::mem::size_of::<ExecEvent>() == 312);

#[cfg(feature = "user")]
mod user {
    // SAFETY: both are repr(C), contain only integers and byte arrays, and have
    // no implicit padding (sizes asserted above), so every bit pattern is valid.
    unsafe impl aya::Pod for super::EventHeader {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::ExecEvent {}
}

/// The bytes of a NUL-terminated fixed buffer up to its first NUL.
pub fn c_bytes(buf: &[u8]) -> &[u8] {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    &buf[..end]
}

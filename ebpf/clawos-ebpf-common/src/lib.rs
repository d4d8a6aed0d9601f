//! Fixed-layout records shared by the ClawOS eBPF programs and userspace: the
//! events the programs write into ring buffers, and the keys and values of the
//! maps userspace fills with policy. `#![no_std]` so the BPF programs can use it.
//!
//! Owns: the binary event and map formats and their version. Must not own:
//! policy decisions, parsing of anything the kernel did not write, or
//! allocation.
//!
//! Every event starts with an [`EventHeader`]. Layouts are `#[repr(C)]` with
//! explicit padding fields so that their sizes are the same on both sides; the
//! sizes are asserted at compile time below, checked again by the userspace
//! tests, and documented in `specs/ebpf/events.md`.
#![no_std]

/// Bumped whenever a record layout changes; readers reject other versions.
/// 2: exit, exec-check, file, socket and privilege records; `severity`
/// carries the [`Decision`].
pub const EVENT_FORMAT_VERSION: u16 = 2;

/// Bytes of the task command name (`TASK_COMM_LEN`).
pub const COMM_LEN: usize = 16;
/// Bytes of a path copied from the kernel, NUL-terminated when shorter.
pub const PATH_LEN: usize = 256;
/// Bytes of a path compared against the open grants. The kernel caps LPM trie
/// keys at 256 data bytes, 8 of which hold the cgroup id.
pub const GRANT_PATH_LEN: usize = 248;
/// Bytes of a short string argument (mount source).
pub const DETAIL_LEN: usize = 64;

/// Kind of a record, stored in [`EventHeader::kind`].
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A task called execve successfully ([`ExecEvent`]).
    Exec = 1,
    /// A thread group ended ([`ExitEvent`]).
    Exit = 2,
    /// An exec the policy denies or audits, before it happens ([`ExecCheckEvent`]).
    ExecCheck = 3,
    /// A file was opened ([`FileOpenEvent`]).
    FileOpen = 4,
    /// An outbound IPv4/IPv6 connection ([`SocketEvent`]).
    Connect = 5,
    /// An IPv4/IPv6 socket was bound to a local address ([`SocketEvent`]).
    Bind = 6,
    /// A ptrace attach or read access ([`PrivilegeEvent`]).
    Ptrace = 7,
    /// A `bpf()` syscall ([`PrivilegeEvent`]).
    Bpf = 8,
    /// A mount ([`PrivilegeEvent`]).
    Mount = 9,
}

impl EventKind {
    /// The kind with discriminant `value`, if any.
    pub fn from_u16(value: u16) -> Option<Self> {
        Some(match value {
            1 => Self::Exec,
            2 => Self::Exit,
            3 => Self::ExecCheck,
            4 => Self::FileOpen,
            5 => Self::Connect,
            6 => Self::Bind,
            7 => Self::Ptrace,
            8 => Self::Bpf,
            9 => Self::Mount,
            _ => return None,
        })
    }
}

/// What the policy made of an action, stored in [`EventHeader::severity`].
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The policy permits it (or has no rule for it).
    Allowed = 0,
    /// The policy forbids it but the cgroup is in audit mode: it went ahead.
    Audited = 1,
    /// The policy forbids it and the hook returned -EPERM.
    Denied = 2,
}

/// Common prefix of every record. 56 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EventHeader {
    /// [`EVENT_FORMAT_VERSION`] of the writer.
    pub version: u16,
    /// An [`EventKind`] discriminant.
    pub kind: u16,
    /// A [`Decision`] discriminant (0 for kinds the policy does not judge).
    pub severity: u16,
    /// Keeps `timestamp_ns` 8-byte aligned without implicit padding.
    pub reserved: u16,
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC nanoseconds.
    pub timestamp_ns: u64,
    /// Thread group id (userspace "pid").
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Real user id of the task.
    pub uid: u32,
    /// Real group id of the task.
    pub gid: u32,
    /// cgroup v2 id of the task (the inode number of its cgroup directory).
    pub cgroup_id: u64,
    /// The task's command name, NUL-terminated when shorter.
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

/// A thread group leader exited, from the `sched_process_exit` raw
/// tracepoint. 64 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExitEvent {
    pub header: EventHeader,
    /// `task_struct.exit_code`: the wait status (exit status << 8 | signal).
    pub exit_code: i32,
    /// Explicit tail padding to an 8-byte multiple.
    pub reserved: u32,
}

/// An exec the policy forbids, from the LSM `bprm_check_security` hook
/// (allowed execs are reported by [`ExecEvent`] once they succeed). 312 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExecCheckEvent {
    pub header: EventHeader,
    /// `linux_binprm.filename`, NUL-terminated when shorter.
    pub filename: [u8; PATH_LEN],
}

/// A file open, from the LSM `file_open` hook. 320 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FileOpenEvent {
    pub header: EventHeader,
    /// `file.f_flags` (O_* flags of the open).
    pub flags: u32,
    /// Explicit padding before the path.
    pub reserved: u32,
    /// Absolute path from `bpf_d_path`, NUL-terminated when shorter.
    pub path: [u8; PATH_LEN],
}

/// An IPv4 or IPv6 connect or bind, from the LSM `socket_connect` and
/// `socket_bind` hooks. 80 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SocketEvent {
    pub header: EventHeader,
    /// `AF_INET` (2) or `AF_INET6` (10).
    pub family: u16,
    /// Port in host byte order.
    pub port: u16,
    /// Explicit padding before the address.
    pub reserved: u32,
    /// The address as IPv6 bytes in network order; IPv4 as `::ffff:a.b.c.d`.
    pub addr: [u8; 16],
}

/// A privilege-relevant call, from the LSM `ptrace_access_check`, `bpf` and
/// `sb_mount` hooks. 136 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PrivilegeEvent {
    pub header: EventHeader,
    /// ptrace: the `PTRACE_MODE_*` mask; bpf: the command; mount: 0.
    pub request: u32,
    /// ptrace: the target's thread group id; otherwise 0.
    pub target_pid: u32,
    /// mount: the `MS_*` flags; otherwise 0.
    pub flags: u64,
    /// mount: the source (device name), NUL-terminated; otherwise empty.
    pub detail: [u8; DETAIL_LEN],
}

/// Programs, as indexes of the per-CPU loss counter array `LOST_EVENTS`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramId {
    SchedProcessExec = 0,
    SchedProcessExit = 1,
    BprmCheckSecurity = 2,
    FileOpen = 3,
    SocketConnect = 4,
    SocketBind = 5,
    PtraceAccessCheck = 6,
    Bpf = 7,
    SbMount = 8,
}

/// Number of [`ProgramId`]s, the size of `LOST_EVENTS`.
pub const PROGRAM_COUNT: u32 = 9;

/// [`CgroupPolicy::mode`]: forbidden actions are reported, not blocked.
pub const MODE_AUDIT: u32 = 0;
/// [`CgroupPolicy::mode`]: forbidden actions fail with EPERM.
pub const MODE_ENFORCE: u32 = 1;

/// [`CgroupPolicy::rules`]: every exec is forbidden.
pub const RULE_DENY_EXEC: u32 = 1 << 0;
/// [`CgroupPolicy::rules`]: opens outside the cgroup's `OPEN_GRANTS` are forbidden.
pub const RULE_RESTRICT_OPEN: u32 = 1 << 1;
/// [`CgroupPolicy::rules`]: IP connects outside its `CONNECT_GRANTS` are forbidden.
pub const RULE_RESTRICT_CONNECT: u32 = 1 << 2;
/// [`CgroupPolicy::rules`]: ptrace, bpf() and mount are forbidden.
pub const RULE_DENY_PRIVILEGED: u32 = 1 << 3;

/// Value of the `SCOPE` hash map, keyed by cgroup id: a cgroup present in
/// the map is monitored, one absent is ignored after that single lookup.
/// 8 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CgroupPolicy {
    /// [`MODE_AUDIT`] or [`MODE_ENFORCE`].
    pub mode: u32,
    /// `RULE_*` bits.
    pub rules: u32,
}

/// Data of an `OPEN_GRANTS` LPM trie key. A grant is the cgroup id followed by
/// a path prefix; a lookup matches the opened path against the longest grant
/// of its cgroup. Directory grants end in `/`, exact files include their NUL.
/// 256 bytes, no field wider than 4-byte alignment so that the data follows
/// the trie's `u32` prefix length without padding.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PathGrantKey {
    /// The cgroup id in native byte order.
    pub cgroup_id: [u8; 8],
    /// Path bytes.
    pub path: [u8; GRANT_PATH_LEN],
}

/// Data of a `CONNECT_GRANTS` LPM trie key: cgroup id then a CIDR over the
/// IPv6 (or IPv4-mapped) address. 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NetGrantKey {
    /// The cgroup id in native byte order.
    pub cgroup_id: [u8; 8],
    /// Address bytes in network order.
    pub addr: [u8; 16],
}

/// Maps `sys_enter` per cgroup: syscalls entered. A per-CPU hash value.
pub type SyscallCount = u64;

/// Key of `RECENT_OPENS`: a file (the kernel address of its inode) opened
/// in a cgroup.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecentOpenKey {
    pub cgroup_id: u64,
    pub inode: u64,
}

/// In a cgroup without open grants (watched, nothing to decide), opens of
/// the same file within this window are reported once and counted in
/// `COALESCED_OPENS`: a process reopening one file in a loop costs a map
/// lookup per open instead of a path walk and a record. Cgroups with open
/// grants get every open checked and reported.
pub const OPEN_REPORT_WINDOW_NS: u64 = 1_000_000_000;

/// Where the programs find the kernel fields they read, in bytes from the
/// start of each struct. Kernel struct layouts change with the version and
/// the configuration, and aya has no CO-RE relocations for Rust programs, so
/// userspace reads the offsets from the running kernel's BTF and sets them
/// in the programs' read-only global `KERNEL_OFFSETS` before loading. The
/// verifier then treats them as constants.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelOffsets {
    /// `struct file`: `f_flags`, `f_inode`, `f_path`.
    pub file_f_flags: u32,
    pub file_f_inode: u32,
    pub file_f_path: u32,
    /// `struct linux_binprm`: `filename`.
    pub binprm_filename: u32,
    /// `struct task_struct`: `exit_code`, `pid`, `tgid`.
    pub task_exit_code: u32,
    pub task_pid: u32,
    pub task_tgid: u32,
    /// Keeps the size a multiple of 8, with no implicit padding.
    pub _pad: u32,
}

impl KernelOffsets {
    /// The fields, as (struct, member, offset): what userspace resolves.
    pub fn fields_mut(&mut self) -> [(&'static str, &'static str, &mut u32); 7] {
        [
            ("file", "f_flags", &mut self.file_f_flags),
            ("file", "f_inode", &mut self.file_f_inode),
            ("file", "f_path", &mut self.file_f_path),
            ("linux_binprm", "filename", &mut self.binprm_filename),
            ("task_struct", "exit_code", &mut self.task_exit_code),
            ("task_struct", "pid", &mut self.task_pid),
            ("task_struct", "tgid", &mut self.task_tgid),
        ]
    }
}

const _: () = assert!(core::mem::size_of::<EventHeader>() == 56);
const _: () = assert!(core::mem::size_of::<ExecEvent>() == 312);
const _: () = assert!(core::mem::size_of::<ExitEvent>() == 64);
const _: () = assert!(core::mem::size_of::<ExecCheckEvent>() == 312);
const _: () = assert!(core::mem::size_of::<FileOpenEvent>() == 320);
const _: () = assert!(core::mem::size_of::<SocketEvent>() == 80);
const _: () = assert!(core::mem::size_of::<PrivilegeEvent>() == 136);
const _: () = assert!(core::mem::size_of::<CgroupPolicy>() == 8);
const _: () = assert!(core::mem::size_of::<PathGrantKey>() == 256);
const _: () = assert!(core::mem::align_of::<PathGrantKey>() == 1);
const _: () = assert!(core::mem::size_of::<NetGrantKey>() == 24);
const _: () = assert!(core::mem::size_of::<RecentOpenKey>() == 16);
const _: () = assert!(core::mem::size_of::<KernelOffsets>() == 32);

#[cfg(feature = "user")]
mod user {
    // SAFETY (all impls): repr(C), only integers and byte arrays, no implicit
    // padding (sizes asserted above), so every bit pattern is valid.
    unsafe impl aya::Pod for super::EventHeader {}
    unsafe impl aya::Pod for super::ExecEvent {}
    unsafe impl aya::Pod for super::ExitEvent {}
    unsafe impl aya::Pod for super::ExecCheckEvent {}
    unsafe impl aya::Pod for super::FileOpenEvent {}
    unsafe impl aya::Pod for super::SocketEvent {}
    unsafe impl aya::Pod for super::PrivilegeEvent {}
    unsafe impl aya::Pod for super::CgroupPolicy {}
    unsafe impl aya::Pod for super::PathGrantKey {}
    unsafe impl aya::Pod for super::NetGrantKey {}
    unsafe impl aya::Pod for super::RecentOpenKey {}
    unsafe impl aya::Pod for super::KernelOffsets {}
}

/// The bytes of a NUL-terminated fixed buffer up to its first NUL.
pub fn c_bytes(buf: &[u8]) -> &[u8] {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    &buf[..end]
}

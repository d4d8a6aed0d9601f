//! The ClawOS kernel-side monitor programs, linked into one object
//! (`clawos-monitor`) that userspace loads with aya.
//!
//! Every program first looks the current task's cgroup up in `SCOPE`; tasks
//! outside the cgroups ClawOS monitors cost that one lookup and nothing else.
//! For monitored cgroups the programs write one record per action into the
//! ring buffer of its class, and the LSM programs judge the action against the
//! cgroup's [`CgroupPolicy`]: in enforce mode a forbidden action fails with
//! EPERM, in audit mode it is only reported.
//!
//! Kernel struct offsets come from [`KERNEL_OFFSETS`], which userspace sets
//! from the running kernel's BTF before loading (aya has no CO-RE
//! relocations for Rust), so the programs read the right fields on any
//! kernel layout. The verifier also checks the `f_path` pointer handed to
//! `bpf_d_path` against the kernel's types.
//!
//! Conditions that are not events but explain one (a path the grant check
//! could not read) go to aya-log, which userspace forwards to its own log.
//! Nothing on a normal path logs: a log record costs a perf event output.
#![no_std]
#![no_main]

use aya_ebpf::{
    bindings::path,
    helpers::{
        bpf_d_path, bpf_get_current_ancestor_cgroup_id, bpf_get_current_cgroup_id, bpf_get_current_comm,
        bpf_get_current_pid_tgid, bpf_get_current_uid_gid, bpf_ktime_get_ns, bpf_probe_read_kernel,
        bpf_probe_read_kernel_buf, bpf_probe_read_kernel_str_bytes,
    },
    macros::{lsm, map, raw_tracepoint, tracepoint},
    maps::{lpm_trie::Key, HashMap, LpmTrie, LruHashMap, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::{LsmContext, RawTracePointContext, TracePointContext},
    EbpfContext,
};
use aya_log_ebpf::warn;
use clawos_ebpf_common::{
    CgroupPolicy, Decision, EventHeader, EventKind, ExecCheckEvent, ExecEvent, ExitEvent, FileOpenEvent, KernelOffsets,
    NetGrantKey, PathGrantKey, PrivilegeEvent, ProgramId, RecentOpenKey, SocketEvent, SyscallCount,
    EVENT_FORMAT_VERSION, GRANT_PATH_LEN, MODE_ENFORCE, OPEN_REPORT_WINDOW_NS, PROGRAM_COUNT, RULE_DENY_EXEC,
    RULE_DENY_PRIVILEGED, RULE_RESTRICT_CONNECT, RULE_RESTRICT_OPEN,
};

/// Monitored cgroups and their policy, filled by userspace. 4096 covers the
/// components plus every tool cgroup of the WASM daemon with room to spare.
#[map]
static SCOPE: HashMap<u64, CgroupPolicy> = HashMap::with_max_entries(4096, 0);

/// Path prefixes each cgroup may open (see [`PathGrantKey`]). LPM tries must
/// not be preallocated (BPF_F_NO_PREALLOC = 1).
#[map]
static OPEN_GRANTS: LpmTrie<PathGrantKey, u32> = LpmTrie::with_max_entries(4096, 1);

/// Address ranges each cgroup may connect to (see [`NetGrantKey`]).
#[map]
static CONNECT_GRANTS: LpmTrie<NetGrantKey, u32> = LpmTrie::with_max_entries(4096, 1);

/// Syscalls entered per monitored cgroup; userspace turns them into rates.
#[map]
static SYSCALL_COUNTS: PerCpuHashMap<u64, SyscallCount> = PerCpuHashMap::with_max_entries(4096, 0);

/// Records a program could not write because its ring buffer was full,
/// indexed by [`ProgramId`].
#[map]
static LOST_EVENTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(PROGRAM_COUNT, 0);

/// When each (cgroup, file) of a watch-only cgroup was last reported (see
/// [`OPEN_REPORT_WINDOW_NS`]); least recently used entries make room.
#[map]
static RECENT_OPENS: LruHashMap<RecentOpenKey, u64> = LruHashMap::with_max_entries(16384, 0);

/// Opens not reported because the same file was reported within the window.
#[map]
static COALESCED_OPENS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Scratch for the open-grant lookup key: 260 bytes do not fit next to the
/// rest of the program's frame in the 512-byte BPF stack.
#[map]
static PATH_KEY_SCRATCH: PerCpuArray<Key<PathGrantKey>> = PerCpuArray::with_max_entries(1, 0);

/// Exec, exit and exec-check records. Execs are rare next to opens: 256 KiB
/// holds ~800 records, seconds of a fork storm, while userspace drains it
/// continuously.
#[map]
static PROCESS_EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// File open records, the busiest class: 1 MiB holds ~3200 opens.
#[map]
static FILE_EVENTS: RingBuf = RingBuf::with_byte_size(1024 * 1024, 0);

/// Connect and bind records (80 bytes each, ~3200 in 256 KiB).
#[map]
static NET_EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// ptrace, bpf and mount records; rare by nature.
#[map]
static PRIVILEGE_EVENTS: RingBuf = RingBuf::with_byte_size(64 * 1024, 0);

/// -EPERM, what an LSM hook returns to refuse.
const EPERM: i32 = -1;
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// Offset of `__data_loc char[] filename` in the sched_process_exec record
/// (after the 8-byte common trace header; see the tracepoint's `format` file).
const FILENAME_LOC_OFFSET: usize = 8;
/// Offsets of the kernel fields the programs read, set by userspace from the
/// kernel's BTF (see [`KernelOffsets`]). In `.rodata`, which aya freezes, so
/// the verifier knows the values; read through [`offsets`].
#[no_mangle]
static KERNEL_OFFSETS: KernelOffsets = KernelOffsets {
    file_f_flags: 0,
    file_f_inode: 0,
    file_f_path: 0,
    binprm_filename: 0,
    task_exit_code: 0,
    task_pid: 0,
    task_tgid: 0,
    _pad: 0,
};

/// [`KERNEL_OFFSETS`] as loaded: a volatile read, or the compiler would
/// fold in the zeros it was compiled with.
#[inline(always)]
fn offsets() -> KernelOffsets {
    // SAFETY: a plain static of integers, valid to read at any time.
    unsafe { core::ptr::read_volatile(&KERNEL_OFFSETS) }
}

/// The deepest cgroup level [`scope`] looks at for an ancestor's entry: the
/// tool cgroups are at level 4 (`clawos.slice/<unit>/daemon/tool-<id>`).
const MAX_CGROUP_DEPTH: i32 = 8;

/// The current task's cgroup id and policy, or `None` outside the scope.
#[inline(always)]
fn own_scope() -> Option<(u64, CgroupPolicy)> {
    // SAFETY: helper without pointer arguments.
    scope_of(unsafe { bpf_get_current_cgroup_id() })
}

/// `cgroup_id` with its entry in `SCOPE`, if it has one.
#[inline(always)]
fn scope_of(cgroup_id: u64) -> Option<(u64, CgroupPolicy)> {
    // SAFETY: the value is plain data copied out at once.
    unsafe { SCOPE.get(&cgroup_id) }.map(|policy| (cgroup_id, *policy))
}

/// The policy that judges the current task: its own cgroup's entry or, for
/// a cgroup made since the agent last resolved the policy (it does every
/// second), the entry of its nearest ancestor in `SCOPE`, which is the rule
/// the agent will copy to it. Without this a tool's first call in a new
/// cgroup would run unjudged for up to a second. The id returned is that of
/// the entry that matched: grants are keyed by it and records carry it.
#[inline(always)]
fn scope() -> Option<(u64, CgroupPolicy)> {
    // SAFETY: helper without pointer arguments.
    let cgroup_id = unsafe { bpf_get_current_cgroup_id() };
    if let Some(found) = scope_of(cgroup_id) {
        return Some(found);
    }
    // Level 0 is the root; the walk stops at the task's own level (its id)
    // or below it (0). Only the id is kept in the loop: the verifier refuses
    // the arithmetic LLVM makes of a map value pointer carried across it.
    let mut nearest = 0;
    for level in 1..MAX_CGROUP_DEPTH {
        // SAFETY: as above.
        let ancestor = unsafe { bpf_get_current_ancestor_cgroup_id(level) };
        if ancestor == 0 || ancestor == cgroup_id {
            break;
        }
        // SAFETY: only whether the entry exists is read.
        if unsafe { SCOPE.get(&ancestor) }.is_some() {
            nearest = ancestor;
        }
    }
    if nearest == 0 {
        return None;
    }
    scope_of(nearest)
}

/// The decision for an action that `rule` of `policy` governs and that the
/// grants permit (`permitted`) or not.
#[inline(always)]
fn decide(policy: &CgroupPolicy, rule: u32, permitted: bool) -> Decision {
    if policy.rules & rule == 0 || permitted {
        Decision::Allowed
    } else if policy.mode == MODE_ENFORCE {
        Decision::Denied
    } else {
        Decision::Audited
    }
}

#[inline(always)]
fn verdict(decision: Decision) -> i32 {
    if decision == Decision::Denied {
        EPERM
    } else {
        0
    }
}

#[inline(always)]
fn count_lost(program: ProgramId) {
    if let Some(lost) = LOST_EVENTS.get_ptr_mut(program as u32) {
        // SAFETY: per-CPU slot, only this CPU writes it while the program runs.
        unsafe { *lost += 1 };
    }
}

/// Reserves a record of type `T` in `ring`, counting a loss for `program`
/// when the ring is full.
macro_rules! reserve {
    ($ring:expr, $t:ty, $program:expr) => {
        match $ring.reserve::<$t>(0) {
            Some(entry) => entry,
            None => {
                count_lost($program);
                return;
            }
        }
    };
}

#[inline(always)]
fn header(kind: EventKind, cgroup_id: u64, decision: Decision) -> EventHeader {
    let pid_tgid = bpf_get_current_pid_tgid();
    let uid_gid = bpf_get_current_uid_gid();
    EventHeader {
        version: EVENT_FORMAT_VERSION,
        kind: kind as u16,
        severity: decision as u16,
        reserved: 0,
        // SAFETY: helper without pointer arguments.
        timestamp_ns: unsafe { bpf_ktime_get_ns() },
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        uid: uid_gid as u32,
        gid: (uid_gid >> 32) as u32,
        cgroup_id,
        comm: bpf_get_current_comm().unwrap_or([0; 16]),
    }
}

#[tracepoint]
pub fn sched_process_exec(ctx: TracePointContext) -> u32 {
    if let Some((cgroup_id, _)) = scope() {
        emit_exec(&ctx, cgroup_id);
    }
    0
}

#[inline(always)]
fn emit_exec(ctx: &TracePointContext, cgroup_id: u64) {
    let mut entry = reserve!(PROCESS_EVENTS, ExecEvent, ProgramId::SchedProcessExec);
    let event = entry.as_mut_ptr();
    // SAFETY: `event` points at a reserved, exclusively owned ring buffer slot
    // of size_of::<ExecEvent>(); every field is written before submit.
    unsafe {
        (*event).header = header(EventKind::Exec, cgroup_id, Decision::Allowed);
        (*event).filename[0] = 0;
        if let Ok(loc) = ctx.read_at::<u32>(FILENAME_LOC_OFFSET) {
            let src = ctx.as_ptr().add((loc & 0xffff) as usize) as *const u8;
            let _ = bpf_probe_read_kernel_str_bytes(src, &mut (*event).filename);
        }
    }
    entry.submit(0);
}

/// `sched_process_exit(struct task_struct *p)`: fires for every exiting
/// thread; only thread group leaders (pid == tgid) make a record.
#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn sched_process_exit(ctx: RawTracePointContext) -> i32 {
    if let Some((cgroup_id, _)) = scope() {
        // SAFETY: raw tracepoint context is an array of u64 arguments.
        let task = unsafe { *(ctx.as_ptr() as *const u64) } as *const u8;
        emit_exit(task, cgroup_id);
    }
    0
}

#[inline(always)]
fn emit_exit(task: *const u8, cgroup_id: u64) {
    // SAFETY: probe reads of the exiting task fail safely on a bad pointer.
    let (pid, tgid, exit_code) = unsafe {
        (
            bpf_probe_read_kernel(task.add(offsets().task_pid as usize) as *const i32).unwrap_or(0),
            bpf_probe_read_kernel(task.add(offsets().task_tgid as usize) as *const i32).unwrap_or(-1),
            bpf_probe_read_kernel(task.add(offsets().task_exit_code as usize) as *const i32).unwrap_or(0),
        )
    };
    if pid != tgid {
        return;
    }
    let mut entry = reserve!(PROCESS_EVENTS, ExitEvent, ProgramId::SchedProcessExit);
    let event = entry.as_mut_ptr();
    // SAFETY: reserved, exclusively owned slot; every field written.
    unsafe {
        (*event).header = header(EventKind::Exit, cgroup_id, Decision::Allowed);
        (*event).exit_code = exit_code;
        (*event).reserved = 0;
    }
    entry.submit(0);
}

/// `bprm_check_security(struct linux_binprm *bprm)`: refuses execs where the
/// policy forbids them. Allowed execs are reported by `sched_process_exec`
/// once they succeed.
#[lsm(hook = "bprm_check_security")]
pub fn bprm_check_security(ctx: LsmContext) -> i32 {
    let Some((cgroup_id, policy)) = scope() else { return 0 };
    let decision = decide(&policy, RULE_DENY_EXEC, false);
    if decision != Decision::Allowed {
        // SAFETY: argument 0 of the hook is the binprm.
        let bprm: *const u8 = unsafe { ctx.arg(0) };
        emit_exec_check(bprm, cgroup_id, decision);
    }
    verdict(decision)
}

#[inline(always)]
fn emit_exec_check(bprm: *const u8, cgroup_id: u64, decision: Decision) {
    let mut entry = reserve!(PROCESS_EVENTS, ExecCheckEvent, ProgramId::BprmCheckSecurity);
    let event = entry.as_mut_ptr();
    // SAFETY: reserved, exclusively owned slot; every field written; the
    // probe reads fail safely on a bad pointer.
    unsafe {
        (*event).header = header(EventKind::ExecCheck, cgroup_id, decision);
        (*event).filename[0] = 0;
        if let Ok(name) = bpf_probe_read_kernel(bprm.add(offsets().binprm_filename as usize) as *const *const u8) {
            let _ = bpf_probe_read_kernel_str_bytes(name, &mut (*event).filename);
        }
    }
    entry.submit(0);
}

/// `file_open(struct file *file)`: reports every open in the scope and
/// refuses those outside the cgroup's open grants.
#[lsm(hook = "file_open")]
pub fn file_open(ctx: LsmContext) -> i32 {
    let Some((cgroup_id, policy)) = scope() else { return 0 };
    if policy.rules & RULE_RESTRICT_OPEN == 0 && recently_reported(&ctx, cgroup_id) {
        return 0;
    }
    let Some(key) = PATH_KEY_SCRATCH.get_ptr_mut(0) else { return 0 };
    // SAFETY: argument 0 of the hook is the file being opened; `f_path` is
    // embedded in it, which makes the pointer a `struct path` BTF pointer the
    // verifier accepts for bpf_d_path (allowed in file_open). `key` is this
    // CPU's scratch slot.
    let (file, path_len) = unsafe {
        let file: *const u8 = ctx.arg(0);
        (*key).prefix_len = (8 + GRANT_PATH_LEN as u32) * 8;
        (*key).data.cgroup_id = cgroup_id.to_ne_bytes();
        let path = file.add(offsets().file_f_path as usize) as *mut path;
        let len = bpf_d_path(path, (*key).data.path.as_mut_ptr() as *mut _, GRANT_PATH_LEN as u32);
        (file, len)
    };
    // A path that does not resolve or does not fit the grant buffer matches
    // no grant: unknown means forbidden.
    if path_len <= 0 {
        warn!(
            &ctx,
            "file_open: bpf_d_path failed with {} in cgroup {}: the path matches no open grant", path_len, cgroup_id
        );
        // SAFETY: `key` is this CPU's scratch slot; the record then carries an empty path.
        unsafe { (*key).data.path[0] = 0 };
    }
    // The trie walk is the costly part, and only a cgroup with open grants needs it.
    let granted = policy.rules & RULE_RESTRICT_OPEN != 0
        && path_len > 0
        // SAFETY: `key` is this CPU's scratch slot, initialized above.
        && unsafe { OPEN_GRANTS.get(&*key) }.is_some();
    let decision = decide(&policy, RULE_RESTRICT_OPEN, granted);
    emit_file_open(file, key, cgroup_id, decision);
    verdict(decision)
}

/// For a watch-only cgroup: whether this file was reported within the
/// window (then the open is only counted); otherwise records it as reported now.
#[inline(always)]
fn recently_reported(ctx: &LsmContext, cgroup_id: u64) -> bool {
    // SAFETY: argument 0 of the hook is the file; the probe read fails safely.
    let inode = unsafe {
        let file: *const u8 = ctx.arg(0);
        bpf_probe_read_kernel(file.add(offsets().file_f_inode as usize) as *const u64).unwrap_or(0)
    };
    let key = RecentOpenKey { cgroup_id, inode };
    // SAFETY: helper without pointer arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: the value is plain data copied out at once.
    if let Some(&last) = unsafe { RECENT_OPENS.get(&key) } {
        if now.wrapping_sub(last) < OPEN_REPORT_WINDOW_NS {
            if let Some(count) = COALESCED_OPENS.get_ptr_mut(0) {
                // SAFETY: per-CPU value, only this CPU writes it while the program runs.
                unsafe { *count += 1 };
            }
            return true;
        }
    }
    // A failed insert only means this open is reported and the next one too.
    let _ = RECENT_OPENS.insert(&key, &now, 0);
    false
}

#[inline(always)]
fn emit_file_open(file: *const u8, key: *const Key<PathGrantKey>, cgroup_id: u64, decision: Decision) {
    let mut entry = reserve!(FILE_EVENTS, FileOpenEvent, ProgramId::FileOpen);
    let event = entry.as_mut_ptr();
    // SAFETY: reserved, exclusively owned slot; every field written; the
    // probe reads fail safely. The path comes from the scratch key rather
    // than a second bpf_d_path, halving the cost of a monitored open.
    unsafe {
        (*event).header = header(EventKind::FileOpen, cgroup_id, decision);
        (*event).flags = bpf_probe_read_kernel(file.add(offsets().file_f_flags as usize) as *const u32).unwrap_or(0);
        (*event).reserved = 0;
        (*event).path[GRANT_PATH_LEN] = 0;
        let src = core::ptr::addr_of!((*key).data.path) as *const u8;
        if bpf_probe_read_kernel_buf(src, &mut (&mut (*event).path)[..GRANT_PATH_LEN]).is_err() {
            (*event).path[0] = 0;
        }
    }
    entry.submit(0);
}

/// The family, host-order port and IPv6 (or IPv4-mapped) address of a
/// `struct sockaddr`, or `None` for families other than IPv4/IPv6.
#[inline(always)]
fn inet_address(address: *const u8) -> Option<(u16, u16, [u8; 16])> {
    // SAFETY: probe reads fail safely; the hook's sockaddr is a kernel copy
    // of at least the family's size (the syscall checked addrlen).
    unsafe {
        let family = bpf_probe_read_kernel(address as *const u16).ok()?;
        let port = u16::from_be(bpf_probe_read_kernel(address.add(2) as *const u16).ok()?);
        let mut addr = [0u8; 16];
        match family {
            AF_INET => {
                addr[10] = 0xff;
                addr[11] = 0xff;
                bpf_probe_read_kernel_buf(address.add(4), &mut addr[12..]).ok()?;
            }
            AF_INET6 => bpf_probe_read_kernel_buf(address.add(8), &mut addr).ok()?,
            _ => return None,
        }
        Some((family, port, addr))
    }
}

/// `socket_connect(struct socket *sock, struct sockaddr *address, int
/// addrlen)`: reports IP connects and refuses those outside the grants.
/// Other families (the IPC's AF_UNIX) pass untouched.
#[lsm(hook = "socket_connect")]
pub fn socket_connect(ctx: LsmContext) -> i32 {
    let Some((cgroup_id, policy)) = scope() else { return 0 };
    // SAFETY: argument 1 of the hook is the address.
    let Some((family, port, addr)) = inet_address(unsafe { ctx.arg(1) }) else { return 0 };
    let granted = policy.rules & RULE_RESTRICT_CONNECT != 0 && {
        let key = Key::new(((8 + 16) * 8) as u32, NetGrantKey { cgroup_id: cgroup_id.to_ne_bytes(), addr });
        CONNECT_GRANTS.get(&key).is_some()
    };
    let decision = decide(&policy, RULE_RESTRICT_CONNECT, granted);
    emit_socket(EventKind::Connect, ProgramId::SocketConnect, cgroup_id, decision, family, port, addr);
    verdict(decision)
}

/// `socket_bind(struct socket *sock, struct sockaddr *address, int addrlen)`:
/// reports IP binds (listening agents and tools); binds are not judged.
#[lsm(hook = "socket_bind")]
pub fn socket_bind(ctx: LsmContext) -> i32 {
    let Some((cgroup_id, _)) = scope() else { return 0 };
    // SAFETY: argument 1 of the hook is the address.
    if let Some((family, port, addr)) = inet_address(unsafe { ctx.arg(1) }) {
        emit_socket(EventKind::Bind, ProgramId::SocketBind, cgroup_id, Decision::Allowed, family, port, addr);
    }
    0
}

#[inline(always)]
fn emit_socket(
    kind: EventKind,
    program: ProgramId,
    cgroup_id: u64,
    decision: Decision,
    family: u16,
    port: u16,
    addr: [u8; 16],
) {
    let mut entry = reserve!(NET_EVENTS, SocketEvent, program);
    let event = entry.as_mut_ptr();
    // SAFETY: reserved, exclusively owned slot; every field written.
    unsafe {
        (*event).header = header(kind, cgroup_id, decision);
        (*event).family = family;
        (*event).port = port;
        (*event).reserved = 0;
        (*event).addr = addr;
    }
    entry.submit(0);
}

/// `ptrace_access_check(struct task_struct *child, unsigned int mode)`.
#[lsm(hook = "ptrace_access_check")]
pub fn ptrace_access_check(ctx: LsmContext) -> i32 {
    let Some((cgroup_id, policy)) = scope() else { return 0 };
    // SAFETY: arguments 0 and 1 of the hook; the probe read fails safely.
    let (target_pid, mode) = unsafe {
        let child: *const u8 = ctx.arg(0);
        let mode: u32 = ctx.arg(1);
        (bpf_probe_read_kernel(child.add(offsets().task_tgid as usize) as *const u32).unwrap_or(0), mode)
    };
    privileged(
        EventKind::Ptrace,
        ProgramId::PtraceAccessCheck,
        cgroup_id,
        &policy,
        mode,
        target_pid,
        0,
        core::ptr::null(),
    )
}

/// `bpf(int cmd, union bpf_attr *attr, unsigned int size)`.
#[lsm(hook = "bpf")]
pub fn bpf_syscall(ctx: LsmContext) -> i32 {
    let Some((cgroup_id, policy)) = scope() else { return 0 };
    // SAFETY: argument 0 of the hook is the command.
    let cmd: u32 = unsafe { ctx.arg(0) };
    privileged(EventKind::Bpf, ProgramId::Bpf, cgroup_id, &policy, cmd, 0, 0, core::ptr::null())
}

/// `sb_mount(const char *dev_name, const struct path *path, const char *type,
/// unsigned long flags, void *data)`.
#[lsm(hook = "sb_mount")]
pub fn sb_mount(ctx: LsmContext) -> i32 {
    let Some((cgroup_id, policy)) = scope() else { return 0 };
    // SAFETY: arguments 0 and 3 of the hook.
    let (dev_name, flags) = unsafe { (ctx.arg::<*const u8>(0), ctx.arg::<u64>(3)) };
    privileged(EventKind::Mount, ProgramId::SbMount, cgroup_id, &policy, 0, 0, flags, dev_name)
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn privileged(
    kind: EventKind,
    program: ProgramId,
    cgroup_id: u64,
    policy: &CgroupPolicy,
    request: u32,
    target_pid: u32,
    flags: u64,
    detail: *const u8,
) -> i32 {
    let decision = decide(policy, RULE_DENY_PRIVILEGED, false);
    emit_privilege(kind, program, cgroup_id, decision, request, target_pid, flags, detail);
    verdict(decision)
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn emit_privilege(
    kind: EventKind,
    program: ProgramId,
    cgroup_id: u64,
    decision: Decision,
    request: u32,
    target_pid: u32,
    flags: u64,
    detail: *const u8,
) {
    let mut entry = reserve!(PRIVILEGE_EVENTS, PrivilegeEvent, program);
    let event = entry.as_mut_ptr();
    // SAFETY: reserved, exclusively owned slot; every field written; the
    // string probe read fails safely (a NULL source leaves it empty).
    unsafe {
        (*event).header = header(kind, cgroup_id, decision);
        (*event).request = request;
        (*event).target_pid = target_pid;
        (*event).flags = flags;
        (*event).detail[0] = 0;
        if !detail.is_null() {
            let _ = bpf_probe_read_kernel_str_bytes(detail, &mut (*event).detail);
        }
    }
    entry.submit(0);
}

/// `sys_enter(struct pt_regs *regs, long id)`: counts syscalls per monitored
/// cgroup. Counting in a per-CPU map avoids atomics on the hottest path,
/// which is also why it looks at the task's own cgroup only: a cgroup's
/// first second goes uncounted rather than every system call of the box
/// paying for the ancestor walk.
#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_enter(_ctx: RawTracePointContext) -> i32 {
    let Some((cgroup_id, _)) = own_scope() else { return 0 };
    match SYSCALL_COUNTS.get_ptr_mut(&cgroup_id) {
        // SAFETY: per-CPU value, only this CPU writes it while the program runs.
        Some(count) => unsafe { *count += 1 },
        None => {
            let _ = SYSCALL_COUNTS.insert(&cgroup_id, &1, 0);
        }
    }
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

/// The kernel refuses GPL-only helpers (probe_read_kernel, d_path) to
/// non-GPL programs.
#[link_section = "license"]
#[no_mangle]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";

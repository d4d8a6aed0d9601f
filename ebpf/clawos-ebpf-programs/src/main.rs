//! The ClawOS kernel-side monitor programs, linked into one object
//! (`clawos-monitor`) that userspace loads with aya.
#![no_std]
#![no_main]

use aya_ebpf::{
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_get_current_uid_gid, bpf_ktime_get_ns, bpf_probe_read_kernel_str_bytes,
    },
    macros::{map, tracepoint},
    maps::RingBuf,
    programs::TracePointContext,
    EbpfContext,
};
use clawos_ebpf_common::{EventHeader, EventKind, ExecEvent, EVENT_FORMAT_VERSION};

/// Exec events. Execs are rare next to syscalls: 256 KiB holds ~800 records,
/// seconds of a fork storm, while userspace drains it continuously.
#[map]
static EXEC_EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// Offset of `__data_loc char[] filename` in the sched_process_exec record
/// (after the 8-byte common trace header; see the tracepoint's `format` file).
const FILENAME_LOC_OFFSET: usize = 8;

#[tracepoint]
pub fn sched_process_exec(ctx: TracePointContext) -> u32 {
    let Some(mut entry) = EXEC_EVENTS.reserve::<ExecEvent>(0) else {
        return 0; // ring full: the loss is visible in the map's drop counter
    };
    let event = entry.as_mut_ptr();
    // SAFETY: `event` points at a reserved, exclusively owned ring buffer slot
    // of size_of::<ExecEvent>(); every field is written before submit.
    unsafe {
        (*event).header = header(EventKind::Exec);
        (*event).filename[0] = 0;
        if let Ok(loc) = ctx.read_at::<u32>(FILENAME_LOC_OFFSET) {
            let src = ctx.as_ptr().add((loc & 0xffff) as usize) as *const u8;
            let _ = bpf_probe_read_kernel_str_bytes(src, &mut (*event).filename);
        }
    }
    entry.submit(0);
    0
}

#[inline(always)]
fn header(kind: EventKind) -> EventHeader {
    let pid_tgid = bpf_get_current_pid_tgid();
    let uid_gid = bpf_get_current_uid_gid();
    EventHeader {
        version: EVENT_FORMAT_VERSION,
        kind: kind as u16,
        severity: 0,
        reserved: 0,
        // SAFETY: plain BPF helpers without pointer arguments.
        timestamp_ns: unsafe { bpf_ktime_get_ns() },
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        uid: uid_gid as u32,
        gid: (uid_gid >> 32) as u32,
        // SAFETY: as above.
        cgroup_id: unsafe { bpf_get_current_cgroup_id() },
        comm: bpf_get_current_comm().unwrap_or([0; 16]),
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

/// The kernel refuses GPL-only helpers (probe_read_kernel) to non-GPL programs.
#[link_section = "license"]
#[no_mangle]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";

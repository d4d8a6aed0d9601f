//! `clawos-syscall-probe PID NR`: has the running process PID issue system
//! call NR (all arguments zero) and reports how the process ended.
//!
//! The boot check of wasm-daemon's seccomp filter (tests/vm/checks/70-tools.sh,
//! specs/toolhost/seccomp.md) needs the live daemon, under the filter it
//! installed itself, to make a call its list does not hold. Nothing a tool or
//! a client can send makes it do that, so the probe does it from outside with
//! ptrace: it stops the main thread where it waits in a system call, points
//! it back at that `syscall` instruction with NR in `rax`, and lets it go.
//! The kernel runs the filters at the call's entry, so the daemon's
//! `KillProcess` applies exactly as it would to a flaw inside the daemon.
//!
//! x86_64 only (the image's architecture). Prints one line: `killed by
//! signal N`, `exited with N`, or `returned R (stops: ...)` when the call
//! was allowed (the process then goes on, its own interrupted call made
//! again), with the ptrace stops seen on the way.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(pid), Some(nr)) = (args.get(1).and_then(|a| a.parse::<libc::pid_t>().ok()), args.get(2).and_then(|a| a.parse::<u64>().ok())) else {
        eprintln!("usage: clawos-syscall-probe PID SYSCALL_NUMBER");
        return ExitCode::from(2);
    };
    match probe(pid, nr) {
        Ok(outcome) => {
            println!("{outcome}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("clawos-syscall-probe: {e}");
            ExitCode::FAILURE
        }
    }
}

fn check(what: &str, rc: libc::c_long) -> Result<libc::c_long, String> {
    if rc == -1 {
        Err(format!("{what}: {}", std::io::Error::last_os_error()))
    } else {
        Ok(rc)
    }
}

fn wait(pid: libc::pid_t) -> Result<libc::c_int, String> {
    let mut status = 0;
    // SAFETY: status is a valid out-pointer for the call's duration.
    check("waitpid", unsafe { libc::waitpid(pid, &mut status, libc::__WALL) } as libc::c_long)?;
    Ok(status)
}

fn probe(pid: libc::pid_t, nr: u64) -> Result<String, String> {
    let null = std::ptr::null_mut::<libc::c_void>();
    // Syscall stops report SIGTRAP | 0x80, told apart from a real SIGTRAP.
    let options = libc::PTRACE_O_TRACESYSGOOD as usize as *mut libc::c_void;
    // SAFETY: PTRACE_SEIZE takes the options as its data word, no pointer.
    check("PTRACE_SEIZE", unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, null, options) })?;
    // SAFETY: PTRACE_INTERRUPT takes no pointers.
    check("PTRACE_INTERRUPT", unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, pid, null, null) })?;
    let status = wait(pid)?;
    if !libc::WIFSTOPPED(status) {
        return Err(format!("the process did not stop (wait status {status:#x})"));
    }
    // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    get_regs(pid, &mut regs)?;
    // Stopped inside a call, rip is just past its two-byte `syscall` (0f 05).
    let at = regs.rip.wrapping_sub(2);
    // SAFETY: PTRACE_PEEKTEXT reads the tracee's memory; errors come back as -1 with errno.
    let word = unsafe { libc::ptrace(libc::PTRACE_PEEKTEXT, pid, at as *mut libc::c_void, null) };
    if regs.orig_rax as i64 == -1 || word & 0xffff != 0x050f {
        return Err(format!("the main thread is not waiting in a system call (rip {:#x}, orig_rax {})", regs.rip, regs.orig_rax as i64));
    }
    let saved = regs;
    // orig_rax -1: the interrupted call is not restarted over ours.
    regs.orig_rax = u64::MAX;
    regs.rax = nr;
    regs.rip = at;
    (regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9) = (0, 0, 0, 0, 0, 0);
    set_regs(pid, &mut regs)?;
    // Until the process ends or our call's exit stop: a signal meant for the
    // process is delivered on, other stops (another call's, an event) are
    // passed over; each is noted for the report.
    let (mut entered, mut signal, mut stops) = (false, 0, Vec::new());
    loop {
        // SAFETY: PTRACE_SYSCALL takes the signal to deliver as its data word, no pointer.
        check("PTRACE_SYSCALL", unsafe { libc::ptrace(libc::PTRACE_SYSCALL, pid, null, signal as usize as *mut libc::c_void) })?;
        signal = 0;
        let status = wait(pid)?;
        if libc::WIFSIGNALED(status) {
            return Ok(format!("killed by signal {}", libc::WTERMSIG(status)));
        }
        if libc::WIFEXITED(status) {
            return Ok(format!("exited with {}", libc::WEXITSTATUS(status)));
        }
        let stopped_by = libc::WSTOPSIG(status);
        if stopped_by != libc::SIGTRAP | 0x80 {
            stops.push(format!("signal {stopped_by}, event {}", status >> 16));
            if status >> 16 == 0 {
                signal = stopped_by;
            }
            continue;
        }
        get_regs(pid, &mut regs)?;
        stops.push(format!("call {} (rax {})", regs.orig_rax as i64, regs.rax as i64));
        if regs.orig_rax != nr || !entered {
            entered |= regs.orig_rax == nr;
            continue;
        }
        let returned = regs.rax as i64;
        // Allowed: the process goes on where it was stopped, its own call made again.
        regs = saved;
        (regs.rax, regs.rip) = (saved.orig_rax, at);
        set_regs(pid, &mut regs)?;
        // SAFETY: PTRACE_DETACH takes no pointers.
        check("PTRACE_DETACH", unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, null, null) })?;
        return Ok(format!("returned {returned} (stops: {})", stops.join(", ")));
    }
}

fn get_regs(pid: libc::pid_t, regs: &mut libc::user_regs_struct) -> Result<(), String> {
    // SAFETY: regs is a valid user_regs_struct for the kernel to write whole.
    check("PTRACE_GETREGS", unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, std::ptr::null_mut::<libc::c_void>(), regs as *mut _ as *mut libc::c_void) })
        .map(drop)
}

fn set_regs(pid: libc::pid_t, regs: &mut libc::user_regs_struct) -> Result<(), String> {
    // SAFETY: regs is a valid user_regs_struct for the kernel to read.
    check("PTRACE_SETREGS", unsafe { libc::ptrace(libc::PTRACE_SETREGS, pid, std::ptr::null_mut::<libc::c_void>(), regs as *mut _ as *mut libc::c_void) })
        .map(drop)
}

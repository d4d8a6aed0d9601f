//! The daemon's own seccomp filter (libseccomp), installed once start-up is
//! done: tools are compiled, the cgroups set up and the socket bound. From
//! then on the process may make only the system calls below; any other kills
//! the whole process (`SCMP_ACT_KILL_PROCESS`), which the kernel's audit log
//! reports in the journal with the syscall number (`type=1326 ... sig=31
//! syscall=N`) and systemd as `status=31/SYS` before restarting the unit.
//!
//! Why these calls: every entry of [`ALLOWED_SYSCALLS`] is used by something
//! the daemon keeps doing after start-up (its group names it); the list is
//! also the table in `specs/toolhost/seccomp.md`. Two calls get argument
//! rules instead of a plain allow:
//! - `clone` only with `CLONE_THREAD` (new threads for tokio's blocking pool
//!   and the tool calls); a new *process* (fork, posix_spawn) is denied, and
//!   so is `execve`: the daemon never runs programs.
//! - `clone3` fails with `ENOSYS`: its flags live in memory a filter cannot
//!   read, and glibc falls back to `clone` when it is missing.

use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};

/// System calls the running daemon may make, grouped by who needs them.
pub const ALLOWED_SYSCALLS: &[(&str, &[&str])] = &[
    (
        "memory (allocator, wasmtime's pooling allocator and copy-on-write images, Cranelift code)",
        &["brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "memfd_create", "ftruncate"],
    ),
    (
        "threads and synchronisation (tokio, tool-call threads, the epoch ticker)",
        &[
            "futex", "set_robust_list", "get_robust_list", "rseq", "sched_yield", "sched_getaffinity", "gettid",
            "getpid", "getppid", "exit", "exit_group", "prctl", "nanosleep", "clock_nanosleep", "restart_syscall",
        ],
    ),
    (
        "signals (wasmtime traps out-of-bounds accesses and stack overflow with SIGSEGV/SIGILL handlers on an alternate stack; SIGTERM shutdown)",
        &["rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "tgkill", "kill"],
    ),
    (
        "files (tool registry and cache, the agents' AgentFS databases with their WAL, cgroupfs, /proc/self for metrics, filesystem grants)",
        &[
            "openat", "close", "read", "write", "pread64", "pwrite64", "readv", "writev", "lseek", "fstat",
            "newfstatat", "statx", "fstatfs", "statfs", "fsync", "fdatasync", "fcntl", "flock", "fallocate", "unlinkat",
            "renameat", "renameat2", "mkdirat", "mkdir", "rmdir", "unlink", "rename", "readlink", "access", "getdents64", "readlinkat", "faccessat", "faccessat2", "fchmod", "chmod", "fchown", "getcwd",
            "ioctl", "dup", "dup3", "pipe2",
        ],
    ),
    (
        "event loop (tokio: epoll, eventfd wakeups, poll for name lookups)",
        &["epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd2", "poll", "ppoll"],
    ),
    (
        "sockets (IPC over abstract Unix sockets, sd_notify, tools' HTTP to granted hosts, DNS)",
        &[
            "socket", "connect", "accept4", "bind", "listen", "getsockname", "getpeername", "getsockopt",
            "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "shutdown", "socketpair",
        ],
    ),
    (
        "time, identity, randomness and limits",
        &[
            "clock_gettime", "clock_getres", "gettimeofday", "getrandom", "uname", "getuid", "geteuid", "getgid",
            "getegid", "getrusage", "prlimit64", "sysinfo", "sched_getparam", "sched_getscheduler",
        ],
    ),
];

/// Installs the filter on every thread of the process (TSYNC): the tokio
/// workers already exist when it is installed.
pub fn install() -> Result<usize, libseccomp::error::SeccompError> {
    let mut filter = ScmpFilterContext::new(ScmpAction::KillProcess)?;
    // Threads that exist already get the same filter, or loading fails.
    filter.set_ctl_tsync(true)?;
    let mut allowed = 0;
    for (_, names) in ALLOWED_SYSCALLS {
        for name in *names {
            filter.add_rule(ScmpAction::Allow, ScmpSyscall::from_name(name)?)?;
            allowed += 1;
        }
    }
    let clone_thread = libc::CLONE_THREAD as u64;
    filter.add_rule_conditional(
        ScmpAction::Allow,
        ScmpSyscall::from_name("clone")?,
        &[ScmpArgCompare::new(0, ScmpCompareOp::MaskedEqual(clone_thread), clone_thread)],
    )?;
    filter.add_rule(ScmpAction::Errno(libc::ENOSYS), ScmpSyscall::from_name("clone3")?)?;
    filter.load()?;
    Ok(allowed + 1)
}

/// How many seccomp filters the process's main thread runs under (the
/// kernel's `Seccomp_filters` in /proc/self/status, which the AppArmor
/// profile allows; /proc/thread-self it does not): systemd's from the unit,
/// one more once [`install`] ran, whichever thread ran it (TSYNC). The boot
/// check compares every thread of the live daemon with the count this logs
/// after the install.
pub fn filters_on_main_thread() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| line.strip_prefix("Seccomp_filters:")?.trim().parse().ok())
}

/// `clawos-wasm-daemon --check-seccomp`: shows on this kernel that the
/// filter kills. A child process installs [`install`]'s filter and makes
/// one call it does not allow (`ptrace`); the parent says how the child
/// ended: SIGSYS is success. The kernel's audit log has the kill
/// (`type=1326 ... pid=<child> ... sig=31 ... syscall=101`), as it would
/// have the daemon's (specs/toolhost/seccomp.md, "Checking the filter").
/// Called before the runtime starts any thread, so the fork is safe.
pub fn check() -> std::process::ExitCode {
    use std::process::ExitCode;
    // SAFETY: the process has one thread here (main, before the runtime).
    match unsafe { libc::fork() } {
        -1 => {
            eprintln!("fork: {}", std::io::Error::last_os_error());
            ExitCode::FAILURE
        }
        0 => {
            if let Err(error) = install() {
                eprintln!("installing the seccomp filter: {error}");
                // SAFETY: ends the child without running the parent's exit handlers.
                unsafe { libc::_exit(2) };
            }
            // SAFETY: PTRACE_TRACEME with null arguments touches no memory.
            unsafe {
                libc::ptrace(
                    libc::PTRACE_TRACEME,
                    0,
                    std::ptr::null_mut::<libc::c_void>(),
                    std::ptr::null_mut::<libc::c_void>(),
                )
            };
            // SAFETY: as above; reached only if the filter let ptrace through.
            unsafe { libc::_exit(1) }
        }
        child => {
            let mut status = 0;
            // SAFETY: `status` is a valid out-pointer for waitpid.
            if unsafe { libc::waitpid(child, &mut status, 0) } != child {
                eprintln!("waitpid: {}", std::io::Error::last_os_error());
                return ExitCode::FAILURE;
            }
            if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSYS {
                println!(
                    "the seccomp filter killed process {child} for ptrace (syscall {}) with SIGSYS",
                    libc::SYS_ptrace
                );
                ExitCode::SUCCESS
            } else {
                eprintln!(
                    "process {child} under the seccomp filter was not killed by SIGSYS (wait status {status:#x})"
                );
                ExitCode::FAILURE
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    /// Set in the re-executed test binary: which action to take under the filter.
    const CHILD_ACTION: &str = "CLAWOS_SECCOMP_TEST_ACTION";

    /// Runs this test binary again as a child that installs the filter and
    /// then does `action` (see `seccomp_child`); returns how it ended.
    fn run_child(action: &str) -> std::process::ExitStatus {
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "seccomp::tests::seccomp_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ACTION, action)
            .status()
            .unwrap()
    }

    /// Not a test on its own: the body of the child `run_child` starts.
    #[test]
    fn seccomp_child() {
        let Ok(action) = std::env::var(CHILD_ACTION) else { return };
        // A tokio runtime with workers first, like the daemon.
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let before = super::filters_on_main_thread().expect("Seccomp_filters in /proc/self/status");
        super::install().expect("installing the filter");
        match action.as_str() {
            "count" => {
                // One filter more on the main thread and on a worker that
                // existed before the install (TSYNC), as the daemon logs it.
                assert_eq!(super::filters_on_main_thread(), Some(before + 1));
                let worker = runtime.block_on(async {
                    tokio::spawn(async { std::fs::read_to_string("/proc/thread-self/status").unwrap() }).await.unwrap()
                });
                assert!(worker
                    .lines()
                    .any(|line| line.split_whitespace().eq(["Seccomp_filters:", &(before + 1).to_string()])));
            }
            "daemon-work" => {
                // What the daemon does after start-up: threads, files, sockets, time.
                runtime.block_on(async {
                    let handle = tokio::task::spawn_blocking(|| {
                        let dir = tempfile_dir();
                        std::fs::write(dir.join("f"), b"x").unwrap();
                        assert_eq!(std::fs::read(dir.join("f")).unwrap(), b"x");
                        std::fs::remove_dir_all(&dir).unwrap();
                        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                        std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
                        std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(1))).join().unwrap();
                    });
                    handle.await.unwrap();
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                });
            }
            "spawn" => {
                let _ = Command::new("/bin/true").status();
            }
            "ptrace" => {
                // SAFETY: PTRACE_TRACEME with null arguments touches no memory.
                unsafe {
                    libc::ptrace(
                        libc::PTRACE_TRACEME,
                        0,
                        std::ptr::null_mut::<libc::c_void>(),
                        std::ptr::null_mut::<libc::c_void>(),
                    )
                };
            }
            other => panic!("unknown action {other}"),
        }
        std::process::exit(0);
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("clawos-seccomp-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_daemon_work_runs_under_the_filter() {
        let status = run_child("daemon-work");
        assert!(status.success(), "the filtered child ended with {status:?}");
    }

    #[test]
    fn the_filter_is_counted_once_more_on_every_thread() {
        let status = run_child("count");
        assert!(status.success(), "the filtered child ended with {status:?}");
    }

    #[test]
    fn starting_a_program_kills_the_process() {
        assert_eq!(run_child("spawn").signal(), Some(libc::SIGSYS));
    }

    #[test]
    fn the_spec_lists_exactly_the_allowed_calls() {
        let spec = include_str!("../../../specs/toolhost/seccomp.md");
        let table = spec.split("## Allowed system calls").nth(1).unwrap().split("\n\n").nth(1).unwrap();
        let mut documented: Vec<&str> = table.split('`').skip(1).step_by(2).collect();
        let mut allowed: Vec<&str> =
            super::ALLOWED_SYSCALLS.iter().flat_map(|(_, names)| names.iter().copied()).collect();
        documented.sort_unstable();
        allowed.sort_unstable();
        assert_eq!(documented, allowed);
    }

    #[test]
    fn an_unlisted_syscall_kills_the_process() {
        assert_eq!(run_child("ptrace").signal(), Some(libc::SIGSYS));
    }
}

//! A workspace served by the real `clawos-agentfs-mount` binary in a child
//! process, mounted in a temporary directory.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long the child may take to mount or to exit after SIGTERM.
const DEADLINE: Duration = Duration::from_secs(20);

pub struct Mounted {
    child: Child,
    pub db: PathBuf,
    pub mountpoint: PathBuf,
    /// Holds the database and the mountpoint; deleted when the mount is dropped.
    _dir: tempfile::TempDir,
}

/// Why FUSE cannot be used here, if it cannot: the tests then fail under
/// `make test` or print a SKIPPED line and return (`clawos_test_require`).
fn fuse_unusable() -> Option<String> {
    if let Err(err) = OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Some(format!("/dev/fuse cannot be opened: {err}"));
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let fusermount = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("fusermount3").exists()));
    if !root && !fusermount {
        return Some("not root and no fusermount3 to mount with".to_owned());
    }
    None
}

/// Whether `path` is a mountpoint in this process's mount namespace.
pub fn is_mounted(path: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("read mountinfo");
    let wanted = path.to_str().expect("utf-8 temp path");
    mounts.lines().any(|line| line.split(' ').nth(4) == Some(wanted))
}

impl Mounted {
    /// Mounts a fresh workspace, over `base` if given; `None` (after
    /// `clawos_test_require::missing`) when this machine cannot mount FUSE.
    pub fn start(test: &str, base: Option<&Path>) -> Option<Mounted> {
        Mounted::start_with(test, base, false)
    }

    /// [`Mounted::start`] for several users: `--allow-other`, and the
    /// temporary directory open to everyone so they can reach the mount.
    pub fn start_shared(test: &str) -> Option<Mounted> {
        Mounted::start_with(test, None, true)
    }

    fn start_with(test: &str, base: Option<&Path>, shared: bool) -> Option<Mounted> {
        if let Some(reason) = fuse_unusable() {
            clawos_test_require::missing(test, &reason);
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let dir_path = dir.path().canonicalize().expect("canonical temp dir");
        let db = dir_path.join("workspace.db");
        let mountpoint = dir_path.join("mnt");
        std::fs::create_dir(&mountpoint).expect("mountpoint");
        let mut command = Command::new(env!("CARGO_BIN_EXE_clawos-agentfs-mount"));
        command.arg(&db).arg(&mountpoint).stdout(Stdio::null()).stderr(Stdio::piped());
        if shared {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir_path, std::fs::Permissions::from_mode(0o755)).expect("chmod temp dir");
            command.arg("--allow-other");
        }
        if let Some(base) = base {
            command.arg("--base").arg(base);
        }
        let mut child = command.spawn().expect("spawn clawos-agentfs-mount");
        let started = Instant::now();
        while !is_mounted(&mountpoint) {
            if let Some(status) = child.try_wait().expect("poll child") {
                let output = child.wait_with_output().expect("child stderr");
                panic!("mount exited with {status}: {}", String::from_utf8_lossy(&output.stderr));
            }
            assert!(started.elapsed() < DEADLINE, "not mounted after {DEADLINE:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Mounted { child, db, mountpoint, _dir: dir })
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.mountpoint.join(relative)
    }

    /// Sends SIGTERM to the mount process.
    pub fn terminate(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits pid_t");
        // SAFETY: kill has no memory preconditions; the pid is our own child,
        // not yet waited for, so it cannot have been reused.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Kills the mount process outright (SIGKILL: no unmount, no last commit).
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the mount");
        self.child.wait().expect("reap the mount");
    }

    /// Waits for the mount process to exit and returns its status; an
    /// unsuccessful exit panics with what the process wrote to stderr.
    pub fn wait(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("poll child") {
                if !status.success() {
                    let mut stderr = String::new();
                    if let Some(mut pipe) = self.child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                    }
                    panic!("mount process exited with {status}: {stderr}");
                }
                return status;
            }
            assert!(started.elapsed() < DEADLINE, "mount process still running {DEADLINE:?} after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERMs the mount, requires a clean exit and unmount, and runs the
    /// consistency checker on the database it leaves behind.
    pub fn stop(&mut self) -> PathBuf {
        self.terminate();
        let status = self.wait();
        assert!(status.success(), "mount process exited with {status}");
        assert!(!is_mounted(&self.mountpoint), "still mounted after SIGTERM");
        assert_clean(&self.db);
        self.db.clone()
    }
}

/// Panics with the checker's report unless the database is consistent.
pub fn assert_clean(db: &Path) {
    let report = agentfs::check::check_database(db).expect("checker runs");
    assert!(report.is_clean(), "{report}");
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // A failed test must not leave a mount behind in the temp dir.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if is_mounted(&self.mountpoint) {
            let target = CString::new(self.mountpoint.as_os_str().as_bytes()).expect("no NUL in path");
            // SAFETY: `target` is a NUL-terminated path that outlives the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

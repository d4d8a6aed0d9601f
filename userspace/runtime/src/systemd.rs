//! systemd integration: socket activation, readiness and the watchdog.
//! Every function is a no-op when not started by systemd.

use std::os::fd::FromRawFd;
use std::time::Duration;

use sd_notify::NotifyState;

/// The listening socket systemd passed (`LISTEN_FDS`, fd 3), if any.
pub fn activated_listener() -> std::io::Result<Option<std::os::unix::net::UnixListener>> {
    let mut fds = sd_notify::listen_fds()?;
    let Some(fd) = fds.next() else {
        return Ok(None);
    };
    if fds.len() > 0 {
        tracing::warn!(extra = fds.len(), "systemd passed more than one socket; using the first");
    }
    // SAFETY: LISTEN_PID matched our PID, so systemd handed this fd to this
    // process for its exclusive use, and nothing else in the process takes
    // ownership of the LISTEN_FDS range.
    let listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) };
    // Children must not believe the sockets are theirs.
    for variable in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"] {
        // SAFETY: called during start-up before the async runtime or any other thread exists.
        unsafe { std::env::remove_var(variable) };
    }
    listener.set_nonblocking(true)?;
    Ok(Some(listener))
}

/// `READY=1` with a status line.
pub fn notify_ready(status: &str) {
    notify(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// `WATCHDOG=1`: the service is alive.
pub fn notify_watchdog() {
    notify(&[NotifyState::Watchdog]);
}

/// `STOPPING=1`.
pub fn notify_stopping() {
    notify(&[NotifyState::Stopping]);
}

/// The watchdog timeout systemd set for us (`WatchdogSec=`), if any.
pub fn watchdog_timeout() -> Option<Duration> {
    sd_notify::watchdog_enabled()
}

fn notify(states: &[NotifyState]) {
    if let Err(error) = sd_notify::notify(states) {
        tracing::warn!(%error, "sd_notify failed");
    }
}

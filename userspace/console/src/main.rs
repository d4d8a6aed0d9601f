//! `clawos-console`: the operator's web console (specs/console/README.md).
//!
//! Why a daemon of its own and not a page served by a component: it speaks
//! HTTP to a browser, the one part of the box that parses what a person's
//! browser sends, so it runs as its own user with nothing but a socket, the
//! logins' directory and its grant on the bus (`console` in ipc-acl.toml);
//! a flaw in it reaches no component's files or keys.
//!
//! Started by clawos-console.socket at the first connection through the
//! operator's tunnel, not at boot. A crash costs the open pages their
//! sessions (they live in memory): the operator runs `clawctl console`
//! again. Nothing of the box's state is lost, as none is kept here.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use clawos_console::{app, auth, Console};
use tracing::{error, info};

/// The web console, on the socket systemd passes (or `--socket`).
#[derive(Parser)]
#[command(version)]
struct Options {
    /// Listen here when systemd passed no socket (a run by hand).
    #[arg(long, default_value = "/run/clawos-console/console.sock")]
    socket: PathBuf,
    /// Where `clawctl console` leaves the login links.
    #[arg(long, default_value = auth::LOGINS_DIR)]
    logins: PathBuf,
}

/// `IMAGE_VERSION` of os-release, the version the overview shows.
fn image_version() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| Some(line.strip_prefix("IMAGE_VERSION=")?.trim_matches('"').to_owned()))
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

fn box_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "clawos".to_owned(), |name| name.trim().to_owned())
}

async fn listen(
    options: &Options,
    activated: Option<std::os::unix::net::UnixListener>,
) -> Result<tokio::net::UnixListener, String> {
    match activated {
        Some(passed) => {
            tokio::net::UnixListener::from_std(passed).map_err(|e| format!("the socket systemd passed: {e}"))
        }
        None => {
            let _ = std::fs::remove_file(&options.socket);
            tokio::net::UnixListener::bind(&options.socket)
                .map_err(|e| format!("binding {}: {e}", options.socket.display()))
        }
    }
}

/// Tells systemd's watchdog it is alive, at half its timeout.
async fn watchdog() {
    let Some(timeout) = clawos_runtime::systemd::watchdog_timeout() else { return };
    let mut tick = tokio::time::interval(timeout / 2);
    loop {
        tick.tick().await;
        clawos_runtime::systemd::notify_watchdog();
    }
}

fn main() -> ExitCode {
    let options = Options::parse();
    clawos_runtime::logging::init("console");
    // Before any other thread exists (it clears LISTEN_* from the environment).
    let activated = match clawos_runtime::systemd::activated_listener() {
        Ok(activated) => activated,
        Err(failure) => {
            error!(%failure, "the socket systemd passed");
            return ExitCode::FAILURE;
        }
    };
    // One thread: a console serves one operator's few pages at a time.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(failure) => {
            error!(%failure, "starting the runtime");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let listener = match listen(&options, activated).await {
            Ok(listener) => listener,
            Err(failure) => {
                error!(%failure, "cannot listen");
                return ExitCode::FAILURE;
            }
        };
        let console = Arc::new(Console {
            tokens: auth::Tokens::new(&options.logins),
            turns: Default::default(),
            box_name: box_name(),
            version: image_version(),
        });
        tokio::spawn(watchdog());
        clawos_runtime::systemd::notify_ready("serving the console");
        info!(version = console.version, "serving the console");
        let stop = async {
            if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                term.recv().await;
            }
            clawos_runtime::systemd::notify_stopping();
        };
        match axum::serve(listener, app(console)).with_graceful_shutdown(stop).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => {
                error!(%failure, "serving");
                ExitCode::FAILURE
            }
        }
    })
}

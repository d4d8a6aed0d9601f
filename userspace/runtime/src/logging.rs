//! Logging: tracing to the journal under systemd, to stderr otherwise.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Filter used when `RUST_LOG` is unset.
const DEFAULT_FILTER: &str = "info";
const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// Installs the global subscriber. Under systemd (`JOURNAL_STREAM` set and
/// the journal socket present) events go to journald with structured
/// fields; otherwise they go to stderr. Calling it twice is harmless.
pub fn init(component: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let under_journal = std::env::var_os("JOURNAL_STREAM").is_some() && std::path::Path::new(JOURNAL_SOCKET).exists();
    if under_journal {
        match tracing_journald::layer() {
            Ok(journald) => {
                let journald = journald.with_syslog_identifier(format!("clawos-{component}"));
                let _ = tracing_subscriber::registry().with(filter).with(journald).try_init();
                return;
            }
            Err(error) => eprintln!("clawos-{component}: journald unavailable ({error}); logging to stderr"),
        }
    }
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .try_init();
}

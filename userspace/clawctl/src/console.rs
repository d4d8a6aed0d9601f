//! `clawctl console [--port N] [--json]`: a login link for the web console
//! and the `ssh -L` command that reaches it (specs/console/README.md,
//! "Logging in").
//!
//! The link is made here, by the operator on the box, and left in the
//! console's logins directory (clawos_console::auth): whoever can run
//! clawctl as an operator can open the console, and nobody else.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use clawos_console::auth::{issue_login, LOGINS_DIR, LOGIN_TTL};
use serde::Serialize;

/// The console's socket, which the tunnel forwards to.
const SOCKET: &str = "/run/clawos-console/console.sock";

#[derive(Args)]
pub struct ConsoleArgs {
    /// The port on your machine the tunnel listens on (the link names it).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Shown {
    /// The command that opens the tunnel, run on the operator's machine.
    ssh: String,
    /// The one-time login link, through the tunnel.
    url: String,
    expires_in_s: u64,
}

/// How this box is reached over SSH: the address and port of this SSH
/// login's server side (`SSH_CONNECTION`), else (a login at the box's own
/// console) its host name.
fn ssh_target(connection: Option<&str>, user: &str, host: &str) -> String {
    let server = connection.map(|value| value.split_whitespace().collect::<Vec<_>>());
    match server.as_deref() {
        Some([_, _, address, "22"]) => format!("{user}@{address}"),
        Some([_, _, address, port]) => format!("-p {port} {user}@{address}"),
        _ => format!("{user}@{host}"),
    }
}

pub async fn run(args: ConsoleArgs) -> anyhow::Result<ExitCode> {
    let token = issue_login(Path::new(LOGINS_DIR))
        .with_context(|| format!("cannot leave a login link in {LOGINS_DIR} (is clawctl run as an operator?)"))?;
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map_or_else(|| "root".to_owned(), |user| user.name);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "clawos".to_owned(), |name| name.trim().to_owned());
    let target = ssh_target(std::env::var("SSH_CONNECTION").ok().as_deref(), &user, &host);
    let shown = Shown {
        ssh: format!("ssh -N -L {}:{SOCKET} {target}", args.port),
        url: format!("http://localhost:{}/login?token={token}", args.port),
        expires_in_s: LOGIN_TTL.as_secs(),
    };
    if args.json {
        println!("{}", crate::shown::json(&shown)?);
    } else {
        println!("On your machine, open the tunnel (it stays open until Ctrl-C):\n\n  {}\n", shown.ssh);
        println!(
            "then open this link in a browser there, once, within {} minutes:\n\n  {}",
            shown.expires_in_s / 60,
            shown.url
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::ssh_target;

    #[test]
    fn the_tunnel_goes_to_the_address_this_login_came_in_on() {
        assert_eq!(ssh_target(Some("10.0.0.5 51234 192.168.1.20 22"), "root", "box"), "root@192.168.1.20");
        assert_eq!(ssh_target(Some("127.0.0.1 40000 127.0.0.1 2222"), "root", "box"), "-p 2222 root@127.0.0.1");
        assert_eq!(ssh_target(None, "root", "box"), "root@box");
        assert_eq!(ssh_target(Some("garbage"), "root", "box"), "root@box");
    }
}

//! `clawos-agentfs-mount <db> <mountpoint> [--base <dir-or-db>] [--allow-other] [--commit-interval-ms N]`:
//! serves a workspace through FUSE until unmounted or sent SIGTERM/SIGINT.
//! `clawctl fs mount` does the same through the library; this binary is
//! for systemd units and for the tests, which need a process to signal.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agentfs_fuse::{mount_with, MountOptions};

const USAGE: &str =
    "usage: clawos-agentfs-mount <db> <mountpoint> [--base <dir-or-db>] [--allow-other] [--commit-interval-ms N]";

fn parse(mut args: impl Iterator<Item = String>) -> Result<(PathBuf, PathBuf, MountOptions), String> {
    let mut positional = Vec::new();
    let mut options = MountOptions::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--base" => options.base = Some(args.next().ok_or("--base needs a path")?.into()),
            "--allow-other" => options.allow_other = true,
            "--commit-interval-ms" => {
                let millis = args.next().and_then(|n| n.parse().ok()).ok_or("--commit-interval-ms needs a number")?;
                options.commit.interval = Duration::from_millis(millis);
            }
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            _ => positional.push(PathBuf::from(arg)),
        }
    }
    match <[PathBuf; 2]>::try_from(positional) {
        Ok([db, mountpoint]) => Ok((db, mountpoint, options)),
        Err(_) => Err("expected a database and a mountpoint".to_owned()),
    }
}

fn main() -> ExitCode {
    let (db, mountpoint, options) = match parse(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(problem) => {
            eprintln!("{problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match mount_with(&db, &mountpoint, &options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("clawos-agentfs-mount: {err}");
            ExitCode::FAILURE
        }
    }
}

//! `clawos-mcp-launch`: starts one local MCP server in a transient systemd
//! service of its own (specs/mcp/README.md, "Where local servers run"), for
//! one connection of agent-loop to `clawos-mcp-launch.socket`.
//!
//! Why a program of its own, running as root: only root may ask systemd for
//! a service with a dynamic user, and agent-loop, which knows the agents'
//! servers, runs unprivileged and must not choose how a server is confined.
//! So agent-loop says what to run and this program decides how: every
//! property of the unit is fixed in `mcp_launch::Request::systemd_run_args`.
//! systemd starts one instance per connection (`Accept=yes`); it reads the
//! request, answers, hands the connection to the server as its standard
//! input and output (`systemd-run --pipe`), and exits when agent-loop
//! closes the connection or the server ends. The server's unit is bound to
//! this instance's unit (`BindsTo=`), so it is stopped, its whole cgroup
//! with it, when this exits: no server outlives its connection.
//!
//! What a crash costs: the one server's connection (the server is stopped
//! with it; agent-loop starts it again after its backoff).
//!
//! The same program, run with `--secret-env` inside a server's unit as
//! that unit's user, is the step before a server with secret variables:
//! it reads their line from the connection and becomes the server
//! (`mcp_launch::SECRET_ENV_FLAG`).

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, Stdio};

use mcp_launch::{Reply, Request, CLIENT_USER, MAX_REQUEST_BYTES, SECRET_ENV_FLAG};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(SECRET_ENV_FLAG) {
        return secret_env(&args[1..]);
    }
    // systemd gives the instance's own unit name (`%n`) and the connection
    // as standard input.
    let Some(launcher_unit) = args.first() else {
        eprintln!("usage: clawos-mcp-launch <its own unit> (started by clawos-mcp-launch.socket)");
        return ExitCode::FAILURE;
    };
    let connection = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => UnixStream::from(fd),
        Err(e) => {
            eprintln!("standard input: {e}");
            return ExitCode::FAILURE;
        }
    };
    match start(&connection, launcher_unit) {
        Ok((unit, server)) => {
            eprintln!("{unit}: started");
            watch(&connection, server);
            eprintln!("{unit}: connection ended");
            ExitCode::SUCCESS
        }
        Err(reason) => {
            eprintln!("refused: {reason}");
            answer(&connection, &Reply::Refused { reason });
            ExitCode::FAILURE
        }
    }
}

/// Checks the peer and its request, and starts the server's unit; the
/// unit's name and systemd-run, which lives as long as the server.
fn start(connection: &UnixStream, launcher_unit: &str) -> Result<(String, Child), String> {
    let peer = getsockopt(connection, PeerCredentials).map_err(|e| format!("the peer's credentials: {e}"))?;
    let client = nix::unistd::User::from_name(CLIENT_USER)
        .map_err(|e| format!("user {CLIENT_USER}: {e}"))?
        .ok_or_else(|| format!("no user {CLIENT_USER} on this box"))?;
    if peer.uid() != client.uid.as_raw() {
        return Err(format!("uid {} is not {CLIENT_USER}: only agent-loop starts MCP servers", peer.uid()));
    }
    let request: Request =
        serde_json::from_slice(&read_line(connection)?).map_err(|e| format!("the request is not one: {e}"))?;
    request.check()?;
    let program = &request.command[0];
    let executable =
        std::fs::metadata(program).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0);
    if !executable {
        return Err(format!("command: {program:?} is not an executable file on this box"));
    }
    let unit = request.unit();
    // One server per (agent, server): one still stopping from an earlier
    // connection is waited for (an error here is "no such unit").
    let _ = Command::new("systemctl").args(["stop", "--quiet", &unit]).stderr(Stdio::null()).status();
    answer(connection, &Reply::Started { unit: unit.clone() });
    let io = |fd: std::io::Result<OwnedFd>| fd.map(Stdio::from).map_err(|e| format!("the connection: {e}"));
    let server = Command::new("systemd-run")
        .args(request.systemd_run_args(launcher_unit))
        .stdin(io(connection.as_fd().try_clone_to_owned())?)
        .stdout(io(connection.as_fd().try_clone_to_owned())?)
        .spawn()
        .map_err(|e| format!("systemd-run: {e}"))?;
    Ok((unit, server))
}

/// `--secret-env NAME,NAME -- COMMAND...`, in the server's unit: the line
/// of secret variables from standard input (the connection), then COMMAND
/// in place of this process with them in its environment. An error names
/// a variable, never a value; the server then never starts, and agent-loop
/// sees the connection close.
fn secret_env(args: &[String]) -> ExitCode {
    let [names, separator, command @ ..] = args else { return usage_secret_env() };
    if separator != "--" || command.is_empty() {
        return usage_secret_env();
    }
    let names: Vec<&str> = names.split(',').collect();
    // A raw read of the connection, not a buffered standard input: the
    // bytes after the line are the server's.
    let input = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => std::fs::File::from(fd),
        Err(e) => {
            eprintln!("standard input: {e}");
            return ExitCode::FAILURE;
        }
    };
    let values = match read_line(&input).and_then(|line| mcp_launch::parse_secret_env(&line, &names)) {
        Ok(values) => values,
        Err(reason) => {
            eprintln!("secret variables: {reason}");
            return ExitCode::FAILURE;
        }
    };
    drop(input);
    let error = Command::new(&command[0]).args(&command[1..]).envs(values).exec();
    eprintln!("{}: {error}", command[0]);
    ExitCode::FAILURE
}

fn usage_secret_env() -> ExitCode {
    eprintln!("usage: clawos-mcp-launch {SECRET_ENV_FLAG} NAME[,NAME...] -- COMMAND [ARG...]");
    ExitCode::FAILURE
}

/// One line (the request, or the secret variables), read a byte at a time
/// so that nothing after it (the server's first message) is taken.
fn read_line(mut input: impl Read) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    let mut byte = [0u8];
    loop {
        match input.read(&mut byte) {
            Ok(0) => return Err("the connection closed before the request ended".into()),
            Ok(_) if byte[0] == b'\n' => return Ok(line),
            Ok(_) if line.len() == MAX_REQUEST_BYTES => {
                return Err(format!("a request is at most {MAX_REQUEST_BYTES} bytes"))
            }
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the request: {e}")),
        }
    }
}

fn answer(mut connection: &UnixStream, reply: &Reply) {
    let mut line = serde_json::to_vec(reply).unwrap_or_default();
    line.push(b'\n');
    if let Err(e) = connection.write_all(&line) {
        eprintln!("answering: {e}");
    }
}

/// Waits until agent-loop closes its end of the connection (the peer's
/// hang-up, seen without reading what the server has yet to read) or the
/// server ends; either way this exits and systemd stops the server's unit.
fn watch(connection: &UnixStream, mut server: Child) {
    loop {
        // POLLRDHUP (not in nix): the peer shut down its side.
        let mut fds = [PollFd::new(connection.as_fd(), PollFlags::from_bits_retain(nix::libc::POLLRDHUP))];
        match poll(&mut fds, PollTimeout::from(1000u16)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => {}
            Ok(_) => return,
            Err(e) => {
                eprintln!("waiting on the connection: {e}");
                return;
            }
        }
        if !matches!(server.try_wait(), Ok(None)) {
            return;
        }
    }
}

//! `clawos-scripted-provider --script FILE [--listen ADDR] [--requests-log FILE] [--events-log FILE]`:
//! serves a script (see the library) until killed. Prints
//! `listening on http://ADDR` on stdout once it accepts connections, so a
//! boot check can start it in the background and read the port.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clawos_scripted_provider::{Script, Server};

/// Serves a scripted provider (see the library) on loopback until killed.
#[derive(Debug, clap::Parser)]
#[command(name = "clawos-scripted-provider")]
struct Args {
    /// The script: the replies, in the order they are served.
    #[arg(long, value_name = "FILE")]
    script: PathBuf,
    /// The address and port to listen on (port 0: any free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where each request is logged as a JSON line.
    #[arg(long, value_name = "FILE")]
    requests_log: Option<PathBuf>,
    /// Where each streamed event's departure time is logged as a JSON line.
    #[arg(long, value_name = "FILE")]
    events_log: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let script = match Script::from_file(&args.script) {
        Ok(script) => script,
        Err(e) => {
            eprintln!("clawos-scripted-provider: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("clawos-scripted-provider: a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let server =
            match Server::start_on(script, args.listen, args.requests_log.as_deref(), args.events_log.as_deref()).await
            {
                Ok(server) => server,
                Err(e) => {
                    eprintln!("clawos-scripted-provider: listening on {}: {e}", args.listen);
                    return ExitCode::FAILURE;
                }
            };
        let mut stdout = std::io::stdout().lock();
        if writeln!(stdout, "listening on {}", server.base_url()).and_then(|()| stdout.flush()).is_err() {
            return ExitCode::FAILURE;
        }
        drop(stdout);
        server.run_forever().await;
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn args(list: &[&str]) -> Result<Args, String> {
        Args::try_parse_from(std::iter::once("clawos-scripted-provider").chain(list.iter().copied()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn arguments() {
        let parsed = args(&["--script", "s.json", "--listen", "127.0.0.1:8080", "--requests-log", "r.jsonl"]).unwrap();
        assert_eq!(parsed.script, PathBuf::from("s.json"));
        assert_eq!(parsed.listen, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!(parsed.requests_log, Some(PathBuf::from("r.jsonl")));
        assert_eq!(args(&["--script", "s"]).unwrap().listen.port(), 0);
        assert!(args(&[]).unwrap_err().contains("--script"));
        assert!(args(&["--script"]).unwrap_err().contains("value is required"));
        assert!(args(&["--script", "s", "--listen", "nope"]).unwrap_err().contains("nope"));
        assert!(args(&["--bogus"]).unwrap_err().contains("--bogus"));
    }
}

//! `clawos-scripted-provider --script FILE [--listen ADDR] [--requests-log FILE]`:
//! serves a script (see the library) until killed. Prints
//! `listening on http://ADDR` on stdout once it accepts connections, so a
//! boot check can start it in the background and read the port.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clawos_scripted_provider::{Script, Server};

const USAGE: &str = "usage: clawos-scripted-provider --script FILE [--listen ADDR (default 127.0.0.1:0)] [--requests-log FILE]";

#[derive(Debug)]
struct Args {
    script: PathBuf,
    listen: SocketAddr,
    requests_log: Option<PathBuf>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut script, mut listen, mut requests_log) = (None, SocketAddr::from(([127, 0, 0, 1], 0)), None);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--script" => script = Some(PathBuf::from(value("--script")?)),
            "--listen" => {
                let text = value("--listen")?;
                listen = text.parse().map_err(|_| format!("--listen {text}: not an address and port"))?;
            }
            "--requests-log" => requests_log = Some(PathBuf::from(value("--requests-log")?)),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Args { script: script.ok_or("--script is required")?, listen, requests_log })
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("clawos-scripted-provider: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
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
        let server = match Server::start_on(script, args.listen, args.requests_log.as_deref()).await {
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
    use super::*;

    fn args(list: &[&str]) -> Result<Args, String> {
        parse(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn arguments() {
        let parsed = args(&["--script", "s.json", "--listen", "127.0.0.1:8080", "--requests-log", "r.jsonl"]).unwrap();
        assert_eq!(parsed.script, PathBuf::from("s.json"));
        assert_eq!(parsed.listen, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!(parsed.requests_log, Some(PathBuf::from("r.jsonl")));
        assert_eq!(args(&["--script", "s"]).unwrap().listen.port(), 0);
        assert!(args(&[]).unwrap_err().contains("--script"));
        assert!(args(&["--script"]).unwrap_err().contains("needs a value"));
        assert!(args(&["--script", "s", "--listen", "nope"]).unwrap_err().contains("nope"));
        assert!(args(&["--bogus"]).unwrap_err().contains("--bogus"));
    }
}

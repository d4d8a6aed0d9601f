//! `clawos-telegram-fake --token TOKEN [--listen ADDR]`: serves the fake
//! Bot API (see the library) until killed. Prints `listening on
//! http://ADDR` once it accepts connections.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

/// Serves a fake Telegram Bot API on loopback until killed.
#[derive(Debug, clap::Parser)]
#[command(name = "clawos-telegram-fake")]
struct Args {
    /// The bot's token: a request under another is 401, as Telegram's.
    #[arg(long)]
    token: String,
    /// The address and port to listen on (port 0: any free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let fake = match clawos_telegram_fake::Fake::start_on(args.listen, &args.token).await {
        Ok(fake) => fake,
        Err(e) => {
            eprintln!("clawos-telegram-fake: listening on {}: {e}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "listening on {}", fake.api_base()).and_then(|()| stdout.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    drop(stdout);
    fake.run_forever().await;
    ExitCode::SUCCESS
}

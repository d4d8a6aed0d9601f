//! `clawctl secret set|get|list|rm|history`: the vault's secrets, through
//! the security agent (specs/vault/README.md, "IPC methods").
//!
//! Values never come from the command line (argv is world-readable in
//! /proc): `set` reads them from a no-echo prompt or from stdin. `get`
//! writes the raw value to stdout and refuses to when stdout is a terminal
//! unless `--reveal` is given, so a value is not left on a screen or in a
//! terminal's scrollback by accident.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;

use anyhow::{bail, Context};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use clap::{Args, Subcommand};
use clawos_api::security_agent::{self, SecretGet, SecretInfo, SecretName, SecretSet};
use clawos_api::NoParams;
use clawos_ipc::{ComponentId, IpcClient};
use serde::Serialize;
use zeroize::Zeroizing;

#[derive(Subcommand)]
pub enum SecretCommand {
    /// Store a new version of a secret; the value is read from a prompt or stdin.
    Set(SetArgs),
    /// Write a secret's value to stdout (refused on a terminal without --reveal).
    Get(GetArgs),
    /// List secrets: IDs, versions, dates (never values).
    List(JsonArgs),
    /// Delete a secret and all its versions.
    Rm(IdArgs),
    /// Every version of a secret: numbers and dates (never values).
    History(HistoryArgs),
}

#[derive(Args)]
pub struct SetArgs {
    /// Secret ID: a-z, 0-9, '-', '_' (e.g. provider-openai, tool-github-token).
    secret_id: String,
    /// Keep stdin byte for byte; by default one trailing newline is dropped,
    /// so `echo value | clawctl secret set id` stores `value`.
    #[arg(long)]
    raw: bool,
}

#[derive(Args)]
pub struct GetArgs {
    /// Secret ID.
    secret_id: String,
    /// A given version instead of the latest.
    #[arg(long)]
    version: Option<u32>,
    /// Print the value even though stdout is a terminal.
    #[arg(long)]
    reveal: bool,
}

#[derive(Args)]
pub struct IdArgs {
    /// Secret ID.
    secret_id: String,
}

#[derive(Args)]
pub struct HistoryArgs {
    /// Secret ID.
    secret_id: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct JsonArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Connects to the security agent, which hosts the vault.
pub async fn connect_vault() -> anyhow::Result<IpcClient> {
    let (client, _events) = crate::ipc::connect(ComponentId::SecurityAgent)
        .await
        .context("cannot reach the security agent, which hosts the vault")?;
    Ok(client)
}

/// Reads a credential the operator types: from the terminal without echo
/// when stdin is one (asking twice if `confirm`), else the first line of
/// stdin. Never from argv.
pub fn read_credential(prompt: &str, confirm: bool) -> anyhow::Result<Zeroizing<String>> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = Zeroizing::new(String::new());
        stdin.read_line(&mut line).context("cannot read stdin")?;
        let trimmed = Zeroizing::new(line.trim_end_matches(['\n', '\r']).to_owned());
        if trimmed.is_empty() {
            bail!("nothing on stdin");
        }
        return Ok(trimmed);
    }
    let first = prompt_without_echo(prompt)?;
    if confirm && *prompt_without_echo("Repeat: ")? != *first {
        bail!("the two entries differ");
    }
    if first.is_empty() {
        bail!("nothing entered");
    }
    Ok(first)
}

/// Prints `prompt` to stderr and reads one line from the terminal on stdin
/// with echo off, restoring the terminal even when reading fails.
fn prompt_without_echo(prompt: &str) -> anyhow::Result<Zeroizing<String>> {
    use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
    let stdin = std::io::stdin();
    let saved = tcgetattr(&stdin).context("cannot read the terminal settings")?;
    let mut silent = saved.clone();
    silent.local_flags.remove(LocalFlags::ECHO);
    silent.local_flags.insert(LocalFlags::ECHONL);
    eprint!("{prompt}");
    std::io::stderr().flush()?;
    tcsetattr(&stdin, SetArg::TCSAFLUSH, &silent).context("cannot turn off the terminal echo")?;
    let mut line = Zeroizing::new(String::new());
    let read = stdin.read_line(&mut line);
    tcsetattr(&stdin, SetArg::TCSAFLUSH, &saved).context("cannot restore the terminal echo")?;
    read.context("cannot read the terminal")?;
    Ok(Zeroizing::new(line.trim_end_matches(['\n', '\r']).to_owned()))
}

/// The value for `secret set`: typed twice without echo on a terminal, else all of stdin.
fn read_value(secret_id: &str, raw: bool) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    let stdin = std::io::stdin();
    let value = if stdin.is_terminal() {
        let typed = read_credential(&format!("Value for {secret_id}: "), true)?;
        Zeroizing::new(typed.as_bytes().to_vec())
    } else {
        let mut bytes = Zeroizing::new(Vec::new());
        stdin.lock().read_to_end(&mut bytes).context("cannot read stdin")?;
        if !raw {
            drop_one_trailing_newline(&mut bytes);
        }
        bytes
    };
    if value.is_empty() {
        bail!("refusing to store an empty value");
    }
    Ok(value)
}

fn drop_one_trailing_newline(bytes: &mut Vec<u8>) {
    if bytes.ends_with(b"\r\n") {
        bytes.truncate(bytes.len() - 2);
    } else if bytes.ends_with(b"\n") {
        bytes.pop();
    }
}

pub async fn run(command: SecretCommand) -> anyhow::Result<ExitCode> {
    match command {
        SecretCommand::Set(args) => {
            let value = read_value(&args.secret_id, args.raw)?;
            let params = SecretSet { secret_id: args.secret_id, value_base64: Zeroizing::new(BASE64.encode(&*value)) };
            let client = connect_vault().await?;
            let stored = security_agent::Client::new(&client).secret_set(&params).await?;
            eprintln!("stored {} version {}", stored.secret_id, stored.version);
        }
        SecretCommand::Get(args) => {
            let stdout = std::io::stdout();
            let on_terminal = stdout.is_terminal();
            if on_terminal && !args.reveal {
                bail!("refusing to print a secret to a terminal; pipe or redirect stdout, or pass --reveal");
            }
            let client = connect_vault().await?;
            let params = SecretGet { secret_id: args.secret_id, version: args.version };
            let answer = security_agent::Client::new(&client).secret_get(&params).await?;
            let value =
                Zeroizing::new(BASE64.decode(answer.value_base64.as_bytes()).context("the value is not base64")?);
            let mut out = stdout.lock();
            out.write_all(&value)?;
            if on_terminal {
                // Only for the eye: piped values stay byte-exact.
                out.write_all(b"\n")?;
            }
            out.flush()?;
        }
        SecretCommand::List(args) => {
            let client = connect_vault().await?;
            let list = security_agent::Client::new(&client).secret_list(&NoParams {}).await?;
            print_versions(&list.secrets, args.json, &list)?;
        }
        SecretCommand::Rm(args) => {
            let client = connect_vault().await?;
            security_agent::Client::new(&client)
                .secret_remove(&SecretName { secret_id: args.secret_id.clone() })
                .await?;
            eprintln!("removed {} and all its versions", args.secret_id);
        }
        SecretCommand::History(args) => {
            let client = connect_vault().await?;
            let history =
                security_agent::Client::new(&client).secret_history(&SecretName { secret_id: args.secret_id }).await?;
            print_versions(&history.versions, args.json, &history)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_versions(rows: &[SecretInfo], as_json: bool, whole: &impl Serialize) -> anyhow::Result<()> {
    if as_json {
        println!("{}", crate::shown::json(whole)?);
        return Ok(());
    }
    println!("{:<32} {:>7} {:>4} {:<20} {:<20}", "SECRET", "VERSION", "KEY", "CREATED", "UPDATED");
    for row in rows {
        println!(
            "{:<32} {:>7} {:>4} {:<20} {:<20}",
            row.secret_id,
            row.version,
            format!("g{}", row.key_generation),
            row.created_at,
            row.updated_at,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_trailing_newline_is_dropped() {
        let cases: [(&[u8], &[u8]); 4] =
            [(b"key\n", b"key"), (b"key\r\n", b"key"), (b"key\n\n", b"key\n"), (b"key", b"key")];
        for (input, expected) in cases {
            let mut bytes = input.to_vec();
            drop_one_trailing_newline(&mut bytes);
            assert_eq!(bytes, expected, "{input:?}");
        }
    }
}

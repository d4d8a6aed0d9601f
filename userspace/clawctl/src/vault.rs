//! `clawctl vault init|status|unlock|recover|reseal|rotate`: the vault
//! hosted by the security agent (specs/vault/README.md).
//!
//! The recovery key and passphrases are read from a no-echo prompt or
//! stdin, never from argv (visible to every user in /proc).

use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, Subcommand};
use clawos_ipc::Object;
use serde_json::{json, Value};

use crate::secret::{call, connect_vault, read_credential};

#[derive(Subcommand)]
pub enum VaultCommand {
    /// Create the vault, sealed by the TPM (or protected by a passphrase),
    /// and show its recovery key once.
    Init(InitArgs),
    /// Protection in force (TPM or passphrase) and whether the vault is open.
    Status(StatusArgs),
    /// Open a passphrase-protected vault after a reboot (passphrase from a prompt or stdin).
    Unlock,
    /// Open the vault with the recovery key when the TPM refuses (key from a prompt or stdin).
    Recover,
    /// Seal the master key to the PCRs of this boot (after `recover`).
    Reseal,
    /// Replace the master key and re-encrypt every secret; the old key is kept 30 days.
    Rotate,
}

#[derive(Args)]
pub struct InitArgs {
    /// No TPM: protect the master key with an operator passphrase
    /// (prompted twice, or one line of stdin) held in the kernel keyring.
    #[arg(long)]
    passphrase: bool,
}

#[derive(Args)]
pub struct StatusArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn run(command: VaultCommand) -> anyhow::Result<ExitCode> {
    match command {
        VaultCommand::Init(args) => {
            let params = if args.passphrase {
                let passphrase = read_credential("New vault passphrase: ", true)?;
                json!({ "protection": "passphrase", "passphrase": *passphrase })
            } else {
                json!({ "protection": "tpm" })
            };
            let client = connect_vault().await?;
            let mut result = call(&client, "vault_init", params).await?;
            let Some(Value::String(recovery_key)) = result.remove("recovery_key") else {
                bail!("the security agent answered without a recovery key");
            };
            let recovery_key = zeroize::Zeroizing::new(recovery_key);
            eprintln!("Vault initialized: {}.", describe_protection(&result));
            eprintln!();
            eprintln!("RECOVERY KEY - shown this once, stored nowhere on this machine:");
            eprintln!();
            println!("{}", recovery_key.as_str());
            eprintln!();
            eprintln!("Write it down and keep it off this machine. It is the only way back");
            eprintln!("to the secrets when the TPM refuses to unseal (a changed kernel,");
            eprintln!("command line or boot path) or the passphrase is lost:");
            eprintln!("`clawctl vault recover`, then `clawctl vault reseal`.");
        }
        VaultCommand::Status(args) => {
            let client = connect_vault().await?;
            let status = call(&client, "vault_status", json!({})).await?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print_status(&status);
            }
        }
        VaultCommand::Unlock => {
            let passphrase = read_credential("Vault passphrase: ", false)?;
            let client = connect_vault().await?;
            let status = call(&client, "vault_unlock", json!({ "passphrase": *passphrase })).await?;
            print_status(&status);
        }
        VaultCommand::Recover => {
            let recovery_key = read_credential("Recovery key: ", false)?;
            let client = connect_vault().await?;
            let status = call(&client, "vault_recover", json!({ "recovery_key": *recovery_key })).await?;
            print_status(&status);
            if status["protection"] == "tpm2" {
                eprintln!("Run `clawctl vault reseal` so the next boot unseals by itself.");
            }
        }
        VaultCommand::Reseal => {
            let client = connect_vault().await?;
            let status = call(&client, "vault_reseal", json!({})).await?;
            eprintln!("Resealed to the current boot state.");
            print_status(&status);
        }
        VaultCommand::Rotate => {
            let client = connect_vault().await?;
            let status = call(&client, "vault_rotate", json!({})).await?;
            eprintln!("Rotated: every secret is now under master-key generation {}.", status["generation"]);
            print_status(&status);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn describe_protection(status: &Object) -> &str {
    status.get("protection_description").and_then(Value::as_str).unwrap_or("no protection reported")
}

fn print_status(status: &Object) {
    let text = |name: &str| status.get(name).and_then(Value::as_str).unwrap_or("-").to_owned();
    println!("vault:      {}", text("vault_dir"));
    println!("protection: {}", if status["initialized"] == true { describe_protection(status) } else { "-" });
    println!("state:      {}", text("state_description"));
    if let Some(generation) = status.get("generation").and_then(Value::as_u64) {
        println!("generation: {generation}");
    }
    println!("secrets:    {}", status.get("secret_count").and_then(Value::as_u64).unwrap_or(0));
    if let Some(reason) = status.get("degraded_reason").and_then(Value::as_str) {
        println!("degraded:   {reason}");
    }
}

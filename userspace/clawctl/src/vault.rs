//! `clawctl vault init|status|unlock|recover|reseal|rotate|check`: the vault
//! hosted by the security agent (specs/vault/README.md).
//!
//! The recovery key and passphrases are read from a no-echo prompt or
//! stdin, never from argv (visible to every user in /proc).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use clawos_api::security_agent::{self, Protection, VaultInit, VaultRecover, VaultStatus, VaultUnlock};
use clawos_api::NoParams;

use crate::secret::{connect_vault, read_credential};

#[derive(Subcommand)]
pub enum VaultCommand {
    /// Create the vault, sealed by the TPM (or protected by a passphrase),
    /// and show its recovery key once.
    Init(InitArgs),
    /// Protection in force (TPM or passphrase) and whether the vault is open.
    Status(OutputArgs),
    /// Open a passphrase-protected vault after a reboot (passphrase from a prompt or stdin).
    Unlock,
    /// Open the vault with the recovery key when the TPM refuses (key from a prompt or stdin).
    Recover,
    /// Seal the master key to the PCRs of this boot (after `recover`).
    Reseal,
    /// Replace the master key and re-encrypt every secret; the old key is kept 30 days.
    Rotate,
    /// Decrypt every version of every secret and verify the audit chain (exit 1 on a problem); prints no value.
    Check(OutputArgs),
}

#[derive(Args)]
pub struct InitArgs {
    /// No TPM: protect the master key with an operator passphrase
    /// (prompted twice, or one line of stdin) held in the kernel keyring.
    #[arg(long)]
    passphrase: bool,
}

#[derive(Args)]
pub struct OutputArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn run(command: VaultCommand) -> anyhow::Result<ExitCode> {
    let client = connect_vault();
    match command {
        VaultCommand::Init(args) => {
            let params = if args.passphrase {
                VaultInit {
                    protection: Protection::Passphrase,
                    passphrase: Some(read_credential("New vault passphrase: ", true)?),
                }
            } else {
                VaultInit { protection: Protection::Tpm, passphrase: None }
            };
            let client = client.await?;
            let initialized = security_agent::Client::new(&client).vault_init(&params).await?;
            eprintln!("Vault initialized: {}.", describe_protection(&initialized.status));
            eprintln!();
            eprintln!("RECOVERY KEY - shown this once, stored nowhere on this machine:");
            eprintln!();
            println!("{}", initialized.recovery_key.as_str());
            eprintln!();
            eprintln!("Write it down and keep it off this machine. It is the only way back");
            eprintln!("to the secrets when the TPM refuses to unseal (a changed kernel,");
            eprintln!("command line or boot path) or the passphrase is lost:");
            eprintln!("`clawctl vault recover`, then `clawctl vault reseal`.");
        }
        VaultCommand::Status(args) => {
            let client = client.await?;
            let status = security_agent::Client::new(&client).vault_status(&NoParams {}).await?;
            if args.json {
                println!("{}", crate::shown::json(&status)?);
            } else {
                print_status(&status);
            }
        }
        VaultCommand::Unlock => {
            let passphrase = read_credential("Vault passphrase: ", false)?;
            let client = client.await?;
            print_status(&security_agent::Client::new(&client).vault_unlock(&VaultUnlock { passphrase }).await?);
        }
        VaultCommand::Recover => {
            let recovery_key = read_credential("Recovery key: ", false)?;
            let client = client.await?;
            let status = security_agent::Client::new(&client).vault_recover(&VaultRecover { recovery_key }).await?;
            print_status(&status);
            if status.protection.as_deref() == Some("tpm2") {
                eprintln!("Run `clawctl vault reseal` so the next boot unseals by itself.");
            }
        }
        VaultCommand::Reseal => {
            let client = client.await?;
            let status = security_agent::Client::new(&client).vault_reseal(&NoParams {}).await?;
            eprintln!("Resealed to the current boot state.");
            print_status(&status);
        }
        VaultCommand::Rotate => {
            let client = client.await?;
            let status = security_agent::Client::new(&client).vault_rotate(&NoParams {}).await?;
            eprintln!("Rotated: every secret is now under master-key generation {}.", status.generation.unwrap_or(0));
            print_status(&status);
        }
        VaultCommand::Check(args) => {
            let client = client.await?;
            let report = security_agent::Client::new(&client).vault_check(&NoParams {}).await?;
            if args.json {
                println!("{}", crate::shown::json(&report)?);
            } else {
                println!(
                    "{} secrets, {} versions decrypted and verified; {} audit entries verified",
                    report.secrets, report.versions, report.audit_entries
                );
                for problem in &report.problems {
                    println!("problem: {problem}");
                }
            }
            if !report.problems.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn describe_protection(status: &VaultStatus) -> &str {
    status.protection_description.as_deref().unwrap_or("no protection reported")
}

fn print_status(status: &VaultStatus) {
    println!("vault:      {}", status.vault_dir);
    println!("protection: {}", if status.initialized { describe_protection(status) } else { "-" });
    println!("state:      {}", status.state_description);
    if let Some(generation) = status.generation {
        println!("generation: {generation}");
    }
    println!("secrets:    {}", status.secret_count);
    if let Some(reason) = &status.degraded_reason {
        println!("degraded:   {reason}");
    }
}

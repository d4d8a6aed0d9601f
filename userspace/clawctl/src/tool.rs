//! `clawctl tool`: the WASM tools the wasm-daemon runs: list, inspect,
//! install (hash verified, capabilities shown before anything is sent), run
//! through `execute_tool`, and remove.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use base64::Engine as _;
use clap::{Args, Subcommand};
use clawfs::names::{self, SemVer};
use clawos_api::wasm_daemon::{self, ExecuteTool, ToolInstall, ToolRef};
use clawos_api::NoParams;
use clawos_ipc::{ComponentId, IpcClient};
use serde_json::{json, Value};

use crate::shown::Line;
use sha2::{Digest, Sha256};

/// The WIT world every tool targets (specs/wit/tool.wit).
const TOOL_WIT_INTERFACE: &str = "clawos:tool/tool@0.1.0";
/// Largest component `install` sends: base64 of it must fit one IPC message (4 MiB).
const MAX_WASM_BYTES: u64 = 3 << 20;
#[derive(Subcommand)]
pub enum ToolCommand {
    /// The tools the daemon can run: the image's and the installed ones.
    List(ListArgs),
    /// One tool's definition, grants, and the parameters schema it describes.
    Inspect(NameArgs),
    /// Install a tool component into /clawfs/tools after showing what it asks for.
    Install(InstallArgs),
    /// Run a tool through execute_tool for an agent (audited in its workspace).
    Run(RunArgs),
    /// Remove an installed tool.
    Rm(NameArgs),
}

#[derive(Args)]
pub struct ListArgs {
    /// Print the daemon's JSON answer.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct NameArgs {
    tool: String,
}

#[derive(Args)]
pub struct InstallArgs {
    /// The component, named `<tool>-v<X.Y.Z>.wasm`.
    wasm: PathBuf,
    /// A definition (specs/toolhost/README.md, "Registry"; the image ships `<tool>.json` next
    /// to each install-only tool). Its `wasm_hash`, if present, must match.
    #[arg(long)]
    definition: Option<PathBuf>,
    /// A capability to grant on top of the definition's, e.g.
    /// `network:outbound:api.example.com` (repeatable).
    #[arg(long = "grant")]
    grants: Vec<String>,
    #[arg(long)]
    memory_limit_mb: Option<u32>,
    #[arg(long)]
    cpu_quota_percent: Option<u32>,
    #[arg(long)]
    timeout_seconds: Option<u32>,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long)]
    yes: bool,
}

#[derive(Args)]
pub struct RunArgs {
    tool: String,
    /// The tool's arguments as a JSON value (default `{}`).
    arguments: Option<String>,
    /// The agent the call is made for; its workspace records the call.
    #[arg(long)]
    agent: String,
    #[arg(long)]
    session: Option<String>,
    /// Caps the tool's own timeout (default: the method's 10 s).
    #[arg(long)]
    timeout_ms: Option<u64>,
}

async fn connect() -> anyhow::Result<IpcClient> {
    let (client, _events) = crate::ipc::connect(ComponentId::WasmDaemon).await.context("cannot reach wasm-daemon")?;
    Ok(client)
}

pub async fn run(command: ToolCommand) -> anyhow::Result<ExitCode> {
    let client = connect().await?;
    let daemon = wasm_daemon::Client::new(&client);
    match command {
        ToolCommand::List(args) => {
            let list = daemon.tool_list(&NoParams {}).await?;
            if args.json {
                println!("{}", crate::shown::json_line(&list)?);
                return Ok(ExitCode::SUCCESS);
            }
            println!("{:<16} {:<8} {:<10} CAPABILITIES", "TOOL", "VERSION", "SOURCE");
            for tool in list.tools {
                let shown = if tool.capabilities.is_empty() { "-".to_owned() } else { tool.capabilities.join(" ") };
                let source = serde_json::to_value(tool.source)?;
                println!("{:<16} {:<8} {:<10} {}", tool.tool_name, tool.version, str_of(&source), Line(&shown));
            }
        }
        ToolCommand::Inspect(args) => {
            let details = daemon.tool_inspect(&ToolRef { tool_name: args.tool }).await?;
            println!("{}", crate::shown::json(&details)?);
        }
        ToolCommand::Install(args) => return install(daemon, args).await,
        ToolCommand::Run(args) => {
            let arguments: Value = match &args.arguments {
                Some(text) => serde_json::from_str(text).context("the tool's arguments are not valid JSON")?,
                None => json!({}),
            };
            let call = ExecuteTool {
                tool_name: args.tool,
                arguments,
                agent: args.agent,
                session_id: args.session,
                idempotency_key: None,
            };
            let daemon = match args.timeout_ms {
                Some(ms) => daemon.with_timeout(Duration::from_millis(ms)),
                None => daemon,
            };
            let answer = daemon.execute_tool(&call).await?;
            println!("{}", crate::shown::json(&answer.result)?);
        }
        ToolCommand::Rm(args) => {
            let removed = daemon.tool_remove(&ToolRef { tool_name: args.tool }).await?;
            println!("removed {} {}", removed.tool_name, removed.version);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn str_of(value: &Value) -> &str {
    value.as_str().unwrap_or("?")
}

/// `<tool>-v<X.Y.Z>.wasm` to (tool, version).
fn name_and_version(wasm: &Path) -> anyhow::Result<(String, SemVer)> {
    let file = wasm.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let (tool, version) =
        names::parse_tool_binary_file(file).context("the component's file name (ClawFS naming rules)")?;
    Ok((tool.to_owned(), version))
}

/// The definition to send: the given one (or none), completed from the file
/// name, the file's hash and the flags. Refuses a definition whose pinned
/// hash or name disagrees with the file.
fn definition_for(args: &InstallArgs, wasm: &[u8]) -> anyhow::Result<Value> {
    let mut definition = match &args.definition {
        Some(path) => {
            serde_json::from_slice(&std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)
                .with_context(|| format!("{} is not JSON", path.display()))?
        }
        None => json!({}),
    };
    let fields = definition.as_object_mut().context("the definition must be a JSON object")?;
    let (tool, version) = name_and_version(&args.wasm)?;
    let (file, version) = (names::tool_binary_file(&tool, version), version.to_string());
    let hash = format!("sha256:{}", fsutil::hex(&Sha256::digest(wasm)));
    for (field, value) in [("tool_id", &tool), ("version", &version), ("wasm_hash", &hash)] {
        match fields.get(field).and_then(Value::as_str) {
            Some(given) if given != value => {
                bail!("the definition's {field} is {given}, but {} has {value}", args.wasm.display())
            }
            _ => {
                fields.insert(field.into(), value.as_str().into());
            }
        }
    }
    fields.insert("wasm_path".into(), file.into());
    fields.entry("wit_interface").or_insert(TOOL_WIT_INTERFACE.into());
    let capabilities = fields.entry("capabilities").or_insert(json!([]));
    let list = capabilities.as_array_mut().context("capabilities must be a list")?;
    for grant in &args.grants {
        if !list.iter().any(|c| c == grant.as_str()) {
            list.push(grant.as_str().into());
        }
    }
    for (field, value, default) in [
        ("memory_limit_mb", args.memory_limit_mb, 64),
        ("cpu_quota_percent", args.cpu_quota_percent, 10),
        ("timeout_seconds", args.timeout_seconds, 30),
    ] {
        match value {
            Some(value) => {
                fields.insert(field.into(), value.into());
            }
            None => {
                fields.entry(field).or_insert(default.into());
            }
        }
    }
    Ok(definition)
}

async fn install(daemon: wasm_daemon::Client<'_>, args: InstallArgs) -> anyhow::Result<ExitCode> {
    let size = std::fs::metadata(&args.wasm).with_context(|| format!("reading {}", args.wasm.display()))?.len();
    if size > MAX_WASM_BYTES {
        bail!("{} is {size} bytes; at most {MAX_WASM_BYTES} can be installed over IPC", args.wasm.display());
    }
    let wasm = std::fs::read(&args.wasm).with_context(|| format!("reading {}", args.wasm.display()))?;
    let definition = definition_for(&args, &wasm)?;
    println!("tool        {} {}", Line(str_of(&definition["tool_id"])), Line(str_of(&definition["version"])));
    println!("wasm_hash   {}", Line(str_of(&definition["wasm_hash"])));
    println!(
        "limits      {} MiB memory, {}% of a CPU, {} s",
        definition["memory_limit_mb"], definition["cpu_quota_percent"], definition["timeout_seconds"]
    );
    println!("capabilities (everything this tool will be able to reach):");
    let capabilities = definition["capabilities"].as_array().cloned().unwrap_or_default();
    if capabilities.is_empty() {
        println!("  none (logging only)");
    }
    for capability in &capabilities {
        println!("  {}", Line(str_of(capability)));
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!("not installed: confirm with --yes when stdin is not a terminal");
        }
        print!("install? [y/N] ");
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("not installed");
            return Ok(ExitCode::FAILURE);
        }
    }
    let params = ToolInstall { definition, wasm_base64: base64::engine::general_purpose::STANDARD.encode(&wasm) };
    let installed = daemon.tool_install(&params).await?;
    println!("installed {} {}", installed.tool_name, installed.version);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(wasm: &str, definition: Option<PathBuf>, grants: &[&str]) -> InstallArgs {
        InstallArgs {
            wasm: wasm.into(),
            definition,
            grants: grants.iter().map(|g| g.to_string()).collect(),
            memory_limit_mb: None,
            cpu_quota_percent: Some(5),
            timeout_seconds: None,
            yes: true,
        }
    }

    #[test]
    fn definitions_are_completed_from_the_file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let template = dir.path().join("web-fetch.json");
        std::fs::write(&template, r#"{"description": "d", "memory_limit_mb": 32, "timeout_seconds": 9}"#).unwrap();
        let definition =
            definition_for(&args("/x/web-fetch-v1.2.3.wasm", Some(template), &["network:outbound:h"]), b"bytes")
                .unwrap();
        assert_eq!(definition["tool_id"], "web-fetch");
        assert_eq!(definition["version"], "1.2.3");
        assert_eq!(definition["wasm_hash"], format!("sha256:{:x}", Sha256::digest(b"bytes")));
        assert_eq!(definition["capabilities"], json!(["network:outbound:h"]));
        assert_eq!(
            (
                definition["memory_limit_mb"].as_u64(),
                definition["cpu_quota_percent"].as_u64(),
                definition["timeout_seconds"].as_u64()
            ),
            (Some(32), Some(5), Some(9))
        );
    }

    #[test]
    fn a_pinned_hash_or_name_that_disagrees_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let pinned = dir.path().join("pinned.json");
        std::fs::write(
            &pinned,
            r#"{"wasm_hash": "sha256:0000000000000000000000000000000000000000000000000000000000000000"}"#,
        )
        .unwrap();
        let error = definition_for(&args("/x/web-fetch-v1.2.3.wasm", Some(pinned), &[]), b"bytes").unwrap_err();
        assert!(error.to_string().contains("wasm_hash"), "{error}");
        let named = dir.path().join("named.json");
        std::fs::write(&named, r#"{"tool_id": "other"}"#).unwrap();
        assert!(definition_for(&args("/x/web-fetch-v1.2.3.wasm", Some(named), &[]), b"bytes").is_err());
        assert!(definition_for(&args("/x/web-fetch.wasm", None, &[]), b"bytes").is_err());
    }
}

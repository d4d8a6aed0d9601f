//! `clawctl`: the ClawOS operator CLI, run over SSH.
//!
//! Owns: the command line. It talks to components over IPC as the
//! `operator` principal (it must run as an operator UID, root by default,
//! see `/etc/clawos/ipc-acl.toml`), except `fs check` and `fs mount`,
//! which open workspace databases directly. One module per subcommand.

mod agent;
mod approvals;
mod console;
mod events;
mod extension;
mod fs;
mod goal;
mod identity;
mod ipc;
mod mcp;
mod memory;
mod policy;
mod schedule;
mod secret;
mod shown;
mod status;
mod tool;
mod update;
mod vault;
mod workspace;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "clawctl", version, about = "Operate a ClawOS appliance")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Talk with an agent: interactive, or one turn with -m.
    Chat(agent::ChatArgs),
    /// Agents: create, list, show, pause, resume, rm.
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    /// An agent's sessions: list, show.
    #[command(subcommand)]
    Session(agent::SessionCommand),
    /// Health, version, uptime, last heartbeat and restarts of every component.
    Status(status::StatusArgs),
    /// Talk to a component over IPC.
    #[command(subcommand)]
    Ipc(ipc::IpcCommand),
    /// Follow events as the router fans them out.
    Events(events::EventsArgs),
    /// The secrets vault: init, status, unlock, recover, reseal, rotate.
    #[command(subcommand)]
    Vault(vault::VaultCommand),
    /// Secrets in the vault: set, get, list, rm, history.
    #[command(subcommand)]
    Secret(secret::SecretCommand),
    /// The eBPF enforcement policy: show, reload.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// The agents' actions waiting for your approval: list, approve, deny.
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// ClawFS user workspaces: create, list, delete.
    #[command(subcommand)]
    Workspace(workspace::WorkspaceCommand),
    /// An agent's memory (store, recall, forget, ...) and a workspace's
    /// memory index (index, search).
    #[command(subcommand)]
    Memory(memory::MemoryCommand),
    /// Agents' identity files: show, record a task, backups, restore.
    #[command(subcommand)]
    Identity(identity::IdentityCommand),
    /// WASM tools: list, inspect, install, run, rm.
    #[command(subcommand)]
    Tool(tool::ToolCommand),
    /// Files under /clawfs (read, write, ls, rm) and AgentFS databases (check, mount).
    #[command(subcommand)]
    Fs(fs::FsCommand),
    /// Hybrid search of a workspace's memory (`memory search`).
    Search(memory::SearchArgs),
    /// A/B updates of the box: status, check, apply, rollback (and the
    /// boot's health gate).
    #[command(subcommand)]
    Update(update::UpdateCommand),
    /// The agents' jobs: list, show, run, pause, resume, add, rm.
    #[command(subcommand)]
    Schedule(schedule::ScheduleCommand),
    /// Notifications raised by jobs, heartbeats and agents (--read ID marks one read).
    Notifications(schedule::NotificationsArgs),
    /// An agent's goals: list, show, log.
    #[command(subcommand)]
    Goal(goal::GoalCommand),
    /// An agent's MCP servers as its turns get them: list, status, tools, restart.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// The web console: a one-time login link and the `ssh -L` command to open it.
    Console(console::ConsoleArgs),
    /// System extensions merged over /usr (Node.js, Python): install, list, remove.
    #[command(subcommand)]
    Extension(extension::ExtensionCommand),
}

fn main() -> ExitCode {
    // A reader that goes away early (`clawctl ... | grep -q`, `| head`)
    // ends clawctl as it ends any Unix filter, by SIGPIPE, not with a
    // panic from println! on EPIPE (Rust ignores SIGPIPE by default).
    // SAFETY: before any other thread exists; the default action has no
    // handler to run.
    let _ =
        unsafe { nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl) };
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("clawctl: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Chat(args) => agent::chat(args).await,
            Command::Agent(command) => agent::run(command).await,
            Command::Session(command) => agent::session(command).await,
            Command::Status(args) => status::run(args).await,
            Command::Ipc(command) => ipc::run(command).await,
            Command::Events(args) => events::run(args).await,
            Command::Vault(command) => vault::run(command).await,
            Command::Secret(command) => secret::run(command).await,
            Command::Workspace(command) => workspace::run(command).await,
            Command::Memory(command) => memory::run(command).await,
            Command::Identity(command) => identity::run(command).await,
            Command::Policy(command) => policy::run(command).await,
            Command::Approvals(command) => approvals::run(command).await,
            Command::Tool(command) => tool::run(command).await,
            // check and mount block (a mount serves until unmounted); nothing else runs here.
            Command::Fs(command) => fs::run(command).await,
            Command::Search(args) => memory::search(args).await,
            Command::Update(command) => update::run(command).await,
            Command::Schedule(command) => schedule::run(command).await,
            Command::Notifications(args) => schedule::notifications(args).await,
            Command::Goal(command) => goal::run(command).await,
            Command::Mcp(command) => mcp::run(command).await,
            Command::Extension(command) => extension::run(command).await,
            Command::Console(args) => console::run(args).await,
        }
    });
    match outcome {
        Ok(code) => code,
        Err(error) => {
            // Errors quote what components, providers and tools said.
            eprintln!("clawctl: {}", shown::Line(&format!("{error:#}")));
            ExitCode::FAILURE
        }
    }
}

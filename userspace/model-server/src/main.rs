//! `clawos-model-server`: the in-box language model, so a fresh box chats
//! with no network and no key.
//!
//! A box's agents think with a language model (`specs/agent/README.md`). The
//! remote ones need an account, a key in the vault and the network; a box
//! just flashed has none of these, so it carries one model of its own:
//! SmolLM2-135M-Instruct, 94 MB quantized, run on the CPU with candle. It
//! chats; it does not plan or call tools reliably (`native_tools = false`),
//! which is what remote models are configured for.
//!
//! It is a process and a unit of its own rather than a library inside
//! agent-loop because the model is the part of the box that eats memory
//! and CPU and parses whatever text reaches it: its own user, its own
//! memory limit, no network at all, a low CPU weight, and a crash that
//! takes nothing else with it. It speaks OpenAI's Chat Completions (the
//! subset in `specs/agent/local-model.md`) over HTTP on a Unix socket, so
//! agent-loop reaches it with the same provider code as any
//! OpenAI-compatible server, and an operator with `curl --unix-socket`.
//! It is no IPC component: it has no IPC identity, ACL or heartbeat; of
//! clawos-runtime it uses only the socket systemd passes
//! (`clawos-model.socket` starts it at the first connection, so the boot
//! pays nothing for it).
//!
//! Owns: loading the model (at the first request, not at start, so boot
//! time does not pay for it), the tokenizer and ChatML prompt, sampling,
//! streaming, one answer at a time with a bounded queue, cancelling an
//! answer whose client went away, and the socket's mode (0660: the unit
//! gives it the group clawos-model-clients, agent-loop's).
//!
//! Must not own: which model an agent uses, retries and fallbacks, tool
//! calls parsed from text, tokens counted against an agent's limits (all
//! agent-loop's); any file besides the model, which it only reads, and its
//! cache of system turns' states (`prefix.rs`), which it writes.
//!
//! A crash costs the answer in progress: its stream ends without `[DONE]`,
//! which agent-loop reports as an interrupted answer; systemd restarts the
//! server within a second (Restart=on-failure) and the next request loads
//! the model again (about a second). Nothing but the cache of states is
//! stored, and a state cut by the crash is read as a miss: nothing is lost.

use std::io::IsTerminal;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::ExitCode;

use model_server::server::Server;
use model_server::{DEFAULT_SOCKET, IMAGE_MODEL_DIR};
use tracing::{error, info};
use tracing_subscriber::EnvFilter;

/// The socket's mode: its owner and group (the unit's Group=) may connect.
const SOCKET_MODE: u32 = 0o660;

/// Serves the in-box language model as OpenAI-compatible Chat Completions
/// on a Unix socket (specs/agent/local-model.md).
#[derive(clap::Parser)]
#[command(name = "clawos-model-server", version)]
struct Options {
    /// Where to listen when systemd passed no socket.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The directory holding the model's one .gguf file.
    #[arg(long, value_name = "DIR", default_value = IMAGE_MODEL_DIR)]
    model_dir: PathBuf,
    /// Keep the state of each system turn read in DIR, so a conversation
    /// starting with it after a restart reads only what follows
    /// (specs/agent/local-model.md, "The prompt's prefix").
    #[arg(long, value_name = "DIR")]
    prefix_cache: Option<PathBuf>,
    /// What --prefix-cache may hold, in MiB; the least recently used
    /// states go first.
    #[arg(long, value_name = "MIB", default_value_t = model_server::prefix::DEFAULT_CACHE_BYTES >> 20)]
    prefix_cache_mib: u64,
    /// Do not serve: write the state of a system turn saying the text of
    /// FILE into DIR, where a server of this model and weights finds it
    /// (the image build's, for the default agent's system prompt).
    #[arg(long, num_args = 2, value_names = ["FILE", "DIR"])]
    prefill: Option<Vec<PathBuf>>,
}

/// `--prefill FILE DIR`: loads the model, writes the state, says its file.
fn prefill(model_dir: &std::path::Path, text: &std::path::Path, out: &std::path::Path) -> Result<(), String> {
    let content = std::fs::read_to_string(text).map_err(|e| format!("reading {}: {e}", text.display()))?;
    let model = model_server::engine::Model::load(model_dir).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let path = model.write_system_state(&content, out)?;
    info!(file = %path.display(), weights = model.weights().name(), "a system turn's state written");
    Ok(())
}

/// tracing to stderr; under systemd that is the journal, which stamps the
/// time itself.
fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().init();
    } else {
        builder.init();
    }
}

/// Binds the socket: a socket left by a previous run is replaced, any
/// other file in the way is an error.
fn bind(path: &std::path::Path) -> Result<tokio::net::UnixListener, String> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(metadata) = std::fs::symlink_metadata(path) {
        if !metadata.file_type().is_socket() {
            return Err(format!("{} exists and is not a socket", path.display()));
        }
        std::fs::remove_file(path).map_err(|e| format!("removing the old socket {}: {e}", path.display()))?;
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(|e| format!("binding {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE))
        .map_err(|e| format!("chmod {}: {e}", path.display()))?;
    Ok(listener)
}

fn main() -> ExitCode {
    let options = <Options as clap::Parser>::parse();
    init_logging();
    // Before any other thread exists (it clears LISTEN_* from the environment).
    let activated = clawos_runtime::systemd::activated_listener();
    // Sets an environment variable: before any other thread exists.
    let weights = model_server::engine::choose_weights();
    if let Some([text, out]) = options.prefill.as_deref() {
        return match prefill(&options.model_dir, text, out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => {
                error!(%failure, "--prefill");
                ExitCode::FAILURE
            }
        };
    }
    // One thread serves HTTP; the model runs on tokio's blocking threads
    // (and candle's own for the matrix products).
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(failure) => {
            error!(%failure, "starting the runtime");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let (listener, socket) = match activated {
            Ok(Some(passed)) => (
                tokio::net::UnixListener::from_std(passed).map_err(|e| format!("the socket systemd passed: {e}")),
                "passed by systemd".into(),
            ),
            Ok(None) => (bind(&options.socket), options.socket.display().to_string()),
            Err(e) => (Err(format!("the socket systemd passed: {e}")), String::new()),
        };
        let listener = match listener {
            Ok(listener) => listener,
            Err(failure) => {
                error!(%failure, "cannot listen");
                return ExitCode::FAILURE;
            }
        };
        info!(
            socket,
            model_dir = %options.model_dir.display(),
            weights = weights.name(),
            "serving; the model loads at the first request"
        );
        // Not under systemd (no NOTIFY_SOCKET): nothing to tell.
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
        let cache = options.prefix_cache.map(|dir| (dir, options.prefix_cache_mib << 20));
        Server::with_options(options.model_dir, Default::default(), cache).serve(listener).await;
        ExitCode::SUCCESS
    })
}

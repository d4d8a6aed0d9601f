//! `migrate-pg-to-sqlite`: the command line of [`pg_migrate::migrate`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "migrate-pg-to-sqlite",
    version,
    about = "Copy IronClaw's PostgreSQL + pgvector documents into a new ClawFS workspace"
)]
struct Cli {
    /// The source: a libpq connection string or postgresql:// URL.
    #[arg(long)]
    pg_url: String,
    /// The `documents.workspace_id` to copy.
    #[arg(long, default_value = "default")]
    workspace_id: String,
    /// The ClawFS workspace to create (must not exist). Default: the workspace ID.
    #[arg(long)]
    workspace: Option<String>,
    /// The ClawFS root.
    #[arg(long, default_value = "/clawfs")]
    clawfs_root: PathBuf,
    /// The model that made the embeddings, as ClawFS names it, e.g.
    /// `openai-compatible:text-embedding-3-small:1536`.
    #[arg(long)]
    model_id: String,
    /// Rows per transaction.
    #[arg(long, default_value_t = pg_migrate::DEFAULT_BATCH_SIZE)]
    batch_size: usize,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let options = pg_migrate::Options {
        pg_url: cli.pg_url,
        workspace: cli.workspace.unwrap_or_else(|| cli.workspace_id.clone()),
        source_workspace_id: cli.workspace_id,
        clawfs_root: cli.clawfs_root,
        model_id: cli.model_id,
        batch_size: cli.batch_size,
        progress: !cli.quiet,
    };
    match pg_migrate::migrate(&options) {
        Ok(report) => {
            println!(
                "migrated {} documents ({} with {}-dimension vectors, {} superseded vectors skipped) into workspace `{}` in {} batches, {:.1} s; verified SHA-256 {}",
                report.documents,
                report.vectors,
                report.dimension,
                report.superseded_vectors,
                options.workspace,
                report.batches,
                report.elapsed.as_secs_f64(),
                report.digest
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("migrate-pg-to-sqlite: {error}; nothing was migrated (workspace `{}` was not created or was removed again)", options.workspace);
            ExitCode::FAILURE
        }
    }
}

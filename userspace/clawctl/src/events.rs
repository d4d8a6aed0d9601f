//! `clawctl events [--name N]`: prints events as JSON lines as the router
//! fans them out.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use clawos_api::router::{self, SubscribeEvents};
use clawos_ipc::ComponentId;

#[derive(Args)]
pub struct EventsArgs {
    /// Only events with this name (repeatable); default: all events.
    #[arg(long = "name")]
    names: Vec<String>,
    /// Stop after this many events.
    #[arg(long)]
    count: Option<u64>,
}

pub async fn run(args: EventsArgs) -> anyhow::Result<ExitCode> {
    let (client, mut events) = crate::ipc::connect(ComponentId::Router).await?;
    let names = if args.names.is_empty() { vec!["*".to_owned()] } else { args.names };
    router::Client::new(&client)
        .subscribe_events(&SubscribeEvents { events: names })
        .await
        .context("subscribe_events")?;
    let mut seen = 0;
    while args.count.is_none_or(|count| seen < count) {
        tokio::select! {
            message = events.recv() => {
                let Some(message) = message else {
                    anyhow::bail!("the router closed the connection");
                };
                println!("{}", crate::shown::json_line(&message)?);
                seen += 1;
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! One-off calls to other components from blocking code (tool threads,
//! SQLite workers): each call connects, asks once and says goodbye,
//! keeping no connection (and no answer) between calls.

use std::time::Duration;

use base64::Engine as _;
use clawos_api::security_agent::{self, SecretGet};
use clawos_ipc::client::{ClientOptions, IpcClient};
use clawos_ipc::ComponentId;

/// Connects to `peer` as component `me` and runs `work` (typed calls through
/// a `clawos_api` client) from a thread outside the runtime.
pub fn call<T>(
    runtime: &tokio::runtime::Handle,
    me: ComponentId,
    peer: ComponentId,
    work: impl AsyncFnOnce(&IpcClient) -> Result<T, clawos_api::CallError>,
) -> Result<T, String> {
    runtime.block_on(async {
        let (client, _events) = IpcClient::connect(peer, ClientOptions::new(me.into()))
            .await
            .map_err(|e| format!("connecting to {peer}: {e}"))?;
        let result = work(&client).await;
        client.goodbye().await;
        result.map_err(|e| format!("{peer}: {e}"))
    })
}

/// The UTF-8 value of vault secret `secret_id` (security-agent
/// `secret_get`; the vault policy decides whether `me` may read it).
pub fn vault_secret(
    runtime: &tokio::runtime::Handle,
    me: ComponentId,
    secret_id: &str,
    timeout: Duration,
) -> Result<String, String> {
    let params = SecretGet { secret_id: secret_id.to_owned(), version: None };
    let answer = call(runtime, me, ComponentId::SecurityAgent, async |client| {
        security_agent::Client::new(client).with_timeout(timeout).secret_get(&params).await
    })
    .map_err(|e| format!("vault secret {secret_id}: {e}"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(answer.value_base64.as_bytes())
        .map_err(|e| format!("vault secret {secret_id}: {e}"))?;
    String::from_utf8(bytes).map_err(|_| format!("vault secret {secret_id} is not UTF-8"))
}

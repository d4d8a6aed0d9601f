//! One-off calls to other components from blocking code (tool threads,
//! SQLite workers): each call connects, asks once and says goodbye,
//! keeping no connection (and no answer) between calls.

use std::time::Duration;

use base64::Engine as _;
use clawos_ipc::client::{ClientOptions, IpcClient};
use clawos_ipc::{ComponentId, Object};

/// `method` on `peer` as component `me`, from a thread outside the runtime.
pub fn call(runtime: &tokio::runtime::Handle, me: ComponentId, peer: ComponentId, method: &str, params: Object, timeout: Duration) -> Result<Object, String> {
    runtime.block_on(async {
        let (client, _events) =
            IpcClient::connect(peer, ClientOptions::new(me.into())).await.map_err(|e| format!("connecting to {peer}: {e}"))?;
        let result = client.call(method, params, Some(timeout)).await;
        client.goodbye().await;
        result.map_err(|e| format!("{peer} {method}: {e}"))
    })
}

/// The UTF-8 value of vault secret `secret_id` (security-agent
/// `secret_get`; the vault policy decides whether `me` may read it).
pub fn vault_secret(runtime: &tokio::runtime::Handle, me: ComponentId, secret_id: &str, timeout: Duration) -> Result<String, String> {
    let mut params = Object::new();
    params.insert("secret_id".into(), secret_id.into());
    let mut result =
        call(runtime, me, ComponentId::SecurityAgent, "secret_get", params, timeout).map_err(|e| format!("vault secret {secret_id}: {e}"))?;
    let Some(serde_json::Value::String(value_base64)) = result.remove("value_base64") else {
        return Err(format!("vault secret {secret_id}: the answer has no value"));
    };
    let bytes = base64::engine::general_purpose::STANDARD.decode(value_base64).map_err(|e| format!("vault secret {secret_id}: {e}"))?;
    String::from_utf8(bytes).map_err(|_| format!("vault secret {secret_id} is not UTF-8"))
}

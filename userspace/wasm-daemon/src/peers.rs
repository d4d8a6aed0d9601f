//! Calls to other components on behalf of a running tool. Host functions run
//! on tool threads (tokio's blocking pool), so each call blocks on the
//! daemon's runtime; it connects, asks once and says goodbye, keeping no
//! connection (and no answer) between tool calls.

use std::time::Duration;

use clawos_ipc::client::{ClientOptions, IpcClient};
use clawos_ipc::{ComponentId, Object};

/// `method` on `peer` as the wasm-daemon, from a blocking thread.
pub fn call(runtime: &tokio::runtime::Handle, peer: ComponentId, method: &str, params: Object, timeout: Duration) -> Result<Object, String> {
    runtime.block_on(async {
        let (client, _events) = IpcClient::connect(peer, ClientOptions::new(ComponentId::WasmDaemon.into()))
            .await
            .map_err(|e| format!("connecting to {peer}: {e}"))?;
        let result = client.call(method, params, Some(timeout)).await;
        client.goodbye().await;
        result.map_err(|e| format!("{peer} {method}: {e}"))
    })
}

//! `route_message`: relays a request to another component on behalf of the
//! caller, after checking the ACL for the caller (not for the router).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use clawos_ipc::server::MethodError;
use clawos_ipc::{AccessPolicy, CallError, ClientOptions, ComponentId, ErrorCode, IpcClient, Object, Principal};
use serde_json::Value;
use tokio::sync::Mutex;

/// Connections to the components requests are relayed to, opened on first use.
pub struct Relay {
    policy: Arc<AccessPolicy>,
    clients: Mutex<HashMap<ComponentId, Arc<IpcClient>>>,
}

impl Relay {
    pub fn new(policy: Arc<AccessPolicy>) -> Self {
        Relay { policy, clients: Mutex::default() }
    }

    /// `route_message {"recipient": "<id>", "method": "<m>", "params": {...}, "timeout_ms"?: n}`
    /// answers `{"result": {...}}` or the recipient's error.
    pub async fn route(&self, caller: Principal, params: Object) -> Result<Object, MethodError> {
        let recipient: ComponentId = params
            .get("recipient")
            .and_then(Value::as_str)
            .ok_or_else(|| MethodError::bad_params("recipient (a component id) is required"))?
            .parse()
            .map_err(MethodError::bad_params)?;
        let method = params
            .get("method")
            .and_then(Value::as_str)
            .ok_or_else(|| MethodError::bad_params("method (a string) is required"))?;
        let inner_params = match params.get("params") {
            None => Object::new(),
            Some(Value::Object(inner)) => inner.clone(),
            Some(_) => return Err(MethodError::bad_params("params must be an object")),
        };
        let timeout = params.get("timeout_ms").and_then(Value::as_u64).map(Duration::from_millis);
        if recipient == ComponentId::Router {
            return Err(MethodError::bad_params("call the router directly instead of routing to it"));
        }
        if !self.policy.allows(caller, recipient, method) {
            tracing::warn!(%caller, %recipient, method, "ACL denied routed request");
            return Err(MethodError::new(ErrorCode::Eperm, format!("`{caller}` may not call `{method}` on `{recipient}`")));
        }
        let client = self.client(recipient).await?;
        match client.call(method, inner_params, timeout).await {
            Ok(result) => {
                let mut answer = Object::new();
                answer.insert("result".into(), Value::Object(result));
                Ok(answer)
            }
            Err(error) => {
                if matches!(error, CallError::Closed { .. }) {
                    self.clients.lock().await.remove(&recipient);
                }
                Err(MethodError::new(error.code(), error.to_string()))
            }
        }
    }

    async fn client(&self, recipient: ComponentId) -> Result<Arc<IpcClient>, MethodError> {
        let mut clients = self.clients.lock().await;
        if let Some(client) = clients.get(&recipient).filter(|client| !client.is_closed()) {
            return Ok(Arc::clone(client));
        }
        let (client, _events) = IpcClient::connect(recipient, ClientOptions::new(ComponentId::Router.into()))
            .await
            .map_err(|error| MethodError::new(ErrorCode::Enoent, error.to_string()))?;
        let client = Arc::new(client);
        clients.insert(recipient, Arc::clone(&client));
        Ok(client)
    }
}

//! The ClawOS IPC API: one typed definition of every method of every
//! component, shared by the daemons that serve them and the clients that
//! call them (clawctl, other daemons).
//!
//! Owns, per component (one module each): every method's name, its
//! parameter and result types (serde; parameters refuse unknown fields), its
//! default timeout and the error codes it answers with, and from those
//! - a `Service` trait the component implements, one function per method,
//!   and `dispatch`, which parses a request into the method's parameters and
//!   encodes its result: a daemon's request handler is one line;
//! - a `Client` with one typed async function per method;
//! - `METHODS`, the table the IPC server takes timeouts from, the ACL is
//!   checked against at start ([`verify_acl`]) and the JSON Schemas in
//!   `specs/ipc/schemas/methods/` are generated from ([`schemas`]).
//!
//! Does not own: the protocol (envelope, framing, authentication, the ACL
//! itself: `clawos-ipc`), daemon plumbing (`clawos-runtime`), or what any
//! method does (the component crates).
//!
//! Names are the same on every method: a tool is `tool_name` and its input
//! `arguments` (as in the IPC spec's `execute_tool` example), the agent a
//! request acts for is `agent`, a user workspace is `workspace` (its own
//! name in `workspace_*` methods). The glossary is `specs/README.md`.
#![deny(missing_docs)]

#[macro_use]
mod service;

pub mod agent_loop;
pub mod common;
pub mod ebpf_agent;
pub mod fs_engine;
pub mod observability;
pub mod router;
pub mod scheduler;
pub mod security_agent;
pub mod wasm_daemon;

use std::time::Duration;

use clawos_ipc::server::{Connection, MethodError};
use clawos_ipc::{AccessPolicy, ComponentId, ErrorCode, IpcClient, Object, Principal};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// One method as the API defines it.
#[derive(Clone, Copy)]
pub struct MethodInfo {
    /// The component that serves it; `None` for the methods every
    /// component answers ([`common`]).
    pub component: Option<ComponentId>,
    /// The method name on the wire.
    pub name: &'static str,
    /// What it does (its doc comment).
    pub doc: &'static str,
    /// How long a request may take when the caller sets no `timeout_ms`.
    pub timeout: Duration,
    /// The error codes it answers with besides EPROTO (malformed params)
    /// and EINTERNAL, which every method may answer.
    pub errors: &'static [ErrorCode],
    /// JSON Schema of its params.
    pub params_schema: fn() -> schemars::Schema,
    /// JSON Schema of its result.
    pub result_schema: fn() -> schemars::Schema,
}

impl std::fmt::Debug for MethodInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MethodInfo")
            .field("component", &self.component)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A request as a method implementation sees it: who asked, on which
/// connection, and how long the answer may take.
pub struct Call {
    /// The connection the request came on.
    pub connection: Connection,
    /// The request's effective timeout (the caller's, else the method's,
    /// capped by the protocol).
    pub timeout: Duration,
}

impl Call {
    /// The authenticated sender.
    pub fn peer(&self) -> Principal {
        self.connection.peer()
    }
}

/// The longest `idempotency_key` a method takes (`execute_tool`,
/// `memory_store`), bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 256;

/// The params of a method that takes none: `{}`, and nothing else.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// The result of a method that answers nothing but success: `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Done {}

/// Why a typed call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The call itself failed: the peer's error answer, a timeout, a closed
    /// connection.
    #[error(transparent)]
    Ipc(#[from] clawos_ipc::CallError),
    /// The params did not encode to a JSON object (a bug in the caller's types).
    #[error("`{method}` params: {reason}")]
    Params {
        /// The method.
        method: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The answer does not fit the method's result type: the peer runs a
    /// different API version, or is not the component it claims to be.
    #[error("`{method}` answered something that is not its result: {source}")]
    Result {
        /// The method.
        method: &'static str,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
}

/// Calls `method` on `client`'s peer with typed params and result, waiting
/// at most `timeout` (which is also sent, so the server stops at the same time).
pub async fn call<P: Serialize, R: DeserializeOwned>(
    client: &IpcClient,
    method: &'static str,
    timeout: Duration,
    params: &P,
) -> Result<R, CallError> {
    let params = match serde_json::to_value(params) {
        Ok(serde_json::Value::Object(params)) => params,
        Ok(other) => return Err(CallError::Params { method, reason: format!("not a JSON object: {other}") }),
        Err(error) => return Err(CallError::Params { method, reason: error.to_string() }),
    };
    let result = client.call(method, params, Some(timeout)).await?;
    serde_json::from_value(serde_json::Value::Object(result)).map_err(|source| CallError::Result { method, source })
}

/// Parses a request's params as `method`'s parameter type (EPROTO naming
/// the offending field when they do not fit).
pub fn parse<P: DeserializeOwned>(method: &str, params: Object) -> Result<P, MethodError> {
    serde_json::from_value(serde_json::Value::Object(params))
        .map_err(|error| MethodError::bad_params(format!("{method}: {error}")))
}

/// Encodes a method's result, which must be a JSON object.
pub fn encode<R: Serialize>(result: &R) -> Result<Object, MethodError> {
    match serde_json::to_value(result) {
        Ok(serde_json::Value::Object(object)) => Ok(object),
        Ok(other) => Err(MethodError::new(ErrorCode::Einternal, format!("result is not an object: {other}"))),
        Err(error) => Err(MethodError::new(ErrorCode::Einternal, format!("encoding the result: {error}"))),
    }
}

/// The JSON Schema of `T`.
pub fn schema<T: schemars::JsonSchema>() -> schemars::Schema {
    schemars::schema_for!(T)
}

/// Every method of the API: each component's own, then the common ones.
pub fn all() -> impl Iterator<Item = &'static MethodInfo> {
    [
        agent_loop::METHODS,
        wasm_daemon::METHODS,
        ebpf_agent::METHODS,
        security_agent::METHODS,
        fs_engine::METHODS,
        observability::METHODS,
        router::METHODS,
        scheduler::METHODS,
        common::METHODS,
    ]
    .into_iter()
    .flatten()
}

/// The table of `component`'s own methods (without the common ones).
pub fn own_methods(component: ComponentId) -> &'static [MethodInfo] {
    match component {
        ComponentId::AgentLoop => agent_loop::METHODS,
        ComponentId::WasmDaemon => wasm_daemon::METHODS,
        ComponentId::EbpfAgent => ebpf_agent::METHODS,
        ComponentId::SecurityAgent => security_agent::METHODS,
        ComponentId::FsEngine => fs_engine::METHODS,
        ComponentId::Observability => observability::METHODS,
        ComponentId::Router => router::METHODS,
        ComponentId::Scheduler => scheduler::METHODS,
    }
}

/// What `component` serves as `name`: its own method, else a common one.
pub fn method(component: ComponentId, name: &str) -> Option<&'static MethodInfo> {
    own_methods(component).iter().chain(common::METHODS).find(|method| method.name == name)
}

/// `component`'s default timeout for `name` (the protocol default for a
/// method it does not serve, which it answers with ENOENT at once).
pub fn timeout(component: ComponentId, name: &str) -> Duration {
    method(component, name).map_or(clawos_ipc::timeouts::DEFAULT_REQUEST_TIMEOUT, |method| method.timeout)
}

/// [`timeout`] for one component, as the function the IPC server takes.
pub fn timeouts_of(component: ComponentId) -> fn(&str) -> Duration {
    match component {
        ComponentId::AgentLoop => |name| timeout(ComponentId::AgentLoop, name),
        ComponentId::WasmDaemon => |name| timeout(ComponentId::WasmDaemon, name),
        ComponentId::EbpfAgent => |name| timeout(ComponentId::EbpfAgent, name),
        ComponentId::SecurityAgent => |name| timeout(ComponentId::SecurityAgent, name),
        ComponentId::FsEngine => |name| timeout(ComponentId::FsEngine, name),
        ComponentId::Observability => |name| timeout(ComponentId::Observability, name),
        ComponentId::Router => |name| timeout(ComponentId::Router, name),
        ComponentId::Scheduler => |name| timeout(ComponentId::Scheduler, name),
    }
}

/// Refuses an ACL with a rule for a method nobody serves (see
/// [`AccessPolicy::unserved_grants`]); the error lists every such rule.
pub fn verify_acl(policy: &AccessPolicy) -> Result<(), String> {
    let dead = policy.unserved_grants(|component, name| method(component, name).is_some());
    if dead.is_empty() {
        Ok(())
    } else {
        Err(format!("the IPC policy grants methods that do not exist: {}", dead.join("; ")))
    }
}

/// The JSON Schema files of every method, as `(relative path, contents)`:
/// `<component>/<method>.params.json` and `.result.json` (`common/` for the
/// methods every component answers), plus `index.json` with each method's
/// component, timeout and error codes. `specs/ipc/schemas/methods/` holds
/// exactly these (the `schemas` test keeps them equal).
pub fn schemas() -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut index = Vec::new();
    for method in all() {
        let dir = method.component.map_or("common", ComponentId::as_str);
        for (kind, schema) in [("params", (method.params_schema)()), ("result", (method.result_schema)())] {
            let mut schema = schema;
            schema.insert("title".into(), format!("{} {kind}", method.name).into());
            schema.insert("description".into(), method.doc.split_whitespace().collect::<Vec<_>>().join(" ").into());
            let text = serde_json::to_string_pretty(&schema).expect("schemas serialize") + "\n";
            files.push((format!("{dir}/{}.{kind}.json", method.name), text));
        }
        index.push(serde_json::json!({
            "component": dir,
            "method": method.name,
            "timeout_ms": u64::try_from(method.timeout.as_millis()).unwrap_or(u64::MAX),
            "errors": method.errors.iter().map(|code| code.to_string()).collect::<Vec<_>>(),
            "params": format!("{dir}/{}.params.json", method.name),
            "result": format!("{dir}/{}.result.json", method.name),
        }));
    }
    let index = serde_json::to_string_pretty(&index).expect("the index serializes") + "\n";
    files.push(("index.json".into(), index));
    files
}

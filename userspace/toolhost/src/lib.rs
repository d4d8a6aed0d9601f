//! `clawos-toolhost`: runs ClawOS tools, WASM components of the
//! `clawos:tool` WIT package (`specs/wit/tool.wit`), with nothing they were
//! not granted.
//!
//! - [`definition`]: tool definitions and `registry.json`
//!   (specs/toolhost/README.md, "Registry"), with the naming rules and
//!   capability grammar enforced.
//! - [`ToolHost`]: one wasmtime engine (Cranelift, component model, pooling
//!   allocator, epoch interruption); tools compiled once and cached by hash;
//!   a fresh Store and instance per call, with a memory limit over all
//!   memories and tables and a wall-clock deadline.
//! - Capabilities: a component importing an interface none of its
//!   capabilities grants is refused before it runs; a path or host outside its
//!   grants aborts the call with [`CallError::CapabilityDenied`].
//! - [`records`]: every call recorded in the agent's AgentFS `tool_calls`;
//!   every file a tool writes in the ClawFS audit log (`clawfs::audit`,
//!   [`HostConfig::audit_log`]), as fs-engine records its own.
//! - [`cgroup`]: per-tool cgroup v2 CPU and pids limits for the calling thread.
//! - [`channel`]: channel components (`specs/wit/channel/channel.wit`), a
//!   channel's protocol as pure functions, under the same limits and with
//!   no host interface.
//! - [`store`]: tools installed at run time in `/clawfs/tools`.
//! - What host functions ask of the daemon ([`CredentialProvider`],
//!   [`MemorySearch`], [`KvBackend`]) and why it can fail
//!   ([`CredentialError`], [`MemoryError`], [`KvError`]).
//!
//! Design, limits and threat model: `specs/toolhost/README.md`.

pub mod cgroup;
pub mod channel;
pub mod definition;
mod error;
mod host;
mod http;
mod imports;
mod limits;
mod providers;
pub mod records;
pub mod store;

pub use error::CallError;
pub use host::{
    CacheKey, CallRequest, HostConfig, ToolHost, DEFAULT_MAX_CONCURRENT_CALLS, EPOCH_TICK, MAX_OUTPUT_BYTES,
};
pub use http::{Origin, Scheme, REDACTED};
pub use providers::{
    Credential, CredentialError, CredentialProvider, KvBackend, KvError, MemoryError, MemoryHit, MemoryKv,
    MemoryResults, MemorySearch, NoCredentials, NoMemory,
};

/// Host bindings for the `tool-host` world (every interface a tool may import).
mod bindings {
    wasmtime::component::bindgen!({
        path: "../../specs/wit",
        world: "tool-host",
        // Host functions may abort the call (capability denial), so every
        // import can trap.
        imports: { default: trappable },
    });
}

//! ClawOS IPC protocol v1.0, the library every component links.
//!
//! Owns: the wire format (envelope and the four message types), line framing
//! with the 4 MiB limit, JSON Schema validation against `specs/ipc/schemas/`,
//! the `hello` version negotiation, error codes with their errno mapping and
//! retry policy, timeouts, SO_PEERCRED authentication and the ACL, the
//! connection limits (per-UID cap, handshake size and time), the
//! per-connection rate limit, heartbeat metrics from `/proc` and
//! heartbeat-based health tracking, and the [`IpcServer`] / [`IpcClient`]
//! that enforce all of it on abstract Unix sockets.
//!
//! Does not own: daemon plumbing (config files, logging, systemd, signals:
//! `clawos-runtime`), or what any method does (the components).
//!
//! The protocol is specified in `specs/ipc/protocol-v1.0.md`; ClawOS's
//! choices where the spec is silent (framing details, the handshake's
//! payloads, the `operator` principal, the ACL format) are in
//! `specs/ipc/README.md`.
#![deny(missing_docs)]

pub mod client;
pub mod codec;
pub mod component;
pub mod error_code;
pub mod framing;
pub mod health;
pub mod message;
mod outbox;
pub mod policy;
pub mod process_metrics;
pub mod rate_limit;
pub mod schema;
pub mod server;
pub mod socket;
pub mod timeouts;
pub mod version;

pub use client::{CallError, ClientOptions, ConnectError, IpcClient};
pub use component::{ComponentId, Principal};
pub use error_code::{ErrorCode, RetryPolicy};
pub use message::{Body, ErrorPayload, Event, Heartbeat, HeartbeatMetrics, Message, Object, Request, Response};
pub use outbox::OUTBOX_CAPACITY;
pub use policy::AccessPolicy;
pub use rate_limit::RateLimit;
pub use server::{Connection, Handler, IpcServer, MethodError, ServerSettings, ServerStats};
pub use version::ProtocolVersion;

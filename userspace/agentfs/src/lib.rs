//! ClawOS's AgentFS storage: every agent and user workspace is one SQLite
//! file following the AgentFS specification v0.4, so any other AgentFS
//! implementation can open it.
//!
//! This crate owns the database: the spec's schema (`fs_*`, `kv_store`,
//! `tool_calls`), ClawOS's extension tables (`clawos_xattr`,
//! `clawos_inode_nsec`, `clawos_tool_call_meta`), the overlay over a read-only base, and the
//! consistency checker ([`check`]). It must not touch anything outside the
//! database files it is given: mounting is `clawos-agentfs-fuse`'s job and
//! the command line is `clawctl`'s.
//!
//! Core concepts:
//! - [`AgentFs`] is an open database. Each method is one SQLite
//!   transaction, so an error leaves the database as it was;
//!   [`AgentFs::batch`] groups many into one commit (each still atomic),
//!   because a commit, not the SQL, is what a small operation costs.
//! - Paths are absolute and `/`-separated; symlinks are followed in the
//!   middle of a path and, for the non-`l` calls, at its end.
//! - Errors are [`Error`], each with a POSIX [`Error::errno`].
//! - With [`OpenOptions::base`] the database becomes the writable delta of
//!   an overlay over another AgentFS database or a host directory.

mod base;
pub mod check;
mod commit;
mod database;
mod db;
mod durable;
mod error;
mod kv;
mod overlay;
mod path;
mod tool_calls;
mod types;

pub use base::BaseSource;
pub use database::{AgentFs, OpenOptions, DEFAULT_CHUNK_SIZE, MAX_SYMLINK_FOLLOWS, ROOT_INO};
pub use db::{
    configure_connection, guard_audit_trail, rebuild_table_if, retry_cantopen, AUDIT_TRIGGERS_SQL, BUSY_TIMEOUT,
    DEFAULT_FILE_SIZE_LIMIT, MAX_FILE_SIZE, SCHEMA_SQL,
};
pub use error::{Error, Result};
pub use kv::KvEntry;
pub use path::{MAX_NAME_LEN, MAX_PATH_LEN};
pub use tool_calls::{NewToolCall, ToolCall, ToolCallMeta, ToolStats};
pub use types::*;

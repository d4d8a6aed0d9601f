//! The host side of ClawOS channels (specs/channels/README.md): what
//! wasm-daemon keeps so a channel neither loses nor repeats a message
//! across restarts and power cuts ([`store`]), a channel's loop over it
//! ([`runner`]), and the Standard Webhooks signatures of inbound and
//! outbound webhooks ([`webhooks`]).
//!
//! Owns: the channel database's schema and its transitions; signing and
//! verifying. Must not own: a protocol (a channel's WASM component speaks
//! it), the network, or a secret's storage (the vault).
#![deny(missing_docs)]

pub mod runner;
pub mod store;
pub mod webhooks;

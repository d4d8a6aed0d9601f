//! The agent runtime of `clawos-agent-loop` (`specs/agent/README.md`): a
//! library so its parts are tested on their own and the daemon (`main.rs`)
//! only serves them over IPC.
//!
//! - `provider`: language models behind one trait (OpenAI-compatible,
//!   Anthropic, the in-box model), streaming, retries and fallback;
//! - `config`: an agent's `config.toml`;
//! - `persona`: its brain files compiled into the system prompt;
//! - `guard`: the soul guard over `soul.md` and `identity.md`;
//! - `thinker`: a turn's model, from the config and a route;
//! - `turn`: the loop of one turn and its limits;
//! - `compaction`: where a long session is cut;
//! - `tools`: the tools a model may call and where they run;
//! - `store`: sessions, turns and spend in the agent's database;
//! - `registry`: which agents exist and the state of each;
//! - `launch`: starting, resuming and running turns, and the turn table;
//! - `error`: what the daemon's IPC methods fail with, and their codes.

pub mod compaction;
pub mod config;
pub mod delegate;
pub mod error;
pub mod guard;
pub mod launch;
pub mod mcp_servers;
pub mod persona;
pub mod provider;
pub mod registry;
pub mod store;
pub mod thinker;
pub mod tools;
pub mod turn;

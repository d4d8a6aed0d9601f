//! Turning text into vectors. [`Embedder`] is what the index needs; the
//! implementations are the in-box offline default ([`HashingEmbedder`]), an
//! OpenAI-compatible HTTP client ([`OpenAiEmbedder`]) and the LRU cache that
//! wraps either ([`CachedEmbedder`]).

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use lru::LruCache;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Why an embedder could not embed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The HTTP request failed (connection, status, body).
    #[error("{url}: {reason}")]
    Http {
        /// The endpoint.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The service answered something that is not an embeddings response.
    #[error("{url}: unexpected response: {reason}")]
    BadResponse {
        /// The endpoint.
        url: String,
        /// What was wrong with it.
        reason: String,
    },
    /// An in-process model failed (tokenizing, forward pass).
    #[error("{model}: {reason}")]
    Model {
        /// The model.
        model: String,
        /// What went wrong.
        reason: String,
    },
}

/// Something that maps texts to vectors of one fixed dimension.
pub trait Embedder: Send + Sync {
    /// Length of every vector it returns.
    fn dimension(&self) -> usize;
    /// Names the model, so vectors of different models are never mixed
    /// (recorded with each workspace index and in cache keys).
    fn model_id(&self) -> &str;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// A shared embedder, so a caller can keep a handle (to load a model
/// ahead of time, say) while the cache owns another.
impl<E: Embedder + ?Sized> Embedder for std::sync::Arc<E> {
    fn dimension(&self) -> usize {
        (**self).dimension()
    }

    fn model_id(&self) -> &str {
        (**self).model_id()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        (**self).embed(texts)
    }
}

/// The offline default: a deterministic feature-hashing embedder. Each
/// lower-cased word and each character trigram of a word is hashed to a
/// signed bucket; the vector is L2-normalized.
///
/// It needs no model and no network, so memory search works on a box with
/// neither. It is not a language model: it finds shared words and word
/// pieces (so "indexing" near "index"), not synonyms. A real sentence
/// model or an embeddings service replaces it when one is configured.
#[derive(Debug, Clone)]
pub struct HashingEmbedder {
    dimension: usize,
    model_id: String,
}

impl HashingEmbedder {
    /// An embedder producing `dimension`-long vectors.
    pub fn new(dimension: usize) -> Self {
        HashingEmbedder { dimension, model_id: format!("clawfs-feature-hashing-v1-{dimension}") }
    }

    fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dimension];
        let mut add = |feature: &[u8], weight: f32| {
            let digest = Sha256::digest(feature);
            let bucket = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes")) % self.dimension as u64;
            let sign = if digest[8] & 1 == 0 { 1.0 } else { -1.0 };
            vector[bucket as usize] += sign * weight;
        };
        for word in text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()) {
            let word = word.to_lowercase();
            add(word.as_bytes(), 1.0);
            let padded: Vec<char> = format!("<{word}>").chars().collect();
            for trigram in padded.windows(3) {
                add(trigram.iter().collect::<String>().as_bytes(), 0.5);
            }
        }
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            vector.iter_mut().for_each(|x| *x /= norm);
        }
        vector
    }
}

impl Embedder for HashingEmbedder {
    fn dimension(&self) -> usize {
        self.dimension
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|text| self.embed_one(text)).collect())
    }
}

/// Settings of an OpenAI-compatible `/v1/embeddings` service (OpenAI,
/// OpenRouter, Ollama, vLLM, ...), as written in TOML.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    /// Base URL up to and including `/v1`, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Model name, e.g. `text-embedding-3-small`.
    pub model: String,
    /// Dimension the model returns (sent as `dimensions` so models that can
    /// shorten their output do).
    pub dimension: usize,
    /// Vault secret holding the API key; none for local services.
    #[serde(default)]
    pub api_key_secret: Option<String>,
    /// Request timeout in seconds. Default 30.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
}

fn default_timeout_secs() -> u64 {
    30
}

/// A client of an OpenAI-compatible `/v1/embeddings` endpoint.
pub struct OpenAiEmbedder {
    config: OpenAiConfig,
    api_key: Option<String>,
    agent: ureq::Agent,
    model_id: String,
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [&'a str],
    dimensions: usize,
    encoding_format: &'static str,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// A client for `config`; `api_key` is the secret named by
    /// `config.api_key_secret`, read from the vault by the caller.
    pub fn new(config: OpenAiConfig, api_key: Option<String>) -> Self {
        let agent =
            ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(config.timeout_secs))).build().into();
        let model_id = format!("openai-compatible:{}:{}", config.model, config.dimension);
        OpenAiEmbedder { config, api_key, agent, model_id }
    }

    fn url(&self) -> String {
        format!("{}/embeddings", self.config.base_url.trim_end_matches('/'))
    }
}

impl Embedder for OpenAiEmbedder {
    fn dimension(&self) -> usize {
        self.config.dimension
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let url = self.url();
        let body = EmbeddingsRequest {
            model: &self.config.model,
            input: texts,
            dimensions: self.config.dimension,
            encoding_format: "float",
        };
        let mut request = self.agent.post(&url);
        if let Some(key) = &self.api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let http = |reason: String| EmbedError::Http { url: url.clone(), reason };
        let bad = |reason: String| EmbedError::BadResponse { url: url.clone(), reason };
        let mut response = request.send_json(&body).map_err(|error| http(error.to_string()))?;
        let parsed: EmbeddingsResponse = response.body_mut().read_json().map_err(|error| bad(error.to_string()))?;
        if parsed.data.len() != texts.len() {
            return Err(bad(format!("{} embeddings for {} inputs", parsed.data.len(), texts.len())));
        }
        let mut vectors = vec![Vec::new(); texts.len()];
        for item in parsed.data {
            if item.embedding.len() != self.config.dimension {
                return Err(bad(format!(
                    "a {}-dimension vector; expected {}",
                    item.embedding.len(),
                    self.config.dimension
                )));
            }
            let slot = vectors.get_mut(item.index).ok_or_else(|| bad(format!("index {} out of range", item.index)))?;
            *slot = item.embedding;
        }
        if vectors.iter().any(Vec::is_empty) {
            return Err(bad("an input index is missing".into()));
        }
        Ok(vectors)
    }
}

/// Wraps an embedder so that a text already embedded (by this model) is
/// answered from memory, least recently used evicted first, and a text
/// being embedded for one caller is waited for by another instead of
/// embedded again: under emulation MiniLM takes seconds a chunk, and
/// fs-engine's watcher and a memory request often want the same new chunks
/// at once (two agents' first indexes share their brain files' templates).
pub struct CachedEmbedder<E> {
    inner: E,
    state: Mutex<CacheState>,
    /// Signalled whenever texts leave `CacheState::in_flight`.
    landed: Condvar,
}

struct CacheState {
    vectors: LruCache<[u8; 32], Vec<f32>>,
    /// Texts some caller is embedding now.
    in_flight: HashSet<[u8; 32]>,
}

/// Takes `keys` out of the in-flight set, and wakes whoever waits on them,
/// however the embedding that claimed them ends (error or panic included).
struct Claim<'a> {
    state: &'a Mutex<CacheState>,
    landed: &'a Condvar,
    keys: Vec<[u8; 32]>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for key in &self.keys {
            state.in_flight.remove(key);
        }
        self.landed.notify_all();
    }
}

impl<E: Embedder> CachedEmbedder<E> {
    /// Caches up to `capacity` vectors of `inner`.
    pub fn new(inner: E, capacity: NonZeroUsize) -> Self {
        CachedEmbedder {
            inner,
            state: Mutex::new(CacheState { vectors: LruCache::new(capacity), in_flight: HashSet::new() }),
            landed: Condvar::new(),
        }
    }

    fn key(&self, text: &str) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(self.inner.model_id().as_bytes());
        hasher.update([0]);
        hasher.update(text.as_bytes());
        hasher.finalize().into()
    }
}

impl<E: Embedder> Embedder for CachedEmbedder<E> {
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let keys: Vec<[u8; 32]> = texts.iter().map(|text| self.key(text)).collect();
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        loop {
            // Under the lock: take what is cached, claim what nobody is
            // embedding (each distinct text once), wait for the rest.
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let mut claimed: Vec<usize> = Vec::new();
            let mut waiting = false;
            for (position, key) in keys.iter().enumerate() {
                if vectors[position].is_some() {
                    continue;
                }
                if let Some(vector) = state.vectors.get(key) {
                    vectors[position] = Some(vector.clone());
                } else if state.in_flight.insert(*key) {
                    claimed.push(position);
                } else if !claimed.iter().any(|&mine| keys[mine] == *key) {
                    waiting = true;
                }
            }
            if claimed.is_empty() {
                if !waiting {
                    break;
                }
                // Another caller's embedding lands (or fails: then the
                // next round claims the text) and wakes this one.
                drop(self.landed.wait(state).unwrap_or_else(PoisonError::into_inner));
                continue;
            }
            drop(state);
            let claim = Claim {
                state: &self.state,
                landed: &self.landed,
                keys: claimed.iter().map(|&position| keys[position]).collect(),
            };
            let inputs: Vec<&str> = claimed.iter().map(|&position| texts[position]).collect();
            let fresh = self.inner.embed(&inputs)?;
            if fresh.len() != inputs.len() {
                return Err(EmbedError::Model {
                    model: self.model_id().to_owned(),
                    reason: format!("{} vectors for {} texts", fresh.len(), inputs.len()),
                });
            }
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            for (&position, vector) in claimed.iter().zip(fresh) {
                state.vectors.put(keys[position], vector.clone());
                vectors[position] = Some(vector);
            }
            drop(state);
            drop(claim);
        }
        // A round ends with nothing claimed or awaited only when every
        // text has its vector (a repeat of a claimed text finds it cached).
        Ok(vectors.into_iter().map(|vector| vector.expect("every text has its vector")).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn hashing_is_deterministic_normalized_and_word_sensitive() {
        let embedder = HashingEmbedder::new(256);
        let vectors =
            embedder.embed(&["rebuild the HNSW index", "rebuild the hnsw index", "tomato soup recipe"]).unwrap();
        assert_eq!(vectors[0], embedder.embed(&["rebuild the HNSW index"]).unwrap()[0]);
        assert!((cosine(&vectors[0], &vectors[0]) - 1.0).abs() < 1e-5);
        assert!((cosine(&vectors[0], &vectors[1]) - 1.0).abs() < 1e-5, "case must not matter");
        assert!(cosine(&vectors[0], &vectors[2]) < 0.3);
    }

    #[test]
    fn the_same_text_is_never_embedded_twice() {
        let cached = CachedEmbedder::new(Slow::new(0, false), NonZeroUsize::new(16).unwrap());
        let first = cached.embed(&["alpha", "beta", "alpha"]).unwrap();
        assert_eq!(first[0], first[2]);
        let second = cached.embed(&["beta", "alpha"]).unwrap();
        assert_eq!(second[1], first[0]);
        assert_eq!(*cached.inner.texts.lock().unwrap(), ["alpha", "beta"], "alpha and beta, once each");
        assert_eq!(cached.inner.calls.load(Ordering::SeqCst), 1);
    }

    /// Records what it embeds; embeds after `delay`; fails its first call
    /// when `fail_first` is set.
    struct Slow {
        inner: HashingEmbedder,
        delay: Duration,
        fail_first: bool,
        calls: AtomicUsize,
        texts: std::sync::Mutex<Vec<String>>,
    }

    impl Slow {
        fn new(delay_ms: u64, fail_first: bool) -> Self {
            Slow {
                inner: HashingEmbedder::new(64),
                delay: Duration::from_millis(delay_ms),
                fail_first,
                calls: AtomicUsize::new(0),
                texts: std::sync::Mutex::default(),
            }
        }
    }

    impl Embedder for Slow {
        fn dimension(&self) -> usize {
            self.inner.dimension()
        }
        fn model_id(&self) -> &str {
            self.inner.model_id()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            std::thread::sleep(self.delay);
            self.texts.lock().unwrap().extend(texts.iter().map(|text| (*text).to_owned()));
            if self.calls.fetch_add(1, Ordering::SeqCst) == 0 && self.fail_first {
                return Err(EmbedError::Model { model: "slow".into(), reason: "first call fails".into() });
            }
            self.inner.embed(texts)
        }
    }

    #[test]
    fn a_text_another_caller_is_embedding_is_waited_for_not_embedded_again() {
        let cached = std::sync::Arc::new(CachedEmbedder::new(Slow::new(300, false), NonZeroUsize::new(16).unwrap()));
        let first = {
            let cached = cached.clone();
            std::thread::spawn(move || cached.embed(&["shared", "first only"]).unwrap())
        };
        std::thread::sleep(Duration::from_millis(100));
        let second = cached.embed(&["second only", "shared"]).unwrap();
        let first = first.join().unwrap();
        assert_eq!(first[0], second[1]);
        let mut texts = cached.inner.texts.lock().unwrap().clone();
        texts.sort();
        assert_eq!(texts, ["first only", "second only", "shared"], "each text embedded once");
    }

    #[test]
    fn when_the_embedding_a_caller_waits_for_fails_the_caller_embeds_the_text_itself() {
        let cached = std::sync::Arc::new(CachedEmbedder::new(Slow::new(300, true), NonZeroUsize::new(16).unwrap()));
        let first = {
            let cached = cached.clone();
            std::thread::spawn(move || cached.embed(&["shared"]))
        };
        std::thread::sleep(Duration::from_millis(100));
        let second = cached.embed(&["shared"]).unwrap();
        assert!(first.join().unwrap().is_err());
        assert_eq!(second[0], HashingEmbedder::new(64).embed(&["shared"]).unwrap()[0]);
        assert_eq!(cached.inner.calls.load(Ordering::SeqCst), 2);
    }

    /// Serves one `/v1/embeddings` request the way OpenAI does and hands
    /// back the request line, headers and body it received.
    fn serve_once(listener: TcpListener, dimension: usize) -> std::thread::JoinHandle<(String, String)> {
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut content_length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    content_length = value.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let mut body = vec![0; content_length];
            reader.read_exact(&mut body).unwrap();
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let inputs = request["input"].as_array().unwrap();
            // Answer out of order: clients must place vectors by `index`.
            let data: Vec<_> = (0..inputs.len())
                .rev()
                .map(|index| serde_json::json!({"object": "embedding", "index": index, "embedding": vec![index as f32; dimension]}))
                .collect();
            let response = serde_json::json!({
                "object": "list", "data": data, "model": request["model"],
                "usage": {"prompt_tokens": 3, "total_tokens": 3}
            })
            .to_string();
            let mut stream = stream;
            write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{response}", response.len()).unwrap();
            (head, String::from_utf8(body).unwrap())
        })
    }

    #[test]
    fn openai_client_speaks_the_embeddings_protocol() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let server = serve_once(listener, 4);
        let config = OpenAiConfig {
            base_url,
            model: "text-embedding-3-small".into(),
            dimension: 4,
            api_key_secret: None,
            timeout_secs: 5,
        };
        let client = OpenAiEmbedder::new(config, Some("sk-test".into()));
        let vectors = client.embed(&["first", "second"]).unwrap();
        assert_eq!(vectors, vec![vec![0.0; 4], vec![1.0; 4]]);
        let (head, body) = server.join().unwrap();
        assert!(head.starts_with("POST /v1/embeddings HTTP/1.1"), "{head}");
        assert!(head.to_ascii_lowercase().contains("authorization: bearer sk-test"), "{head}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["model"], "text-embedding-3-small");
        assert_eq!(body["input"], serde_json::json!(["first", "second"]));
        assert_eq!(body["dimensions"], 4);
    }

    #[test]
    fn openai_client_rejects_a_wrong_dimension() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let server = serve_once(listener, 3);
        let config = OpenAiConfig { base_url, model: "m".into(), dimension: 4, api_key_secret: None, timeout_secs: 5 };
        let error = OpenAiEmbedder::new(config, None).embed(&["x"]).unwrap_err();
        assert!(error.to_string().contains("3-dimension vector; expected 4"), "{error}");
        server.join().unwrap();
    }
}

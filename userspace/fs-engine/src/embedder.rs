//! Which embedder memory search uses, from `[component.embedder]` of
//! `/etc/clawos/fs-engine.toml`:
//!
//! - `kind = "hashing"`: the offline word-hashing default, any dimension;
//! - `kind = "minilm"`: all-MiniLM-L6-v2 in-process (384 dimensions), from
//!   `model_dir` (default: where the image installs it). fs-engine is ready
//!   at once: a thread at idle priority loads the model in the background,
//!   so the first search does not wait seconds for it and the load takes no
//!   CPU from the rest of the boot; an embedding that comes first loads it;
//! - `kind = "openai"`: an OpenAI-compatible `/v1/embeddings` service
//!   ([`clawfs::OpenAiConfig`]); its key is the vault secret named by
//!   `api_key_secret`, read from security-agent when first needed (the
//!   vault may still be sealed when fs-engine starts).
//!
//! Every kind is wrapped in the LRU cache. A model that cannot be loaded
//! leaves memory search without its vector leg, and every search says why.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clawfs::{CachedEmbedder, EmbedError, Embedder, HashingEmbedder, OpenAiConfig, OpenAiEmbedder};
use serde::Deserialize;

/// Vectors kept by the LRU cache.
const CACHE_ENTRIES: usize = 4096;

/// `[component.embedder]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum EmbedderConfig {
    /// The offline word-hashing embedder, at the instance's dimension.
    #[default]
    Hashing,
    /// all-MiniLM-L6-v2 run in-process.
    Minilm {
        /// Directory with config.json, model.safetensors, tokenizer.json.
        #[serde(default = "default_model_dir")]
        model_dir: PathBuf,
    },
    /// An OpenAI-compatible embeddings service.
    Openai(OpenAiConfig),
}

fn default_model_dir() -> PathBuf {
    PathBuf::from(minilm::IMAGE_MODEL_DIR)
}

/// Reads a vault secret by name (security-agent `secret_get` on the appliance).
pub type SecretSource = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// The configured embedder, or why there is none.
pub fn build(config: &EmbedderConfig, dimension: usize, secrets: SecretSource) -> Result<Arc<dyn Embedder>, String> {
    match config {
        EmbedderConfig::Hashing => Ok(cached(HashingEmbedder::new(dimension))),
        EmbedderConfig::Minilm { model_dir } => {
            // Loaded at the first embedding; a missing model is reported now.
            if !model_dir.join("model.safetensors").is_file() {
                return Err(format!("all-MiniLM-L6-v2: no model.safetensors in {}", model_dir.display()));
            }
            let model = Arc::new(minilm::LazyMiniLm::new(model_dir));
            preload_at_idle_priority(model.clone());
            Ok(cached(model))
        }
        EmbedderConfig::Openai(openai) => match &openai.api_key_secret {
            None => Ok(cached(OpenAiEmbedder::new(openai.clone(), None))),
            Some(secret) => Ok(cached(VaultKeyed {
                config: openai.clone(),
                secret: secret.clone(),
                secrets,
                model_id: OpenAiEmbedder::new(openai.clone(), None).model_id().to_owned(),
                client: Mutex::new(None),
            })),
        },
    }
}

fn preload_at_idle_priority(model: Arc<minilm::LazyMiniLm>) {
    let spawned = std::thread::Builder::new().name("minilm-preload".into()).spawn(move || {
        // It must not leak into other work, so this thread only loads the
        // weights and ends (searches embed on their own threads).
        at_idle_priority("embedding model preload");
        match model.preload() {
            Ok(()) => tracing::info!("embedding model loaded"),
            Err(reason) => tracing::error!("embedding model: {reason}"),
        }
    });
    if let Err(error) = spawned {
        tracing::warn!("no preload thread ({error}): the first embedding loads the model");
    }
}

/// Puts the calling thread under SCHED_IDLE: it runs only on a CPU nothing
/// else wants. `what` names its work in the warning when the kernel refuses.
pub(crate) fn at_idle_priority(what: &str) {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sets the calling thread's policy; `param` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        tracing::warn!("{what} at normal priority: {}", std::io::Error::last_os_error());
    }
}

fn cached(embedder: impl Embedder + 'static) -> Arc<dyn Embedder> {
    Arc::new(CachedEmbedder::new(embedder, NonZeroUsize::new(CACHE_ENTRIES).expect("non-zero")))
}

/// An OpenAI-compatible client whose key comes from the vault at the
/// first embedding, so fs-engine starts before the vault is unsealed. The
/// key lives only in this process's memory.
struct VaultKeyed {
    config: OpenAiConfig,
    secret: String,
    secrets: SecretSource,
    model_id: String,
    client: Mutex<Option<Arc<OpenAiEmbedder>>>,
}

impl Embedder for VaultKeyed {
    fn dimension(&self) -> usize {
        self.config.dimension
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let client = {
            let mut slot = self.client.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match &*slot {
                Some(client) => client.clone(),
                None => {
                    // Fail closed: without its key nothing is sent.
                    let key = (self.secrets)(&self.secret).map_err(|reason| EmbedError::Http {
                        url: self.config.base_url.clone(),
                        reason: format!("API key `{}` from the vault: {reason}", self.secret),
                    })?;
                    let client = Arc::new(OpenAiEmbedder::new(self.config.clone(), Some(key)));
                    *slot = Some(client.clone());
                    client
                }
            }
        };
        client.embed(texts)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    use super::*;

    /// A one-request OpenAI-compatible server that records the Authorization header.
    fn embeddings_server(dimension: usize) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut authorization, mut length) = (String::new(), 0usize);
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let lower = line.to_ascii_lowercase();
                if let Some(value) = lower.strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                if lower.starts_with("authorization:") {
                    authorization = line["authorization:".len()..].trim().to_owned();
                }
                if line == "\r\n" {
                    break;
                }
            }
            reader.read_exact(&mut vec![0; length]).unwrap();
            let vector = vec![0.5f32; dimension];
            let body = serde_json::json!({ "object": "list", "data": [{ "object": "embedding", "index": 0, "embedding": vector }] }).to_string();
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            authorization
        });
        (url, handle)
    }

    fn openai(url: &str, secret: Option<&str>) -> EmbedderConfig {
        let text = format!(
            "kind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"text-embedding-3-small\"\ndimension = 8\n{}",
            secret.map(|s| format!("api_key_secret = \"{s}\"")).unwrap_or_default()
        );
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn the_openai_key_comes_from_the_vault_at_first_use() {
        let (url, server) = embeddings_server(8);
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let secrets: SecretSource = Arc::new(move |name: &str| {
            log.lock().unwrap().push(name.to_owned());
            Ok("sk-from-vault".to_owned())
        });
        let embedder = build(&openai(&url, Some("embedder-openai")), 8, secrets).unwrap();
        assert!(asked.lock().unwrap().is_empty(), "nothing is read before it is needed");
        let vectors = embedder.embed(&["hello"]).unwrap();
        assert_eq!(vectors, vec![vec![0.5; 8]]);
        assert_eq!(server.join().unwrap(), "Bearer sk-from-vault");
        assert_eq!(*asked.lock().unwrap(), ["embedder-openai"]);
    }

    #[test]
    fn without_its_key_nothing_is_sent() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        listener.set_nonblocking(true).unwrap();
        let secrets: SecretSource = Arc::new(|_: &str| Err("the vault is sealed".to_owned()));
        let embedder = build(&openai(&url, Some("embedder-openai")), 8, secrets).unwrap();
        let error = embedder.embed(&["hello"]).unwrap_err().to_string();
        assert!(error.contains("the vault is sealed") && error.contains("embedder-openai"), "{error}");
        assert!(listener.accept().is_err(), "no connection was made");
    }

    #[test]
    fn config_kinds_parse_and_unknown_keys_are_refused() {
        assert!(matches!(toml::from_str::<EmbedderConfig>("kind = \"hashing\"").unwrap(), EmbedderConfig::Hashing));
        match toml::from_str::<EmbedderConfig>("kind = \"minilm\"").unwrap() {
            EmbedderConfig::Minilm { model_dir } => assert_eq!(model_dir, PathBuf::from(minilm::IMAGE_MODEL_DIR)),
            other => panic!("{other:?}"),
        }
        assert!(toml::from_str::<EmbedderConfig>("kind = \"minilm\"\nmodel = \"x\"").is_err());
        assert!(toml::from_str::<EmbedderConfig>("kind = \"word2vec\"").is_err());
        let missing = build(
            &EmbedderConfig::Minilm { model_dir: "/nonexistent".into() },
            384,
            Arc::new(|_: &str| Err(String::new())),
        );
        assert!(missing.err().unwrap().contains("/nonexistent"));
    }
}

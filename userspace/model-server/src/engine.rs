//! The model itself: loading the GGUF file, its tokenizer, the ChatML
//! prompt, and generating an answer token by token. Knows nothing of HTTP:
//! the server hands it a [`Generation`] and a sink for its [`Progress`].

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, Tokenizer};

use crate::llama::{Llama, MAX_SEQ_LEN};
use crate::prefix::Prefixes;

/// GGUF token type of control tokens (`<|im_start|>`, `<|endoftext|>`...).
const TOKEN_TYPE_CONTROL: i32 = 3;
/// The prompt goes through the model this many tokens at a time: one pass
/// over a 4,000-token prompt would hold a 9 × 4000 × 4000 attention matrix
/// (over 500 MB); chunks keep it under 40 MB (smaller ones made the
/// prompt 15-20% slower here, for 25 MB less at the peak).
pub const PREFILL_CHUNK: usize = 256;

/// System turns whose state is kept ([`Model::generate`]), most recently
/// used first, and the tokens they may hold together: each token's KV
/// cache is 30 layers x (keys + values) x 3 heads x 64 f32 values, 45 KiB,
/// so 2,048 tokens are 90 MiB of the unit's 896 MiB.
const SYSTEM_STATES: usize = 4;
const SYSTEM_STATE_TOKENS: usize = 2048;

/// candle's switch (read by each thread when it first builds a matrix
/// product) that keeps the weights as f16 instead of multiplying with the
/// file's 4-bit blocks. See [`choose_weights`].
const F16_SWITCH: &str = "CANDLE_DEQUANTIZE_ALL_F16";
/// The system prompt the model's own chat template puts first when the
/// messages have none (`tokenizer.chat_template` of the GGUF file).
/// The loop guard (specs/agent/local-model.md, "How it runs"): an answer
/// that says the same span of 2 to 48 tokens twice in a row, whose text has
/// a letter and at least 8 characters, ends there. A small model that starts
/// repeating itself ("I'm a human. I'm a human. ...") does not stop by
/// itself until `max_tokens`; legitimate text rarely repeats a phrase of
/// that length back to back, and a table rule or an ellipsis has no letter.
const LOOP_SPAN_TOKENS: std::ops::RangeInclusive<usize> = 2..=48;
const LOOP_SPAN_CHARS: usize = 8;

/// Whether `answer` ends with a span it said just before (see
/// [`LOOP_SPAN_TOKENS`]).
fn repeats_itself(tokenizer: &Tokenizer, answer: &[u32]) -> bool {
    let n = answer.len();
    LOOP_SPAN_TOKENS.filter(|&span| 2 * span <= n).any(|span| {
        answer[n - span..] == answer[n - 2 * span..n - span]
            && tokenizer.decode(&answer[n - span..], true).is_ok_and(|text| {
                text.trim().chars().count() >= LOOP_SPAN_CHARS && text.chars().any(char::is_alphabetic)
            })
    })
}

pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// The model could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the model in {dir}: {reason}")]
pub struct LoadError {
    dir: PathBuf,
    reason: String,
}

/// One message of the conversation, as the ChatML template takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    pub content: String,
}

/// How to answer: already validated by the API layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// Tokens of answer at most (cut further to what the context leaves).
    pub max_tokens: usize,
    /// 0 (or below 1e-7) is greedy.
    pub temperature: f64,
    /// Nucleus sampling; None or 1.0 is off.
    pub top_p: Option<f64>,
    pub seed: u64,
    /// The answer ends before the first of these strings (not included).
    pub stop: Vec<String>,
    /// Added to the logit of a token id before sampling (-100 bans it).
    pub logit_bias: HashMap<u32, f32>,
    /// OpenAI's penalties over the tokens of the answer so far.
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
}

/// Why an answer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The model ended its turn, or a stop string came.
    Stop,
    /// The answer repeated itself and was ended there (the loop guard,
    /// [`LOOP_SPAN_TOKENS`]): `stop` to the client, its own name in the
    /// journal, so a check can tell it from the model's own end.
    Repeated,
    /// `max_tokens` (or the context window) was reached.
    Length,
    /// The sink refused more: the client went away.
    Cancelled,
}

impl Finish {
    /// OpenAI's `finish_reason` (a cancelled answer has no client to see one).
    pub fn reason(self) -> &'static str {
        match self {
            Finish::Stop | Finish::Repeated => "stop",
            Finish::Length | Finish::Cancelled => "length",
        }
    }
}

/// What a generation tells its caller as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// `done` of the prompt's `total` new tokens are through the model and
    /// more are coming (a long prompt takes seconds before the first token).
    Prompt { done: usize, total: usize },
    /// The next piece of the answer's text.
    Text(&'a str),
}

/// What an answer cost and how fast it came.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    pub finish: Finish,
    pub prompt_tokens: usize,
    /// Tokens at the start of the prompt whose state the last answer left
    /// (not run through the model again).
    pub cached_tokens: usize,
    pub completion_tokens: usize,
    /// From the start of the prompt's forward pass to the first token sampled.
    pub time_to_first_token: Duration,
    /// The whole generation, prompt included.
    pub elapsed: Duration,
}

/// A generation failed in the middle (a candle error: not expected with a
/// model that loaded).
#[derive(Debug, thiserror::Error)]
#[error("generation failed: {0}")]
pub struct GenerateError(String);

impl From<candle_core::Error> for GenerateError {
    fn from(error: candle_core::Error) -> Self {
        GenerateError(error.to_string())
    }
}

/// The loaded model: weights, tokenizer and the token ids that matter.
pub struct Model {
    /// Never run itself: a conversation runs a clone (the tensors are
    /// shared), with its own KV cache.
    weights: Llama,
    weights_kept: Weights,
    /// System turns' states on disk ([`crate::prefix`]).
    prefixes: Prefixes,
    /// The last answer's state, for a prompt that continues it.
    last: std::sync::Mutex<Option<State>>,
    /// The states of recent system turns, for a new conversation that
    /// starts with one of them.
    systems: std::sync::Mutex<VecDeque<State>>,
    tokenizer: Tokenizer,
    im_start: u32,
    im_end: u32,
    /// Tokens that end the answer: `<|im_end|>`, the file's EOS, `<|endoftext|>`, `<|im_start|>`.
    stop_tokens: Vec<u32>,
    vocab_size: usize,
    context: usize,
    device: Device,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Model")
            .field("vocab_size", &self.vocab_size)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

/// How the weights are kept in memory, chosen once per process by
/// [`choose_weights`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// Expanded to f16 at load: answers as good as the f32 model's.
    F16,
    /// The file's own 4-bit blocks.
    Quantized,
}

impl Weights {
    /// For logs and `/health`.
    pub fn name(self) -> &'static str {
        match self {
            Weights::F16 => "f16",
            Weights::Quantized => "q4_1",
        }
    }
}

/// Chooses how candle keeps the weights, before anything is loaded.
///
/// Multiplying with the file's 4-bit blocks means quantizing every
/// activation to 8 bits per 32 values, which this small model does not
/// survive: greedy answers drift into repetition and nonsense ("What is the
/// capital of France?" got a list of French words, never Paris), where f16
/// weights answer as the f32 model does, and on a CPU with F16C and AVX2
/// (every x86-64 since 2013) also sooner (candle's Q4_1 dot product has no
/// SIMD version), for about 180 MB more memory. Without them (QEMU's
/// default `qemu64` CPU under emulation) f16 arithmetic is done in software
/// and the 4-bit blocks answer eight times sooner, so they are kept
/// (`specs/agent/local-model.md`). `CANDLE_DEQUANTIZE_ALL_F16`, candle's
/// switch, decides when it is set (`1` f16, `0` 4-bit).
///
/// candle reads that variable when a thread first builds a matrix product,
/// so this sets it: [`Model::load`] calls it, and `main` before any thread
/// starts.
pub fn choose_weights() -> Weights {
    static CHOSEN: std::sync::OnceLock<Weights> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| match std::env::var(F16_SWITCH) {
        Ok(value) if !value.is_empty() && value != "0" => Weights::F16,
        Ok(_) => Weights::Quantized,
        Err(_) if fast_f16() => {
            std::env::set_var(F16_SWITCH, "1");
            Weights::F16
        }
        Err(_) => Weights::Quantized,
    })
}

#[cfg(target_arch = "x86_64")]
fn fast_f16() -> bool {
    std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx2")
}

#[cfg(not(target_arch = "x86_64"))]
fn fast_f16() -> bool {
    true
}

/// The one `.gguf` file of `dir`.
pub fn gguf_path(dir: &Path) -> Result<PathBuf, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list it: {e}"))?;
    let mut found = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("cannot list it: {e}"))?.path();
        if path.extension().is_some_and(|ext| ext == "gguf") {
            found.push(path);
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err("no .gguf file (run `make models`)".into()),
        _ => Err(format!("{} .gguf files, expected one", found.len())),
    }
}

impl Model {
    /// Loads the single `.gguf` file of `dir`: weights, vocabulary, merges;
    /// the system turns' states it computes are not kept on disk.
    pub fn load(dir: &Path) -> Result<Self, LoadError> {
        Self::load_with_cache(dir, None)
    }

    /// As [`Model::load`], keeping the system turns' states it computes in
    /// `cache`, a directory and its cap in bytes ([`crate::prefix`]).
    pub fn load_with_cache(dir: &Path, cache: Option<(PathBuf, u64)>) -> Result<Self, LoadError> {
        let weights_kept = choose_weights();
        let fail = |reason: String| LoadError { dir: dir.to_owned(), reason };
        let path = gguf_path(dir).map_err(fail)?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let fail_file = |reason: String| fail(format!("{name}: {reason}"));
        let mut file = std::io::BufReader::new(std::fs::File::open(&path).map_err(|e| fail_file(e.to_string()))?);
        let content = gguf_file::Content::read(&mut file).map_err(|e| fail_file(e.to_string()))?;
        let metadata = &content.metadata;
        let get = |key: &str| metadata.get(key).ok_or_else(|| fail_file(format!("no {key} in its metadata")));
        let architecture = get("general.architecture")?.to_string().map_err(|e| fail_file(e.to_string()))?;
        if architecture != "llama" {
            return Err(fail_file(format!("architecture {architecture}, not llama")));
        }
        let template = get("tokenizer.chat_template")?.to_string().map_err(|e| fail_file(e.to_string()))?;
        if !template.contains("<|im_start|>") {
            return Err(fail_file("its chat template is not ChatML".into()));
        }
        let (tokenizer, vocab_size) = tokenizer_from_gguf(metadata).map_err(fail_file)?;
        let id = |token: &str| {
            tokenizer.token_to_id(token).ok_or_else(|| fail_file(format!("no {token} in its vocabulary")))
        };
        let im_start = id("<|im_start|>")?;
        let im_end = id("<|im_end|>")?;
        let mut stop_tokens = vec![im_end, im_start];
        if let Some(eos) = metadata.get("tokenizer.ggml.eos_token_id").and_then(|v| v.to_u32().ok()) {
            stop_tokens.push(eos);
        }
        if let Some(end_of_text) = tokenizer.token_to_id("<|endoftext|>") {
            stop_tokens.push(end_of_text);
        }
        stop_tokens.sort_unstable();
        stop_tokens.dedup();
        let trained = get("llama.context_length")?.to_u32().map_err(|e| fail_file(e.to_string()))? as usize;
        let device = Device::Cpu;
        // The file's hash names its states; read beside the weights (the
        // page cache serves both).
        let (weights, sha256) = std::thread::scope(|scope| {
            let sha256 = scope.spawn(|| crate::prefix::file_sha256(&path));
            let weights = Llama::from_gguf(content, &mut file, &device);
            (weights, sha256.join())
        });
        let weights = weights.map_err(|e| fail_file(e.to_string()))?;
        let sha256 = sha256
            .map_err(|_| fail_file("hashing it panicked".into()))?
            .map_err(|e| fail_file(format!("hashing it: {e}")))?;
        Ok(Model {
            weights,
            weights_kept,
            prefixes: Prefixes::new(sha256, weights_kept.name(), dir, cache),
            last: std::sync::Mutex::new(None),
            systems: std::sync::Mutex::new(VecDeque::new()),
            tokenizer,
            im_start,
            im_end,
            stop_tokens,
            vocab_size,
            // candle precomputes RoPE for MAX_SEQ_LEN positions only.
            context: trained.min(MAX_SEQ_LEN),
            device,
        })
    }

    /// Tokens of the vocabulary (valid `logit_bias` keys are below).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// How the weights are kept.
    pub fn weights(&self) -> Weights {
        self.weights_kept
    }

    /// The context window: prompt and answer together.
    pub fn context(&self) -> usize {
        self.context
    }

    /// The tokenizer built from the file (for tests and the benchmark).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The ChatML prompt of `messages` as the model's template renders it,
    /// with the assistant's turn opened. The control tokens are put in by
    /// id and message text is tokenized with special tokens off, so text
    /// that spells `<|im_end|>` cannot end a turn or fake a role.
    pub fn prompt(&self, messages: &[Message]) -> Result<Vec<u32>, String> {
        let encode = |text: &str| -> Result<Vec<u32>, String> {
            Ok(self.tokenizer.encode_fast(text, false).map_err(|e| format!("tokenizing: {e}"))?.get_ids().to_vec())
        };
        let newline = encode("\n")?;
        let mut ids = Vec::new();
        let mut turn = |role: &str, content: &str| -> Result<(), String> {
            ids.push(self.im_start);
            ids.extend(encode(&format!("{role}\n{content}"))?);
            ids.push(self.im_end);
            ids.extend(&newline);
            Ok(())
        };
        if messages.first().is_none_or(|m| m.role != "system") {
            turn("system", DEFAULT_SYSTEM_PROMPT)?;
        }
        for message in messages {
            turn(&message.role, &message.content)?;
        }
        ids.push(self.im_start);
        ids.extend(encode("assistant\n")?);
        Ok(ids)
    }

    /// Answers the prompt: each piece of text goes to `sink` as soon as it
    /// is final, and so does the progress through a long prompt; when
    /// `sink` answers false (its client went away) the generation stops at
    /// once with [`Finish::Cancelled`].
    ///
    /// The state of the last answer (its KV cache and the tokens in it) is
    /// kept: a prompt that continues it (the same conversation with the
    /// answer and a new message appended, as a chat or an agent's next step
    /// sends) runs only its new tokens through the model, instead of the
    /// whole conversation again (1,000 tokens take seconds here). So is
    /// the state at the end of each recent system turn: a new conversation
    /// of the same agent (a new session, a scheduled turn, a heartbeat)
    /// starts with the same system prompt, and runs only what follows it.
    pub fn generate(
        &self,
        prompt: &[u32],
        params: &Generation,
        sink: &mut dyn FnMut(Progress<'_>) -> bool,
    ) -> Result<Outcome, GenerateError> {
        let started = Instant::now();
        if prompt.is_empty() || prompt.len() >= self.context {
            return Err(GenerateError(format!("a prompt of {} tokens", prompt.len())));
        }
        let continues = |state: &State| state.fed.len() < prompt.len() && prompt.starts_with(&state.fed);
        let last = self.last.lock().ok().and_then(|mut last| last.take());
        let mut state = match last {
            Some(state) if continues(&state) => state,
            other => {
                // Another conversation's cache goes before this one grows.
                drop(other);
                self.systems
                    .lock()
                    .ok()
                    .and_then(|mut systems| {
                        let position = systems.iter().position(continues)?;
                        let system = systems.remove(position)?;
                        // A clone shares the cache's tensors, which the
                        // conversation's next tokens do not change.
                        let state = system.clone();
                        systems.push_front(system);
                        Some(state)
                    })
                    .or_else(|| self.system_from_file(prompt))
                    // A clone of the weights shares their tensors: an empty cache.
                    .unwrap_or_else(|| State { weights: self.weights.clone(), fed: Vec::new() })
            }
        };
        let outcome = self.run(&mut state, prompt, params, sink, started)?;
        // Kept only when it is whole: a failed step may have left half a
        // token in the cache.
        if let Ok(mut last) = self.last.lock() {
            *last = Some(state);
        }
        Ok(outcome)
    }

    /// Where the prompt's system turn ends: where the next turn's
    /// `<|im_start|>` is. Message text cannot hold the control token
    /// ([`Model::prompt`] puts it in by id), so the second one opens the
    /// turn after the system's.
    fn system_end(&self, prompt: &[u32]) -> Option<usize> {
        let (&first, rest) = prompt.split_first()?;
        if first != self.im_start {
            return None;
        }
        rest.iter().position(|&token| token == self.im_start).map(|at| at + 1)
    }

    /// The state of `prompt`'s system turn from its file, if one holds it
    /// and something follows the turn; kept in memory as a computed one.
    fn system_from_file(&self, prompt: &[u32]) -> Option<State> {
        let end = self.system_end(prompt).filter(|&end| end < prompt.len())?;
        let fed = prompt[..end].to_vec();
        let weights = self.prefixes.load(&fed, &self.weights)?;
        let state = State { weights, fed };
        self.remember_system(&state);
        Some(state)
    }

    /// The state of a system turn saying `content`, computed and written
    /// to `dir` under the name a conversation starting with that turn
    /// looks for (the image's states: `clawos-model-server --prefill`).
    pub fn write_system_state(&self, content: &str, dir: &Path) -> Result<PathBuf, String> {
        let message = Message { role: "system".into(), content: content.into() };
        let prompt = self.prompt(&[message])?;
        let end = self.system_end(&prompt).ok_or("the prompt has no system turn")?;
        let fed = &prompt[..end];
        let mut weights = self.weights.clone();
        let input = Tensor::new(fed, &self.device).and_then(|t| t.unsqueeze(0)).map_err(|e| e.to_string())?;
        weights.forward(&input, 0).map_err(|e| e.to_string())?;
        let cache = weights.kv_cache().ok_or("no state after the turn")?;
        crate::prefix::write(dir, &self.prefixes.file_name(fed), fed, &cache)
    }

    /// Keeps `state`, which has just read a system turn, in memory
    /// ([`Model::remember_system`]) and on disk: written by a thread of its
    /// own, so the answer does not wait for the disk.
    fn keep_system(&self, state: &State) {
        self.remember_system(state);
        if let Some(cache) = state.weights.kv_cache() {
            let (prefixes, fed) = (self.prefixes.clone(), state.fed.clone());
            std::thread::spawn(move || prefixes.keep(&fed, &cache));
        }
    }

    /// Keeps `state` in memory, most recently used first; the oldest go
    /// beyond [`SYSTEM_STATES`] states or [`SYSTEM_STATE_TOKENS`] tokens
    /// in all.
    fn remember_system(&self, state: &State) {
        let Ok(mut systems) = self.systems.lock() else { return };
        systems.retain(|kept| kept.fed != state.fed);
        systems.push_front(state.clone());
        while systems.len() > SYSTEM_STATES
            || systems.iter().map(|kept| kept.fed.len()).sum::<usize>() > SYSTEM_STATE_TOKENS
        {
            systems.pop_back();
        }
    }

    fn run(
        &self,
        state: &mut State,
        prompt: &[u32],
        params: &Generation,
        sink: &mut dyn FnMut(Progress<'_>) -> bool,
        started: Instant,
    ) -> Result<Outcome, GenerateError> {
        let cached_tokens = state.fed.len();
        let max_tokens = params.max_tokens.min(self.context - prompt.len());
        let mut sampler =
            LogitsProcessor::new(params.seed, Some(params.temperature), params.top_p.filter(|p| *p < 1.0));
        let mut text = TextStream::new(&params.stop);
        let mut answer: Vec<u32> = Vec::new();
        let mut counts: HashMap<u32, u32> = HashMap::new();
        let outcome = |finish, answer: &[u32], ttft: Option<Duration>| Outcome {
            finish,
            prompt_tokens: prompt.len(),
            cached_tokens,
            completion_tokens: answer.len(),
            time_to_first_token: ttft.unwrap_or_else(|| started.elapsed()),
            elapsed: started.elapsed(),
        };
        let total = prompt.len() - cached_tokens;
        let system_end = self.system_end(prompt).filter(|&end| end > cached_tokens);
        let mut logits = None;
        while state.fed.len() < prompt.len() {
            let start = state.fed.len();
            // Chunks end every PREFILL_CHUNK new tokens (progress is said
            // there) and where the system turn does, so its state is kept.
            let aligned = cached_tokens + ((start - cached_tokens) / PREFILL_CHUNK + 1) * PREFILL_CHUNK;
            let end = match system_end {
                Some(system_end) if start < system_end => system_end.min(aligned),
                _ => aligned,
            }
            .min(prompt.len());
            let chunk = &prompt[start..end];
            let input = Tensor::new(chunk, &self.device)?.unsqueeze(0)?;
            logits = Some(state.weights.forward(&input, start)?);
            state.fed.extend_from_slice(chunk);
            if Some(end) == system_end {
                self.keep_system(state);
            }
            let done = end - cached_tokens;
            if done < total && end == aligned && !sink(Progress::Prompt { done, total }) {
                return Ok(outcome(Finish::Cancelled, &answer, None));
            }
        }
        let mut logits = logits.expect("at least one new prompt token").squeeze(0)?;
        let mut time_to_first_token = None;
        loop {
            if !params.logit_bias.is_empty() || params.frequency_penalty != 0.0 || params.presence_penalty != 0.0 {
                let mut values = logits.to_vec1::<f32>()?;
                for (&token, &bias) in &params.logit_bias {
                    if let Some(value) = values.get_mut(token as usize) {
                        *value += bias;
                    }
                }
                for (&token, &count) in &counts {
                    if let Some(value) = values.get_mut(token as usize) {
                        *value -= params.presence_penalty + params.frequency_penalty * count as f32;
                    }
                }
                logits = Tensor::from_vec(values, logits.shape(), &self.device)?;
            }
            let token = sampler.sample(&logits)?;
            time_to_first_token.get_or_insert_with(|| started.elapsed());
            let end = if self.stop_tokens.contains(&token) {
                Some(Finish::Stop)
            } else {
                answer.push(token);
                *counts.entry(token).or_default() += 1;
                match text.push(&self.tokenizer, &answer)? {
                    Piece::Text(piece) => {
                        if !piece.is_empty() && !sink(Progress::Text(&piece)) {
                            return Ok(outcome(Finish::Cancelled, &answer, time_to_first_token));
                        }
                        if repeats_itself(&self.tokenizer, &answer) {
                            Some(Finish::Repeated)
                        } else {
                            (answer.len() >= max_tokens).then_some(Finish::Length)
                        }
                    }
                    Piece::Stop(piece) => {
                        if !piece.is_empty() && !sink(Progress::Text(&piece)) {
                            return Ok(outcome(Finish::Cancelled, &answer, time_to_first_token));
                        }
                        return Ok(outcome(Finish::Stop, &answer, time_to_first_token));
                    }
                }
            };
            if let Some(finish) = end {
                // What was held back (an unfinished character, the start of
                // a stop string that did not come).
                let rest = text.finish(&self.tokenizer, &answer)?;
                if !rest.is_empty() && !sink(Progress::Text(&rest)) {
                    return Ok(outcome(Finish::Cancelled, &answer, time_to_first_token));
                }
                return Ok(outcome(finish, &answer, time_to_first_token));
            }
            let input = Tensor::new(&[token], &self.device)?.unsqueeze(0)?;
            logits = state.weights.forward(&input, state.fed.len())?.squeeze(0)?;
            state.fed.push(token);
        }
    }
}

/// A conversation's state in the model: the KV cache of `weights` holds
/// exactly the tokens of `fed`, at positions 0..fed.len().
#[derive(Clone)]
struct State {
    weights: Llama,
    fed: Vec<u32>,
}

/// The tokenizer described by the GGUF metadata: GPT-2 style byte-level
/// BPE over `tokenizer.ggml.tokens` and `tokenizer.ggml.merges`, with the
/// pre-tokenizer llama.cpp uses for `tokenizer.ggml.pre = smollm` (every
/// digit alone, then the GPT-2 split), as SmolLM2's own tokenizer.json has
/// it. Control tokens (type 3) are special: skipped when decoding, and
/// never matched in text (message text is data, not markup). Also answers
/// the vocabulary's size.
fn tokenizer_from_gguf(metadata: &HashMap<String, gguf_file::Value>) -> Result<(Tokenizer, usize), String> {
    let get = |key: &str| metadata.get(key).ok_or_else(|| format!("no {key} in its metadata"));
    let model = get("tokenizer.ggml.model")?.to_string().map_err(|e| e.to_string())?;
    if model != "gpt2" {
        return Err(format!("tokenizer.ggml.model is {model}, not gpt2 (byte-level BPE)"));
    }
    let strings = |key: &str| -> Result<Vec<String>, String> {
        get(key)?
            .to_vec()
            .map_err(|e| format!("{key}: {e}"))?
            .iter()
            .map(|v| v.to_string().cloned().map_err(|e| format!("{key}: {e}")))
            .collect()
    };
    let tokens = strings("tokenizer.ggml.tokens")?;
    let merges = strings("tokenizer.ggml.merges")?
        .into_iter()
        .map(|merge| {
            merge
                .split_once(' ')
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .ok_or_else(|| format!("merge {merge:?} is not two tokens"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let types = match metadata.get("tokenizer.ggml.token_type") {
        Some(value) => value.to_vec().map_err(|e| e.to_string())?.iter().map(|v| v.to_i32().unwrap_or(1)).collect(),
        None => vec![1; tokens.len()],
    };
    let vocab: Vocab = tokens.iter().enumerate().map(|(id, token)| (token.clone(), id as u32)).collect();
    if vocab.len() != tokens.len() {
        return Err("tokenizer.ggml.tokens repeats a token".into());
    }
    let bpe = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(|e| format!("BPE: {e}"))?;
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(PreTokenizerWrapper::Sequence(Sequence::new(vec![
        PreTokenizerWrapper::Digits(Digits::new(true)),
        PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
    ]))));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    let special: Vec<AddedToken> = tokens
        .iter()
        .zip(&types)
        .filter(|(_, kind)| **kind == TOKEN_TYPE_CONTROL)
        .map(|(token, _)| AddedToken::from(token.clone(), true))
        .collect();
    tokenizer.add_special_tokens(special).map_err(|e| format!("special tokens: {e}"))?;
    // Special tokens in text are encoded as the text they spell.
    tokenizer.set_encode_special_tokens(true);
    Ok((tokenizer, tokens.len()))
}

/// The answer's text as it may be shown: decoded from all tokens so far
/// (byte-level BPE splits characters across tokens, so a token alone is
/// not text), less an incomplete character at the end and anything that
/// may be the start of a stop string.
struct TextStream<'a> {
    stop: &'a [String],
    /// Bytes of the decoded answer already given out.
    shown: usize,
}

enum Piece {
    /// More text; the answer goes on.
    Text(String),
    /// The text before a stop string: the answer ends.
    Stop(String),
}

impl<'a> TextStream<'a> {
    fn new(stop: &'a [String]) -> Self {
        TextStream { stop, shown: 0 }
    }

    fn decode(tokenizer: &Tokenizer, answer: &[u32]) -> Result<String, GenerateError> {
        tokenizer.decode(answer, true).map_err(|e| GenerateError(format!("decoding: {e}")))
    }

    fn push(&mut self, tokenizer: &Tokenizer, answer: &[u32]) -> Result<Piece, GenerateError> {
        let text = Self::decode(tokenizer, answer)?;
        if let Some(at) = self.stop.iter().filter_map(|stop| text.find(stop.as_str())).min() {
            let piece = text.get(self.shown..at).unwrap_or_default().to_owned();
            self.shown = text.len();
            return Ok(Piece::Stop(piece));
        }
        // An incomplete UTF-8 sequence at the end decodes as U+FFFD until
        // the tokens that complete it come.
        let mut end = text.trim_end_matches('\u{FFFD}').len();
        // Hold back the longest end that a stop string starts with.
        let kept = end;
        for stop in self.stop {
            let prefixes: Vec<usize> = stop.char_indices().skip(1).map(|(cut, _)| cut).collect();
            if let Some(cut) = prefixes.into_iter().rev().find(|&cut| text[..kept].ends_with(&stop[..cut])) {
                end = end.min(kept - cut);
            }
        }
        let end = end.max(self.shown);
        let piece = text.get(self.shown..end).unwrap_or_default().to_owned();
        self.shown = end;
        Ok(Piece::Text(piece))
    }

    /// Whatever was held back, when the answer ends for another reason.
    fn finish(&mut self, tokenizer: &Tokenizer, answer: &[u32]) -> Result<String, GenerateError> {
        let text = Self::decode(tokenizer, answer)?;
        let piece = text.get(self.shown..).unwrap_or_default().to_owned();
        self.shown = text.len();
        Ok(piece)
    }
}

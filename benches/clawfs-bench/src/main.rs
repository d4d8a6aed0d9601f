//! `clawfs-bench`: one ClawFS workspace at scale (issue 8's benchmark).
//!
//! - `--vectors synthetic` (default): 100,000 generated Markdown notes with
//!   clustered synthetic vectors (1536 dimensions by default: cluster
//!   centres plus noise, not uniform noise, so neighbours exist);
//! - `--vectors minilm`: notes of the same shape, written with whole words
//!   of the model's vocabulary, embedded by all-MiniLM-L6-v2 (384
//!   dimensions; the embedding time is reported on its own).
//!
//! Reports insert throughput (SQLite + FTS5 + HNSW, embedding excluded),
//! p50/p95 of keyword, vector and hybrid top-10 queries, recall@10 of the
//! vector leg against exact (brute-force) search, the time to open the
//! workspace with its persisted index, and the size on disk. Those queries
//! come with their vectors (a stored note's plus noise), so they time the
//! search alone. With `--vectors minilm` it also runs held-out queries the
//! way fs-engine serves `memory_search`: a question in words of one topic,
//! written fresh (no stored note holds it), embedded by the model at query
//! time; it reports that end-to-end latency and, per leg, how many of the
//! top 10 are notes of the question's topic.
//!
//! Run: `cargo run --release -p clawos-clawfs-bench -- --help`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use clawfs::chunk::{chunk_id, Chunk};
use clawfs::{Clawfs, Config, EmbedError, Embedder, Fusion, HnswParams, LegReport, MemoryIndex, SearchRequest};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Vectors {
    /// Clustered synthetic vectors.
    Synthetic,
    /// all-MiniLM-L6-v2 on the generated text (384 dimensions).
    Minilm,
}

#[derive(Parser)]
#[command(about = "ClawFS memory search at scale")]
struct Cli {
    /// Documents in the workspace.
    #[arg(long, default_value_t = 100_000)]
    documents: usize,
    /// Where the vectors come from.
    #[arg(long, value_enum, default_value_t = Vectors::Synthetic)]
    vectors: Vectors,
    /// Dimension of synthetic vectors.
    #[arg(long, default_value_t = 1536)]
    dimension: usize,
    /// Clusters of synthetic vectors (and topics of the text).
    #[arg(long, default_value_t = 200)]
    clusters: usize,
    /// Queries per kind.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// The model directory for `--vectors minilm`.
    #[arg(long, default_value = "out/models/all-minilm-l6-v2")]
    model_dir: PathBuf,
    /// HNSW ef_construction of the workspace (spec range 100..=1000).
    #[arg(long, default_value_t = HnswParams::default().ef_construction)]
    ef_construction: usize,
    /// Write synthetic-vector notes with the model's whole words too (the
    /// vocabulary of `--vectors minilm`, without embedding them).
    #[arg(long)]
    model_words: bool,
    /// Where to build the workspace (a temporary directory by default).
    #[arg(long)]
    dir: Option<PathBuf>,
}

const TOPIC_WORDS: usize = 12;
/// Opens of the finished workspace timed for the open-time figure.
const OPENS: usize = 5;
const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "ba", "di", "fu", "ge", "ho", "ju", "ki", "ma", "no",
    "pe", "qui", "ro", "su", "te",
];
/// Word numbers below this are the shared vocabulary; topics' words follow.
const SHARED_WORDS: usize = 1000;

/// The words notes are made of: word `n` of a vocabulary.
enum Words {
    /// A pronounceable made-up word per number, so the FTS index sees a real
    /// vocabulary of any size.
    Syllables,
    /// Whole words of the embedding model's own vocabulary, frequent ones
    /// first. A made-up word splits into several word pieces; these are one
    /// token each, which made embedding 2.5 times faster here (13 to 33
    /// notes/s), and the text is closer to what the model was trained on.
    Model(Vec<String>),
}

impl Words {
    /// The lowercase ASCII words of at least 3 letters in a WordPiece
    /// `tokenizer.json`, by token id (BERT's vocabulary is roughly in
    /// frequency order).
    fn of_model(model_dir: &Path, clusters: usize) -> anyhow::Result<Words> {
        let path = model_dir.join("tokenizer.json");
        let tokenizer: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?)?;
        let vocabulary =
            tokenizer["model"]["vocab"].as_object().with_context(|| format!("{}: no model.vocab", path.display()))?;
        let mut words: Vec<(u64, &String)> = vocabulary
            .iter()
            .filter(|(word, _)| word.len() >= 3 && word.bytes().all(|b| b.is_ascii_lowercase()))
            .filter_map(|(word, id)| Some((id.as_u64()?, word)))
            .collect();
        words.sort_unstable();
        let needed = SHARED_WORDS + clusters * TOPIC_WORDS;
        anyhow::ensure!(words.len() >= needed, "{}: {} whole words, {needed} needed", path.display(), words.len());
        Ok(Words::Model(words.into_iter().map(|(_, word)| word.clone()).collect()))
    }

    fn word(&self, mut n: usize) -> String {
        match self {
            Words::Model(words) => words[n].clone(),
            Words::Syllables => {
                let mut word = String::new();
                loop {
                    word.push_str(SYLLABLES[n % SYLLABLES.len()]);
                    n /= SYLLABLES.len();
                    if n == 0 {
                        return word;
                    }
                }
            }
        }
    }

    /// Word `k` of `topic`'s own vocabulary.
    fn topic_word(&self, topic: usize, k: usize) -> String {
        self.word(SHARED_WORDS + topic * TOPIC_WORDS + k)
    }
}

/// Notes about `clusters` topics: each draws most words from its topic's
/// vocabulary and some from a shared one, like real notes.
fn generate_texts(words: &Words, documents: usize, clusters: usize, rng: &mut StdRng) -> (Vec<String>, Vec<usize>) {
    let mut texts = Vec::with_capacity(documents);
    let mut topics = Vec::with_capacity(documents);
    for n in 0..documents {
        let topic = rng.random_range(0..clusters);
        let body: Vec<String> = (0..rng.random_range(25..60))
            .map(|_| {
                if rng.random_bool(0.6) {
                    words.topic_word(topic, rng.random_range(0..TOPIC_WORDS))
                } else {
                    words.word(rng.random_range(0..SHARED_WORDS))
                }
            })
            .collect();
        texts.push(format!("# {} note {n}\n\n{}.\n", words.topic_word(topic, 0), body.join(" ")));
        topics.push(topic);
    }
    (texts, topics)
}

fn normalize(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    vector.iter_mut().for_each(|x| *x /= norm);
    vector
}

/// Cluster centre plus noise of 0.6x its scale per component: neighbours
/// within a cluster, clusters apart, and far from uniform noise.
fn synthetic_vectors(topics: &[usize], clusters: usize, dimension: usize, rng: &mut StdRng) -> Vec<Vec<f32>> {
    let unit = Normal::new(0.0f32, 1.0).expect("valid normal");
    let centres: Vec<Vec<f32>> = (0..clusters).map(|_| (0..dimension).map(|_| unit.sample(rng)).collect()).collect();
    topics.iter().map(|topic| normalize(centres[*topic].iter().map(|c| c + 0.6 * unit.sample(rng)).collect())).collect()
}

/// Answers each benchmark query with its precomputed vector, so query
/// latency measures the search, not an embedding model. It passes for the
/// model of the stored vectors, or the index would not run the vector leg.
struct QueryVectors {
    vectors: HashMap<String, Vec<f32>>,
    dimension: usize,
    model_id: String,
}

impl Embedder for QueryVectors {
    fn dimension(&self) -> usize {
        self.dimension
    }
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        texts
            .iter()
            .map(|text| {
                self.vectors.get(*text).cloned().ok_or_else(|| EmbedError::Model {
                    model: "clawfs-bench".into(),
                    reason: format!("unknown query {text}"),
                })
            })
            .collect()
    }
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 * p).ceil() as usize).saturating_sub(1)].as_secs_f64() * 1e3;
    (at(0.50), at(0.95))
}

fn size_of(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

/// Exact top-10 by cosine (vectors are unit length, so a dot product).
fn exact_top10(vectors: &[Vec<f32>], query: &[f32]) -> Vec<usize> {
    let mut scored: Vec<(f32, usize)> =
        vectors.iter().enumerate().map(|(n, v)| (v.iter().zip(query).map(|(a, b)| a * b).sum(), n)).collect();
    scored.select_nth_unstable_by(10, |a, b| b.0.total_cmp(&a.0));
    scored.truncate(10);
    scored.into_iter().map(|(_, n)| n).collect()
}

fn document_number(path: &str) -> usize {
    path.trim_start_matches("notes/").trim_end_matches(".md").parse().expect("bench paths are notes/<n>.md")
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut rng = StdRng::seed_from_u64(8);
    let words = match cli.vectors {
        Vectors::Synthetic if !cli.model_words => Words::Syllables,
        _ => Words::of_model(&cli.model_dir, cli.clusters)?,
    };
    let (texts, topics) = generate_texts(&words, cli.documents, cli.clusters, &mut rng);
    let model = match cli.vectors {
        Vectors::Minilm => Some(Arc::new(minilm::MiniLmEmbedder::load(&cli.model_dir)?)),
        Vectors::Synthetic => None,
    };
    let (vectors, dimension, model_id) = match &model {
        None => (
            synthetic_vectors(&topics, cli.clusters, cli.dimension, &mut rng),
            cli.dimension,
            "synthetic-clustered".to_owned(),
        ),
        Some(model) => {
            let started = Instant::now();
            let all: Vec<&str> = texts.iter().map(String::as_str).collect();
            // candle's matrix products use one core at this size: one
            // embedding thread per core.
            let threads = std::thread::available_parallelism().map_or(1, usize::from);
            let parts: Vec<&[&str]> = all.chunks(all.len().div_ceil(threads).max(1)).collect();
            let vectors = std::thread::scope(|scope| {
                let workers: Vec<_> = parts.iter().map(|part| scope.spawn(|| model.embed(part))).collect();
                workers
                    .into_iter()
                    .map(|worker| worker.join().expect("an embedding thread panicked"))
                    .collect::<Result<Vec<_>, _>>()
            })?
            .concat();
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "embedding (all-MiniLM-L6-v2, in-process): {} texts in {seconds:.1} s, {:.0} texts/s",
                texts.len(),
                texts.len() as f64 / seconds
            );
            (vectors, minilm::DIMENSION, minilm::MODEL_ID.to_owned())
        }
    };
    let temporary = tempfile::tempdir()?;
    let root = cli.dir.clone().unwrap_or_else(|| temporary.path().to_owned());
    let hnsw = HnswParams { ef_construction: cli.ef_construction, ..HnswParams::default() };
    let clawfs = Clawfs::new(Config { vector_dimension: dimension, hnsw, ..Config::new(&root) })?;
    clawfs.create_workspace("bench", "bench").context("a fresh --dir is needed")?;

    // Inserts: chunk rows, FTS5, vectors and HNSW, 1000 per transaction.
    let mut index = clawfs.open_memory("bench", None)?;
    let started = Instant::now();
    let mut batch = Vec::with_capacity(1000);
    for (n, (text, vector)) in texts.iter().zip(&vectors).enumerate() {
        let path = format!("notes/{n}.md");
        let heading = text.lines().next().unwrap_or("").trim_start_matches("# ").to_owned();
        batch.push((
            Chunk { id: chunk_id(&path, &heading, 0, text), path, heading, ordinal: 0, content: text.clone() },
            Some(vector.clone()),
        ));
        if batch.len() == 1000 || n + 1 == texts.len() {
            index.insert_embedded(std::mem::take(&mut batch), &model_id)?;
        }
    }
    index.save()?;
    let insert_seconds = started.elapsed().as_secs_f64();
    drop(index);
    println!(
        "{} documents, {dimension} dimensions ({model_id}), ef_construction {}: inserted in {insert_seconds:.1} s, {:.0} inserts/s",
        cli.documents,
        cli.ef_construction,
        cli.documents as f64 / insert_seconds
    );

    // Queries: two of a topic's words, and a vector near that topic: a
    // stored note's vector with noise added, for MiniLM runs too (the
    // query text is not embedded, so the vector leg measures search alone).
    let query_topics: Vec<usize> = (0..cli.queries).map(|_| rng.random_range(0..cli.documents)).collect();
    let query_texts: Vec<String> = query_topics
        .iter()
        .map(|n| format!("{} {}", words.topic_word(topics[*n], 1), words.topic_word(topics[*n], 2)))
        .collect();
    let query_vectors: Vec<Vec<f32>> = query_topics
        .iter()
        .map(|n| normalize(vectors[*n].iter().map(|x| x + 0.05 * rng.random_range(-1.0f32..1.0)).collect()))
        .collect();
    let lookup = QueryVectors {
        vectors: query_texts.iter().cloned().zip(query_vectors.iter().cloned()).collect(),
        dimension,
        model_id,
    };

    // Open times vary with what else the host does: the median of five.
    let lookup: Arc<dyn Embedder> = Arc::new(lookup);
    let mut opens = Vec::with_capacity(OPENS);
    for _ in 0..OPENS {
        let started = Instant::now();
        drop(clawfs.open_memory("bench", Some(lookup.clone()))?);
        opens.push(started.elapsed());
    }
    opens.sort_unstable();
    let open_ms = opens[OPENS / 2].as_secs_f64() * 1e3;
    let index: MemoryIndex = clawfs.open_memory("bench", Some(lookup))?;
    let keyword_only =
        SearchRequest { fusion: Fusion::Weighted { vector: 0.0, keyword: 1.0 }, ..SearchRequest::new("") };

    let time = |run: &dyn Fn(usize) -> anyhow::Result<()>| -> anyhow::Result<(f64, f64)> {
        let mut samples = Vec::with_capacity(cli.queries);
        for q in 0..cli.queries {
            let started = Instant::now();
            run(q)?;
            samples.push(started.elapsed());
        }
        Ok(percentiles(samples))
    };
    let keyword_index = clawfs.open_memory("bench", None)?;
    let keyword = time(&|q| {
        let response =
            keyword_index.search(&SearchRequest { query: query_texts[q].clone(), ..keyword_only.clone() })?;
        anyhow::ensure!(!response.results.is_empty(), "keyword query {} found nothing", query_texts[q]);
        Ok(())
    })?;
    let vector = time(&|q| {
        anyhow::ensure!(
            index.search_by_vector(&query_vectors[q], 10)?.len() == 10,
            "vector query {q} found fewer than 10"
        );
        Ok(())
    })?;
    let hybrid = time(&|q| {
        let response = index.search(&SearchRequest::new(query_texts[q].clone()))?;
        anyhow::ensure!(
            matches!((&response.keyword, &response.vector), (LegReport::Ran { .. }, LegReport::Ran { .. })),
            "hybrid query {} did not run both legs: {:?} / {:?}",
            query_texts[q],
            response.keyword,
            response.vector
        );
        anyhow::ensure!(response.results.len() == 10, "hybrid query {} found fewer than 10", query_texts[q]);
        Ok(())
    })?;
    let mut found = 0usize;
    for query in &query_vectors {
        let exact = exact_top10(&vectors, query);
        let approximate: Vec<usize> =
            index.search_by_vector(query, 10)?.iter().map(|hit| document_number(&hit.path)).collect();
        found += exact.iter().filter(|n| approximate.contains(n)).count();
    }
    let recall = found as f64 / (10 * cli.queries) as f64;
    let workspace_dir = clawfs.workspace_dir("bench")?;
    let bytes = size_of(&workspace_dir);

    println!("top-10 latency over {} queries each (p50 / p95):", cli.queries);
    println!("  keyword  {:>7.3} / {:>7.3} ms   (target p95 < 5 ms)", keyword.0, keyword.1);
    println!("  vector   {:>7.3} / {:>7.3} ms   (target p95 < 10 ms)", vector.0, vector.1);
    println!("  hybrid   {:>7.3} / {:>7.3} ms   (target p95 < 15 ms)", hybrid.0, hybrid.1);
    println!("recall@10 of the vector leg vs exact search: {recall:.4} (target >= 0.95)");
    println!("insert throughput: {:.0} documents/s (target >= 2000)", cli.documents as f64 / insert_seconds);
    println!("open with the persisted index: {open_ms:.1} ms, median of {OPENS} (target < 1000 ms)");
    println!(
        "size on disk: {:.1} MiB (database, WAL, HNSW index; spec target < 1 GiB)",
        bytes as f64 / (1024.0 * 1024.0)
    );
    if let Some(model) = model {
        held_out_queries(&clawfs, model, &words, &topics, cli.clusters, cli.queries, &mut rng)?;
    }
    Ok(())
}

/// Questions about one topic each, in words of its vocabulary and none of
/// the notes' text ("what did I write about <w1> <w2> and <w3>"), searched
/// as fs-engine does: the query text embedded by the model per search.
/// Prints the end-to-end hybrid latency (embedding included) and, for each
/// leg alone and fused, the share of the top 10 that are notes of the
/// question's topic (any of the ~documents/clusters notes of a topic is a
/// right answer; there is no single relevant note to find).
fn held_out_queries(
    clawfs: &Clawfs,
    model: Arc<minilm::MiniLmEmbedder>,
    words: &Words,
    topics: &[usize],
    clusters: usize,
    queries: usize,
    rng: &mut StdRng,
) -> anyhow::Result<()> {
    let questions: Vec<(usize, String)> = (0..queries)
        .map(|_| {
            let topic = rng.random_range(0..clusters);
            let mut word = || words.topic_word(topic, rng.random_range(0..TOPIC_WORDS));
            (topic, format!("what did I write about {} {} and {}", word(), word(), word()))
        })
        .collect();
    // The keyword leg alone from an index without the model: nothing to embed.
    let (embedding, keyword_only) = (clawfs.open_memory("bench", Some(model))?, clawfs.open_memory("bench", None)?);
    let legs = [
        ("keyword", &keyword_only, Fusion::Weighted { vector: 0.0, keyword: 1.0 }),
        ("vector", &embedding, Fusion::Weighted { vector: 1.0, keyword: 0.0 }),
        ("hybrid", &embedding, Fusion::default()),
    ];
    println!("held-out questions, the vector leg's embedded by all-MiniLM-L6-v2 at query time ({queries} each):");
    for (leg, index, fusion) in legs {
        let (mut samples, mut on_topic, mut returned) = (Vec::with_capacity(queries), 0usize, 0usize);
        for (topic, question) in &questions {
            let started = Instant::now();
            let response =
                index.search(&SearchRequest { query: question.clone(), fusion, ..SearchRequest::new("") })?;
            samples.push(started.elapsed());
            returned += response.results.len();
            on_topic += response.results.iter().filter(|hit| topics[document_number(&hit.path)] == *topic).count();
        }
        let (p50, p95) = percentiles(samples);
        println!(
            "  {leg:<7}  {p50:>7.3} / {p95:>7.3} ms end to end (p50 / p95); on the question's topic: {on_topic} of {returned} results ({:.3} of the top 10)",
            on_topic as f64 / (10 * queries) as f64
        );
    }
    Ok(())
}

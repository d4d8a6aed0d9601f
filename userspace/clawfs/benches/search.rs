//! Search latency of one workspace: keyword, vector and hybrid top-10 over
//! 5,000 generated Markdown documents with the offline 384-dimension
//! embedder. Run: `cargo bench -p clawos-clawfs --bench search`.

use std::sync::Arc;

use clawfs::{Clawfs, Config, Embedder, Fusion, HashingEmbedder, SearchRequest};
use criterion::{criterion_group, criterion_main, Criterion};

const DOCUMENTS: usize = 5_000;
const DIMENSION: usize = 384;
const TOPICS: [&str; 8] = ["kernel", "network", "storage", "vault", "scheduler", "router", "tools", "metrics"];
const WORDS: [&str; 12] = [
    "latency",
    "index",
    "policy",
    "cgroup",
    "snapshot",
    "socket",
    "quota",
    "audit",
    "heartbeat",
    "token",
    "cache",
    "journal",
];

/// Deterministic text: a topic heading and sentences drawn from a small
/// vocabulary, so keyword and vector legs both find real candidates.
fn document(n: usize) -> String {
    let topic = TOPICS[n % TOPICS.len()];
    let sentence = |i: usize| {
        format!("The {topic} {} and {} {n}.", WORDS[(n + i) % WORDS.len()], WORDS[(n * 7 + i) % WORDS.len()])
    };
    format!("# {topic} note {n}\n\n{} {} {}\n", sentence(1), sentence(2), sentence(3))
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let clawfs = Clawfs::new(Config { vector_dimension: DIMENSION, ..Config::new(dir.path()) }).unwrap();
    clawfs.create_workspace("bench", "bench").unwrap();
    let embedder: Arc<dyn Embedder> = Arc::new(HashingEmbedder::new(DIMENSION));
    let mut index = clawfs.open_memory("bench", Some(embedder)).unwrap();
    let texts: Vec<(String, String)> = (0..DOCUMENTS).map(|n| (format!("notes/{n}.md"), document(n))).collect();
    for batch in texts.chunks(500) {
        let documents: Vec<(&str, &str)> = batch.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
        index.index_documents(&documents).unwrap();
    }
    let query = "vault snapshot audit";
    let mut group = c.benchmark_group("search_top10");
    // Both legs still run; only the fusion weights differ.
    group.bench_function("hybrid_keyword_weight_only", |b| {
        let request =
            SearchRequest { fusion: Fusion::Weighted { vector: 0.0, keyword: 1.0 }, ..SearchRequest::new(query) };
        b.iter(|| index.search(&request).unwrap())
    });
    group.bench_function("hybrid_weighted", |b| b.iter(|| index.search(&SearchRequest::new(query)).unwrap()));
    group.bench_function("hybrid_rrf", |b| {
        let request = SearchRequest { fusion: Fusion::Rrf { k: 60.0 }, ..SearchRequest::new(query) };
        b.iter(|| index.search(&request).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

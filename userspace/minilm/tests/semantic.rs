//! The real model end to end: its vectors, and a ClawFS search whose query
//! shares no word with the document it must find. The offline hashing
//! embedder fails the same search, which shows the test needs a real model.
//!
//! The model comes from `make models` (out/models/all-minilm-l6-v2) or
//! `CLAWOS_MINILM_DIR`. `make test` sets that variable, so there a missing
//! model fails the test instead of skipping it.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use clawfs::{Clawfs, Config, EmbedError, Embedder, Fusion, HashingEmbedder, LegReport, SearchRequest};
use minilm::{LazyMiniLm, MiniLmEmbedder, DIMENSION, MODEL_ID};

/// The model's directory, or None (test skipped) when it is not built and
/// `CLAWOS_MINILM_DIR` does not require it.
fn model_dir() -> Option<PathBuf> {
    let (dir, required) = match std::env::var_os("CLAWOS_MINILM_DIR") {
        Some(dir) => (PathBuf::from(dir), true),
        None => (clawos_test_require::package_path("../../out/models/all-minilm-l6-v2"), false),
    };
    if !required && !dir.join("model.safetensors").exists() {
        clawos_test_require::missing("the MiniLM tests", &format!("no model in {} (run `make models`)", dir.display()));
        return None;
    }
    Some(dir)
}

fn model() -> Option<Arc<MiniLmEmbedder>> {
    static MODEL: OnceLock<Option<Arc<MiniLmEmbedder>>> = OnceLock::new();
    MODEL.get_or_init(|| Some(Arc::new(MiniLmEmbedder::load(&model_dir()?).unwrap_or_else(|e| panic!("{e}"))))).clone()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn vectors_are_unit_length_and_similar_meanings_are_close() {
    let Some(model) = model() else { return };
    let texts = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
        "A man is riding a horse.",
    ];
    let vectors = model.embed(&texts).unwrap();
    assert_eq!(vectors.len(), 4);
    for vector in &vectors {
        assert_eq!(vector.len(), DIMENSION);
        assert!((cosine(vector, vector) - 1.0).abs() < 1e-4);
    }
    let eating = cosine(&vectors[0], &vectors[1]);
    assert!(eating > 0.6, "two sentences about eating: {eating}");
    assert!(eating > cosine(&vectors[0], &vectors[2]) + 0.3 && eating > cosine(&vectors[0], &vectors[3]) + 0.3);
    // Batching and padding change nothing: a text alone gets the same vector.
    let alone = model.embed(&texts[2..3]).unwrap();
    assert!(cosine(&alone[0], &vectors[2]) > 0.9999);
}

#[test]
fn a_preloaded_lazy_model_embeds_like_the_model() {
    let (Some(model), Some(dir)) = (model(), model_dir()) else { return };
    let lazy = LazyMiniLm::new(dir);
    lazy.preload().unwrap();
    lazy.preload().unwrap();
    let text = ["The girl is carrying a baby."];
    assert!(cosine(&lazy.embed(&text).unwrap()[0], &model.embed(&text).unwrap()[0]) > 0.9999);
}

#[test]
fn a_model_that_cannot_load_fails_the_preload_and_every_embedding_with_the_reason() {
    let empty = tempfile::tempdir().unwrap();
    let lazy = LazyMiniLm::new(empty.path());
    let reason = lazy.preload().unwrap_err();
    assert!(reason.contains(&empty.path().display().to_string()), "{reason}");
    match lazy.embed(&["any text"]) {
        Err(EmbedError::Model { model, reason: why }) => assert_eq!((model.as_str(), why), (MODEL_ID, reason)),
        other => panic!("{other:?}"),
    }
}

const NOTES: [(&str, &str); 4] = [
    ("pets.md", "# Pets\n\nMy dog loves chasing the ball across the park every morning.\n"),
    ("finance.md", "# Finance\n\nThe quarterly budget report shows rising costs and lower revenue.\n"),
    ("weather.md", "# Weather\n\nHeavy rain and strong winds are expected along the coast tomorrow.\n"),
    ("cooking.md", "# Cooking\n\nSimmer the tomatoes with garlic and olive oil for twenty minutes.\n"),
];

/// Queries that share no word (nor stem) with the note they mean.
const QUERIES: [(&str, &str); 3] = [
    ("puppy fetching outdoors", "pets.md"),
    ("storm forecast", "weather.md"),
    ("how much money did we spend", "finance.md"),
];

/// How many of [`QUERIES`] put their note first, searching with `embedder`.
fn semantic_hits(embedder: Arc<dyn Embedder>) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let clawfs = Clawfs::new(Config { vector_dimension: embedder.dimension(), ..Config::new(dir.path()) }).unwrap();
    clawfs.create_workspace("notes", "user").unwrap();
    let mut index = clawfs.open_memory("notes", Some(embedder)).unwrap();
    index.index_documents(&NOTES).unwrap();
    QUERIES
        .iter()
        .filter(|(query, expected)| {
            let response = index
                .search(&SearchRequest { limit: 1, fusion: Fusion::default(), ..SearchRequest::new(*query) })
                .unwrap();
            assert!(matches!(response.vector, LegReport::Ran { .. }), "{:?}", response.vector);
            response.results.first().is_some_and(|hit| hit.path == *expected)
        })
        .count()
}

#[test]
fn a_query_finds_a_note_it_shares_no_words_with() {
    let Some(model) = model() else { return };
    assert_eq!(model.model_id(), MODEL_ID);
    assert_eq!(semantic_hits(model), QUERIES.len(), "the real model ranks every meant note first");
    let hashing = semantic_hits(Arc::new(HashingEmbedder::new(DIMENSION)));
    assert!(hashing < QUERIES.len(), "word hashing cannot do this ({hashing} of {} found)", QUERIES.len());
}

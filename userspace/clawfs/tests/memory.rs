//! The memory index end to end: real SQLite FTS5, real usearch HNSW files,
//! the offline embedder.

use std::sync::Arc;

use clawfs::chunk::{chunk_id, Chunk};
use clawfs::{
    Clawfs, Config, Embedder, Fusion, HashingEmbedder, LegReport, SearchRequest, DATABASE_FILE, HNSW_FILE,
    HNSW_SIDECAR_FILE,
};

const DIMENSION: usize = 256;

fn instance() -> (tempfile::TempDir, Clawfs) {
    let dir = tempfile::tempdir().unwrap();
    let clawfs = Clawfs::new(Config { vector_dimension: DIMENSION, ..Config::new(dir.path()) }).unwrap();
    clawfs.create_workspace("notes", "user").unwrap();
    (dir, clawfs)
}

fn embedder() -> Option<Arc<dyn Embedder>> {
    Some(Arc::new(HashingEmbedder::new(DIMENSION)))
}

const GUIDE: &str = "# Backups\n\nSnapshots copy workspace.db every night.\n\n# Networking\n\nThe router relays IPC requests between components.\n\n# Secrets\n\nThe vault seals its master key with the TPM.\n";

#[test]
fn hybrid_search_reports_legs_and_provenance() {
    let (_dir, clawfs) = instance();
    let mut index = clawfs.open_memory("notes", embedder()).unwrap();
    let report = index.index_document("guide.md", GUIDE).unwrap();
    assert_eq!((report.added, report.removed, report.unchanged), (3, 0, 0));
    assert_eq!(index.vector_count(), 3);

    let response = index.search(&SearchRequest::new("vault master key")).unwrap();
    assert!(matches!(response.keyword, LegReport::Ran { candidates: 1 }), "{:?}", response.keyword);
    assert!(matches!(response.vector, LegReport::Ran { candidates: 3 }), "{:?}", response.vector);
    let best = &response.results[0];
    assert_eq!((best.workspace.as_str(), best.path.as_str(), best.heading.as_str()), ("notes", "guide.md", "Secrets"));
    assert_eq!(best.keyword_score, Some(1.0));
    assert_eq!(best.vector_score, Some(1.0));
    assert!((best.score - 1.0).abs() < 1e-6, "0.7 * 1 + 0.3 * 1");
    assert!(response.results[1..].iter().all(|hit| hit.keyword_score.is_none()));

    let rrf = index
        .search(&SearchRequest { fusion: Fusion::Rrf { k: 60.0 }, ..SearchRequest::new("vault master key") })
        .unwrap();
    assert_eq!(rrf.results[0].heading, "Secrets");
}

#[test]
fn without_an_embedder_the_response_says_the_vector_leg_did_not_run() {
    let (_dir, clawfs) = instance();
    let mut index = clawfs.open_memory("notes", None).unwrap();
    index.index_document("guide.md", GUIDE).unwrap();
    let response = index.search(&SearchRequest::new("router")).unwrap();
    assert_eq!(response.vector, LegReport::NotRun { reason: "no embedder is configured".into() });
    assert_eq!(response.results.len(), 1);
    assert_eq!(response.results[0].heading, "Networking");

    let wrong: Option<Arc<dyn Embedder>> = Some(Arc::new(HashingEmbedder::new(128)));
    let index = clawfs.open_memory("notes", wrong).unwrap();
    let LegReport::NotRun { reason } = index.search(&SearchRequest::new("router")).unwrap().vector else {
        panic!("a 128-dimension embedder must not search 256-dimension vectors");
    };
    assert!(reason.contains("128-dimension"), "{reason}");
}

#[test]
fn reindexing_a_changed_file_touches_only_changed_chunks() {
    let (_dir, clawfs) = instance();
    let mut index = clawfs.open_memory("notes", embedder()).unwrap();
    index.index_document("guide.md", GUIDE).unwrap();
    let before = index.search(&SearchRequest::new("snapshots router vault")).unwrap();
    let id_of = |results: &[clawfs::SearchHit], heading: &str| {
        results.iter().find(|h| h.heading == heading).map(|h| h.chunk_id.clone())
    };

    let again = index.index_document("guide.md", GUIDE).unwrap();
    assert_eq!((again.added, again.removed, again.unchanged), (0, 0, 3));

    let edited = GUIDE.replace("relays IPC requests", "relays and authorizes IPC requests");
    let report = index.index_document("guide.md", &edited).unwrap();
    assert_eq!((report.added, report.removed, report.unchanged), (1, 1, 2));
    assert_eq!(index.vector_count(), 3);
    let after = index.search(&SearchRequest::new("snapshots router vault authorizes")).unwrap();
    assert_eq!(id_of(&before.results, "Backups"), id_of(&after.results, "Backups"));
    assert_ne!(id_of(&before.results, "Networking"), id_of(&after.results, "Networking"));
    assert!(after.results.iter().any(|h| h.content.contains("authorizes")));

    assert_eq!(index.remove_document("guide.md").unwrap(), 3);
    assert_eq!(index.chunk_count().unwrap(), 0);
    assert_eq!(index.vector_count(), 0);
    let empty = index.search(&SearchRequest::new("router")).unwrap();
    assert!(empty.results.is_empty(), "{:?}", empty.results);
}

#[test]
fn a_missing_or_stale_hnsw_file_is_rebuilt_on_open() {
    let (dir, clawfs) = instance();
    let workspace = dir.path().join("workspaces/notes");
    {
        let mut index = clawfs.open_memory("notes", embedder()).unwrap();
        index.index_document("guide.md", GUIDE).unwrap();
    }
    assert!(workspace.join(HNSW_FILE).exists());

    std::fs::remove_file(workspace.join(HNSW_FILE)).unwrap();
    let index = clawfs.open_memory("notes", embedder()).unwrap();
    assert!(workspace.join(HNSW_FILE).exists(), "the rebuilt index is saved");
    assert_eq!(index.search(&SearchRequest::new("vault")).unwrap().results[0].heading, "Secrets");
    drop(index);

    // A crash after the database commit but before the index save leaves
    // an older index file: keep one, change the database, put it back.
    let old_index = std::fs::read(workspace.join(HNSW_FILE)).unwrap();
    let old_sidecar = std::fs::read(workspace.join(HNSW_SIDECAR_FILE)).unwrap();
    {
        let mut index = clawfs.open_memory("notes", embedder()).unwrap();
        index.index_document("tpm.md", "# TPM\n\nPCR policies bind the sealed key to the boot chain.\n").unwrap();
    }
    std::fs::write(workspace.join(HNSW_FILE), old_index).unwrap();
    std::fs::write(workspace.join(HNSW_SIDECAR_FILE), &old_sidecar).unwrap();
    let index = clawfs.open_memory("notes", embedder()).unwrap();
    assert_eq!(index.vector_count(), 4);
    assert_ne!(std::fs::read(workspace.join(HNSW_SIDECAR_FILE)).unwrap(), old_sidecar, "rebuilt and re-saved");
    let response = index
        .search(&SearchRequest {
            fusion: Fusion::Weighted { vector: 1.0, keyword: 0.0 },
            ..SearchRequest::new("PCR policies sealed key")
        })
        .unwrap();
    assert_eq!(response.results[0].path, "tpm.md");
}

#[test]
fn an_index_file_of_another_scalar_kind_is_rebuilt() {
    let (dir, clawfs) = instance();
    let sidecar_path = dir.path().join("workspaces/notes").join(HNSW_SIDECAR_FILE);
    clawfs.open_memory("notes", embedder()).unwrap().index_document("guide.md", GUIDE).unwrap();
    let mut sidecar: serde_json::Value = serde_json::from_slice(&std::fs::read(&sidecar_path).unwrap()).unwrap();
    assert_eq!(sidecar["scalar"], "i8-ip");
    sidecar["scalar"] = "f32".into();
    std::fs::write(&sidecar_path, serde_json::to_vec(&sidecar).unwrap()).unwrap();
    let index = clawfs.open_memory("notes", embedder()).unwrap();
    let rebuilt: serde_json::Value = serde_json::from_slice(&std::fs::read(&sidecar_path).unwrap()).unwrap();
    assert_eq!(rebuilt["scalar"], "i8-ip", "rebuilt and re-saved");
    assert_eq!(index.search(&SearchRequest::new("vault")).unwrap().results[0].heading, "Secrets");
}

/// The graph holds quantized vectors; the scores must still be the exact
/// cosine of the float32 vectors, and the order exact among the candidates.
#[test]
fn vector_scores_are_exact_cosine_over_the_stored_float32_vectors() {
    let (_dir, clawfs) = instance();
    let mut index = clawfs.open_memory("notes", None).unwrap();
    let vectors: Vec<Vec<f32>> = (0..200u32)
        .map(|n| {
            (0..DIMENSION as u32)
                .map(|d| ((n * 7919 + d * 104_729) % 1000) as f32 / 100.0 - 5.0 + (n % 3) as f32)
                .collect()
        })
        .collect();
    let chunks = vectors
        .iter()
        .enumerate()
        .map(|(n, vector)| {
            let (path, text) = (format!("v/{n}.md"), format!("vector {n}"));
            (
                Chunk { id: chunk_id(&path, "", 0, &text), path, heading: String::new(), ordinal: 0, content: text },
                Some(vector.clone()),
            )
        })
        .collect();
    index.insert_embedded(chunks, "test-vectors").unwrap();
    index.save().unwrap();
    let cosine = |a: &[f32], b: &[f32]| {
        let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| (*p as f64) * (*q as f64)).sum::<f64>();
        dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
    };
    let query: Vec<f32> = vectors[17].iter().enumerate().map(|(d, x)| x * 3.0 + (d % 5) as f32 * 0.01).collect();
    let hits = index.search_by_vector(&query, 10).unwrap();
    assert_eq!(hits[0].path, "v/17.md");
    let mut exact: Vec<(f64, String)> =
        vectors.iter().enumerate().map(|(n, v)| (cosine(&query, v), format!("v/{n}.md"))).collect();
    exact.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (hit, (score, path)) in hits.iter().zip(&exact) {
        assert_eq!(&hit.path, path);
        assert!(
            (hit.vector_score.unwrap() as f64 - score).abs() < 1e-5,
            "{}: {} vs exact {score}",
            hit.path,
            hit.score
        );
    }
}

#[test]
fn workspace_databases_use_large_pages_for_their_vectors() {
    let (dir, _clawfs) = instance();
    let db = rusqlite::Connection::open(dir.path().join("workspaces/notes").join(DATABASE_FILE)).unwrap();
    assert_eq!(db.query_row("PRAGMA page_size", [], |row| row.get::<_, u32>(0)).unwrap(), 32768);
}

#[test]
fn changing_the_dimension_is_an_explicit_reindex() {
    let (dir, clawfs) = instance();
    {
        let mut index = clawfs.open_memory("notes", embedder()).unwrap();
        index.index_document("guide.md", GUIDE).unwrap();
    }
    let wider = Clawfs::new(Config { vector_dimension: 512, ..Config::new(dir.path()) }).unwrap();
    assert!(matches!(wider.open_memory("notes", None), Err(clawfs::Error::DimensionMismatch { .. })));
    let embedder_512: Arc<dyn Embedder> = Arc::new(HashingEmbedder::new(512));
    assert_eq!(wider.reindex("notes", embedder_512.clone()).unwrap(), 3);
    assert_eq!(wider.workspace("notes").unwrap().vector_dimension, 512);
    let index = wider.open_memory("notes", Some(embedder_512)).unwrap();
    let response = index.search(&SearchRequest::new("master key")).unwrap();
    assert!(matches!(response.vector, LegReport::Ran { .. }));
    assert_eq!(response.results[0].heading, "Secrets");
}

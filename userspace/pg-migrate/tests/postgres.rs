//! The migration against a real PostgreSQL with pgvector. `tests/pg/run.sh`
//! (run by `make test`) starts one and sets `CLAWOS_TEST_PG_URL`; these tests
//! are `#[ignore]`d so a plain `cargo test` without a server does not fail.
//! Each test has a schema of its own.

use std::sync::Arc;

use clawfs::{Clawfs, Config, EmbedError, Embedder, Fusion, SearchRequest};
use pg_migrate::{migrate, Error, Options};

const DIMENSION: usize = 384;
const MODEL: &str = "openai-compatible:test-model:384";

fn server() -> String {
    std::env::var("CLAWOS_TEST_PG_URL")
        .expect("CLAWOS_TEST_PG_URL: run these tests through tests/pg/run.sh (make test)")
}

/// A schema `name` holding the source tables of specs/clawfs/README.md
/// ("Migration from PostgreSQL"), filled by `fill` (SQL).
fn source(name: &str, embedding_type: &str, fill: &str) -> String {
    let mut client = postgres::Client::connect(&server(), postgres::NoTls).unwrap();
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name};
             CREATE TABLE {name}.documents (id bigint PRIMARY KEY, workspace_id text NOT NULL, content text NOT NULL, metadata jsonb);
             CREATE TABLE {name}.vectors (id bigserial PRIMARY KEY, document_id bigint REFERENCES {name}.documents(id),
                                          embedding {embedding_type}, created_at timestamptz NOT NULL DEFAULT now());
             SET search_path = {name}, public;
             {fill}"
        ))
        .unwrap();
    format!("{} options='-c search_path={name},public'", server())
}

/// Document `i`'s vector: deterministic, different for every document.
const VECTOR_SQL: &str = "(SELECT ('[' || string_agg(round(sin(i * 0.37 + j * 1.3)::numeric, 6)::text, ',' ORDER BY j) || ']')::vector FROM generate_series(1, 384) j)";

fn vector_of(i: u64) -> Vec<f32> {
    (1..=DIMENSION).map(|j| ((i as f64 * 0.37 + j as f64 * 1.3).sin() * 1e6).round() as f32 / 1e6).collect()
}

fn options(url: String, root: &std::path::Path, workspace: &str) -> Options {
    Options {
        pg_url: url,
        source_workspace_id: "ironclaw".into(),
        clawfs_root: root.to_owned(),
        workspace: workspace.into(),
        model_id: MODEL.into(),
        batch_size: 1000,
        progress: false,
    }
}

/// Embeds `doc-<i>` as document i's vector, so a vector search can ask
/// for one document's own vector.
struct KnownVectors;

impl Embedder for KnownVectors {
    fn dimension(&self) -> usize {
        DIMENSION
    }
    fn model_id(&self) -> &str {
        MODEL
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|text| vector_of(text.trim_start_matches("doc-").parse().unwrap_or(0))).collect())
    }
}

#[test]
#[ignore = "needs PostgreSQL with pgvector: tests/pg/run.sh"]
fn documents_and_vectors_arrive_verified_in_batches() {
    let fill = format!(
        "INSERT INTO documents SELECT i, 'ironclaw', 'Note ' || i || ': the ' || (ARRAY['kernel','vault','router','scheduler'])[i % 4 + 1] || ' was tuned.',
                jsonb_build_object('title', 'note ' || i) FROM generate_series(1, 2500) i;
         INSERT INTO documents VALUES (9001, 'other-workspace', 'not ours', NULL);
         INSERT INTO vectors (document_id, embedding, created_at) SELECT i, {VECTOR_SQL}, now() FROM generate_series(1, 2400) i;
         -- An older vector of document 7: the newest one is migrated.
         INSERT INTO vectors (document_id, embedding, created_at) VALUES (7, {zeros}, now() - interval '1 day');",
        zeros = format_args!("array_fill(0.5, ARRAY[{DIMENSION}])::vector")
    );
    let url = source("migrate_ok", &format!("vector({DIMENSION})"), &fill);
    let root = tempfile::tempdir().unwrap();
    let report = migrate(&options(url, root.path(), "memory")).unwrap();
    assert_eq!((report.documents, report.vectors, report.superseded_vectors), (2500, 2400, 1));
    assert_eq!((report.batches, report.dimension), (3, DIMENSION));

    // The workspace is a normal ClawFS workspace: both search legs work on it.
    let clawfs = Clawfs::new(Config { vector_dimension: DIMENSION, ..Config::new(root.path()) }).unwrap();
    let index = clawfs.open_memory("memory", Some(Arc::new(KnownVectors))).unwrap();
    assert_eq!((index.chunk_count().unwrap(), index.vector_count()), (2500, 2400));
    let top = |query: &str, vector: f32| {
        let request = SearchRequest {
            limit: 1,
            fusion: Fusion::Weighted { vector, keyword: 1.0 - vector },
            ..SearchRequest::new(query)
        };
        index.search(&request).unwrap().results.remove(0)
    };
    let vector_only = |query: &str| top(query, 1.0);
    let hit = vector_only("doc-1234");
    assert_eq!((hit.path.as_str(), hit.heading.as_str()), ("pg/ironclaw/1234", "note 1234"));
    assert_eq!(vector_only("doc-7").path, "pg/ironclaw/7", "document 7 carries its newest vector");
    assert_eq!(top("2499", 0.0).path, "pg/ironclaw/2499");
    // Document 2450 has no vector and is still found by its words.
    assert_eq!(top("2450", 0.0).path, "pg/ironclaw/2450");
    // The verified digest is the one the workspace gives when read back.
    let (_, digest) = index.digest().unwrap();
    assert_eq!(report.digest, digest.iter().map(|b| format!("{b:02x}")).collect::<String>());
    // Reopening rebuilds nothing: the HNSW file was saved with the data.
    drop(index);
    let reopened = clawfs.open_memory("memory", Some(Arc::new(KnownVectors))).unwrap();
    assert_eq!(reopened.vector_count(), 2400);
}

#[test]
#[ignore = "needs PostgreSQL with pgvector: tests/pg/run.sh"]
fn a_failure_in_a_later_batch_rolls_everything_back() {
    // An unconstrained column lets one vector of the wrong size in, in the second batch.
    let fill = format!(
        "INSERT INTO documents SELECT i, 'ironclaw', 'note ' || i, NULL FROM generate_series(1, 1500) i;
         INSERT INTO vectors (document_id, embedding) SELECT i, {VECTOR_SQL} FROM generate_series(1, 1500) i WHERE i <> 1200;
         INSERT INTO vectors (document_id, embedding) VALUES (1200, '[1,2,3]');"
    );
    let url = source("migrate_bad", "vector", &fill);
    let root = tempfile::tempdir().unwrap();
    let error = migrate(&options(url, root.path(), "memory")).unwrap_err();
    assert!(
        matches!(&error, Error::Invalid(message) if message.contains("document 1200 has a 3-dimension vector")),
        "{error}"
    );
    let clawfs = Clawfs::new(Config { vector_dimension: DIMENSION, ..Config::new(root.path()) }).unwrap();
    assert!(
        clawfs.list_workspaces().unwrap().iter().all(|w| w.workspace_id != "memory"),
        "the partial workspace was removed"
    );
    assert!(!root.path().join("workspaces/memory").exists());
}

#[test]
#[ignore = "needs PostgreSQL with pgvector: tests/pg/run.sh"]
fn an_existing_workspace_is_never_merged_into() {
    let url = source(
        "migrate_existing",
        &format!("vector({DIMENSION})"),
        "INSERT INTO documents VALUES (1, 'ironclaw', 'hello', NULL);",
    );
    let root = tempfile::tempdir().unwrap();
    let clawfs = Clawfs::new(Config { vector_dimension: DIMENSION, ..Config::new(root.path()) }).unwrap();
    clawfs.create_workspace("memory", "user").unwrap();
    let mut index = clawfs.open_memory("memory", None).unwrap();
    index.index_document("mine.md", "# Mine\n\nkept as it is\n").unwrap();
    drop(index);
    let error = migrate(&options(url, root.path(), "memory")).unwrap_err();
    assert!(error.to_string().contains("already exists"), "{error}");
    let index = clawfs.open_memory("memory", None).unwrap();
    assert_eq!(index.chunk_count().unwrap(), 1, "the existing workspace is untouched");
}

#[test]
#[ignore = "needs PostgreSQL with pgvector: tests/pg/run.sh"]
fn a_wrong_server_or_workspace_id_is_a_clear_error() {
    let url = source("migrate_empty", &format!("vector({DIMENSION})"), "");
    let root = tempfile::tempdir().unwrap();
    let error = migrate(&options(url, root.path(), "memory")).unwrap_err();
    assert!(error.to_string().contains("no documents with workspace_id `ironclaw`"), "{error}");
    let error = migrate(&options("host=/nonexistent port=1 user=nobody".into(), root.path(), "memory")).unwrap_err();
    assert!(matches!(error, Error::Postgres(_)), "{error}");
    assert!(!root.path().join("workspaces/memory").exists());
}

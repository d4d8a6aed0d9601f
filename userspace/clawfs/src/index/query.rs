//! What a workspace's index answers (specs/clawfs/README.md, "Memory
//! search"): hybrid searches, the chunks nearest a vector, and the digest a
//! copy of the index is checked against.
//!
//! Owns: the keyword leg (the query's words quoted and ORed for FTS5,
//! ranked by `clawfs_bm25()`), the vector leg (graph candidates, or a scan
//! of every vector below [`EXACT_BELOW`], re-ranked by exact cosine over the
//! float32 vectors), how many candidates each leg fetches, and saying why a
//! leg did not run. Must not own: fusing the legs' rankings
//! ([`crate::search`]), the BM25 function itself ([`crate::bm25`]), or
//! anything that writes (`write`).

use rusqlite::params;
use sha2::{Digest, Sha256};

use super::hnsw::{hnsw_error, quantize};
use super::schema::{bytes_vector, sqlite, FTS_DOCSIZE_TABLE};
use super::MemoryIndex;
use crate::bm25::{self, ChunkLengths};
use crate::error::{Error, Result};
use crate::layout::{HNSW_FILE, SEARCH_FILE};
use crate::search::{fuse, LegReport, SearchHit, SearchRequest, SearchResponse};

/// Hits each leg of a top-`limit` search fetches before fusion.
fn candidates(limit: usize) -> usize {
    (limit * 5).max(50)
}

/// HNSW candidates re-ranked exactly for `wanted` vector hits. The graph
/// search is approximate; re-ranking a wider set keeps recall@10 above 0.95
/// at 100,000 clustered 1536-dimension vectors (0.90 with 50).
fn rerank_candidates(wanted: usize) -> usize {
    (wanted * 4).max(200)
}

/// Below this many vectors the candidates come from a scan of every i8
/// vector of the graph rather than a walk of it: a few milliseconds, and
/// exact. A graph walk can miss a lone vector among thousands of near
/// copies (an agent's memory of similar facts and one unlike them: the
/// memory-bench scenario, where the walk missed it at 10,000).
const EXACT_BELOW: usize = 20_000;

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Feeds one chunk to a [`MemoryIndex::digest`]-style SHA-256: its path,
/// content and vector (little-endian f32), each length-prefixed.
pub fn digest_chunk(hasher: &mut Sha256, path: &str, content: &str, vector: Option<&[f32]>) {
    for field in [path.as_bytes(), content.as_bytes()] {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field);
    }
    match vector {
        Some(vector) => {
            hasher.update((vector.len() as u64).to_le_bytes());
            vector.iter().for_each(|x| hasher.update(x.to_le_bytes()));
        }
        None => hasher.update(u64::MAX.to_le_bytes()),
    }
}

impl MemoryIndex {
    /// SHA-256 over every chunk in insertion order, fed by [`digest_chunk`]:
    /// what a copy of a workspace (a migration) checks itself against.
    pub fn digest(&self) -> Result<(u64, [u8; 32])> {
        let db_path = self.dir.join(SEARCH_FILE);
        let mut statement = self
            .connection
            .prepare("SELECT c.path, c.content, v.embedding FROM clawfs_chunks c LEFT JOIN clawfs_vectors v USING (key) ORDER BY c.key")
            .map_err(sqlite(&db_path))?;
        let mut rows = statement.query([]).map_err(sqlite(&db_path))?;
        let (mut count, mut hasher) = (0u64, Sha256::new());
        while let Some(row) = rows.next().map_err(sqlite(&db_path))? {
            let path: String = row.get(0).map_err(sqlite(&db_path))?;
            let content: String = row.get(1).map_err(sqlite(&db_path))?;
            let embedding: Option<Vec<u8>> = row.get(2).map_err(sqlite(&db_path))?;
            digest_chunk(&mut hasher, &path, &content, embedding.as_deref().map(bytes_vector).as_deref());
            count += 1;
        }
        Ok((count, hasher.finalize().into()))
    }

    /// Runs a hybrid search. Each leg that cannot run says why in the
    /// response instead of being dropped silently.
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let (keyword_hits, keyword) = match fts_query(&request.query) {
            Some(query) => {
                let hits = self.keyword_leg(&query, candidates(request.limit))?;
                let report = LegReport::Ran { candidates: hits.len() };
                (hits, report)
            }
            None => (Vec::new(), LegReport::NotRun { reason: "the query has no searchable words".into() }),
        };
        let (vector_hits, vector) = match self.vector_leg(&request.query, candidates(request.limit)) {
            Ok(hits) => {
                let report = LegReport::Ran { candidates: hits.len() };
                (hits, report)
            }
            Err(reason) => (Vec::new(), LegReport::NotRun { reason }),
        };
        let fused = fuse(&keyword_hits, &vector_hits, request.fusion, request.limit);
        let results = fused
            .into_iter()
            .map(|(key, score, keyword_score, vector_score)| self.hit(key, score, keyword_score, vector_score))
            .collect::<Result<_>>()?;
        Ok(SearchResponse { results, keyword, vector, fusion: request.fusion })
    }

    /// The `limit` chunks nearest to `vector`, by exact cosine among the
    /// HNSW candidates: "more like this" for a vector at hand, without an
    /// embedder.
    pub fn search_by_vector(&self, vector: &[f32], limit: usize) -> Result<Vec<SearchHit>> {
        if vector.len() != self.hnsw.dimensions() {
            return Err(Error::Config(format!(
                "a {}-dimension query vector; the workspace stores {}",
                vector.len(),
                self.hnsw.dimensions()
            )));
        }
        self.nearest(vector, limit)?
            .into_iter()
            .map(|(key, similarity)| self.hit(key, similarity, None, Some(similarity)))
            .collect()
    }

    /// The hit of chunk `key` with its scores.
    fn hit(&self, key: u64, score: f32, keyword_score: Option<f32>, vector_score: Option<f32>) -> Result<SearchHit> {
        let (chunk_id, path, heading, ordinal, content) = self.chunk(key)?;
        Ok(SearchHit {
            workspace: self.workspace.clone(),
            chunk_id,
            path,
            heading,
            ordinal,
            content,
            score,
            keyword_score,
            vector_score,
        })
    }

    /// Up to `count` chunks nearest to `query`: HNSW candidates re-ranked
    /// by exact cosine similarity over their float32 vectors, best first.
    fn nearest(&self, query: &[f32], count: usize) -> Result<Vec<(u64, f32)>> {
        let (db_path, hnsw_path) = (self.dir.join(SEARCH_FILE), self.dir.join(HNSW_FILE));
        let query_i8 = quantize(query);
        let matches = if self.hnsw.size() < EXACT_BELOW {
            self.hnsw.exact_search(&query_i8, rerank_candidates(count))
        } else {
            self.hnsw.search(&query_i8, rerank_candidates(count))
        }
        .map_err(|e| hnsw_error(&hnsw_path, e))?;
        let mut statement = self
            .connection
            .prepare_cached("SELECT embedding FROM clawfs_vectors WHERE key = ?1")
            .map_err(sqlite(&db_path))?;
        let query_norm = dot(query, query).sqrt();
        let mut scored = matches
            .keys
            .into_iter()
            .map(|key| {
                let vector = bytes_vector(
                    &statement.query_row([key], |row| row.get::<_, Vec<u8>>(0)).map_err(sqlite(&db_path))?,
                );
                let similarity =
                    dot(query, &vector) / (query_norm * dot(&vector, &vector).sqrt()).max(f32::MIN_POSITIVE);
                Ok((key, similarity))
            })
            .collect::<Result<Vec<_>>>()?;
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.truncate(count);
        Ok(scored)
    }

    /// BM25 over the chunks, as (key, score) with higher better.
    fn keyword_leg(&self, query: &str, limit: usize) -> Result<Vec<(u64, f32)>> {
        let db_path = self.dir.join(SEARCH_FILE);
        ChunkLengths::refresh(&self.lengths, &self.connection, FTS_DOCSIZE_TABLE).map_err(sqlite(&db_path))?;
        let mut statement = self
            .connection
            .prepare_cached(&format!(
                "SELECT rowid, {0}(clawfs_chunks_fts) AS score FROM clawfs_chunks_fts WHERE clawfs_chunks_fts MATCH ?1 \
                 ORDER BY score LIMIT ?2",
                bm25::FUNCTION
            ))
            .map_err(sqlite(&db_path))?;
        // BM25 as SQLite ranks it is lower-is-better; negate it.
        let rows = statement
            .query_map(params![query, limit], |row| Ok((row.get::<_, u64>(0)?, -row.get::<_, f64>(1)? as f32)))
            .map_err(sqlite(&db_path))?;
        rows.collect::<rusqlite::Result<_>>().map_err(sqlite(&db_path))
    }

    /// Nearest chunks by cosine similarity, or why the leg cannot run.
    fn vector_leg(&self, query: &str, limit: usize) -> std::result::Result<Vec<(u64, f32)>, String> {
        if let Some(reason) = &self.vector_unavailable {
            return Err(reason.clone());
        }
        let embedder = self.embedder.as_ref().ok_or("no embedder is configured")?;
        let vector =
            embedder.embed(&[query]).map_err(|error| format!("embedding the query failed: {error}"))?.remove(0);
        self.nearest(&vector, limit).map_err(|error| format!("vector search failed: {error}"))
    }

    fn chunk(&self, key: u64) -> Result<(String, String, String, u32, String)> {
        let db_path = self.dir.join(SEARCH_FILE);
        self.connection
            .prepare_cached("SELECT chunk_id, path, heading, ordinal, content FROM clawfs_chunks WHERE key = ?1")
            .and_then(|mut statement| {
                statement.query_row([key], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)))
            })
            .map_err(sqlite(&db_path))
    }
}

/// An FTS5 query matching any word of `text`: each word is quoted so that
/// user input cannot inject FTS5 syntax (`NEAR`, `*`, column filters).
fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> =
        text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| format!("\"{w}\"")).collect();
    (!words.is_empty()).then(|| words.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::{fts_query, MemoryIndex};
    use crate::{Clawfs, Config};

    /// A note of `words` words drawn from a small vocabulary, so that
    /// queries match many notes with varied frequencies and lengths.
    fn note(seed: usize, words: usize) -> String {
        const VOCABULARY: [&str; 12] = [
            "router", "vault", "sealing", "sealed", "keys", "tpm", "agent", "agents", "search", "index", "backup",
            "network",
        ];
        let body: Vec<&str> = (0..words).map(|n| VOCABULARY[(seed * 7 + n * n * 3 + n) % VOCABULARY.len()]).collect();
        format!("# Note {seed}\n\n{}.\n", body.join(" "))
    }

    /// The keyword leg's scores are FTS5's own `bm25()`, negated, and the
    /// lengths in memory cover every chunk (so none fell back to FTS5's
    /// `%_docsize` lookup).
    fn assert_keyword_scores_are_fts5_bm25(index: &MemoryIndex, query: &str) {
        let fts = fts_query(query).unwrap();
        let mut ours = index.keyword_leg(&fts, 10_000).unwrap();
        let mut statement = index
            .connection
            .prepare("SELECT rowid, bm25(clawfs_chunks_fts) FROM clawfs_chunks_fts WHERE clawfs_chunks_fts MATCH ?1")
            .unwrap();
        let mut fts5: Vec<(u64, f32)> = statement
            .query_map([&fts], |row| Ok((row.get(0)?, -row.get::<_, f64>(1)? as f32)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(!fts5.is_empty(), "{query} matches nothing");
        assert!(ours.windows(2).all(|pair| pair[0].1 >= pair[1].1), "best first");
        ours.sort_by_key(|hit| hit.0);
        fts5.sort_by_key(|hit| hit.0);
        assert_eq!(ours, fts5, "{query}");
        assert_eq!(index.lengths.read().unwrap().len() as u64, index.chunk_count().unwrap());
    }

    #[test]
    fn keyword_scores_stay_fts5_bm25_through_this_and_other_connections_commits() {
        let dir = tempfile::tempdir().unwrap();
        let clawfs = Clawfs::new(Config { vector_dimension: 128, ..Config::new(dir.path()) }).unwrap();
        clawfs.create_workspace("notes", "user").unwrap();
        let mut index = clawfs.open_memory("notes", None).unwrap();
        let notes: Vec<(String, String)> = (0..300).map(|n| (format!("notes/{n}.md"), note(n, 5 + n % 60))).collect();
        let documents: Vec<(&str, &str)> = notes.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
        index.index_documents(&documents).unwrap();
        for query in ["vault", "sealing keys", "agent OR search: index", "tpm router backup network"] {
            assert_keyword_scores_are_fts5_bm25(&index, query);
        }

        // This index's own changes: a removal and a rewrite.
        index.remove_document("notes/3.md").unwrap();
        index.index_document("notes/4.md", &note(4_000, 200)).unwrap();
        assert_keyword_scores_are_fts5_bm25(&index, "sealed agents");

        // Another connection's (as another process's) commit, seen through
        // `PRAGMA data_version`.
        let mut other = clawfs.open_memory("notes", None).unwrap();
        other.index_document("notes/long.md", &note(9, 400)).unwrap();
        other.remove_document("notes/5.md").unwrap();
        assert_keyword_scores_are_fts5_bm25(&index, "sealed agents");
    }

    /// A document indexed with its embedding left for later is found by
    /// keyword at once and by vector once its pending chunks get theirs; a
    /// vector for a chunk replaced meanwhile is left out; the index reopens
    /// consistent.
    #[test]
    fn chunks_indexed_keyword_only_get_their_vectors_later() {
        let dir = tempfile::tempdir().unwrap();
        let clawfs = Clawfs::new(Config { vector_dimension: 128, ..Config::new(dir.path()) }).unwrap();
        clawfs.create_workspace("notes", "user").unwrap();
        let embedder = std::sync::Arc::new(crate::HashingEmbedder::new(128));
        let mut index = clawfs.open_memory("notes", Some(embedder.clone())).unwrap();
        let text = "## oil\nThe generator needs new oil every spring.\n## barn\nThe drill is in the barn.\n";
        index.set_embedding(crate::Embedding::Later);
        let report = index.index_document("memory.md", text).unwrap();
        assert_eq!(report.added, 2);
        let pending = index.pending_embeddings(10).unwrap();
        assert_eq!(pending.len(), 2);
        let query = crate::Embedder::embed(&*embedder, &["generator oil"]).unwrap().remove(0);
        assert!(index.search_by_vector(&query, 1).unwrap().is_empty(), "no vector yet");
        // The barn section changes before its vector comes: that vector is stale.
        let changed = "## oil\nThe generator needs new oil every spring.\n## barn\nThe drill went to the shed.\n";
        index.index_document("memory.md", changed).unwrap();
        let texts: Vec<&str> = pending.iter().map(|p| p.content.as_str()).collect();
        let vectors = crate::Embedder::embed(&*embedder, &texts).unwrap();
        let added = index.add_vectors(pending.into_iter().zip(vectors).collect()).unwrap();
        assert_eq!(added, 1, "the replaced chunk's vector is left out");
        assert_eq!(index.search_by_vector(&query, 1).unwrap()[0].heading, "oil");
        let still = index.pending_embeddings(10).unwrap();
        assert_eq!(still.len(), 1);
        assert!(still[0].content.contains("shed"));
        drop(index);
        let reopened = clawfs.open_memory("notes", Some(embedder.clone())).unwrap();
        assert_eq!(reopened.pending_embeddings(10).unwrap().len(), 1, "pending after a restart too");
        assert_eq!(reopened.search_by_vector(&query, 1).unwrap()[0].heading, "oil");
    }

    /// Thousands of copies of a few texts and one unlike them: a walk of
    /// the graph ends among the copies, the scan below `EXACT_BELOW` finds
    /// the lone one.
    #[test]
    fn a_lone_vector_among_thousands_of_copies_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let clawfs = Clawfs::new(Config { vector_dimension: 128, ..Config::new(dir.path()) }).unwrap();
        clawfs.create_workspace("notes", "user").unwrap();
        let embedder = std::sync::Arc::new(crate::HashingEmbedder::new(128));
        let mut index = clawfs.open_memory("notes", Some(embedder.clone())).unwrap();
        let mut text: String =
            (0..10_000).map(|n| format!("## {n}\nPerson{} keeps the drill in the barn.\n", n % 24)).collect();
        text.push_str("## lone\nThe generator needs new oil every spring.\n");
        index.index_document("memory.md", &text).unwrap();
        let query = crate::Embedder::embed(&*embedder, &["generator oil"]).unwrap().remove(0);
        let best = index.search_by_vector(&query, 1).unwrap();
        assert_eq!(best[0].heading, "lone", "{best:?}");
    }
}

//! What a hybrid search asks and answers, and how the two legs' scores are
//! fused. Pure functions: the SQLite and HNSW legs live in [`crate::index`].

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// How keyword and vector scores become one ranking.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "method", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fusion {
    /// Each leg's scores are min-max normalized to 0..1 over this query's
    /// candidates (raw BM25 is unbounded), then added with these weights.
    Weighted {
        /// Weight of the vector leg. Default 0.7.
        vector: f32,
        /// Weight of the keyword leg. Default 0.3.
        keyword: f32,
    },
    /// Reciprocal rank fusion: the sum over legs of 1 / (k + rank), rank from 1.
    Rrf {
        /// Damping constant. Usually 60.
        k: f32,
    },
}

impl Default for Fusion {
    /// The spec's 0.7 vector + 0.3 keyword.
    fn default() -> Self {
        Fusion::Weighted { vector: 0.7, keyword: 0.3 }
    }
}

/// A search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// The query text, used by both legs.
    pub query: String,
    /// How many results to return. Default 10.
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// How the legs are fused. Default [`Fusion::default`].
    #[serde(default)]
    pub fusion: Fusion,
}

fn default_limit() -> usize {
    10
}

impl SearchRequest {
    /// `query` with the defaults.
    pub fn new(query: impl Into<String>) -> Self {
        SearchRequest { query: query.into(), limit: default_limit(), fusion: Fusion::default() }
    }
}

/// Whether a leg of the search ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LegReport {
    /// It ran and produced this many candidates.
    Ran {
        /// Candidates before fusion.
        candidates: usize,
    },
    /// It could not run; the results come from the other leg only.
    NotRun {
        /// Why.
        reason: String,
    },
}

/// One result with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchHit {
    /// The workspace.
    pub workspace: String,
    /// The chunk's stable ID.
    pub chunk_id: String,
    /// The document's path.
    pub path: String,
    /// The heading path of the chunk.
    pub heading: String,
    /// The chunk's position in its section.
    pub ordinal: u32,
    /// The chunk text.
    pub content: String,
    /// The fused score (higher is better).
    pub score: f32,
    /// Normalized keyword score, if the keyword leg found it.
    pub keyword_score: Option<f32>,
    /// Normalized vector score, if the vector leg found it.
    pub vector_score: Option<f32>,
}

/// The answer: results and what each leg did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchResponse {
    /// Best first.
    pub results: Vec<SearchHit>,
    /// The FTS5 leg.
    pub keyword: LegReport,
    /// The HNSW leg.
    pub vector: LegReport,
    /// The fusion used.
    pub fusion: Fusion,
}

/// Min-max normalizes `(key, raw)` (higher raw is better) to 0..1. A leg
/// whose candidates all score the same gives them all 1.
pub fn normalize(scores: &[(u64, f32)]) -> Vec<(u64, f32)> {
    let (min, max) = scores.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &(_, s)| (lo.min(s), hi.max(s)));
    let span = max - min;
    scores.iter().map(|&(key, score)| (key, if span > f32::EPSILON { (score - min) / span } else { 1.0 })).collect()
}

/// One fused candidate: key, fused score, normalized keyword and vector scores.
pub type Fused = (u64, f32, Option<f32>, Option<f32>);

/// Fuses ranked candidate lists (each best first, raw scores higher is
/// better) into at most `limit` results, best first; ties break by key so
/// the order is deterministic.
pub fn fuse(keyword: &[(u64, f32)], vector: &[(u64, f32)], fusion: Fusion, limit: usize) -> Vec<Fused> {
    let keyword_norm = normalize(keyword);
    let vector_norm = normalize(vector);
    let mut combined: HashMap<u64, Fused> = HashMap::new();
    for (rank, &(key, norm)) in keyword_norm.iter().enumerate() {
        let entry = combined.entry(key).or_insert((key, 0.0, None, None));
        entry.2 = Some(norm);
        entry.1 += match fusion {
            Fusion::Weighted { keyword, .. } => keyword * norm,
            Fusion::Rrf { k } => 1.0 / (k + rank as f32 + 1.0),
        };
    }
    for (rank, &(key, norm)) in vector_norm.iter().enumerate() {
        let entry = combined.entry(key).or_insert((key, 0.0, None, None));
        entry.3 = Some(norm);
        entry.1 += match fusion {
            Fusion::Weighted { vector, .. } => vector * norm,
            Fusion::Rrf { k } => 1.0 / (k + rank as f32 + 1.0),
        };
    }
    let mut fused: Vec<Fused> = combined.into_values().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused.truncate(limit);
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn weighted_fusion_normalizes_then_weighs() {
        // BM25 magnitudes (tens) must not drown cosine similarities (< 1).
        let keyword = [(1, 40.0), (2, 10.0)];
        let vector = [(2, 0.9), (3, 0.5)];
        let fused = fuse(&keyword, &vector, Fusion::default(), 10);
        let scores: Vec<(u64, f32)> = fused.iter().map(|f| (f.0, f.1)).collect();
        assert_eq!(scores, [(2, 0.7), (1, 0.3), (3, 0.0)]);
        assert_eq!(fused[0].2, Some(0.0));
        assert_eq!(fused[0].3, Some(1.0));
        let keyword_heavy = fuse(&keyword, &vector, Fusion::Weighted { vector: 0.2, keyword: 0.8 }, 1);
        assert_eq!(keyword_heavy[0].0, 1);
    }

    #[test]
    fn rrf_rewards_agreement() {
        let fused = fuse(&[(1, 9.0), (2, 8.0)], &[(2, 0.9), (3, 0.8)], Fusion::Rrf { k: 60.0 }, 3);
        assert_eq!(fused[0].0, 2);
        assert!((fused[0].1 - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-6);
    }

    proptest! {
        #[test]
        fn normalized_scores_stay_in_unit_range(raw in proptest::collection::vec(-1e6f32..1e6, 1..50)) {
            let scores: Vec<(u64, f32)> = raw.iter().enumerate().map(|(i, &s)| (i as u64, s)).collect();
            let normalized = normalize(&scores);
            prop_assert!(normalized.iter().all(|&(_, s)| (0.0..=1.0).contains(&s)));
            prop_assert!(normalized.iter().any(|&(_, s)| s == 1.0));
        }
    }
}

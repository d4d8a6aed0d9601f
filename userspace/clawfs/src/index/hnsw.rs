//! The HNSW graph of a workspace (specs/clawfs/README.md, "Memory search"):
//! usearch over i8-quantized vectors, saved to `workspace.hnsw` with the
//! sidecar `workspace.hnsw.json` that says what it holds.
//!
//! Owns: how the graph stores and compares vectors ([`quantize`], the
//! dot-product kernel), building it (in parallel for large batches),
//! saving it with its sidecar, and the check on open that decides between
//! loading the file and rebuilding it from the database.
//! Must not own: the vectors themselves (the database is the truth,
//! `schema`), or how its candidates are re-ranked (`query`).

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use usearch::{IndexOptions, MetricKind, ScalarKind};

use super::schema::{bytes_vector, sqlite, VectorState};
use super::MemoryIndex;
use crate::error::{io, Error, Result};
use crate::fsio::write_json_atomic;
use crate::layout::{HNSW_FILE, HNSW_SIDECAR_FILE, SEARCH_FILE};
use crate::metadata::WorkspaceMetadata;

/// How the HNSW graph stores its vectors ([`quantize`]) and compares them.
/// Recorded in the sidecar: a file built another way is rebuilt on open.
const HNSW_SCALAR: ScalarKind = ScalarKind::I8;
const HNSW_METRIC: MetricKind = MetricKind::IP;
const HNSW_SCALAR_NAME: &str = "i8-ip";

/// Components of a unit vector, in standard deviations (1/√dimension),
/// that still fit the i8 range; larger ones are clamped.
const QUANTIZATION_SIGMAS: f32 = 5.0;

/// A vector as the graph stores it: normalized to unit length, scaled so a
/// component of [`QUANTIZATION_SIGMAS`] standard deviations is 127, rounded
/// and clamped. Every vector gets the same scale, so the i8 inner product
/// is the cosine times a constant, and the graph can use the plain dot
/// product kernel (about 1.5x faster to build than i8 cosine). usearch's
/// own cast would scale unit vectors to ±127, leaving 1536 components a few
/// units each.
pub(super) fn quantize(vector: &[f32]) -> Vec<i8> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return vec![0; vector.len()];
    }
    let scale = 127.0 * (vector.len() as f32).sqrt() / (QUANTIZATION_SIGMAS * norm);
    vector.iter().map(|x| (x * scale).round().clamp(-127.0, 127.0) as i8).collect()
}

/// The HNSW sidecar: the vector state the file holds, and its scalar kind.
#[derive(Debug, Serialize, Deserialize)]
struct HnswSidecar {
    #[serde(flatten)]
    state: VectorState,
    scalar: String,
}

/// usearch reports errors as C++ exceptions; their text is kept.
pub(super) fn hnsw_error(path: &Path, error: impl std::fmt::Display) -> Error {
    Error::Hnsw { path: path.to_owned(), message: error.to_string() }
}

/// The graph's settings for a workspace: its dimension and its HNSW
/// parameters from `metadata.json`, with this version's scalar kind.
pub(super) fn options(metadata: &WorkspaceMetadata) -> IndexOptions {
    let params = metadata.hnsw_params;
    IndexOptions {
        dimensions: metadata.vector_dimension,
        metric: HNSW_METRIC,
        quantization: HNSW_SCALAR,
        connectivity: params.m,
        expansion_add: params.ef_construction,
        expansion_search: params.ef_search,
        multi: false,
    }
}

impl MemoryIndex {
    /// Loads the persisted HNSW file; returns why it cannot be used, if so.
    pub(super) fn persisted_index_problem(&mut self) -> Option<String> {
        let hnsw_path = self.dir.join(HNSW_FILE);
        let sidecar_path = self.dir.join(HNSW_SIDECAR_FILE);
        if !hnsw_path.exists() || !sidecar_path.exists() {
            return (self.state.count > 0 || hnsw_path.exists()).then(|| "the index file is missing".to_owned());
        }
        let HnswSidecar { state: sidecar, scalar } =
            match fs::read(&sidecar_path).ok().and_then(|b| serde_json::from_slice(&b).ok()) {
                Some(sidecar) => sidecar,
                None => return Some(format!("{} is unreadable", sidecar_path.display())),
            };
        if scalar != HNSW_SCALAR_NAME {
            return Some(format!("it stores {scalar} vectors, this version {HNSW_SCALAR_NAME}"));
        }
        if sidecar.count != self.state.count || sidecar.checksum != self.state.checksum {
            return Some(format!(
                "it holds {} vectors (checksum {:016x}), the database {} (checksum {:016x})",
                sidecar.count, sidecar.checksum, self.state.count, self.state.checksum
            ));
        }
        if let Err(error) = self.hnsw.load(&hnsw_path.to_string_lossy()) {
            return Some(format!("it cannot be loaded: {error}"));
        }
        if self.hnsw.size() as u64 != self.state.count {
            return Some(format!("it holds {} vectors, the database {}", self.hnsw.size(), self.state.count));
        }
        None
    }

    /// Rebuilds the HNSW index from the vectors in the database and saves it.
    pub(super) fn rebuild_hnsw(&mut self) -> Result<()> {
        let db_path = self.dir.join(SEARCH_FILE);
        let hnsw_path = self.dir.join(HNSW_FILE);
        self.hnsw.reset().map_err(|e| hnsw_error(&hnsw_path, e))?;
        let mut statement =
            self.connection.prepare("SELECT key, embedding FROM clawfs_vectors").map_err(sqlite(&db_path))?;
        let vectors = statement
            .query_map([], |row| Ok((row.get::<_, u64>(0)?, bytes_vector(&row.get::<_, Vec<u8>>(1)?))))
            .map_err(sqlite(&db_path))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(sqlite(&db_path))?;
        drop(statement);
        self.apply_to_hnsw(&[], &vectors)?;
        self.save_hnsw()
    }

    pub(super) fn save_hnsw(&self) -> Result<()> {
        let hnsw_path = self.dir.join(HNSW_FILE);
        // The sidecar goes first as "unknown" so a crash mid-save is stale,
        // never a wrong file that passes the check.
        let _ = fs::remove_file(self.dir.join(HNSW_SIDECAR_FILE));
        let temporary = self.dir.join(format!("{HNSW_FILE}.tmp"));
        self.hnsw.save(&temporary.to_string_lossy()).map_err(|e| hnsw_error(&hnsw_path, e))?;
        fs::rename(&temporary, &hnsw_path).map_err(io("rename", &hnsw_path))?;
        let sidecar = HnswSidecar { state: self.state.clone(), scalar: HNSW_SCALAR_NAME.to_owned() };
        write_json_atomic(&self.dir.join(HNSW_SIDECAR_FILE), &sidecar)
    }

    pub(super) fn apply_to_hnsw(&mut self, removed: &[u64], added: &[(u64, Vec<f32>)]) -> Result<()> {
        let hnsw_path = self.dir.join(HNSW_FILE);
        for key in removed {
            self.hnsw.remove(*key).map_err(|e| hnsw_error(&hnsw_path, e))?;
        }
        // Graph construction dominates inserts; usearch's add is thread-safe,
        // so large batches are spread over the cores.
        let threads =
            if added.len() >= 64 { std::thread::available_parallelism().map_or(1, usize::from).min(8) } else { 1 };
        if self.hnsw.size() + added.len() > self.hnsw.capacity() {
            // Grow geometrically so a stream of small inserts stays cheap.
            let wanted = (self.hnsw.size() + added.len()).max(self.hnsw.capacity() * 2).max(64);
            self.hnsw.reserve_capacity_and_threads(wanted, threads).map_err(|e| hnsw_error(&hnsw_path, e))?;
        }
        let hnsw = &self.hnsw;
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|worker| {
                    scope.spawn(move || {
                        added
                            .iter()
                            .skip(worker)
                            .step_by(threads)
                            .try_for_each(|(key, vector)| hnsw.add(*key, &quantize(vector)))
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|worker| worker.join().expect("an HNSW insert thread panicked"))
        })
        .map_err(|e| hnsw_error(&hnsw_path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::{quantize, QUANTIZATION_SIGMAS};

    #[test]
    fn quantize_scales_unit_vectors_alike_and_clamps_outliers() {
        // 100 dimensions: one standard deviation of a unit vector's component is 0.1.
        let mut vector = [0.0f32; 100];
        vector[..3].copy_from_slice(&[0.3, -0.1, 0.9]);
        let quantized = quantize(&vector);
        let norm = (0.09f32 + 0.01 + 0.81).sqrt();
        let expected = |x: f32| (x / norm * 127.0 / (QUANTIZATION_SIGMAS * 0.1)).round() as i8;
        assert_eq!(&quantized[..3], &[expected(0.3), expected(-0.1), 127], "0.9 / norm is 9.4 sigmas: clamped");
        assert!(quantized[3..].iter().all(|x| *x == 0));
        assert_eq!(quantize(&vector.map(|x| x * 1000.0)), quantized, "the length does not matter to cosine");
        assert_eq!(quantize(&[0.0; 3]), vec![0; 3]);
        assert_eq!(quantize(&[f32::NAN, 1.0]), vec![0; 2], "a non-finite vector quantizes to zero, not to garbage");
        assert_eq!(quantize(&[f32::INFINITY, 1.0]), vec![0; 2]);
    }
}

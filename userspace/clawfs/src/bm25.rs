//! BM25 for the keyword leg: `clawfs_bm25()`, an FTS5 auxiliary function
//! that returns what FTS5's own `bm25()` returns (k1 = 1.2, b = 0.75, every
//! column weighted 1, negated so that lower is better), except that it
//! reads each matching chunk's length in tokens from memory.
//!
//! Why: `bm25()` runs a statement on the `%_docsize` table for every
//! matching row. On 100,000 notes that lookup was 62% of keyword-query
//! time (perf). A two-word query whose stems match 6,000 notes then took
//! 6 ms, above the 5 ms p95 target. [`ChunkLengths`] holds the same numbers.
//! It is loaded from `%_docsize` and kept current by the index's own
//! commits ([`ChunkLengths::apply`]). A commit by another connection
//! changes `PRAGMA data_version`, and [`ChunkLengths::refresh`] then reloads
//! it before the next query. A row missing from memory gets FTS5's own
//! lookup, so it is slower, not differently scored.
//!
//! rusqlite has no binding for FTS5's extension API, so the function is
//! registered through `rusqlite::ffi`; all of that unsafe code is here. It
//! must not touch anything but its arguments and the lengths it is given.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::{Arc, RwLock};

use rusqlite::{ffi, Connection};

/// The function's SQL name; its one argument is the FTS5 table.
pub(crate) const FUNCTION: &str = "clawfs_bm25";
const FUNCTION_C: &std::ffi::CStr = c"clawfs_bm25";

/// BM25's constants, as FTS5 uses them.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Each chunk's length in tokens over all columns, by FTS5 rowid, as the
/// FTS5 table's `%_docsize` shadow table records it.
#[derive(Debug, Default)]
pub(crate) struct ChunkLengths {
    tokens: HashMap<i64, u32>,
    /// `PRAGMA data_version` when `tokens` was loaded; `None` before.
    data_version: Option<i64>,
}

impl ChunkLengths {
    /// Reloads `lengths` from `docsize_table` when `connection` has seen a
    /// commit by another connection since the last load (or never loaded).
    pub(crate) fn refresh(
        lengths: &RwLock<ChunkLengths>,
        connection: &Connection,
        docsize_table: &str,
    ) -> rusqlite::Result<()> {
        let version: i64 = connection.prepare_cached("PRAGMA data_version")?.query_row([], |row| row.get(0))?;
        if lengths.read().is_ok_and(|current| current.data_version == Some(version)) {
            return Ok(());
        }
        let mut statement = connection.prepare_cached(&format!("SELECT id, sz FROM \"{docsize_table}\""))?;
        let tokens = statement
            .query_map([], |row| Ok((row.get::<_, i64>(0)?, total_tokens(row.get_ref(1)?.as_blob()?))))?
            .collect::<rusqlite::Result<HashMap<_, _>>>()?;
        let mut current = lengths.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        *current = ChunkLengths { tokens, data_version: Some(version) };
        Ok(())
    }

    /// Chunk `key`'s length as `docsize_table` records it, for a commit
    /// to [`apply`](Self::apply) once it has succeeded.
    pub(crate) fn read_one(connection: &Connection, docsize_table: &str, key: u64) -> rusqlite::Result<u32> {
        connection
            .prepare_cached(&format!("SELECT sz FROM \"{docsize_table}\" WHERE id = ?1"))?
            .query_row([key], |row| Ok(total_tokens(row.get_ref(0)?.as_blob()?)))
    }

    /// Records this connection's own committed change: `removed` chunks
    /// are gone, `added` ones have these lengths. (Another connection's
    /// commits are caught by [`refresh`](Self::refresh) instead.)
    pub(crate) fn apply(&mut self, removed: &[u64], added: &[(u64, u32)]) {
        for key in removed {
            self.tokens.remove(&(*key as i64));
        }
        self.tokens.extend(added.iter().map(|(key, tokens)| (*key as i64, *tokens)));
    }

    /// How many chunks have a length in memory.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }
}

/// The sum of a `%_docsize` blob: one SQLite varint per column (big-endian
/// groups of 7 bits, the high bit set on every byte but the last; a ninth
/// byte carries 8 bits).
fn total_tokens(blob: &[u8]) -> u32 {
    let mut total = 0u64;
    let mut rest = blob;
    while !rest.is_empty() {
        let mut value = 0u64;
        let mut used = rest.len();
        for (n, byte) in rest.iter().enumerate().take(9) {
            if n == 8 {
                value = (value << 8) | u64::from(*byte);
                used = 9;
                break;
            }
            value = (value << 7) | u64::from(byte & 0x7f);
            if byte & 0x80 == 0 {
                used = n + 1;
                break;
            }
        }
        total += value;
        rest = &rest[used..];
    }
    total.min(u64::from(u32::MAX)) as u32
}

/// Registers `clawfs_bm25()` on `connection`, reading chunk lengths from
/// `lengths` (which the function keeps alive until the connection closes).
pub(crate) fn register(connection: &Connection, lengths: Arc<RwLock<ChunkLengths>>) -> rusqlite::Result<()> {
    let api = fts5_api(connection)?;
    // SAFETY: `api` is the live FTS5 API of this connection (checked non-null
    // and at least version 2, which has xCreateFunction).
    let create =
        unsafe { (*api).xCreateFunction }.ok_or_else(|| failure(ffi::SQLITE_MISUSE, "FTS5 has no xCreateFunction"))?;
    let user_data = Arc::into_raw(lengths) as *mut c_void;
    // SAFETY: as above. FTS5 hands `user_data` to `bm25` while the function
    // exists and to `release_lengths` once, when the connection closes.
    let rc = unsafe { create(api, FUNCTION_C.as_ptr(), user_data, Some(bm25), Some(release_lengths)) };
    if rc == ffi::SQLITE_OK {
        return Ok(());
    }
    // SAFETY: a failed xCreateFunction keeps nothing and calls no
    // destructor, so the `Arc` is still ours to drop.
    drop(unsafe { Arc::from_raw(user_data as *const RwLock<ChunkLengths>) });
    Err(failure(rc, "registering clawfs_bm25"))
}

fn failure(code: c_int, message: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some(message.to_owned()))
}

/// The connection's `fts5_api`, obtained the documented way: `SELECT
/// fts5(?1)` with a pointer bound as type "fts5_api_ptr".
fn fts5_api(connection: &Connection) -> rusqlite::Result<*mut ffi::fts5_api> {
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    // SAFETY: the handle is valid while `connection` is borrowed and is used
    // on this thread only. The statement is prepared, stepped and finalized
    // here; the bound pointer is to `api`, which outlives the statement, and
    // FTS5 writes one `*mut fts5_api` through it.
    let rc = unsafe {
        let db = connection.handle();
        let mut statement = ptr::null_mut();
        let rc = ffi::sqlite3_prepare_v2(db, c"SELECT fts5(?1)".as_ptr(), -1, &mut statement, ptr::null_mut());
        if rc != ffi::SQLITE_OK {
            return Err(failure(rc, "preparing SELECT fts5(?1)"));
        }
        ffi::sqlite3_bind_pointer(statement, 1, (&raw mut api).cast(), c"fts5_api_ptr".as_ptr(), None);
        ffi::sqlite3_step(statement);
        ffi::sqlite3_finalize(statement)
    };
    // SAFETY: a non-null `api` points to FTS5's API object, which lives as
    // long as the connection.
    if rc != ffi::SQLITE_OK || api.is_null() || unsafe { (*api).iVersion } < 2 {
        return Err(failure(
            if rc == ffi::SQLITE_OK { ffi::SQLITE_ERROR } else { rc },
            "this SQLite has no FTS5 API version 2",
        ));
    }
    Ok(api)
}

/// Drops the `Arc` given to FTS5 in [`register`].
unsafe extern "C" fn release_lengths(lengths: *mut c_void) {
    // SAFETY: `lengths` came from `Arc::into_raw` in `register`, and FTS5
    // calls this destructor once.
    drop(unsafe { Arc::from_raw(lengths as *const RwLock<ChunkLengths>) });
}

/// What one query computes once: each phrase's IDF and the average length.
struct QueryStatistics {
    idf: Vec<f64>,
    average_length: f64,
    /// Scratch space for a row's phrase frequencies.
    frequencies: Vec<f64>,
}

unsafe extern "C" fn release_statistics(statistics: *mut c_void) {
    // SAFETY: set by `Call::keep_statistics` from `Box::into_raw`; FTS5
    // calls this once.
    drop(unsafe { Box::from_raw(statistics as *mut QueryStatistics) });
}

/// The FTS5 auxiliary function itself.
unsafe extern "C" fn bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    context: *mut ffi::sqlite3_context,
    _argument_count: c_int,
    _arguments: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 calls this with its API table and the context of the
    // current row, both valid for the duration of the call.
    let call = Call { api: unsafe { &*api }, fts };
    let result = score(&call);
    // SAFETY: `context` is this call's result context.
    unsafe {
        match result {
            Ok(score) => ffi::sqlite3_result_double(context, -score),
            Err(code) => ffi::sqlite3_result_error_code(context, code),
        }
    }
}

/// The current row's BM25 score (higher is better), as FTS5's bm25 computes it.
fn score(call: &Call) -> Result<f64, c_int> {
    let statistics = match call.statistics() {
        Some(statistics) => statistics,
        None => call.keep_statistics(call.compute_statistics()?)?,
    };
    statistics.frequencies.fill(0.0);
    for instance in 0..call.instance_count()? {
        if let Some(frequency) = statistics.frequencies.get_mut(call.instance_phrase(instance)? as usize) {
            *frequency += 1.0;
        }
    }
    let rowid = call.rowid()?;
    let known = call.lengths()?.read().ok().and_then(|lengths| lengths.tokens.get(&rowid).copied());
    let length = match known {
        Some(tokens) => f64::from(tokens),
        None => f64::from(call.row_tokens()?),
    };
    let normalization = K1 * (1.0 - B + B * length / statistics.average_length);
    Ok(statistics
        .idf
        .iter()
        .zip(&statistics.frequencies)
        .fold(0.0, |score, (idf, frequency)| score + idf * ((frequency * (K1 + 1.0)) / (frequency + normalization))))
}

/// Fails with SQLITE_MISUSE when an API entry is missing (never, for an
/// FTS5 that passed the version check), since a panic here would abort.
fn entry<T>(function: Option<T>) -> Result<T, c_int> {
    function.ok_or(ffi::SQLITE_MISUSE)
}

fn check(rc: c_int) -> Result<(), c_int> {
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rc)
    }
}

/// The arguments of a `bm25` call in progress. Only `bm25` builds one,
/// from what FTS5 passed it, so `fts` is the live context of the current
/// row and `api` FTS5's table, for as long as the `Call` exists.
struct Call<'a> {
    api: &'a ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
}

impl Call<'_> {
    fn instance_count(&self) -> Result<c_int, c_int> {
        let mut count: c_int = 0;
        // SAFETY: a live context (see `Call`); the out-pointer is a local.
        check(unsafe { entry(self.api.xInstCount)?(self.fts, &mut count) })?;
        Ok(count)
    }

    /// The phrase that instance `instance` of the current row belongs to.
    fn instance_phrase(&self, instance: c_int) -> Result<c_int, c_int> {
        let (mut phrase, mut column, mut offset): (c_int, c_int, c_int) = (0, 0, 0);
        // SAFETY: a live context (see `Call`); the out-pointers are locals.
        check(unsafe { entry(self.api.xInst)?(self.fts, instance, &mut phrase, &mut column, &mut offset) })?;
        Ok(phrase)
    }

    fn rowid(&self) -> Result<i64, c_int> {
        // SAFETY: a live context (see `Call`).
        Ok(unsafe { entry(self.api.xRowid)?(self.fts) })
    }

    /// The current row's length in tokens, from FTS5's `%_docsize` lookup.
    fn row_tokens(&self) -> Result<c_int, c_int> {
        let mut tokens: c_int = 0;
        // SAFETY: a live context (see `Call`); the out-pointer is a local.
        check(unsafe { entry(self.api.xColumnSize)?(self.fts, -1, &mut tokens) })?;
        Ok(tokens)
    }

    /// The lengths `register` gave FTS5 as the function's user data.
    fn lengths(&self) -> Result<&RwLock<ChunkLengths>, c_int> {
        // SAFETY: a live context (see `Call`). The user data is the
        // `RwLock` of the `Arc` `register` handed FTS5, which keeps it alive
        // as long as the function, so at least for this call.
        Ok(unsafe { &*(entry(self.api.xUserData)?(self.fts) as *const RwLock<ChunkLengths>) })
    }

    /// This query's statistics, once [`keep_statistics`](Self::keep_statistics)
    /// stored them. They live until the query ends, not just this call;
    /// `score` holds them only during the call.
    fn statistics<'query>(&self) -> Option<&'query mut QueryStatistics> {
        // SAFETY: a live context (see `Call`). Aux data slot 0 of this
        // function holds nothing but the `QueryStatistics` that
        // `keep_statistics` stored; FTS5 keeps it until the query ends, and
        // only one call of this query runs at a time.
        unsafe { (entry(self.api.xGetAuxdata).ok()?(self.fts, 0) as *mut QueryStatistics).as_mut() }
    }

    /// Hands `statistics` to FTS5 for the rest of the query.
    fn keep_statistics<'query>(&self, statistics: QueryStatistics) -> Result<&'query mut QueryStatistics, c_int> {
        let raw = Box::into_raw(Box::new(statistics));
        // SAFETY: a live context (see `Call`). FTS5 owns `raw` from here and
        // frees it with `release_statistics`, also when this fails.
        check(unsafe { entry(self.api.xSetAuxdata)?(self.fts, raw.cast(), Some(release_statistics)) })?;
        // SAFETY: stored successfully, so alive until the query ends.
        Ok(unsafe { &mut *raw })
    }

    /// Each phrase's IDF and the average row length, as FTS5's bm25
    /// computes them: IDF = ln((N - n + 0.5) / (n + 0.5)), at least 1e-6,
    /// where n is the number of rows containing the phrase.
    fn compute_statistics(&self) -> Result<QueryStatistics, c_int> {
        let (mut rows, mut tokens): (i64, i64) = (0, 0);
        // SAFETY: a live context (see `Call`).
        let phrases = unsafe { entry(self.api.xPhraseCount)?(self.fts) }.max(0);
        // SAFETY: a live context; the out-pointer is a local.
        check(unsafe { entry(self.api.xRowCount)?(self.fts, &mut rows) })?;
        // SAFETY: a live context; the out-pointer is a local.
        check(unsafe { entry(self.api.xColumnTotalSize)?(self.fts, -1, &mut tokens) })?;
        let mut idf = Vec::with_capacity(phrases as usize);
        for phrase in 0..phrases {
            let mut hits: i64 = 0;
            // SAFETY: a live context; `count_row` gets the local `i64` it expects.
            check(unsafe { entry(self.api.xQueryPhrase)?(self.fts, phrase, (&raw mut hits).cast(), Some(count_row)) })?;
            let value = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
            idf.push(if value <= 0.0 { 1e-6 } else { value });
        }
        Ok(QueryStatistics {
            idf,
            average_length: tokens as f64 / rows as f64,
            frequencies: vec![0.0; phrases as usize],
        })
    }
}

/// xQueryPhrase's callback: counts the rows that contain the phrase.
unsafe extern "C" fn count_row(
    _api: *const ffi::Fts5ExtensionApi,
    _fts: *mut ffi::Fts5Context,
    hits: *mut c_void,
) -> c_int {
    // SAFETY: `hits` is the `i64` `compute_statistics` passed to xQueryPhrase.
    unsafe { *(hits as *mut i64) += 1 };
    ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::total_tokens;

    #[test]
    fn docsize_blobs_sum_their_varints() {
        assert_eq!(total_tokens(&[]), 0);
        // Three columns of 5, 0 and 1 tokens.
        assert_eq!(total_tokens(&[5, 0, 1]), 6);
        // 300 = 0b10_0101100: two bytes, high bit on the first.
        assert_eq!(total_tokens(&[0x82, 0x2c, 7]), 307);
        // 2^21 + 1 in three bytes.
        assert_eq!(total_tokens(&[0x81, 0x80, 0x80, 0x01]), (1 << 21) + 1);
    }
}

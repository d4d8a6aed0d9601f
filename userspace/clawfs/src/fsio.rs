//! The few file-system operations ClawFS builds on, over `clawos-fsutil`,
//! with the crate's errors: a JSON file written so a reader never sees it
//! torn, a directory's entries, a directory's fsync.
//!
//! Owns: how those are done. Must not own: which files and where
//! ([`crate::layout`]), or what the files hold (their own modules). It
//! imports nothing of the crate but the errors, so every module may use it
//! without a cycle.

use std::fs;
use std::path::Path;

use serde::Serialize;

use crate::error::{io, Error, Result};

/// Writes `value` as JSON so that readers see the old file or the new one,
/// never a torn one: temporary file, fsync, rename, fsync of the directory.
/// A new file gets mode 0666 less the umask, as `File::create` gives.
pub fn write_json_atomic(path: &Path, value: &impl Serialize) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| Error::Json { path: path.into(), source })?;
    bytes.push(b'\n');
    fsutil::write_atomic(path, &bytes, 0o666).map_err(io("write", path))
}

/// The entries of `dir`; none if it does not exist (yet).
pub(crate) fn dir_entries(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    match fs::read_dir(dir) {
        Ok(entries) => entries.collect::<std::io::Result<_>>().map_err(io("list", dir)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(error) => Err(io("list", dir)(error)),
    }
}

/// fsync(2) of a directory, so renames and removals in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    fsutil::sync_dir(dir).map_err(io("fsync directory", dir))
}

//! Crash-safe file operations: every write goes to a temporary file that
//! is fsynced, renamed over the target, and made durable by fsyncing the
//! directory, so a crash leaves either the old or the new file, never a
//! torn one.

use std::ffi::CString;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use crate::crypto::random_bytes;

/// Makes the directory entry changes in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` and its missing parents with mode 0700: only the vault's
/// owner enters (specs/vault/README.md, "Files").
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Atomically replaces `path` with `contents` (mode 0600).
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let suffix: [u8; 8] = random_bytes();
    let temporary = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        crate::hex(&suffix)
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&temporary, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        // Best effort: the temporary name is never read, only litter.
        let _ = fs::remove_file(&temporary);
    }
    result
}

/// Atomically swaps two directory entries (renameat2 RENAME_EXCHANGE), so
/// readers see either the old or the new tree and never a missing one.
pub(crate) fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    let to_c = |path: &Path| {
        CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
    };
    let (a_c, b_c) = (to_c(a)?, to_c(b)?);
    // SAFETY: both pointers are valid NUL-terminated strings that outlive
    // the call; renameat2 does not retain them.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a_c.as_ptr(),
            libc::AT_FDCWD,
            b_c.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if let Some(parent) = a.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

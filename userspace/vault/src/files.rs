//! The vault's own file operations: private directories, 0600 files
//! replaced atomically, and the exchange of two directory trees. The
//! mechanism (temporary file, fsync, rename, fsync of the directory) is
//! `clawos-fsutil`'s; what is the vault's is the modes (specs/vault/README.md,
//! "Files") and `exchange`, which nothing else needs.

use std::ffi::CString;
use std::fs::DirBuilder;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

pub(crate) use fsutil::sync_dir;

/// Creates `dir` and its missing parents with mode 0700: only the vault's
/// owner enters (specs/vault/README.md, "Files").
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Atomically replaces `path` with `contents` (mode 0600): a crash leaves
/// the old or the new file, never a torn one.
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    fsutil::write_atomic(path, contents, 0o600)
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
    let rc =
        unsafe { libc::renameat2(libc::AT_FDCWD, a_c.as_ptr(), libc::AT_FDCWD, b_c.as_ptr(), libc::RENAME_EXCHANGE) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if let Some(parent) = a.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

//! `clawos-fsutil`: the few helpers that the crates keeping files on a
//! ClawOS box (the vault, ClawFS, the tool host, clawctl) would otherwise
//! each write again: lowercase hex, RFC 3339 timestamps, fsync of a
//! directory, atomic replacement of a file, and a flush that concurrent
//! writers share ([`SharedFlush`]).
//!
//! It owns only mechanism: which file is written with which mode, and what a
//! path or a name may be, stay with the callers (RULE-001 and the naming
//! rules are `clawfs`'s, specs/clawfs/README.md). It has no dependencies, so
//! the vault, which sits below ClawFS, can use it too; it must not grow any.

mod shared_flush;
mod time;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub use shared_flush::{SharedFlush, Ticket};
pub use time::{civil_from_days, days_from_date, now_rfc3339, rfc3339, today};

/// Lowercase hexadecimal of `bytes`, two digits a byte. The string is
/// allocated once at its final size, so the hex of a key (the vault's
/// recovery key, kept in `Zeroizing`) leaves no partial copy behind in
/// memory freed by a reallocation.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 * bytes.len());
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

/// The bytes of hexadecimal `text` (either case, two digits a byte); None
/// for an odd length or a character that is not a hex digit.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    // Digit by digit: `u8::from_str_radix` would take a sign ("+1").
    fn digit(c: u8) -> Option<u8> {
        char::from(c).to_digit(16).and_then(|d| u8::try_from(d).ok())
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes.chunks_exact(2).map(|pair| Some((digit(pair[0])? << 4) | digit(pair[1])?)).collect()
}

/// fsync(2) of a directory, so that entries created, renamed or removed in
/// it survive a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Temporary names tried before giving up (each taken one is a leftover of
/// a crashed writer with the same process id).
const TEMPORARY_NAME_ATTEMPTS: u32 = 64;

/// Atomically replaces `path` with `contents`: readers and a crash see the
/// old file or the new one, never a torn one, and a failed write (a full
/// disk) leaves the old file as it was.
///
/// In this order: a new temporary file `.<name>.tmp-<pid>-<n>` beside
/// `path` (created exclusively, so never through a planted symlink, with
/// `mode` less the umask), the contents, fsync of the file, rename over
/// `path`, fsync of the directory. On failure the temporary file is
/// removed. The directory must exist.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        Some(_) => Path::new("."),
        None => return Err(io::Error::new(io::ErrorKind::InvalidInput, "the path has no parent directory")),
    };
    let name =
        path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path has no file name"))?;
    let mut attempt = 0;
    let (temporary, mut file) = loop {
        let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let temporary = dir.join(format!(".{}.tmp-{}-{sequence}", name.to_string_lossy(), std::process::id()));
        match OpenOptions::new().write(true).create_new(true).mode(mode).open(&temporary) {
            Ok(file) => break (temporary, file),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && attempt < TEMPORARY_NAME_ATTEMPTS => {
                attempt += 1
            }
            Err(error) => return Err(error),
        }
    };
    let written = file.write_all(contents).and_then(|()| file.sync_all()).and_then(|()| fs::rename(&temporary, path));
    drop(file);
    if let Err(error) = written {
        // The temporary name is never read again: only litter.
        let _ = fs::remove_file(&temporary);
        return Err(error);
    }
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn hex_is_lowercase_two_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
    }

    #[test]
    fn unhex_reverses_hex_and_refuses_what_is_not_hex() {
        assert_eq!(unhex("000fABff"), Some(vec![0x00, 0x0f, 0xab, 0xff]));
        assert_eq!(unhex(""), Some(vec![]));
        for bad in ["0", "0g", "+1", "é0"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }

    #[test]
    fn write_atomic_replaces_with_the_mode_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"old", 0o600).unwrap();
        write_atomic(&path, b"new", 0o600).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        // A fresh file gets the mode asked for (less the umask, which never
        // takes bits from 0600).
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["state.json"]);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("target");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("inside"), b"kept").unwrap();
        // rename(2) of a file over a non-empty directory fails.
        assert!(write_atomic(&path, b"new", 0o600).is_err());
        assert_eq!(fs::read(path.join("inside")).unwrap(), b"kept");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["target"]);
    }
}

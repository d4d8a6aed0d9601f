//! Lexical path handling: AgentFS paths are absolute, `/`-separated, with
//! empty components ignored (spec: Path Resolution, step 2).

use crate::error::{Error, Result};

/// Longest name of one directory entry, in bytes (NAME_MAX).
pub const MAX_NAME_LEN: usize = 255;
/// Longest path accepted by any operation, in bytes (PATH_MAX).
pub const MAX_PATH_LEN: usize = 4096;

/// The non-empty components of `path`.
pub(crate) fn components(path: &str) -> impl DoubleEndedIterator<Item = &str> {
    path.split('/').filter(|c| !c.is_empty())
}

/// `child` appended to the normalized directory path `dir`.
pub(crate) fn join(dir: &str, child: &str) -> String {
    if dir == "/" {
        format!("/{child}")
    } else {
        format!("{dir}/{child}")
    }
}

/// The parent of a normalized path; `/` for `/` itself (spec: fs_whiteout).
pub(crate) fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(idx) => &path[..idx],
    }
}

/// Rejects paths and names POSIX would reject before any lookup.
pub(crate) fn check_path(path: &str) -> Result<()> {
    if path.len() > MAX_PATH_LEN {
        return Err(Error::NameTooLong { name: path.to_owned() });
    }
    if path.contains('\0') {
        return Err(Error::invalid("path contains a NUL byte"));
    }
    for name in components(path) {
        check_name(name)?;
    }
    Ok(())
}

/// Rejects a single entry name that is too long or not a plain name.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.len() > MAX_NAME_LEN {
        return Err(Error::NameTooLong { name: name.to_owned() });
    }
    if name.is_empty() || name.contains('/') || name.contains('\0') {
        return Err(Error::invalid(format!("{name:?} is not a valid file name")));
    }
    Ok(())
}

/// Splits `path` into its parent path and final name, for operations that
/// create or remove that final name. `.`, `..` and `/` have no such name.
pub(crate) fn split_last(path: &str) -> Result<(String, &str)> {
    check_path(path)?;
    let mut parts: Vec<&str> = components(path).collect();
    let name = parts.pop().ok_or_else(|| Error::invalid("the root directory has no parent entry"))?;
    if name == "." || name == ".." {
        return Err(Error::invalid(format!("{path}: cannot use {name:?} as an entry name")));
    }
    Ok((format!("/{}", parts.join("/")), name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_of_follows_the_whiteout_rule() {
        assert_eq!(parent_of("/"), "/");
        assert_eq!(parent_of("/foo"), "/");
        assert_eq!(parent_of("/foo/bar"), "/foo");
    }

    #[test]
    fn split_last_normalizes_and_rejects_dot_names() {
        assert_eq!(split_last("//a//b/").unwrap(), ("/a".to_owned(), "b"));
        assert_eq!(split_last("/x").unwrap(), ("/".to_owned(), "x"));
        assert_eq!(split_last("/").unwrap_err().errno(), libc::EINVAL);
        assert_eq!(split_last("/a/..").unwrap_err().errno(), libc::EINVAL);
    }

    #[test]
    fn overlong_names_are_enametoolong() {
        let long = "n".repeat(MAX_NAME_LEN + 1);
        assert_eq!(check_path(&format!("/{long}")).unwrap_err().errno(), libc::ENAMETOOLONG);
        assert!(check_path(&format!("/{}", "n".repeat(MAX_NAME_LEN))).is_ok());
        let deep = "/d".repeat(MAX_PATH_LEN / 2 + 1);
        assert_eq!(check_path(&deep).unwrap_err().errno(), libc::ENAMETOOLONG);
    }
}

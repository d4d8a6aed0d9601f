//! The names the kernel knows each inode by.
//!
//! The storage library addresses files by path while FUSE addresses them by
//! inode number, so the mount remembers, for every inode the kernel has
//! looked up, the paths it was found under. Hard links give one inode several
//! paths; any of them reaches the same inode.

use std::collections::HashMap;

use fuser::FUSE_ROOT_ID;

/// Inode number to known paths, and back.
#[derive(Debug)]
pub(crate) struct InodePaths {
    by_ino: HashMap<u64, Vec<String>>,
    by_path: HashMap<String, u64>,
}

impl InodePaths {
    /// A map that knows only the root directory.
    pub(crate) fn new() -> InodePaths {
        let mut paths = InodePaths { by_ino: HashMap::new(), by_path: HashMap::new() };
        paths.add(FUSE_ROOT_ID, "/".to_owned());
        paths
    }

    /// A path of `ino`, if the kernel has been told about it.
    pub(crate) fn path(&self, ino: u64) -> Option<&str> {
        self.by_ino.get(&ino).and_then(|paths| paths.first()).map(String::as_str)
    }

    /// The inode the kernel knows `path` as, if it has been told.
    pub(crate) fn ino(&self, path: &str) -> Option<u64> {
        self.by_path.get(path).copied()
    }

    /// Records that `path` names `ino`, dropping whatever it named before.
    pub(crate) fn add(&mut self, ino: u64, path: String) {
        if let Some(old) = self.by_path.insert(path.clone(), ino) {
            if old == ino {
                return;
            }
            self.forget_path_of(old, &path);
        }
        self.by_ino.entry(ino).or_default().push(path);
    }

    /// Forgets `path` (unlink, rmdir, or a rename target that was replaced).
    pub(crate) fn remove(&mut self, path: &str) {
        if let Some(ino) = self.by_path.remove(path) {
            self.forget_path_of(ino, path);
        }
    }

    /// Moves `from` and everything below it to `to`, replacing what `to` named.
    pub(crate) fn rename(&mut self, from: &str, to: &str) {
        self.remove(to);
        let below = format!("{from}/");
        let moved: Vec<String> =
            self.by_path.keys().filter(|path| *path == from || path.starts_with(&below)).cloned().collect();
        for old in moved {
            let ino = self.by_path[&old];
            self.remove(&old);
            self.add(ino, format!("{to}{}", &old[from.len()..]));
        }
    }

    fn forget_path_of(&mut self, ino: u64, path: &str) {
        if let Some(paths) = self.by_ino.get_mut(&ino) {
            paths.retain(|known| known != path);
            if paths.is_empty() {
                self.by_ino.remove(&ino);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_links_keep_the_inode_reachable_until_the_last_name_goes() {
        let mut paths = InodePaths::new();
        paths.add(7, "/a".into());
        paths.add(7, "/b".into());
        paths.remove("/a");
        assert_eq!(paths.path(7), Some("/b"));
        paths.remove("/b");
        assert_eq!(paths.path(7), None);
        assert_eq!(paths.path(FUSE_ROOT_ID), Some("/"));
    }

    #[test]
    fn renaming_a_directory_moves_its_descendants_but_not_lookalikes() {
        let mut paths = InodePaths::new();
        paths.add(2, "/d".into());
        paths.add(3, "/d/f".into());
        paths.add(4, "/d/sub/g".into());
        paths.add(5, "/dx".into());
        paths.add(6, "/e".into());
        paths.rename("/d", "/e");
        assert_eq!(paths.path(2), Some("/e"));
        assert_eq!(paths.path(3), Some("/e/f"));
        assert_eq!(paths.path(4), Some("/e/sub/g"));
        assert_eq!(paths.path(5), Some("/dx"));
        assert_eq!(paths.path(6), None, "the replaced target is forgotten");
    }

    #[test]
    fn a_path_reused_by_a_new_inode_leaves_the_old_one() {
        let mut paths = InodePaths::new();
        paths.add(2, "/f".into());
        paths.add(3, "/f".into());
        assert_eq!(paths.path(2), None);
        assert_eq!(paths.path(3), Some("/f"));
    }
}

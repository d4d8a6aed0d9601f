//! The merged view of a workspace: the writable delta database over an
//! optional read-only base. [`Ctx`] is one transaction's view; it resolves
//! paths across both layers and makes every change in the delta, copying
//! base entries up first and hiding deleted base entries behind whiteouts,
//! so that the overlay consistency rules hold after every operation.
//! Without a base it is plain path resolution over the one database.
//!
//! Owns: path resolution (symlinks, `..`, ELOOP), lookups across the
//! layers, copy-up and its `fs_origin` records, whiteouts, and the
//! namespace changes (create, remove, rename, attributes) that must keep
//! the layers consistent.
//!
//! Must not own: transactions and batches (`workspace`, which hands each
//! operation a `Ctx`), the SQL of single tables (`db`), or reading the
//! base itself (`base`).

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};

use crate::base::BaseLayer;
use crate::db::{self, NewInode, Times};
use crate::error::{Error, Result};
use crate::path::{check_path, components, join, parent_of, split_last};
use crate::types::{SetAttr, Stat, Timestamp, PERMISSION_BITS, S_IFDIR, S_IFLNK, S_IFMT};
use crate::{MAX_SYMLINK_FOLLOWS, ROOT_INO};

/// Where a resolved name lives.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// An inode of the writable database.
    Delta(i64),
    /// An entry only the read-only base layer has, with its base stat.
    Base(Stat),
}

/// One transaction's view of the workspace.
pub(crate) struct Ctx<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) chunk_size: u64,
    /// The workspace's file size limit (EFBIG past it).
    pub(crate) file_size_limit: u64,
    pub(crate) base: Option<&'a dyn BaseLayer>,
    pub(crate) owner: (u32, u32),
}

impl Ctx<'_> {
    pub(crate) fn base(&self) -> Result<&dyn BaseLayer> {
        self.base.ok_or_else(|| Error::corrupt("base entry without a base layer"))
    }

    /// Stat as reported to callers: a copied-up inode keeps its base number
    /// (overlay consistency rule 6).
    pub(crate) fn stat(&self, node: &Node) -> Result<Stat> {
        match node {
            Node::Delta(ino) => db::node_stat(self.conn, *ino),
            Node::Base(stat) => Ok(stat.clone()),
        }
    }

    pub(crate) fn require_regular(&self, path: &str, stat: &Stat) -> Result<()> {
        if stat.is_dir() {
            Err(Error::IsADirectory { path: path.to_owned() })
        } else if !stat.is_file() {
            Err(Error::invalid(format!("{path}: not a regular file")))
        } else {
            Ok(())
        }
    }

    fn whiteout_exists(&self, path: &str) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached("SELECT 1 FROM fs_whiteout WHERE path = ?")?
            .query_row([path], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// Overlay lookup of `name` in the directory `dir` at `dir_path`: delta,
    /// then whiteout, then base (spec: Overlay Lookup Semantics).
    pub(crate) fn lookup_child(&self, dir_path: &str, dir: &Node, name: &str) -> Result<Option<Node>> {
        Ok(self.lookup_child_mode(dir_path, dir, name)?.map(|(node, _)| node))
    }

    /// [`Ctx::lookup_child`] with the mode of what it found.
    fn lookup_child_mode(&self, dir_path: &str, dir: &Node, name: &str) -> Result<Option<(Node, u32)>> {
        if let Node::Delta(dir_ino) = dir {
            if let Some((ino, mode)) = db::lookup_child_mode(self.conn, *dir_ino, name)? {
                return Ok(Some((Node::Delta(ino), mode)));
            }
        }
        let Some(base) = self.base else { return Ok(None) };
        let child_path = join(dir_path, name);
        if self.whiteout_exists(&child_path)? {
            return Ok(None);
        }
        Ok(base.lookup(&child_path)?.map(|stat| {
            let mode = stat.mode;
            (Node::Base(stat), mode)
        }))
    }

    pub(crate) fn require_child(&self, dir_path: &str, dir: &Node, name: &str) -> Result<Node> {
        self.lookup_child(dir_path, dir, name)?.ok_or_else(|| Error::not_found(&join(dir_path, name)))
    }

    pub(crate) fn readlink(&self, path: &str, node: &Node) -> Result<String> {
        match node {
            Node::Delta(ino) => db::symlink_target(self.conn, *ino),
            Node::Base(_) => self.base()?.readlink(path),
        }
    }

    /// Resolves `path` to its symlink-free absolute path and node. `..` is
    /// taken lexically on the resolved prefix, symlinks in the middle are
    /// always followed and a final one only when `follow_last`.
    pub(crate) fn resolve(&self, path: &str, follow_last: bool) -> Result<(String, Node)> {
        check_path(path)?;
        let mut pending: Vec<String> = components(path).rev().map(str::to_owned).collect();
        // Each resolved component keeps its mode, so the walk costs one
        // query per component. The root is a directory (consistency rule 5).
        let mut stack: Vec<(String, Node, u32)> = vec![("/".to_owned(), Node::Delta(ROOT_INO), S_IFDIR)];
        let mut follows = 0;
        while let Some(name) = pending.pop() {
            match name.as_str() {
                "." => continue,
                ".." => {
                    if stack.len() > 1 {
                        stack.pop();
                    }
                    continue;
                }
                _ => {}
            }
            let (dir_path, dir, dir_mode) = stack.last().expect("the root never leaves the stack");
            if dir_mode & S_IFMT != S_IFDIR {
                return Err(Error::NotADirectory { path: dir_path.clone() });
            }
            let child_path = join(dir_path, &name);
            let (child, mode) =
                self.lookup_child_mode(dir_path, dir, &name)?.ok_or_else(|| Error::not_found(&child_path))?;
            let is_last = pending.is_empty();
            if (!is_last || follow_last) && mode & S_IFMT == S_IFLNK {
                follows += 1;
                if follows > MAX_SYMLINK_FOLLOWS {
                    return Err(Error::TooManySymlinks { path: path.to_owned() });
                }
                let target = self.readlink(&child_path, &child)?;
                if target.starts_with('/') {
                    stack.truncate(1);
                }
                pending.extend(components(&target).rev().map(str::to_owned));
                continue;
            }
            stack.push((child_path, child, mode));
        }
        let (path, node, _) = stack.pop().expect("the stack holds at least the root");
        Ok((path, node))
    }

    /// The resolved parent directory of `path` and the final name.
    pub(crate) fn resolve_parent<'p>(&self, path: &'p str) -> Result<(String, Node, &'p str)> {
        let (parent, name) = split_last(path)?;
        let (parent_path, parent_node) = self.resolve(&parent, true)?;
        if !self.stat(&parent_node)?.is_dir() {
            return Err(Error::NotADirectory { path: parent_path });
        }
        Ok((parent_path, parent_node, name))
    }

    /// Copies `path` and any missing ancestors from the base into the delta,
    /// recording each origin (overlay consistency rule 5). Returns the delta inode.
    fn copy_up(&self, path: &str) -> Result<i64> {
        let mut ino = ROOT_INO;
        let mut current = "/".to_owned();
        for name in components(path) {
            let child_path = join(&current, name);
            ino = match db::lookup_child(self.conn, ino, name)? {
                Some(child) => child,
                None => self.copy_up_one(ino, name, &child_path)?,
            };
            current = child_path;
        }
        Ok(ino)
    }

    fn copy_up_one(&self, parent_ino: i64, name: &str, path: &str) -> Result<i64> {
        let base = self.base()?;
        let stat = base.lookup(path)?.ok_or_else(|| Error::not_found(path))?;
        let ino = db::create_inode(
            self.conn,
            &NewInode {
                mode: stat.mode,
                uid: stat.uid,
                gid: stat.gid,
                rdev: stat.rdev,
                atime: stat.atime,
                mtime: stat.mtime,
                ctime: stat.ctime,
            },
        )?;
        if stat.is_file() {
            let data = base.read(path, 0, stat.size)?;
            // A copy-up keeps the base's file whole, whatever its size.
            db::replace_content(self.conn, self.chunk_size, db::MAX_FILE_SIZE, ino, &data)?;
        } else if stat.is_symlink() {
            self.conn
                .execute("INSERT INTO fs_symlink (ino, target) VALUES (?, ?)", params![ino, base.readlink(path)?])?;
        }
        for (attr, value) in base.xattrs(path)? {
            db::xattr_set(self.conn, ino, &attr, &value)?;
        }
        // Copy-up preserves the base timestamps: it is not a modification.
        db::set_times(
            self.conn,
            ino,
            &Times { atime: Some(stat.atime), mtime: Some(stat.mtime), ctime: Some(stat.ctime) },
        )?;
        db::add_dentry(self.conn, parent_ino, name, ino)?;
        self.conn
            .execute("INSERT OR REPLACE INTO fs_origin (delta_ino, base_ino) VALUES (?, ?)", params![ino, stat.ino])?;
        Ok(ino)
    }

    /// The delta inode of a resolved node, copying it up if it is base-only.
    pub(crate) fn in_delta(&self, path: &str, node: Node) -> Result<i64> {
        match node {
            Node::Delta(ino) => Ok(ino),
            Node::Base(_) => self.copy_up(path),
        }
    }

    /// The delta inode of the resolved directory `path`.
    pub(crate) fn dir_in_delta(&self, path: &str) -> Result<i64> {
        self.copy_up(path)
    }

    pub(crate) fn regular_in_delta(&self, path: &str, node: Node) -> Result<i64> {
        self.require_regular(path, &self.stat(&node)?)?;
        self.in_delta(path, node)
    }

    pub(crate) fn touch_dir(&self, ino: i64, now: Timestamp) -> Result<()> {
        db::set_times(self.conn, ino, &Times::modified(now))
    }

    fn add_whiteout(&self, path: &str) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO fs_whiteout (path, parent_path, created_at) VALUES (?, ?, ?)
                 ON CONFLICT(path) DO UPDATE SET created_at = excluded.created_at",
            )?
            .execute(params![path, parent_of(path), Timestamp::now().secs])?;
        Ok(())
    }

    pub(crate) fn remove_whiteout(&self, path: &str) -> Result<bool> {
        Ok(self.conn.prepare_cached("DELETE FROM fs_whiteout WHERE path = ?")?.execute([path])? > 0)
    }

    /// Drops whiteouts below `path`: once `path` itself is gone or replaced
    /// they hide nothing.
    fn remove_whiteouts_below(&self, path: &str) -> Result<()> {
        let prefix = format!("{}/", path.trim_end_matches('/'));
        self.conn.execute("DELETE FROM fs_whiteout WHERE substr(path, 1, length(?1)) = ?1", [&prefix])?;
        Ok(())
    }

    fn base_has(&self, path: &str) -> Result<bool> {
        match self.base {
            Some(base) => Ok(base.lookup(path)?.is_some()),
            None => Ok(false),
        }
    }

    /// Entries of a directory across both layers, sorted by name.
    pub(crate) fn merged_children(&self, dir_path: &str, dir: &Node) -> Result<Vec<(String, Node)>> {
        let mut entries = BTreeMap::new();
        if let Some(base) = self.base {
            if base.lookup(dir_path)?.is_some_and(|stat| stat.is_dir()) {
                for (name, stat) in base.readdir(dir_path)? {
                    entries.insert(name, Node::Base(stat));
                }
                let mut stmt = self.conn.prepare_cached("SELECT path FROM fs_whiteout WHERE parent_path = ?")?;
                let hidden =
                    stmt.query_map([dir_path], |row| row.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>()?;
                for path in hidden {
                    if let Some(name) = path.rsplit('/').next() {
                        entries.remove(name);
                    }
                }
            }
        }
        if let Node::Delta(ino) = dir {
            for (name, child) in db::children(self.conn, *ino)? {
                entries.insert(name, Node::Delta(child));
            }
        }
        Ok(entries.into_iter().collect())
    }

    /// Resolves the directory `path`, creating it and any missing ancestors.
    pub(crate) fn mkdir_all(&self, path: &str) -> Result<(String, Node)> {
        match self.resolve(path, true) {
            Ok((real, node)) if self.stat(&node)?.is_dir() => return Ok((real, node)),
            Ok((real, _)) => return Err(Error::NotADirectory { path: real }),
            Err(Error::NotFound { .. }) => {}
            Err(err) => return Err(err),
        }
        let mut current = "/".to_owned();
        for name in components(path) {
            let next = join(&current, name);
            match self.resolve(&next, true) {
                Ok((_, node)) if self.stat(&node)?.is_dir() => {}
                Ok(_) => return Err(Error::NotADirectory { path: next }),
                Err(Error::NotFound { .. }) => {
                    self.create_node(&next, S_IFDIR | 0o755, 0, None)?;
                }
                Err(err) => return Err(err),
            }
            current = next;
        }
        self.resolve(path, true)
    }

    /// Creates a new name with a fresh inode (spec: Creating a File, steps
    /// 1-5), lifting any whiteout there (overlay consistency rule 1).
    pub(crate) fn create_node(&self, path: &str, mode: u32, rdev: u64, symlink: Option<&str>) -> Result<i64> {
        let (parent, parent_node, name) = self.resolve_parent(path)?;
        if self.lookup_child(&parent, &parent_node, name)?.is_some() {
            return Err(Error::AlreadyExists { path: join(&parent, name) });
        }
        self.create_in(&parent, parent_node, name, mode, rdev, symlink)
    }

    /// [`Ctx::create_node`] once the caller has resolved the parent
    /// directory and found `name` free in it.
    pub(crate) fn create_in(
        &self,
        parent: &str,
        parent_node: Node,
        name: &str,
        mode: u32,
        rdev: u64,
        symlink: Option<&str>,
    ) -> Result<i64> {
        let child_path = join(parent, name);
        let parent_ino = self.in_delta(parent, parent_node)?;
        let now = Timestamp::now();
        let ino = db::create_inode(
            self.conn,
            &NewInode { mode, uid: self.owner.0, gid: self.owner.1, rdev, atime: now, mtime: now, ctime: now },
        )?;
        db::add_dentry(self.conn, parent_ino, name, ino)?;
        if let Some(target) = symlink {
            self.conn.execute("INSERT INTO fs_symlink (ino, target) VALUES (?, ?)", params![ino, target])?;
        }
        if self.remove_whiteout(&child_path)? && mode & S_IFMT == S_IFDIR {
            // A directory made where a base directory was deleted starts
            // empty: the old base entries below it stay hidden.
            if let Some(base) = self.base {
                if base.lookup(&child_path)?.is_some_and(|stat| stat.is_dir()) {
                    for (entry, _) in base.readdir(&child_path)? {
                        self.add_whiteout(&join(&child_path, &entry))?;
                    }
                }
            }
        }
        self.touch_dir(parent_ino, now)?;
        Ok(ino)
    }

    /// Removes the name `name` from its directory in the merged view: the
    /// delta dentry if there is one, plus a whiteout if the base still has
    /// the path (overlay consistency rule 2).
    pub(crate) fn remove_entry(&self, parent: &str, parent_node: &Node, name: &str, child: &Node) -> Result<()> {
        let child_path = join(parent, name);
        let now = Timestamp::now();
        if let Node::Delta(ino) = child {
            let Node::Delta(parent_ino) = parent_node else {
                return Err(Error::corrupt(format!("{child_path}: delta entry under a base-only directory")));
            };
            db::remove_dentry(self.conn, *parent_ino, name, *ino)?;
        }
        self.remove_whiteouts_below(&child_path)?;
        if self.base_has(&child_path)? {
            self.add_whiteout(&child_path)?;
        }
        if let Node::Delta(parent_ino) = parent_node {
            self.touch_dir(*parent_ino, now)?;
        }
        Ok(())
    }

    pub(crate) fn rename(&self, old_path: &str, new_path: &str) -> Result<()> {
        let (old_parent, old_parent_node, old_name) = self.resolve_parent(old_path)?;
        let source = self.require_child(&old_parent, &old_parent_node, old_name)?;
        let (new_parent, new_parent_node, new_name) = self.resolve_parent(new_path)?;
        let from = join(&old_parent, old_name);
        let to = join(&new_parent, new_name);
        if from == to {
            return Ok(());
        }
        let source_stat = self.stat(&source)?;
        if source_stat.is_dir() && to.starts_with(&format!("{from}/")) {
            return Err(Error::invalid(format!("cannot move {from} into itself")));
        }
        let target = self.lookup_child(&new_parent, &new_parent_node, new_name)?;
        if let Some(target) = &target {
            let target_stat = self.stat(target)?;
            if target_stat.ino == source_stat.ino {
                // rename(2): two names of one inode leave both in place.
                return Ok(());
            }
            match (source_stat.is_dir(), target_stat.is_dir()) {
                (true, false) => return Err(Error::NotADirectory { path: to }),
                (false, true) => return Err(Error::IsADirectory { path: to }),
                (true, true) if !self.merged_children(&to, target)?.is_empty() => {
                    return Err(Error::DirectoryNotEmpty { path: to });
                }
                _ => {}
            }
        }
        if source_stat.is_dir() && (self.base_has(&from)? || self.base_has(&to)?) {
            return Err(Error::CrossDevice { path: from });
        }
        let source_ino = self.in_delta(&from, source)?;
        let old_parent_ino = self.dir_in_delta(&old_parent)?;
        let new_parent_ino = self.dir_in_delta(&new_parent)?;
        if let Some(Node::Delta(target_ino)) = target {
            self.remove_whiteouts_below(&to)?;
            db::remove_dentry(self.conn, new_parent_ino, new_name, target_ino)?;
        }
        self.conn.execute(
            "UPDATE fs_dentry SET parent_ino = ?, name = ? WHERE parent_ino = ? AND name = ?",
            params![new_parent_ino, new_name, old_parent_ino, old_name],
        )?;
        self.remove_whiteout(&to)?;
        if self.base_has(&from)? {
            self.add_whiteout(&from)?;
        }
        let now = Timestamp::now();
        self.touch_dir(old_parent_ino, now)?;
        self.touch_dir(new_parent_ino, now)?;
        db::set_times(self.conn, source_ino, &Times::changed(now))
    }

    pub(crate) fn set_attr(&self, path: &str, node: Node, attr: &SetAttr) -> Result<Stat> {
        let stat = self.stat(&node)?;
        if attr.size.is_some() {
            self.require_regular(path, &stat)?;
        }
        let ino = self.in_delta(path, node)?;
        if let Some(size) = attr.size {
            db::truncate(self.conn, self.chunk_size, self.file_size_limit, ino, size)?;
        }
        let mode = attr.permissions.map_or(stat.mode, |bits| (stat.mode & S_IFMT) | (bits & PERMISSION_BITS));
        self.conn.execute(
            "UPDATE fs_inode SET mode = ?, uid = COALESCE(?, uid), gid = COALESCE(?, gid) WHERE ino = ?",
            params![mode, attr.uid, attr.gid, ino],
        )?;
        db::set_times(self.conn, ino, &Times { atime: attr.atime, mtime: attr.mtime, ctime: Some(Timestamp::now()) })?;
        self.stat(&Node::Delta(ino))
    }

    pub(crate) fn xattrs(&self, path: &str, node: &Node) -> Result<BTreeMap<String, Vec<u8>>> {
        Ok(match node {
            Node::Delta(ino) => db::xattr_list(self.conn, *ino)?,
            Node::Base(_) => self.base()?.xattrs(path)?,
        }
        .into_iter()
        .collect())
    }
}

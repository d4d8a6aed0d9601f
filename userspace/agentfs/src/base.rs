//! Read-only base layers under an overlay workspace: another AgentFS database
//! or a host directory. Nothing here ever writes; all changes go to the delta.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::error::{Error, Result};
use crate::path::components;
use crate::types::{Stat, Timestamp};

/// Where the read-only layer of an overlay comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseSource {
    /// Another AgentFS database, opened read-only.
    AgentFs(PathBuf),
    /// A directory of the host filesystem.
    HostDir(PathBuf),
}

impl BaseSource {
    /// A directory becomes a [`BaseSource::HostDir`], anything else an AgentFS database.
    pub fn detect(path: impl Into<PathBuf>) -> BaseSource {
        let path = path.into();
        if path.is_dir() {
            BaseSource::HostDir(path)
        } else {
            BaseSource::AgentFs(path)
        }
    }

    pub(crate) fn open(&self) -> Result<Box<dyn BaseLayer>> {
        Ok(match self {
            BaseSource::AgentFs(path) => Box::new(AgentFsBase::open(path)?),
            BaseSource::HostDir(path) => {
                let meta = fs::metadata(path).map_err(|source| host_error(path, source))?;
                if !meta.is_dir() {
                    return Err(Error::NotADirectory { path: path.display().to_string() });
                }
                Box::new(HostDirBase { root: path.clone() })
            }
        })
    }
}

/// The read-only view the overlay needs of its lower layer. Paths are
/// normalized absolute paths whose intermediate components are directories;
/// no method follows a symlink.
pub(crate) trait BaseLayer: Send {
    /// lstat of `path`, `None` if it does not exist.
    fn lookup(&self, path: &str) -> Result<Option<Stat>>;
    /// Up to `len` bytes of the regular file at `path` from `offset`.
    fn read(&self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>>;
    /// Names and stats of the entries of the directory at `path`.
    fn readdir(&self, path: &str) -> Result<Vec<(String, Stat)>>;
    /// Target of the symlink at `path`.
    fn readlink(&self, path: &str) -> Result<String>;
    /// Extended attributes of `path`, copied along on copy-up.
    fn xattrs(&self, path: &str) -> Result<Vec<(String, Vec<u8>)>>;
    /// The highest inode number in use, so the delta can allocate above it.
    fn max_ino(&self) -> Result<u64>;
}

struct AgentFsBase {
    conn: Connection,
    chunk_size: u64,
    has_xattrs: bool,
    /// Whether the database has `clawos_inode_nsec` (ClawOS wrote it).
    has_nsec: bool,
}

impl AgentFsBase {
    fn open(path: &Path) -> Result<Self> {
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        let chunk_size = crate::db::read_chunk_size(&conn)?;
        let has_xattrs = crate::db::table_exists(&conn, "clawos_xattr")?;
        let has_nsec = crate::db::table_exists(&conn, "clawos_inode_nsec")?;
        Ok(AgentFsBase { conn, chunk_size, has_xattrs, has_nsec })
    }

    fn resolve(&self, path: &str) -> Result<Option<i64>> {
        let mut ino = crate::ROOT_INO;
        for name in components(path) {
            let child = self
                .conn
                .prepare_cached("SELECT ino FROM fs_dentry WHERE parent_ino = ? AND name = ?")?
                .query_row(rusqlite::params![ino, name], |row| row.get(0))
                .optional()?;
            match child {
                Some(child) => ino = child,
                None => return Ok(None),
            }
        }
        Ok(Some(ino))
    }

    fn existing(&self, path: &str) -> Result<i64> {
        self.resolve(path)?.ok_or_else(|| Error::not_found(path))
    }
}

impl BaseLayer for AgentFsBase {
    fn lookup(&self, path: &str) -> Result<Option<Stat>> {
        match self.resolve(path)? {
            Some(ino) => Ok(Some(crate::db::inode_stat(&self.conn, ino, self.has_nsec)?)),
            None => Ok(None),
        }
    }

    fn read(&self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let ino = self.existing(path)?;
        crate::db::read_chunks(&self.conn, self.chunk_size, ino, offset, len)
    }

    fn readdir(&self, path: &str) -> Result<Vec<(String, Stat)>> {
        let ino = self.existing(path)?;
        let mut stmt =
            self.conn.prepare_cached("SELECT name, ino FROM fs_dentry WHERE parent_ino = ? ORDER BY name")?;
        let rows = stmt
            .query_map([ino], |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(name, child)| Ok((name, crate::db::inode_stat(&self.conn, child, self.has_nsec)?)))
            .collect()
    }

    fn readlink(&self, path: &str) -> Result<String> {
        let ino = self.existing(path)?;
        crate::db::symlink_target(&self.conn, ino)
    }

    fn xattrs(&self, path: &str) -> Result<Vec<(String, Vec<u8>)>> {
        if !self.has_xattrs {
            return Ok(Vec::new());
        }
        let ino = self.existing(path)?;
        crate::db::xattr_list(&self.conn, ino)
    }

    fn max_ino(&self) -> Result<u64> {
        Ok(self.conn.query_row("SELECT COALESCE(MAX(ino), 1) FROM fs_inode", [], |row| row.get(0))?)
    }
}

struct HostDirBase {
    root: PathBuf,
}

impl HostDirBase {
    fn host_path(&self, path: &str) -> PathBuf {
        let mut host = self.root.clone();
        host.extend(components(path));
        host
    }
}

fn host_error(path: &Path, source: std::io::Error) -> Error {
    Error::Host { path: path.display().to_string(), source }
}

fn host_stat(meta: &fs::Metadata) -> Stat {
    Stat {
        ino: meta.ino(),
        mode: meta.mode(),
        nlink: u32::try_from(meta.nlink()).unwrap_or(u32::MAX),
        uid: meta.uid(),
        gid: meta.gid(),
        size: meta.size(),
        atime: Timestamp { secs: meta.atime(), nsec: meta.atime_nsec() as u32 },
        mtime: Timestamp { secs: meta.mtime(), nsec: meta.mtime_nsec() as u32 },
        ctime: Timestamp { secs: meta.ctime(), nsec: meta.ctime_nsec() as u32 },
        rdev: meta.rdev(),
    }
}

impl BaseLayer for HostDirBase {
    fn lookup(&self, path: &str) -> Result<Option<Stat>> {
        let host = self.host_path(path);
        match fs::symlink_metadata(&host) {
            Ok(meta) => Ok(Some(host_stat(&meta))),
            Err(err) if matches!(err.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => Ok(None),
            Err(err) => Err(host_error(&host, err)),
        }
    }

    fn read(&self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let host = self.host_path(path);
        let mut file = fs::File::open(&host).map_err(|err| host_error(&host, err))?;
        file.seek(SeekFrom::Start(offset)).map_err(|err| host_error(&host, err))?;
        let mut buf = Vec::new();
        file.take(len).read_to_end(&mut buf).map_err(|err| host_error(&host, err))?;
        Ok(buf)
    }

    fn readdir(&self, path: &str) -> Result<Vec<(String, Stat)>> {
        let host = self.host_path(path);
        let mut entries = Vec::new();
        for entry in fs::read_dir(&host).map_err(|err| host_error(&host, err))? {
            let entry = entry.map_err(|err| host_error(&host, err))?;
            // AgentFS names are TEXT: host names that are not UTF-8 cannot be
            // represented, so the base view leaves them out.
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let meta = entry.metadata().map_err(|err| host_error(&entry.path(), err))?;
            entries.push((name, host_stat(&meta)));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(entries)
    }

    fn readlink(&self, path: &str) -> Result<String> {
        let host = self.host_path(path);
        let target = fs::read_link(&host).map_err(|err| host_error(&host, err))?;
        target
            .into_os_string()
            .into_string()
            .map_err(|_| Error::invalid(format!("{path}: symlink target is not UTF-8")))
    }

    fn xattrs(&self, _path: &str) -> Result<Vec<(String, Vec<u8>)>> {
        // Host xattrs are not carried into the delta: only AgentFS bases
        // have an xattr table to copy from.
        Ok(Vec::new())
    }

    fn max_ino(&self) -> Result<u64> {
        // Host inode numbers are not dense and cannot be bounded cheaply;
        // the overlay keeps delta numbers as they are for host bases.
        Ok(0)
    }
}

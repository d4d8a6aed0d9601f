//! The FUSE request handlers: each kernel request becomes one or a few
//! calls of the storage library, each atomic (its own transaction, or a
//! savepoint of the group commit's batch, see [`crate::commit`]).

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::MutexGuard;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentfs::{FileType as AgentFileType, SetAttr, Stat, Timestamp, MAX_NAME_LEN, PERMISSION_BITS};
use fuser::{
    consts, FileAttr, FileType, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
};
use libc::c_int;

use crate::commit::{statvfs, Shared, Workspace};
use crate::inodes::InodePaths;

/// How long the kernel may cache attributes and names. The mount is the only
/// writer it knows of, but other processes may open the database too, so
/// the cache is kept short rather than unbounded.
const TTL: Duration = Duration::from_secs(1);

/// Where a file goes when its last name is removed while it is still open:
/// POSIX keeps an unlinked file readable and writable through the handles
/// already open, so its inode must outlive its name. The mount moves the
/// name here instead, hides the directory, and removes the entry when the
/// last handle closes (and at the next mount, after a crash).
const ORPHANS: &str = "/.agentfs-orphans";

/// One directory listing, taken whole at opendir (one query for the names
/// and attributes of all entries) so that a long directory read in many
/// readdir calls is listed once, not once per call.
struct Listing {
    /// The directory's path, under which READDIRPLUS makes its entries known.
    dir: String,
    /// `.`, `..`, then the entries by name.
    entries: Vec<(String, FileAttr)>,
}

/// A mounted workspace.
pub(crate) struct WorkspaceFs {
    workspace: Workspace,
    paths: InodePaths,
    listings: HashMap<u64, Listing>,
    next_handle: u64,
    /// Open handles per inode, for the orphans below.
    open_handles: HashMap<u64, u32>,
    /// Inodes whose last name is gone but which are still open, kept under [`ORPHANS`].
    orphans: HashSet<u64>,
}

impl WorkspaceFs {
    pub(crate) fn new(workspace: Workspace) -> WorkspaceFs {
        let mut mounted = WorkspaceFs {
            workspace,
            paths: InodePaths::new(),
            listings: HashMap::new(),
            next_handle: 1,
            open_handles: HashMap::new(),
            orphans: HashSet::new(),
        };
        mounted.remove_orphans();
        mounted
    }

    /// The workspace, locked for one library call (see [`Workspace::lock`]).
    fn fs(&self) -> MutexGuard<'_, Shared> {
        self.workspace.lock()
    }

    /// Removes every orphan: at mount, what a crash left behind; at
    /// unmount, what was still open or whose last close the kernel dropped
    /// when the connection ended (RELEASE is sent asynchronously after
    /// close). Either way nothing can have them open any more.
    fn remove_orphans(&mut self) {
        let Ok(entries) = self.fs().readdir(ORPHANS) else { return };
        for entry in entries {
            // Best effort: a leftover orphan only costs its space until the next mount.
            let _ = self.fs().unlink(&format!("{ORPHANS}/{}", entry.name));
        }
        let _ = self.fs().rmdir(ORPHANS);
    }

    /// If `path` names the last link of a file that is still open, moves it
    /// under [`ORPHANS`] and returns true; the caller then must not unlink it.
    fn orphan_if_open(&mut self, path: &str) -> Result<bool, c_int> {
        // The kernel looked the name up before asking to remove it, so its
        // inode is normally known here: a file nobody has open needs no query.
        if self.paths.ino(path).is_some_and(|ino| !self.open_handles.contains_key(&ino)) {
            return Ok(false);
        }
        let stat = match self.fs().lstat(path) {
            Ok(stat) => stat,
            Err(err) if err.errno() == libc::ENOENT => return Ok(false),
            Err(err) => return Err(err.errno()),
        };
        if stat.is_dir() || stat.nlink > 1 || self.open_handles.get(&stat.ino).copied().unwrap_or(0) == 0 {
            return Ok(false);
        }
        if !self.fs().exists(ORPHANS).map_err(|err| err.errno())? {
            self.fs().set_owner(0, 0);
            self.fs().mkdir(ORPHANS, 0o700).map_err(|err| err.errno())?;
        }
        let hidden = format!("{ORPHANS}/{}", stat.ino);
        self.fs().rename(path, &hidden).map_err(|err| err.errno())?;
        self.paths.rename(path, &hidden);
        self.orphans.insert(stat.ino);
        Ok(true)
    }

    /// New files belong to the process that creates them, as on any POSIX
    /// filesystem (not to the user who mounted the workspace).
    fn create_as(&mut self, req: &Request<'_>) {
        self.fs().set_owner(req.uid(), req.gid());
    }

    /// Readies a request that changes the name `name` in `parent`: room to
    /// write; gives the name's path.
    fn writable_child(&mut self, parent: u64, name: &OsStr) -> Result<String, c_int> {
        self.workspace.will_write(0)?;
        self.child_path(parent, name)
    }

    /// Readies a request that makes `name` in `parent`, as
    /// [`WorkspaceFs::writable_child`], the new inode owned by the caller.
    fn creating(&mut self, req: &Request<'_>, parent: u64, name: &OsStr) -> Result<String, c_int> {
        let path = self.writable_child(parent, name)?;
        self.create_as(req);
        Ok(path)
    }

    /// Makes `name` in `parent` with `make` and replies with its entry.
    fn create_entry(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        reply: ReplyEntry,
        make: impl FnOnce(&mut Shared, &str) -> Result<Stat, agentfs::Error>,
    ) {
        match self.creating(req, parent, name) {
            Ok(path) => {
                let stat = make(&mut self.fs(), &path);
                self.entry(path, stat, reply);
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn path(&self, ino: u64) -> Result<String, c_int> {
        self.paths.path(ino).map(str::to_owned).ok_or(libc::ENOENT)
    }

    fn child_path(&self, parent: u64, name: &OsStr) -> Result<String, c_int> {
        let name = name.to_str().ok_or(libc::EINVAL)?;
        Ok(join(&self.path(parent)?, name))
    }

    /// The attributes the kernel gets for `stat` of the inode at `path`.
    fn attr(&mut self, path: &str, mut stat: Stat) -> Result<FileAttr, c_int> {
        if stat.is_symlink() {
            // lstat(2) reports a symlink's size as its target's length;
            // AgentFS keeps symlink inodes at size 0 (they have no chunks).
            stat.size = self.fs().readlink(path).map_err(|err| err.errno())?.len() as u64;
        }
        Ok(file_attr(&stat, self.fs().chunk_size()))
    }

    /// Replies to a request that made or found the name `path`, remembering it.
    fn entry(&mut self, path: String, stat: Result<Stat, agentfs::Error>, reply: ReplyEntry) {
        match stat.map_err(|err| err.errno()).and_then(|stat| self.attr(&path, stat)) {
            Ok(attr) => {
                self.paths.add(attr.ino, path);
                reply.entry(&TTL, &attr, 0);
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn attr_of(&mut self, ino: u64) -> Result<FileAttr, c_int> {
        let path = self.path(ino)?;
        let stat = self.fs().lstat(&path).map_err(|err| err.errno())?;
        let mut attr = self.attr(&path, stat)?;
        if self.orphans.contains(&ino) {
            attr.nlink = 0;
        }
        Ok(attr)
    }

    fn set_attr(&mut self, ino: u64, attr: &SetAttr) -> Result<FileAttr, c_int> {
        let path = self.path(ino)?;
        let stat = self.fs().set_attr_nofollow(&path, attr).map_err(|err| err.errno())?;
        self.attr(&path, stat)
    }

    fn list(&mut self, ino: u64) -> Result<Listing, c_int> {
        let dir = self.path(ino)?;
        let children = self.fs().readdir_plus(&dir).map_err(|err| err.errno())?;
        let parent = match dir.rfind('/') {
            Some(0) | None => "/",
            Some(idx) => &dir[..idx],
        };
        let parent_stat = self.fs().lstat(parent).map_err(|err| err.errno())?;
        let mut entries =
            vec![(".".to_owned(), self.attr_of(ino)?), ("..".to_owned(), self.attr(parent, parent_stat)?)];
        for (name, stat) in children {
            if dir == "/" && name == ORPHANS[1..] {
                continue;
            }
            let attr = self.attr(&join(&dir, &name), stat)?;
            entries.push((name, attr));
        }
        Ok(Listing { dir, entries })
    }

    fn xattr_reply(value: &[u8], size: u32, reply: ReplyXattr) {
        if size == 0 {
            reply.size(value.len() as u32);
        } else if value.len() > size as usize {
            reply.error(libc::ERANGE);
        } else {
            reply.data(value);
        }
    }
}

/// The path of `name` in the directory `dir`.
/// Answers a request that returns nothing but its outcome.
fn reply_empty(reply: ReplyEmpty, result: Result<(), c_int>) {
    match result {
        Ok(()) => reply.ok(),
        Err(errno) => reply.error(errno),
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn kind(file_type: AgentFileType) -> FileType {
    match file_type {
        AgentFileType::Regular => FileType::RegularFile,
        AgentFileType::Directory => FileType::Directory,
        AgentFileType::Symlink => FileType::Symlink,
        AgentFileType::Fifo => FileType::NamedPipe,
        AgentFileType::CharDevice => FileType::CharDevice,
        AgentFileType::BlockDevice => FileType::BlockDevice,
        AgentFileType::Socket => FileType::Socket,
    }
}

// fuser 0.16 turns a kernel timespec before 1970 into a SystemTime and back
// as sign and magnitude: (-2 s, +0.5 s) becomes 2.5 s before the epoch, not
// the 1.5 s the timespec means. These two mirror that mapping exactly, so the
// kernel's timespec reaches the database unchanged and comes back the same.

/// The SystemTime fuser sends to the kernel as the timespec `stamp`.
fn time(stamp: Timestamp) -> SystemTime {
    let magnitude = Duration::new(stamp.secs.unsigned_abs(), stamp.nsec);
    if stamp.secs >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

/// The kernel's timespec behind a time fuser decoded.
fn timestamp(time: TimeOrNow) -> Timestamp {
    let time = match time {
        TimeOrNow::SpecificTime(time) => time,
        TimeOrNow::Now => return Timestamp::now(),
    };
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => Timestamp { secs: after.as_secs() as i64, nsec: after.subsec_nanos() },
        Err(before) => {
            let before = before.duration();
            Timestamp { secs: -(before.as_secs() as i64), nsec: before.subsec_nanos() }
        }
    }
}

fn file_attr(stat: &Stat, chunk_size: u64) -> FileAttr {
    FileAttr {
        ino: stat.ino,
        size: stat.size,
        blocks: stat.size.div_ceil(512),
        atime: time(stat.atime),
        mtime: time(stat.mtime),
        ctime: time(stat.ctime),
        crtime: time(stat.ctime),
        kind: kind(stat.file_type()),
        perm: (stat.mode & PERMISSION_BITS) as u16,
        nlink: stat.nlink,
        uid: stat.uid,
        gid: stat.gid,
        // The kernel's encoded dev_t of a device node fits 32 bits; it is
        // stored exactly as mknod passed it.
        rdev: stat.rdev as u32,
        blksize: chunk_size.min(u32::MAX as u64) as u32,
        flags: 0,
    }
}

impl Drop for WorkspaceFs {
    fn drop(&mut self) {
        // Runs before the workspace's own drop commits the last batch.
        self.remove_orphans();
    }
}

/// The umask argument of `mknod`, `mkdir` and `create` goes unused (`_`):
/// the kernel has already applied it to `mode` (no FUSE_DONT_MASK).
impl Filesystem for WorkspaceFs {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), c_int> {
        // Kernels without READDIRPLUS send plain READDIR and LOOKUPs.
        let _ = config.add_capabilities(consts::FUSE_DO_READDIRPLUS);
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let path = match self.child_path(parent, name) {
            Ok(path) if path == ORPHANS => return reply.error(libc::ENOENT),
            Ok(path) => path,
            Err(errno) => return reply.error(errno),
        };
        let stat = self.fs().lstat(&path);
        self.entry(path, stat, reply);
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match self.attr_of(ino) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        if let Err(errno) = self.workspace.will_write(0) {
            return reply.error(errno);
        }
        let attr = SetAttr {
            permissions: mode.map(|mode| mode & PERMISSION_BITS),
            uid,
            gid,
            size,
            atime: atime.map(timestamp),
            mtime: mtime.map(timestamp),
        };
        match self.set_attr(ino, &attr) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        match self.path(ino).and_then(|path| self.fs().readlink(&path).map_err(|err| err.errno())) {
            Ok(target) => reply.data(target.as_bytes()),
            Err(errno) => reply.error(errno),
        }
    }

    fn mknod(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, mode: u32, _: u32, rdev: u32, reply: ReplyEntry) {
        self.create_entry(req, parent, name, reply, |fs, path| fs.mknod(path, mode, rdev.into()));
    }

    fn mkdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, mode: u32, _: u32, reply: ReplyEntry) {
        self.create_entry(req, parent, name, reply, |fs, path| fs.mkdir(path, mode));
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let result = self.writable_child(parent, name).and_then(|path| {
            if self.orphan_if_open(&path)? {
                return Ok(());
            }
            self.fs().unlink(&path).map_err(|err| err.errno())?;
            self.paths.remove(&path);
            Ok(())
        });
        reply_empty(reply, result);
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let result = self.writable_child(parent, name).and_then(|path| {
            self.fs().rmdir(&path).map_err(|err| err.errno())?;
            self.paths.remove(&path);
            Ok(())
        });
        reply_empty(reply, result);
    }

    fn symlink(&mut self, req: &Request<'_>, parent: u64, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let Some(target) = target.to_str() else { return reply.error(libc::EINVAL) };
        self.create_entry(req, parent, link_name, reply, |fs, path| fs.symlink(path, target));
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        if let Err(errno) = self.workspace.will_write(0) {
            return reply.error(errno);
        }
        let result = (|| {
            let from = self.child_path(parent, name)?;
            let to = self.child_path(newparent, newname)?;
            if flags & libc::RENAME_EXCHANGE != 0 || flags & libc::RENAME_WHITEOUT != 0 {
                return Err(libc::EINVAL);
            }
            // The session handles one request at a time, so nothing of this
            // mount can create `to` between the check and the rename.
            if flags & libc::RENAME_NOREPLACE != 0 && self.fs().exists(&to).map_err(|err| err.errno())? {
                return Err(libc::EEXIST);
            }
            // A replaced file that is still open lives on as an orphan.
            // (Its name must be checked first: renaming a file over itself
            // or over one of its own hard links leaves everything as it is.)
            let from_stat = self.fs().lstat(&from);
            let to_stat = self.fs().lstat(&to);
            let same_file = matches!((from_stat, to_stat), (Ok(a), Ok(b)) if a.ino == b.ino);
            if !same_file {
                self.orphan_if_open(&to)?;
            }
            self.fs().rename(&from, &to).map_err(|err| err.errno())?;
            self.paths.rename(&from, &to);
            Ok(())
        })();
        reply_empty(reply, result);
    }

    fn link(&mut self, _req: &Request<'_>, ino: u64, newparent: u64, newname: &OsStr, reply: ReplyEntry) {
        if let Err(errno) = self.workspace.will_write(0) {
            return reply.error(errno);
        }
        let paths = self.path(ino).and_then(|existing| Ok((existing, self.child_path(newparent, newname)?)));
        match paths {
            Ok((existing, path)) => {
                let stat = self.fs().link(&existing, &path);
                self.entry(path, stat, reply);
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        // Files are addressed by inode on every request; a handle carries
        // nothing, but the count keeps an unlinked open file alive.
        match self.attr_of(ino) {
            Ok(_) => {
                *self.open_handles.entry(ino).or_default() += 1;
                reply.opened(0, 0);
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let remaining = self.open_handles.get_mut(&ino).map(|count| {
            *count = count.saturating_sub(1);
            *count
        });
        if remaining == Some(0) {
            self.open_handles.remove(&ino);
            if self.orphans.remove(&ino) {
                let hidden = format!("{ORPHANS}/{ino}");
                if let Err(err) = self.fs().unlink(&hidden) {
                    return reply.error(err.errno());
                }
                self.paths.remove(&hidden);
                if self.orphans.is_empty() {
                    // Best effort: an empty leftover is removed at the next mount.
                    let _ = self.fs().rmdir(ORPHANS);
                }
            }
        }
        reply.ok();
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        let Ok(offset) = u64::try_from(offset) else { return reply.error(libc::EINVAL) };
        match self.path(ino).and_then(|path| self.fs().read(&path, offset, size.into()).map_err(|err| err.errno())) {
            Ok(data) => reply.data(&data),
            Err(errno) => reply.error(errno),
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        if let Err(errno) = self.workspace.will_write(data.len() as u64) {
            return reply.error(errno);
        }
        let Ok(offset) = u64::try_from(offset) else { return reply.error(libc::EINVAL) };
        match self.path(ino).and_then(|path| self.fs().write(&path, offset, data).map_err(|err| err.errno())) {
            Ok(_) => reply.written(data.len() as u32),
            Err(errno) => reply.error(errno),
        }
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _datasync: bool, reply: ReplyEmpty) {
        match self.workspace.sync() {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn opendir(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        match self.list(ino) {
            Ok(listing) => {
                let handle = self.next_handle;
                self.next_handle += 1;
                self.listings.insert(handle, listing);
                reply.opened(handle, 0);
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn readdir(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, offset: i64, mut reply: ReplyDirectory) {
        let Some(listing) = self.listings.get(&fh) else { return reply.error(libc::EBADF) };
        let skip = usize::try_from(offset).unwrap_or(0);
        for (index, (name, attr)) in listing.entries.iter().enumerate().skip(skip) {
            // The offset given with an entry is where the next readdir resumes.
            if reply.add(attr.ino, index as i64 + 1, attr.kind, name) {
                break;
            }
        }
        reply.ok();
    }

    /// READDIR and LOOKUP in one: `ls -l`, `find` and `du` then stat the
    /// entries from the kernel's cache instead of one request each.
    fn readdirplus(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, offset: i64, mut reply: ReplyDirectoryPlus) {
        let Some(listing) = self.listings.get(&fh) else { return reply.error(libc::EBADF) };
        let skip = usize::try_from(offset).unwrap_or(0);
        for (index, (name, attr)) in listing.entries.iter().enumerate().skip(skip) {
            if reply.add(attr.ino, index as i64 + 1, name, &TTL, attr, 0) {
                break;
            }
            // The kernel now knows the entry (not `.` and `..`, which it
            // does not look up) and will address it by inode number.
            if index >= 2 {
                self.paths.add(attr.ino, join(&listing.dir, name));
            }
        }
        reply.ok();
    }

    fn releasedir(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, _flags: i32, reply: ReplyEmpty) {
        self.listings.remove(&fh);
        reply.ok();
    }

    fn fsyncdir(&mut self, req: &Request<'_>, ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        self.fsync(req, ino, fh, datasync, reply);
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        // The workspace grows into whatever the disk under the database has.
        let host = match statvfs(self.workspace.db_dir()) {
            Ok(host) => host,
            Err(err) => return reply.error(err.raw_os_error().unwrap_or(libc::EIO)),
        };
        reply.statfs(
            host.f_blocks,
            host.f_bfree,
            host.f_bavail,
            host.f_files,
            host.f_ffree,
            host.f_bsize as u32,
            MAX_NAME_LEN as u32,
            host.f_frsize as u32,
        );
    }

    fn setxattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if let Err(errno) = self.workspace.will_write(value.len() as u64) {
            return reply.error(errno);
        }
        let result = (|| {
            let path = self.path(ino)?;
            let name = name.to_str().ok_or(libc::EINVAL)?;
            if flags & (libc::XATTR_CREATE | libc::XATTR_REPLACE) != 0 {
                let exists = match self.fs().get_xattr(&path, name) {
                    Ok(_) => true,
                    Err(agentfs::Error::NoSuchAttribute { .. }) => false,
                    Err(err) => return Err(err.errno()),
                };
                if exists && flags & libc::XATTR_CREATE != 0 {
                    return Err(libc::EEXIST);
                }
                if !exists && flags & libc::XATTR_REPLACE != 0 {
                    return Err(libc::ENODATA);
                }
            }
            self.fs().set_xattr(&path, name, value).map_err(|err| err.errno())
        })();
        reply_empty(reply, result);
    }

    fn getxattr(&mut self, _req: &Request<'_>, ino: u64, name: &OsStr, size: u32, reply: ReplyXattr) {
        let value = (|| {
            let path = self.path(ino)?;
            let name = name.to_str().ok_or(libc::ENODATA)?;
            self.fs().get_xattr(&path, name).map_err(|err| err.errno())
        })();
        match value {
            Ok(value) => Self::xattr_reply(&value, size, reply),
            Err(errno) => reply.error(errno),
        }
    }

    fn listxattr(&mut self, _req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        match self.path(ino).and_then(|path| self.fs().list_xattr(&path).map_err(|err| err.errno())) {
            Ok(names) => {
                // listxattr(2) returns the names back to back, each NUL-terminated.
                let mut packed = Vec::new();
                for name in names {
                    packed.extend_from_slice(name.as_bytes());
                    packed.push(0);
                }
                Self::xattr_reply(&packed, size, reply);
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn removexattr(&mut self, _req: &Request<'_>, ino: u64, name: &OsStr, reply: ReplyEmpty) {
        if let Err(errno) = self.workspace.will_write(0) {
            return reply.error(errno);
        }
        let result = (|| {
            let path = self.path(ino)?;
            let name = name.to_str().ok_or(libc::ENODATA)?;
            self.fs().remove_xattr(&path, name).map_err(|err| err.errno())
        })();
        reply_empty(reply, result);
    }

    fn access(&mut self, _req: &Request<'_>, ino: u64, _mask: i32, reply: ReplyEmpty) {
        // The mount uses default_permissions: the kernel checks the mode bits
        // itself, so only existence is left to answer here.
        match self.attr_of(ino) {
            Ok(_) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let created = self.creating(req, parent, name).and_then(|path| {
            let stat = self.fs().create(&path, mode).map_err(|err| err.errno())?;
            Ok((path, stat))
        });
        match created {
            Ok((path, stat)) => {
                let attr = file_attr(&stat, self.fs().chunk_size());
                self.paths.add(stat.ino, path);
                *self.open_handles.entry(stat.ino).or_default() += 1;
                reply.created(&TTL, &attr, 0, 0, 0);
            }
            Err(errno) => reply.error(errno),
        }
    }
}

//! Inode metadata as AgentFS stores it, and the mode bits of the spec.

/// File type mask of `mode` (S_IFMT).
pub const S_IFMT: u32 = 0o170_000;
/// Regular file (S_IFREG).
pub const S_IFREG: u32 = 0o100_000;
/// Directory (S_IFDIR).
pub const S_IFDIR: u32 = 0o040_000;
/// Symbolic link (S_IFLNK).
pub const S_IFLNK: u32 = 0o120_000;
/// FIFO / named pipe (S_IFIFO).
pub const S_IFIFO: u32 = 0o010_000;
/// Character device (S_IFCHR).
pub const S_IFCHR: u32 = 0o020_000;
/// Block device (S_IFBLK).
pub const S_IFBLK: u32 = 0o060_000;
/// Socket (S_IFSOCK).
pub const S_IFSOCK: u32 = 0o140_000;
/// Permission bits including setuid, setgid and sticky.
pub const PERMISSION_BITS: u32 = 0o7777;

/// The kind of an inode, decoded from the S_IFMT bits of its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
}

impl FileType {
    /// Decodes the S_IFMT bits; `None` for a value the spec does not define.
    pub fn from_mode(mode: u32) -> Option<FileType> {
        Some(match mode & S_IFMT {
            S_IFREG => FileType::Regular,
            S_IFDIR => FileType::Directory,
            S_IFLNK => FileType::Symlink,
            S_IFIFO => FileType::Fifo,
            S_IFCHR => FileType::CharDevice,
            S_IFBLK => FileType::BlockDevice,
            S_IFSOCK => FileType::Socket,
            _ => return None,
        })
    }

    /// The S_IFMT bits of this type.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::Regular => S_IFREG,
            FileType::Directory => S_IFDIR,
            FileType::Symlink => S_IFLNK,
            FileType::Fifo => S_IFIFO,
            FileType::CharDevice => S_IFCHR,
            FileType::BlockDevice => S_IFBLK,
            FileType::Socket => S_IFSOCK,
        }
    }
}

/// A file time as stat(2) reports it. AgentFS stores whole Unix seconds
/// (`fs_inode.atime`, `mtime`, `ctime`); ClawOS keeps the nanoseconds in its
/// extension table `clawos_inode_nsec`, next to the seconds they belong to,
/// so a time another implementation rewrites reads back as whole seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    pub secs: i64,
    /// 0 to 999,999,999.
    pub nsec: u32,
}

impl Timestamp {
    /// The current time of the system clock.
    pub fn now() -> Timestamp {
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Timestamp { secs: since_epoch.as_secs() as i64, nsec: since_epoch.subsec_nanos() }
    }

    /// Whole seconds, as the spec's columns hold them.
    pub fn from_secs(secs: i64) -> Timestamp {
        Timestamp { secs, nsec: 0 }
    }
}

/// The result of `stat`: one `fs_inode` row, with the inode number already
/// translated through `fs_origin` for copied-up files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub ino: u64,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub rdev: u64,
}

impl Stat {
    /// The file type; regular for a mode the spec does not define, which the
    /// consistency checker reports separately.
    pub fn file_type(&self) -> FileType {
        FileType::from_mode(self.mode).unwrap_or(FileType::Regular)
    }

    /// Whether this inode is a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }

    /// Whether this inode is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.mode & S_IFMT == S_IFLNK
    }

    /// Whether this inode is a regular file.
    pub fn is_file(&self) -> bool {
        self.mode & S_IFMT == S_IFREG
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    /// The inode number `stat` reports for this entry.
    pub ino: u64,
    pub file_type: FileType,
}

/// Attribute changes for [`crate::AgentFs::set_attr`]; `None` leaves a field alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits; the file type bits are kept.
    pub permissions: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// New size (regular files only), as truncate(2).
    pub size: Option<u64>,
    pub atime: Option<Timestamp>,
    pub mtime: Option<Timestamp>,
}

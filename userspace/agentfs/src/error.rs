//! The one error type of the crate, shaped after POSIX errno values so that the
//! FUSE layer and `clawctl` can report them unchanged.

use std::io;

/// Everything an AgentFS operation can fail with.
///
/// Each variant maps to one errno through [`Error::errno`]. An operation that
/// returns an error has rolled its transaction back: the database is exactly
/// as it was before the call. The one exception is [`Error::NotDurable`]:
/// committed, but not known to be on disk, so not to be acknowledged.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A path component does not exist (ENOENT).
    #[error("{path}: no such file or directory")]
    NotFound { path: String },
    /// The target name is already taken (EEXIST).
    #[error("{path}: file exists")]
    AlreadyExists { path: String },
    /// A component used as a directory is not one (ENOTDIR).
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
    /// A file operation was aimed at a directory (EISDIR).
    #[error("{path}: is a directory")]
    IsADirectory { path: String },
    /// rmdir, or rename over a directory, that still has entries (ENOTEMPTY).
    #[error("{path}: directory not empty")]
    DirectoryNotEmpty { path: String },
    /// More than [`crate::MAX_SYMLINK_FOLLOWS`] symlinks while resolving (ELOOP).
    #[error("{path}: too many levels of symbolic links")]
    TooManySymlinks { path: String },
    /// A name longer than [`crate::MAX_NAME_LEN`] bytes or a path longer than
    /// [`crate::MAX_PATH_LEN`] bytes (ENAMETOOLONG).
    #[error("{name}: file name too long")]
    NameTooLong { name: String },
    /// An argument the operation cannot accept (EINVAL).
    #[error("invalid argument: {reason}")]
    InvalidArgument { reason: String },
    /// The operation is not allowed on this kind of file, such as a hard
    /// link to a directory (EPERM).
    #[error("operation not permitted: {reason}")]
    NotPermitted { reason: String },
    /// Renaming a directory that the read-only base layer also holds: like
    /// overlayfs, callers fall back to copy and delete (EXDEV).
    #[error("{path}: directory rename across overlay layers")]
    CrossDevice { path: String },
    /// The extended attribute does not exist (ENODATA).
    #[error("{name}: no such extended attribute")]
    NoSuchAttribute { name: String },
    /// A write or truncate past the workspace's file size limit
    /// ([`crate::AgentFs::file_size_limit`]) (EFBIG).
    #[error("file too large: this workspace's limit is {limit} bytes")]
    FileTooLarge { limit: u64 },
    /// The disk holding the database is full (ENOSPC).
    #[error("no space left on device")]
    NoSpace,
    /// Another connection held the write lock past the busy timeout (EBUSY).
    #[error("database is busy: another writer held the lock too long")]
    Busy,
    /// A KV value or tool call field is not valid JSON (EINVAL).
    #[error("invalid JSON: {source}")]
    InvalidJson {
        #[source]
        source: serde_json::Error,
    },
    /// A trigger of the database refused the change, such as the audit
    /// trail's insert-only and validation rules (EINVAL).
    #[error("rejected by the database: {reason}")]
    TriggerRejected { reason: String },
    /// The database content breaks an AgentFS rule the operation relies on (EIO).
    #[error("corrupt workspace: {reason}")]
    Corrupt { reason: String },
    /// Reading a host-directory base layer failed.
    #[error("{path}: {source}")]
    Host {
        path: String,
        #[source]
        source: io::Error,
    },
    /// SQLite rolled back the transaction of an [`crate::AgentFs::batch`]
    /// after `cause`: nothing of the batch was kept (the cause's errno).
    #[error("the batch was rolled back, nothing of it was kept: {cause}")]
    BatchRolledBack { cause: String, errno: i32 },
    /// The write ran in a transaction this process's writers of the
    /// database shared, and that transaction was rolled back after `cause`
    /// (another write's full disk or I/O error, or a failed commit):
    /// nothing of this write was kept (the cause's errno).
    #[error("not kept: the transaction this write shared was rolled back: {cause}")]
    NotCommitted { cause: String, errno: i32 },
    /// The write was committed but flushing it to disk failed (the flush's
    /// errno, EIO when it has none): it survives a killed process, maybe
    /// not a power cut. Every later write of the database in this process
    /// fails the same way (`durable`).
    #[error("committed but not known to be on disk: {source}")]
    NotDurable {
        #[source]
        source: io::Error,
    },
    /// Any other SQLite failure (EIO).
    #[error("sqlite: {0}")]
    Sqlite(#[source] rusqlite::Error),
}

/// Shorthand used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The POSIX errno this error stands for.
    pub fn errno(&self) -> i32 {
        match self {
            Error::NotFound { .. } => libc::ENOENT,
            Error::AlreadyExists { .. } => libc::EEXIST,
            Error::NotADirectory { .. } => libc::ENOTDIR,
            Error::IsADirectory { .. } => libc::EISDIR,
            Error::DirectoryNotEmpty { .. } => libc::ENOTEMPTY,
            Error::TooManySymlinks { .. } => libc::ELOOP,
            Error::NameTooLong { .. } => libc::ENAMETOOLONG,
            Error::InvalidArgument { .. } | Error::InvalidJson { .. } | Error::TriggerRejected { .. } => libc::EINVAL,
            Error::NotPermitted { .. } => libc::EPERM,
            Error::CrossDevice { .. } => libc::EXDEV,
            Error::NoSuchAttribute { .. } => libc::ENODATA,
            Error::NoSpace => libc::ENOSPC,
            Error::FileTooLarge { .. } => libc::EFBIG,
            Error::Busy => libc::EBUSY,
            Error::BatchRolledBack { errno, .. } | Error::NotCommitted { errno, .. } => *errno,
            Error::Host { source, .. } | Error::NotDurable { source } => source.raw_os_error().unwrap_or(libc::EIO),
            Error::Corrupt { .. } | Error::Sqlite(_) => libc::EIO,
        }
    }

    pub(crate) fn not_found(path: &str) -> Self {
        Error::NotFound { path: path.to_owned() }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        Error::InvalidArgument { reason: reason.into() }
    }

    pub(crate) fn corrupt(reason: impl Into<String>) -> Self {
        Error::Corrupt { reason: reason.into() }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        match &err {
            rusqlite::Error::SqliteFailure(code, message) => match code.code {
                ErrorCode::DiskFull => Error::NoSpace,
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => Error::Busy,
                // RAISE(ABORT, ...) in a trigger surfaces as a constraint failure.
                ErrorCode::ConstraintViolation if code.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_TRIGGER => {
                    Error::TriggerRejected { reason: message.clone().unwrap_or_default() }
                }
                _ => Error::Sqlite(err),
            },
            _ => Error::Sqlite(err),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(source: serde_json::Error) -> Self {
        Error::InvalidJson { source }
    }
}

//! FUSE mount of an AgentFS workspace (`clawctl fs mount`).
//!
//! [`mount`] serves one workspace database at a directory until the
//! filesystem is unmounted or the process gets SIGTERM or SIGINT, which
//! unmount it. Requests are served by the storage library
//! (`clawos-agentfs`), each atomically, and committed in groups: within
//! [`CommitPolicy::interval`] (10 ms by default), at fsync, and at unmount
//! (see [`commit`] for the durability this gives and why).
//!
//! - Files, directories, hard links, symlinks, special files (mknod) and
//!   extended attributes (the library's `clawos_xattr` extension table).
//! - With a base ([`MountOptions::base`]), the workspace is the writable
//!   delta of an overlay over another AgentFS database or a host directory;
//!   inode numbers stay the same when a base file is copied up.
//! - The kernel checks permissions (`default_permissions`); the mount is
//!   open to users other than its owner only with
//!   [`MountOptions::allow_other`].

pub mod commit;
mod filesystem;
mod inodes;

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::thread;

use agentfs::{AgentFs, BaseSource, OpenOptions};
use fuser::{MountOption, Session, SessionUnmounter};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

pub use crate::commit::CommitPolicy;
use crate::commit::Workspace;
use crate::filesystem::WorkspaceFs;

/// Why a mount could not be set up or ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The workspace database (or its base) could not be opened.
    #[error("opening workspace {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: agentfs::Error,
    },
    /// The kernel refused the mount, or /dev/fuse is unusable.
    #[error("mounting at {mountpoint}: {source}")]
    Mount {
        mountpoint: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The SIGTERM/SIGINT handlers could not be installed.
    #[error("installing signal handlers: {source}")]
    Signals {
        #[source]
        source: io::Error,
    },
    /// Reading requests from the kernel failed while mounted.
    #[error("serving {mountpoint}: {source}")]
    Serve {
        mountpoint: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// How to mount a workspace. The default is a plain workspace that only
/// the mounting user can reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountOptions {
    /// Read-only lower layer: a directory is a host directory base, any
    /// other path an AgentFS database (see [`BaseSource::detect`]).
    pub base: Option<PathBuf>,
    /// Lets users other than the mounting one use the mount (FUSE
    /// `allow_other`; for a non-root mounter `/etc/fuse.conf` must allow it).
    pub allow_other: bool,
    /// When changes are committed to the database.
    pub commit: CommitPolicy,
}

/// Mounts the workspace `db` at `mountpoint`, over `base` if given, and
/// serves it until it is unmounted or the process gets SIGTERM or SIGINT.
pub fn mount(db: &Path, mountpoint: &Path, base: Option<&Path>) -> Result<(), Error> {
    mount_with(db, mountpoint, &MountOptions { base: base.map(Path::to_path_buf), ..MountOptions::default() })
}

/// [`mount`] with every option.
///
/// SIGTERM and SIGINT detach the mount at once (a lazy unmount, so a busy
/// mountpoint cannot keep it alive); processes that still have files open
/// are served until they close them, then this returns and the database is
/// closed, checkpointing its write-ahead log. Every change is committed
/// before this returns.
pub fn mount_with(db: &Path, mountpoint: &Path, options: &MountOptions) -> Result<(), Error> {
    let open = OpenOptions { base: options.base.clone().map(BaseSource::detect), ..OpenOptions::default() };
    let fs = AgentFs::open_with(db, &open).map_err(|source| Error::Open { path: db.to_path_buf(), source })?;
    let mount_error = |source| Error::Mount { mountpoint: mountpoint.to_path_buf(), source };
    let target = CString::new(mountpoint.canonicalize().map_err(mount_error)?.as_os_str().as_bytes())
        .map_err(|err| mount_error(err.into()))?;

    // Installed before mounting so a signal that arrives while the mount is
    // being set up still ends it cleanly instead of killing the process.
    let mut signals = Signals::new([SIGTERM, SIGINT]).map_err(|source| Error::Signals { source })?;
    let signal_handle = signals.handle();

    let mut mount_options = vec![
        MountOption::FSName(db.display().to_string()),
        MountOption::Subtype("agentfs".to_owned()),
        MountOption::DefaultPermissions,
        MountOption::RW,
        MountOption::Dev,
        MountOption::Suid,
    ];
    if options.allow_other {
        mount_options.push(MountOption::AllowOther);
    }
    let db_dir = match db.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (workspace, committer) = Workspace::new(fs, db_dir, options.commit);
    let mut session = Session::new(WorkspaceFs::new(workspace), mountpoint, &mount_options).map_err(mount_error)?;
    let unmounter = session.unmount_callable();
    let watcher = thread::spawn(move || {
        if signals.forever().next().is_some() {
            detach(&target, unmounter);
        }
    });

    let served = session.run();
    signal_handle.close();
    // The watcher only ever unmounts; a panic there has nothing to report.
    let _ = watcher.join();
    committer.stop();
    // Dropping the session drops the workspace: the last batch is
    // committed and the database closed.
    drop(session);
    served.map_err(|source| Error::Serve { mountpoint: mountpoint.to_path_buf(), source })
}

/// Detaches the mount from the namespace. Root can do it directly; anyone
/// else goes through fuser's unmounter, which runs `fusermount3 -u -z`.
fn detach(target: &CString, mut unmounter: SessionUnmounter) {
    // SAFETY: `target` is a NUL-terminated path that outlives the call.
    if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
        // The unmounter logs its own failures; there is no caller to tell.
        let _ = unmounter.unmount();
    }
}

//! Workspace snapshots (specs/clawfs/README.md, "Snapshots"): full,
//! consistent copies of a workspace database as
//! `snapshots/snapshot-YYYY-MM-DD.db`, one per day (a second snapshot the
//! same day replaces the first), with the search database and the HNSW
//! index beside them. Databases are copied online with `VACUUM INTO`, which
//! copies one read transaction, so a writer working meanwhile never tears a
//! snapshot.
//!
//! Restoring swaps each file in atomically. It must run with no connection
//! to the workspace open (fs-engine closes its index first): a live
//! database's write-ahead log is checkpointed and removed before the swap,
//! because replayed onto the restored file it would corrupt it.

use std::fs;
use std::path::{Path, PathBuf};

use fsutil::today;
use rusqlite::Connection;

use crate::error::{io, Error, Result};
use crate::fsio::{dir_entries, sync_dir};
use crate::layout::{DATABASE_FILE, HNSW_FILE, HNSW_SIDECAR_FILE, SEARCH_FILE, SNAPSHOTS_DIR};
use crate::names::parse_snapshot_file;
use crate::workspace::Clawfs;

/// One snapshot of a workspace.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Snapshot {
    /// `snapshot-YYYY-MM-DD.db`.
    pub file: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The index files kept with a snapshot: `<snapshot>.hnsw` and `<snapshot>.hnsw.json`.
fn index_copies(snapshot: &Path) -> [(PathBuf, &'static str); 2] {
    let with = |suffix: &str| PathBuf::from(format!("{}{suffix}", snapshot.display()));
    [(with(".hnsw"), HNSW_FILE), (with(".hnsw.json"), HNSW_SIDECAR_FILE)]
}

/// The search database kept with a snapshot: `<snapshot>.search`.
fn search_copy(snapshot: &Path) -> PathBuf {
    PathBuf::from(format!("{}.search", snapshot.display()))
}

/// Copies the database `source` online into `target` (one read transaction).
fn vacuum_into(source: &Path, target: &Path) -> Result<()> {
    let conn = Connection::open(source).map_err(sqlite(source))?;
    conn.execute("VACUUM INTO ?1", [target.to_string_lossy()]).map_err(sqlite(source))?;
    fs::File::open(target).and_then(|f| f.sync_all()).map_err(io("sync", target))
}

/// Puts a copy of `copy` in place of the database `live`: the copy first
/// beside it, then the live write-ahead log folded in and removed (it must
/// never be replayed onto the restored file), then the rename.
fn swap_in(copy: &Path, live: &Path) -> Result<()> {
    let name = live.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let incoming = live.with_file_name(format!(".{name}.restoring"));
    fs::copy(copy, &incoming).map_err(io("copy", copy))?;
    fs::File::open(&incoming).and_then(|f| f.sync_all()).map_err(io("sync", &incoming))?;
    if live.exists() {
        let conn = Connection::open(live).map_err(sqlite(live))?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(sqlite(live))?;
    }
    for suffix in ["-wal", "-shm"] {
        remove_if_present(&PathBuf::from(format!("{}{suffix}", live.display())))?;
    }
    fs::rename(&incoming, live).map_err(io("rename", &incoming))
}

fn sqlite(path: &Path) -> impl FnOnce(rusqlite::Error) -> Error + '_ {
    move |source| Error::Sqlite { path: path.to_owned(), source }
}

/// Refuses a database the AgentFS checker finds inconsistent.
fn require_consistent(path: &Path) -> Result<()> {
    let report =
        agentfs::check::check_database(path).map_err(|source| Error::AgentFs { path: path.to_owned(), source })?;
    if report.is_clean() {
        Ok(())
    } else {
        Err(Error::InconsistentSnapshot { path: path.to_owned(), report: report.to_string() })
    }
}

fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(io("remove", path)(error)),
        _ => Ok(()),
    }
}

impl Clawfs {
    fn snapshots_dir(&self, workspace: &str) -> Result<PathBuf> {
        self.workspace(workspace)?;
        Ok(self.workspace_dir(workspace)?.join(SNAPSHOTS_DIR))
    }

    /// Takes today's snapshot of `workspace`, replacing one taken earlier
    /// today, and checks it with the AgentFS checker before keeping it.
    pub fn create_snapshot(&self, workspace: &str) -> Result<Snapshot> {
        let snapshots = self.snapshots_dir(workspace)?;
        fs::create_dir_all(&snapshots).map_err(io("create directory", &snapshots))?;
        let file = format!("snapshot-{}.db", today());
        let target = snapshots.join(&file);
        let partial = snapshots.join(format!(".{file}.partial"));
        remove_if_present(&partial)?;
        let live = self.workspace_dir(workspace)?;
        let kept = vacuum_into(&live.join(DATABASE_FILE), &partial)
            .and_then(|()| require_consistent(&partial))
            .and_then(|()| fs::rename(&partial, &target).map_err(io("rename", &partial)));
        if let Err(error) = kept {
            let _ = fs::remove_file(&partial);
            return Err(error);
        }
        // The search index, taken after the files it indexes: a document
        // changed in between is indexed again when next written.
        remove_if_present(&search_copy(&target))?;
        if live.join(SEARCH_FILE).exists() {
            vacuum_into(&live.join(SEARCH_FILE), &search_copy(&target))?;
        }
        // The HNSW file as it is on disk; should it lag the search
        // database, opening the restored workspace detects that and
        // rebuilds it.
        for (copy, name) in index_copies(&target) {
            match fs::copy(live.join(name), &copy) {
                Ok(_) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => remove_if_present(&copy)?,
                Err(error) => return Err(io("copy", live.join(name))(error)),
            }
        }
        sync_dir(&snapshots)?;
        let bytes = fs::metadata(&target).map_err(io("stat", &target))?.len();
        Ok(Snapshot { file, bytes })
    }

    /// The snapshots of `workspace`, oldest first.
    pub fn list_snapshots(&self, workspace: &str) -> Result<Vec<Snapshot>> {
        let mut found = Vec::new();
        for entry in dir_entries(&self.snapshots_dir(workspace)?)? {
            let file = entry.file_name().to_string_lossy().into_owned();
            if parse_snapshot_file(&file).is_ok() {
                let bytes = entry.metadata().map_err(io("stat", entry.path()))?.len();
                found.push(Snapshot { file, bytes });
            }
        }
        // The names are dates, so their order is the time order.
        found.sort_by(|a, b| a.file.cmp(&b.file));
        Ok(found)
    }

    /// Replaces `workspace`'s database and index with snapshot `file`,
    /// after checking the snapshot is consistent. No connection to the
    /// workspace may be open.
    pub fn restore_snapshot(&self, workspace: &str, file: &str) -> Result<()> {
        parse_snapshot_file(file)?;
        let snapshot = self.snapshots_dir(workspace)?.join(file);
        if !snapshot.exists() {
            return Err(Error::NoSuchSnapshot { workspace: workspace.to_owned(), file: file.to_owned() });
        }
        require_consistent(&snapshot)?;
        let dir = self.workspace_dir(workspace)?;
        swap_in(&snapshot, &dir.join(DATABASE_FILE))?;
        let search = search_copy(&snapshot);
        if search.exists() {
            swap_in(&search, &dir.join(SEARCH_FILE))?;
        } else {
            // A snapshot of an older ClawFS keeps its index inside the
            // workspace database: the next open moves it out again.
            for suffix in ["", "-wal", "-shm"] {
                remove_if_present(&PathBuf::from(format!("{}{suffix}", dir.join(SEARCH_FILE).display())))?;
            }
        }
        for (copy, name) in index_copies(&snapshot) {
            let target = dir.join(name);
            if copy.exists() {
                fs::copy(&copy, &target).map_err(io("copy", &copy))?;
            } else {
                // No index kept: the next open rebuilds it from the database.
                remove_if_present(&target)?;
            }
        }
        sync_dir(&dir)
    }

    /// Deletes all but the newest `keep` snapshots of `workspace`; returns
    /// the deleted file names.
    pub fn prune_snapshots(&self, workspace: &str, keep: usize) -> Result<Vec<String>> {
        let snapshots = self.snapshots_dir(workspace)?;
        let all = self.list_snapshots(workspace)?;
        let doomed = &all[..all.len().saturating_sub(keep)];
        for snapshot in doomed {
            let path = snapshots.join(&snapshot.file);
            for (copy, _) in index_copies(&path) {
                remove_if_present(&copy)?;
            }
            remove_if_present(&search_copy(&path))?;
            remove_if_present(&path)?;
        }
        sync_dir(&snapshots)?;
        Ok(doomed.iter().map(|s| s.file.clone()).collect())
    }
}

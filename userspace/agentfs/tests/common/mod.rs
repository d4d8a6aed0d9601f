//! Shared test fixture: a workspace in a temporary directory whose drop runs
//! the consistency checker, so every test also proves the database consistent.

#![allow(dead_code)] // each test binary uses a different subset

use std::ops::{Deref, DerefMut};
use std::path::PathBuf;

use agentfs::{AgentFs, OpenOptions};

pub struct Workspace {
    pub fs: AgentFs,
    pub path: PathBuf,
    pub dir: tempfile::TempDir,
    /// Whether the drop runs the checker (not for a fixture damaged on purpose).
    check_on_drop: bool,
}

impl Workspace {
    pub fn new() -> Workspace {
        Workspace::with_options(&OpenOptions::default())
    }

    pub fn with_options(options: &OpenOptions) -> Workspace {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("workspace.db");
        let fs = AgentFs::open_with(&path, options).expect("open workspace");
        Workspace { fs, path, dir, check_on_drop: true }
    }

    /// The drop skips the checker (the directory is removed all the same).
    pub fn damaged_on_purpose(&mut self) {
        self.check_on_drop = false;
    }
}

/// Panics with the checker's report unless the workspace is consistent.
pub fn assert_consistent(fs: &AgentFs) {
    let report = fs.check().expect("checker runs");
    assert!(report.is_clean(), "{report}");
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if self.check_on_drop && !std::thread::panicking() {
            assert_consistent(&self.fs);
        }
    }
}

impl Deref for Workspace {
    type Target = AgentFs;
    fn deref(&self) -> &AgentFs {
        &self.fs
    }
}

impl DerefMut for Workspace {
    fn deref_mut(&mut self) -> &mut AgentFs {
        &mut self.fs
    }
}

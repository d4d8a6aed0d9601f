//! User workspaces under `/clawfs/workspaces/` (specs/clawfs/README.md,
//! "Workspaces"): each is a directory with an AgentFS `workspace.db`, the
//! HNSW index beside it, `metadata.json` and `snapshots/`.
//!
//! One vector dimension holds for the whole instance. It comes from
//! [`Config`]; a workspace whose `metadata.json` says otherwise is
//! refused with [`Error::DimensionMismatch`] until it is explicitly
//! re-indexed ([`Clawfs::reindex`]), never converted silently.
//!
//! Owns: the instance ([`Clawfs`], [`Config`]) and the user workspaces'
//! life: making one (directory, database, `metadata.json`, `snapshots/`),
//! listing, opening its index, re-indexing, deleting; opening an agent's
//! index. Must not own: the names of their files ([`crate::layout`]),
//! `metadata.json`'s format (`metadata`), the index itself
//! ([`MemoryIndex`]), or the namespace (`namespace`).

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use fsutil::now_rfc3339;

use crate::embed::Embedder;
use crate::error::{io, Error, Result};
use crate::fsio::{dir_entries, write_json_atomic};
use crate::index::{open_agentfs, MemoryIndex};
use crate::layout::{agent_dir, AGENTS_DIR, DATABASE_FILE, METADATA_FILE, SNAPSHOTS_DIR};
use crate::metadata::{read_metadata, HnswParams, WorkspaceMetadata};
use crate::names::{validate_workspace_name, validate_workspace_to_open};
use crate::namespace::{create_namespace, NamespaceReport, Owners};

/// Smallest and largest vector dimension (specs/clawfs/README.md,
/// "Workspaces").
pub const DIMENSION_RANGE: std::ops::RangeInclusive<usize> = 128..=4096;

/// The instance-wide settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The ClawFS root, `/clawfs` on the appliance.
    pub root: PathBuf,
    /// The one vector dimension of every workspace.
    pub vector_dimension: usize,
    /// HNSW parameters given to new workspaces.
    pub hnsw: HnswParams,
}

impl Config {
    /// `root` with the defaults: 1536 dimensions and [`HnswParams::default`].
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Config { root: root.into(), vector_dimension: 1536, hnsw: HnswParams::default() }
    }

    fn validate(&self) -> Result<()> {
        if !DIMENSION_RANGE.contains(&self.vector_dimension) {
            return Err(Error::Config(format!(
                "vector_dimension = {} is outside {}..={}",
                self.vector_dimension,
                DIMENSION_RANGE.start(),
                DIMENSION_RANGE.end()
            )));
        }
        self.hnsw.validate()
    }
}

/// The ClawFS instance: its root and settings.
#[derive(Debug, Clone)]
pub struct Clawfs {
    config: Config,
}

impl Clawfs {
    /// Validates `config`.
    pub fn new(config: Config) -> Result<Self> {
        config.validate()?;
        Ok(Clawfs { config })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// `/clawfs/workspaces`.
    pub fn workspaces_dir(&self) -> PathBuf {
        crate::layout::workspaces_dir(&self.config.root)
    }

    /// The directory of workspace `name` (validated).
    pub fn workspace_dir(&self, name: &str) -> Result<PathBuf> {
        validate_workspace_to_open(name)?;
        Ok(self.workspaces_dir().join(name))
    }

    /// Creates the namespace ([`create_namespace`]) and the `default`
    /// workspace.
    pub fn init(&self, owners: Owners) -> Result<NamespaceReport> {
        let mut report = create_namespace(&self.config.root, owners)?;
        if !self.workspaces_dir().join("default").join(METADATA_FILE).exists() {
            self.create_unchecked("default", "system")?;
            report.created.push("workspaces/default".into());
        }
        Ok(report)
    }

    /// Creates workspace `name` owned by `owner`. The name must follow
    /// specs/clawfs/README.md ("Names") and be unused.
    pub fn create_workspace(&self, name: &str, owner: &str) -> Result<WorkspaceMetadata> {
        validate_workspace_name(name)?;
        self.create_unchecked(name, owner)
    }

    fn create_unchecked(&self, name: &str, owner: &str) -> Result<WorkspaceMetadata> {
        let parent = self.workspaces_dir();
        fs::create_dir_all(&parent).map_err(io("create directory", &parent))?;
        let dir = parent.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::WorkspaceExists(name.to_owned()))
            }
            Err(error) => return Err(io("create directory", &dir)(error)),
        }
        let now = now_rfc3339();
        let metadata = WorkspaceMetadata {
            workspace_id: name.to_owned(),
            created_at: now.clone(),
            updated_at: now,
            vector_dimension: self.config.vector_dimension,
            hnsw_params: self.config.hnsw,
            owner: owner.to_owned(),
            encryption_enabled: false,
        };
        let created = (|| {
            fs::create_dir(dir.join(SNAPSHOTS_DIR)).map_err(io("create directory", dir.join(SNAPSHOTS_DIR)))?;
            let db = dir.join(DATABASE_FILE);
            open_agentfs(&db)?;
            write_json_atomic(&dir.join(METADATA_FILE), &metadata)
        })();
        if let Err(error) = created {
            // A half-made workspace would block the name; take it away again.
            let _ = fs::remove_dir_all(&dir);
            return Err(error);
        }
        Ok(metadata)
    }

    /// Every workspace, sorted by name. Directories without a readable
    /// `metadata.json` are errors, not silently skipped.
    pub fn list_workspaces(&self) -> Result<Vec<WorkspaceMetadata>> {
        let mut workspaces = Vec::new();
        for entry in dir_entries(&self.workspaces_dir())? {
            if entry.file_type().map_err(io("stat", entry.path()))?.is_dir() {
                workspaces.push(read_metadata(&entry.path())?);
            }
        }
        workspaces.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
        Ok(workspaces)
    }

    /// The metadata of workspace `name`.
    pub fn workspace(&self, name: &str) -> Result<WorkspaceMetadata> {
        let dir = self.workspace_dir(name)?;
        if !dir.is_dir() {
            return Err(Error::NoSuchWorkspace(name.to_owned()));
        }
        read_metadata(&dir)
    }

    /// Deletes workspace `name` with its database, index and snapshots.
    /// `default` cannot be deleted.
    pub fn delete_workspace(&self, name: &str) -> Result<()> {
        validate_workspace_name(name)?;
        let dir = self.workspaces_dir().join(name);
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Err(Error::NoSuchWorkspace(name.to_owned())),
            Err(error) => Err(io("remove", dir)(error)),
        }
    }

    /// Opens the memory index of workspace `name`. `embedder` must produce
    /// the instance dimension; without one the vector leg of searches
    /// reports that it could not run.
    pub fn open_memory(&self, name: &str, embedder: Option<Arc<dyn Embedder>>) -> Result<MemoryIndex> {
        let metadata = self.workspace(name)?;
        if metadata.vector_dimension != self.config.vector_dimension {
            return Err(Error::DimensionMismatch {
                workspace: name.to_owned(),
                expected: self.config.vector_dimension,
                found: metadata.vector_dimension,
            });
        }
        MemoryIndex::open(&self.workspace_dir(name)?, &metadata, embedder)
    }

    /// Opens the memory index of agent `agent`: its `workspace.db` holds
    /// the search tables beside its AgentFS ones and `workspace.hnsw` sits
    /// beside it (`specs/agent/README.md`, "Memory"). It has no
    /// `metadata.json`: the instance's dimension and the default HNSW
    /// parameters hold, and `workspace_id` in its search hits is
    /// `agents/<agent>`.
    pub fn open_agent_memory(&self, agent: &str, embedder: Option<Arc<dyn Embedder>>) -> Result<MemoryIndex> {
        let dir = agent_dir(&self.config.root, agent)?;
        let now = now_rfc3339();
        let metadata = WorkspaceMetadata {
            workspace_id: format!("{AGENTS_DIR}/{agent}"),
            created_at: now.clone(),
            updated_at: now,
            vector_dimension: self.config.vector_dimension,
            hnsw_params: HnswParams::default(),
            owner: agent.to_owned(),
            encryption_enabled: false,
        };
        MemoryIndex::open(&dir, &metadata, embedder)
    }

    /// Re-embeds every chunk of workspace `name` with `embedder` (whose
    /// dimension becomes the workspace's) and rebuilds its HNSW index. This
    /// is the one way a workspace's dimension changes.
    pub fn reindex(&self, name: &str, embedder: Arc<dyn Embedder>) -> Result<usize> {
        let mut metadata = self.workspace(name)?;
        let dir = self.workspace_dir(name)?;
        metadata.vector_dimension = embedder.dimension();
        let count = MemoryIndex::reembed(&dir, &metadata, embedder)?;
        metadata.updated_at = now_rfc3339();
        write_json_atomic(&dir.join(METADATA_FILE), &metadata)?;
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(dimension: usize) -> (tempfile::TempDir, Clawfs) {
        let dir = tempfile::tempdir().unwrap();
        let config = Config { vector_dimension: dimension, ..Config::new(dir.path()) };
        (dir, Clawfs::new(config).unwrap())
    }

    #[test]
    fn create_list_delete() {
        let (_dir, clawfs) = instance(384);
        clawfs.init(crate::Owners::Keep).unwrap();
        let created = clawfs.create_workspace("project-alpha", "user").unwrap();
        assert_eq!(created.vector_dimension, 384);
        assert_eq!(created.hnsw_params, HnswParams::default());
        assert!(matches!(clawfs.create_workspace("project-alpha", "user"), Err(Error::WorkspaceExists(_))));
        assert!(matches!(clawfs.create_workspace("default", "user"), Err(Error::Name(_))));
        let names: Vec<_> = clawfs.list_workspaces().unwrap().into_iter().map(|w| w.workspace_id).collect();
        assert_eq!(names, ["default", "project-alpha"]);
        let on_disk: WorkspaceMetadata =
            serde_json::from_slice(&fs::read(clawfs.workspaces_dir().join("project-alpha/metadata.json")).unwrap())
                .unwrap();
        assert_eq!(on_disk, created);
        assert!(clawfs.workspaces_dir().join("project-alpha/snapshots").is_dir());
        clawfs.delete_workspace("project-alpha").unwrap();
        assert!(matches!(clawfs.delete_workspace("project-alpha"), Err(Error::NoSuchWorkspace(_))));
        assert!(matches!(clawfs.delete_workspace("default"), Err(Error::Name(_))));
        assert_eq!(clawfs.list_workspaces().unwrap().len(), 1);
    }

    #[test]
    fn a_workspace_of_another_dimension_is_refused_not_converted() {
        let (dir, clawfs) = instance(384);
        clawfs.create_workspace("notes", "user").unwrap();
        let wider = Clawfs::new(Config { vector_dimension: 768, ..Config::new(dir.path()) }).unwrap();
        let error = wider.open_memory("notes", None).unwrap_err();
        assert!(matches!(error, Error::DimensionMismatch { expected: 768, found: 384, .. }));
        assert!(error.to_string().contains("clawctl workspace reindex"), "{error}");
        assert_eq!(wider.workspace("notes").unwrap().vector_dimension, 384);
    }

    #[test]
    fn config_ranges_are_checked() {
        assert!(Clawfs::new(Config { vector_dimension: 64, ..Config::new("/x") }).is_err());
        let hnsw = HnswParams { m: 4, ..HnswParams::default() };
        assert!(Clawfs::new(Config { hnsw, ..Config::new("/x") }).is_err());
    }
}

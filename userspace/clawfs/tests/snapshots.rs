//! Workspace snapshots on real files: taken online with VACUUM INTO,
//! checked, restored with their index, pruned.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use agentfs::AgentFs;
use clawfs::{Clawfs, Config, Error, HashingEmbedder, SearchRequest, DATABASE_FILE};

const DIMENSION: usize = 128;
const GUIDE: &str = "# Backups\n\nSnapshots copy workspace.db every night.\n\n# Secrets\n\nThe vault seals its master key with the TPM.\n";

fn instance() -> (tempfile::TempDir, Clawfs) {
    let dir = tempfile::tempdir().unwrap();
    let clawfs = Clawfs::new(Config { vector_dimension: DIMENSION, ..Config::new(dir.path()) }).unwrap();
    clawfs.create_workspace("notes", "user").unwrap();
    (dir, clawfs)
}

fn database(clawfs: &Clawfs) -> std::path::PathBuf {
    clawfs.workspace_dir("notes").unwrap().join(DATABASE_FILE)
}

fn hits(clawfs: &Clawfs, query: &str) -> Vec<(String, String)> {
    let index = clawfs.open_memory("notes", Some(Arc::new(HashingEmbedder::new(DIMENSION)))).unwrap();
    let response = index.search(&SearchRequest::new(query)).unwrap();
    response.results.iter().map(|hit| (hit.path.clone(), hit.heading.clone())).collect()
}

#[test]
fn restore_brings_back_the_files_and_the_search_of_the_snapshot() {
    let (_dir, clawfs) = instance();
    let embedder = Arc::new(HashingEmbedder::new(DIMENSION));
    clawfs.open_memory("notes", Some(embedder.clone())).unwrap().index_document("guide.md", GUIDE).unwrap();
    AgentFs::open(database(&clawfs)).unwrap().write_file("/notes.txt", b"version 1").unwrap();
    let before = hits(&clawfs, "vault master key");

    let snapshot = clawfs.create_snapshot("notes").unwrap();
    assert!(snapshot.file.starts_with("snapshot-") && snapshot.bytes > 0);
    assert_eq!(clawfs.list_snapshots("notes").unwrap(), std::slice::from_ref(&snapshot));

    // Changes after the snapshot: another document, a rewritten file.
    let mut index = clawfs.open_memory("notes", Some(embedder)).unwrap();
    index.index_document("extra.md", "# Vault\n\nThe vault master key rotates monthly.\n").unwrap();
    drop(index);
    AgentFs::open(database(&clawfs)).unwrap().write_file("/notes.txt", b"version 2").unwrap();
    assert_ne!(hits(&clawfs, "vault master key"), before);

    clawfs.restore_snapshot("notes", &snapshot.file).unwrap();
    assert_eq!(hits(&clawfs, "vault master key"), before);
    let index = clawfs.open_memory("notes", None).unwrap();
    assert_eq!(index.chunk_count().unwrap(), 2);
    assert_eq!(AgentFs::open(database(&clawfs)).unwrap().read_file("/notes.txt").unwrap(), b"version 1");
    assert!(agentfs::check::check_database(database(&clawfs)).unwrap().is_clean());
}

#[test]
fn a_snapshot_taken_while_a_writer_writes_is_consistent() {
    let (_dir, clawfs) = instance();
    let db = database(&clawfs);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut fs = AgentFs::open(&db).unwrap();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                fs.write_file(&format!("/w/{n}"), &n.to_le_bytes().repeat(1000)).unwrap();
                n += 1;
            }
            n
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let snapshot = clawfs.create_snapshot("notes").unwrap();
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    // create_snapshot already refuses an inconsistent copy; every file in it is whole.
    let path = clawfs.workspace_dir("notes").unwrap().join("snapshots").join(&snapshot.file);
    let mut copy = AgentFs::open(&path).unwrap();
    let names = copy.readdir("/w").unwrap();
    assert!(!names.is_empty() && names.len() as u32 <= written, "{} of {written}", names.len());
    for entry in names {
        let n: u32 = entry.name.parse().unwrap();
        assert_eq!(copy.read_file(&format!("/w/{n}")).unwrap(), n.to_le_bytes().repeat(1000));
    }
}

#[test]
fn prune_keeps_the_newest_and_bad_snapshots_are_refused() {
    let (_dir, clawfs) = instance();
    let today = clawfs.create_snapshot("notes").unwrap();
    let snapshots = clawfs.workspace_dir("notes").unwrap().join("snapshots");
    for day in ["2020-01-01", "2020-01-02", "2020-01-03"] {
        std::fs::copy(snapshots.join(&today.file), snapshots.join(format!("snapshot-{day}.db"))).unwrap();
    }
    let removed = clawfs.prune_snapshots("notes", 2).unwrap();
    assert_eq!(removed, ["snapshot-2020-01-01.db", "snapshot-2020-01-02.db"]);
    let left: Vec<String> = clawfs.list_snapshots("notes").unwrap().into_iter().map(|s| s.file).collect();
    assert_eq!(left, ["snapshot-2020-01-03.db".to_owned(), today.file.clone()]);

    assert!(matches!(clawfs.restore_snapshot("notes", "snapshot-2019-05-05.db"), Err(Error::NoSuchSnapshot { .. })));
    assert!(matches!(clawfs.restore_snapshot("notes", &format!("../{DATABASE_FILE}")), Err(Error::Name(_))));

    // A snapshot whose inode table lost a row: the checker refuses it and
    // the live workspace is left alone.
    AgentFs::open(database(&clawfs)).unwrap().write_file("/keep", b"live").unwrap();
    let broken = snapshots.join("snapshot-2020-01-03.db");
    {
        let mut fs = AgentFs::open(&broken).unwrap();
        fs.write_file("/doomed", b"x").unwrap();
        fs.connection().execute("DELETE FROM fs_inode WHERE ino = (SELECT MAX(ino) FROM fs_inode)", []).unwrap();
    }
    assert!(matches!(
        clawfs.restore_snapshot("notes", "snapshot-2020-01-03.db"),
        Err(Error::InconsistentSnapshot { .. })
    ));
    assert_eq!(AgentFs::open(database(&clawfs)).unwrap().read_file("/keep").unwrap(), b"live");
}

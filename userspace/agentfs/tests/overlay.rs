//! Overlay workspaces: a writable delta over an AgentFS or host-directory base.

mod common;

use agentfs::{AgentFs, BaseSource, OpenOptions};
use common::{assert_consistent, Workspace};

/// A base database with a small tree, closed so the overlay opens it read-only.
fn base_db(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("base.db");
    let mut base = AgentFs::open(&path).unwrap();
    base.write_file("/etc/config", b"base config").unwrap();
    base.write_file("/etc/other", b"other").unwrap();
    base.write_file("/docs/readme", b"read me").unwrap();
    base.symlink("/docs/link", "readme").unwrap();
    base.set_xattr("/docs/readme", "user.tag", b"base").unwrap();
    assert_consistent(&base);
    path
}

fn overlay(base: BaseSource) -> Workspace {
    Workspace::with_options(&OpenOptions { base: Some(base), ..OpenOptions::default() })
}

#[test]
fn lookup_falls_through_to_the_base() {
    let dir = tempfile::tempdir().unwrap();
    let mut ws = overlay(BaseSource::AgentFs(base_db(dir.path())));
    assert_eq!(ws.read_file("/etc/config").unwrap(), b"base config");
    assert_eq!(ws.read_file("/docs/link").unwrap(), b"read me");
    assert_eq!(ws.get_xattr("/docs/readme", "user.tag").unwrap(), b"base");
    let names: Vec<_> = ws.readdir("/").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["docs", "etc"]);
    // Reading alone copies nothing into the delta.
    let delta_inodes: i64 = ws.connection().query_row("SELECT COUNT(*) FROM fs_inode", [], |r| r.get(0)).unwrap();
    assert_eq!(delta_inodes, 1);
}

#[test]
fn copy_up_keeps_the_base_inode_number() {
    let dir = tempfile::tempdir().unwrap();
    let mut ws = overlay(BaseSource::AgentFs(base_db(dir.path())));
    let before = ws.stat("/etc/config").unwrap();
    ws.write("/etc/config", 0, b"BASE").unwrap();
    let after = ws.stat("/etc/config").unwrap();
    assert_eq!(after.ino, before.ino);
    assert_eq!(ws.stat("/etc").unwrap().ino, 2, "the copied-up parent keeps its number too");
    assert_eq!(ws.read_file("/etc/config").unwrap(), b"BASE config");
    let origins: i64 = ws.connection().query_row("SELECT COUNT(*) FROM fs_origin", [], |r| r.get(0)).unwrap();
    assert_eq!(origins, 2);
    // The base database is untouched.
    let mut base = AgentFs::open(dir.path().join("base.db")).unwrap();
    assert_eq!(base.read_file("/etc/config").unwrap(), b"base config");
    // New delta files never reuse a base inode number.
    let fresh = ws.create("/etc/new", 0o644).unwrap();
    assert!(fresh.ino > base.stat("/docs/link").unwrap().ino);
}

#[test]
fn hard_link_to_a_base_file_copies_it_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut ws = overlay(BaseSource::AgentFs(base_db(dir.path())));
    let base_ino = ws.stat("/docs/readme").unwrap().ino;
    let linked = ws.link("/docs/readme", "/readme2").unwrap();
    assert_eq!((linked.ino, linked.nlink), (base_ino, 2));
    assert_eq!(ws.stat("/readme2").unwrap().ino, base_ino);
    assert_eq!(ws.get_xattr("/readme2", "user.tag").unwrap(), b"base");
}

#[test]
fn deleting_base_entries_leaves_whiteouts() {
    let dir = tempfile::tempdir().unwrap();
    let mut ws = overlay(BaseSource::AgentFs(base_db(dir.path())));
    ws.unlink("/etc/config").unwrap();
    assert_eq!(ws.stat("/etc/config").unwrap_err().errno(), libc::ENOENT);
    let names: Vec<_> = ws.readdir("/etc").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["other"]);
    let (path, parent): (String, String) = ws
        .connection()
        .query_row("SELECT path, parent_path FROM fs_whiteout", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert_eq!((path.as_str(), parent.as_str()), ("/etc/config", "/etc"));
    // Recreating the name removes the whiteout.
    ws.write_file("/etc/config", b"new").unwrap();
    assert_eq!(ws.read_file("/etc/config").unwrap(), b"new");
    let whiteouts: i64 = ws.connection().query_row("SELECT COUNT(*) FROM fs_whiteout", [], |r| r.get(0)).unwrap();
    assert_eq!(whiteouts, 0);
}

#[test]
fn removed_and_recreated_base_directory_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let mut ws = overlay(BaseSource::AgentFs(base_db(dir.path())));
    assert_eq!(ws.rmdir("/docs").unwrap_err().errno(), libc::ENOTEMPTY);
    ws.unlink("/docs/readme").unwrap();
    ws.unlink("/docs/link").unwrap();
    ws.rmdir("/docs").unwrap();
    assert_eq!(ws.stat("/docs/readme").unwrap_err().errno(), libc::ENOENT);
    ws.mkdir("/docs", 0o755).unwrap();
    assert!(ws.readdir("/docs").unwrap().is_empty());
    assert_eq!(ws.stat("/docs/readme").unwrap_err().errno(), libc::ENOENT);
}

#[test]
fn rename_of_base_file_and_base_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut ws = overlay(BaseSource::AgentFs(base_db(dir.path())));
    let ino = ws.stat("/etc/other").unwrap().ino;
    ws.rename("/etc/other", "/docs/moved").unwrap();
    assert_eq!(ws.stat("/docs/moved").unwrap().ino, ino);
    assert_eq!(ws.stat("/etc/other").unwrap_err().errno(), libc::ENOENT);
    ws.rename("/docs/moved", "/etc/config").unwrap();
    assert_eq!(ws.read_file("/etc/config").unwrap(), b"other");
    assert_eq!(ws.rename("/etc", "/etc2").unwrap_err().errno(), libc::EXDEV);
    ws.mkdir("/mine", 0o755).unwrap();
    ws.rename("/mine", "/yours").unwrap();
}

#[test]
fn host_directory_base() {
    let host = tempfile::tempdir().unwrap();
    std::fs::create_dir(host.path().join("src")).unwrap();
    std::fs::write(host.path().join("src/main.rs"), b"fn main() {}").unwrap();
    std::os::unix::fs::symlink("main.rs", host.path().join("src/entry")).unwrap();
    let exact = std::time::UNIX_EPOCH + std::time::Duration::new(1_600_000_000, 987_654_321);
    let times = std::fs::FileTimes::new().set_accessed(exact).set_modified(exact);
    std::fs::File::open(host.path().join("src/main.rs")).unwrap().set_times(times).unwrap();
    let mut ws = overlay(BaseSource::detect(host.path()));
    assert_eq!(ws.read_file("/src/entry").unwrap(), b"fn main() {}");
    // The base's nanoseconds show through and survive copy-up (chmod copies up).
    let exact_stamp = agentfs::Timestamp { secs: 1_600_000_000, nsec: 987_654_321 };
    assert_eq!(ws.stat("/src/main.rs").unwrap().mtime, exact_stamp);
    ws.chmod("/src/main.rs", 0o600).unwrap();
    assert_eq!(ws.stat("/src/main.rs").unwrap().mtime, exact_stamp);
    assert_eq!(ws.read("/src/main.rs", 3, 4).unwrap(), b"main");
    let host_ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(host.path().join("src/main.rs")).unwrap());
    assert_eq!(ws.stat("/src/main.rs").unwrap().ino, host_ino);
    ws.append("/src/main.rs", b"\n").unwrap();
    assert_eq!(ws.stat("/src/main.rs").unwrap().ino, host_ino);
    assert_eq!(std::fs::read(host.path().join("src/main.rs")).unwrap(), b"fn main() {}");
    ws.unlink("/src/entry").unwrap();
    assert!(host.path().join("src/entry").exists());
    let names: Vec<_> = ws.readdir("/src").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["main.rs"]);
}

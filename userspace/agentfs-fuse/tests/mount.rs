//! The mount exercised through the kernel: std::fs and libc calls on a real
//! FUSE mountpoint, then the database checked after unmounting.

mod common;

use std::ffi::CString;
use std::fs;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};

use agentfs::{AgentFs, BaseSource, OpenOptions};
use common::{assert_clean, is_mounted, Mounted};

#[test]
fn files_directories_and_links_behave_as_posix_says() {
    let Some(mut mnt) = Mounted::start("files_directories_and_links_behave_as_posix_says", None) else { return };

    fs::create_dir(mnt.path("docs")).unwrap();
    fs::write(mnt.path("docs/a.txt"), b"alpha").unwrap();
    assert_eq!(fs::read(mnt.path("docs/a.txt")).unwrap(), b"alpha");
    let mut file = fs::OpenOptions::new().append(true).open(mnt.path("docs/a.txt")).unwrap();
    file.write_all(b"-beta").unwrap();
    drop(file);
    assert_eq!(fs::read_to_string(mnt.path("docs/a.txt")).unwrap(), "alpha-beta");
    assert_eq!(fs::create_dir(mnt.path("docs")).unwrap_err().kind(), ErrorKind::AlreadyExists);
    assert_eq!(fs::read(mnt.path("missing")).unwrap_err().kind(), ErrorKind::NotFound);

    // Hard link: one inode, two names, nlink counted, survives the first name.
    fs::hard_link(mnt.path("docs/a.txt"), mnt.path("link.txt")).unwrap();
    let (a, link) = (fs::metadata(mnt.path("docs/a.txt")).unwrap(), fs::metadata(mnt.path("link.txt")).unwrap());
    assert_eq!(a.ino(), link.ino());
    assert_eq!(link.nlink(), 2);
    fs::remove_file(mnt.path("docs/a.txt")).unwrap();
    assert_eq!(fs::metadata(mnt.path("link.txt")).unwrap().nlink(), 1);
    assert_eq!(fs::read_to_string(mnt.path("link.txt")).unwrap(), "alpha-beta");

    // Symlinks: readlink, size of the target, reads through, dangling ones.
    std::os::unix::fs::symlink("link.txt", mnt.path("sym")).unwrap();
    assert_eq!(fs::read_link(mnt.path("sym")).unwrap().to_str(), Some("link.txt"));
    let sym = fs::symlink_metadata(mnt.path("sym")).unwrap();
    assert!(sym.file_type().is_symlink());
    assert_eq!(sym.len(), "link.txt".len() as u64);
    assert_eq!(fs::read_to_string(mnt.path("sym")).unwrap(), "alpha-beta");
    std::os::unix::fs::symlink("nowhere", mnt.path("dangling")).unwrap();
    assert_eq!(fs::metadata(mnt.path("dangling")).unwrap_err().kind(), ErrorKind::NotFound);

    // Rename over an existing file replaces it atomically; directories move
    // with their contents.
    fs::write(mnt.path("docs/old"), b"old").unwrap();
    fs::write(mnt.path("docs/new"), b"new").unwrap();
    fs::rename(mnt.path("docs/new"), mnt.path("docs/old")).unwrap();
    assert_eq!(fs::read(mnt.path("docs/old")).unwrap(), b"new");
    assert!(!mnt.path("docs/new").exists());
    fs::rename(mnt.path("docs"), mnt.path("papers")).unwrap();
    assert_eq!(fs::read(mnt.path("papers/old")).unwrap(), b"new");

    // rmdir refuses a non-empty directory.
    let err = fs::remove_dir(mnt.path("papers")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTEMPTY));

    // Truncate down and up, chmod.
    let file = fs::OpenOptions::new().write(true).open(mnt.path("papers/old")).unwrap();
    file.set_len(1).unwrap();
    file.set_len(4).unwrap();
    drop(file);
    assert_eq!(fs::read(mnt.path("papers/old")).unwrap(), b"n\0\0\0");
    fs::set_permissions(mnt.path("papers/old"), fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(fs::metadata(mnt.path("papers/old")).unwrap().permissions().mode() & 0o7777, 0o600);

    // Create with O_EXCL on an existing name.
    let err = fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(mnt.path("link.txt")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);

    // mknod: a FIFO is a special file with its own type.
    let fifo = CString::new(mnt.path("pipe").as_os_str().as_bytes()).unwrap();
    // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0, "{}", std::io::Error::last_os_error());
    assert!(fs::symlink_metadata(mnt.path("pipe")).unwrap().file_type().is_fifo());

    // Extended attributes, stored in the library's extension table.
    xattr::set(mnt.path("link.txt"), "user.origin", b"agent-7").unwrap();
    xattr::set(mnt.path("link.txt"), "user.empty", b"").unwrap();
    assert_eq!(xattr::get(mnt.path("link.txt"), "user.origin").unwrap().as_deref(), Some(&b"agent-7"[..]));
    let mut names: Vec<_> = xattr::list(mnt.path("link.txt")).unwrap().collect();
    names.sort();
    assert_eq!(names, ["user.empty", "user.origin"]);
    xattr::remove(mnt.path("link.txt"), "user.empty").unwrap();
    assert_eq!(xattr::get(mnt.path("link.txt"), "user.empty").unwrap(), None);

    let db = mnt.stop();
    let mut fs = AgentFs::open(&db).unwrap();
    assert_eq!(fs.read_file("/link.txt").unwrap(), b"alpha-beta");
    assert_eq!(fs.readlink("/sym").unwrap(), "link.txt");
    assert_eq!(fs.read_file("/papers/old").unwrap(), b"n\0\0\0");
    assert_eq!(fs.get_xattr("/link.txt", "user.origin").unwrap(), b"agent-7");
    assert!(!fs.exists("/docs").unwrap());
}

#[test]
fn large_files_and_long_directories_round_trip() {
    let Some(mut mnt) = Mounted::start("large_files_and_long_directories_round_trip", None) else { return };

    // 12 MiB of a pattern that differs in every chunk, written in uneven pieces.
    let data: Vec<u8> = (0..12 << 20).map(|i: u32| (i % 253) as u8 ^ (i >> 12) as u8).collect();
    let mut file = fs::File::create(mnt.path("big.bin")).unwrap();
    for piece in data.chunks(100_003) {
        file.write_all(piece).unwrap();
    }
    file.sync_all().unwrap();
    drop(file);
    assert_eq!(fs::metadata(mnt.path("big.bin")).unwrap().len(), data.len() as u64);
    assert!(fs::read(mnt.path("big.bin")).unwrap() == data, "whole-file read differs");
    let mut file = fs::File::open(mnt.path("big.bin")).unwrap();
    let mut middle = vec![0; 10_000];
    file.seek(SeekFrom::Start(5_000_001)).unwrap();
    file.read_exact(&mut middle).unwrap();
    drop(file);
    assert!(middle == data[5_000_001..5_010_001], "read at an offset differs");

    // Enough entries that listing takes many readdir calls.
    fs::create_dir(mnt.path("many")).unwrap();
    let mut expected: Vec<String> = (0..1500).map(|i| format!("entry-with-a-long-name-{i:05}")).collect();
    for name in &expected {
        fs::write(mnt.path(&format!("many/{name}")), name.as_bytes()).unwrap();
    }
    let mut listed: Vec<String> = fs::read_dir(mnt.path("many"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    listed.sort();
    expected.sort();
    assert_eq!(listed, expected);

    let db = mnt.stop();
    let mut fs = AgentFs::open(&db).unwrap();
    assert!(fs.read_file("/big.bin").unwrap() == data);
    assert_eq!(fs.readdir("/many").unwrap().len(), 1500);
}

#[test]
fn overlay_copy_up_keeps_base_inode_numbers() {
    let base = tempfile::tempdir().unwrap();
    fs::create_dir(base.path().join("src")).unwrap();
    fs::write(base.path().join("src/main.rs"), b"fn main() {}\n").unwrap();
    fs::write(base.path().join("README"), b"base readme").unwrap();
    let Some(mut mnt) = Mounted::start("overlay_copy_up_keeps_base_inode_numbers", Some(base.path())) else { return };

    let before = fs::metadata(mnt.path("src/main.rs")).unwrap();
    assert_eq!(before.ino(), fs::metadata(base.path().join("src/main.rs")).unwrap().ino());
    let mut file = fs::OpenOptions::new().append(true).open(mnt.path("src/main.rs")).unwrap();
    file.write_all(b"// edited\n").unwrap();
    drop(file);
    let after = fs::metadata(mnt.path("src/main.rs")).unwrap();
    assert_eq!(after.ino(), before.ino(), "copy-up changed the inode number");
    assert_eq!(fs::read_to_string(mnt.path("src/main.rs")).unwrap(), "fn main() {}\n// edited\n");
    assert_eq!(fs::read_to_string(base.path().join("src/main.rs")).unwrap(), "fn main() {}\n", "base was written");

    fs::hard_link(mnt.path("README"), mnt.path("README.link")).unwrap();
    assert_eq!(
        fs::metadata(mnt.path("README.link")).unwrap().ino(),
        fs::metadata(base.path().join("README")).unwrap().ino()
    );
    fs::remove_file(mnt.path("README")).unwrap();
    assert!(!mnt.path("README").exists(), "the whiteout hides the base file");
    assert!(base.path().join("README").exists());
    let names: Vec<String> =
        fs::read_dir(mnt.path("")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(
        names.contains(&"src".to_owned())
            && names.contains(&"README.link".to_owned())
            && !names.contains(&"README".to_owned())
    );

    let db = mnt.stop();
    let options = OpenOptions { base: Some(BaseSource::HostDir(base.path().to_owned())), ..OpenOptions::default() };
    let mut fs = AgentFs::open_with(&db, &options).unwrap();
    assert_eq!(fs.read_file("/README.link").unwrap(), b"base readme");
    assert!(!fs.exists("/README").unwrap());
}

#[test]
fn sigterm_unmounts_with_every_write_committed() {
    let Some(mut mnt) = Mounted::start("sigterm_unmounts_with_every_write_committed", None) else { return };
    for i in 0..50 {
        fs::write(mnt.path(&format!("f{i}")), format!("content {i}")).unwrap();
    }
    // A file still open when the signal arrives keeps being served until it
    // is closed, and what is written to it lands too.
    let mut open = fs::File::create(mnt.path("open")).unwrap();
    open.write_all(b"before").unwrap();
    mnt.terminate();
    let started = std::time::Instant::now();
    while is_mounted(&mnt.mountpoint) {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "SIGTERM did not detach the mount");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    open.write_all(b" and after").unwrap();
    drop(open);
    let status = mnt.wait();
    assert!(status.success(), "mount process exited with {status}");
    assert_clean(&mnt.db);

    let mut fs = AgentFs::open(&mnt.db).unwrap();
    for i in 0..50 {
        assert_eq!(fs.read_file(&format!("/f{i}")).unwrap(), format!("content {i}").as_bytes());
    }
    assert_eq!(fs.read_file("/open").unwrap(), b"before and after");
}

#[test]
fn files_belong_to_the_user_who_creates_them() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        clawos_test_require::missing("files_belong_to_the_user_who_creates_them", "needs root to switch users");
        return;
    }
    let Some(mut mnt) = Mounted::start_shared("files_belong_to_the_user_who_creates_them") else { return };
    fs::create_dir(mnt.path("shared")).unwrap();
    fs::set_permissions(mnt.path("shared"), fs::Permissions::from_mode(0o777)).unwrap();
    let status = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65533", "--clear-groups", "sh", "-c"])
        .arg("touch shared/file && mkdir shared/dir && ln -s file shared/link && mkfifo shared/fifo")
        .current_dir(&mnt.mountpoint)
        .status()
        .expect("run setpriv");
    assert!(status.success(), "creating files as 65534 failed: {status}");
    for name in ["shared/file", "shared/dir", "shared/link", "shared/fifo"] {
        let meta = fs::symlink_metadata(mnt.path(name)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65534, 65533), "{name}");
    }
    // And the kernel's permission checks follow: root's 0600 file stays
    // closed to that user.
    fs::write(mnt.path("shared/private"), b"root only").unwrap();
    fs::set_permissions(mnt.path("shared/private"), fs::Permissions::from_mode(0o600)).unwrap();
    let read = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65533", "--clear-groups", "cat", "shared/private"])
        .current_dir(&mnt.mountpoint)
        .output()
        .expect("run setpriv");
    assert!(!read.status.success() && read.stdout.is_empty());
    mnt.terminate();
    assert!(mnt.wait().success());
    assert_clean(&mnt.db);
}

#[test]
fn an_unlinked_or_replaced_file_stays_usable_while_open() {
    let Some(mut mnt) = Mounted::start("an_unlinked_or_replaced_file_stays_usable_while_open", None) else { return };
    fs::write(mnt.path("temp"), b"scratch").unwrap();
    let mut file = fs::OpenOptions::new().read(true).write(true).open(mnt.path("temp")).unwrap();
    fs::remove_file(mnt.path("temp")).unwrap();
    assert_eq!(fs::metadata(mnt.path("temp")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(file.metadata().unwrap().nlink(), 0);
    file.seek(SeekFrom::End(0)).unwrap();
    file.write_all(b" and more").unwrap();
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).unwrap();
    file.read_to_string(&mut text).unwrap();
    assert_eq!(text, "scratch and more");
    // The hiding place is not visible.
    let names: Vec<_> = fs::read_dir(&mnt.mountpoint).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(names.is_empty(), "{names:?}");

    // A file replaced by rename keeps serving the handle opened before.
    fs::write(mnt.path("config"), b"old").unwrap();
    fs::write(mnt.path("config.new"), b"new").unwrap();
    let mut old = fs::File::open(mnt.path("config")).unwrap();
    fs::rename(mnt.path("config.new"), mnt.path("config")).unwrap();
    let mut content = String::new();
    old.read_to_string(&mut content).unwrap();
    assert_eq!(content, "old");
    assert_eq!(fs::read(mnt.path("config")).unwrap(), b"new");
    drop((file, old));

    mnt.terminate();
    assert!(mnt.wait().success());
    // The last close removed both orphans: only `config` is left.
    let mut fs = AgentFs::open(&mnt.db).unwrap();
    let left: Vec<String> = fs.readdir("/").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(left, ["config"]);
    assert_clean(&mnt.db);
}

#[test]
fn a_killed_mount_keeps_what_was_fsynced_and_what_settled_for_a_commit_interval() {
    let Some(mut mnt) =
        Mounted::start("a_killed_mount_keeps_what_was_fsynced_and_what_settled_for_a_commit_interval", None)
    else {
        return;
    };
    // Settled: written, then left alone for many commit intervals.
    fs::create_dir(mnt.path("dir")).unwrap();
    for i in 0..200 {
        fs::write(mnt.path(&format!("dir/f{i}")), format!("settled {i}")).unwrap();
    }
    std::thread::sleep(agentfs_fuse::commit::DEFAULT_COMMIT_INTERVAL * 20);
    // Synced: fsync returns only once the write is in the database, so it
    // must survive the kill that follows at once.
    let mut synced = fs::File::create(mnt.path("synced")).unwrap();
    synced.write_all(b"made durable by fsync").unwrap();
    synced.sync_all().unwrap();
    mnt.kill();
    drop(synced);

    assert_clean(&mnt.db);
    let mut fs = AgentFs::open(&mnt.db).unwrap();
    for i in 0..200 {
        assert_eq!(fs.read_file(&format!("/dir/f{i}")).unwrap(), format!("settled {i}").as_bytes());
    }
    assert_eq!(fs.read_file("/synced").unwrap(), b"made durable by fsync");
}

/// make and its kind compare mtimes: a file written after another within the
/// same second is newer, and utimensat's nanoseconds are kept, in the mount
/// and in the database after it.
#[test]
fn times_keep_nanoseconds_through_the_mount() {
    use std::time::{Duration, UNIX_EPOCH};
    let Some(mut mnt) = Mounted::start("times_keep_nanoseconds_through_the_mount", None) else { return };
    fs::write(mnt.path("source"), b"1").unwrap();
    fs::write(mnt.path("target"), b"2").unwrap();
    fs::write(mnt.path("source"), b"3").unwrap();
    let mtime = |name: &str| fs::metadata(mnt.path(name)).unwrap().modified().unwrap();
    assert!(mtime("source") > mtime("target"), "{:?} not after {:?}", mtime("source"), mtime("target"));
    let exact = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
    let times = fs::FileTimes::new().set_accessed(exact).set_modified(exact);
    fs::File::options().write(true).open(mnt.path("target")).unwrap().set_times(times).unwrap();
    assert_eq!(mtime("target"), exact);
    // Before 1970: -1.5 s is the timespec (-2 s, +0.5 s).
    let before_1970 = UNIX_EPOCH - Duration::new(1, 500_000_000);
    fs::File::options().write(true).open(mnt.path("source")).unwrap().set_modified(before_1970).unwrap();
    assert_eq!(mtime("source"), before_1970);
    let db = mnt.stop();
    let mut fs = AgentFs::open(&db).unwrap();
    let stat = fs.stat("/target").unwrap();
    assert_eq!((stat.mtime.secs, stat.mtime.nsec), (1_700_000_000, 123_456_789));
    let stat = fs.stat("/source").unwrap();
    assert_eq!((stat.mtime.secs, stat.mtime.nsec), (-2, 500_000_000));
}

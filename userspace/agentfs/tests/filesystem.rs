//! Filesystem operations of a plain (non-overlay) workspace.

mod common;

use agentfs::{FileType, SetAttr, Timestamp, S_IFBLK, S_IFCHR, S_IFIFO, S_IFSOCK};
use common::Workspace;

fn errno<T: std::fmt::Debug>(result: agentfs::Result<T>) -> i32 {
    result.expect_err("operation must fail").errno()
}

#[test]
fn fresh_workspace_follows_the_spec_initialization() {
    let mut ws = Workspace::new();
    let root = ws.stat("/").unwrap();
    assert_eq!((root.ino, root.mode, root.nlink), (1, 0o040755, 1));
    let chunk: String =
        ws.connection().query_row("SELECT value FROM fs_config WHERE key = 'chunk_size'", [], |r| r.get(0)).unwrap();
    assert_eq!(chunk, "4096");
    assert!(ws.readdir("/").unwrap().is_empty());
}

#[test]
fn chunk_size_is_fixed_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let options = agentfs::OpenOptions { chunk_size: 16, ..agentfs::OpenOptions::default() };
    agentfs::AgentFs::open_with(&path, &options).unwrap();
    let reopened = agentfs::AgentFs::open_with(&path, &agentfs::OpenOptions::default()).unwrap();
    assert_eq!(reopened.chunk_size(), 16);
}

#[test]
fn page_size_is_set_at_creation_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let page_size =
        |fs: &agentfs::AgentFs| fs.connection().query_row("PRAGMA page_size", [], |r| r.get::<_, u32>(0)).unwrap();
    let created =
        agentfs::AgentFs::open_with(&path, &agentfs::OpenOptions { page_size: Some(32768), ..Default::default() })
            .unwrap();
    assert_eq!(page_size(&created), 32768);
    drop(created);
    let reopened =
        agentfs::AgentFs::open_with(&path, &agentfs::OpenOptions { page_size: Some(8192), ..Default::default() })
            .unwrap();
    assert_eq!(page_size(&reopened), 32768, "an existing database keeps its page size");
    assert_eq!(page_size(&Workspace::new()), 4096, "SQLite's default without the option");
}

#[test]
fn write_and_read_whole_file_across_chunks() {
    let mut ws = Workspace::new();
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    ws.write_file("/a/b/file.bin", &data).unwrap();
    assert_eq!(ws.read_file("/a/b/file.bin").unwrap(), data);
    assert_eq!(ws.stat("/a/b/file.bin").unwrap().size, 10_000);
    let chunks: i64 = ws.connection().query_row("SELECT COUNT(*) FROM fs_data", [], |r| r.get(0)).unwrap();
    assert_eq!(chunks, 3);
    ws.write_file("/a/b/file.bin", b"short").unwrap();
    assert_eq!(ws.read_file("/a/b/file.bin").unwrap(), b"short");
}

#[test]
fn write_at_offset_append_and_sparse_extension() {
    let mut ws = Workspace::new();
    ws.write_file("/f", b"hello world").unwrap();
    assert_eq!(ws.write("/f", 6, b"WORLD").unwrap(), 11);
    assert_eq!(ws.read_file("/f").unwrap(), b"hello WORLD");
    assert_eq!(ws.append("/f", b"!").unwrap(), 12);
    assert_eq!(ws.write("/f", 5000, b"x").unwrap(), 5001);
    let content = ws.read_file("/f").unwrap();
    assert_eq!(&content[..12], b"hello WORLD!");
    assert!(content[12..5000].iter().all(|b| *b == 0));
    assert_eq!(content[5000], b'x');
    assert_eq!(ws.write("/f", 0, b"").unwrap(), 5001);
}

#[test]
fn read_at_offset_touches_only_needed_chunks() {
    let mut ws = Workspace::new();
    let data: Vec<u8> = (0..4096 * 4).map(|i| (i / 4096) as u8 + 1).collect();
    ws.write_file("/f", &data).unwrap();
    assert_eq!(ws.read("/f", 4095, 2).unwrap(), vec![1, 2]);
    assert_eq!(ws.read("/f", 4096 * 4 - 1, 100).unwrap(), vec![4]);
    assert!(ws.read("/f", 1 << 40, 10).unwrap().is_empty());
    // Damage chunk 0: a read of chunk 2 alone must not notice it.
    ws.connection().execute("DELETE FROM fs_data WHERE chunk_index = 0", []).unwrap();
    assert_eq!(ws.read("/f", 8192, 3).unwrap(), vec![3, 3, 3]);
    assert_eq!(errno(ws.read("/f", 0, 3)), libc::EIO);
    ws.write("/f", 0, &vec![1; 4096]).unwrap();
}

#[test]
fn truncate_shrinks_and_grows() {
    let mut ws = Workspace::new();
    ws.write_file("/f", &[7u8; 9000]).unwrap();
    ws.truncate("/f", 4097).unwrap();
    assert_eq!(ws.read_file("/f").unwrap(), vec![7u8; 4097]);
    ws.truncate("/f", 4096).unwrap();
    ws.truncate("/f", 10_000).unwrap();
    let content = ws.read_file("/f").unwrap();
    assert_eq!(content.len(), 10_000);
    assert!(content[4096..].iter().all(|b| *b == 0));
    ws.truncate("/f", 0).unwrap();
    assert!(ws.read_file("/f").unwrap().is_empty());
    ws.mkdir("/d", 0o755).unwrap();
    assert_eq!(errno(ws.truncate("/d", 0)), libc::EISDIR);
}

#[test]
fn mkdir_rmdir_and_posix_errors() {
    let mut ws = Workspace::new();
    ws.mkdir("/d", 0o700).unwrap();
    assert_eq!(ws.stat("/d").unwrap().mode, 0o040700);
    assert_eq!(errno(ws.mkdir("/d", 0o755)), libc::EEXIST);
    assert_eq!(errno(ws.mkdir("/missing/x", 0o755)), libc::ENOENT);
    ws.write_file("/d/f", b"1").unwrap();
    assert_eq!(errno(ws.rmdir("/d")), libc::ENOTEMPTY);
    assert_eq!(errno(ws.rmdir("/d/f")), libc::ENOTDIR);
    assert_eq!(errno(ws.unlink("/d")), libc::EISDIR);
    assert_eq!(errno(ws.read_file("/d")), libc::EISDIR);
    assert_eq!(errno(ws.mkdir("/d/f/x", 0o755)), libc::ENOTDIR);
    assert_eq!(errno(ws.rmdir("/")), libc::EINVAL);
    assert_eq!(errno(ws.stat(&format!("/{}", "n".repeat(256)))), libc::ENAMETOOLONG);
    ws.unlink("/d/f").unwrap();
    ws.rmdir("/d").unwrap();
    assert_eq!(errno(ws.stat("/d")), libc::ENOENT);
}

#[test]
fn failed_operation_leaves_no_trace() {
    let mut ws = Workspace::new();
    ws.write_file("/a/f", b"x").unwrap();
    let count = |ws: &Workspace| -> i64 {
        ws.connection().query_row("SELECT COUNT(*) FROM fs_inode", [], |r| r.get(0)).unwrap()
    };
    let before = count(&ws);
    // Inject a failure at the last step of write_file, after it has created
    // the parent directories and the inode (a trigger in the schema, not a
    // TEMP one: writes run on the process's writer connection).
    ws.connection()
        .execute_batch("CREATE TRIGGER inject BEFORE INSERT ON fs_data BEGIN SELECT RAISE(FAIL, 'disk'); END;")
        .unwrap();
    assert_eq!(errno(ws.write_file("/new/dir/f", b"data")), libc::EINVAL);
    ws.connection().execute_batch("DROP TRIGGER inject").unwrap();
    assert_eq!(count(&ws), before);
    assert_eq!(errno(ws.stat("/new")), libc::ENOENT);
    assert_eq!(errno(ws.write_file("/a/f/g", b"x")), libc::ENOTDIR);
    assert_eq!(count(&ws), before);
}

#[test]
fn readdir_lists_sorted_entries_with_types() {
    let mut ws = Workspace::new();
    ws.write_file("/d/b", b"").unwrap();
    ws.mkdir("/d/a", 0o755).unwrap();
    ws.symlink("/d/c", "b").unwrap();
    let entries = ws.readdir("/d").unwrap();
    let names: Vec<_> = entries.iter().map(|e| (e.name.as_str(), e.file_type)).collect();
    assert_eq!(names, [("a", FileType::Directory), ("b", FileType::Regular), ("c", FileType::Symlink)]);
    assert_eq!(errno(ws.readdir("/d/b")), libc::ENOTDIR);
}

#[test]
fn hard_links_count_and_share_content() {
    let mut ws = Workspace::new();
    ws.write_file("/a", b"shared").unwrap();
    let linked = ws.link("/a", "/b").unwrap();
    assert_eq!(linked.nlink, 2);
    ws.write("/b", 0, b"SH").unwrap();
    assert_eq!(ws.read_file("/a").unwrap(), b"SHared");
    assert_eq!(ws.stat("/a").unwrap().ino, ws.stat("/b").unwrap().ino);
    ws.unlink("/a").unwrap();
    assert_eq!(ws.stat("/b").unwrap().nlink, 1);
    assert_eq!(ws.read_file("/b").unwrap(), b"SHared");
    ws.unlink("/b").unwrap();
    let left: i64 = ws.connection().query_row("SELECT COUNT(*) FROM fs_data", [], |r| r.get(0)).unwrap();
    assert_eq!(left, 0);
    ws.mkdir("/d", 0o755).unwrap();
    assert_eq!(errno(ws.link("/d", "/e")), libc::EPERM);
    ws.write_file("/x", b"").unwrap();
    assert_eq!(errno(ws.link("/x", "/d")), libc::EEXIST);
}

#[test]
fn symlinks_resolve_and_loop() {
    let mut ws = Workspace::new();
    ws.write_file("/real/file", b"data").unwrap();
    ws.symlink("/abs", "/real").unwrap();
    ws.symlink("/real/rel", "file").unwrap();
    ws.symlink("/real/up", "../real/file").unwrap();
    assert_eq!(ws.read_file("/abs/file").unwrap(), b"data");
    assert_eq!(ws.read_file("/real/rel").unwrap(), b"data");
    assert_eq!(ws.read_file("/abs/up").unwrap(), b"data");
    assert_eq!(ws.readlink("/real/rel").unwrap(), "file");
    assert!(ws.lstat("/real/rel").unwrap().file_type() == FileType::Symlink);
    assert!(ws.stat("/real/rel").unwrap().is_file());
    ws.symlink("/loop1", "/loop2").unwrap();
    ws.symlink("/loop2", "/loop1").unwrap();
    assert_eq!(errno(ws.stat("/loop1")), libc::ELOOP);
    assert_eq!(errno(ws.readlink("/real/file")), libc::EINVAL);
    ws.symlink("/dangling", "/nowhere").unwrap();
    assert_eq!(errno(ws.stat("/dangling")), libc::ENOENT);
    ws.unlink("/dangling").unwrap();
    ws.unlink("/abs").unwrap();
    assert_eq!(ws.read_file("/real/file").unwrap(), b"data");
}

#[test]
fn rename_within_and_across_directories() {
    let mut ws = Workspace::new();
    ws.write_file("/a/x", b"1").unwrap();
    ws.mkdir("/b", 0o755).unwrap();
    let ino = ws.stat("/a/x").unwrap().ino;
    ws.rename("/a/x", "/a/y").unwrap();
    ws.rename("/a/y", "/b/z").unwrap();
    assert_eq!(ws.stat("/b/z").unwrap().ino, ino);
    assert_eq!(errno(ws.stat("/a/x")), libc::ENOENT);
    ws.write_file("/b/w", b"old").unwrap();
    ws.rename("/b/z", "/b/w").unwrap();
    assert_eq!(ws.read_file("/b/w").unwrap(), b"1");
    ws.rename("/a", "/b/a").unwrap();
    assert_eq!(errno(ws.rename("/b", "/b/a/inside")), libc::EINVAL);
    ws.mkdir("/full", 0o755).unwrap();
    ws.write_file("/full/f", b"").unwrap();
    ws.mkdir("/empty", 0o755).unwrap();
    assert_eq!(errno(ws.rename("/empty", "/full")), libc::ENOTEMPTY);
    assert_eq!(errno(ws.rename("/empty", "/b/w")), libc::ENOTDIR);
    assert_eq!(errno(ws.rename("/b/w", "/empty")), libc::EISDIR);
    ws.rename("/full", "/empty").unwrap();
    assert_eq!(ws.read_file("/empty/f").unwrap(), b"");
    ws.link("/empty/f", "/g").unwrap();
    ws.rename("/g", "/empty/f").unwrap();
    assert_eq!(ws.stat("/g").unwrap().nlink, 2);
    assert_eq!(errno(ws.rename("/missing", "/m2")), libc::ENOENT);
}

#[test]
fn special_files_keep_type_and_rdev() {
    let mut ws = Workspace::new();
    let fifo = ws.mknod("/fifo", S_IFIFO | 0o644, 0).unwrap();
    assert_eq!(fifo.file_type(), FileType::Fifo);
    let rdev = (8 << 8) | 1;
    assert_eq!(ws.mknod("/chr", S_IFCHR | 0o600, rdev).unwrap().rdev, rdev);
    assert_eq!(ws.stat("/chr").unwrap().file_type(), FileType::CharDevice);
    assert_eq!(ws.mknod("/blk", S_IFBLK | 0o600, rdev).unwrap().file_type(), FileType::BlockDevice);
    assert_eq!(ws.mknod("/sock", S_IFSOCK | 0o600, 0).unwrap().file_type(), FileType::Socket);
    assert_eq!(errno(ws.mknod("/bad", 0o170000 | 0o600, 0)), libc::EINVAL);
    assert_eq!(errno(ws.read_file("/fifo")), libc::EINVAL);
}

#[test]
fn chmod_chown_and_timestamps() {
    let mut ws = Workspace::new();
    ws.write_file("/f", b"x").unwrap();
    ws.chmod("/f", 0o4711).unwrap();
    ws.chown("/f", 1000, 100).unwrap();
    ws.set_times("/f", 1_000, 2_000).unwrap();
    let stat = ws.stat("/f").unwrap();
    assert_eq!(
        (stat.mode, stat.uid, stat.gid, stat.atime, stat.mtime),
        (0o104711, 1000, 100, Timestamp::from_secs(1_000), Timestamp::from_secs(2_000))
    );
    ws.symlink("/l", "/f").unwrap();
    let link = ws.set_attr_nofollow("/l", &SetAttr { uid: Some(5), ..SetAttr::default() }).unwrap();
    assert_eq!(link.uid, 5);
    assert_eq!(ws.stat("/f").unwrap().uid, 1000);
    // A read after the mtime moves atime forward (relatime).
    ws.read_file("/f").unwrap();
    assert!(ws.stat("/f").unwrap().atime.secs > 2_000);
    ws.set_owner(7, 8);
    let created = ws.create("/owned", 0o600).unwrap();
    assert_eq!((created.uid, created.gid, created.mode), (7, 8, 0o100600));
}

/// Tools like make compare mtimes: a file written after another within the
/// same second must still be newer, and explicit times keep their nanoseconds.
#[test]
fn timestamps_have_nanoseconds_that_survive_reopening() {
    let mut ws = Workspace::new();
    ws.write_file("/source", b"1").unwrap();
    ws.write_file("/target", b"2").unwrap();
    ws.write_file("/source", b"3").unwrap();
    let (source, target) = (ws.stat("/source").unwrap(), ws.stat("/target").unwrap());
    assert!(source.mtime > target.mtime, "{:?} not after {:?}", source.mtime, target.mtime);
    assert!(source.ctime >= source.mtime);
    let exact = Timestamp { secs: 1_700_000_000, nsec: 123_456_789 };
    let before_1970 = Timestamp { secs: -2, nsec: 500_000_000 };
    ws.set_attr("/target", &SetAttr { atime: Some(before_1970), mtime: Some(exact), ..SetAttr::default() }).unwrap();
    ws.mkdir("/dir", 0o755).unwrap();
    let dir_before = ws.stat("/dir").unwrap().mtime;
    ws.write_file("/dir/new", b"").unwrap();
    assert!(ws.stat("/dir").unwrap().mtime > dir_before, "a new entry moves the directory's mtime");
    let mut reopened = agentfs::AgentFs::open(&ws.path).unwrap();
    let target = reopened.stat("/target").unwrap();
    assert_eq!((target.atime, target.mtime), (before_1970, exact));
}

/// Another AgentFS implementation sees whole seconds and may rewrite them;
/// the nanoseconds stored for the old seconds must not attach to the new ones.
#[test]
fn a_time_rewritten_by_another_implementation_reads_as_whole_seconds() {
    let mut ws = Workspace::new();
    ws.write_file("/f", b"x").unwrap();
    let stat = ws.stat("/f").unwrap();
    let other = rusqlite::Connection::open(&ws.path).unwrap();
    other.execute("UPDATE fs_inode SET mtime = 42 WHERE ino = ?", [stat.ino as i64]).unwrap();
    let after = ws.stat("/f").unwrap();
    assert_eq!(after.mtime, Timestamp::from_secs(42));
    assert_eq!(after.ctime, stat.ctime, "untouched times keep their nanoseconds");
    // A damaged row (which the checker reports) still stats, as whole seconds.
    other.execute("UPDATE clawos_inode_nsec SET ctime_nsec = NULL, atime_nsec = -1", []).unwrap();
    let damaged = ws.stat("/f").unwrap();
    assert_eq!((damaged.ctime.nsec, damaged.atime.nsec), (0, 0));
    other.execute("UPDATE clawos_inode_nsec SET ctime_nsec = 0, atime_nsec = 0", []).unwrap();
}

#[test]
fn xattrs_set_get_list_remove() {
    let mut ws = Workspace::new();
    ws.write_file("/f", b"").unwrap();
    ws.set_xattr("/f", "user.b", b"2").unwrap();
    ws.set_xattr("/f", "user.a", b"1").unwrap();
    assert_eq!(ws.get_xattr("/f", "user.a").unwrap(), b"1");
    assert_eq!(ws.list_xattr("/f").unwrap(), ["user.a", "user.b"]);
    ws.remove_xattr("/f", "user.a").unwrap();
    assert_eq!(errno(ws.get_xattr("/f", "user.a")), libc::ENODATA);
    assert_eq!(errno(ws.remove_xattr("/f", "user.a")), libc::ENODATA);
    ws.unlink("/f").unwrap();
    let left: i64 = ws.connection().query_row("SELECT COUNT(*) FROM clawos_xattr", [], |r| r.get(0)).unwrap();
    assert_eq!(left, 0);
}

#[test]
fn a_created_workspace_holds_exactly_what_the_spec_sql_defines() {
    // What specs/agentfs documents, run on an empty database by itself.
    let spec = rusqlite::Connection::open_in_memory().unwrap();
    spec.execute_batch(include_str!("../../../specs/agentfs/schema.sql")).unwrap();
    spec.execute_batch(include_str!("../../../specs/agentfs/audit_triggers.sql")).unwrap();
    let objects = |conn: &rusqlite::Connection, schema: &str| {
        let sql = format!("SELECT type, name, tbl_name, sql FROM {schema} ORDER BY type, name");
        let mut query = conn.prepare(&sql).unwrap();
        let rows = query.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).unwrap();
        rows.collect::<rusqlite::Result<Vec<(String, String, String, Option<String>)>>>().unwrap()
    };
    let ws = Workspace::new();
    // The file stores tables and indexes only (the reference SDK's engine
    // refuses a database that stores triggers); the guards are the
    // connection's TEMP triggers.
    let stored = objects(ws.connection(), "sqlite_schema");
    assert!(stored.iter().all(|(kind, ..)| kind == "table" || kind == "index"), "{stored:?}");
    assert_eq!(stored, objects(&spec, "sqlite_schema"));
    let guards = objects(ws.connection(), "sqlite_temp_schema");
    assert!(guards.iter().any(|(kind, name, ..)| kind == "trigger" && name == "clawos_guard_tool_calls_update"));
    assert_eq!(guards, objects(&spec, "sqlite_temp_schema"));
}

#[test]
fn a_batch_commits_all_its_operations_at_once() {
    let mut ws = Workspace::new();
    ws.batch(|fs| {
        for n in 0..50 {
            fs.write_file(&format!("/batch/f{n}"), format!("file {n}").as_bytes())?;
        }
        // Inside the batch the handle sees its own uncommitted writes.
        assert_eq!(fs.read_file("/batch/f7")?, b"file 7");
        Ok(())
    })
    .unwrap();
    // Another connection sees all fifty files.
    let mut other = agentfs::AgentFs::open(&ws.path).unwrap();
    assert_eq!(other.readdir("/batch").unwrap().len(), 50);
    assert_eq!(other.read_file("/batch/f49").unwrap(), b"file 49");
}

#[test]
fn a_failed_operation_in_a_batch_leaves_nothing_and_the_rest_commits() {
    let mut ws = Workspace::new();
    ws.mkdir("/d", 0o755).unwrap();
    ws.batch(|fs| {
        fs.write_file("/d/kept", b"kept")?;
        // Errors the batch handles and goes on from: each operation's
        // savepoint leaves nothing of it behind.
        assert_eq!(fs.mkdir("/d", 0o755).unwrap_err().errno(), libc::EEXIST);
        fs.mkdir("/d/full", 0o755)?;
        fs.write_file("/d/full/x", b"x")?;
        fs.mkdir("/d/src", 0o755)?;
        assert_eq!(fs.rename("/d/src", "/d/full").unwrap_err().errno(), libc::ENOTEMPTY);
        Ok(())
    })
    .unwrap();
    assert_eq!(ws.read_file("/d/kept").unwrap(), b"kept");
    assert!(ws.exists("/d/src").unwrap());
    assert_eq!(ws.read_file("/d/full/x").unwrap(), b"x");
}

#[test]
fn a_full_disk_in_a_batch_rolls_back_all_of_it_and_later_operations_fail() {
    let mut ws = Workspace::new();
    ws.write_file("/before", b"before").unwrap();
    let pages: u32 = ws.connection().query_row("PRAGMA page_count", [], |row| row.get(0)).unwrap();
    // Room for a few pages: a 1 MiB write runs out half way.
    ws.connection().execute_batch(&format!("PRAGMA max_page_count = {}", pages + 16)).unwrap();
    let result = ws.batch(|fs| {
        fs.write_file("/first", b"first")?;
        assert_eq!(fs.write_file("/huge", &vec![7u8; 1 << 20]).unwrap_err().errno(), libc::ENOSPC);
        // SQLite has rolled the whole batch back: going on must not commit
        // this write on its own.
        assert_eq!(fs.write_file("/after", b"after").unwrap_err().errno(), libc::ENOSPC);
        Ok(())
    });
    assert_eq!(result.unwrap_err().errno(), libc::ENOSPC);
    ws.connection().execute_batch("PRAGMA max_page_count = 4294967294").unwrap();
    for gone in ["/first", "/huge", "/after"] {
        assert!(!ws.exists(gone).unwrap(), "{gone} survived a rolled-back batch");
    }
    assert_eq!(ws.read_file("/before").unwrap(), b"before");
    ws.write_file("/usable", b"again").unwrap();
}

#[test]
fn a_batch_that_returns_an_error_keeps_nothing() {
    let mut ws = Workspace::new();
    ws.write_file("/before", b"before").unwrap();
    let result: agentfs::Result<()> = ws.batch(|fs| {
        fs.write_file("/during", b"during")?;
        fs.unlink("/before")?;
        fs.read_file("/missing").map(drop)
    });
    assert_eq!(result.unwrap_err().errno(), libc::ENOENT);
    assert_eq!(ws.read_file("/before").unwrap(), b"before");
    assert!(!ws.exists("/during").unwrap());
    // The handle is usable again, and a nested batch is refused with EINVAL.
    let nested = ws.batch(|fs| fs.batch(|_| Ok(())));
    assert_eq!(nested.unwrap_err().errno(), libc::EINVAL);
    ws.write_file("/after", b"after").unwrap();
}

#[test]
fn an_operation_failing_half_way_in_an_open_batch_is_undone_alone() {
    let mut ws = Workspace::new();
    ws.begin_batch().unwrap();
    assert_eq!(ws.begin_batch().unwrap_err().errno(), libc::EINVAL, "a second batch on one handle");
    ws.write_file("/kept", b"kept").unwrap();
    // The create writes the inode and the name, then fails writing data.
    ws.connection()
        .execute_batch("CREATE TEMP TRIGGER inject BEFORE INSERT ON fs_data BEGIN SELECT RAISE(FAIL, 'disk'); END;")
        .unwrap();
    assert!(ws.write_file("/half", b"data").is_err());
    ws.connection().execute_batch("DROP TRIGGER temp.inject").unwrap();
    assert!(!ws.exists("/half").unwrap(), "the failed operation left part of itself behind");
    assert!(ws.in_batch());
    ws.commit_batch().unwrap();
    assert!(!ws.in_batch());
    assert_eq!(ws.commit_batch().unwrap_err().errno(), libc::EINVAL, "no batch left to commit");
    assert_eq!(ws.read_file("/kept").unwrap(), b"kept");
}

#[test]
fn sizes_past_the_file_size_limit_are_efbig_at_once() {
    let mut ws = Workspace::new();
    ws.write_file("/f", b"data").unwrap();
    // pjdfstest truncate/12.t: a petabyte. Chunks are dense, so without the
    // limit this would write zeros until the disk is full.
    let started = std::time::Instant::now();
    assert_eq!(errno(ws.truncate("/f", 999_999_999_999_999)), libc::EFBIG);
    assert_eq!(errno(ws.write("/f", agentfs::MAX_FILE_SIZE, b"x")), libc::EFBIG);
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!(ws.read_file("/f").unwrap(), b"data");
    ws.truncate("/f", 3 << 20).unwrap();
    assert_eq!(ws.stat("/f").unwrap().size, 3 << 20);
}

#[test]
fn a_file_cannot_grow_past_its_workspace_limit() {
    let mut ws = Workspace::new();
    assert_eq!(ws.file_size_limit(), agentfs::DEFAULT_FILE_SIZE_LIMIT);
    ws.write_file("/f", b"data").unwrap();
    // The case: one byte written at 2 GiB + 1 would store 2 GiB.
    assert_eq!(errno(ws.write("/f", (2 << 30) + 1, b"x")), libc::EFBIG);
    assert_eq!(errno(ws.truncate("/f", agentfs::DEFAULT_FILE_SIZE_LIMIT + 1)), libc::EFBIG);
    ws.set_file_size_limit(10_000).unwrap();
    assert_eq!(errno(ws.write_file("/g", &[1u8; 10_001])), libc::EFBIG);
    assert_eq!(errno(ws.append("/f", &[1u8; 9_997])), libc::EFBIG);
    assert!(!ws.exists("/g").unwrap(), "a refused write_file leaves nothing");
    assert_eq!(ws.read_file("/f").unwrap(), b"data");
    ws.write("/f", 9_999, b"x").unwrap();
    assert_eq!(errno(ws.set_file_size_limit(agentfs::MAX_FILE_SIZE + 1)), libc::EINVAL);
    // The limit is the workspace's: another handle opened later has it.
    let again = agentfs::AgentFs::open(&ws.path).unwrap();
    assert_eq!(again.file_size_limit(), 10_000);
}

/// specs/agentfs/README.md, "Connection settings": a write returns once
/// it is on disk, and the handles of one file in a process share the
/// flushes (a power cut itself is the update boots' check).
#[test]
fn a_write_returns_flushed_and_handles_of_one_file_share_their_flushes() {
    let mut ws = Workspace::new();
    let other = agentfs::AgentFs::open(&ws.path).unwrap();
    let before = ws.flushes();
    ws.write_file("/f", b"acknowledged").unwrap();
    assert!(ws.flushes() > before, "the write returned unflushed");
    assert_eq!(other.flushes(), ws.flushes(), "two handles of one file, two flush states");
    let flushed = ws.flushes();
    assert_eq!(ws.read_file("/f").unwrap(), b"acknowledged");
    assert_eq!(ws.flushes(), flushed, "a read flushed");
    // Eight writers, each with its own handle: every write kept, never
    // more than a flush each (how they share a slow flush is fsutil's
    // test: on a fast disk a flush may end before the next commit does).
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let path = ws.path.clone();
            std::thread::spawn(move || {
                let mut fs = agentfs::AgentFs::open(&path).unwrap();
                for i in 0..50 {
                    fs.write_file(&format!("/w{w}-{i}"), b"x").unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    assert_eq!(ws.readdir("/").unwrap().len(), 401);
    let flushes = ws.flushes() - flushed;
    assert!((1..=400).contains(&flushes), "{flushes} flushes for 400 writes");
}

#[test]
fn the_database_shrinks_when_its_files_are_deleted() {
    let mut ws = Workspace::new();
    ws.write_file("/keep", b"small").unwrap();
    let file_bytes = |ws: &mut Workspace| {
        ws.sync().unwrap();
        std::fs::metadata(&ws.path).unwrap().len()
    };
    let before = file_bytes(&mut ws);
    ws.write_file("/big", &vec![7u8; 24 << 20]).unwrap();
    assert!(file_bytes(&mut ws) > 24 << 20);
    ws.unlink("/big").unwrap();
    let after = file_bytes(&mut ws);
    assert!(after < before + (1 << 20), "{after} bytes after deleting 24 MiB ({before} before)");
    let wal = std::fs::metadata(format!("{}-wal", ws.path.display())).map(|m| m.len()).unwrap_or(0);
    assert!(wal <= 64 << 20, "the write-ahead log is {wal} bytes");
    assert_eq!(ws.read_file("/keep").unwrap(), b"small");
    // Below the threshold nothing is copied: a small delete leaves its pages free.
    ws.write_file("/medium", &vec![1u8; 1 << 20]).unwrap();
    ws.unlink("/medium").unwrap();
    let free: u64 = ws.connection().query_row("PRAGMA freelist_count", [], |r| r.get(0)).unwrap();
    assert!(free > 0);
}

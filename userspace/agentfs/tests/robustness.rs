//! Robustness across processes: a writer killed at random points, readers
//! running beside a writer, and a full disk. The children are this test
//! binary itself, started on the ignored `child_process` entry point.

mod common;

use std::ffi::CString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentfs::AgentFs;

const ROLE: &str = "AGENTFS_TEST_ROLE";
const DB: &str = "AGENTFS_TEST_DB";
/// The crash writer's first file number; the writer's and readers' number of writes.
const COUNT: &str = "AGENTFS_TEST_COUNT";

/// Content of the `n`th file the crash writer writes: size and bytes vary
/// with `n`, and spans several chunks for some.
fn content(n: u64) -> Vec<u8> {
    let len = (n * 2_654_435_761 % 20_000) as usize;
    (0..len).map(|i| (i as u64 ^ n) as u8).collect()
}

/// A small xorshift generator: the kill points vary from run to run, and a
/// failure prints the seed that reproduces it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn spawn_child(role: &str, db: &Path, count: u64, stdout: Stdio) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_process", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DB, db)
        .env(COUNT, count.to_string())
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child test process")
}

#[test]
#[ignore = "entry point of the child processes the other tests start"]
fn child_process() {
    let db = PathBuf::from(std::env::var_os(DB).expect("AGENTFS_TEST_DB"));
    let count: u64 = std::env::var(COUNT).expect("AGENTFS_TEST_COUNT").parse().unwrap();
    let mut fs = AgentFs::open(&db).unwrap();
    match std::env::var(ROLE).expect("AGENTFS_TEST_ROLE").as_str() {
        // Writes files forever, printing "ack N" once the write of file N
        // returned, i.e. once its transaction committed. Every third step
        // also renames and unlinks, so multi-statement transactions are cut too.
        "crash-writer" => {
            let mut out = std::io::stdout().lock();
            for n in count.. {
                fs.write_file(&format!("/d{}/f{n}", n % 7), &content(n)).unwrap();
                if n % 3 == 0 {
                    fs.write_file("/scratch", &content(n)).unwrap();
                    fs.rename("/scratch", "/scratch-moved").unwrap();
                    fs.unlink("/scratch-moved").unwrap();
                }
                writeln!(out, "ack {n}").unwrap();
                out.flush().unwrap();
            }
        }
        // Writes /n/I and then records I in /latest, one commit each.
        "writer" => {
            for n in 0..count {
                fs.write_file(&format!("/n/{n}"), n.to_string().as_bytes()).unwrap();
                fs.write_file("/latest", n.to_string().as_bytes()).unwrap();
            }
        }
        // Whatever /latest says must already be there in full.
        "reader" => {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let latest = match fs.read_file("/latest") {
                    Ok(bytes) => String::from_utf8(bytes).unwrap(),
                    Err(agentfs::Error::NotFound { .. }) => continue,
                    Err(err) => panic!("reading /latest: {err}"),
                };
                let n: u64 = latest.parse().unwrap();
                assert_eq!(fs.read_file(&format!("/n/{n}")).unwrap(), latest.as_bytes());
                if n + 1 == count {
                    break;
                }
                assert!(Instant::now() < deadline, "writer did not finish");
            }
        }
        role => panic!("unknown role {role}"),
    }
}

#[test]
fn a_killed_writer_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    let mut rng = Rng(seed);
    let mut acked: Vec<u64> = Vec::new();
    let mut next = 0;
    for iteration in 0..200 {
        let mut child = spawn_child("crash-writer", &db, next, Stdio::piped());
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Kill after a random number of acknowledgements, then a random
        // delay into the next write, so the kill lands anywhere in it.
        let wait_for = rng.next() % 6;
        let mut seen = 0;
        while seen < wait_for {
            let line = lines.next().expect("writer died early").unwrap();
            // The test harness prints its own lines around the acks.
            if let Some(n) = line.strip_prefix("ack ") {
                acked.push(n.parse().unwrap());
                seen += 1;
            }
        }
        std::thread::sleep(Duration::from_micros(rng.next() % 3_000));
        child.kill().unwrap();
        child.wait().unwrap();
        // Acks printed before the kill are acknowledged writes too.
        for line in lines {
            if let Some(n) = line.unwrap().strip_prefix("ack ") {
                acked.push(n.parse().unwrap());
            }
        }
        next = acked.last().map_or(next, |n| n + 1).max(next);
        let mut fs = AgentFs::open(&db).unwrap();
        let report = fs.check().unwrap();
        assert!(report.is_clean(), "seed {seed}, iteration {iteration}: {report}");
        for &n in &acked {
            let data = fs.read_file(&format!("/d{}/f{n}", n % 7));
            assert_eq!(data.ok(), Some(content(n)), "seed {seed}: acknowledged write {n} lost or torn");
        }
        // An unacknowledged write may or may not have landed; either way the
        // next writer starts after it so no name is written twice.
        next += 1;
    }
    assert!(acked.len() >= 200, "only {} writes acknowledged: kills came too early to test much", acked.len());
}

#[test]
fn readers_in_other_processes_see_only_whole_commits() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    AgentFs::open(&db).unwrap();
    const WRITES: u64 = 300;
    let writer = spawn_child("writer", &db, WRITES, Stdio::null());
    let readers: Vec<Child> = (0..3).map(|_| spawn_child("reader", &db, WRITES, Stdio::null())).collect();
    for mut child in std::iter::once(writer).chain(readers) {
        let status = child.wait().unwrap();
        assert!(status.success(), "a child process failed: {status}");
    }
    let fs = AgentFs::open(&db).unwrap();
    common::assert_consistent(&fs);
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` bytes, or says why it cannot.
    fn mount(size: u64) -> Result<SmallDisk, String> {
        let dir = tempfile::tempdir().map_err(|err| err.to_string())?;
        let target = CString::new(dir.path().as_os_str().as_bytes()).unwrap();
        let options = CString::new(format!("size={size},mode=0700")).unwrap();
        // SAFETY: every pointer is a NUL-terminated string that outlives the call.
        let rc =
            unsafe { libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, options.as_ptr().cast()) };
        if rc != 0 {
            return Err(format!("cannot mount a tmpfs: {}", std::io::Error::last_os_error()));
        }
        Ok(SmallDisk { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let target = CString::new(self.dir.path().as_os_str().as_bytes()).unwrap();
        // SAFETY: `target` is a NUL-terminated path that outlives the call.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

#[test]
fn a_full_disk_gives_enospc_and_keeps_every_commit() {
    let disk = match SmallDisk::mount(2 << 20) {
        Ok(disk) => disk,
        Err(reason) => {
            clawos_test_require::missing("a_full_disk_gives_enospc_and_keeps_every_commit", &reason);
            return;
        }
    };
    // Space an operator can free once the disk is full.
    let ballast = disk.dir.path().join("ballast");
    std::fs::write(&ballast, vec![0u8; 256 << 10]).unwrap();
    let db = disk.dir.path().join("full.db");
    let mut fs = AgentFs::open(&db).unwrap();
    let mut written = Vec::new();
    let err = loop {
        let n = written.len() as u64;
        match fs.write_file(&format!("/f{n}"), &content(n + 1)) {
            Ok(()) => written.push(n),
            Err(err) => break err,
        }
        assert!(n < 10_000, "a 2 MiB disk never filled up");
    };
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    assert!(written.len() > 10, "the disk filled up before anything was written");
    // The failed write left nothing behind, and everything before it stays
    // readable while the disk is still full.
    common::assert_consistent(&fs);
    for &n in &written {
        assert_eq!(fs.read_file(&format!("/f{n}")).unwrap(), content(n + 1));
    }
    drop(fs);
    // Opening needs room for the write-ahead log, so it waits for free space.
    std::fs::remove_file(&ballast).unwrap();
    let mut fs = AgentFs::open(&db).unwrap();
    common::assert_consistent(&fs);
    for &n in &written {
        assert_eq!(fs.read_file(&format!("/f{n}")).unwrap(), content(n + 1));
    }
    assert!(!fs.exists(&format!("/f{}", written.len())).unwrap());
}

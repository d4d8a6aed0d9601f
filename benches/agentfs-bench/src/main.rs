//! `agentfs-bench [--files N] [--big-mib M]`: the AgentFS workloads of the
//! storage issue, timed in one run against the host filesystem, through
//! the library (one transaction per operation, and batched), and through
//! the FUSE mount: create+write+close of N small files, sequential write
//! and read of an M MiB file, a find-style traversal, and deleting the
//! tree. Prints absolute times and each one's ratio to the host. Every
//! column is run `--rounds` times, interleaved, and the best time of each
//! workload kept, so a burst of load from elsewhere on a shared machine
//! skews one round rather than the ratio. `--cpu N` runs the FUSE column
//! (its workloads and the FUSE server thread) on one CPU: in a virtual
//! machine, waking a thread on another vCPU costs an inter-processor
//! interrupt and a VM exit per FUSE request, which measures the hypervisor
//! rather than the mount. The other columns are never pinned. Must run as root (it mounts FUSE in a temporary
//! directory). `--dir D` puts everything under D (default /var/tmp), so
//! `--dir /dev/shm` compares against tmpfs. `--commit-interval-ms N` sets
//! the mount's group commit (0: one transaction per request).

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentfs::AgentFs;

const SMALL_FILE: [u8; 100] = [b'x'; 100];
const BLOCK: usize = 1 << 20;
const BATCH: usize = 100;

struct Sizes {
    files: usize,
    big_mib: usize,
    rounds: usize,
    cpu: Option<usize>,
    /// The mount's commit policy (`--commit-interval-ms 0`: per request).
    commit: agentfs_fuse::CommitPolicy,
    /// Where the scratch directories go (and so which host filesystem).
    scratch: PathBuf,
}

/// One column of the table: how long each workload took.
#[derive(Default, Clone, Copy)]
struct Timings {
    create: Duration,
    write_big: Duration,
    read_big: Duration,
    traverse: Duration,
    delete: Duration,
}

/// A row of the table: the workload, its time in a column, and how many
/// files or bytes it handles (for its rate).
type Row = (&'static str, fn(&Timings) -> Duration, f64);

impl Timings {
    /// The best of two runs, workload by workload.
    fn best(self, other: Timings) -> Timings {
        Timings {
            create: self.create.min(other.create),
            write_big: self.write_big.min(other.write_big),
            read_big: self.read_big.min(other.read_big),
            traverse: self.traverse.min(other.traverse),
            delete: self.delete.min(other.delete),
        }
    }
}

fn timed(work: impl FnOnce()) -> Duration {
    let started = Instant::now();
    work();
    started.elapsed()
}

/// The workloads through the POSIX file API, on the host or on the mount.
fn posix(root: &Path, sizes: &Sizes) -> Timings {
    let small = root.join("small");
    fs::create_dir(&small).unwrap();
    let big: Vec<u8> = (0..BLOCK).map(|i| (i % 251) as u8).collect();
    let create = timed(|| {
        for n in 0..sizes.files {
            fs::File::create(small.join(format!("f{n}"))).unwrap().write_all(&SMALL_FILE).unwrap();
        }
    });
    let write_big = timed(|| {
        let mut file = fs::File::create(root.join("big")).unwrap();
        for _ in 0..sizes.big_mib {
            file.write_all(&big).unwrap();
        }
        file.sync_all().unwrap();
    });
    let read_big = timed(|| {
        let mut file = fs::File::open(root.join("big")).unwrap();
        let mut buffer = vec![0u8; BLOCK];
        let mut total = 0;
        loop {
            let n = file.read(&mut buffer).unwrap();
            if n == 0 {
                break;
            }
            total += n;
        }
        assert_eq!(total, sizes.big_mib * BLOCK);
    });
    let traverse = timed(|| {
        let mut seen = 0;
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                let meta = fs::symlink_metadata(entry.path()).unwrap();
                if meta.is_dir() {
                    pending.push(entry.path());
                }
                seen += 1;
            }
        }
        assert_eq!(seen, sizes.files + 2);
    });
    let delete = timed(|| fs::remove_dir_all(&small).unwrap());
    Timings { create, write_big, read_big, traverse, delete }
}

/// The same workloads through the library; `batched` groups the small-file
/// creates and deletes, `BATCH` per transaction.
fn library(db: &Path, sizes: &Sizes, batched: bool) -> Timings {
    let mut fs = AgentFs::open(db).unwrap();
    fs.mkdir("/small", 0o755).unwrap();
    let big: Vec<u8> = (0..BLOCK).map(|i| (i % 251) as u8).collect();
    let names: Vec<String> = (0..sizes.files).map(|n| format!("/small/f{n}")).collect();
    let each = |fs: &mut AgentFs, op: &dyn Fn(&mut AgentFs, &str) -> agentfs::Result<()>| {
        if batched {
            for group in names.chunks(BATCH) {
                fs.batch(|fs| group.iter().try_for_each(|name| op(fs, name))).unwrap();
            }
        } else {
            for name in &names {
                op(fs, name).unwrap();
            }
        }
    };
    let create = timed(|| each(&mut fs, &|fs, name| fs.write_file(name, &SMALL_FILE)));
    let write_big = timed(|| {
        fs.create("/big", 0o644).unwrap();
        for block in 0..sizes.big_mib {
            fs.write("/big", (block * BLOCK) as u64, &big).unwrap();
        }
        fs.sync().unwrap();
    });
    let read_big = timed(|| {
        let mut total = 0;
        for block in 0..sizes.big_mib {
            total += fs.read("/big", (block * BLOCK) as u64, BLOCK as u64).unwrap().len();
        }
        assert_eq!(total, sizes.big_mib * BLOCK);
    });
    let traverse = timed(|| {
        let mut seen = 0;
        let mut pending = vec!["/".to_owned()];
        while let Some(dir) = pending.pop() {
            for entry in fs.readdir(&dir).unwrap() {
                let path = if dir == "/" { format!("/{}", entry.name) } else { format!("{dir}/{}", entry.name) };
                if fs.lstat(&path).unwrap().is_dir() {
                    pending.push(path);
                }
                seen += 1;
            }
        }
        assert_eq!(seen, sizes.files + 2);
    });
    let delete = timed(|| {
        each(&mut fs, &|fs, name| fs.unlink(name));
        fs.rmdir("/small").unwrap();
    });
    Timings { create, write_big, read_big, traverse, delete }
}

/// Runs `work` with this thread, and the threads it starts, on `cpu` only
/// (on every CPU it had before when `cpu` is `None`), then restores it.
fn pinned<T>(cpu: Option<usize>, work: impl FnOnce() -> T) -> T {
    let Some(cpu) = cpu else { return work() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: all-zero cpu_set_t values are empty sets; CPU_SET writes
    // inside one; sched_getaffinity/setaffinity access `size` bytes of them.
    let before = unsafe {
        let mut before: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, size, &mut before), 0, "reading the CPU affinity");
        let mut only: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut only);
        assert_eq!(libc::sched_setaffinity(0, size, &only), 0, "pinning to CPU {cpu}");
        before
    };
    let out = work();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::sched_setaffinity(0, size, &before) }, 0, "restoring the CPU affinity");
    out
}

/// Mounts `db` at `mountpoint` on a thread, runs `work`, unmounts.
fn with_mount<T>(db: &Path, mountpoint: &Path, commit: agentfs_fuse::CommitPolicy, work: impl FnOnce() -> T) -> T {
    let before = fs::metadata(mountpoint).unwrap().dev();
    let (db_owned, mount_owned) = (db.to_path_buf(), mountpoint.to_path_buf());
    let options = agentfs_fuse::MountOptions { commit, ..agentfs_fuse::MountOptions::default() };
    let server = std::thread::spawn(move || agentfs_fuse::mount_with(&db_owned, &mount_owned, &options));
    let deadline = Instant::now() + Duration::from_secs(10);
    while fs::metadata(mountpoint).unwrap().dev() == before {
        assert!(Instant::now() < deadline, "the FUSE mount did not appear");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = work();
    let target = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; MNT_DETACH has no other argument.
    assert_eq!(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }, 0, "umount failed");
    server.join().unwrap().unwrap();
    out
}

fn main() {
    let mut sizes = Sizes {
        files: 10_000,
        big_mib: 100,
        rounds: 3,
        cpu: None,
        commit: agentfs_fuse::CommitPolicy::default(),
        scratch: PathBuf::from("/var/tmp"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value_text = args.next();
        let value = value_text.as_deref().and_then(|v| v.parse().ok());
        if arg == "--dir" {
            if let Some(dir) = value_text {
                sizes.scratch = PathBuf::from(dir);
                continue;
            }
        }
        match (arg.as_str(), value) {
            ("--files", Some(n)) => sizes.files = n,
            ("--big-mib", Some(n)) => sizes.big_mib = n,
            ("--rounds", Some(n)) if n > 0 => sizes.rounds = n,
            ("--cpu", Some(n)) => sizes.cpu = Some(n),
            ("--commit-interval-ms", Some(n)) => sizes.commit.interval = Duration::from_millis(n as u64),
            _ => {
                eprintln!("usage: agentfs-bench [--files N] [--big-mib M] [--rounds R] [--cpu N] [--dir D] [--commit-interval-ms N]");
                std::process::exit(2);
            }
        }
    }
    let scratch = tempfile::Builder::new().prefix("agentfs-bench").tempdir_in(&sizes.scratch).unwrap();
    let dir = |name: &str| -> PathBuf {
        let path = scratch.path().join(name);
        fs::create_dir(&path).unwrap();
        path
    };
    let mut best: Option<[Timings; 4]> = None;
    for round in 0..sizes.rounds {
        let host = posix(&dir(&format!("host{round}")), &sizes);
        let lib = library(&dir(&format!("lib{round}")).join("w.db"), &sizes, false);
        let lib_batched = library(&dir(&format!("batched{round}")).join("w.db"), &sizes, true);
        let mountpoint = dir(&format!("mnt{round}"));
        let fuse = pinned(sizes.cpu, || {
            with_mount(&dir(&format!("fuse-db{round}")).join("w.db"), &mountpoint, sizes.commit, || {
                posix(&mountpoint, &sizes)
            })
        });
        let this = [host, lib, lib_batched, fuse];
        best = Some(match best {
            None => this,
            Some(previous) => std::array::from_fn(|column| previous[column].best(this[column])),
        });
    }
    let [host, lib, lib_batched, fuse] = best.expect("at least one round");

    let fs_type = String::from_utf8_lossy(
        &std::process::Command::new("stat").args(["-f", "-c", "%T"]).arg(scratch.path()).output().unwrap().stdout,
    )
    .trim()
    .to_owned();
    println!(
        "agentfs-bench: {} small files of 100 B, a {} MiB file; host filesystem {fs_type}; best of {} rounds; {}; FUSE commits every {} ms",
        sizes.files,
        sizes.big_mib,
        sizes.rounds,
        sizes.cpu.map_or("not pinned".to_owned(), |cpu| format!("FUSE column on CPU {cpu}")),
        sizes.commit.interval.as_millis()
    );
    println!(
        "{:<28} {:>12} {:>12} {:>9} {:>12} {:>9} {:>12} {:>9}",
        "workload", "host", "library", "x host", "lib batched", "x host", "FUSE", "x host"
    );
    let rows: [Row; 5] = [
        ("create+write+close small", |t| t.create, sizes.files as f64),
        ("sequential write big", |t| t.write_big, (sizes.big_mib * BLOCK) as f64),
        ("sequential read big", |t| t.read_big, (sizes.big_mib * BLOCK) as f64),
        ("find-style traversal", |t| t.traverse, sizes.files as f64),
        ("delete the small-file tree", |t| t.delete, sizes.files as f64),
    ];
    for (name, pick, _) in &rows {
        let base = pick(&host).as_secs_f64();
        let cell = |t: &Timings| {
            (format!("{:.1} ms", pick(t).as_secs_f64() * 1e3), format!("{:.2}", pick(t).as_secs_f64() / base))
        };
        let (l, lr) = cell(&lib);
        let (b, br) = cell(&lib_batched);
        let (f, fr) = cell(&fuse);
        println!("{name:<28} {:>12} {l:>12} {lr:>9} {b:>12} {br:>9} {f:>12} {fr:>9}", format!("{:.1} ms", base * 1e3));
    }
    let rate = |t: &Timings, pick: fn(&Timings) -> Duration, units: f64| units / pick(t).as_secs_f64();
    println!(
        "library: {:.0} creates/s per-op, {:.0} batched; big read {:.0} MB/s, write {:.0} MB/s",
        rate(&lib, rows[0].1, rows[0].2),
        rate(&lib_batched, rows[0].1, rows[0].2),
        rate(&lib, rows[2].1, rows[2].2) / 1e6,
        rate(&lib, rows[1].1, rows[1].2) / 1e6,
    );
}

//! Throughput of the library on a real database file: 1 MiB whole-file
//! write and read, and small-file creation (create + write + close), one
//! transaction per file and batched (group commit).

use std::sync::atomic::{AtomicU64, Ordering};

use agentfs::AgentFs;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const MIB: usize = 1 << 20;

fn large_files(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut fs = AgentFs::open(dir.path().join("bench.db")).unwrap();
    let data: Vec<u8> = (0..MIB).map(|i| (i % 251) as u8).collect();
    let mut group = c.benchmark_group("1MiB");
    group.throughput(Throughput::Bytes(MIB as u64));
    group.bench_function("write_file", |b| b.iter(|| fs.write_file("/large", &data).unwrap()));
    group.bench_function("read_file", |b| b.iter(|| fs.read_file("/large").unwrap()));
    group.finish();
}

fn small_files(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut fs = AgentFs::open(dir.path().join("bench.db")).unwrap();
    fs.mkdir("/small", 0o755).unwrap();
    let next = AtomicU64::new(0);
    let mut group = c.benchmark_group("small_file");
    group.throughput(Throughput::Elements(1));
    group.bench_function("create_write_100B", |b| {
        b.iter(|| {
            let n = next.fetch_add(1, Ordering::Relaxed);
            fs.write_file(&format!("/small/f{n}"), &[b'x'; 100]).unwrap();
        })
    });
    // Group commit: 100 creates share one transaction (AgentFs::batch).
    group.throughput(Throughput::Elements(100));
    group.bench_function("create_write_100B_batched_by_100", |b| {
        b.iter(|| {
            fs.batch(|fs| {
                for _ in 0..100 {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    fs.write_file(&format!("/small/f{n}"), &[b'x'; 100])?;
                }
                Ok(())
            })
            .unwrap();
        })
    });
    group.finish();
}

criterion_group!(benches, large_files, small_files);
criterion_main!(benches);

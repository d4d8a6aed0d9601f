//! `agentfs-durable [--dir D]`: acknowledged creates per second (create +
//! write of 100 bytes, each returning once it is on disk), with 1 and with
//! 8 concurrent writers, each its own handle on one database (sharing the
//! process's transaction and flushes: creates per commit and per flush);
//! commit latency p50 and p99; and, measured in the same run in the same
//! directory, the disk's own flush time (fdatasync(2) after a 4 KiB
//! write), which bounds the rest (specs/agentfs/README.md, "Connection
//! settings"). `--dir D` puts the database on D's filesystem (default
//! /var/tmp: a disk, where /tmp may be tmpfs and flush nothing).

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use agentfs::AgentFs;

/// How long each writer count runs.
const RUN: Duration = Duration::from_secs(5);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// fdatasync(2) of a file in `dir` after each 4 KiB write, 500 times.
fn disk_flush(dir: &std::path::Path) -> Vec<Duration> {
    let path = dir.join("flush-probe");
    let file = std::fs::File::create(&path).unwrap();
    let mut times: Vec<Duration> = (0..500u64)
        .map(|i| {
            file.write_all_at(&[b'x'; 4096], (i % 64) * 4096).unwrap();
            let start = Instant::now();
            file.sync_data().unwrap();
            start.elapsed()
        })
        .collect();
    std::fs::remove_file(path).unwrap();
    times.sort();
    times
}

/// `writers` threads, each with its own handle, creating files for RUN;
/// returns (creates, each create's latency, commits, flushes).
fn creates(dir: &std::path::Path, writers: usize) -> (usize, Vec<Duration>, u64, u64) {
    let db = dir.join(format!("bench-{writers}.db"));
    let mut setup = AgentFs::open(&db).unwrap();
    for w in 0..writers {
        setup.mkdir(&format!("/w{w}"), 0o755).unwrap();
    }
    let (commits_before, flushes_before) = (setup.shared_commits(), setup.flushes());
    let start = Arc::new(Barrier::new(writers));
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let (db, start) = (db.clone(), start.clone());
            std::thread::spawn(move || {
                let mut fs = AgentFs::open(&db).unwrap();
                start.wait();
                let (began, mut latencies) = (Instant::now(), Vec::new());
                while began.elapsed() < RUN {
                    let at = Instant::now();
                    fs.write_file(&format!("/w{w}/f{}", latencies.len()), &[b'x'; 100]).unwrap();
                    latencies.push(at.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<Duration> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    latencies.sort();
    let commits = setup.shared_commits() - commits_before;
    let flushes = setup.flushes() - flushes_before;
    (latencies.len(), latencies, commits, flushes)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parent = match args.as_slice() {
        [] => "/var/tmp".to_owned(),
        [flag, dir] if flag == "--dir" => dir.clone(),
        _ => {
            eprintln!("usage: agentfs-durable [--dir D]");
            std::process::exit(2);
        }
    };
    let dir = tempfile::tempdir_in(parent).unwrap();
    let mut out = std::io::stdout().lock();
    let flush = disk_flush(dir.path());
    writeln!(
        out,
        "disk flush (fdatasync after a 4 KiB write, {} tries): p50 {:.3} ms, p99 {:.3} ms",
        flush.len(),
        ms(percentile(&flush, 0.5)),
        ms(percentile(&flush, 0.99))
    )
    .unwrap();
    for writers in [1, 8] {
        let (count, latencies, commits, flushes) = creates(dir.path(), writers);
        writeln!(
            out,
            "acknowledged creates, {writers} writer(s): {:.0}/s; commit latency p50 {:.3} ms, p99 {:.3} ms; {:.1} creates per commit, {:.1} per flush",
            count as f64 / RUN.as_secs_f64(),
            ms(percentile(&latencies, 0.5)),
            ms(percentile(&latencies, 0.99)),
            count as f64 / commits.max(1) as f64,
            count as f64 / flushes.max(1) as f64
        )
        .unwrap();
    }
}

//! `schedule-bench [--due N] [--jobs M] [--files F] [--commits C]`: the
//! numbers of the autonomy issue that do not need a booted box, each printed
//! with what it measures.
//!
//! - Fire-time lateness: N `at` jobs (default 1,000) all due at the same
//!   instant; at that instant one pass does what the scheduler's pass does
//!   for each (the slot decision), then claims them all (the run rows and
//!   the jobs' last slots in one SQLite transaction, `synchronous = FULL`);
//!   a job's lateness is the time from its slot to that commit (the pass
//!   wakes at the slot). The turn that follows (agent-loop) is not part of it.
//! - Scheduler memory: the RSS M jobs (default 10,000 over files of 1,000,
//!   half `cron` in a zone, half `every`) cost once parsed and mirrored into
//!   the database, as the scheduler holds them, and one pass over them.
//! - History: one commit of an agent's directory of F files (default 1,000)
//!   after a turn changed one of them, C times (default 20): p50 and p99.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use clawos_schedule::jobs;
use clawos_schedule::slots::{self, Due};
use clawos_schedule::store::Store;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The `p`th percentile (0-100) of sorted `values`.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// This process's resident memory, bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn lateness(due: usize) {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let mut store = Store::open(&dir.path().join("schedule.db")).expect("the database");
    let slot = Timestamp::now() + SignedDuration::from_secs(2);
    let mut text = String::new();
    for n in 0..due {
        writeln!(text, "[jobs.j{n}]\nat = \"{slot}\"\nprompt = \"p\"").expect("a string");
    }
    let parsed = jobs::parse(&text, &TimeZone::UTC).expect("the jobs");
    let shown: Vec<(String, String)> = parsed.iter().map(|j| (j.name.clone(), j.schedule.to_string())).collect();
    store.sync("bench", &text, &shown, Timestamp::now()).expect("sync");
    let wait = slot.duration_since(Timestamp::now());
    std::thread::sleep(Duration::try_from(wait).unwrap_or_default());
    // The daemon's pass: each job's decision, then every due slot claimed in
    // one transaction.
    let now = Timestamp::now();
    let mut firing = Vec::with_capacity(due);
    for job in &parsed {
        let row = store.job("bench", &job.name).expect("a row").expect("the job");
        let Due::Fire { slot: fired, .. } = slots::decide(job, row.first_seen, row.last_slot, now) else {
            panic!("job {} is not due at {now}", job.name)
        };
        firing.push(("bench", job.name.as_str(), fired));
    }
    let claimed = store.claim_all(&firing, now).expect("the claims");
    assert!(claimed.iter().all(Option::is_some), "every slot claimed once");
    let claimed_at = Duration::try_from(Timestamp::now().duration_since(slot)).unwrap_or_default();
    let mut late = vec![claimed_at; due];
    late.sort();
    println!(
        "fire-time lateness, {due} jobs due at one instant (decisions, then one claim transaction, synchronous = FULL): p50 {:.1} ms, p99 {:.1} ms, last {:.1} ms",
        percentile(&late, 50).as_secs_f64() * 1e3,
        percentile(&late, 99).as_secs_f64() * 1e3,
        late.last().copied().unwrap_or_default().as_secs_f64() * 1e3
    );
}

fn memory(count: usize) {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let mut store = Store::open(&dir.path().join("schedule.db")).expect("the database");
    let before = rss();
    let (mut parse_time, mut bytes, mut held) = (Duration::ZERO, 0, Vec::new());
    // A file holds at most jobs::MAX_JOBS: the jobs are spread over agents.
    for (agent, first) in (0..count).step_by(jobs::MAX_JOBS).enumerate() {
        let mut text = String::new();
        for n in first..(first + jobs::MAX_JOBS).min(count) {
            if n % 2 == 0 {
                writeln!(
                    text,
                    "[jobs.c{n}]\ncron = \"{} 9 * * mon-fri\"\ntz = \"Europe/London\"\nprompt = \"Report {n}.\"",
                    n % 60
                )
            } else {
                writeln!(text, "[jobs.e{n}]\nevery = \"{}m\"\nprompt = \"Poll {n}.\"", 1 + n % 90)
            }
            .expect("a string");
        }
        let started = Instant::now();
        let parsed = jobs::parse(&text, &TimeZone::UTC).expect("the jobs");
        parse_time += started.elapsed();
        bytes += text.len();
        let shown: Vec<(String, String)> = parsed.iter().map(|j| (j.name.clone(), j.schedule.to_string())).collect();
        let agent = format!("agent-{agent}");
        store.sync(&agent, &text, &shown, Timestamp::now()).expect("sync");
        held.push((agent, parsed));
    }
    let now = Timestamp::now();
    let started = Instant::now();
    let mut waiting = 0;
    for (agent, parsed) in &held {
        for job in parsed {
            let row = store.job(agent, &job.name).expect("a row").expect("the job");
            waiting +=
                usize::from(matches!(slots::decide(job, row.first_seen, row.last_slot, now), Due::Wait(Some(_))));
        }
    }
    let pass_time = started.elapsed();
    println!(
        "scheduler memory, {count} jobs over {} agents parsed and mirrored: RSS +{:.1} MiB (files {:.1} KiB, parsed in {} ms); one pass over them (each job's row + decision) {} ms, {waiting} waiting",
        held.len(),
        (rss().saturating_sub(before)) as f64 / (1 << 20) as f64,
        bytes as f64 / 1024.0,
        parse_time.as_millis(),
        pass_time.as_millis()
    );
}

fn history(files: usize, commits: usize) {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let dir = dir.path();
    for n in 0..files {
        let path = dir.join(format!("notes/{:02}/n{n}.md", n % 50));
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, format!("# Note {n}\n\nSome text of a note, a few lines long.\n")).expect("write");
    }
    let started = Instant::now();
    clawfs::history::commit(dir, "bench", "all files").expect("the first commit").expect("a commit");
    let first = started.elapsed();
    let mut times = Vec::with_capacity(commits);
    for round in 0..commits {
        std::fs::write(dir.join(format!("notes/00/n{}.md", round * 50 % files)), format!("changed {round}"))
            .expect("write");
        let started = Instant::now();
        clawfs::history::commit(dir, "bench", "one change").expect("a commit").expect("changed");
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "history commit, {files} files with one changed: p50 {:.1} ms, p99 {:.1} ms ({commits} commits; the first commit of all of them {} ms)",
        percentile(&times, 50).as_secs_f64() * 1e3,
        percentile(&times, 99).as_secs_f64() * 1e3,
        first.as_millis()
    );
}

fn main() {
    if std::env::args().any(|a| a == "--help") {
        println!("schedule-bench [--due N] [--jobs M] [--files F] [--commits C]: see the source's header");
        return;
    }
    lateness(arg("--due", 1000));
    memory(arg("--jobs", 10_000));
    history(arg("--files", 1000), arg("--commits", 20));
}

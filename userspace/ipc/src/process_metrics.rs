//! Real heartbeat metrics of the current process, read from `/proc/self`.

use std::time::{Duration, Instant};

use nix::unistd::{sysconf, SysconfVar};

/// One reading of the process's resource use.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    /// Time since the sampler was created (the component's start).
    pub uptime: Duration,
    /// Resident set size (VmRSS), bytes.
    pub rss_bytes: u64,
    /// CPU time used since the previous sample, as a share of all CPUs (0-100).
    pub cpu_percent: f64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// OS threads.
    pub threads: u64,
}

/// A `/proc` file that could not be read or understood.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {reason}")]
pub struct ProcError {
    /// The file.
    pub path: &'static str,
    /// What went wrong.
    pub reason: String,
}

/// Samples `/proc/self`; keeps the previous CPU reading to compute a rate.
#[derive(Debug)]
pub struct ProcessSampler {
    started: Instant,
    previous_cpu_ticks: u64,
    previous_at: Instant,
    ticks_per_second: f64,
    cpus: f64,
}

impl ProcessSampler {
    /// Starts measuring now.
    pub fn new() -> Result<Self, ProcError> {
        let now = Instant::now();
        let ticks_per_second = sysconf(SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|&ticks| ticks > 0)
            .ok_or_else(|| ProcError { path: "sysconf(CLK_TCK)", reason: "unavailable".into() })?;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(ProcessSampler {
            started: now,
            previous_cpu_ticks: read_stat()?.cpu_ticks,
            previous_at: now,
            ticks_per_second: ticks_per_second as f64,
            cpus: cpus as f64,
        })
    }

    /// Reads the current numbers.
    pub fn sample(&mut self) -> Result<ProcessSample, ProcError> {
        let now = Instant::now();
        let stat = read_stat()?;
        let wall = now.duration_since(self.previous_at).as_secs_f64();
        let cpu_seconds = stat.cpu_ticks.saturating_sub(self.previous_cpu_ticks) as f64 / self.ticks_per_second;
        let cpu_percent = if wall > 0.0 { (cpu_seconds / wall / self.cpus * 100.0).clamp(0.0, 100.0) } else { 0.0 };
        self.previous_cpu_ticks = stat.cpu_ticks;
        self.previous_at = now;
        Ok(ProcessSample {
            uptime: now.duration_since(self.started),
            rss_bytes: read_rss_bytes()?,
            cpu_percent,
            open_fds: count_open_fds()?,
            threads: stat.threads,
        })
    }
}

struct Stat {
    cpu_ticks: u64,
    threads: u64,
}

fn read_stat() -> Result<Stat, ProcError> {
    const PATH: &str = "/proc/self/stat";
    let error = |reason: String| ProcError { path: PATH, reason };
    let text = std::fs::read_to_string(PATH).map_err(|e| error(e.to_string()))?;
    // The command name (field 2) may contain spaces and parentheses; the
    // numeric fields start after its last ')'. Field 3 is at index 0 here.
    let after_name = text.rsplit_once(')').ok_or_else(|| error("no ')' after comm".into()))?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |number: usize| -> Result<u64, ProcError> {
        fields
            .get(number - 3)
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| error(format!("field {number} missing or not a number")))
    };
    // utime (14) + stime (15), num_threads (20).
    Ok(Stat { cpu_ticks: field(14)? + field(15)?, threads: field(20)? })
}

fn read_rss_bytes() -> Result<u64, ProcError> {
    const PATH: &str = "/proc/self/status";
    let error = |reason: String| ProcError { path: PATH, reason };
    let text = std::fs::read_to_string(PATH).map_err(|e| error(e.to_string()))?;
    let kib: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| error("no VmRSS line".into()))?;
    Ok(kib * 1024)
}

fn count_open_fds() -> Result<u64, ProcError> {
    const PATH: &str = "/proc/self/fd";
    let entries = std::fs::read_dir(PATH).map_err(|e| ProcError { path: PATH, reason: e.to_string() })?;
    // The directory handle itself shows up as one entry; don't count it.
    Ok((entries.count() as u64).saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_real_and_move() {
        let mut sampler = ProcessSampler::new().unwrap();
        let held: Vec<std::fs::File> = (0..5).map(|_| std::fs::File::open("/proc/self/stat").unwrap()).collect();
        let first = sampler.sample().unwrap();
        // Burn CPU so the next sample sees some.
        let spin_until = Instant::now() + Duration::from_millis(50);
        let mut counter = 0u64;
        while Instant::now() < spin_until {
            counter = std::hint::black_box(counter.wrapping_add(1));
        }
        drop(held);
        let second = sampler.sample().unwrap();
        assert!(first.rss_bytes > 1024 * 1024, "rss {}", first.rss_bytes);
        assert!(first.open_fds >= second.open_fds + 5, "{} vs {}", first.open_fds, second.open_fds);
        assert!(first.threads >= 1);
        assert!(second.cpu_percent > 0.0 && second.cpu_percent <= 100.0, "{}", second.cpu_percent);
        assert!(second.uptime > first.uptime);
    }
}

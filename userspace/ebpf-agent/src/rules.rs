//! Anomaly rules (`/etc/clawos/ebpf-rules.toml`) and their evaluation over
//! the kernel's events: forbidden paths, first-seen binaries, and rates over
//! sliding windows.
use std::{
    collections::{BTreeMap, HashSet, VecDeque},
    path::Path,
    time::Duration,
};

use clawos_ebpf_common::{Decision, EventKind};
use clawos_ebpf_monitor::{event::kind_name, Event};
use serde::Deserialize;

/// Where the image installs the rules.
pub const DEFAULT_RULES: &str = "/etc/clawos/ebpf-rules.toml";

/// The rule file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Opening or executing a path under one of these prefixes is an anomaly.
    #[serde(default)]
    pub forbidden_paths: Vec<String>,
    /// Report the first exec of each binary path per cgroup. Default false.
    #[serde(default)]
    pub first_seen_binaries: bool,
    /// Rate thresholds.
    #[serde(default, rename = "rate")]
    pub rates: Vec<RateRule>,
}

/// More than `threshold` of `metric` within `window_seconds` in one cgroup.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateRule {
    /// Rule name, reported in `threshold_exceeded`.
    pub name: String,
    /// `syscalls` or an event kind (`exec`, `file_open`, `connect`, ...).
    pub metric: String,
    pub threshold: u64,
    pub window_seconds: u64,
}

/// What a rule found, published as an IPC event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// `anomaly_detected`: `rule` names the rule, `detail` the path.
    Anomaly { rule: &'static str, cgroup_id: u64, pid: u32, detail: String },
    /// `threshold_exceeded`.
    Threshold { rule: String, cgroup_id: u64, count: u64, threshold: u64, window_seconds: u64 },
}

impl Rules {
    /// Reads and validates the rules at `path`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|error| format!("reading {}: {error}", path.display()))?;
        Self::parse(&text)
    }

    /// Parses and validates rule text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let rules: Self = toml::from_str(text).map_err(|error| format!("parsing rules: {error}"))?;
        for rate in &rules.rates {
            let known = rate.metric == "syscalls"
                || (1..=9).filter_map(EventKind::from_u16).any(|kind| kind_name(kind) == rate.metric);
            if !known || rate.window_seconds == 0 || rate.threshold == 0 {
                return Err(format!("rate rule {:?}: unknown metric or zero window/threshold", rate.name));
            }
        }
        Ok(rules)
    }
}

/// Rule state: binaries seen and recent counts per (rule, cgroup).
pub struct Evaluator {
    rules: Rules,
    seen_binaries: HashSet<(u64, String)>,
    /// Per rule index and cgroup.
    windows: BTreeMap<(usize, u64), Window>,
}

/// The (time, count) samples inside one rule's window for one cgroup, and
/// whether their sum was above the threshold at the last sample.
#[derive(Default)]
struct Window {
    samples: VecDeque<(Duration, u64)>,
    above: bool,
}

impl Evaluator {
    pub fn new(rules: Rules) -> Self {
        Self { rules, seen_binaries: HashSet::new(), windows: BTreeMap::new() }
    }

    /// Findings for one kernel event observed at monotonic time `now`.
    pub fn observe(&mut self, event: &Event, now: Duration) -> Vec<Finding> {
        let header = event.header();
        let mut findings = Vec::new();
        if let Some(path) = event.path() {
            let touches = matches!(event.kind(), EventKind::FileOpen | EventKind::Exec | EventKind::ExecCheck);
            if touches && self.rules.forbidden_paths.iter().any(|prefix| path.starts_with(prefix.as_str())) {
                findings.push(Finding::Anomaly {
                    rule: "forbidden_path",
                    cgroup_id: header.cgroup_id,
                    pid: header.pid,
                    detail: path.clone(),
                });
            }
            if self.rules.first_seen_binaries
                && event.kind() == EventKind::Exec
                && self.seen_binaries.insert((header.cgroup_id, path.clone()))
            {
                findings.push(Finding::Anomaly {
                    rule: "first_seen_binary",
                    cgroup_id: header.cgroup_id,
                    pid: header.pid,
                    detail: path,
                });
            }
        }
        if event.decision() != Decision::Allowed {
            findings.push(Finding::Anomaly {
                rule: "policy_violation",
                cgroup_id: header.cgroup_id,
                pid: header.pid,
                detail: format!("{} {}", kind_name(event.kind()), event.path().unwrap_or_default()),
            });
        }
        findings.extend(self.count(kind_name(event.kind()), header.cgroup_id, 1, now));
        findings
    }

    /// Adds `count` occurrences of `metric` in `cgroup_id` at `now`; returns
    /// a finding for each rate rule whose window sum crosses its threshold
    /// (reported once per crossing, again after it fell back below).
    pub fn count(&mut self, metric: &str, cgroup_id: u64, count: u64, now: Duration) -> Vec<Finding> {
        let mut findings = Vec::new();
        for (index, rule) in self.rules.rates.iter().enumerate().filter(|(_, rule)| rule.metric == metric) {
            let window = self.windows.entry((index, cgroup_id)).or_default();
            let span = Duration::from_secs(rule.window_seconds);
            while window.samples.front().is_some_and(|&(at, _)| now.saturating_sub(at) >= span) {
                window.samples.pop_front();
            }
            window.samples.push_back((now, count));
            let total: u64 = window.samples.iter().map(|(_, count)| count).sum();
            let above = total > rule.threshold;
            if above && !window.above {
                findings.push(Finding::Threshold {
                    rule: rule.name.clone(),
                    cgroup_id,
                    count: total,
                    threshold: rule.threshold,
                    window_seconds: rule.window_seconds,
                });
            }
            window.above = above;
        }
        findings
    }
}

#[cfg(test)]
mod tests {
    use clawos_ebpf_common::*;

    use super::*;

    const RULES: &str = r#"
        forbidden_paths = ["/etc/shadow", "/root/"]
        first_seen_binaries = true
        [[rate]]
        name = "exec-storm"
        metric = "exec"
        threshold = 2
        window_seconds = 10
    "#;

    fn exec(path: &[u8], cgroup_id: u64) -> Event {
        let mut filename = [0u8; PATH_LEN];
        filename[..path.len()].copy_from_slice(path);
        let header = EventHeader {
            version: EVENT_FORMAT_VERSION,
            kind: EventKind::Exec as u16,
            severity: 0,
            reserved: 0,
            timestamp_ns: 0,
            pid: 7,
            tid: 7,
            uid: 0,
            gid: 0,
            cgroup_id,
            comm: [0; COMM_LEN],
        };
        Event::Exec(ExecEvent { header, filename })
    }

    fn rules(found: &[Finding]) -> Vec<String> {
        found
            .iter()
            .map(|finding| match finding {
                Finding::Anomaly { rule, .. } => (*rule).to_owned(),
                Finding::Threshold { rule, .. } => rule.clone(),
            })
            .collect()
    }

    #[test]
    fn flags_forbidden_and_first_seen_paths_once() {
        let mut evaluator = Evaluator::new(Rules::parse(RULES).unwrap());
        let at = Duration::from_secs(100);
        assert_eq!(rules(&evaluator.observe(&exec(b"/usr/bin/ls", 1), at)), ["first_seen_binary"]);
        assert!(evaluator.observe(&exec(b"/usr/bin/ls", 1), at + Duration::from_secs(20)).is_empty());
        assert_eq!(rules(&evaluator.observe(&exec(b"/usr/bin/ls", 2), at)), ["first_seen_binary"], "per cgroup");
        let found = evaluator.observe(&exec(b"/root/x", 1), at + Duration::from_secs(40));
        assert_eq!(rules(&found), ["forbidden_path", "first_seen_binary"]);
    }

    #[test]
    fn rate_fires_once_per_crossing_of_the_sliding_window() {
        let mut evaluator = Evaluator::new(Rules::parse(RULES).unwrap());
        let second = |n| Duration::from_secs(n);
        assert!(evaluator.count("exec", 1, 1, second(0)).is_empty());
        assert!(evaluator.count("exec", 1, 1, second(1)).is_empty());
        let crossed = evaluator.count("exec", 1, 1, second(2));
        assert_eq!(
            crossed,
            [Finding::Threshold {
                rule: "exec-storm".into(),
                cgroup_id: 1,
                count: 3,
                threshold: 2,
                window_seconds: 10
            }]
        );
        assert!(evaluator.count("exec", 1, 1, second(3)).is_empty(), "still above: no repeat");
        assert!(evaluator.count("exec", 2, 1, second(3)).is_empty(), "other cgroups count apart");
        // By 30 s every sample left the window; a new burst crosses again.
        assert!(evaluator.count("exec", 1, 1, second(30)).is_empty());
        assert!(evaluator.count("exec", 1, 1, second(30)).is_empty());
        assert_eq!(evaluator.count("exec", 1, 1, second(31)).len(), 1);
    }

    #[test]
    fn rejects_unknown_metrics_and_empty_windows() {
        assert!(Rules::parse("[[rate]]\nname='x'\nmetric='nope'\nthreshold=1\nwindow_seconds=1").is_err());
        assert!(Rules::parse("[[rate]]\nname='x'\nmetric='syscalls'\nthreshold=1\nwindow_seconds=0").is_err());
        assert!(Rules::parse("forbidden = []").is_err());
    }
}

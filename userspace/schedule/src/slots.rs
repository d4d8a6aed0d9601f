//! When a job is due (`specs/scheduler/README.md`, "Times" and "Missed
//! runs"): pure functions of the job, when it was first seen, its last slot
//! and the time now, so every rule is tested on a faked clock.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::jobs::{Job, Missed, Schedule};

/// How many slots one decision walks at most; a job further behind than
/// this (a one-minute cron after months off) is caught up over several
/// passes.
const MAX_WALK: u32 = 10_000;

/// The first slot of `schedule` strictly after `after`, for a job first
/// seen at `first_seen`; `None` when it has no more.
pub fn next_after(schedule: &Schedule, first_seen: Timestamp, after: Timestamp) -> Option<Timestamp> {
    match schedule {
        Schedule::Cron { cron, zone, .. } => {
            cron.find_next_occurrence(&after.to_zoned(zone.clone()), false).ok().map(|z| z.timestamp())
        }
        Schedule::At(at) => (*at > after).then_some(*at),
        Schedule::Delay(delay) => plus(first_seen, *delay).filter(|due| *due > after),
        Schedule::Every(every) => {
            let every_ms = i64::try_from(every.as_millis()).ok()?.max(1);
            let since = after.as_millisecond() - first_seen.as_millisecond();
            let k = if since < 0 { 1 } else { since / every_ms + 1 };
            Timestamp::from_millisecond(first_seen.as_millisecond().checked_add(k.checked_mul(every_ms)?)?).ok()
        }
    }
}

fn plus(at: Timestamp, duration: Duration) -> Option<Timestamp> {
    at.checked_add(SignedDuration::try_from(duration).ok()?).ok()
}

/// What a pass does with a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// Nothing yet; its next slot, if it has one.
    Wait(Option<Timestamp>),
    /// Run it for `slot`, the latest slot that passed; `earlier` slots
    /// before it passed unrun and are folded into this run.
    Fire {
        /// The slot run.
        slot: Timestamp,
        /// Slots before it that passed unrun.
        earlier: u32,
        /// Reached later than the job's grace (a `once` catch-up).
        late: bool,
    },
    /// Slots passed beyond their grace and the job skips them: record
    /// `count` of them, the latest `latest`.
    Missed {
        /// The latest missed slot.
        latest: Timestamp,
        /// How many.
        count: u32,
    },
}

/// What to do with `job` now: `last_slot` is the last slot it fired or
/// missed (none yet: `None`).
pub fn decide(job: &Job, first_seen: Timestamp, last_slot: Option<Timestamp>, now: Timestamp) -> Due {
    // An `at` job counts from the beginning of time, so one written for a
    // time already past is a missed run (its policy decides), not nothing.
    let start = match (&job.schedule, last_slot) {
        (_, Some(last)) => last,
        (Schedule::At(_), None) => Timestamp::MIN,
        (_, None) => first_seen,
    };
    let mut latest = None;
    let mut count = 0u32;
    let mut cursor = start;
    while count < MAX_WALK {
        match next_after(&job.schedule, first_seen, cursor) {
            Some(slot) if slot <= now => {
                latest = Some(slot);
                count += 1;
                cursor = slot;
            }
            next => {
                if latest.is_none() {
                    return Due::Wait(next);
                }
                break;
            }
        }
    }
    let latest = latest.expect("the walk found a slot");
    let late = now.duration_since(latest) > SignedDuration::try_from(job.grace).unwrap_or(SignedDuration::MAX);
    match (late, job.missed) {
        (false, _) | (true, Missed::Once) => Due::Fire { slot: latest, earlier: count - 1, late },
        (true, Missed::Skip) => Due::Missed { latest, count },
    }
}

#[cfg(test)]
mod tests {
    use jiff::tz::TimeZone;

    use super::*;
    use crate::jobs;

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn cron_job(expr: &str, zone: &str) -> Job {
        Job {
            name: "j".into(),
            schedule: Schedule::Cron {
                expr: expr.into(),
                cron: Box::new(jobs::cron(expr).unwrap()),
                zone: TimeZone::get(zone).unwrap(),
            },
            prompt: "p".into(),
            session: None,
            missed: Missed::Skip,
            grace: jobs::DEFAULT_GRACE,
            notify: jobs::Notify::OnFailure,
            active_hours: None,
        }
    }

    /// The slots of `job` after `from`, `n` of them, as UTC strings.
    fn slots(job: &Job, from: &str, n: usize) -> Vec<String> {
        let mut at = ts(from);
        (0..n)
            .map(|_| {
                at = next_after(&job.schedule, ts(from), at).unwrap();
                at.to_string()
            })
            .collect()
    }

    #[test]
    fn a_fixed_time_cron_job_in_a_spring_gap_runs_once_right_after_it() {
        // America/New_York skips 02:00-03:00 on 2025-03-09.
        let job = cron_job("30 2 * * *", "America/New_York");
        assert_eq!(
            slots(&job, "2025-03-08T12:00:00Z", 3),
            ["2025-03-09T07:00:00Z", "2025-03-10T06:30:00Z", "2025-03-11T06:30:00Z"],
            "03:00 EDT on the day of the gap, then 02:30 EDT"
        );
    }

    #[test]
    fn a_fixed_time_cron_job_in_a_fall_fold_runs_once() {
        // 01:30 happens twice in America/New_York on 2025-11-02.
        let job = cron_job("30 1 * * *", "America/New_York");
        assert_eq!(
            slots(&job, "2025-11-01T12:00:00Z", 2),
            ["2025-11-02T05:30:00Z", "2025-11-03T06:30:00Z"],
            "01:30 EDT only, then 01:30 EST the next day"
        );
    }

    #[test]
    fn an_interval_cron_job_runs_in_both_passes_of_a_fold_and_not_in_a_gap() {
        let job = cron_job("0 * * * *", "Europe/London");
        // Clocks go back 02:00 BST -> 01:00 GMT on 2025-10-26: 01:00 twice.
        assert_eq!(
            slots(&job, "2025-10-25T23:30:00Z", 3),
            ["2025-10-26T00:00:00Z", "2025-10-26T01:00:00Z", "2025-10-26T02:00:00Z"],
            "01:00 BST, 01:00 GMT, 02:00 GMT"
        );
        // Clocks go forward 01:00 GMT -> 02:00 BST on 2025-03-30.
        assert_eq!(slots(&job, "2025-03-30T00:30:00Z", 2), ["2025-03-30T01:00:00Z", "2025-03-30T02:00:00Z"]);
        // Midnight on the day of the change exists once.
        let midnight = cron_job("0 0 * * *", "Europe/London");
        assert_eq!(slots(&midnight, "2025-03-29T12:00:00Z", 2), ["2025-03-30T00:00:00Z", "2025-03-30T23:00:00Z"]);
    }

    #[test]
    fn every_counts_real_time_from_first_seen() {
        let job = Job { schedule: Schedule::Every(Duration::from_secs(900)), ..cron_job("* * * * *", "UTC") };
        let first = ts("2025-03-09T06:50:00Z");
        assert_eq!(next_after(&job.schedule, first, first), Some(ts("2025-03-09T07:05:00Z")));
        assert_eq!(next_after(&job.schedule, first, ts("2025-03-09T07:05:00Z")), Some(ts("2025-03-09T07:20:00Z")));
        assert_eq!(next_after(&job.schedule, first, ts("2025-03-09T07:06:00Z")), Some(ts("2025-03-09T07:20:00Z")));
    }

    #[test]
    fn on_time_slots_fire_and_late_ones_follow_the_missed_policy() {
        let first = ts("2026-01-01T00:00:00Z");
        let hourly = Job { schedule: Schedule::Every(Duration::from_secs(3600)), ..cron_job("* * * * *", "UTC") };
        assert_eq!(
            decide(&hourly, first, None, ts("2026-01-01T00:59:00Z")),
            Due::Wait(Some(ts("2026-01-01T01:00:00Z")))
        );
        assert_eq!(
            decide(&hourly, first, None, ts("2026-01-01T01:04:00Z")),
            Due::Fire { slot: ts("2026-01-01T01:00:00Z"), earlier: 0, late: false }
        );
        // The box was off from 01:30 to 05:10: 02:00..05:00 passed.
        let last = Some(ts("2026-01-01T01:00:00Z"));
        let back = ts("2026-01-01T05:10:00Z");
        assert_eq!(decide(&hourly, first, last, back), Due::Missed { latest: ts("2026-01-01T05:00:00Z"), count: 4 });
        let once = Job { missed: Missed::Once, ..hourly.clone() };
        assert_eq!(
            decide(&once, first, last, back),
            Due::Fire { slot: ts("2026-01-01T05:00:00Z"), earlier: 3, late: true }
        );
        // Within the grace, the latest slot fires and the others fold in.
        let back = ts("2026-01-01T05:03:00Z");
        assert_eq!(
            decide(&hourly, first, last, back),
            Due::Fire { slot: ts("2026-01-01T05:00:00Z"), earlier: 3, late: false }
        );
    }

    #[test]
    fn one_shot_jobs_fire_once_even_when_their_time_passed_while_the_box_was_off() {
        let base = cron_job("* * * * *", "UTC");
        let at = Job { schedule: Schedule::At(ts("2026-01-01T09:00:00Z")), missed: Missed::Once, ..base.clone() };
        let seen = ts("2026-01-01T10:00:00Z");
        assert_eq!(
            decide(&at, seen, None, seen),
            Due::Fire { slot: ts("2026-01-01T09:00:00Z"), earlier: 0, late: true }
        );
        assert_eq!(decide(&at, seen, Some(ts("2026-01-01T09:00:00Z")), seen), Due::Wait(None));
        let delay = Job { schedule: Schedule::Delay(Duration::from_secs(5)), missed: Missed::Once, ..base };
        assert_eq!(decide(&delay, seen, None, seen), Due::Wait(Some(ts("2026-01-01T10:00:05Z"))));
        let due = ts("2026-01-01T10:00:05Z");
        assert_eq!(decide(&delay, seen, None, due), Due::Fire { slot: due, earlier: 0, late: false });
        assert_eq!(decide(&delay, seen, Some(due), ts("2026-01-02T00:00:00Z")), Due::Wait(None));
    }

    #[test]
    fn a_clock_that_jumps_back_only_moves_the_next_fire() {
        let job = cron_job("0 9 * * *", "UTC");
        let first = ts("2026-01-01T00:00:00Z");
        let last = Some(ts("2026-01-05T09:00:00Z"));
        // The clock went back two days: nothing fires twice.
        assert_eq!(decide(&job, first, last, ts("2026-01-03T12:00:00Z")), Due::Wait(Some(ts("2026-01-06T09:00:00Z"))));
    }
}

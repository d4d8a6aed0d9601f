//! The scheduler's database (`/var/lib/clawos/scheduler/schedule.db`): the
//! jobs as last read from their files, each job's last slot, and every run
//! (`specs/scheduler/README.md`, "Exactly one fire per slot").

use std::path::Path;

use jiff::Timestamp;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use sha2::{Digest, Sha256};

/// A database error.
pub type Error = rusqlite::Error;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    agent TEXT NOT NULL,
    name TEXT NOT NULL,
    schedule TEXT NOT NULL,
    first_seen_ms INTEGER NOT NULL,
    last_slot_ms INTEGER,
    session_id TEXT,
    paused INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (agent, name)
) STRICT;
CREATE TABLE IF NOT EXISTS runs (
    fire_id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    job TEXT NOT NULL,
    slot_ms INTEGER NOT NULL,
    manual INTEGER NOT NULL,
    started_ms INTEGER NOT NULL,
    ended_ms INTEGER,
    status TEXT NOT NULL,
    turn_id TEXT,
    session_id TEXT,
    message TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS runs_by_job ON runs (agent, job, started_ms);
CREATE TABLE IF NOT EXISTS notifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent TEXT NOT NULL,
    source TEXT NOT NULL,
    level TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    fire_id TEXT,
    created_ms INTEGER NOT NULL,
    read_ms INTEGER
) STRICT;
CREATE TABLE IF NOT EXISTS files (
    agent TEXT PRIMARY KEY,
    text TEXT NOT NULL
) STRICT;
";

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Claimed; its turn is starting or running.
    Started,
    /// Its turn answered.
    Ok,
    /// It or its turn failed (a limit, a failure, a halt, a cancel).
    Failed,
    /// Its turn waits for the operator's approval.
    Waiting,
    /// Not started: the job's previous run was still running.
    Skipped,
    /// Slots passed beyond their grace under `missed = "skip"`.
    Missed,
}

impl Status {
    /// As stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Started => "started",
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Waiting => "waiting",
            Status::Skipped => "skipped",
            Status::Missed => "missed",
        }
    }

    fn parse(text: &str) -> Status {
        match text {
            "started" => Status::Started,
            "ok" => Status::Ok,
            "waiting" => Status::Waiting,
            "skipped" => Status::Skipped,
            "missed" => Status::Missed,
            _ => Status::Failed,
        }
    }
}

/// A job's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    /// Its agent.
    pub agent: String,
    /// Its name.
    pub name: String,
    /// Its schedule as shown.
    pub schedule: String,
    /// When the scheduler first read it.
    pub first_seen: Timestamp,
    /// The last slot it fired or missed.
    pub last_slot: Option<Timestamp>,
    /// Its own session, made at its first run.
    pub session_id: Option<String>,
    /// Paused by the operator.
    pub paused: bool,
}

/// A run's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// `sha256("clawos-fire\0" agent "\0" job "\0" slot)`, hex.
    pub fire_id: String,
    /// Its agent.
    pub agent: String,
    /// Its job.
    pub job: String,
    /// The slot it ran (or the latest it missed).
    pub slot: Timestamp,
    /// Fired by hand (`schedule_run`).
    pub manual: bool,
    /// When it was claimed.
    pub started: Timestamp,
    /// When it ended.
    pub ended: Option<Timestamp>,
    /// Where it is.
    pub status: Status,
    /// Its turn, once agent-loop started one.
    pub turn_id: Option<String>,
    /// Its turn's session.
    pub session_id: Option<String>,
    /// What happened: the answer's start, agent-loop's reason, the slots missed.
    pub message: Option<String>,
}

/// How many notifications are kept; the oldest go first.
pub const KEPT_NOTIFICATIONS: i64 = 10_000;

/// A notification (`specs/scheduler/README.md`, "Notifications").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// Its number, rising.
    pub id: i64,
    /// The agent it is about.
    pub agent: String,
    /// What raised it: `job:<name>`, `heartbeat` or `agent` (its `notify` tool).
    pub source: String,
    /// `info`, `warning` or `error`.
    pub level: String,
    /// One line.
    pub title: String,
    /// The text.
    pub body: String,
    /// The run that raised it, if a run did.
    pub fire_id: Option<String>,
    /// When it was raised.
    pub created: Timestamp,
    /// When the operator marked it read.
    pub read: Option<Timestamp>,
}

/// The fire ID of `agent`'s job `job` at `slot` (`manual`: fired by hand).
pub fn fire_id(agent: &str, job: &str, slot: Timestamp, manual: bool) -> String {
    let mut hash = Sha256::new();
    for part in ["clawos-fire", agent, job, &slot.as_millisecond().to_string()] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    if manual {
        hash.update(b"manual");
    }
    fsutil::hex(&hash.finalize())
}

fn job_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobRow> {
    Ok(JobRow {
        agent: r.get(0)?,
        name: r.get(1)?,
        schedule: r.get(2)?,
        first_seen: at(r.get(3)?),
        last_slot: r.get::<_, Option<i64>>(4)?.map(at),
        session_id: r.get(5)?,
        paused: r.get(6)?,
    })
}

const NOTIFICATION_COLUMNS: &str =
    "SELECT id, agent, source, level, title, body, fire_id, created_ms, read_ms FROM notifications";

fn notification_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Notification> {
    Ok(Notification {
        id: r.get(0)?,
        agent: r.get(1)?,
        source: r.get(2)?,
        level: r.get(3)?,
        title: r.get(4)?,
        body: r.get(5)?,
        fire_id: r.get(6)?,
        created: at(r.get(7)?),
        read: r.get::<_, Option<i64>>(8)?.map(at),
    })
}

fn ms(at: Timestamp) -> i64 {
    at.as_millisecond()
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Inserts the run row of a claim and, for a scheduled slot, moves the
/// job's last slot, inside `tx`.
fn claim_in(
    tx: &rusqlite::Transaction<'_>,
    agent: &str,
    job: &str,
    slot: Timestamp,
    manual: bool,
    now: Timestamp,
) -> Result<Option<String>, Error> {
    let id = fire_id(agent, job, slot, manual);
    let inserted = tx.execute(
        "INSERT INTO runs (fire_id, agent, job, slot_ms, manual, started_ms, status)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'started') ON CONFLICT (fire_id) DO NOTHING",
        params![id, agent, job, ms(slot), manual, ms(now)],
    )?;
    if inserted == 0 {
        return Ok(None);
    }
    if !manual {
        tx.execute("UPDATE jobs SET last_slot_ms = ?3 WHERE agent = ?1 AND name = ?2", params![agent, job, ms(slot)])?;
    }
    Ok(Some(id))
}

/// The database.
pub struct Store {
    db: Connection,
}

impl Store {
    /// Opens (making it if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, Error> {
        let db = Connection::open(path)?;
        // A claim must be on disk before the turn it allows starts.
        db.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;")?;
        db.execute_batch(SCHEMA)?;
        Ok(Store { db })
    }

    /// Makes the jobs of `agent` those named in `jobs` (name, schedule as
    /// shown), read from the jobs file `text`: new ones first seen `now`,
    /// gone ones removed (their runs stay), changed schedules updated with
    /// their history kept. `text` is kept as the agent's last good file.
    pub fn sync(&mut self, agent: &str, text: &str, jobs: &[(String, String)], now: Timestamp) -> Result<(), Error> {
        let tx = self.db.transaction()?;
        {
            tx.execute(
                "INSERT INTO files (agent, text) VALUES (?1, ?2) ON CONFLICT (agent) DO UPDATE SET text = excluded.text",
                params![agent, text],
            )?;
            let mut names = Vec::new();
            for (name, schedule) in jobs {
                tx.execute(
                    "INSERT INTO jobs (agent, name, schedule, first_seen_ms) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (agent, name) DO UPDATE SET schedule = excluded.schedule",
                    params![agent, name, schedule, ms(now)],
                )?;
                names.push(name.as_str());
            }
            let mut gone = tx.prepare("SELECT name FROM jobs WHERE agent = ?1")?;
            let existing: Vec<String> = gone.query_map([agent], |r| r.get(0))?.collect::<Result<_, _>>()?;
            for name in existing.iter().filter(|n| !names.contains(&n.as_str())) {
                tx.execute("DELETE FROM jobs WHERE agent = ?1 AND name = ?2", params![agent, name])?;
            }
        }
        tx.commit()
    }

    /// The last jobs file of `agent` that parsed.
    pub fn last_good(&self, agent: &str) -> Result<Option<String>, Error> {
        self.db.query_row("SELECT text FROM files WHERE agent = ?1", [agent], |r| r.get(0)).optional()
    }

    /// Every job, or `agent`'s.
    pub fn jobs(&self, agent: Option<&str>) -> Result<Vec<JobRow>, Error> {
        let mut q = self.db.prepare(
            "SELECT agent, name, schedule, first_seen_ms, last_slot_ms, session_id, paused FROM jobs
             WHERE ?1 IS NULL OR agent = ?1 ORDER BY agent, name",
        )?;
        let rows = q.query_map([agent], job_row)?;
        rows.collect()
    }

    /// Job `name` of `agent`.
    pub fn job(&self, agent: &str, name: &str) -> Result<Option<JobRow>, Error> {
        self.db
            .query_row(
                "SELECT agent, name, schedule, first_seen_ms, last_slot_ms, session_id, paused FROM jobs
                 WHERE agent = ?1 AND name = ?2",
                params![agent, name],
                job_row,
            )
            .optional()
    }

    /// Pauses or resumes a job; `false` if there is no such job. Resuming
    /// moves its last slot to `now`, so the slots it missed are not replayed.
    pub fn set_paused(&self, agent: &str, name: &str, paused: bool, now: Timestamp) -> Result<bool, Error> {
        let changed = if paused {
            self.db.execute("UPDATE jobs SET paused = 1 WHERE agent = ?1 AND name = ?2", params![agent, name])?
        } else {
            self.db.execute(
                "UPDATE jobs SET paused = 0, last_slot_ms = CASE WHEN paused = 1 THEN ?3 ELSE last_slot_ms END
                 WHERE agent = ?1 AND name = ?2",
                params![agent, name, ms(now)],
            )?
        };
        Ok(changed == 1)
    }

    /// Claims the run of `agent`'s job `job` for `slot`: the run row
    /// (`started`) and, for a scheduled slot, the job's last slot, in one
    /// transaction. `None` if that fire was claimed before (by this or any
    /// other scheduler): it must not run.
    pub fn claim(
        &mut self,
        agent: &str,
        job: &str,
        slot: Timestamp,
        manual: bool,
        now: Timestamp,
    ) -> Result<Option<String>, Error> {
        let tx = self.db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let claimed = claim_in(&tx, agent, job, slot, manual, now)?;
        tx.commit()?;
        Ok(claimed)
    }

    /// [`Store::claim`] for every `(agent, job, slot)` of a pass in one
    /// transaction, so they share one flush; the fire ID of each one this
    /// call claimed, `None` for each claimed before.
    pub fn claim_all(&mut self, due: &[(&str, &str, Timestamp)], now: Timestamp) -> Result<Vec<Option<String>>, Error> {
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let tx = self.db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let claimed: Vec<Option<String>> = due
            .iter()
            .map(|(agent, job, slot)| claim_in(&tx, agent, job, *slot, false, now))
            .collect::<Result<_, _>>()?;
        tx.commit()?;
        Ok(claimed)
    }

    /// Records a run that did not start (`Skipped`, `Missed`) and moves the
    /// job's last slot past `slot`, in one transaction. `false` if that
    /// fire was already recorded.
    pub fn record_unrun(
        &mut self,
        agent: &str,
        job: &str,
        slot: Timestamp,
        status: Status,
        message: &str,
        now: Timestamp,
    ) -> Result<bool, Error> {
        let Some(id) = self.claim(agent, job, slot, false, now)? else { return Ok(false) };
        self.db.execute(
            "UPDATE runs SET status = ?2, ended_ms = ?3, message = ?4 WHERE fire_id = ?1",
            params![id, status.as_str(), ms(now), message],
        )?;
        Ok(true)
    }

    /// Moves a job's last slot to `slot` without a run (a heartbeat slot
    /// outside its active hours or with nothing on its checklist).
    pub fn advance(&self, agent: &str, job: &str, slot: Timestamp) -> Result<(), Error> {
        self.db.execute(
            "UPDATE jobs SET last_slot_ms = ?3 WHERE agent = ?1 AND name = ?2",
            params![agent, job, ms(slot)],
        )?;
        Ok(())
    }

    /// Stores a notification (`id`, `created` and `read` are set here) and
    /// drops the oldest beyond [`KEPT_NOTIFICATIONS`].
    pub fn notify(&self, n: &Notification, now: Timestamp) -> Result<Notification, Error> {
        self.db.execute(
            "INSERT INTO notifications (agent, source, level, title, body, fire_id, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![n.agent, n.source, n.level, n.title, n.body, n.fire_id, ms(now)],
        )?;
        let id = self.db.last_insert_rowid();
        self.db.execute("DELETE FROM notifications WHERE id <= ?1", [id - KEPT_NOTIFICATIONS])?;
        Ok(Notification { id, created: now, read: None, ..n.clone() })
    }

    /// Notifications, newest first: `agent`'s or everyone's, unread only or
    /// all, at most `limit`.
    pub fn notifications(
        &self,
        agent: Option<&str>,
        unread_only: bool,
        limit: u32,
    ) -> Result<Vec<Notification>, Error> {
        let mut q = self.db.prepare(&format!(
            "{NOTIFICATION_COLUMNS} WHERE (?1 IS NULL OR agent = ?1) AND (?2 = 0 OR read_ms IS NULL) ORDER BY id DESC LIMIT ?3"
        ))?;
        let rows = q.query_map(params![agent, unread_only, limit], notification_row)?;
        rows.collect()
    }

    /// Notification `id`.
    pub fn notification(&self, id: i64) -> Result<Option<Notification>, Error> {
        self.db.query_row(&format!("{NOTIFICATION_COLUMNS} WHERE id = ?1"), [id], notification_row).optional()
    }

    /// Marks notification `id` read (once); `false` if there is none.
    pub fn mark_read(&self, id: i64, now: Timestamp) -> Result<bool, Error> {
        let found = self
            .db
            .execute("UPDATE notifications SET read_ms = COALESCE(read_ms, ?2) WHERE id = ?1", params![id, ms(now)])?;
        Ok(found == 1)
    }

    /// The turn a run started; also the job's own session, when it has none yet.
    pub fn started_turn(&self, fire_id: &str, turn_id: &str, session_id: &str) -> Result<(), Error> {
        self.db.execute(
            "UPDATE runs SET turn_id = ?2, session_id = ?3 WHERE fire_id = ?1",
            params![fire_id, turn_id, session_id],
        )?;
        self.db.execute(
            "UPDATE jobs SET session_id = ?2
             WHERE session_id IS NULL AND (agent, name) = (SELECT agent, job FROM runs WHERE fire_id = ?1)",
            params![fire_id, session_id],
        )?;
        Ok(())
    }

    /// Ends a run.
    pub fn end(&self, fire_id: &str, status: Status, message: &str, now: Timestamp) -> Result<(), Error> {
        self.db.execute(
            "UPDATE runs SET status = ?2, ended_ms = ?3, message = ?4 WHERE fire_id = ?1",
            params![fire_id, status.as_str(), ms(now), message],
        )?;
        Ok(())
    }

    /// Run `fire_id`.
    pub fn run(&self, fire_id: &str) -> Result<Option<Run>, Error> {
        self.runs_where("fire_id = ?1", [fire_id], 1).map(|mut runs| runs.pop())
    }

    /// The last `limit` runs of `agent`'s job `job`, newest first.
    pub fn runs(&self, agent: &str, job: &str, limit: u32) -> Result<Vec<Run>, Error> {
        self.runs_where("agent = ?1 AND job = ?2", [agent, job], limit)
    }

    /// Runs still `started` (a restart finds them).
    pub fn unfinished(&self) -> Result<Vec<Run>, Error> {
        self.runs_where("status = 'started' AND ?1 = ?1", [""], u32::MAX)
    }

    fn runs_where<const N: usize>(&self, filter: &str, args: [&str; N], limit: u32) -> Result<Vec<Run>, Error> {
        let sql = format!(
            "SELECT fire_id, agent, job, slot_ms, manual, started_ms, ended_ms, status, turn_id, session_id, message
             FROM runs WHERE {filter} ORDER BY started_ms DESC, rowid DESC LIMIT {limit}"
        );
        let mut q = self.db.prepare(&sql)?;
        let rows = q.query_map(rusqlite::params_from_iter(args), |r| {
            Ok(Run {
                fire_id: r.get(0)?,
                agent: r.get(1)?,
                job: r.get(2)?,
                slot: at(r.get(3)?),
                manual: r.get(4)?,
                started: at(r.get(5)?),
                ended: r.get::<_, Option<i64>>(6)?.map(at),
                status: Status::parse(&r.get::<_, String>(7)?),
                turn_id: r.get(8)?,
                session_id: r.get(9)?,
                message: r.get(10)?,
            })
        })?;
        rows.collect()
    }

    /// The last run of a job.
    pub fn last_run(&self, agent: &str, job: &str) -> Result<Option<Run>, Error> {
        Ok(self.runs(agent, job, 1)?.pop())
    }

    /// Whether `agent`'s job `job` has a run still going.
    pub fn running(&self, agent: &str, job: &str) -> Result<bool, Error> {
        self.db
            .query_row(
                "SELECT 1 FROM runs WHERE agent = ?1 AND job = ?2 AND status = 'started' LIMIT 1",
                params![agent, job],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_slot_is_claimed_once_across_two_schedulers_and_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("schedule.db");
        let now = ts("2026-01-01T09:00:01Z");
        let mut one = Store::open(&path).unwrap();
        let mut two = Store::open(&path).unwrap();
        one.sync("a", "", &[("j".into(), "every 1m".into())], now).unwrap();
        let slot = ts("2026-01-01T09:00:00Z");
        let first = one.claim("a", "j", slot, false, now).unwrap();
        assert!(first.is_some());
        assert_eq!(two.claim("a", "j", slot, false, now).unwrap(), None, "a second scheduler");
        drop(one);
        let mut again = Store::open(&path).unwrap();
        assert_eq!(again.claim("a", "j", slot, false, now).unwrap(), None, "after a restart");
        assert_eq!(again.job("a", "j").unwrap().unwrap().last_slot, Some(slot));
        assert!(again.running("a", "j").unwrap());
        assert_eq!(again.unfinished().unwrap().len(), 1);
        // A pass's claims in one transaction: the one claimed before is not again.
        let other = ts("2026-01-01T09:01:00Z");
        let batch = again.claim_all(&[("a", "j", slot), ("a", "j", other)], now).unwrap();
        assert_eq!((batch[0].is_none(), batch[1].is_some()), (true, true));
        assert_eq!(again.job("a", "j").unwrap().unwrap().last_slot, Some(other));
        // A run by hand at the same instant is a different fire.
        assert!(again.claim("a", "j", slot, true, now).unwrap().is_some());
        again.end(first.as_deref().unwrap(), Status::Ok, "done", now).unwrap();
        assert_eq!(again.run(first.as_deref().unwrap()).unwrap().unwrap().status, Status::Ok);
    }

    #[test]
    fn sync_keeps_history_of_kept_jobs_and_drops_gone_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        let t0 = ts("2026-01-01T00:00:00Z");
        store.sync("a", "v1", &[("x".into(), "every 1h".into()), ("y".into(), "every 2h".into())], t0).unwrap();
        assert!(store.record_unrun("a", "x", t0, Status::Missed, "1 slot", t0).unwrap());
        store.sync("a", "v2", &[("x".into(), "every 3h".into())], ts("2026-01-02T00:00:00Z")).unwrap();
        let jobs = store.jobs(Some("a")).unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].schedule.as_str(), jobs[0].first_seen, jobs[0].last_slot), ("every 3h", t0, Some(t0)));
        assert_eq!(store.runs("a", "x", 10).unwrap()[0].status, Status::Missed);
        assert_eq!(store.last_good("a").unwrap().as_deref(), Some("v2"));
    }

    #[test]
    fn resuming_a_paused_job_does_not_replay_its_missed_slots() {
        let dir = tempfile::tempdir().unwrap();
        let store_path = dir.path().join("s.db");
        let mut store = Store::open(&store_path).unwrap();
        let t0 = ts("2026-01-01T00:00:00Z");
        store.sync("a", "", &[("x".into(), "every 1h".into())], t0).unwrap();
        assert!(store.set_paused("a", "x", true, t0).unwrap());
        let later = ts("2026-01-03T00:00:00Z");
        assert!(store.set_paused("a", "x", false, later).unwrap());
        assert_eq!(store.job("a", "x").unwrap().unwrap().last_slot, Some(later));
        assert!(!store.set_paused("a", "nope", true, t0).unwrap());
    }

    #[test]
    fn the_fire_id_names_agent_job_and_slot() {
        let slot = ts("2026-01-01T09:00:00Z");
        let id = fire_id("a", "j", slot, false);
        assert_eq!(id.len(), 64);
        assert_ne!(id, fire_id("a", "j", slot, true));
        assert_ne!(id, fire_id("a", "k", slot, false));
        assert_ne!(fire_id("a", "bc", slot, false), fire_id("ab", "c", slot, false));
    }

    #[test]
    fn notifications_are_kept_newest_first_and_marked_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let raise = |agent: &str, title: &str, at: &str| {
            let n = Notification {
                id: 0,
                agent: agent.into(),
                source: "agent".into(),
                level: "info".into(),
                title: title.into(),
                body: "b".into(),
                fire_id: None,
                created: Timestamp::UNIX_EPOCH,
                read: None,
            };
            store.notify(&n, ts(at)).unwrap()
        };
        let first = raise("a", "one", "2026-01-01T00:00:00Z");
        raise("b", "two", "2026-01-01T00:01:00Z");
        let titles = |agent, unread| -> Vec<String> {
            store.notifications(agent, unread, 10).unwrap().into_iter().map(|n| n.title).collect()
        };
        assert_eq!(titles(None, true), ["two", "one"]);
        assert_eq!(titles(Some("a"), true), ["one"]);
        assert!(store.mark_read(first.id, ts("2026-01-02T00:00:00Z")).unwrap());
        assert!(store.mark_read(first.id, ts("2026-01-03T00:00:00Z")).unwrap());
        assert_eq!(titles(None, true), ["two"]);
        let read = store.notification(first.id).unwrap().unwrap();
        assert_eq!(read.read, Some(ts("2026-01-02T00:00:00Z")), "the first read is kept");
        assert_eq!(store.notification(99).unwrap(), None);
        assert!(!store.mark_read(99, ts("2026-01-02T00:00:00Z")).unwrap());
    }
}

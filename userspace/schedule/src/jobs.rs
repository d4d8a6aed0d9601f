//! An agent's jobs file, `cron/jobs.toml` (`specs/scheduler/README.md`, "The
//! jobs file"): parsed whole or refused with the line of the first error, so
//! a file with a mistake never half-replaces the jobs that ran before it.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

/// Where an agent's jobs file is, under its agent directory.
pub const JOBS_FILE: &str = "cron/jobs.toml";
/// The longest prompt a job may carry, bytes.
pub const MAX_PROMPT: usize = 16 * 1024;
/// The most jobs one file may hold.
pub const MAX_JOBS: usize = 1000;
/// The default grace of a slot (`grace`).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5 * 60);
/// The shortest `every`.
const MIN_EVERY: Duration = Duration::from_secs(60);

/// A file that is not a valid jobs file: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {reason}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
pub struct FileError {
    /// The file as the operator knows it (`cron/jobs.toml`).
    pub file: String,
    /// The 1-based line, when the error has one.
    pub line: Option<usize>,
    /// What is wrong.
    pub reason: String,
}

/// When a job is due.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// A five-field cron expression read in `zone`.
    Cron {
        /// The expression as written.
        expr: String,
        /// Parsed (boxed: a parsed pattern is some 300 bytes).
        cron: Box<croner::Cron>,
        /// The zone it is read in.
        zone: TimeZone,
    },
    /// Once, at this instant.
    At(Timestamp),
    /// Every interval, counted from when the job was first seen.
    Every(Duration),
    /// Once, this long after the job was first seen.
    Delay(Duration),
}

impl Schedule {
    /// `cron`, `at`, `every` or `delay`.
    pub fn kind(&self) -> &'static str {
        match self {
            Schedule::Cron { .. } => "cron",
            Schedule::At(_) => "at",
            Schedule::Every(_) => "every",
            Schedule::Delay(_) => "delay",
        }
    }

    /// Runs at most once.
    pub fn one_shot(&self) -> bool {
        matches!(self, Schedule::At(_) | Schedule::Delay(_))
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Cron { expr, zone, .. } => write!(f, "cron {expr} ({})", zone.iana_name().unwrap_or("UTC")),
            Schedule::At(at) => write!(f, "at {at}"),
            Schedule::Every(every) => write!(f, "every {}", friendly(*every)),
            Schedule::Delay(delay) => write!(f, "delay {}", friendly(*delay)),
        }
    }
}

/// `15m`, `1h 30m`: a duration as the file writes it.
fn friendly(duration: Duration) -> String {
    let signed = SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX);
    format!("{signed:#}")
}

/// When a run raises a notification (`notify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Notify {
    /// After every run.
    Always,
    /// After a run that failed or waits for an approval (the default).
    OnFailure,
    /// After a run whose turn answered.
    OnSuccess,
    /// Never.
    Never,
}

impl Notify {
    /// Whether a run that ended `ok` (or not) raises one.
    pub fn after(self, ok: bool) -> bool {
        match self {
            Notify::Always => true,
            Notify::OnFailure => !ok,
            Notify::OnSuccess => ok,
            Notify::Never => false,
        }
    }
}

/// The hours of the day a heartbeat runs in (`active_hours = "08:00-22:00"`,
/// read in its zone; an end before the start spans midnight).
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveHours {
    /// The first minute in.
    pub start: jiff::civil::Time,
    /// The first minute out.
    pub end: jiff::civil::Time,
    /// The zone they are read in.
    pub zone: TimeZone,
}

impl ActiveHours {
    /// Whether `at` falls in them.
    pub fn contain(&self, at: Timestamp) -> bool {
        let time = at.to_zoned(self.zone.clone()).time();
        if self.start <= self.end {
            self.start <= time && time < self.end
        } else {
            time >= self.start || time < self.end
        }
    }
}

/// The name the heartbeat goes by among the jobs (no `[jobs.heartbeat]`).
pub const HEARTBEAT: &str = "heartbeat";
/// The agent's heartbeat checklist, under its agent directory.
pub const HEARTBEAT_FILE: &str = "HEARTBEAT.md";
/// A heartbeat answer that starts with this and is short says all is well:
/// it raises no notification.
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";

/// Whether a heartbeat checklist has nothing to do: nothing but blank
/// lines, headings, HTML comments and empty list items.
pub fn effectively_empty(checklist: &str) -> bool {
    let mut in_comment = false;
    for line in checklist.lines() {
        let mut rest = line.trim();
        loop {
            if in_comment {
                match rest.find("-->") {
                    Some(end) => {
                        rest = rest[end + 3..].trim();
                        in_comment = false;
                    }
                    None => break,
                }
            } else if let Some(start) = rest.find("<!--") {
                if !rest[..start].trim().is_empty() {
                    return false;
                }
                rest = &rest[start + 4..];
                in_comment = true;
            } else {
                break;
            }
        }
        if in_comment {
            continue;
        }
        let bare = rest.trim_start_matches('#').trim();
        let bare = bare.trim_start_matches(['-', '*', '+']).trim();
        let bare = bare.strip_prefix("[ ]").or_else(|| bare.strip_prefix("[x]")).unwrap_or(bare).trim();
        if !bare.is_empty() && !rest.starts_with('#') {
            return false;
        }
    }
    true
}

/// What to do with slots that passed unrun (`specs/scheduler/README.md`,
/// "Missed runs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Missed {
    /// Not run; the job waits for its next slot.
    Skip,
    /// One run for all of them.
    Once,
}

impl Missed {
    /// As the file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Missed::Skip => "skip",
            Missed::Once => "once",
        }
    }
}

/// One job of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Its name in the file.
    pub name: String,
    /// When it is due.
    pub schedule: Schedule,
    /// The message its runs send the agent.
    pub prompt: String,
    /// The session every run continues, if the file names one.
    pub session: Option<String>,
    /// What missed slots do.
    pub missed: Missed,
    /// How late a slot may be reached and still be on time.
    pub grace: Duration,
    /// When a run raises a notification.
    pub notify: Notify,
    /// For the heartbeat (the job named [`HEARTBEAT`], whose prompt is its
    /// checklist): the hours it runs in, if limited.
    pub active_hours: Option<ActiveHours>,
}

impl Job {
    /// Whether this is the agent's heartbeat.
    pub fn is_heartbeat(&self) -> bool {
        self.name == HEARTBEAT
    }
}

/// A job as the file writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    cron: Option<String>,
    at: Option<String>,
    every: Option<String>,
    delay: Option<String>,
    tz: Option<String>,
    prompt: String,
    session: Option<String>,
    missed: Option<Missed>,
    grace: Option<String>,
    notify: Option<Notify>,
}

/// `[heartbeat]` as the file writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeartbeat {
    every: String,
    active_hours: Option<String>,
    tz: Option<String>,
    notify: Option<Notify>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    jobs: BTreeMap<String, toml::Spanned<RawJob>>,
    heartbeat: Option<toml::Spanned<RawHeartbeat>>,
}

/// Whether `name` may name a job: 1-64 of `a-z`, `0-9`, `-`, `_`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// Parses a jobs file. `local` is the zone of jobs without `tz` (the box's).
pub fn parse(text: &str, local: &TimeZone) -> Result<Vec<Job>, FileError> {
    let error = |line, reason: String| FileError { file: JOBS_FILE.to_owned(), line, reason: visible(&reason) };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|span| line_of(text, span.start));
        error(line, e.message().to_owned())
    })?;
    if raw.jobs.len() > MAX_JOBS {
        return Err(error(None, format!("{} jobs; a file holds at most {MAX_JOBS}", raw.jobs.len())));
    }
    let mut jobs = raw
        .jobs
        .into_iter()
        .map(|(name, spanned)| {
            let line = Some(line_of(text, spanned.span().start));
            job(name, spanned.into_inner(), local).map_err(|reason| error(line, reason))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(spanned) = raw.heartbeat {
        let line = Some(line_of(text, spanned.span().start));
        jobs.push(heartbeat(spanned.into_inner(), local).map_err(|reason| error(line, reason))?);
    }
    Ok(jobs)
}

fn zone_named(tz: Option<&str>, local: &TimeZone) -> Result<TimeZone, String> {
    match tz {
        Some(tz) => TimeZone::get(tz).map_err(|_| format!("`{tz}` is not a time zone of this box's tzdata")),
        None => Ok(local.clone()),
    }
}

fn heartbeat(raw: RawHeartbeat, local: &TimeZone) -> Result<Job, String> {
    let context = |reason: String| format!("[heartbeat]: {reason}");
    let every = duration(&raw.every).map_err(|e| context(format!("`every`: {e}")))?;
    if every < MIN_EVERY {
        return Err(context(format!("`every` is {}; the shortest is 1m", friendly(every))));
    }
    let zone = zone_named(raw.tz.as_deref(), local).map_err(context)?;
    let active_hours = match raw.active_hours {
        Some(hours) => {
            let bad = || context(format!("`active_hours = \"{hours}\"` is not HH:MM-HH:MM"));
            let (start, end) = hours.split_once('-').ok_or_else(bad)?;
            let time = |t: &str| t.trim().parse::<jiff::civil::Time>().map_err(|_| bad());
            let (start, end) = (time(start)?, time(end)?);
            if start == end {
                return Err(context("`active_hours` is empty: its start and end are the same".into()));
            }
            Some(ActiveHours { start, end, zone })
        }
        None if raw.tz.is_some() => return Err(context("`tz` applies only to `active_hours`".into())),
        None => None,
    };
    Ok(Job {
        name: HEARTBEAT.to_owned(),
        schedule: Schedule::Every(every),
        prompt: String::new(),
        session: None,
        missed: Missed::Skip,
        grace: DEFAULT_GRACE,
        notify: raw.notify.unwrap_or(Notify::Always),
        active_hours,
    })
}

/// The longest error reason, characters: it quotes the file, which anyone
/// who may write the agent's files wrote, and goes to the journal.
const MAX_REASON: usize = 300;

/// `reason` with its control characters made visible and cut to
/// [`MAX_REASON`] characters.
fn visible(reason: &str) -> String {
    let mut shown = String::new();
    let mut count = 0;
    for c in reason.chars() {
        let piece: String = if c.is_control() { c.escape_default().collect() } else { c.into() };
        count += piece.chars().count();
        if count > MAX_REASON {
            shown.push('…');
            break;
        }
        shown.push_str(&piece);
    }
    shown
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

fn job(name: String, raw: RawJob, local: &TimeZone) -> Result<Job, String> {
    let context = |reason: String| format!("job `{name}`: {reason}");
    if !valid_name(&name) {
        return Err(format!("`{name}` is not a job name: 1-64 of a-z, 0-9, - and _"));
    }
    if name == HEARTBEAT {
        return Err("`heartbeat` is not a job name: the heartbeat is `[heartbeat]`".into());
    }
    if raw.prompt.trim().is_empty() {
        return Err(context("`prompt` is empty".into()));
    }
    if raw.prompt.len() > MAX_PROMPT {
        return Err(context(format!("`prompt` is {} bytes; at most {MAX_PROMPT}", raw.prompt.len())));
    }
    let zone = match &raw.tz {
        Some(tz) => {
            TimeZone::get(tz).map_err(|_| context(format!("`{tz}` is not a time zone of this box's tzdata")))?
        }
        None => local.clone(),
    };
    let schedule = match (raw.cron, raw.at, raw.every, raw.delay) {
        (Some(expr), None, None, None) => {
            let cron = Box::new(cron(&expr).map_err(context)?);
            Schedule::Cron { expr, cron, zone }
        }
        (None, Some(at), None, None) => Schedule::At(at_time(&at, &zone).map_err(context)?),
        (None, None, Some(every), None) => {
            let every = duration(&every).map_err(|e| context(format!("`every`: {e}")))?;
            if every < MIN_EVERY {
                return Err(context(format!("`every` is {}; the shortest is 1m", friendly(every))));
            }
            Schedule::Every(every)
        }
        (None, None, None, Some(delay)) => {
            Schedule::Delay(duration(&delay).map_err(|e| context(format!("`delay`: {e}")))?)
        }
        _ => return Err(context("needs exactly one of `cron`, `at`, `every` and `delay`".into())),
    };
    if raw.tz.is_some() && !matches!(schedule, Schedule::Cron { .. } | Schedule::At(_)) {
        return Err(context("`tz` applies only to `cron` and `at`".into()));
    }
    let grace = match &raw.grace {
        Some(grace) => duration(grace).map_err(|e| context(format!("`grace`: {e}")))?,
        None => DEFAULT_GRACE,
    };
    let missed = raw.missed.unwrap_or(if schedule.one_shot() { Missed::Once } else { Missed::Skip });
    let notify = raw.notify.unwrap_or(Notify::OnFailure);
    Ok(Job { name, schedule, prompt: raw.prompt, session: raw.session, missed, grace, notify, active_hours: None })
}

/// `text` with job `name` added as a table of `fields` (`cron`, `prompt`,
/// ...; the file's own spelling), its comments kept; refused if the job
/// exists or the result is not a valid jobs file.
pub fn with_job_added(text: &str, name: &str, fields: &[(&str, &str)], local: &TimeZone) -> Result<String, String> {
    let mut document = document(text)?;
    let jobs = document.entry("jobs").or_insert_with(|| {
        let mut jobs = toml_edit::Table::new();
        jobs.set_implicit(true);
        toml_edit::Item::Table(jobs)
    });
    let jobs = jobs.as_table_mut().ok_or_else(|| format!("`jobs` in {JOBS_FILE} is not a table"))?;
    if jobs.contains_key(name) {
        return Err(format!("there is a job `{name}` already"));
    }
    let mut table = toml_edit::Table::new();
    for (key, value) in fields {
        table.insert(key, toml_edit::value(*value));
    }
    jobs.insert(name, toml_edit::Item::Table(table));
    checked(document.to_string(), local)
}

/// `text` without job `name`, its comments kept; refused if there is no
/// such job or the result is not a valid jobs file.
pub fn with_job_removed(text: &str, name: &str, local: &TimeZone) -> Result<String, String> {
    let mut document = document(text)?;
    let jobs = document.get_mut("jobs").and_then(|jobs| jobs.as_table_mut());
    jobs.and_then(|jobs| jobs.remove(name)).ok_or_else(|| format!("there is no job `{name}` in {JOBS_FILE}"))?;
    checked(document.to_string(), local)
}

fn document(text: &str) -> Result<toml_edit::DocumentMut, String> {
    text.parse().map_err(|e| format!("{JOBS_FILE} does not parse, fix it first: {e}"))
}

fn checked(text: String, local: &TimeZone) -> Result<String, String> {
    parse(&text, local).map_err(|e| e.to_string())?;
    Ok(text)
}

/// A five-field cron expression; seconds are refused.
pub fn cron(expr: &str) -> Result<croner::Cron, String> {
    if expr.split_whitespace().count() != 5 && !expr.trim_start().starts_with('@') {
        return Err(format!(
            "`cron = \"{expr}\"` needs five fields (minute hour day month weekday); nothing runs more \
             often than once a minute, and `every` is for intervals"
        ));
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| format!("`cron = \"{expr}\"`: {e}"))
}

/// A positive duration: `90s`, `15m`, `1h 30m` (or ISO 8601, `PT15M`).
pub fn duration(text: &str) -> Result<Duration, String> {
    let signed: SignedDuration =
        text.parse().map_err(|_| format!("`{text}` is not a duration (write it like 90s, 15m or 1h 30m)"))?;
    Duration::try_from(signed).ok().filter(|d| !d.is_zero()).ok_or_else(|| format!("`{text}` is not positive"))
}

/// An `at` time: RFC 3339 with an offset, or a civil time in `zone` that
/// exists there exactly once (`specs/scheduler/README.md`, "Daylight saving").
pub fn at_time(text: &str, zone: &TimeZone) -> Result<Timestamp, String> {
    if let Ok(at) = text.parse::<Timestamp>() {
        return Ok(at);
    }
    let civil: DateTime = text
        .parse()
        .map_err(|_| format!("`at = \"{text}\"` is neither RFC 3339 (with an offset) nor a civil date and time"))?;
    let name = zone.iana_name().unwrap_or("UTC");
    let offsets = zone.to_ambiguous_timestamp(civil);
    match offsets.offset() {
        AmbiguousOffset::Unambiguous { .. } => {
            offsets.unambiguous().map_err(|e| format!("`at = \"{text}\"` in {name}: {e}"))
        }
        AmbiguousOffset::Gap { before, after } => Err(format!(
            "`at = \"{text}\"` does not exist in {name}: the clocks skip from {before} to {after} there; \
             write the instant meant with its offset"
        )),
        AmbiguousOffset::Fold { before, after } => Err(format!(
            "`at = \"{text}\"` happens twice in {name} (at offset {before}, then {after}); write the one \
             meant with its offset, e.g. \"{text}{before}\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc() -> TimeZone {
        TimeZone::UTC
    }

    #[test]
    fn every_kind_of_job_parses_with_its_defaults() {
        let jobs = parse(
            r#"
[jobs.report]
cron = "0 9 * * mon-fri"
tz = "Europe/London"
prompt = "Report."

[jobs.poll]
every = "15m"
prompt = "Poll."
grace = "1m"

[jobs.remind]
at = "2026-12-24T18:00"
prompt = "Remind."

[jobs.later]
delay = "90s"
prompt = "Later."
session = "s-1"
"#,
            &utc(),
        )
        .unwrap();
        let by_name = |n: &str| jobs.iter().find(|j| j.name == n).unwrap();
        assert_eq!(by_name("report").schedule.to_string(), "cron 0 9 * * mon-fri (Europe/London)");
        assert_eq!(by_name("report").missed, Missed::Skip);
        assert_eq!(by_name("poll").schedule, Schedule::Every(Duration::from_secs(900)));
        assert_eq!(by_name("poll").grace, Duration::from_secs(60));
        assert_eq!(by_name("remind").schedule, Schedule::At("2026-12-24T18:00:00Z".parse().unwrap()));
        assert_eq!(by_name("remind").missed, Missed::Once);
        assert_eq!(by_name("later").schedule.to_string(), "delay 1m 30s");
        assert_eq!(by_name("later").session.as_deref(), Some("s-1"));
    }

    #[test]
    fn errors_name_their_line() {
        let bad = |text: &str| parse(text, &utc()).unwrap_err();
        let e = bad("[jobs.a]\nprompt = \"x\"\ncron = \"* * * *\"\n");
        assert_eq!(e.line, Some(1), "{e}");
        assert!(e.reason.contains("five fields"), "{e}");
        let e =
            bad("[jobs.a]\nprompt = \"x\"\nevery = \"15m\"\n\n[jobs.b]\nprompt = \"y\"\ncron = \"*/10 * * * * *\"\n");
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.reason.contains("once a minute"), "{e}");
        let e = bad("[jobs.a]\nprompt = \"x\"\nevery = \"15m\"\ncolour = 1\n");
        assert!(e.to_string().starts_with("cron/jobs.toml, line 4: "), "{e}");
        assert!(e.reason.contains("colour"), "{e}");
        let e = bad("[jobs.a]\nprompt = \"x\"\nevery = 15\n");
        assert_eq!(e.line, Some(3), "{e}");
        let e = bad("[jobs.a]\nprompt = \"x\"\nevery = \"30s\"\n");
        assert!(e.reason.contains("shortest is 1m"), "{e}");
        let e = bad("[jobs.a]\nprompt = \"x\"\ncron = \"0 9 * * *\"\ntz = \"Mars/Olympus\"\n");
        assert!(e.reason.contains("Mars/Olympus"), "{e}");
        let e = bad("[jobs.a]\nprompt = \"x\"\ncron = \"0 9 * * *\"\nevery = \"1h\"\n");
        assert!(e.reason.contains("exactly one"), "{e}");
        let e = bad("[jobs.A]\nprompt = \"x\"\nevery = \"1h\"\n");
        assert!(e.reason.contains("not a job name"), "{e}");
        let e = bad("[jobs.a]\nprompt = \" \"\nevery = \"1h\"\n");
        assert!(e.reason.contains("empty"), "{e}");
        assert!(bad("[jobs.a\n").line.is_some());
        // What the file says is quoted with its control characters visible, and bounded.
        let e = bad(&format!("[jobs.a]\nprompt = \"x\"\ncron = \"\\u001b[2J{}\"\n", "9 ".repeat(400)));
        assert!(e.reason.contains("\\u{1b}[2J") && !e.reason.contains('\u{1b}'), "{e}");
        assert!(e.reason.chars().count() <= MAX_REASON + 1, "{}", e.reason.len());
    }

    #[test]
    fn an_at_time_in_a_daylight_saving_gap_or_fold_is_refused_with_the_offsets() {
        let new_york = TimeZone::get("America/New_York").unwrap();
        let gap = at_time("2025-03-09T02:30", &new_york).unwrap_err();
        assert!(gap.contains("does not exist in America/New_York"), "{gap}");
        let fold = at_time("2025-11-02T01:30", &new_york).unwrap_err();
        assert!(fold.contains("happens twice") && fold.contains("-04") && fold.contains("-05"), "{fold}");
        // The offset says which: both passes can be named.
        let first = at_time("2025-11-02T01:30-04:00", &new_york).unwrap();
        let second = at_time("2025-11-02T01:30-05:00", &new_york).unwrap();
        assert_eq!(second.duration_since(first), SignedDuration::from_hours(1));
        assert_eq!(at_time("2025-07-01T09:00", &new_york).unwrap().to_string(), "2025-07-01T13:00:00Z");
    }

    #[test]
    fn the_heartbeat_parses_with_its_active_hours() {
        let text = "[heartbeat]\nevery = \"30m\"\nactive_hours = \"22:00-06:00\"\ntz = \"Europe/London\"\n";
        let jobs = parse(text, &utc()).unwrap();
        let beat = &jobs[0];
        assert!(beat.is_heartbeat() && beat.notify == Notify::Always);
        assert_eq!(beat.schedule, Schedule::Every(Duration::from_secs(1800)));
        let hours = beat.active_hours.as_ref().unwrap();
        // Over midnight, in London's time (GMT in January, BST in July).
        assert!(hours.contain(ts("2026-01-10T23:30:00Z")));
        assert!(hours.contain(ts("2026-01-10T05:59:00Z")));
        assert!(!hours.contain(ts("2026-01-10T06:00:00Z")));
        assert!(hours.contain(ts("2026-07-10T21:00:00Z")), "22:00 BST");
        let bad = |text: &str| parse(text, &utc()).unwrap_err().reason;
        assert!(bad("[heartbeat]\nevery = \"30m\"\nactive_hours = \"8-22\"\n").contains("HH:MM-HH:MM"));
        assert!(bad("[heartbeat]\nevery = \"30m\"\ntz = \"UTC\"\n").contains("only to `active_hours`"));
        assert!(bad("[jobs.heartbeat]\nevery = \"30m\"\nprompt = \"x\"\n").contains("`[heartbeat]`"));
    }

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_checklist_of_headings_comments_and_empty_items_is_effectively_empty() {
        assert!(effectively_empty(""));
        assert!(effectively_empty("# Heartbeat\n\n<!-- add what to check,\none per line -->\n- [ ]\n-\n"));
        assert!(!effectively_empty("# Heartbeat\n- [ ] check the disk\n"));
        assert!(!effectively_empty("<!-- a note --> look at the queue"));
        assert!(!effectively_empty("Check mail."));
    }

    #[test]
    fn jobs_are_added_and_removed_keeping_the_files_comments() {
        let text = "# my jobs\n[jobs.a] # the first\nevery = \"1h\"\nprompt = \"A.\"\n";
        let added = with_job_added(text, "b", &[("cron", "0 9 * * *"), ("prompt", "B.")], &utc()).unwrap();
        assert!(added.starts_with("# my jobs\n[jobs.a] # the first\n"), "{added}");
        assert_eq!(parse(&added, &utc()).unwrap().len(), 2);
        assert!(with_job_added(&added, "b", &[("every", "1h"), ("prompt", "again")], &utc())
            .unwrap_err()
            .contains("already"));
        let refused = with_job_added(text, "c", &[("every", "10s"), ("prompt", "C.")], &utc()).unwrap_err();
        assert!(refused.contains("shortest is 1m"), "{refused}");
        let removed = with_job_removed(&added, "a", &utc()).unwrap();
        assert_eq!(parse(&removed, &utc()).unwrap()[0].name, "b");
        assert!(with_job_removed(&removed, "a", &utc()).unwrap_err().contains("no job `a`"));
        assert_eq!(
            with_job_added("", "x", &[("delay", "5s"), ("prompt", "X.")], &utc()).unwrap(),
            "[jobs.x]\ndelay = \"5s\"\nprompt = \"X.\"\n"
        );
    }
}

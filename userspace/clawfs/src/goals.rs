//! An agent's goals (`specs/clawfs/README.md`, "Goals"): one Markdown file
//! per goal under `goals/<state>/<id>.md` in the agent's directory, TOML
//! front matter for what a program reads, the description and a log below
//! for what people read; the file moves with its state.
//!
//! Owns: the goal file's format, the lifecycle (which state may follow
//! which), sub-goals' rule on their parent, and the atomic move. Must not
//! own: who may ask (fs-engine's caller checks) or the history commit at a
//! goal boundary (fs-engine, through `history`).

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where goals live under an agent's directory.
pub const GOALS_DIR: &str = "goals";
/// The longest title, characters.
pub const MAX_TITLE: usize = 200;
/// The longest description or note, bytes.
pub const MAX_TEXT: usize = 16 * 1024;
/// The most artifacts a goal names.
pub const MAX_ARTIFACTS: usize = 100;
const FRONT: &str = "+++\n";
const LOG_HEADING: &str = "\n## Log\n";

/// Where a goal is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Suggested, not started.
    Proposed,
    /// Being worked on.
    Active,
    /// Waiting on something outside the agent.
    Blocked,
    /// Done (final).
    Completed,
    /// Given up (final).
    Abandoned,
}

impl State {
    /// Every state, in lifecycle order.
    pub const ALL: [State; 5] = [State::Proposed, State::Active, State::Blocked, State::Completed, State::Abandoned];

    /// Its name, which is also its directory.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Proposed => "proposed",
            State::Active => "active",
            State::Blocked => "blocked",
            State::Completed => "completed",
            State::Abandoned => "abandoned",
        }
    }

    /// Whether a goal in this state may go to `to`.
    pub fn may_become(self, to: State) -> bool {
        matches!(
            (self, to),
            (State::Proposed, State::Active | State::Abandoned)
                | (State::Active, State::Blocked | State::Completed | State::Abandoned)
                | (State::Blocked, State::Active | State::Abandoned)
        )
    }

    /// Completed or abandoned.
    pub fn is_final(self) -> bool {
        matches!(self, State::Completed | State::Abandoned)
    }
}

/// A goal error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No goal with that id.
    #[error("there is no goal `{0}`")]
    NoGoal(String),
    /// A request that breaks a rule: a bad id, a transition the lifecycle
    /// does not have, a parent with open sub-goals, too long a text.
    #[error("{0}")]
    Refused(String),
    /// A goal file that does not parse.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The file, relative to the agent's directory.
        path: String,
        /// Why.
        reason: String,
    },
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A goal result.
pub type Result<T> = std::result::Result<T, Error>;

/// The front matter.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Front {
    title: String,
    state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent: Option<String>,
    created: String,
    updated: String,
    #[serde(default)]
    artifacts: Vec<String>,
}

/// One goal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Goal {
    /// Its id (its file name without `.md`).
    pub id: String,
    /// One line.
    pub title: String,
    /// Where it is in its life.
    pub state: State,
    /// The goal it is a sub-goal of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// When it was made (RFC 3339).
    pub created: String,
    /// When it last changed (RFC 3339).
    pub updated: String,
    /// Files of the agent's that it produced (relative paths).
    pub artifacts: Vec<String>,
    /// Its file, relative to the agent's directory.
    pub path: String,
    /// What it is about.
    pub description: String,
    /// Its log, oldest first: one line per change.
    pub log: Vec<String>,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.display().to_string(), source }
}

fn relative(state: State, id: &str) -> String {
    format!("{GOALS_DIR}/{}/{id}.md", state.as_str())
}

/// Whether `id` may name a goal: 1-64 of `a-z`, `0-9`, `-`, not at an end.
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && !id.starts_with('-')
        && !id.ends_with('-')
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// An id from a title: lower-case words joined by `-`.
fn slug(title: &str) -> String {
    let words: Vec<String> = title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let mut slug = String::new();
    for word in words {
        if slug.len() + word.len() + 1 > 48 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word);
    }
    if slug.is_empty() {
        "goal".into()
    } else {
        slug
    }
}

fn parse(id: &str, path: &str, text: &str) -> Result<Goal> {
    let corrupt = |reason: String| Error::Corrupt { path: path.to_owned(), reason };
    let rest = text.strip_prefix(FRONT).ok_or_else(|| corrupt("no `+++` front matter".into()))?;
    let (front, body) =
        rest.split_once(&format!("\n{FRONT}")).ok_or_else(|| corrupt("unclosed front matter".into()))?;
    let front: Front = toml::from_str(front).map_err(|e| corrupt(e.message().to_owned()))?;
    let (description, log) = body.split_once(LOG_HEADING).unwrap_or((body, ""));
    let log = log.lines().filter_map(|line| line.strip_prefix("- ")).map(str::to_owned).collect();
    Ok(Goal {
        id: id.to_owned(),
        title: front.title,
        state: front.state,
        parent: front.parent,
        created: front.created,
        updated: front.updated,
        artifacts: front.artifacts,
        path: path.to_owned(),
        description: description.trim().to_owned(),
        log,
    })
}

fn render(goal: &Goal) -> String {
    let front = Front {
        title: goal.title.clone(),
        state: goal.state,
        parent: goal.parent.clone(),
        created: goal.created.clone(),
        updated: goal.updated.clone(),
        artifacts: goal.artifacts.clone(),
    };
    let mut text = format!(
        "{FRONT}{}{FRONT}\n{}\n{LOG_HEADING}",
        toml::to_string(&front).expect("goals serialize"),
        goal.description
    );
    for line in &goal.log {
        text.push_str(&format!("- {line}\n"));
    }
    text
}

/// Every goal of the agent in `dir`, by state then id.
pub fn list(dir: &Path) -> Result<Vec<Goal>> {
    let mut goals = Vec::new();
    for state in State::ALL {
        let state_dir = dir.join(GOALS_DIR).join(state.as_str());
        let entries = match fs::read_dir(&state_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&state_dir)(e)),
        };
        let mut ids: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|name| name.strip_suffix(".md").map(str::to_owned))
            .filter(|id| valid_id(id))
            .collect();
        ids.sort();
        for id in ids {
            let path = relative(state, &id);
            let text = fs::read_to_string(dir.join(&path)).map_err(io(&dir.join(&path)))?;
            goals.push(parse(&id, &path, &text)?);
        }
    }
    Ok(goals)
}

/// Goal `id` of the agent in `dir`.
pub fn get(dir: &Path, id: &str) -> Result<Goal> {
    list(dir)?.into_iter().find(|goal| goal.id == id).ok_or_else(|| Error::NoGoal(id.to_owned()))
}

/// What a new goal is.
#[derive(Debug, Clone, Default)]
pub struct New<'a> {
    /// Its id; from the title when absent.
    pub id: Option<&'a str>,
    /// One line.
    pub title: &'a str,
    /// What it is about.
    pub description: &'a str,
    /// The goal it is a sub-goal of (one that is not final).
    pub parent: Option<&'a str>,
    /// `proposed` or `active` (the default).
    pub state: Option<State>,
}

/// Makes a goal; `now` is RFC 3339. `file_mode` and `dir_mode` are the
/// modes ClawFS gives an agent's files and directories.
pub fn create(dir: &Path, new: &New<'_>, now: &str, file_mode: u32, dir_mode: u32) -> Result<Goal> {
    let refused = |why: String| Err(Error::Refused(why));
    if new.title.trim().is_empty() || new.title.chars().count() > MAX_TITLE || new.title.contains('\n') {
        return refused(format!("a goal's title is one line of 1 to {MAX_TITLE} characters"));
    }
    if new.description.len() > MAX_TEXT {
        return refused(format!("a goal's description is at most {MAX_TEXT} bytes"));
    }
    let state = new.state.unwrap_or(State::Active);
    if !matches!(state, State::Proposed | State::Active) {
        return refused(format!("a new goal is proposed or active, not {}", state.as_str()));
    }
    let existing = list(dir)?;
    if let Some(parent) = new.parent {
        match existing.iter().find(|g| g.id == parent) {
            None => return Err(Error::NoGoal(parent.to_owned())),
            Some(p) if p.state.is_final() => return refused(format!("goal `{parent}` is {}", p.state.as_str())),
            Some(_) => {}
        }
    }
    let id = match new.id {
        Some(id) if !valid_id(id) => return refused(format!("`{id}` is not a goal id: 1-64 of a-z, 0-9 and -")),
        Some(id) if existing.iter().any(|g| g.id == id) => return refused(format!("there is a goal `{id}` already")),
        Some(id) => id.to_owned(),
        None => {
            let base = slug(new.title);
            (1..)
                .map(|n| if n == 1 { base.clone() } else { format!("{base}-{n}") })
                .find(|id| !existing.iter().any(|g| &g.id == id))
                .expect("a free id")
        }
    };
    let goal = Goal {
        path: relative(state, &id),
        id,
        title: new.title.trim().to_owned(),
        state,
        parent: new.parent.map(str::to_owned),
        created: now.to_owned(),
        updated: now.to_owned(),
        artifacts: Vec::new(),
        description: new.description.trim().to_owned(),
        log: vec![format!("{now} {}", state.as_str())],
    };
    write(dir, &goal, file_mode, dir_mode)?;
    Ok(goal)
}

/// A change to a goal.
#[derive(Debug, Clone, Default)]
pub struct Change<'a> {
    /// Its new state.
    pub state: Option<State>,
    /// A line for its log.
    pub note: Option<&'a str>,
    /// A file of the agent's it produced.
    pub artifact: Option<&'a str>,
}

/// Changes goal `id`: its state (which the lifecycle must allow; a parent
/// completes only when none of its sub-goals is open), a log line, an
/// artifact. Returns the goal and the state it left, if it moved.
pub fn update(
    dir: &Path,
    id: &str,
    change: &Change<'_>,
    now: &str,
    file_mode: u32,
    dir_mode: u32,
) -> Result<(Goal, Option<State>)> {
    let all = list(dir)?;
    let mut goal = all.iter().find(|g| g.id == id).cloned().ok_or_else(|| Error::NoGoal(id.to_owned()))?;
    let old_path = goal.path.clone();
    let from = goal.state;
    let mut line = now.to_owned();
    if let Some(to) = change.state.filter(|to| *to != from) {
        if !from.may_become(to) {
            return Err(Error::Refused(format!("goal `{id}` is {}: it cannot become {}", from.as_str(), to.as_str())));
        }
        let open: Vec<&str> = all
            .iter()
            .filter(|g| g.parent.as_deref() == Some(id) && !g.state.is_final())
            .map(|g| g.id.as_str())
            .collect();
        if to == State::Completed && !open.is_empty() {
            return Err(Error::Refused(format!("goal `{id}` has open sub-goals: {}", open.join(", "))));
        }
        goal.state = to;
        goal.path = relative(to, id);
        line.push_str(&format!(" {} → {}", from.as_str(), to.as_str()));
    }
    if let Some(artifact) = change.artifact {
        if artifact.starts_with('/') || artifact.split('/').any(|part| part == ".." || part.is_empty()) {
            return Err(Error::Refused(format!("`{artifact}` is not a path relative to the agent's directory")));
        }
        if goal.artifacts.len() >= MAX_ARTIFACTS {
            return Err(Error::Refused(format!("a goal names at most {MAX_ARTIFACTS} artifacts")));
        }
        if !goal.artifacts.iter().any(|a| a == artifact) {
            goal.artifacts.push(artifact.to_owned());
            line.push_str(&format!(" artifact {artifact}"));
        }
    }
    if let Some(note) = change.note {
        if note.len() > MAX_TEXT {
            return Err(Error::Refused(format!("a note is at most {MAX_TEXT} bytes")));
        }
        line.push_str(": ");
        line.push_str(&note.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    goal.updated = now.to_owned();
    goal.log.push(line);
    // The new text goes where the goal was, then the file moves in one
    // rename: a crash leaves it whole, in its old state's directory or its new.
    write_at(dir, &old_path, &goal, file_mode, dir_mode)?;
    if goal.path != old_path {
        ensure_dirs(dir, &goal.path, dir_mode)?;
        fs::rename(dir.join(&old_path), dir.join(&goal.path)).map_err(io(&dir.join(&goal.path)))?;
        fsutil::sync_dir(dir.join(&goal.path).parent().expect("a state directory"))
            .map_err(io(&dir.join(&goal.path)))?;
    }
    Ok((goal, change.state.filter(|to| *to != from).map(|_| from)))
}

fn ensure_dirs(dir: &Path, path: &str, dir_mode: u32) -> Result<()> {
    let mut at: PathBuf = dir.to_owned();
    for part in Path::new(path).parent().into_iter().flat_map(Path::components) {
        at.push(part);
        if !at.is_dir() {
            fs::create_dir(&at).map_err(io(&at))?;
            fs::set_permissions(&at, fs::Permissions::from_mode(dir_mode)).map_err(io(&at))?;
        }
    }
    Ok(())
}

fn write(dir: &Path, goal: &Goal, file_mode: u32, dir_mode: u32) -> Result<()> {
    write_at(dir, &goal.path, goal, file_mode, dir_mode)
}

fn write_at(dir: &Path, path: &str, goal: &Goal, file_mode: u32, dir_mode: u32) -> Result<()> {
    ensure_dirs(dir, path, dir_mode)?;
    let file = dir.join(path);
    fsutil::write_atomic(&file, render(goal).as_bytes(), file_mode)
        .and_then(|()| fs::set_permissions(&file, fs::Permissions::from_mode(file_mode)))
        .map_err(io(&file))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2026-11-27T10:00:00Z";
    const T1: &str = "2026-11-27T11:00:00Z";

    fn new<'a>(title: &'a str, parent: Option<&'a str>) -> New<'a> {
        New { title, description: "Why and how.", parent, ..New::default() }
    }

    #[test]
    fn a_goal_moves_with_its_state_and_keeps_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let trip = create(dir, &new("Plan the Tokyo trip!", None), T0, 0o640, 0o770).unwrap();
        assert_eq!(
            (trip.id.as_str(), trip.path.as_str()),
            ("plan-the-tokyo-trip", "goals/active/plan-the-tokyo-trip.md")
        );
        let change = Change {
            state: Some(State::Completed),
            note: Some("booked\nall"),
            artifact: Some("artifacts/itinerary.md"),
        };
        let (done, from) = update(dir, &trip.id, &change, T1, 0o640, 0o770).unwrap();
        assert_eq!(from, Some(State::Active));
        assert_eq!(done.path, "goals/completed/plan-the-tokyo-trip.md");
        assert!(!dir.join(&trip.path).exists() && dir.join(&done.path).is_file());
        assert_eq!(fs::metadata(dir.join(&done.path)).unwrap().permissions().mode() & 0o777, 0o640);
        let read = get(dir, &trip.id).unwrap();
        assert_eq!(read, done);
        assert_eq!(
            read.log,
            [format!("{T0} active"), format!("{T1} active → completed artifact artifacts/itinerary.md: booked all")]
        );
        assert_eq!(read.description, "Why and how.");
        // Final: nothing follows completed.
        let again =
            update(dir, &trip.id, &Change { state: Some(State::Active), ..Change::default() }, T1, 0o640, 0o770);
        assert!(matches!(again, Err(Error::Refused(why)) if why.contains("cannot become active")));
    }

    #[test]
    fn a_parent_completes_only_when_its_sub_goals_are_closed() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        create(dir, &New { id: Some("migrate"), ..new("Migrate the service", None) }, T0, 0o640, 0o770).unwrap();
        let step = create(dir, &new("Move the database", Some("migrate")), T0, 0o640, 0o770).unwrap();
        let complete = Change { state: Some(State::Completed), ..Change::default() };
        let refused = update(dir, "migrate", &complete, T1, 0o640, 0o770).unwrap_err().to_string();
        assert!(refused.contains("open sub-goals: move-the-database"), "{refused}");
        update(dir, &step.id, &complete, T1, 0o640, 0o770).unwrap();
        update(dir, "migrate", &complete, T1, 0o640, 0o770).unwrap();
        assert!(matches!(create(dir, &new("Late step", Some("migrate")), T1, 0o640, 0o770), Err(Error::Refused(_))));
        assert!(matches!(create(dir, &new("Orphan", Some("nope")), T1, 0o640, 0o770), Err(Error::NoGoal(_))));
        let ids: Vec<String> = list(dir).unwrap().into_iter().map(|g| g.id).collect();
        assert_eq!(ids, ["migrate", "move-the-database"]);
    }

    #[test]
    fn bad_requests_are_refused_and_ids_stay_unique() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        assert!(create(dir, &New { id: Some("Bad Id"), ..new("x", None) }, T0, 0o640, 0o770).is_err());
        assert!(create(dir, &new("", None), T0, 0o640, 0o770).is_err());
        assert!(create(dir, &New { state: Some(State::Completed), ..new("x", None) }, T0, 0o640, 0o770).is_err());
        let a = create(dir, &new("Same title", None), T0, 0o640, 0o770).unwrap();
        let b = create(dir, &new("Same title", None), T0, 0o640, 0o770).unwrap();
        assert_eq!((a.id.as_str(), b.id.as_str()), ("same-title", "same-title-2"));
        let escape = Change { artifact: Some("../other/x.md"), ..Change::default() };
        assert!(matches!(update(dir, &a.id, &escape, T1, 0o640, 0o770), Err(Error::Refused(_))));
        assert!(matches!(get(dir, "nope"), Err(Error::NoGoal(_))));
    }
}

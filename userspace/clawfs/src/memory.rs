//! An agent's memory (`specs/agent/README.md`, "Memory"): entries kept as
//! Markdown sections in the agent's own files, which are the source of
//! truth, and the ClawFS hybrid index of those files, which is derived from
//! them and can be rebuilt from them alone.
//!
//! Owns: which file each category's entries live in (the files' and
//! directories' names are [`crate::layout`]'s), the entry format,
//! store / get / list / forget / count on those files, recall through the
//! index, re-indexing one changed file, rebuilding the index, and hygiene
//! (archiving old daily logs, purging old archives).
//!
//! Must not own: who may ask (the IPC ACL, and RULE-001 through
//! [`files::resolve`], which every path here passes), the audit log
//! (fs-engine records each request before it runs it), noticing that a file
//! changed (fs-engine watches the agents' directories and calls
//! [`AgentMemory::sync`]), or the search itself ([`MemoryIndex`]).

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::chunk::heading;
use crate::error::{io, Error, Result};
use crate::files::{self, Access, Requester, Resolved, WriteMode};
use crate::index::{IndexReport, MemoryIndex};
use crate::layout::{agent_exists, ARCHIVE_DIR, CACHE_DIR, LOGS_DIR, MEMORY_DIR, MEMORY_MD};
use crate::search::{LegReport, SearchRequest};

/// Longest entry, bytes: a memory is a fact or a decision, not a document
/// (a document is a file the agent writes and the index finds anyway).
pub const MAX_ENTRY_BYTES: usize = 8 * 1024;
/// Largest memory file read (and so indexed or appended to): about 40,000
/// short entries. A category past it takes no more entries until hygiene,
/// `forget` or the operator trims it.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Longest custom category name.
const MAX_CATEGORY_BYTES: usize = 32;
/// How deep under the agent's directory files are indexed
/// (`instructions/a.md` is 2, `memory/x/y.md` 3).
const MAX_DEPTH: usize = 3;
/// Directories of an agent whose files are not memory: `cache/` is the
/// agent's scratch space, `archive/` what hygiene took out of recall.
const NOT_INDEXED: [&str; 2] = [CACHE_DIR, ARCHIVE_DIR];

/// Where hygiene moves daily logs, `archive/logs/` under the agent's
/// directory.
fn archived_logs() -> String {
    format!("{ARCHIVE_DIR}/{LOGS_DIR}")
}

/// `path` without its leading `dir/`, when it is under `dir`.
fn in_dir<'p>(path: &'p str, dir: &str) -> Option<&'p str> {
    path.strip_prefix(dir)?.strip_prefix('/')
}

/// What an entry is (the model and the operator choose one when storing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Category {
    /// Long-term facts, preferences, decisions: `memory.md`, kept until forgotten.
    Core,
    /// What happened today: `logs/YYYY-MM-DD.md`, archived by hygiene.
    Daily,
    /// Notes about the current conversation: `memory/conversation.md`.
    Conversation,
    /// The operator's or agent's own namespace: `memory/<name>.md`.
    Custom(String),
}

impl Category {
    /// `core`, `daily`, `conversation`, or a custom name (lowercase
    /// letters, digits, `-` and `_`, at most 32 bytes).
    pub fn parse(name: &str) -> Result<Category> {
        Ok(match name {
            "core" => Category::Core,
            "daily" => Category::Daily,
            "conversation" => Category::Conversation,
            custom if !custom.is_empty()
                && custom.len() <= MAX_CATEGORY_BYTES
                && custom.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') =>
            {
                Category::Custom(custom.to_owned())
            }
            other => {
                return Err(Error::Config(format!(
                    "memory category `{other}`: core, daily, conversation, or a name of at most {MAX_CATEGORY_BYTES} lowercase letters, digits, - and _"
                )))
            }
        })
    }

    /// Its name, as [`Category::parse`] takes it.
    pub fn name(&self) -> &str {
        match self {
            Category::Core => "core",
            Category::Daily => "daily",
            Category::Conversation => "conversation",
            Category::Custom(name) => name,
        }
    }

    /// The file its entries stored on `date` (`YYYY-MM-DD`) go to, relative
    /// to the agent's directory.
    pub fn file(&self, date: &str) -> String {
        match self {
            Category::Core => MEMORY_MD.to_owned(),
            Category::Daily => format!("{LOGS_DIR}/{date}.md"),
            other => format!("{MEMORY_DIR}/{}.md", other.name()),
        }
    }

    /// The category whose entries live in `path` (relative to the agent's
    /// directory); `None` for the other Markdown files (soul, persona,
    /// instructions), which recall finds but which hold no entries.
    fn of_file(path: &str) -> Option<Category> {
        if path == MEMORY_MD {
            return Some(Category::Core);
        }
        if let Some(date) = in_dir(path, LOGS_DIR).and_then(|name| name.strip_suffix(".md")) {
            return fsutil::days_from_date(date).map(|_| Category::Daily);
        }
        let name = in_dir(path, MEMORY_DIR)?.strip_suffix(".md")?;
        Category::parse(name).ok().filter(|category| !matches!(category, Category::Core | Category::Daily))
    }

    /// The title line a new file of this category starts with, for
    /// entries stored on `date`.
    pub fn header(&self, date: &str) -> String {
        match self {
            Category::Core => "# Memory\n".to_owned(),
            Category::Daily => format!("# {date}\n"),
            other => format!("# Memory: {}\n", other.name()),
        }
    }
}

/// One stored memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryEntry {
    /// Its ID (`m` and 12 hex digits), in its heading.
    pub id: String,
    /// Its category's name.
    pub category: String,
    /// The file it is in, relative to the agent's directory.
    pub path: String,
    /// When it was stored, RFC 3339 UTC.
    pub at: String,
    /// The text.
    pub content: String,
}

/// One recall result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecallHit {
    /// The entry's ID, when the text is (part of) a stored entry; none for
    /// other text of the agent's files (a section of `soul.md`, a paragraph
    /// the operator wrote).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The category, when the file holds entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// The file, relative to the agent's directory.
    pub path: String,
    /// The heading path of the text.
    pub heading: String,
    /// The text.
    pub content: String,
    /// The fused score (higher is better).
    pub score: f32,
    /// The keyword leg's normalised score, when that leg found the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyword_score: Option<f32>,
    /// The vector leg's normalised score, when that leg found the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_score: Option<f32>,
}

/// The answer to a recall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Recall {
    /// Best first, one per entry.
    pub results: Vec<RecallHit>,
    /// The keyword leg.
    pub keyword: LegReport,
    /// The vector leg.
    pub vector: LegReport,
}

/// What a rebuild of the index did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reindexed {
    /// Files indexed.
    pub files: usize,
    /// Chunks in the index afterwards.
    pub chunks: u64,
    /// Vectors in the index afterwards.
    pub vectors: u64,
}

/// What hygiene did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hygiene {
    /// Daily logs moved to `archive/logs/` (out of recall, still files).
    pub archived: Vec<String>,
    /// Archived logs deleted.
    pub purged: Vec<String>,
}

/// One agent's memory under a ClawFS root, acting as the agent: every path
/// passes RULE-001 for it, so nothing here reaches another agent's files.
#[derive(Debug, Clone, Copy)]
pub struct AgentMemory<'a> {
    root: &'a Path,
    agent: &'a str,
}

/// Whether `path` (relative to an agent's directory) is a file the memory
/// index holds: Markdown, not hidden, not under `cache/` or `archive/`, at
/// most three levels deep.
pub fn is_indexed(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    path.ends_with(".md")
        && parts.len() <= MAX_DEPTH
        && parts.iter().all(|part| !part.is_empty() && !part.starts_with('.'))
        && !NOT_INDEXED.contains(&parts[0])
}

impl<'a> AgentMemory<'a> {
    /// The memory of `agent` under `root`; the agent must exist.
    pub fn new(root: &'a Path, agent: &'a str) -> Result<Self> {
        if !agent_exists(root, agent) {
            return Err(Error::Denied {
                path: format!("/clawfs/agents/{agent}"),
                reason: format!("`{agent}` is not an agent of this box"),
            });
        }
        Ok(AgentMemory { root, agent })
    }

    fn resolve(&self, path: &str, access: Access) -> Result<Resolved> {
        files::resolve(self.root, Requester::Agent(self.agent), path, access)
    }

    /// The text of `path` (at most [`MAX_FILE_BYTES`]), `None` when there
    /// is no such file.
    fn read(&self, path: &str) -> Result<Option<String>> {
        let file = self.resolve(path, Access::Read)?;
        let mut data = Vec::new();
        loop {
            let read = match files::read(&file, data.len() as u64, None) {
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                other => other?,
            };
            if read.size > MAX_FILE_BYTES {
                return Err(Error::Denied {
                    path: file.display,
                    reason: format!("{} bytes is more than a memory file may hold ({MAX_FILE_BYTES})", read.size),
                });
            }
            data.extend_from_slice(&read.data);
            if read.eof || read.data.is_empty() {
                break;
            }
        }
        String::from_utf8(data)
            .map(Some)
            .map_err(|_| Error::Denied { path: file.display, reason: "not UTF-8 text".into() })
    }

    /// Stores `content` as a new entry of `category` at `at` (RFC 3339 UTC):
    /// appended to the category's file (created with a title when new)
    /// and indexed before this returns, so the next recall finds it.
    pub fn store(&self, index: &mut MemoryIndex, category: &Category, content: &str, at: &str) -> Result<MemoryEntry> {
        self.store_as(index, category, content, at, entry_id(self.agent, at, content.trim()))
    }

    /// Stores like [`AgentMemory::store`] once per `key`: the entry's ID is
    /// derived from the key, so a store asked for again with the same key
    /// (a caller resuming after a crash) answers with the entry it made
    /// the first time instead of adding a second.
    pub fn store_once(
        &self,
        index: &mut MemoryIndex,
        category: &Category,
        content: &str,
        at: &str,
        key: &str,
    ) -> Result<MemoryEntry> {
        let digest = Sha256::new().chain_update(self.agent).chain_update([0]).chain_update(key).finalize();
        let id = format!("m{}", &fsutil::hex(&digest)[..12]);
        match self.get(&id) {
            Ok(stored) => Ok(stored),
            Err(Error::NoSuchMemory { .. }) => self.store_as(index, category, content, at, id),
            Err(error) => Err(error),
        }
    }

    fn store_as(
        &self,
        index: &mut MemoryIndex,
        category: &Category,
        content: &str,
        at: &str,
        id: String,
    ) -> Result<MemoryEntry> {
        let content = content.trim();
        let refuse = |reason: String| Error::Denied { path: format!("/clawfs/agents/{}/memory", self.agent), reason };
        if content.is_empty() {
            return Err(refuse("an empty memory".into()));
        }
        if content.len() > MAX_ENTRY_BYTES {
            return Err(refuse(format!(
                "{} bytes is more than an entry may hold ({MAX_ENTRY_BYTES}); write a file instead",
                content.len()
            )));
        }
        let path = category.file(&at[..10]);
        let mut text = String::new();
        let file = self.resolve(&path, Access::Write)?;
        match fs::symlink_metadata(&file.real).map(|m| m.len()) {
            Ok(size) if size >= MAX_FILE_BYTES => {
                return Err(refuse(format!("{path} holds {size} bytes, the most a memory file may ({MAX_FILE_BYTES}); forget entries or store in another category")));
            }
            Ok(size) if size > 0 => {}
            _ => {
                self.make_parent(&path)?;
                text.push_str(&category.header(&at[..10]));
            }
        }
        text.push_str(&render_entry(at, &id, content));
        // Appended: an edit the agent or the operator makes to the same
        // file at the same moment is not lost (a rewrite could lose it).
        files::write(&file, text.as_bytes(), WriteMode::Append)?;
        self.sync(index, &path)?;
        Ok(MemoryEntry {
            id,
            category: category.name().to_owned(),
            path,
            at: at.to_owned(),
            content: content.to_owned(),
        })
    }

    /// Every entry, in file order, of `category` (all when `None`).
    fn entries(&self, category: Option<&Category>) -> Result<Vec<MemoryEntry>> {
        let mut entries = Vec::new();
        for path in self.files()? {
            let Some(of_file) = Category::of_file(&path) else { continue };
            if category.is_some_and(|wanted| *wanted != of_file) {
                continue;
            }
            if let Some(text) = self.read(&path)? {
                entries.extend(parse_entries(&text).into_iter().map(|parsed| MemoryEntry {
                    id: parsed.id,
                    category: of_file.name().to_owned(),
                    path: path.clone(),
                    at: parsed.at,
                    content: unescape(&text[parsed.body.clone()]),
                }));
            }
        }
        Ok(entries)
    }

    /// The entry `id`.
    pub fn get(&self, id: &str) -> Result<MemoryEntry> {
        self.entries(None)?.into_iter().find(|entry| entry.id == id).ok_or_else(|| self.no_such(id))
    }

    fn no_such(&self, id: &str) -> Error {
        Error::NoSuchMemory { agent: self.agent.to_owned(), id: id.to_owned() }
    }

    /// The newest `limit` entries of `category` (all when `None`), newest first.
    pub fn list(&self, category: Option<&Category>, limit: usize) -> Result<Vec<MemoryEntry>> {
        let mut entries = self.entries(category)?;
        entries.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| b.id.cmp(&a.id)));
        entries.truncate(limit);
        Ok(entries)
    }

    /// How many entries `category` has (all when `None`).
    pub fn count(&self, category: Option<&Category>) -> Result<usize> {
        Ok(self.entries(category)?.len())
    }

    /// Removes entry `id` from its file and from the index; returns it.
    pub fn forget(&self, index: &mut MemoryIndex, id: &str) -> Result<MemoryEntry> {
        let entry = self.get(id)?;
        let text = self.read(&entry.path)?.ok_or_else(|| self.no_such(id))?;
        let parsed = parse_entries(&text).into_iter().find(|parsed| parsed.id == id).ok_or_else(|| self.no_such(id))?;
        let kept = format!("{}{}", &text[..parsed.section.start], &text[parsed.section.end..]);
        files::write(&self.resolve(&entry.path, Access::Write)?, kept.as_bytes(), WriteMode::Replace)?;
        self.sync(index, &entry.path)?;
        Ok(entry)
    }

    /// Hybrid search of every indexed file of the agent; entries of
    /// `category` only when one is given.
    pub fn recall(
        &self,
        index: &MemoryIndex,
        query: &str,
        category: Option<&Category>,
        limit: usize,
    ) -> Result<Recall> {
        // A filter or an entry cut into several chunks leaves fewer
        // results than asked: ask the index for more.
        let mut request = SearchRequest::new(query);
        request.limit = limit.saturating_mul(4).max(20);
        let response = index.search(&request)?;
        let mut seen = HashSet::new();
        let results = response
            .results
            .into_iter()
            .filter_map(|hit| {
                let of_file = Category::of_file(&hit.path);
                if category.is_some_and(|wanted| of_file.as_ref() != Some(wanted)) {
                    return None;
                }
                let id = hit.heading.split(" > ").find_map(heading_id).map(str::to_owned);
                let key = id.clone().unwrap_or_else(|| hit.chunk_id.clone());
                seen.insert(key).then(|| RecallHit {
                    id,
                    category: of_file.map(|c| c.name().to_owned()),
                    path: hit.path,
                    heading: hit.heading,
                    content: unescape(&hit.content),
                    score: hit.score,
                    keyword_score: hit.keyword_score,
                    vector_score: hit.vector_score,
                })
            })
            .take(limit)
            .collect();
        Ok(Recall { results, keyword: response.keyword, vector: response.vector })
    }

    /// Brings the index in step with file `path` (relative to the agent's
    /// directory) as it is on disk now: indexed when it is a memory file,
    /// removed from the index when it is gone or no longer one.
    pub fn sync(&self, index: &mut MemoryIndex, path: &str) -> Result<IndexReport> {
        let text = if is_indexed(path) { self.read(path)? } else { None };
        match text {
            Some(text) => index.index_document(path, &text),
            None => Ok(IndexReport { removed: index.remove_document(path)?, ..IndexReport::default() }),
        }
    }

    /// Brings the index in step with every file: each memory file is
    /// indexed (only changed chunks are embedded), and documents whose file
    /// is gone are removed. What fs-engine runs at start for changes made
    /// while it was not watching.
    pub fn sync_all(&self, index: &mut MemoryIndex) -> Result<IndexReport> {
        let on_disk = self.files()?;
        let mut report = IndexReport::default();
        for path in index.documents()?.into_iter().filter(|path| !on_disk.contains(path)) {
            report.removed += index.remove_document(&path)?;
        }
        for path in &on_disk {
            let step = self.sync(index, path)?;
            report.added += step.added;
            report.removed += step.removed;
            report.unchanged += step.unchanged;
        }
        Ok(report)
    }

    /// Rebuilds the index from the files alone: every document is removed,
    /// then every memory file indexed afresh (and embedded again).
    pub fn reindex(&self, index: &mut MemoryIndex) -> Result<Reindexed> {
        for path in index.documents()? {
            index.remove_document(&path)?;
        }
        let on_disk = self.files()?;
        let mut texts = Vec::new();
        for path in &on_disk {
            if let Some(text) = self.read(path)? {
                texts.push((path.as_str(), text));
            }
        }
        let documents: Vec<(&str, &str)> = texts.iter().map(|(path, text)| (*path, text.as_str())).collect();
        index.index_documents(&documents)?;
        Ok(Reindexed { files: documents.len(), chunks: index.chunk_count()?, vectors: index.vector_count() })
    }

    /// Moves daily logs older than `archive_after_days` to `archive/logs/`
    /// (out of the index, still readable) and deletes archived logs older
    /// than `purge_after_days`; `today` is days since 1970-01-01 (UTC).
    pub fn hygiene(
        &self,
        index: &mut MemoryIndex,
        archive_after_days: u32,
        purge_after_days: u32,
        today: i64,
    ) -> Result<Hygiene> {
        let mut report = Hygiene::default();
        let age = |name: &str| name.strip_suffix(".md").and_then(fsutil::days_from_date).map(|day| today - day);
        let archive = archived_logs();
        for name in self.names_in(LOGS_DIR)? {
            if age(&name).is_some_and(|age| age > i64::from(archive_after_days)) {
                let from = self.resolve(&format!("{LOGS_DIR}/{name}"), Access::Write)?;
                let to = self.make_parent(&format!("{archive}/{name}"))?;
                fs::rename(&from.real, &to.real).map_err(io("rename", &from.real))?;
                index.remove_document(&format!("{LOGS_DIR}/{name}"))?;
                report.archived.push(format!("{LOGS_DIR}/{name}"));
            }
        }
        for name in self.names_in(&archive)? {
            if age(&name).is_some_and(|age| age > i64::from(purge_after_days)) {
                files::delete(&self.resolve(&format!("{archive}/{name}"), Access::Write)?)?;
                report.purged.push(format!("{archive}/{name}"));
            }
        }
        Ok(report)
    }

    /// Creates the missing directories above `path` (each checked like
    /// any path of the agent's) and returns `path` resolved for writing.
    fn make_parent(&self, path: &str) -> Result<Resolved> {
        if let Some((parent, _)) = path.rsplit_once('/') {
            files::make_dir(&self.resolve(parent, Access::Write)?)?;
        }
        self.resolve(path, Access::Write)
    }

    /// The names of the regular files in directory `dir` of the agent
    /// (none when it does not exist), sorted.
    fn names_in(&self, dir: &str) -> Result<Vec<String>> {
        let dir = self.resolve(dir, Access::Read)?;
        match files::list(&dir) {
            Ok(entries) => {
                Ok(entries.into_iter().filter(|e| e.kind == files::EntryKind::File).map(|e| e.name).collect())
            }
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(error) => Err(error),
        }
    }

    /// Every memory file of the agent ([`is_indexed`]), relative, sorted.
    pub fn files(&self) -> Result<Vec<String>> {
        let mut found = Vec::new();
        let mut pending = vec![String::new()];
        while let Some(dir) = pending.pop() {
            let listing = self.resolve(if dir.is_empty() { "." } else { &dir }, Access::Read)?;
            for entry in files::list(&listing)? {
                let path = if dir.is_empty() { entry.name.clone() } else { format!("{dir}/{}", entry.name) };
                match entry.kind {
                    files::EntryKind::File if is_indexed(&path) => found.push(path),
                    files::EntryKind::Dir
                        if path.split('/').count() < MAX_DEPTH && is_indexed(&format!("{path}/x.md")) =>
                    {
                        pending.push(path)
                    }
                    _ => {}
                }
            }
        }
        found.sort();
        Ok(found)
    }
}

/// Entry `id` stored at `at` with `content` as it is appended to its file.
pub fn render_entry(at: &str, id: &str, content: &str) -> String {
    format!("\n## {at} [{id}]\n{}\n", escape(content))
}

/// A new entry's ID: `m` and 12 hex digits of a hash of who, when and what
/// (and the clock's nanoseconds, so the same text stored twice in one
/// second gets two IDs).
pub fn entry_id(agent: &str, at: &str, content: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let digest = Sha256::new()
        .chain_update(agent)
        .chain_update([0])
        .chain_update(at)
        .chain_update([0])
        .chain_update(content)
        .chain_update(nanos.to_le_bytes())
        .finalize();
    format!("m{}", &fsutil::hex(&digest)[..12])
}

/// The entry ID in a heading title `<at> [<id>]`, if it has one.
fn heading_id(title: &str) -> Option<&str> {
    let id = title.strip_suffix(']')?.rsplit_once(" [")?.1;
    (id.len() == 13 && id.starts_with('m') && id[1..].bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
        .then_some(id)
}

/// Where an entry is in its file's text.
#[derive(Debug)]
struct ParsedEntry {
    id: String,
    at: String,
    /// The heading line through the end of the body.
    section: std::ops::Range<usize>,
    /// The body, trimmed.
    body: std::ops::Range<usize>,
}

/// The entries of a file's text: each `## <at> [<id>]` section up to the
/// next heading of level 1 or 2 (deeper headings belong to the entry;
/// headings in code fences are code).
fn parse_entries(text: &str) -> Vec<ParsedEntry> {
    let mut entries = Vec::new();
    let mut open: Option<(String, String, usize, usize)> = None;
    let mut in_fence = false;
    let mut offset = 0;
    let close = |open: &mut Option<(String, String, usize, usize)>, end: usize, entries: &mut Vec<ParsedEntry>| {
        if let Some((id, at, start, body_start)) = open.take() {
            let raw = &text[body_start..end];
            let lead = raw.len() - raw.trim_start().len();
            let body = body_start + lead..body_start + lead + raw.trim().len();
            entries.push(ParsedEntry { id, at, section: start..end, body });
        }
    };
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        if let Some((level, title)) =
            (!in_fence).then(|| heading(line.trim_end())).flatten().filter(|(level, _)| *level <= 2)
        {
            close(&mut open, offset, &mut entries);
            if let (2, Some(id)) = (level, heading_id(title)) {
                let at = title[..title.len() - id.len() - 3].trim().to_owned();
                open = Some((id.to_owned(), at, offset, offset + line.len()));
            }
        }
        offset += line.len();
    }
    close(&mut open, text.len(), &mut entries);
    entries
}

/// Keeps an entry's own lines from reading as structure: a line that would
/// start a heading or a code fence gets a backslash, which Markdown shows
/// as the character itself.
fn escape(content: &str) -> String {
    content
        .lines()
        .map(|line| if starts_structure(line) { format!("\\{line}") } else { line.to_owned() })
        .collect::<Vec<_>>()
        .join("\n")
}

fn starts_structure(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.starts_with('#') || trimmed.starts_with("```") || trimmed.starts_with("~~~")
}

/// The inverse of [`escape`].
fn unescape(text: &str) -> String {
    text.lines()
        .map(|line| match line.strip_prefix('\\') {
            Some(rest) if starts_structure(rest) => rest,
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{HnswParams, WorkspaceMetadata};
    use crate::namespace::{create_namespace, Owners};
    use crate::HashingEmbedder;
    use std::sync::Arc;

    const AT: &str = "2026-11-25T10:00:00Z";

    fn setup() -> (tempfile::TempDir, MemoryIndex) {
        let dir = tempfile::tempdir().unwrap();
        create_namespace(dir.path(), Owners::Keep).unwrap();
        let index = open(dir.path());
        (dir, index)
    }

    fn open(root: &Path) -> MemoryIndex {
        let metadata = WorkspaceMetadata {
            workspace_id: "agents/default".into(),
            created_at: AT.into(),
            updated_at: AT.into(),
            vector_dimension: 128,
            hnsw_params: HnswParams::default(),
            owner: "default".into(),
            encryption_enabled: false,
        };
        MemoryIndex::open(&root.join("agents/default"), &metadata, Some(Arc::new(HashingEmbedder::new(128)))).unwrap()
    }

    #[test]
    fn stored_entries_are_markdown_the_operator_can_read_and_come_back_whole() {
        let (dir, mut index) = setup();
        let memory = AgentMemory::new(dir.path(), "default").unwrap();
        let text = "The operator's dog is called Rex.\n# not a heading\n```\nnot a fence\n```";
        let core = memory.store(&mut index, &Category::Core, text, AT).unwrap();
        let daily =
            memory.store(&mut index, &Category::Daily, "Backed up the router config.", "2026-11-25T11:00:00Z").unwrap();
        let custom =
            memory.store(&mut index, &Category::parse("projects").unwrap(), "ClawOS ships on USB sticks.", AT).unwrap();
        assert_eq!(
            (core.path.as_str(), daily.path.as_str(), custom.path.as_str()),
            ("memory.md", "logs/2026-11-25.md", "memory/projects.md")
        );
        let file = fs::read_to_string(dir.path().join("agents/default/memory.md")).unwrap();
        assert!(file.starts_with("# Memory\n"), "{file}");
        assert!(
            file.contains(&format!(
                "## {AT} [{}]\nThe operator's dog is called Rex.\n\\# not a heading\n\\```",
                core.id
            )),
            "{file}"
        );
        assert_eq!(memory.get(&core.id).unwrap(), core);
        assert_eq!(memory.get(&core.id).unwrap().content, text);
        assert_eq!(memory.count(None).unwrap(), 3);
        assert_eq!(memory.count(Some(&Category::Daily)).unwrap(), 1);
        let listed: Vec<String> = memory.list(None, 2).unwrap().into_iter().map(|e| e.id).collect();
        assert_eq!(listed, [daily.id.clone(), custom.id.max(core.id.clone())]);
        assert!(matches!(memory.get("m000000000000"), Err(Error::NoSuchMemory { .. })));
    }

    #[test]
    fn recall_finds_entries_and_operator_text_and_filters_by_category() {
        let (dir, mut index) = setup();
        let memory = AgentMemory::new(dir.path(), "default").unwrap();
        let stored = memory.store(&mut index, &Category::Core, "The backup server is called nightjar.", AT).unwrap();
        memory.store(&mut index, &Category::Daily, "Rebooted nightjar after the kernel update.", AT).unwrap();
        // The operator writes a paragraph of their own over SSH.
        fs::write(dir.path().join("agents/default/user.md"), "# User\n\nPrefers answers about nightjar in French.\n")
            .unwrap();
        memory.sync(&mut index, "user.md").unwrap();
        let all = memory.recall(&index, "nightjar", None, 10).unwrap();
        assert_eq!(all.results.len(), 3, "{all:?}");
        let core = memory.recall(&index, "nightjar", Some(&Category::Core), 10).unwrap();
        assert_eq!(core.results.len(), 1);
        assert_eq!(
            (core.results[0].id.as_deref(), core.results[0].category.as_deref()),
            (Some(stored.id.as_str()), Some("core"))
        );
        let user = all.results.iter().find(|hit| hit.path == "user.md").unwrap();
        assert_eq!((user.id.as_deref(), user.category.as_deref()), (None, None));
    }

    #[test]
    fn forget_removes_from_the_file_and_the_index() {
        let (dir, mut index) = setup();
        let memory = AgentMemory::new(dir.path(), "default").unwrap();
        let keep = memory.store(&mut index, &Category::Core, "Keep: the garage code changes monthly.", AT).unwrap();
        let gone = memory.store(&mut index, &Category::Core, "Forget: the pelican password hint.", AT).unwrap();
        assert_eq!(memory.forget(&mut index, &gone.id).unwrap().id, gone.id);
        let file = fs::read_to_string(dir.path().join("agents/default/memory.md")).unwrap();
        assert!(!file.contains("pelican") && file.contains("garage"), "{file}");
        assert!(memory
            .recall(&index, "pelican", None, 10)
            .unwrap()
            .results
            .iter()
            .all(|hit| !hit.content.contains("pelican")));
        assert_eq!(memory.get(&keep.id).unwrap(), keep);
        assert!(matches!(memory.forget(&mut index, &gone.id), Err(Error::NoSuchMemory { .. })));
    }

    #[test]
    fn reindex_from_the_files_alone_gives_the_same_results() {
        let (dir, mut index) = setup();
        let memory = AgentMemory::new(dir.path(), "default").unwrap();
        for (n, fact) in ["solar panels face south", "the well pump is on circuit 7", "solar inverter firmware 2.1"]
            .iter()
            .enumerate()
        {
            memory.store(&mut index, &Category::Core, fact, &format!("2026-11-2{n}T00:00:00Z")).unwrap();
        }
        memory.sync_all(&mut index).unwrap();
        let before = memory.recall(&index, "solar firmware", None, 10).unwrap();
        drop(index);
        // Lose the derived index entirely: the files are the truth.
        for name in [crate::HNSW_FILE, crate::HNSW_SIDECAR_FILE] {
            fs::remove_file(dir.path().join("agents/default").join(name)).unwrap();
        }
        let mut index = open(dir.path());
        let report = memory.reindex(&mut index).unwrap();
        assert_eq!((report.files, report.chunks), (memory.files().unwrap().len(), index.chunk_count().unwrap()));
        assert!(report.chunks >= 3);
        assert_eq!(memory.recall(&index, "solar firmware", None, 10).unwrap(), before);
    }

    #[test]
    fn sync_all_catches_edits_and_deletions_made_while_nobody_watched() {
        let (dir, mut index) = setup();
        let memory = AgentMemory::new(dir.path(), "default").unwrap();
        memory.store(&mut index, &Category::parse("garden").unwrap(), "Tomatoes go in after the frost.", AT).unwrap();
        fs::remove_file(dir.path().join("agents/default/memory/garden.md")).unwrap();
        fs::write(dir.path().join("agents/default/instructions/tone.md"), "Answer about the greenhouse briefly.\n")
            .unwrap();
        fs::write(dir.path().join("agents/default/cache/scratch.md"), "greenhouse scratch\n").unwrap();
        memory.sync_all(&mut index).unwrap();
        let hits = memory.recall(&index, "tomatoes greenhouse", None, 10).unwrap().results;
        assert!(hits.iter().all(|hit| !hit.content.contains("Tomatoes") && hit.path != "cache/scratch.md"), "{hits:?}");
        assert_eq!(hits[0].path, "instructions/tone.md");
    }

    #[test]
    fn hygiene_archives_old_daily_logs_and_purges_old_archives() {
        let (dir, mut index) = setup();
        let memory = AgentMemory::new(dir.path(), "default").unwrap();
        for date in ["2026-01-01", "2026-11-01", "2026-11-24"] {
            memory
                .store(&mut index, &Category::Daily, &format!("kestrel seen on {date}"), &format!("{date}T08:00:00Z"))
                .unwrap();
        }
        let today = fsutil::days_from_date("2026-11-25").unwrap();
        let report = memory.hygiene(&mut index, 30, 365, today).unwrap();
        assert_eq!(report.archived, ["logs/2026-01-01.md"]);
        assert!(dir.path().join("agents/default/archive/logs/2026-01-01.md").is_file());
        assert_eq!(memory.recall(&index, "kestrel", None, 10).unwrap().results.len(), 2);
        assert_eq!(memory.count(Some(&Category::Daily)).unwrap(), 2);
        let report = memory.hygiene(&mut index, 30, 365, today + 100).unwrap();
        assert_eq!(report.purged, ["archive/logs/2026-01-01.md"]);
        assert_eq!(report.archived.len(), 2);
    }

    #[test]
    fn a_store_with_a_key_is_made_once() {
        let (dir, mut index) = setup();
        let memory = AgentMemory::new(dir.path(), "default").unwrap();
        let first = memory
            .store_once(&mut index, &Category::Core, "The spare key is under the blue pot.", AT, "s-1/4/call-7")
            .unwrap();
        let again = memory
            .store_once(
                &mut index,
                &Category::Core,
                "The spare key is under the blue pot.",
                "2026-11-26T00:00:00Z",
                "s-1/4/call-7",
            )
            .unwrap();
        assert_eq!(again, first);
        assert_eq!(memory.count(None).unwrap(), 1);
        let other = memory
            .store_once(&mut index, &Category::Core, "The spare key is under the blue pot.", AT, "s-1/4/call-8")
            .unwrap();
        assert_ne!(other.id, first.id);
        assert_eq!(memory.count(None).unwrap(), 2);
    }

    #[test]
    fn bad_input_is_refused_and_changes_nothing() {
        let (dir, mut index) = setup();
        let memory = AgentMemory::new(dir.path(), "default").unwrap();
        assert!(memory.store(&mut index, &Category::Core, "  \n ", AT).is_err());
        assert!(memory.store(&mut index, &Category::Core, &"x".repeat(MAX_ENTRY_BYTES + 1), AT).is_err());
        for bad in ["", "Core", "a/b", "../x", &"a".repeat(33)] {
            assert!(Category::parse(bad).is_err(), "{bad}");
        }
        assert!(AgentMemory::new(dir.path(), "nobody").is_err());
        assert_eq!(memory.count(None).unwrap(), 0);
        // A symlink planted as a category file is not followed.
        fs::create_dir(dir.path().join("agents/default/memory")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("agents/default/memory/evil.md")).unwrap();
        assert!(memory.store(&mut index, &Category::parse("evil").unwrap(), "x", AT).is_err());
    }

    #[test]
    fn a_memory_file_larger_than_one_transfer_is_read_whole() {
        let (dir, _index) = setup();
        let memory = AgentMemory::new(dir.path(), "default").unwrap();
        let mut text = Category::Core.header("2026-11-25");
        for n in 0..6000 {
            text.push_str(&render_entry(
                AT,
                &format!("m{n:012x}"),
                &format!("fact number {n} about the {}", "lighthouse ".repeat(20)),
            ));
        }
        assert!(text.len() > files::MAX_TRANSFER_BYTES);
        fs::write(dir.path().join("agents/default/memory.md"), &text).unwrap();
        assert_eq!(memory.count(Some(&Category::Core)).unwrap(), 6000);
        assert!(memory.get("m000000001000").unwrap().content.starts_with("fact number 4096 "));
    }

    #[test]
    fn only_memory_files_are_indexed() {
        for yes in ["memory.md", "soul.md", "logs/2026-11-25.md", "instructions/a.md", "memory/x/y.md"] {
            assert!(is_indexed(yes), "{yes}");
        }
        for no in ["config.toml", "cache/a.md", "archive/logs/2026-01-01.md", ".hidden.md", "a/b/c/d.md", "logs/.x.md"]
        {
            assert!(!is_indexed(no), "{no}");
        }
    }
}

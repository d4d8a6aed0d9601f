//! The memory pages (specs/console/README.md, "Memory"): an agent's brain
//! files, each editable, and a search of its memory that shows both legs'
//! scores and where each result comes from.
//!
//! An edit is a `write_file` as the agent, so it passes the same ClawFS
//! rules as the agent's own writes, and fs-engine's watcher re-indexes the
//! file as it does after any change. An edit made from a page that is out
//! of date is refused: the form carries the SHA-256 of the text it showed,
//! and a file that has changed since is not overwritten.
//!
//! Owns: these pages. Must not own: the rules (fs-engine) or the index.

use askama::Template;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use clawos_api::fs_engine::LegReport;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::calls;
use crate::pages::{call_failed, render, Message};

/// The directories of an agent's whose Markdown files the page lists: its
/// own (the brain files: `soul.md`, `identity.md`, `user.md`, `memory.md`)
/// and `memory/`, where categories of its own are kept
/// (specs/agent/README.md, "Memory").
const LISTED_DIRS: [&str; 2] = ["", "memory"];

/// How many results a search shows.
const SEARCH_LIMIT: usize = 10;

/// A file the page lists.
struct FileRow {
    path: String,
    size: u64,
}

/// One search result.
struct Hit {
    path: String,
    heading: String,
    entry: String,
    content: String,
    score: String,
    keyword: String,
    vector: String,
}

#[derive(Template)]
#[template(path = "memory.html")]
struct MemoryPage {
    agent: String,
    files: Vec<FileRow>,
    query: String,
    hits: Vec<Hit>,
    legs: String,
    saved: String,
}

/// `GET /memory/{agent}`'s query: a search, or the file just saved.
#[derive(Deserialize)]
pub struct MemoryQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    saved: String,
}

/// A score as the page shows it; `—` when that leg did not find the text.
fn score(value: Option<f32>) -> String {
    value.map_or_else(|| "—".to_owned(), |v| format!("{v:.3}"))
}

/// `GET /memory/{agent}[?q=]`: the agent's memory files and, with a query,
/// what recall finds for it.
pub async fn page(Path(agent): Path<String>, Query(query): Query<MemoryQuery>) -> Response {
    let mut files = Vec::new();
    for dir in LISTED_DIRS {
        let listing = match calls::list_dir(&agent, dir).await {
            Ok(listing) => listing,
            Err(error) => return call_failed("Memory", &error),
        };
        let entries = listing.map(|l| l.entries).unwrap_or_default();
        for entry in entries.into_iter().filter(|e| editable(&entry_path(dir, &e.name))) {
            files.push(FileRow { path: entry_path(dir, &entry.name), size: entry.size });
        }
    }
    let (mut hits, mut legs) = (Vec::new(), String::new());
    let q = query.q.trim();
    if !q.is_empty() {
        let recall = match calls::memory_recall(&agent, q, SEARCH_LIMIT).await {
            Ok(recall) => recall,
            Err(error) => return call_failed("Memory search", &error),
        };
        legs = format!("keyword leg: {}; vector leg: {}", leg(&recall.keyword), leg(&recall.vector));
        hits = recall
            .results
            .into_iter()
            .map(|hit| Hit {
                entry: match (&hit.id, &hit.category) {
                    (Some(id), Some(category)) => format!("entry {id} ({category})"),
                    (Some(id), None) => format!("entry {id}"),
                    _ => String::new(),
                },
                score: format!("{:.3}", hit.score),
                keyword: score(hit.keyword_score),
                vector: score(hit.vector_score),
                path: hit.path,
                heading: hit.heading,
                content: hit.content,
            })
            .collect();
    }
    let page = MemoryPage { agent, files, query: q.to_owned(), hits, legs, saved: query.saved };
    render(StatusCode::OK, &page)
}

/// What one leg did, as the page says it.
fn leg(report: &LegReport) -> String {
    match report {
        LegReport::Ran { candidates } => format!("{candidates} candidates"),
        LegReport::NotRun { reason } => format!("did not run ({reason})"),
    }
}

fn entry_path(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// Whether the pages edit `path`: a Markdown file of the listed
/// directories, named plainly. fs-engine's rules still decide the write.
fn editable(path: &str) -> bool {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    LISTED_DIRS.contains(&dir)
        && name.ends_with(".md")
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The SHA-256 of a text, hex: what an edit form says it started from.
fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|byte| format!("{byte:02x}")).collect()
}

#[derive(Template)]
#[template(path = "edit.html")]
struct EditPage {
    agent: String,
    path: String,
    content: String,
    base: String,
    note: String,
}

/// `GET /memory/{agent}/edit`'s query.
#[derive(Deserialize)]
pub struct EditQuery {
    path: String,
}

fn refused(title: &str, status: StatusCode, text: &str) -> Response {
    render(status, &Message { title, text, show_login_help: false })
}

/// The file's text as an edit starts from it: `""` when it does not exist
/// yet; an error page when it cannot be edited here.
async fn current(agent: &str, path: &str) -> Result<String, Response> {
    if !editable(path) {
        return Err(refused("Edit", StatusCode::NOT_FOUND, "Only an agent's Markdown memory files are edited here."));
    }
    match calls::read_file(agent, path).await {
        Ok(None) => Ok(String::new()),
        Ok(Some(file)) => match (file.eof, file.content) {
            (true, Some(text)) => Ok(text),
            (false, _) => Err(refused(
                "Edit",
                StatusCode::PAYLOAD_TOO_LARGE,
                "This file is larger than one message: edit it over SSH.",
            )),
            (true, None) => Err(refused("Edit", StatusCode::UNPROCESSABLE_ENTITY, "This file is not UTF-8 text.")),
        },
        Err(error) => Err(call_failed("Edit", &error)),
    }
}

/// `GET /memory/{agent}/edit?path=`: the file in a text area.
pub async fn edit(Path(agent): Path<String>, Query(query): Query<EditQuery>) -> Response {
    match current(&agent, &query.path).await {
        Ok(content) => {
            let page = EditPage { base: digest(&content), agent, path: query.path, content, note: String::new() };
            render(StatusCode::OK, &page)
        }
        Err(page) => page,
    }
}

/// `POST /memory/{agent}/edit`'s form.
#[derive(Deserialize)]
pub struct EditForm {
    path: String,
    content: String,
    /// The SHA-256 of the text the form showed.
    base: String,
}

/// `POST /memory/{agent}/edit`: writes the file, unless it changed since
/// the form was loaded (409, the form again with the file as it is now and
/// the operator's text kept below it).
pub async fn save(Path(agent): Path<String>, Form(form): Form<EditForm>) -> Response {
    let now = match current(&agent, &form.path).await {
        Ok(now) => now,
        Err(page) => return page,
    };
    // A browser sends a text area's lines ending in CR LF (the HTML form
    // encoding); the files are written as the agent writes them, LF.
    let content = form.content.replace("\r\n", "\n");
    if digest(&now) != form.base {
        let note = format!(
            "The file changed after you opened it, so nothing was saved. It is shown as it is now; your text was:\n\n{content}"
        );
        let page = EditPage { base: digest(&now), agent, path: form.path, content: now, note };
        return render(StatusCode::CONFLICT, &page);
    }
    match calls::write_file(&agent, &form.path, content).await {
        Ok(()) => {
            let to = format!("/memory/{agent}?saved={}", form.path);
            Redirect::to(&to).into_response()
        }
        Err(error) => call_failed("Edit", &error),
    }
}

#[cfg(test)]
mod tests {
    use super::editable;

    #[test]
    fn only_plain_markdown_files_of_the_listed_directories_are_edited() {
        for path in ["memory.md", "soul.md", "memory/projects.md"] {
            assert!(editable(path), "{path}");
        }
        for path in [
            "../other/memory.md",
            "logs/2026-12-01.md",
            "memory/../soul.md",
            ".hidden.md",
            "workspace.db",
            "memory/a b.md",
            "",
        ] {
            assert!(!editable(path), "{path}");
        }
    }
}

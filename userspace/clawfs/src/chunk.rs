//! Markdown-aware chunking. A document is cut at its headings, and a long
//! section at paragraph boundaries, so every chunk is about one thing and
//! carries the heading path that says what. Chunk IDs are derived from
//! (path, heading, ordinal, content hash): editing one section changes only
//! that section's IDs, which is what lets re-indexing skip the rest.

use fsutil::hex;
use sha2::{Digest, Sha256};

/// Longest chunk body, in bytes, before a section is split at paragraphs.
/// About 250 tokens: small enough for precise hits, big enough for context.
pub const MAX_CHUNK_BYTES: usize = 1200;

/// One piece of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Stable ID: hex SHA-256 of path, heading, ordinal and content hash.
    pub id: String,
    /// The document's path.
    pub path: String,
    /// The heading path, e.g. `Install > Disks`; empty before the first heading.
    pub heading: String,
    /// Position of this chunk within its heading's section, from 0.
    pub ordinal: u32,
    /// The text.
    pub content: String,
}

/// Cuts `text` (Markdown) from `path` into chunks. Headings inside fenced
/// code blocks are code, not structure.
pub fn chunk_markdown(path: &str, text: &str) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut headings: Vec<(usize, String)> = Vec::new();
    let mut section = String::new();
    let mut in_fence = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        if let Some((level, title)) = (!in_fence).then(|| heading(line)).flatten() {
            flush(path, &headings, &section, &mut chunks);
            section.clear();
            headings.retain(|(outer, _)| *outer < level);
            headings.push((level, title.to_owned()));
            continue;
        }
        section.push_str(line);
        section.push('\n');
    }
    flush(path, &headings, &section, &mut chunks);
    chunks
}

/// `(level, title)` of an ATX heading (`# Title` .. `###### Title`).
pub(crate) fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    let rest = &line[level..];
    let is_heading = (1..=6).contains(&level) && (rest.is_empty() || rest.starts_with(' '));
    is_heading.then(|| (level, rest.trim().trim_end_matches('#').trim()))
}

fn flush(path: &str, headings: &[(usize, String)], section: &str, chunks: &mut Vec<Chunk>) {
    let heading = headings.iter().map(|(_, title)| title.as_str()).collect::<Vec<_>>().join(" > ");
    for (ordinal, body) in (0..).zip(split_paragraphs(section.trim(), MAX_CHUNK_BYTES)) {
        chunks.push(Chunk {
            id: chunk_id(path, &heading, ordinal, &body),
            path: path.to_owned(),
            heading: heading.clone(),
            ordinal,
            content: body,
        });
    }
}

/// Groups paragraphs into bodies of at most `max` bytes; a single longer
/// paragraph is cut at a character boundary.
fn split_paragraphs(section: &str, max: usize) -> Vec<String> {
    let mut bodies = Vec::new();
    let mut current = String::new();
    for paragraph in section.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        if !current.is_empty() && current.len() + 2 + paragraph.len() > max {
            bodies.push(std::mem::take(&mut current));
        }
        let mut rest = paragraph;
        while rest.len() > max {
            let mut cut = max;
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            bodies.push(rest[..cut].to_owned());
            rest = &rest[cut..];
        }
        if !current.is_empty() {
            current.push_str("\n\n");
        }
        current.push_str(rest);
    }
    if !current.is_empty() {
        bodies.push(current);
    }
    bodies
}

/// The ID of a chunk. Fields are NUL-separated so no two different tuples
/// produce the same input.
pub fn chunk_id(path: &str, heading: &str, ordinal: u32, content: &str) -> String {
    let content_hash = Sha256::digest(content.as_bytes());
    let mut hasher = Sha256::new();
    for field in [path.as_bytes(), heading.as_bytes(), ordinal.to_string().as_bytes(), &content_hash] {
        hasher.update(field);
        hasher.update([0]);
    }
    hex(&hasher.finalize()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "Intro line.\n\n# Install\n\nBoot the image.\n\n## Disks\n\nThe data partition.\n\n```sh\n# not a heading\n```\n\n# Use\n\nRun clawctl.\n";

    #[test]
    fn cuts_at_headings_with_heading_paths() {
        let chunks = chunk_markdown("guide.md", DOC);
        let summary: Vec<_> = chunks.iter().map(|c| (c.heading.as_str(), c.ordinal)).collect();
        assert_eq!(summary, [("", 0), ("Install", 0), ("Install > Disks", 0), ("Use", 0)]);
        assert!(chunks[2].content.contains("# not a heading"));
        assert_eq!(chunks[3].content, "Run clawctl.");
    }

    #[test]
    fn ids_are_stable_and_change_only_where_content_does() {
        let before = chunk_markdown("guide.md", DOC);
        assert_eq!(before, chunk_markdown("guide.md", DOC));
        let after = chunk_markdown("guide.md", &DOC.replace("Run clawctl.", "Run clawctl status."));
        let changed: Vec<_> =
            before.iter().zip(&after).filter(|(a, b)| a.id != b.id).map(|(a, _)| a.heading.as_str()).collect();
        assert_eq!(changed, ["Use"]);
        assert_ne!(before[0].id, chunk_markdown("other.md", DOC)[0].id, "the path is part of the id");
    }

    #[test]
    fn long_sections_split_at_paragraphs() {
        let paragraph = "word ".repeat(100);
        let text = format!("# Long\n\n{paragraph}\n\n{paragraph}\n\n{paragraph}\n");
        let chunks = chunk_markdown("long.md", &text);
        assert_eq!(chunks.len(), 2);
        assert!(chunks.iter().all(|c| c.content.len() <= MAX_CHUNK_BYTES));
        assert_eq!(chunks.iter().map(|c| c.ordinal).collect::<Vec<_>>(), [0, 1]);
    }
}

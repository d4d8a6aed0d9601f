//! An agent's persona (`specs/agent/README.md`, "Persona"): its brain
//! files compiled into the system prompt, within a token budget.
//!
//! Owns: which files make the persona, their order, reading them, and what
//! a budget leaves out (named, with the numbers, for `agent_show`). Must
//! not own: writing them (the agent writes through fs-engine, the operator
//! over SSH) or judging a change to them (the soul guard's). The persona
//! is compiled from the versions the guard approved ([`compile`] takes
//! them from `guard::check`), never from the files as they are now: what
//! the guard has not reviewed never reaches a prompt.
//!
//! Order is importance: `soul.md` (values and boundaries), `identity.md`
//! (who the agent is), `aieos.json` (the same as an AIEOS v1.1 document,
//! when present), `user.md` (who it serves), then `instructions/*.md` by
//! name. A file that does not fit the tokens left is left out whole (a
//! cut rule could invert its meaning) and the later ones still get their
//! chance. A file that cannot be read is left out with the reason; a
//! missing or blank one is not part of the persona.

use std::path::Path;

use serde_json::Value;

use clawfs::layout::{IDENTITY_MD, SOUL_MD, USER_MD};

use crate::provider::estimate_tokens;

/// A persona as an AIEOS v1.1 document.
pub const AIEOS_FILE: &str = "aieos.json";
/// The brain files in order of importance, before `instructions/`.
pub const BRAIN_FILES: [&str; 4] = [SOUL_MD, IDENTITY_MD, AIEOS_FILE, USER_MD];
/// Durable rules, one markdown file each (its name is ClawFS's layout).
pub const INSTRUCTIONS_DIR: &str = clawfs::layout::INSTRUCTIONS_DIR;
/// Largest file read; a larger one is left out (it could not fit a budget).
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// The sections of an AIEOS v1.1 document the model is given, in order.
const AIEOS_SECTIONS: [&str; 7] =
    ["names", "bio", "psychology", "linguistics", "motivations", "capabilities", "history"];

/// A source of the persona: its name and the text to compile, or why it
/// cannot be read (`left_out` names it with that: `soul.md: not UTF-8 text`).
pub type Source = (String, Result<String, String>);

/// Why a brain file is left out of the persona.
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    /// It could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It is a directory or a special file.
    #[error("not a file")]
    NotAFile,
    /// It is over [`MAX_FILE_BYTES`].
    #[error("{bytes} bytes, more than {MAX_FILE_BYTES}")]
    TooLarge {
        /// Its size.
        bytes: u64,
    },
    /// It is not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// `aieos.json` is not JSON.
    #[error("not AIEOS JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// `aieos.json` is JSON but not an object.
    #[error("not AIEOS JSON: not an object")]
    NotAnObject,
    /// `aieos.json` has none of the sections the model is given.
    #[error("not AIEOS JSON: none of {}", AIEOS_SECTIONS.join(", "))]
    NoSection,
}

/// The compiled persona.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Persona {
    /// The text for the system prompt: each file under a `## <file>` heading.
    pub text: String,
    /// The files in it, relative to the agent's directory.
    pub included: Vec<String>,
    /// Each included file's tokens under its heading, in the same order.
    pub included_tokens: Vec<u64>,
    /// The files left out, each with why (`user.md: 812 tokens, 300 left of 1000`).
    pub left_out: Vec<String>,
}

/// Compiles `sources` (in persona order, as [`names`] gives them) within
/// `budget` tokens. `aieos.json` is turned into lines of its sections.
pub fn compile(sources: &[Source], budget: u64) -> Persona {
    let mut persona = Persona::default();
    let mut left = budget;
    for (name, text) in sources {
        let text = match text {
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) if name == AIEOS_FILE => aieos(text).map_err(|why| why.to_string()),
            Ok(text) => Ok(text.clone()),
            Err(why) => Err(why.clone()),
        };
        let text = match text {
            Ok(text) => text,
            Err(why) => {
                persona.left_out.push(format!("{name}: {why}"));
                continue;
            }
        };
        let part = part(name, &text);
        let tokens = estimate_tokens(&part);
        if tokens > left {
            persona.left_out.push(format!("{name}: {tokens} tokens, {left} left of {budget}"));
            continue;
        }
        left -= tokens;
        persona.text.push_str(&part);
        persona.included.push(name.clone());
        persona.included_tokens.push(tokens);
    }
    persona
}

/// How source `name` stands in the system prompt: under its heading.
pub fn part(name: &str, text: &str) -> String {
    format!("## {name}\n{}\n", text.trim())
}

/// The sources of the persona of the agent whose directory is `dir`, in
/// order: the brain files, then `instructions/*.md` by name.
pub fn names(dir: &Path) -> Vec<String> {
    let mut instructions: Vec<String> = std::fs::read_dir(dir.join(INSTRUCTIONS_DIR))
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".md"))
        .collect();
    instructions.sort();
    BRAIN_FILES
        .iter()
        .map(|&name| name.to_owned())
        .chain(instructions.iter().map(|name| format!("{INSTRUCTIONS_DIR}/{name}")))
        .collect()
}

/// Source `name` of the agent whose directory is `dir` as it is now:
/// `None` when missing or blank, why when it cannot be a source.
pub fn read_source(dir: &Path, name: &str) -> Result<Option<String>, String> {
    read(&dir.join(name)).map_err(|why| why.to_string())
}

fn read(path: &Path) -> Result<Option<String>, Unreadable> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if !metadata.is_file() {
        return Err(Unreadable::NotAFile);
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(Unreadable::TooLarge { bytes: metadata.len() });
    }
    let bytes = std::fs::read(path)?;
    let text = String::from_utf8(bytes).map_err(|_| Unreadable::NotUtf8)?;
    Ok((!text.trim().is_empty()).then_some(text))
}

/// An AIEOS v1.1 document as lines of text: each section (`names`, `bio`,
/// `psychology`, `linguistics`, `motivations`, `capabilities`, `history`,
/// in that order) with its values, nested keys joined by dots. Other
/// sections (`physicality` is for a UI) are not the model's.
fn aieos(text: &str) -> Result<String, Unreadable> {
    let document: Value = serde_json::from_str(text).map_err(Unreadable::NotJson)?;
    let Value::Object(document) = document else { return Err(Unreadable::NotAnObject) };
    let mut lines = Vec::new();
    for section in AIEOS_SECTIONS {
        if let Some(value) = document.get(section) {
            flatten(section, value, &mut lines);
        }
    }
    if lines.is_empty() {
        return Err(Unreadable::NoSection);
    }
    Ok(lines.join("\n"))
}

fn flatten(key: &str, value: &Value, lines: &mut Vec<String>) {
    match value {
        Value::Null => {}
        Value::Object(object) => {
            object.iter().for_each(|(inner, value)| flatten(&format!("{key}.{inner}"), value, lines))
        }
        Value::Array(items) if items.iter().all(|item| !item.is_object() && !item.is_array()) => {
            let items: Vec<String> = items.iter().map(scalar).collect();
            lines.push(format!("{key}: {}", items.join(", ")));
        }
        Value::Array(items) => {
            items.iter().enumerate().for_each(|(i, item)| flatten(&format!("{key}.{i}"), item, lines))
        }
        scalar_value => lines.push(format!("{key}: {}", scalar(scalar_value))),
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The persona of the files as they are (what the guard approves when
    /// it has nothing to hold).
    fn compile_files(dir: &Path, budget: u64) -> Persona {
        let sources: Vec<Source> = names(dir)
            .into_iter()
            .map(|name| {
                let text = read_source(dir, &name).map(Option::unwrap_or_default);
                (name, text)
            })
            .collect();
        compile(&sources, budget)
    }

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join(name).parent().unwrap()).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn files_in_order_under_their_names_and_blank_or_missing_ones_are_not_part() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "user.md", "# User\nLikes short answers.");
        write(dir.path(), "soul.md", "# Soul\nBe honest.\n");
        write(dir.path(), "identity.md", "  \n");
        write(dir.path(), "instructions/b.md", "Rule B.");
        write(dir.path(), "instructions/a.md", "Rule A.");
        write(dir.path(), "instructions/notes.txt", "not markdown");
        let persona = compile_files(dir.path(), 1000);
        assert_eq!(persona.included, ["soul.md", "user.md", "instructions/a.md", "instructions/b.md"]);
        assert_eq!(persona.text, "## soul.md\n# Soul\nBe honest.\n## user.md\n# User\nLikes short answers.\n## instructions/a.md\nRule A.\n## instructions/b.md\nRule B.\n");
        assert!(persona.left_out.is_empty());
        assert_eq!(compile_files(&dir.path().join("none"), 1000), Persona::default());
    }

    #[test]
    fn what_does_not_fit_is_left_out_whole_and_named_and_later_files_still_fit() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "soul.md", "Be honest.");
        write(dir.path(), "identity.md", &"long ".repeat(200));
        write(dir.path(), "user.md", "Short.");
        let persona = compile_files(dir.path(), 40);
        assert_eq!(persona.included, ["soul.md", "user.md"]);
        assert_eq!(persona.left_out, ["identity.md: 254 tokens, 34 left of 40"]);
        assert!(!persona.text.contains("long"));
        assert!(estimate_tokens(&persona.text) <= 40);
    }

    #[test]
    fn an_unreadable_file_is_left_out_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("soul.md"), [0xff, 0xfe, 0x00]).unwrap();
        std::fs::create_dir(dir.path().join("user.md")).unwrap();
        std::fs::write(dir.path().join("identity.md"), vec![b'x'; MAX_FILE_BYTES as usize + 1]).unwrap();
        let persona = compile_files(dir.path(), 1000);
        assert_eq!(
            persona.left_out,
            ["soul.md: not UTF-8 text", "identity.md: 262145 bytes, more than 262144", "user.md: not a file"]
        );
    }

    #[test]
    fn an_aieos_document_becomes_lines_of_its_sections() {
        let dir = tempfile::tempdir().unwrap();
        let document = serde_json::json!({
            "version": "1.1",
            "names": {"display": "Ada"},
            "bio": "Born on a ClawOS box.",
            "psychology": {"ocean": {"openness": 0.9}},
            "linguistics": {"catchphrases": ["Indeed", "Onward"]},
            "history": [{"event": "first boot"}, {"year": 2026}],
            "physicality": {"avatar": "owl"}
        });
        write(dir.path(), AIEOS_FILE, &document.to_string());
        let persona = compile_files(dir.path(), 1000);
        assert_eq!(
            persona.text,
            "## aieos.json\nnames.display: Ada\nbio: Born on a ClawOS box.\npsychology.ocean.openness: 0.9\nlinguistics.catchphrases: Indeed, Onward\nhistory.0.event: first boot\nhistory.1.year: 2026\n"
        );
        write(dir.path(), AIEOS_FILE, "{\"names\": ");
        assert!(compile_files(dir.path(), 1000).left_out[0].starts_with("aieos.json: not AIEOS JSON"));
        write(dir.path(), AIEOS_FILE, "{\"avatar\": 1}");
        assert!(compile_files(dir.path(), 1000).left_out[0].contains("none of names"));
    }
}

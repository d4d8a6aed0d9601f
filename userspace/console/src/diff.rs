//! A file write's diff, as the approvals page shows it beside the call's
//! arguments (specs/console/README.md, "Approvals"): what the file holds
//! now against what the write would leave, by lines, with three lines of
//! context around each change.
//!
//! Owns: the comparison. Must not own: reading the file (the page does,
//! as the agent, through fs-engine).

use similar::{ChangeTag, TextDiff};

/// Lines of unchanged text kept around a change.
const CONTEXT: usize = 3;

/// One line of the diff.
#[derive(Debug, PartialEq, Eq)]
pub struct Line {
    /// `+` added, `-` removed, ` ` kept, `…` unchanged lines left out.
    pub sign: char,
    /// The line, without its end.
    pub text: String,
}

/// The lines that differ between `old` and `new`, in context; empty when
/// the write changes nothing.
pub fn lines(old: &str, new: &str) -> Vec<Line> {
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for (n, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
        if n > 0 {
            out.push(Line { sign: '…', text: String::new() });
        }
        for op in group {
            for change in diff.iter_changes(op) {
                let sign = match change.tag() {
                    ChangeTag::Insert => '+',
                    ChangeTag::Delete => '-',
                    ChangeTag::Equal => ' ',
                };
                out.push(Line { sign, text: change.value().trim_end_matches(['\n', '\r']).to_owned() });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::lines;

    fn signs(old: &str, new: &str) -> String {
        lines(old, new).iter().map(|line| format!("{}{}\n", line.sign, line.text)).collect()
    }

    #[test]
    fn a_changed_line_shows_as_removed_and_added_in_its_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(signs(old, new), " b\n c\n d\n-e\n+E\n f\n g\n h\n");
    }

    #[test]
    fn a_new_file_is_all_added_and_an_unchanged_one_has_no_lines() {
        assert_eq!(signs("", "one\ntwo"), "+one\n+two\n");
        assert!(lines("same\n", "same\n").is_empty());
    }

    #[test]
    fn changes_far_apart_are_two_hunks() {
        let old: String = (0..20).map(|n| format!("{n}\n")).collect();
        let new = old.replace("2\n", "two\n").replace("17\n", "seventeen\n");
        assert_eq!(lines(&old, &new).iter().filter(|line| line.sign == '…').count(), 1);
    }
}

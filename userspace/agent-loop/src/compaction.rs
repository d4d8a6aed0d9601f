//! Where a session's prompt is cut when it grows past its share of the
//! model's context window (`specs/agent/README.md`, "Compaction").
//!
//! Owns: the pure decisions (when to compact, which messages are kept,
//! what a summarizer is given, the hard truncation when a summary does not
//! help), so they can be checked as properties. Must not own: asking the
//! model for the summary or storing it (the turn, `store`).

use crate::provider::Role;
use crate::store::Stored;

/// Index of the first message kept verbatim: the last `keep_recent`
/// messages, moved earlier so the kept part never starts with a tool result
/// (its call would be summarized away and the result orphaned). 0 means
/// nothing can be compacted.
pub fn split_point(messages: &[Stored], keep_recent: usize) -> usize {
    let mut split = messages.len().saturating_sub(keep_recent.max(1));
    while split > 0 && messages[split].message.role == Role::Tool {
        split -= 1;
    }
    split
}

/// The transcript text a summarizer gets for `prefix`: the newest messages
/// that fit in `max_tokens` (each line `role: text`), oldest first. The
/// summarizer's input is bounded whatever the session's length.
pub fn summarizer_input(prefix: &[Stored], max_tokens: u64) -> String {
    let mut lines = Vec::new();
    let mut used = 0;
    for stored in prefix.iter().rev() {
        let mut line = format!("{}: {}", stored.role, stored.message.content);
        for call in &stored.message.tool_calls {
            line.push_str(&format!(" [calls {} {}]", call.name, call.arguments));
        }
        let tokens = crate::provider::estimate_tokens(&line);
        if used + tokens > max_tokens {
            if lines.is_empty() {
                // One message larger than the whole budget: its start.
                let mut end = (max_tokens as usize * 4).min(line.len());
                while !line.is_char_boundary(end) {
                    end -= 1;
                }
                lines.push(line[..end].to_owned());
            }
            break;
        }
        used += tokens;
        lines.push(line);
    }
    lines.reverse();
    lines.join("\n")
}

/// The hard truncation when compaction did not shrink the prompt: the
/// index of the first message to keep, the earliest one that leaves the
/// kept part within `budget` tokens without starting on a tool result.
/// When even the last call with its results is over budget, that last
/// unit is kept (a result without its call is refused by every provider),
/// and the caller must end the turn if the prompt still does not fit.
pub fn truncation_point(messages: &[Stored], budget: u64) -> usize {
    let boundaries = (0..messages.len()).filter(|&i| messages[i].message.role != Role::Tool);
    let mut last = 0;
    let mut suffix: u64 = messages.iter().map(|m| m.tokens).sum();
    let mut consumed = 0;
    for boundary in boundaries {
        suffix -= messages[consumed..boundary].iter().map(|m| m.tokens).sum::<u64>();
        consumed = boundary;
        if suffix <= budget {
            return boundary;
        }
        last = boundary;
    }
    last
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::provider::{ChatMessage, ToolCall};

    fn stored(seq: i64, role: Role, tokens: u64) -> Stored {
        let mut message = ChatMessage::text(role, "x".repeat(tokens as usize * 4));
        if role == Role::Assistant && seq % 2 == 0 {
            message.tool_calls.push(ToolCall {
                id: format!("c{seq}"),
                name: "t".into(),
                arguments: serde_json::json!({}),
            });
        }
        let role_name = format!("{role:?}").to_lowercase();
        Stored { seq, role: role_name, message, tokens, at_ms: 0 }
    }

    /// A session: user messages, assistant messages, and after an
    /// assistant message that calls a tool, one or more tool results.
    fn session() -> impl Strategy<Value = Vec<Stored>> {
        prop::collection::vec((0u8..3, 1u64..200, 1usize..3), 1..60).prop_map(|shape| {
            let mut messages = Vec::new();
            for (kind, tokens, results) in shape {
                let seq = messages.len() as i64 + 1;
                match kind {
                    0 => messages.push(stored(seq, Role::User, tokens)),
                    1 => messages.push(stored(seq | 1, Role::Assistant, tokens)),
                    _ => {
                        messages.push(stored(seq & !1, Role::Assistant, tokens));
                        for _ in 0..results {
                            let seq = messages.len() as i64 + 1;
                            messages.push(stored(seq, Role::Tool, tokens));
                        }
                    }
                }
            }
            messages
        })
    }

    /// Every tool result in `kept` follows, within `kept`, an assistant
    /// message (the call it answers).
    fn no_orphan(kept: &[Stored]) -> bool {
        kept.first().is_none_or(|first| first.message.role != Role::Tool)
    }

    proptest! {
        #[test]
        fn compaction_never_orphans_a_tool_result(messages in session(), keep in 0usize..20) {
            let split = split_point(&messages, keep);
            prop_assert!(no_orphan(&messages[split..]));
            prop_assert!(split == 0 || messages.len() - split >= keep.max(1));
        }

        #[test]
        fn truncation_respects_the_budget_and_orphans_nothing(messages in session(), budget in 1u64..2000) {
            let split = truncation_point(&messages, budget);
            let kept = &messages[split..];
            prop_assert!(!kept.is_empty());
            prop_assert!(no_orphan(kept));
            let used: u64 = kept.iter().map(|m| m.tokens).sum();
            // Over budget only when the kept part is the last call with its
            // results (or the last message): nothing smaller is valid.
            let last_unit = kept.iter().skip(1).all(|m| m.message.role == Role::Tool);
            prop_assert!(used <= budget || last_unit, "{used} > {budget}");
        }

        #[test]
        fn the_summarizer_input_is_bounded(messages in session(), max in 1u64..500) {
            let input = summarizer_input(&messages, max);
            prop_assert!(crate::provider::estimate_tokens(&input) <= max + 1);
        }
    }
}

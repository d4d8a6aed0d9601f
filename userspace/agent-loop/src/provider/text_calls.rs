//! Tool calls a model printed as text (`specs/agent/providers.md`, "Tool
//! calls as text"): many models, small local ones above all, write a call
//! instead of making it. For a model whose `native_tools` is false the loop
//! tells it to write `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
//! and reads back whatever form it chose:
//!
//! - `<tool_call>...</tool_call>` tags (a missing closing tag is forgiven);
//! - fenced code blocks (```` ```json ````, ```` ```tool_call ````, bare ```` ``` ````);
//! - a bare JSON object in the text.
//!
//! The object may name the tool as `name`, `tool`, `tool_name` or
//! `function.name`, and its arguments as `arguments`, `parameters`, `args`
//! or `input` (an object, or a string holding one). A tag is an explicit
//! call, so an unknown tool named there still becomes a call (the loop
//! answers the model that no such tool exists); a fence or bare JSON is a
//! call only when it names a known tool, so an answer that merely shows
//! JSON is left as text.

use serde_json::{json, Map, Value};

use super::ToolCall;

const OPEN_TAG: &str = "<tool_call>";
const CLOSE_TAG: &str = "</tool_call>";

/// The call an object describes, if it describes one.
fn call_of(object: &Map<String, Value>) -> Option<(String, Value)> {
    let function = object.get("function").and_then(Value::as_object);
    let name = ["name", "tool", "tool_name"]
        .iter()
        .find_map(|key| object.get(*key).and_then(Value::as_str))
        .or_else(|| function.and_then(|f| f.get("name")).and_then(Value::as_str))?;
    let source = function.filter(|_| !object.contains_key("arguments")).unwrap_or(object);
    let arguments = ["arguments", "parameters", "args", "input"]
        .iter()
        .find_map(|key| source.get(*key))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let arguments = match arguments {
        Value::String(text) => {
            serde_json::from_str::<Value>(&text).ok().filter(Value::is_object).unwrap_or(Value::String(text))
        }
        Value::Null => json!({}),
        other => other,
    };
    Some((name.to_owned(), arguments))
}

/// The first JSON value that starts at a `{` in `text`, with its byte span.
fn first_object(text: &str) -> Option<(usize, usize, Map<String, Value>)> {
    for (start, _) in text.match_indices('{') {
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(object))) = values.next() {
            return Some((start, start + values.byte_offset(), object));
        }
    }
    None
}

/// Splits `text` into what remains for the operator and the calls in it.
pub fn parse(text: &str, known: &[&str]) -> (String, Vec<ToolCall>) {
    let mut calls = Vec::new();
    let mut rest = String::new();
    let add = |calls: &mut Vec<ToolCall>, name: String, arguments: Value| {
        let id = format!("call_text_{}", calls.len());
        calls.push(ToolCall { id, name, arguments });
    };

    // 1. Tags.
    if text.contains(OPEN_TAG) {
        let mut remaining = text;
        while let Some(open) = remaining.find(OPEN_TAG) {
            rest.push_str(&remaining[..open]);
            let inner_start = open + OPEN_TAG.len();
            let (inner, after) = match remaining[inner_start..].find(CLOSE_TAG) {
                Some(close) => (&remaining[inner_start..inner_start + close], inner_start + close + CLOSE_TAG.len()),
                None => (&remaining[inner_start..], remaining.len()),
            };
            match first_object(inner).and_then(|(_, _, object)| call_of(&object)) {
                Some((name, arguments)) => add(&mut calls, name, arguments),
                None => rest.push_str(&remaining[open..after]),
            }
            remaining = &remaining[after..];
        }
        rest.push_str(remaining);
        if !calls.is_empty() {
            return (rest.trim().to_owned(), calls);
        }
        rest.clear();
    }

    // 2. Fenced blocks, then 3. bare objects, for known tools only.
    let mut remaining = text;
    loop {
        let fence = remaining.find("```").and_then(|open| {
            let body_start = open + 3 + remaining[open + 3..].find('\n')? + 1;
            let close = body_start + remaining[body_start..].find("```")?;
            Some((open, body_start, close, close + 3))
        });
        let found = match fence {
            Some((open, body_start, close, end)) => first_object(&remaining[body_start..close])
                .and_then(|(_, _, object)| call_of(&object))
                .filter(|(name, _)| known.contains(&name.as_str()))
                .map(|call| (open, end, call))
                .or_else(|| {
                    // Not a call: keep the block, look on after it.
                    rest.push_str(&remaining[..end]);
                    remaining = &remaining[end..];
                    None
                }),
            None => first_object(remaining).and_then(|(start, end, object)| {
                call_of(&object).filter(|(name, _)| known.contains(&name.as_str())).map(|call| (start, end, call))
            }),
        };
        match found {
            Some((start, end, (name, arguments))) => {
                rest.push_str(&remaining[..start]);
                add(&mut calls, name, arguments);
                remaining = &remaining[end..];
            }
            None if fence.is_some() => continue,
            None => break,
        }
    }
    rest.push_str(remaining);
    (rest.trim().to_owned(), calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &["file_read", "text-stats"];

    fn names(calls: &[ToolCall]) -> Vec<&str> {
        calls.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn tags_with_and_without_closing() {
        let (rest, calls) = parse(
            "Sure.\n<tool_call>{\"name\": \"file_read\", \"arguments\": {\"path\": \"a.md\"}}</tool_call>",
            KNOWN,
        );
        assert_eq!(rest, "Sure.");
        assert_eq!(
            calls,
            vec![ToolCall { id: "call_text_0".into(), name: "file_read".into(), arguments: json!({"path": "a.md"}) }]
        );
        let (_, calls) = parse("<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}", KNOWN);
        assert_eq!(names(&calls), ["nope"], "a tag is an explicit call, even to an unknown tool");
    }

    #[test]
    fn fenced_and_bare_json_in_their_usual_spellings() {
        let (rest, calls) =
            parse("```json\n{\"tool\": \"text-stats\", \"parameters\": {\"text\": \"hi\"}}\n```\nDone.", KNOWN);
        assert_eq!((rest.as_str(), names(&calls)), ("Done.", vec!["text-stats"]));
        assert_eq!(calls[0].arguments, json!({"text": "hi"}));
        let (rest, calls) =
            parse("{\"function\": {\"name\": \"file_read\", \"arguments\": \"{\\\"path\\\": \\\"x\\\"}\"}}", KNOWN);
        assert_eq!((rest.as_str(), names(&calls)), ("", vec!["file_read"]));
        assert_eq!(calls[0].arguments, json!({"path": "x"}));
        let (_, calls) = parse(
            "I will call {\"name\": \"file_read\"} then {\"name\": \"text-stats\", \"args\": {\"text\": \"a\"}}",
            KNOWN,
        );
        assert_eq!(names(&calls), ["file_read", "text-stats"]);
        assert_eq!(calls[0].arguments, json!({}));
    }

    #[test]
    fn json_that_names_no_known_tool_stays_text() {
        let text = "Here is your config:\n```json\n{\"name\": \"alice\", \"age\": 3}\n```\nand {\"a\": 1}";
        assert_eq!(parse(text, KNOWN), (text.trim().to_owned(), Vec::new()));
        assert_eq!(parse("no calls { here", KNOWN), ("no calls { here".to_owned(), Vec::new()));
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_without_panicking(text in "\\PC{0,200}") {
            let (rest, calls) = parse(&text, KNOWN);
            proptest::prop_assert!(rest.len() <= text.len());
            for call in calls {
                proptest::prop_assert!(!call.name.is_empty());
            }
        }
    }
}

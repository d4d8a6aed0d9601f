//! `text-stats`: reads `{"text": "..."}` on stdin and writes
//! `{"lines": n, "words": n, "bytes": n}` on stdout. It needs no capability
//! beyond stdio, which makes it the toolchain's smoke test.
use std::io::{Read, Write};

#[derive(serde::Deserialize)]
struct Params {
    text: String,
}

#[derive(serde::Serialize)]
struct Stats {
    lines: usize,
    words: usize,
    bytes: usize,
}

fn main() {
    let mut input = String::new();
    let result = std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| format!("reading params: {e}"))
        .and_then(|_| serde_json::from_str::<Params>(&input).map_err(|e| format!("invalid params: {e}")));
    match result {
        Ok(Params { text }) => {
            let stats = Stats { lines: text.lines().count(), words: text.split_whitespace().count(), bytes: text.len() };
            let _ = writeln!(std::io::stdout(), "{}", serde_json::to_string(&stats).expect("plain struct serializes"));
        }
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "{}", serde_json::json!({ "error": message }));
            std::process::exit(2);
        }
    }
}

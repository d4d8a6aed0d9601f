//! `model-bench [--model-dir DIR] [--tokens N] [--rounds R]`: the in-box
//! language model (clawos-model-server's engine, no HTTP) on this machine:
//! the time to load it, its resident memory after the load and at its
//! peak, and for a short chat prompt and a long one (about 1,000 tokens,
//! a conversation an agent may well send) the time to the first token and
//! the decoding speed of N tokens (default 128; the stop tokens are banned
//! so every round decodes N, or fewer where the server's loop guard ends an
//! answer that repeats itself). Greedy, so every round does the same
//! work; the best of R rounds (default 3) is kept, so a burst of load from
//! elsewhere skews one round, not the result. Last, once, a prompt that
//! fills the context window but for the N tokens: the peak memory the unit's
//! MemoryMax must allow. Then, once, a fresh box's first chat: the default
//! agent's system prompt (`--system FILE`, default out/default-agent-prompt.txt,
//! which `make image` writes with clawos-agent-prompt) with its state read
//! from the file the image ships, and "Hello, who are you?". The numbers of
//! specs/agent/local-model.md come from here.
//!
//! The model directory defaults to `CLAWOS_SMOLLM2_DIR`, then
//! out/models/smollm2-135m-instruct (`make models`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use model_server::engine::{Generation, Message, Model, Outcome, Progress};

/// A field of /proc/self/status in MiB (VmRSS, VmHWM).
fn memory_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':')?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn main() {
    let mut dir = std::env::var_os("CLAWOS_SMOLLM2_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| clawos_test_require::package_path("../../out/models/smollm2-135m-instruct"));
    let mut system = clawos_test_require::package_path("../../out/default-agent-prompt.txt");
    let (mut tokens, mut rounds) = (128usize, 3usize);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--model-dir" => dir = value().into(),
            "--tokens" => tokens = value().parse().expect("--tokens N"),
            "--rounds" => rounds = value().parse().expect("--rounds R"),
            "--system" => system = value().into(),
            _ => {
                eprintln!("usage: model-bench [--model-dir DIR] [--tokens N] [--rounds R] [--system FILE]");
                std::process::exit(2);
            }
        }
    }
    println!("model: {}", dir.display());
    println!("cpus: {}", std::thread::available_parallelism().map_or(0, |n| n.get()));
    let before = memory_mib("VmRSS");
    let started = Instant::now();
    let model = Model::load(&dir).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "load: {:.2} s; RSS {before:.0} MiB before, {:.0} MiB after; weights {}",
        started.elapsed().as_secs_f64(),
        memory_mib("VmRSS"),
        model.weights().name()
    );

    // The stop tokens, banned so every round decodes `tokens` (fewer when
    // the answer repeats itself: the server's loop guard ends it there).
    let banned: HashMap<u32, f32> = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        .iter()
        .filter_map(|t| model.tokenizer().token_to_id(t))
        .map(|id| (id, -100.0))
        .collect();
    let generation = Generation {
        max_tokens: tokens,
        temperature: 0.0,
        top_p: None,
        seed: 0,
        stop: Vec::new(),
        logit_bias: banned,
        frequency_penalty: 0.0,
        presence_penalty: 0.0,
    };
    let short = vec![Message {
        role: "user".into(),
        content: "Explain what an operating system does, in a few sentences.".into(),
    }];
    let filler = "The agent read the notes in its workspace, summarised them and wrote the summary back. ";
    let long = vec![
        Message { role: "system".into(), content: "You are the default agent of a ClawOS box. Answer briefly.".into() },
        Message { role: "user".into(), content: filler.repeat(60) },
        Message { role: "assistant".into(), content: "I have read it.".into() },
        Message { role: "user".into(), content: "What did the agent do?".into() },
    ];
    // The long prompt's filler, repeated to fill the window but for the answer.
    let per_filler = model.tokenizer().encode_fast(filler, false).unwrap().len();
    let mut full = long.clone();
    full[1].content = filler.repeat((model.context() - tokens - 80) / per_filler);
    for (name, messages, rounds) in [("short", &short, rounds), ("long", &long, rounds), ("full-context", &full, 1)] {
        let prompt = model.prompt(messages).unwrap();
        let mut best: Option<Outcome> = None;
        let mut sample = String::new();
        for _ in 0..rounds {
            let mut text = String::new();
            let outcome = model
                .generate(&prompt, &generation, &mut |progress| {
                    if let Progress::Text(piece) = progress {
                        text.push_str(piece);
                    }
                    true
                })
                .unwrap();
            if best.is_none_or(|b| outcome.elapsed < b.elapsed) {
                best = Some(outcome);
                sample = text;
            }
        }
        let best = best.expect("at least one round");
        let decode: Duration = best.elapsed - best.time_to_first_token;
        println!(
            "{name} prompt: {} tokens; time to first token {:.0} ms; {} tokens decoded at {:.1} tokens/s ({:.2} s in all)",
            best.prompt_tokens,
            best.time_to_first_token.as_secs_f64() * 1000.0,
            best.completion_tokens,
            (best.completion_tokens - 1) as f64 / decode.as_secs_f64(),
            best.elapsed.as_secs_f64(),
        );
        let preview: String = sample.chars().take(160).collect();
        println!("  answer begins: {preview:?}");
        println!("  RSS now {:.0} MiB, peak {:.0} MiB", memory_mib("VmRSS"), memory_mib("VmHWM"));
        if name == "long" {
            // The same conversation one message further: the server reuses
            // the state of the last answer (a chat's next message, an agent's
            // next step).
            let mut next = long.clone();
            next.push(Message { role: "assistant".into(), content: sample.clone() });
            next.push(Message { role: "user".into(), content: "Thanks. Say it in one line.".into() });
            let prompt = model.prompt(&next).unwrap();
            let outcome = model.generate(&prompt, &generation, &mut |_| true).unwrap();
            println!(
                "follow-up of the long prompt: {} tokens of which {} reused; time to first token {:.0} ms",
                outcome.prompt_tokens,
                outcome.cached_tokens,
                outcome.time_to_first_token.as_secs_f64() * 1000.0,
            );
        }
    }
    println!("RSS now {:.0} MiB, peak {:.0} MiB", memory_mib("VmRSS"), memory_mib("VmHWM"));
    // Last: it loads the model a second time, which the figures above must not see.
    first_chat(&model, &dir, &system, &generation);
}

/// A fresh box's first chat: `system` (the default agent's prompt) with its
/// state written as the image ships it, read by a model that never read
/// the turn (loaded anew from a directory holding the model and the state).
fn first_chat(model: &Model, dir: &std::path::Path, system: &std::path::Path, generation: &Generation) {
    let content = std::fs::read_to_string(system)
        .unwrap_or_else(|e| panic!("{}: {e} (make image writes it; or give --system FILE)", system.display()));
    let fresh = std::env::temp_dir().join(format!("model-bench-{}", std::process::id()));
    let prefixes = fresh.join(model_server::prefix::SHIPPED_DIR);
    std::fs::create_dir_all(&prefixes).unwrap();
    let gguf = model_server::engine::gguf_path(dir).unwrap();
    std::os::unix::fs::symlink(&gguf, fresh.join(gguf.file_name().unwrap())).unwrap();
    let started = Instant::now();
    let file = model.write_system_state(&content, &prefixes).unwrap();
    let written = started.elapsed();
    let size = std::fs::metadata(&file).map_or(0, |m| m.len());
    let started = Instant::now();
    let box_model = Model::load(&fresh).unwrap_or_else(|e| panic!("{e}"));
    let loaded = started.elapsed();
    let messages = [
        Message { role: "system".into(), content },
        Message { role: "user".into(), content: "Hello, who are you?".into() },
    ];
    let prompt = box_model.prompt(&messages).unwrap();
    let outcome = box_model.generate(&prompt, generation, &mut |_| true).unwrap();
    println!(
        "first chat of a fresh box: {} tokens of which {} from the shipped state ({:.1} MiB, written in {:.0} ms); \
         load {:.2} s; time to first token {:.0} ms (the state's file read included)",
        outcome.prompt_tokens,
        outcome.cached_tokens,
        size as f64 / 1048576.0,
        written.as_secs_f64() * 1000.0,
        loaded.as_secs_f64(),
        outcome.time_to_first_token.as_secs_f64() * 1000.0,
    );
    // The next new conversation finds the state in memory.
    let again = box_model.generate(&prompt, generation, &mut |_| true).unwrap();
    println!(
        "  the same chat again, the state in memory: {} tokens of which {} reused; time to first token {:.0} ms",
        again.prompt_tokens,
        again.cached_tokens,
        again.time_to_first_token.as_secs_f64() * 1000.0,
    );
    let _ = std::fs::remove_dir_all(&fresh);
}

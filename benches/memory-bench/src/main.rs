//! `memory-bench`: one agent's memory (`specs/agent/README.md`, "Memory")
//! at 10,000 entries, searched with the in-box model, all-MiniLM-L6-v2.
//!
//! The entries are short generated facts ("Mira keeps the spare keys in the
//! blue drawer of the workshop.") written in the entry format into
//! `memory.md` (60%) and 100 daily logs (40%), then indexed the way
//! `clawctl memory reindex` does it, from the files alone. Reported:
//! - the rebuild (every entry embedded);
//! - recall p50/p95 of top-5, the query text embedded by MiniLM each time
//!   (no cache), and how often the entry a query was written from is in the
//!   top 5; the queries use other words than the entry ("where are Mira's
//!   spare keys kept?");
//! - store p50/p95 into the 6,000-entry `memory.md` (append, then the file
//!   re-indexed: only the new chunk is embedded);
//! - the re-index of `memory.md` after an edit made outside (an operator's
//!   paragraph), the work fs-engine's watch does after its 300 ms quiet time.
//!
//! Run: `make models`, then
//! `cargo run --release -p clawos-memory-bench -- --model-dir out/models/all-minilm-l6-v2`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use clawfs::layout::MEMORY_MD;
use clawfs::memory::{render_entry, AgentMemory, Category};
use clawfs::{Clawfs, Config, Owners};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Parser)]
#[command(about = "An agent's memory at scale with the in-box MiniLM")]
struct Cli {
    /// Entries in the agent's memory.
    #[arg(long, default_value_t = 10_000)]
    entries: usize,
    /// Recall queries.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Stores timed after the build.
    #[arg(long, default_value_t = 50)]
    stores: usize,
    /// The model directory (`make models`).
    #[arg(long, default_value = "out/models/all-minilm-l6-v2")]
    model_dir: PathBuf,
}

const PEOPLE: [&str; 24] = [
    "Mira", "Tomas", "Aiko", "Bruno", "Chidi", "Dana", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jules", "Kemal",
    "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sven", "Talia", "Umar", "Vera",
];
const THINGS: [(&str, &str); 16] = [
    ("spare keys", "keys"),
    ("passport", "travel documents"),
    ("bicycle pump", "tyre inflator"),
    ("tax papers", "financial records"),
    ("camping stove", "outdoor cooker"),
    ("winter tyres", "snow wheels"),
    ("first aid kit", "medical supplies"),
    ("router manual", "network instructions"),
    ("guitar", "instrument"),
    ("seed packets", "garden seeds"),
    ("drill", "power tool"),
    ("wedding photos", "marriage pictures"),
    ("backup disk", "external drive"),
    ("paint cans", "leftover paint"),
    ("fishing rods", "angling gear"),
    ("sewing machine", "stitching machine"),
];
const PLACES: [&str; 12] = [
    "workshop",
    "attic",
    "garage",
    "cellar",
    "hallway cupboard",
    "garden shed",
    "spare bedroom",
    "office",
    "boat house",
    "pantry",
    "loft",
    "barn",
];
const SPOTS: [&str; 8] =
    ["blue drawer", "top shelf", "metal box", "red crate", "left cabinet", "wooden chest", "green bag", "back corner"];

/// A fact, a question about it in other words, and what an answer to
/// the question must name (the person and the thing).
struct Fact {
    text: String,
    question: String,
    person: &'static str,
    thing: &'static str,
}

fn fact(rng: &mut StdRng) -> Fact {
    let person = PEOPLE[rng.random_range(0..PEOPLE.len())];
    let (thing, other_words) = THINGS[rng.random_range(0..THINGS.len())];
    let place = PLACES[rng.random_range(0..PLACES.len())];
    let spot = SPOTS[rng.random_range(0..SPOTS.len())];
    Fact {
        text: format!("{person} keeps the {thing} in the {spot} of the {place}."),
        question: format!("where does {person} store the {other_words}?"),
        person,
        thing,
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1]
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let model = Arc::new(
        minilm::MiniLmEmbedder::load(&cli.model_dir)
            .with_context(|| format!("loading MiniLM from {}", cli.model_dir.display()))?,
    );
    let dir = tempfile::tempdir()?;
    let clawfs = Clawfs::new(Config { vector_dimension: minilm::DIMENSION, ..Config::new(dir.path()) })?;
    clawfs.init(Owners::Keep)?;
    let mut rng = StdRng::seed_from_u64(7);

    // The files, as months of an agent's life would leave them.
    let agent_dir = clawfs::namespace::agent_dir(dir.path(), clawfs::names::FIRST_AGENT)?;
    let mut core = std::fs::read_to_string(agent_dir.join(MEMORY_MD))?;
    let mut daily: Vec<String> =
        (0..100).map(|day| Category::Daily.header(&fsutil::rfc3339(1_760_000_000 + day * 86_400)[..10])).collect();
    let mut questions = Vec::new();
    for n in 0..cli.entries {
        let fact = fact(&mut rng);
        let at = fsutil::rfc3339(1_760_000_000 + n as u64 * 60);
        let id = clawfs::memory::entry_id("default", &at, &fact.text);
        let entry = render_entry(&at, &id, &fact.text);
        if n % 5 < 3 {
            core.push_str(&entry)
        } else {
            daily[n % 100].push_str(&entry)
        }
        if questions.len() < cli.queries && n % (cli.entries / cli.queries).max(1) == 0 {
            questions.push((fact, id));
        }
    }
    std::fs::write(agent_dir.join(MEMORY_MD), &core)?;
    for (day, text) in daily.iter().enumerate() {
        std::fs::write(
            agent_dir.join(format!("logs/{}.md", &fsutil::rfc3339(1_760_000_000 + day as u64 * 86_400)[..10])),
            text,
        )?;
    }

    let memory = AgentMemory::new(dir.path(), "default")?;
    let mut index = clawfs.open_agent_memory("default", Some(model.clone()))?;
    let started = Instant::now();
    let rebuilt = memory.reindex(&mut index)?;
    let rebuild = started.elapsed();
    println!(
        "rebuild from the files: {} files, {} chunks, {} vectors in {:.1} s ({:.0} chunks/s, MiniLM embedding included)",
        rebuilt.files,
        rebuilt.chunks,
        rebuilt.vectors,
        rebuild.as_secs_f64(),
        rebuilt.chunks as f64 / rebuild.as_secs_f64()
    );

    let mut recall_times = Vec::new();
    let (mut same_entry, mut answered) = (0, 0);
    for (fact, id) in &questions {
        let started = Instant::now();
        let recall = memory.recall(&index, &fact.question, None, 5)?;
        recall_times.push(started.elapsed());
        same_entry += usize::from(recall.results.iter().any(|hit| hit.id.as_deref() == Some(id.as_str())));
        answered += usize::from(
            recall.results.iter().any(|hit| hit.content.contains(fact.person) && hit.content.contains(fact.thing)),
        );
    }
    println!(
        "recall top-5 over {} entries, query embedded by MiniLM: p50 {}, p95 {} ({} queries in other words than the entries)",
        cli.entries,
        ms(percentile(&mut recall_times, 0.5)),
        ms(percentile(&mut recall_times, 0.95)),
        questions.len(),
    );
    // Each person keeps each thing in several places over the entries, so
    // a question fits several entries; the one it was written from is one.
    println!(
        "  a top-5 result names the person and the thing asked about: {answered}/{n}; the entry the question was written from is in the top 5: {same_entry}/{n}",
        n = questions.len()
    );

    let mut store_times = Vec::new();
    for n in 0..cli.stores {
        let text = fact(&mut rng).text;
        let started = Instant::now();
        memory.store(&mut index, &Category::Core, &text, &fsutil::rfc3339(1_800_000_000 + n as u64))?;
        store_times.push(started.elapsed());
    }
    println!(
        "store into memory.md at {} bytes: p50 {}, p95 {} ({} stores; append, re-index, one chunk embedded)",
        std::fs::metadata(agent_dir.join(MEMORY_MD))?.len(),
        ms(percentile(&mut store_times, 0.5)),
        ms(percentile(&mut store_times, 0.95)),
        cli.stores
    );

    let mut edited = std::fs::read_to_string(agent_dir.join(MEMORY_MD))?;
    edited.push_str("\n## Written by the operator\nThe generator in the barn needs new oil every spring.\n");
    std::fs::write(agent_dir.join(MEMORY_MD), edited)?;
    let started = Instant::now();
    let report = memory.sync(&mut index, MEMORY_MD)?;
    let resync = started.elapsed();
    let recall = memory.recall(&index, "when does the generator get oil?", None, 5)?;
    anyhow::ensure!(
        recall.results.iter().any(|hit| hit.content.contains("generator in the barn")),
        "the operator's paragraph was not found: {recall:#?}"
    );
    println!(
        "re-index of memory.md after an edit outside: {} ({} chunk added, {} unchanged); recall then finds it",
        ms(resync),
        report.added,
        report.unchanged
    );
    Ok(())
}

//! `clawos-agent-prompt AGENT`: prints the system prompt a fresh agent
//! named AGENT sends to its model at its first turn, made by the code the
//! box runs: its directory as ClawFS makes it (the brain files' first
//! text), its config as agent-loop reads a directory without one, the soul
//! guard's first review, the persona's compilation and
//! [`turn::system_prompt`].
//!
//! A build tool, not in the image (scripts/stage-rootfs.sh installs the
//! product's binaries by name): the image build feeds its output to
//! `clawos-model-server --prefill`, so the state of the default agent's
//! system turn ships with the model and a fresh box's first chat reads
//! only its own tokens (specs/agent/local-model.md, "The prompt's prefix").
//!
//! It fails rather than print a prompt the box would not send: a prompt
//! that describes tools depends on the WASM tools installed, which only
//! the running box knows.

use std::process::ExitCode;

use clawfs::namespace::{create_agent, NamespaceReport, Owners};
use clawos_agent_loop::config::AgentConfig;
use clawos_agent_loop::{guard, persona, store::Store, thinker, tools, turn};

fn prompt(agent: &str) -> Result<String, String> {
    let root = std::env::temp_dir().join(format!("clawos-agent-prompt-{}", std::process::id()));
    let made = (|| {
        let agents = root.join(clawfs::layout::AGENTS_DIR);
        std::fs::create_dir_all(&agents).map_err(|e| format!("creating {}: {e}", agents.display()))?;
        create_agent(&root, agent, Owners::Keep, &mut NamespaceReport::default()).map_err(|e| e.to_string())?;
        let dir = clawfs::layout::agent_dir(&root, agent).map_err(|e| e.to_string())?;
        let config = AgentConfig::load(&dir).map_err(|e| e.to_string())?;
        let specs = turn::allowed_specs(&config, &tools::built_in());
        if !specs.is_empty() {
            return Err(format!(
                "a fresh {agent} may call {} tools: its prompt depends on the box's tools",
                specs.len()
            ));
        }
        let store = Store::open(&dir.join(clawfs::layout::DATABASE_FILE)).map_err(|e| e.to_string())?;
        let budget = config.persona.budget_tokens;
        let review = guard::check(&dir, &store, budget).map_err(|e| e.to_string())?;
        if !review.holds.is_empty() {
            return Err(guard::summary(agent, &review.holds));
        }
        let persona = persona::compile(&review.sources, budget);
        Ok(turn::system_prompt(agent, &config, &persona.text, &specs, thinker::native_tools(&config, None)))
    })();
    let _ = std::fs::remove_dir_all(&root);
    made
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [agent] = args.as_slice() else {
        eprintln!("usage: clawos-agent-prompt AGENT");
        return ExitCode::from(2);
    };
    match prompt(agent) {
        Ok(prompt) => {
            print!("{prompt}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("clawos-agent-prompt: {failure}");
            ExitCode::FAILURE
        }
    }
}

//! `fork-bomb`: a hostile tool for the containment tests. `run` tries to
//! start a process and a thread, again and again; WASI gives a tool neither,
//! so each attempt must fail and the result says how.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool" });

struct ForkBomb;

impl Guest for ForkBomb {
    hostile_tool::describe!();

    fn run(_params_json: String) -> Result<String, ToolError> {
        let (mut processes, mut threads) = (0, 0);
        let (mut process_error, mut thread_error) = (String::new(), String::new());
        for _ in 0..64 {
            match std::process::Command::new("/bin/sh").arg("-c").arg(":(){ :|:& };:").spawn() {
                Ok(_) => processes += 1,
                Err(e) => process_error = e.to_string(),
            }
            match std::thread::Builder::new().spawn(|| loop {
                std::hint::spin_loop();
            }) {
                Ok(_) => threads += 1,
                Err(e) => thread_error = e.to_string(),
            }
        }
        Ok(serde_json::json!({
            "processes_started": processes, "process_error": process_error,
            "threads_started": threads, "thread_error": thread_error,
        })
        .to_string())
    }
}

export!(ForkBomb);

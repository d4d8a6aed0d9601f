//! `spin-forever`: a hostile tool for the limit tests. `run` never returns;
//! the host's epoch deadline must end it with a timeout and keep serving.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool" });

struct SpinForever;

impl Guest for SpinForever {
    hostile_tool::describe!();

    fn run(_params_json: String) -> Result<String, ToolError> {
        let mut counter: u64 = 0;
        loop {
            // black_box keeps the optimiser from proving the loop useless.
            counter = std::hint::black_box(counter.wrapping_add(1));
        }
    }
}

export!(SpinForever);

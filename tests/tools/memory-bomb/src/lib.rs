//! `memory-bomb`: a hostile tool for the limit tests. `run` allocates 1 MiB
//! blocks and touches them until allocation fails; the host's memory limit
//! must end the call with `out_of_memory` and keep serving.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool" });

struct MemoryBomb;

impl Guest for MemoryBomb {
    hostile_tool::describe!();

    fn run(_params_json: String) -> Result<String, ToolError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(std::hint::black_box(vec![0xA5; 1 << 20]));
        }
    }
}

export!(MemoryBomb);

//! `spin-forever`: a hostile tool for the limit tests. `run` never returns;
//! the host's epoch deadline must end it with a timeout and keep serving.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool" });

struct SpinForever;

impl Guest for SpinForever {
    fn describe() -> Descriptor {
        Descriptor {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            params_schema: "{}".into(),
        }
    }

    fn run(_params_json: String) -> Result<String, ToolError> {
        let mut counter: u64 = 0;
        loop {
            // black_box keeps the optimiser from proving the loop useless.
            counter = std::hint::black_box(counter.wrapping_add(1));
        }
    }
}

export!(SpinForever);

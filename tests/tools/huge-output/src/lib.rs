//! `huge-output`: a hostile tool for the limit tests. `run` returns a 4 MiB
//! JSON string, four times what the host accepts; the call must fail with
//! `invalid_output` rather than flood the caller.

wit_bindgen::generate!({ path: "../../../specs/wit", world: "tool" });

struct HugeOutput;

impl Guest for HugeOutput {
    hostile_tool::describe!();

    fn run(_params_json: String) -> Result<String, ToolError> {
        Ok(format!("\"{}\"", "x".repeat(4 << 20)))
    }
}

export!(HugeOutput);

//! The image's own tools (Rust, wit-bindgen, wasm32-wasip2) through the host,
//! from `out/tools` as `make tools` leaves it. CI runs `cargo test` before the
//! tools are built, so without them this prints SKIPPED and passes; the WAT
//! fixtures in tests/host.rs cover the host itself either way.

use std::path::Path;
use std::time::Duration;

use clawos_toolhost::definition::Registry;
use clawos_toolhost::{CallError, CallRequest, HostConfig, ToolHost};
use serde_json::json;

#[test]
fn image_tools_run_through_the_host() {
    let registry_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../out/tools/registry.json");
    if !registry_path.exists() {
        println!("SKIPPED: {} is missing (run `make tools`)", registry_path.display());
        return;
    }
    let registry = Registry::load(&registry_path).expect("registry.json from tools.sh is valid");
    let clawfs = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(clawfs.path().join("workspaces/default")).unwrap();
    std::fs::write(clawfs.path().join("workspaces/default/hello.txt"), "hi there").unwrap();
    std::fs::write(clawfs.path().join("outside.txt"), "secret").unwrap();
    let host = ToolHost::new(HostConfig { clawfs_root: clawfs.path().into(), ..HostConfig::default() }).unwrap();
    let run = |tool: &str, params: serde_json::Value, timeout: Option<Duration>| {
        host.call(registry.get(tool).expect("tool in registry"), &CallRequest { agent_id: "test-agent", params: &params, timeout })
    };

    assert_eq!(run("text-stats", json!({"text": "one two\nthree"}), None).unwrap(), json!({"lines": 2, "words": 3, "bytes": 13}));
    assert!(matches!(run("text-stats", json!({"txt": 1}), None), Err(CallError::Tool { kind: "invalid_params", .. })));
    assert_eq!(
        run("file-read", json!({"path": "/clawfs/workspaces/default/hello.txt"}), None).unwrap(),
        json!({"path": "/clawfs/workspaces/default/hello.txt", "text": "hi there"})
    );
    assert!(matches!(run("file-read", json!({"path": "/clawfs/outside.txt"}), None), Err(CallError::CapabilityDenied { .. })));
    assert!(matches!(run("spin-forever", json!({}), Some(Duration::from_millis(300))), Err(CallError::Timeout { .. })));
    assert!(run("text-stats", json!({"text": ""}), None).is_ok(), "host serves after a timeout");
}

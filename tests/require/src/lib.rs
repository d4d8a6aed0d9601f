//! What a test does when something it needs is not on this machine (swtpm,
//! FUSE, root, a tmpfs mount, the kernel's BTF, the output of `make tools`
//! or `make models`, the AgentFS SDK, the MCP test servers).
//!
//! Under `make test` (`make test-unit` sets [`REQUIRE_ALL`]) the test fails,
//! naming what is missing: a run on a machine that lacks it is red, never
//! green for tests that did not run. In a developer's plain `cargo test` it
//! prints `SKIPPED <test>: <reason>` straight to stderr (cargo captures only
//! the print macros, and a skip must not look like a pass) and the caller
//! returns; `scripts/test-summary.sh` counts those lines.

use std::io::Write as _;

/// The environment variable under which every need is required.
pub const REQUIRE_ALL: &str = "CLAWOS_TEST_REQUIRE_ALL";

/// `test` cannot run here because of `reason`: panics when [`REQUIRE_ALL`]
/// is set, else prints the SKIPPED line. The caller returns after it.
pub fn missing(test: &str, reason: &str) {
    assert!(std::env::var_os(REQUIRE_ALL).is_none(), "{test}: {reason} (required under make test, {REQUIRE_ALL}=1)");
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

/// `rel` under the package's directory in the checkout whose `cargo` runs
/// this test, from CARGO_MANIFEST_DIR as cargo sets it at run time. Never
/// the compile-time `env!` (which `make lint` refuses): the shared target
/// directory lets a clone run binaries another checkout built
/// (scripts/source-mtimes.py), and that value names the other checkout.
pub fn package_path(rel: &str) -> std::path::PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is unset: run this through cargo");
    std::path::Path::new(&dir).join(rel)
}

/// `node` and the entry point of the reference MCP server
/// `@modelcontextprotocol/server-everything`, which `make mcp-servers`
/// installs into out/mcp-servers (or where `CLAWOS_MCP_SERVERS` says, as
/// `make test` does); `None` after [`missing`] when either is not there.
pub fn mcp_everything(test: &str) -> Option<(String, String)> {
    let dir = match std::env::var_os("CLAWOS_MCP_SERVERS") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => package_path("../../out/mcp-servers"),
    };
    let entry = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let node = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|path| path.join("node"))
        .find(|path| path.is_file());
    match (entry.is_file(), node) {
        (true, Some(node)) => Some((node.display().to_string(), entry.display().to_string())),
        (false, _) => {
            missing(test, &format!("no {} (run `make mcp-servers`)", entry.display()));
            None
        }
        (true, None) => {
            missing(test, "no node on PATH");
            None
        }
    }
}

/// The command that starts the reference server `entry` with `node` over
/// standard input and output through a shell that first writes the
/// server's PID to `pid_file` (to signal it or read its memory). The server
/// keeps the shell's standard input, through fd 3: a background job's own
/// is /dev/null before any redirection.
pub fn mcp_everything_with_pid(node: &str, entry: &str, pid_file: &std::path::Path) -> Vec<String> {
    let script = format!("exec 3<&0; '{node}' '{entry}' stdio <&3 3<&- & echo $! > '{}'; wait", pid_file.display());
    vec!["/bin/sh".into(), "-c".into(), script]
}

//! The client the official MCP conformance suite drives
//! (`@modelcontextprotocol/conformance`, pinned in tests/mcp-servers): for
//! each client scenario the suite starts the scenario's server on loopback
//! and runs this program with the server's URL as its last argument and the
//! scenario's name in `MCP_CONFORMANCE_SCENARIO`. It reaches the server with
//! ClawOS's MCP client (`mcp`, specs/mcp/README.md) as agent-loop reaches a
//! remote server (`url`, no token), does what the scenario asks, and exits
//! 0, or 1 with the reason on stderr. The suite judges the exchange from its
//! server's side; this adds what only the client sees (the tool's answer).
//!
//! Owns: what the client does in each scenario it takes part in.
//!
//! Must not own: any of the protocol (connecting, the handshake, listing
//! tools, calls and their transport are `mcp`'s, used through its public API
//! only: a scenario that needs more of the client, such as elicitation or
//! OAuth, is left out, never worked around here); which scenarios run and
//! what counts as passing (tests/mcp-conformance/run.sh and the suite).

use std::process::ExitCode;

/// The agent and server names the connection is made under: any valid ones
/// (specs/mcp/README.md, "A server's table"); nothing here is sandboxed.
const AGENT: &str = "conformance";
const SERVER: &str = "conformance";

/// Each of the handshake and a call may take this long: well under the
/// suite's own 30 s for the whole run, so a hang fails with the client's
/// reason rather than the suite killing a silent process.
const TIMEOUT_S: u64 = 10;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    // The suite appends the URL to the command it was given.
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: MCP_CONFORMANCE_SCENARIO=<scenario> clawos-mcp-conformance <server URL>");
        return ExitCode::FAILURE;
    };
    match run(&scenario, url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(reason) => {
            eprintln!("clawos-mcp-conformance: scenario {scenario:?}: {reason}");
            ExitCode::FAILURE
        }
    }
}

/// Connects to the scenario's server, plays `scenario`, and closes the
/// connection whatever the outcome (the suite stops its server after us).
async fn run(scenario: &str, url: String) -> Result<(), String> {
    let config = mcp::ServerConfig {
        url: Some(url),
        call_timeout_s: TIMEOUT_S,
        start_timeout_s: TIMEOUT_S,
        ..Default::default()
    };
    let connection = mcp::Connection::connect(AGENT, SERVER, &config, &mcp::Launch::Child, &mcp::Secrets::default())
        .await
        .map_err(|e| e.to_string())?;
    let outcome = play(scenario, &connection).await;
    connection.close().await;
    outcome
}

/// What `scenario` asks of a client once connected. Every scenario lists
/// the tools first, as agent-loop does before a turn can call one.
async fn play(scenario: &str, connection: &mcp::Connection) -> Result<(), String> {
    let tools = connection.tools().await.map_err(|e| e.to_string())?;
    match scenario {
        // The handshake is what the suite checks (the protocol version and
        // the client's name and version); its server lists no tools.
        "initialize" => {
            if tools.usable.is_empty() && tools.refused.is_empty() {
                Ok(())
            } else {
                Err(format!("the scenario's server lists no tools, the client read {tools:?}"))
            }
        }
        // A tool with arguments, and its text answer read back.
        "tools_call" => {
            let arguments = serde_json::Map::from_iter([("a".into(), 5.into()), ("b".into(), 3.into())]);
            call(connection, &tools, "add_numbers", arguments, "The sum of 5 and 3 is 8").await
        }
        // The server ends the call's event stream before answering; the
        // client must reconnect after the stream's `retry` delay, and the
        // answer comes on the new stream.
        "sse-retry" => {
            let arguments = serde_json::Map::new();
            call(connection, &tools, "test_reconnection", arguments, "Reconnection test completed successfully").await
        }
        other => Err(format!("not a scenario this client takes part in: {other:?} (tests/mcp-conformance/run.sh)")),
    }
}

/// Calls the server's tool `name`, which `tools` must hold as usable, and
/// requires the answer `expected`, not an error.
async fn call(
    connection: &mcp::Connection,
    tools: &mcp::Tools,
    name: &str,
    arguments: serde_json::Map<String, serde_json::Value>,
    expected: &str,
) -> Result<(), String> {
    if !tools.usable.iter().any(|tool| tool.server_name == name) {
        return Err(format!("the server's tool {name:?} is not usable: {tools:?}"));
    }
    let output = connection.call(name, arguments, mcp::CallOptions::default()).await.map_err(|e| e.to_string())?;
    if !output.is_error && output.text == expected {
        Ok(())
    } else {
        Err(format!("{name:?} answered {output:?}, not {expected:?}"))
    }
}

//! The launcher program itself, as far as a development machine can run it
//! (starting a unit needs root and systemd: the boot check
//! tests/vm/checks/72-mcp.sh does): a peer that is not agent-loop is
//! refused before its request is read.

use std::io::{BufRead, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

use mcp_launch::Reply;

#[test]
fn a_peer_that_is_not_agent_loop_is_refused() {
    // The connection's peer is this test: root or a developer, never
    // clawos-agent-loop on a build machine.
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_clawos-mcp-launch"))
        .arg("clawos-mcp-launch@0-1-2.service")
        .stdin(std::os::fd::OwnedFd::from(theirs))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let request = r#"{"agent":"main","server":"x","command":["/bin/true"],"memory_max_mib":512}"#;
    ours.write_all(format!("{request}\n").as_bytes()).unwrap();
    let mut line = String::new();
    std::io::BufReader::new(&ours).read_line(&mut line).unwrap();
    let reply: Reply = serde_json::from_str(&line).unwrap();
    assert!(
        matches!(&reply, Reply::Refused { reason }
            if reason.contains("only agent-loop starts MCP servers") || reason.contains("no user clawos-agent-loop")),
        "{reply:?}"
    );
    assert!(!launcher.wait().unwrap().success());
}

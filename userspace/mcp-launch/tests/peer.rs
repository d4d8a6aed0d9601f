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
    // The peer is checked before the request is read: the launcher may
    // have answered and closed already, so the write may fail; the answer
    // is there to read all the same.
    let _ = ours.write_all(format!("{request}\n").as_bytes());
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

/// The `--secret-env` step runs COMMAND with the line's variables, on the
/// same connection: COMMAND reads what follows the line.
fn secret_env_step(names: &str, sent: &str) -> (std::process::ExitStatus, String, String) {
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let server = std::os::fd::OwnedFd::from(theirs);
    let step = Command::new(env!("CARGO_BIN_EXE_clawos-mcp-launch"))
        .args([mcp_launch::SECRET_ENV_FLAG, names, "--", "/bin/sh", "-c", r#"printf '%s|' "$API_TOKEN"; head -n 1"#])
        .stdin(server.try_clone().unwrap())
        .stdout(server)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A step that refuses exits without reading the rest: the writes and
    // the read may then fail (a reset connection), with nothing answered.
    let _ = ours.write_all(sent.as_bytes()).and_then(|()| ours.write_all(b"the server's first message\n"));
    let _ = ours.shutdown(std::net::Shutdown::Write);
    let output = step.wait_with_output().unwrap();
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut ours, &mut answer);
    (output.status, answer, String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn secret_variables_are_read_from_the_connection_and_the_rest_is_the_servers() {
    let (status, answer, _) = secret_env_step("API_TOKEN", "{\"API_TOKEN\":\"s3cret\"}\n");
    assert!(status.success());
    assert_eq!(answer, "s3cret|the server's first message\n");
    // A variable that was not named, or a missing one: the server never runs.
    for sent in ["{\"API_TOKEN\":\"s3cret\",\"LD_PRELOAD\":\"/x\"}\n", "{}\n", "s3cret\n"] {
        let (status, answer, errors) = secret_env_step("API_TOKEN", sent);
        assert!(!status.success() && answer.is_empty(), "{sent:?}: {answer:?}");
        assert!(errors.contains("secret variables:") && !errors.contains("s3cret"), "{errors}");
    }
}

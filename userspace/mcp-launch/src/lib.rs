//! The sandbox of a local MCP server (specs/mcp/README.md, "Where local
//! servers run"): what agent-loop asks for, and the transient systemd
//! service every local server runs in.
//!
//! Agent-loop connects to the launcher's socket ([`SOCKET`]), writes one
//! [`Request`] as a line of JSON, and reads one [`Reply`] line. After a
//! [`Reply::Started`] the connection is the server's standard input and
//! output, until either side closes it. A server with secret variables
//! ([`Request::secret_env`]) is started through this crate's program in its
//! [`SECRET_ENV_FLAG`] mode, inside the unit: agent-loop writes their
//! values as the connection's first line after the reply, that mode reads
//! it ([`parse_secret_env`]) and becomes the server. A value is thus in no
//! request, unit property, command line or file, only in the server's own
//! environment.
//!
//! Owns: the request and its rules ([`Request::check`]), the unit's name,
//! user and state directory, and every property of the unit
//! ([`Request::systemd_run_args`]): the confinement is fixed here, not
//! chosen by the request, which names only what to run, its environment,
//! its memory and the addresses it may reach.
//!
//! Must not own: which servers an agent has (its `config.toml`, read by
//! agent-loop), the protocol spoken on the connection (the `mcp` crate),
//! and starting the unit (the `clawos-mcp-launch` program).

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The launcher's socket. Only agent-loop's user may connect
/// (`clawos-mcp-launch.socket`), and the launcher checks the peer again.
pub const SOCKET: &str = "/run/clawos-mcp-launch/socket";
/// The one user the launcher starts servers for.
pub const CLIENT_USER: &str = "clawos-agent-loop";
/// The longest request line.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// A server's memory when its table does not say (MiB).
pub const DEFAULT_MEMORY_MIB: u32 = 512;
/// The least and most memory a server may be given (MiB).
pub const MEMORY_MIB: std::ops::RangeInclusive<u32> = 64..=4096;
/// Processes and threads of one server: a Node.js server runs about a dozen.
pub const TASKS_MAX: u32 = 64;
/// One server's share of the CPU: at most one core's time.
pub const CPU_QUOTA: &str = "100%";
/// This crate's program on the box: the launcher, and inside a server's
/// unit the step that reads its secret variables ([`SECRET_ENV_FLAG`]).
pub const PROGRAM: &str = "/usr/bin/clawos-mcp-launch";
/// `clawos-mcp-launch --secret-env NAME,NAME -- COMMAND...`: reads one line
/// from standard input, a JSON object holding exactly those variables
/// ([`parse_secret_env`]), and runs COMMAND with them added to its
/// environment, standard input and output passed on as they are.
pub const SECRET_ENV_FLAG: &str = "--secret-env";
/// The most secret variables a server may have.
pub const MAX_SECRET_ENV: usize = 16;
/// The longest a server runs before it is stopped (agent-loop starts it
/// again at the next use): whatever it leaks, it does not leak for long.
pub const RUNTIME_MAX: &str = "1d";
/// The longest agent or server name the unit name takes (the agent's
/// limit, specs/clawfs/README.md, "Names"; a server's is 32).
const MAX_NAME_LEN: usize = 64;
/// The most addresses a server may be granted.
const MAX_NETWORK_ALLOW: usize = 32;

/// What agent-loop asks for: agent `agent`'s server `server` (from its
/// `[mcp.servers.<server>]`), the program and arguments of `command`, with
/// exactly the environment `env`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The agent.
    pub agent: String,
    /// The server's name in the agent's config.
    pub server: String,
    /// The program (an absolute path) and its arguments.
    pub command: Vec<String>,
    /// The server's environment, beside what systemd sets for every
    /// service (`PATH`, `HOME`, `STATE_DIRECTORY`, ...).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The names of its secret variables: their values (from the vault)
    /// follow the reply on the connection, never in the request.
    #[serde(default)]
    pub secret_env: Vec<String>,
    /// Its memory limit (MiB), within [`MEMORY_MIB`].
    pub memory_max_mib: u32,
    /// The IP addresses and prefixes (`192.0.2.7`, `2001:db8::/32`) it may
    /// reach; none: no network at all.
    #[serde(default)]
    pub network_allow: Vec<String>,
}

/// The launcher's answer, one line of JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The unit is being started; the connection is now the server's.
    Started {
        /// The unit's name.
        unit: String,
    },
    /// Nothing was started, for this reason.
    Refused {
        /// Why.
        reason: String,
    },
}

impl Request {
    /// Checks the request against the rules of its fields; the reason
    /// when it breaks one. Whether the program exists is the launcher's
    /// to check, on the box.
    pub fn check(&self) -> Result<(), String> {
        check_name("agent", &self.agent)?;
        check_name("server", &self.server)?;
        let Some(program) = self.command.first() else { return Err("command: empty".into()) };
        if !program.starts_with('/') {
            return Err(format!("command: {program:?} is not an absolute path"));
        }
        if let Some(bad) = self.command.iter().find(|word| word.contains('\0')) {
            return Err(format!("command: {bad:?} holds a NUL"));
        }
        if let Some((key, _)) = self.env.iter().find(|(key, value)| !is_env_name(key) || value.contains('\0')) {
            return Err(format!("env: {key:?} is not a variable name (A-Z, 0-9, _) or its value holds a NUL"));
        }
        check_secret_env(&self.secret_env, &self.env).map_err(|reason| format!("secret_env: {reason}"))?;
        check_limits(self.memory_max_mib, &self.network_allow).map_err(|(field, reason)| format!("{field}: {reason}"))
    }

    /// The unit, one per (agent, server): `clawos-mcp-<agent>_<server>.service`
    /// (neither name holds `_`, so the pair reads back unambiguously).
    pub fn unit(&self) -> String {
        format!("clawos-mcp-{}_{}.service", self.agent, self.server)
    }

    /// Its state directory under `/var/lib`, the one place it may write
    /// that outlives it.
    pub fn state_directory(&self) -> String {
        format!("clawos-mcp/{}/{}", self.agent, self.server)
    }

    /// Its dynamic user's name: the same for the same (agent, server), so
    /// its state directory keeps its owner from one start to the next;
    /// a user name is at most 31 characters, so the pair is hashed.
    pub fn user(&self) -> String {
        // FNV-1a, 32 bits: a name, not a secret.
        let hash = format!("{}/{}", self.agent, self.server)
            .bytes()
            .fold(0x811c_9dc5_u32, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193));
        format!("clawos-mcp-{hash:08x}")
    }

    /// The arguments of `systemd-run` that start the server as the unit
    /// [`Request::unit`], bound to `launcher_unit` (the launcher's own
    /// unit: when the connection ends and the launcher exits, the server
    /// is stopped with its whole cgroup) and to agent-loop. The
    /// request checked ([`Request::check`]) first.
    pub fn systemd_run_args(&self, launcher_unit: &str) -> Vec<String> {
        let state = format!("/var/lib/{}", self.state_directory());
        let mut args: Vec<String> = [
            // The server's standard input and output are the launcher's:
            // the connection. systemd-run waits for the unit to end.
            "--pipe",
            "--quiet",
            "--collect",
            // The command is passed as it is: no `${VAR}` expanded.
            "--expand-environment=no",
            // Started only once the program was executed: a missing
            // program is systemd-run's error, not a silent exit.
            "--service-type=exec",
            "--slice=clawos-mcp.slice",
        ]
        .map(String::from)
        .into();
        args.push(format!("--unit={}", self.unit()));
        args.push(format!("--description=MCP server {} of agent {}", self.server, self.agent));
        let mut properties: Vec<String> = vec![
            format!("BindsTo={launcher_unit}"),
            format!("After={launcher_unit}"),
            "BindsTo=clawos-agent-loop.service".into(),
            "After=clawos-agent-loop.service".into(),
            // A user of its own, made for the unit and gone with it.
            "DynamicUser=yes".into(),
            format!("User={}", self.user()),
            format!("StateDirectory={}", self.state_directory()),
            format!("WorkingDirectory={state}"),
            // Limits (specs/mcp/README.md, "Where local servers run").
            format!("MemoryMax={}M", self.memory_max_mib),
            "MemorySwapMax=0".into(),
            format!("TasksMax={TASKS_MAX}"),
            format!("CPUQuota={CPU_QUOTA}"),
            format!("RuntimeMaxSec={RUNTIME_MAX}"),
            "LimitNOFILE=1024".into(),
            "TimeoutStopSec=5".into(),
            // A read-only system, nothing of /clawfs or the components'
            // state, no home directories, a /tmp and /dev of its own.
            "ProtectSystem=strict".into(),
            "ProtectHome=yes".into(),
            "InaccessiblePaths=-/clawfs -/var/lib/clawos -/etc/clawos".into(),
            "PrivateTmp=yes".into(),
            "PrivateDevices=yes".into(),
            "PrivateIPC=yes".into(),
            "ProtectProc=invisible".into(),
            "ProtectKernelTunables=yes".into(),
            "ProtectKernelModules=yes".into(),
            "ProtectKernelLogs=yes".into(),
            "ProtectControlGroups=yes".into(),
            "ProtectClock=yes".into(),
            "ProtectHostname=yes".into(),
            // No privileges, and no way to gain any.
            "NoNewPrivileges=yes".into(),
            "CapabilityBoundingSet=".into(),
            "RestrictSUIDSGID=yes".into(),
            "RestrictNamespaces=yes".into(),
            "RestrictRealtime=yes".into(),
            "LockPersonality=yes".into(),
            "UMask=0077".into(),
            // The calls of an ordinary service (no MemoryDenyWriteExecute:
            // Node.js's JIT writes code it then runs).
            "SystemCallArchitectures=native".into(),
            "SystemCallFilter=@system-service".into(),
            "SystemCallFilter=~@privileged".into(),
            "SystemCallErrorNumber=EPERM".into(),
        ];
        if self.network_allow.is_empty() {
            // A network namespace with only its own loopback: nothing of
            // the box's network, its loopback services included.
            properties.extend(
                ["PrivateNetwork=yes", "RestrictAddressFamilies=AF_UNIX", "IPAddressDeny=any"].map(String::from),
            );
        } else {
            // The box's network, filtered by address in the kernel
            // (systemd's cgroup BPF programs): the granted ones only.
            properties.push("RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6".into());
            properties.push("IPAddressDeny=any".into());
            properties.push(format!("IPAddressAllow={}", self.network_allow.join(" ")));
        }
        args.extend(properties.into_iter().map(|property| format!("--property={property}")));
        if !self.env.contains_key("HOME") {
            args.push(format!("--setenv=HOME={state}"));
        }
        args.extend(self.env.iter().map(|(key, value)| format!("--setenv={key}={value}")));
        args.push("--".into());
        if !self.secret_env.is_empty() {
            args.extend([PROGRAM.into(), SECRET_ENV_FLAG.into(), self.secret_env.join(","), "--".into()]);
        }
        args.extend(self.command.iter().cloned());
        args
    }
}

/// The names of a server's secret variables: variable names, at most
/// [`MAX_SECRET_ENV`], each once and none also in `env`.
pub fn check_secret_env(names: &[String], env: &BTreeMap<String, String>) -> Result<(), String> {
    if names.len() > MAX_SECRET_ENV {
        return Err(format!("more than {MAX_SECRET_ENV} variables"));
    }
    let mut seen = std::collections::BTreeSet::new();
    match names.iter().find(|name| !is_env_name(name) || env.contains_key(*name) || !seen.insert(*name)) {
        Some(bad) => Err(format!("{bad:?} is not a variable name (A-Z, 0-9, _), or is in env too or named twice")),
        None => Ok(()),
    }
}

/// The line of secret variables ([`SECRET_ENV_FLAG`]): a JSON object with
/// exactly the variables `names`, each a string without NUL. The error
/// names a variable, never a value.
pub fn parse_secret_env(line: &[u8], names: &[&str]) -> Result<BTreeMap<String, String>, String> {
    let values: BTreeMap<String, String> =
        serde_json::from_slice(line).map_err(|_| "the secret variables' line is not a JSON object of strings")?;
    if let Some(missing) = names.iter().find(|name| !values.contains_key(**name)) {
        return Err(format!("the secret variable {missing} was not sent"));
    }
    if let Some(extra) = values.keys().find(|key| !names.contains(&key.as_str())) {
        return Err(format!("{extra:?} was sent but is not one of the server's secret variables"));
    }
    if let Some((key, _)) = values.iter().find(|(_, value)| value.contains('\0')) {
        return Err(format!("the value of {key} holds a NUL"));
    }
    Ok(values)
}

/// An agent's or a server's name: `a-z`, `0-9` and `-`, starting with a
/// letter (both names' rules allow no more; the unit's name is made of them).
fn check_name(what: &str, name: &str) -> Result<(), String> {
    if is_name(name, MAX_NAME_LEN) {
        Ok(())
    } else {
        Err(format!("{what}: {name:?} is not a-z, 0-9 and -, starting with a letter, at most {MAX_NAME_LEN}"))
    }
}

/// Whether `name` is `a-z`, `0-9` and `-`, starts with a letter and has at
/// most `max` bytes: the shape of a server's name (the `mcp` crate's rule)
/// and of an agent's, as far as a unit's name needs.
pub fn is_name(name: &str, max: usize) -> bool {
    let mut chars = name.chars();
    name.len() <= max
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A server's memory limit and granted addresses (the `memory_max_mib`
/// and `network_allow` of its table); the field and why, when one breaks
/// its rule. The `mcp` crate checks a table with it as the launcher checks
/// a request.
pub fn check_limits(memory_max_mib: u32, network_allow: &[String]) -> Result<(), (&'static str, String)> {
    if !MEMORY_MIB.contains(&memory_max_mib) {
        let reason = format!("{memory_max_mib} is not within {}..={}", MEMORY_MIB.start(), MEMORY_MIB.end());
        return Err(("memory_max_mib", reason));
    }
    if network_allow.len() > MAX_NETWORK_ALLOW {
        return Err(("network_allow", format!("more than {MAX_NETWORK_ALLOW} entries")));
    }
    network_allow.iter().try_for_each(|entry| check_network_allow(entry)).map_err(|reason| ("network_allow", reason))
}

/// An environment variable's name: `A-Z`, `0-9` and `_`, not starting
/// with a digit.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// An entry of `network_allow`: an address or a prefix, as systemd's
/// `IPAddressAllow=` reads it. Names are refused: the filter is by
/// address, and a name's address changes.
fn check_network_allow(entry: &str) -> Result<(), String> {
    let (address, length) = match entry.split_once('/') {
        Some((address, length)) => (address, Some(length)),
        None => (entry, None),
    };
    let bad = || format!("{entry:?} is not an IP address or prefix (names are not resolved)");
    let address: IpAddr = address.parse().map_err(|_| bad())?;
    let most = if address.is_ipv4() { 32 } else { 128 };
    match length.map(str::parse::<u8>) {
        None => Ok(()),
        Some(Ok(length)) if length <= most => Ok(()),
        Some(_) => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            agent: "main".into(),
            server: "everything".into(),
            command: vec!["/usr/bin/node".into(), "/usr/lib/mcp/index.js".into(), "stdio".into()],
            env: BTreeMap::from([("LANG".into(), "C.UTF-8".into())]),
            secret_env: Vec::new(),
            memory_max_mib: DEFAULT_MEMORY_MIB,
            network_allow: Vec::new(),
        }
    }

    fn property(args: &[String], key: &str) -> Vec<String> {
        let prefix = format!("--property={key}=");
        args.iter().filter_map(|arg| arg.strip_prefix(&prefix).map(String::from)).collect()
    }

    #[test]
    fn a_server_without_network_gets_a_namespace_of_its_own() {
        let request = request();
        request.check().unwrap();
        let args = request.systemd_run_args("clawos-mcp-launch@3-100-200.service");
        assert_eq!(property(&args, "PrivateNetwork"), ["yes"]);
        assert_eq!(property(&args, "RestrictAddressFamilies"), ["AF_UNIX"]);
        assert_eq!(property(&args, "IPAddressAllow"), Vec::<String>::new());
        assert_eq!(property(&args, "BindsTo"), ["clawos-mcp-launch@3-100-200.service", "clawos-agent-loop.service"]);
        assert!(args.contains(&"--unit=clawos-mcp-main_everything.service".to_string()));
        // The command comes last, whole, after the end of the options.
        let end = args.iter().position(|arg| arg == "--").unwrap();
        assert_eq!(args[end + 1..], request.command);
        assert!(args.contains(&"--setenv=LANG=C.UTF-8".to_string()));
        assert!(args.contains(&"--setenv=HOME=/var/lib/clawos-mcp/main/everything".to_string()));
    }

    #[test]
    fn granted_addresses_open_the_network_to_them_only() {
        let request = Request { network_allow: vec!["192.0.2.7".into(), "2001:db8::/32".into()], ..request() };
        request.check().unwrap();
        let args = request.systemd_run_args("l.service");
        assert!(property(&args, "PrivateNetwork").is_empty());
        assert_eq!(property(&args, "IPAddressDeny"), ["any"]);
        assert_eq!(property(&args, "IPAddressAllow"), ["192.0.2.7 2001:db8::/32"]);
    }

    #[test]
    fn the_confinement_does_not_depend_on_the_request() {
        // What a request may choose changes none of these.
        let fixed = [
            "DynamicUser",
            "ProtectSystem",
            "NoNewPrivileges",
            "CapabilityBoundingSet",
            "SystemCallFilter",
            "TasksMax",
        ];
        let plain = request().systemd_run_args("l.service");
        let other = Request {
            env: BTreeMap::from([("HOME".into(), "/tmp".into())]),
            memory_max_mib: 4096,
            network_allow: vec!["0.0.0.0/0".into()],
            ..request()
        }
        .systemd_run_args("l.service");
        for key in fixed {
            assert!(!property(&plain, key).is_empty(), "{key}");
            assert_eq!(property(&plain, key), property(&other, key), "{key}");
        }
        assert!(!other.iter().any(|arg| arg.starts_with("--setenv=HOME=/var")));
    }

    #[test]
    fn bad_requests_are_refused_with_the_field() {
        let cases = [
            (Request { agent: "Main".into(), ..request() }, "agent:"),
            (Request { server: "a_b".into(), ..request() }, "server:"),
            (Request { command: vec![], ..request() }, "command: empty"),
            (Request { command: vec!["node".into()], ..request() }, "not an absolute path"),
            (Request { command: vec!["/bin/x".into(), "a\0b".into()], ..request() }, "NUL"),
            (Request { env: BTreeMap::from([("lower".into(), "x".into())]), ..request() }, "env:"),
            (Request { secret_env: vec!["LANG".into()], ..request() }, "secret_env:"),
            (Request { secret_env: vec!["T".into(), "T".into()], ..request() }, "named twice"),
            (Request { secret_env: vec!["a".into()], ..request() }, "secret_env:"),
            (Request { memory_max_mib: 10_000, ..request() }, "memory_max_mib:"),
            (Request { network_allow: vec!["example.com".into()], ..request() }, "names are not resolved"),
            (Request { network_allow: vec!["10.0.0.0/33".into()], ..request() }, "network_allow:"),
        ];
        for (request, expected) in cases {
            let reason = request.check().unwrap_err();
            assert!(reason.contains(expected), "{reason:?} lacks {expected:?}");
        }
    }

    #[test]
    fn secret_variables_are_read_inside_the_unit_and_named_only() {
        let request = Request { secret_env: vec!["API_TOKEN".into(), "OTHER".into()], ..request() };
        request.check().unwrap();
        let args = request.systemd_run_args("l.service");
        let end = args.iter().position(|arg| arg == "--").unwrap();
        let mut command = vec![PROGRAM.to_string(), SECRET_ENV_FLAG.into(), "API_TOKEN,OTHER".into(), "--".into()];
        command.extend(request.command.iter().cloned());
        assert_eq!(args[end + 1..], command);
        assert!(!args.iter().any(|arg| arg.contains("--setenv=API_TOKEN")), "{args:?}");
    }

    #[test]
    fn the_secret_line_holds_exactly_the_named_variables() {
        let names = ["API_TOKEN", "OTHER"];
        let values = parse_secret_env(br#"{"API_TOKEN": "s3cret", "OTHER": "x"}"#, &names).unwrap();
        assert_eq!(values["API_TOKEN"], "s3cret");
        let cases: [(&[u8], &str); 4] = [
            (br#"{"API_TOKEN": "s3cret"}"#, "OTHER was not sent"),
            (br#"{"API_TOKEN": "a", "OTHER": "b", "PATH": "/x"}"#, "\"PATH\" was sent"),
            (br#"{"API_TOKEN": "s3cret", "OTHER": 1}"#, "not a JSON object of strings"),
            (b"s3cret", "not a JSON object of strings"),
        ];
        for (line, expected) in cases {
            let reason = parse_secret_env(line, &names).unwrap_err();
            assert!(reason.contains(expected), "{reason:?} lacks {expected:?}");
            assert!(!reason.contains("s3cret"), "{reason:?} shows the value");
        }
    }

    #[test]
    fn each_pair_has_its_own_user() {
        let a = Request { agent: "a".into(), server: "b-c".into(), ..request() };
        let b = Request { agent: "a-b".into(), server: "c".into(), ..request() };
        assert_ne!(a.user(), b.user());
        assert_ne!(a.unit(), b.unit());
        assert_eq!(a.user().len(), "clawos-mcp-".len() + 8);
    }
}

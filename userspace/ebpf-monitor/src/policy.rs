//! The enforcement policy file (`/etc/clawos/ebpf-policy.toml`) and its
//! translation into map entries.
//!
//! A policy names cgroups by their path under the cgroup v2 mount; each
//! existing cgroup at or below a named one is monitored with the policy of
//! the nearest named ancestor. Cgroups created later get their own entries
//! at the next [`resolve`] (the agent rescans every second and on reload);
//! until then the programs judge them by their nearest ancestor's entry
//! (specs/ebpf/events.md).
use std::{
    collections::BTreeMap,
    net::IpAddr,
    path::{Path, PathBuf},
};

use clawos_ebpf_common::{
    CgroupPolicy, NetGrantKey, PathGrantKey, GRANT_PATH_LEN, MODE_AUDIT, MODE_ENFORCE, RULE_DENY_EXEC,
    RULE_DENY_PRIVILEGED, RULE_RESTRICT_CONNECT, RULE_RESTRICT_OPEN,
};
use serde::{Deserialize, Serialize};

/// Where the image installs the policy.
pub const DEFAULT_POLICY: &str = "/etc/clawos/ebpf-policy.toml";
/// The cgroup v2 mount.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A policy file that cannot be used, naming what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML for a [`Policy`].
    #[error("parsing policy: {0}")]
    Parse(#[from] toml::de::Error),
    /// A cgroup path is absolute or climbs out of the cgroup mount.
    #[error("cgroup path {0:?} must be relative to {CGROUP_ROOT} without `..`")]
    CgroupPath(String),
    /// An open grant is not an absolute path short enough for the kernel's key.
    #[error("open grant {0:?} must be an absolute path shorter than {GRANT_PATH_LEN} bytes")]
    OpenGrant(String),
    /// A connect grant is not `address` or `address/prefix`.
    #[error("connect grant {0:?} must be an IP address or CIDR")]
    ConnectGrant(String),
    /// `connect_except` without `connect_grants` to carve it from.
    #[error("cgroup {0:?} has connect_except but no connect_grants")]
    ExceptWithoutGrants(String),
}

/// Whether forbidden actions are blocked or only reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Report, let it happen (the default: a policy mistake must not break
    /// the appliance before it was seen in audit).
    #[default]
    Audit,
    /// Fail the action with EPERM.
    Enforce,
}

/// The whole policy file.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Monitored cgroups; none means nothing is monitored.
    #[serde(default, rename = "cgroup")]
    pub cgroups: Vec<CgroupRule>,
}

/// One monitored cgroup subtree.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupRule {
    /// Path below the cgroup mount, e.g. `clawos.slice/clawos-wasm-daemon.service`.
    pub path: String,
    /// Default audit.
    #[serde(default)]
    pub mode: Mode,
    /// Forbid every exec. Default false.
    #[serde(default)]
    pub deny_exec: bool,
    /// Forbid ptrace, bpf() and mount. Default false.
    #[serde(default)]
    pub deny_privileged: bool,
    /// Paths the cgroup may open; absent means opens are not restricted.
    /// Entries ending in `/` grant a directory subtree, others one file.
    #[serde(default)]
    pub open_grants: Option<Vec<String>>,
    /// Addresses or CIDRs the cgroup may connect to over IP; absent means
    /// connects are not restricted.
    #[serde(default)]
    pub connect_grants: Option<Vec<String>>,
    /// Addresses or CIDRs carved out of `connect_grants`: "the internet but
    /// not the box's own loopback" is `connect_grants = ["0.0.0.0/0"]` with
    /// `connect_except = ["127.0.0.0/8"]`. A grant narrower than an
    /// exception stands (`"127.0.0.53"` beside them grants the DNS stub),
    /// as the longest prefix wins in the kernel's lookup. The kernel's trie
    /// only grants, so the difference is turned into the ranges that remain
    /// (one per prefix bit between a grant and an exception).
    #[serde(default)]
    pub connect_except: Vec<String>,
}

/// The map entries for one existing cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeEntry {
    /// Path below the cgroup mount.
    pub path: String,
    pub cgroup_id: u64,
    pub policy: CgroupPolicy,
    /// `OPEN_GRANTS` keys as (prefix length in bits, data).
    pub open_grants: Vec<(u32, PathGrantKey)>,
    /// `CONNECT_GRANTS` keys as (prefix length in bits, data).
    pub connect_grants: Vec<(u32, NetGrantKey)>,
}

impl Policy {
    /// Reads and validates the policy at `path`.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| PolicyError::Read { path: path.to_owned(), source })?;
        Self::parse(&text)
    }

    /// Parses and validates policy text.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        let policy: Self = toml::from_str(text)?;
        for rule in &policy.cgroups {
            let path = Path::new(&rule.path);
            if path.is_absolute() || path.components().any(|part| !matches!(part, std::path::Component::Normal(_))) {
                return Err(PolicyError::CgroupPath(rule.path.clone()));
            }
            for grant in rule.open_grants.iter().flatten() {
                open_grant_bytes(grant)?;
            }
            for grant in rule.connect_grants.iter().flatten().chain(&rule.connect_except) {
                parse_cidr(grant)?;
            }
            if rule.connect_grants.is_none() && !rule.connect_except.is_empty() {
                return Err(PolicyError::ExceptWithoutGrants(rule.path.clone()));
            }
        }
        Ok(policy)
    }

    /// The entries for every existing cgroup the policy covers under `root`.
    pub fn resolve(&self, root: &Path) -> Vec<ScopeEntry> {
        // The nearest named ancestor wins: longer paths are applied last.
        let mut by_path: BTreeMap<String, (u64, &CgroupRule)> = BTreeMap::new();
        let mut rules: Vec<&CgroupRule> = self.cgroups.iter().collect();
        rules.sort_by_key(|rule| rule.path.len());
        for rule in rules {
            walk(&root.join(&rule.path), &rule.path, &mut |path, cgroup_id| {
                by_path.insert(path, (cgroup_id, rule));
            });
        }
        by_path.into_iter().map(|(path, (cgroup_id, rule))| rule.entry(path, cgroup_id)).collect()
    }
}

impl CgroupRule {
    fn entry(&self, path: String, cgroup_id: u64) -> ScopeEntry {
        let mut rules = 0;
        if self.deny_exec {
            rules |= RULE_DENY_EXEC;
        }
        if self.deny_privileged {
            rules |= RULE_DENY_PRIVILEGED;
        }
        if self.open_grants.is_some() {
            rules |= RULE_RESTRICT_OPEN;
        }
        if self.connect_grants.is_some() {
            rules |= RULE_RESTRICT_CONNECT;
        }
        let mode = match self.mode {
            Mode::Audit => MODE_AUDIT,
            Mode::Enforce => MODE_ENFORCE,
        };
        let id = cgroup_id.to_ne_bytes();
        let open_grants = self
            .open_grants
            .iter()
            .flatten()
            .filter_map(|grant| open_grant_bytes(grant).ok())
            .flat_map(|bytes| {
                // A directory's own open (a listing, an fsync after a
                // rename) has no trailing `/`: its grant covers it too.
                let itself =
                    (bytes.len() > 1 && bytes.ends_with(b"/")).then(|| [&bytes[..bytes.len() - 1], b"\0"].concat());
                std::iter::once(bytes).chain(itself)
            })
            .map(|bytes| {
                let mut key = PathGrantKey { cgroup_id: id, path: [0; GRANT_PATH_LEN] };
                key.path[..bytes.len()].copy_from_slice(&bytes);
                (((8 + bytes.len()) * 8) as u32, key)
            })
            .collect();
        let cidrs = |list: &[String]| list.iter().filter_map(|cidr| parse_cidr(cidr).ok()).collect::<Vec<_>>();
        let granted = cidrs(self.connect_grants.as_deref().unwrap_or_default());
        let connect_grants = subtract(granted, &cidrs(&self.connect_except))
            .into_iter()
            .map(|(addr, bits)| (64 + bits, NetGrantKey { cgroup_id: id, addr }))
            .collect();
        ScopeEntry { path, cgroup_id, policy: CgroupPolicy { mode, rules }, open_grants, connect_grants }
    }
}

/// Calls `found` for `dir` and every cgroup below it that exists, with its
/// path relative to the mount and its id (the directory's inode number).
fn walk(dir: &Path, relative: &str, found: &mut dyn FnMut(String, u64)) {
    use std::os::unix::fs::MetadataExt;
    let Ok(metadata) = std::fs::metadata(dir) else { return };
    if !metadata.is_dir() {
        return;
    }
    found(relative.to_owned(), metadata.ino());
    let Ok(children) = std::fs::read_dir(dir) else { return };
    for child in children.flatten() {
        if child.file_type().is_ok_and(|kind| kind.is_dir()) {
            let name = child.file_name().to_string_lossy().into_owned();
            walk(&child.path(), &format!("{relative}/{name}"), found);
        }
    }
}

/// The grant's key bytes: a directory prefix as is, a file with its NUL so
/// that it matches that path only.
fn open_grant_bytes(grant: &str) -> Result<Vec<u8>, PolicyError> {
    let mut bytes = grant.as_bytes().to_vec();
    if !grant.ends_with('/') {
        bytes.push(0);
    }
    if !grant.starts_with('/') || grant.contains('\0') || bytes.len() > GRANT_PATH_LEN {
        return Err(PolicyError::OpenGrant(grant.to_owned()));
    }
    Ok(bytes)
}

/// An address or CIDR as IPv6 bytes (IPv4 mapped) and prefix bits.
fn parse_cidr(grant: &str) -> Result<([u8; 16], u32), PolicyError> {
    let invalid = || PolicyError::ConnectGrant(grant.to_owned());
    let (addr, bits) = grant.split_once('/').map_or((grant, None), |(addr, bits)| (addr, Some(bits)));
    let addr: IpAddr = addr.parse().map_err(|_| invalid())?;
    let bits: Option<u32> = bits.map(str::parse).transpose().map_err(|_| invalid())?;
    match addr {
        IpAddr::V4(v4) => {
            let bits = bits.unwrap_or(32);
            if bits > 32 {
                return Err(invalid());
            }
            Ok((v4.to_ipv6_mapped().octets(), 96 + bits))
        }
        IpAddr::V6(v6) => {
            let bits = bits.unwrap_or(128);
            if bits > 128 {
                return Err(invalid());
            }
            Ok((v6.octets(), bits))
        }
    }
}

/// Each grant of `granted` without the ranges of `except` it holds, as
/// (address, prefix bits) in the 128-bit space `parse_cidr` maps both
/// families into. An exception wider than a grant leaves that grant whole
/// (the narrower statement wins, as the longest prefix does in the kernel's
/// lookup). A grant that holds an exception is split along the exception's
/// prefix: each bit on the way down keeps its other half.
fn subtract(granted: Vec<([u8; 16], u32)>, except: &[([u8; 16], u32)]) -> Vec<([u8; 16], u32)> {
    let mask = |bits: u32| if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
    let contains = |(outer, outer_bits): (u128, u32), (inner, inner_bits): (u128, u32)| {
        outer_bits <= inner_bits && (outer ^ inner) & mask(outer_bits) == 0
    };
    let range = |(addr, bits): ([u8; 16], u32)| (u128::from_be_bytes(addr) & mask(bits), bits);
    let cuts: Vec<(u128, u32)> = except.iter().copied().map(range).collect();
    let mut kept = Vec::new();
    for grant in granted.into_iter().map(range) {
        let mut ranges = vec![grant];
        for &cut in cuts.iter().filter(|&&cut| !(cut.1 < grant.1 && contains(cut, grant))) {
            ranges = ranges
                .into_iter()
                .flat_map(|range| {
                    if contains(cut, range) {
                        Vec::new()
                    } else if !contains(range, cut) {
                        vec![range]
                    } else {
                        // Each bit from the range's prefix to the cut's: the
                        // half the cut is not in stays granted.
                        (range.1..cut.1)
                            .map(|bit| ((cut.0 & mask(bit + 1)) ^ (1u128 << (127 - bit)), bit + 1))
                            .collect()
                    }
                })
                .collect();
        }
        kept.extend(ranges);
    }
    kept.into_iter().map(|(addr, bits)| (addr.to_be_bytes(), bits)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
        [[cgroup]]
        path = "clawos.slice"

        [[cgroup]]
        path = "clawos.slice/tools"
        mode = "enforce"
        deny_exec = true
        open_grants = ["/usr/lib/", "/etc/ld.so.cache"]
        connect_grants = ["10.0.0.0/8", "2001:db8::1"]
    "#;

    #[test]
    fn parses_and_rejects_bad_policies() {
        let policy = Policy::parse(POLICY).unwrap();
        assert_eq!(policy.cgroups.len(), 2);
        assert_eq!(policy.cgroups[0].mode, Mode::Audit);
        assert!(matches!(Policy::parse("[[cgroup]]\npath = \"/abs\""), Err(PolicyError::CgroupPath(_))));
        assert!(matches!(Policy::parse("[[cgroup]]\npath = \"a/../b\""), Err(PolicyError::CgroupPath(_))));
        assert!(matches!(
            Policy::parse("[[cgroup]]\npath = \"a\"\nopen_grants = [\"relative\"]"),
            Err(PolicyError::OpenGrant(_))
        ));
        assert!(matches!(
            Policy::parse("[[cgroup]]\npath = \"a\"\nconnect_grants = [\"10.0.0.0/33\"]"),
            Err(PolicyError::ConnectGrant(_))
        ));
        assert!(matches!(Policy::parse("[[cgroup]]\npath = \"a\"\ntypo = 1"), Err(PolicyError::Parse(_))));
    }

    #[test]
    fn resolves_descendants_to_the_nearest_rule() {
        let root = std::env::temp_dir().join(format!("clawos-ebpf-policy-{}", std::process::id()));
        std::fs::create_dir_all(root.join("clawos.slice/tools/tool-1")).unwrap();
        std::fs::create_dir_all(root.join("clawos.slice/agent")).unwrap();
        let entries = Policy::parse(POLICY).unwrap().resolve(&root);
        std::fs::remove_dir_all(&root).unwrap();
        let paths: Vec<&str> = entries.iter().map(|entry| entry.path.as_str()).collect();
        assert_eq!(paths, ["clawos.slice", "clawos.slice/agent", "clawos.slice/tools", "clawos.slice/tools/tool-1"]);
        assert_eq!(entries[1].policy, CgroupPolicy { mode: MODE_AUDIT, rules: 0 });
        let tool = &entries[3];
        assert_eq!(tool.policy.mode, MODE_ENFORCE);
        assert_eq!(tool.policy.rules, RULE_DENY_EXEC | RULE_RESTRICT_OPEN | RULE_RESTRICT_CONNECT);
        assert!(entries.iter().all(|entry| entry.cgroup_id != 0));
    }

    #[test]
    fn encodes_grants_as_lpm_keys() {
        let rule = &Policy::parse(POLICY).unwrap().cgroups[1];
        let entry = rule.entry("t".into(), 5);
        let (bits, key) = &entry.open_grants[0];
        assert_eq!(*bits, (8 + 9) * 8, "directory grant: the prefix without a NUL");
        assert_eq!(*key, PathGrantKey { cgroup_id: 5u64.to_ne_bytes(), path: padded(b"/usr/lib/") });
        assert_eq!(
            entry.open_grants[1],
            ((8 + 9) * 8, PathGrantKey { cgroup_id: 5u64.to_ne_bytes(), path: padded(b"/usr/lib\0") }),
            "the directory itself"
        );
        assert_eq!(entry.open_grants[2].0, (8 + 17) * 8, "file grant: the path and its NUL");
        assert_eq!(entry.open_grants.len(), 3);
        let (bits, key) = entry.connect_grants[0];
        assert_eq!(bits, 64 + 96 + 8);
        assert_eq!(&key.addr[10..13], &[0xff, 0xff, 10]);
        assert_eq!(entry.connect_grants[1].0, 64 + 128);
    }

    #[test]
    fn exceptions_are_carved_out_of_connect_grants() {
        let text = r#"
            [[cgroup]]
            path = "t"
            connect_grants = ["0.0.0.0/0", "2000::/3", "127.0.0.53", "192.168.0.0/16"]
            connect_except = ["127.0.0.0/8", "169.254.0.0/16", "10.1.2.3", "2001:db8::/32", "192.0.0.0/8", "192.168.1.0/24"]
        "#;
        let entry = Policy::parse(text).unwrap().cgroups[0].entry("t".into(), 5);
        let granted = |addr: &str| may_connect(&entry, addr);
        for denied in [
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "10.1.2.3",
            "2001:db8::1",
            "::1",
            "fe80::1",
            "192.0.2.1",
            "192.168.1.7",
        ] {
            assert!(!granted(denied), "{denied} granted");
        }
        for allowed in [
            "127.0.0.53",
            "192.168.0.1",
            "192.168.2.1",
            "10.0.2.2",
            "10.1.2.2",
            "10.1.2.4",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.0.1",
            "8.8.8.8",
            "2001:db9::1",
        ] {
            assert!(granted(allowed), "{allowed} not granted");
        }
        // One range per prefix bit between an exception and the range that
        // held it: 127/8 in 0/0 (8), then 169.254/16 in 128/1 (15 for 1),
        // 10.1.2.3 in 0/2 (30 for 1), 192/8 in 192/2 (6 for 1),
        // 2001:db8::/32 in 2000::/3 (29); 127.0.0.53 whole, narrower than
        // its exception; 192.168/16 whole against 192/8 but cut by
        // 192.168.1/24 (8).
        assert_eq!(entry.connect_grants.len(), 8 + 14 + 29 + 5 + 29 + 1 + 8, "{:?}", entry.connect_grants);
        assert!(matches!(
            Policy::parse("[[cgroup]]\npath = \"a\"\nconnect_except = [\"127.0.0.1\"]"),
            Err(PolicyError::ExceptWithoutGrants(_))
        ));
    }

    /// The image's own policy: wasm-daemon's tool cgroups are held to what
    /// the daemon needs, not /etc/shadow, the vault or the box's loopback.
    #[test]
    fn the_shipped_policy_confines_the_tool_host() {
        let policy = Policy::parse(include_str!("../../../rootfs-overlay/etc/clawos/ebpf-policy.toml")).unwrap();
        let rule =
            policy.cgroups.iter().find(|rule| rule.path == "clawos.slice/clawos-wasm-daemon.service/daemon").unwrap();
        let entry = rule.entry("daemon/tool-x".into(), 9);
        assert_eq!(entry.policy.mode, MODE_ENFORCE);
        let opens = |path: &str| {
            entry.open_grants.iter().any(|(bits, key)| {
                let len = (*bits / 8 - 8) as usize;
                let mut wanted = path.as_bytes().to_vec();
                wanted.push(0);
                wanted.len() >= len && key.path[..len] == wanted[..len]
            })
        };
        for granted in [
            "/clawfs/agents/a/notes.md",
            "/clawfs/tools",
            "/clawfs/tools/binaries/t.wasm",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            // A tool's wasm as the layer beneath a merged /usr names it.
            "/lib/clawos/tools/scratchpad-v0.1.0.wasm",
        ] {
            assert!(opens(granted), "{granted} refused");
        }
        for refused in [
            "/etc/shadow",
            "/clawfs",
            "/clawfs/vault/master-key.enc",
            "/clawfs/toolsmith",
            "/clawfs/var/lib/clawos/vault",
            "/var/lib/clawos/vault/x",
            "/root/.ssh/id_ed25519",
        ] {
            assert!(!opens(refused), "{refused} granted");
        }
        let connects = |addr: &str| may_connect(&entry, addr);
        for granted in ["10.0.2.2", "93.184.215.14", "127.0.0.53", "2606:4700::1111"] {
            assert!(connects(granted), "{granted} refused");
        }
        for refused in ["127.0.0.1", "0.0.0.0", "169.254.169.254", "224.0.0.251", "::1", "fe80::1"] {
            assert!(!connects(refused), "{refused} granted");
        }
        // Every tool cgroup gets a copy: keep them few against the maps' 4,096.
        let keys = entry.connect_grants.len() + entry.open_grants.len();
        assert!(keys < 80, "{keys} map entries per tool cgroup");
    }

    /// The kernel's lookup: does any of the entry's connect keys hold `addr`?
    fn may_connect(entry: &ScopeEntry, addr: &str) -> bool {
        let (addr, _) = parse_cidr(addr).unwrap();
        entry.connect_grants.iter().any(|(bits, key)| {
            let bits = bits - 64;
            let (full, rest) = ((bits / 8) as usize, bits % 8);
            key.addr[..full] == addr[..full] && (rest == 0 || (key.addr[full] ^ addr[full]) >> (8 - rest) == 0)
        })
    }

    fn padded(bytes: &[u8]) -> [u8; GRANT_PATH_LEN] {
        let mut path = [0; GRANT_PATH_LEN];
        path[..bytes.len()].copy_from_slice(bytes);
        path
    }
}

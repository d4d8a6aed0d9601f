//! Userspace side of the ClawOS eBPF monitor: loads the `clawos-monitor`
//! object built by `make ebpf` (installed at [`DEFAULT_OBJECT`]), attaches
//! all its programs, fills the policy maps from a [`policy::Policy`] without
//! reloading anything, and decodes the records the programs write.
//!
//! Owns: loading (with the kernel struct offsets the programs read, taken
//! from the kernel's BTF: [`offsets`]), attaching, map updates, ring buffer
//! reading and handing the programs' aya-log diagnostics to a
//! [`log::Log`]. Must not own:
//! anomaly rules, IPC or where logs end up (that is the ebpf-agent
//! component's job).
pub mod event;
pub mod offsets;
pub mod policy;

use std::{
    collections::HashSet,
    os::fd::OwnedFd,
    path::{Path, PathBuf},
};

use aya::{
    maps::{lpm_trie::Key, HashMap, LpmTrie, MapData, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::{Lsm, RawTracePoint, TracePoint},
    Btf, Ebpf, EbpfLoader,
};
use clawos_ebpf_common::{CgroupPolicy, NetGrantKey, PathGrantKey, ProgramId, SyscallCount};

pub use event::{DecodeError, Event};
pub use policy::{Policy, ScopeEntry};

/// Where the image installs the monitor object.
pub const DEFAULT_OBJECT: &str = "/usr/lib/clawos/ebpf/clawos-monitor.bpf.o";

/// How a program is attached.
enum Attach {
    /// A tracefs tracepoint: (category, name).
    TracePoint(&'static str, &'static str),
    /// A raw tracepoint by name (no tracefs needed).
    RawTracePoint(&'static str),
    /// A BPF LSM hook by name.
    Lsm(&'static str),
}

/// Every program of the object, by [`ProgramId`] order where it has one.
const PROGRAMS: [(&str, Attach); 10] = [
    ("sched_process_exec", Attach::TracePoint("sched", "sched_process_exec")),
    ("sched_process_exit", Attach::RawTracePoint("sched_process_exit")),
    ("bprm_check_security", Attach::Lsm("bprm_check_security")),
    ("file_open", Attach::Lsm("file_open")),
    ("socket_connect", Attach::Lsm("socket_connect")),
    ("socket_bind", Attach::Lsm("socket_bind")),
    ("ptrace_access_check", Attach::Lsm("ptrace_access_check")),
    ("bpf_syscall", Attach::Lsm("bpf")),
    ("sb_mount", Attach::Lsm("sb_mount")),
    ("sys_enter", Attach::RawTracePoint("sys_enter")),
];

/// The ring buffers, one per event class.
pub const RING_BUFFERS: [&str; 4] = ["PROCESS_EVENTS", "FILE_EVENTS", "NET_EVENTS", "PRIVILEGE_EVENTS"];

/// Failure to bring the monitor up or update it, naming the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// The object file could not be read or parsed.
    #[error("loading eBPF object {path}")]
    Load {
        path: PathBuf,
        // Boxed: aya's error is large, and every fallible method here returns it.
        #[source]
        source: Box<aya::EbpfError>,
    },
    /// The kernel's BTF (needed to attach LSM programs) is unreadable.
    #[error("reading kernel BTF from /sys/kernel/btf/vmlinux")]
    Btf(#[source] aya::BtfError),
    /// The kernel's BTF lacks a field the programs read.
    #[error("finding kernel struct offsets")]
    Offsets(#[source] offsets::OffsetError),
    /// The object lacks a program or map this loader expects.
    #[error("eBPF object has no {kind} named {name}")]
    Missing { kind: &'static str, name: &'static str },
    /// The kernel refused to verify, load or attach a program.
    #[error("{step} of program {name}")]
    Program {
        step: &'static str,
        name: &'static str,
        #[source]
        source: aya::programs::ProgramError,
    },
    /// The programs' log buffer (aya-log's `AYA_LOGS`) could not be read.
    #[error("reading the programs' logs")]
    Logs(#[source] aya_log::Error),
    /// A map could not be opened or updated.
    #[error("{step} map {name}")]
    Map {
        step: &'static str,
        name: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
}

/// Run count and time of one program since it was loaded (kernel BPF stats).
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProgramStats {
    pub name: &'static str,
    /// The kernel's program id: the same for as long as the program stays
    /// loaded (policy updates only touch maps).
    pub id: u32,
    pub run_count: u64,
    pub run_time_ns: u64,
    /// Records lost because the program's ring buffer was full.
    pub lost_events: u64,
    /// Opens not reported because the same file was reported in the same
    /// watch-only cgroup within `OPEN_REPORT_WINDOW_NS` (file_open only).
    pub coalesced_events: u64,
}

/// All programs attached and their maps, for as long as this value lives
/// (dropping it detaches and unloads everything).
pub struct Monitor {
    ebpf: Ebpf,
    rings: Vec<RingBuf<MapData>>,
    scope: HashMap<MapData, u64, CgroupPolicy>,
    open_grants: LpmTrie<MapData, PathGrantKey, u32>,
    connect_grants: LpmTrie<MapData, NetGrantKey, u32>,
    syscall_counts: PerCpuHashMap<MapData, u64, SyscallCount>,
    lost_events: PerCpuArray<MapData, u64>,
    coalesced_opens: PerCpuArray<MapData, u64>,
    /// What the maps hold since the last [`Monitor::apply`] that succeeded.
    applied: Vec<ScopeEntry>,
    // Keeps kernel.bpf_stats_enabled on while held, when we may take it
    // (CAP_SYS_ADMIN). The appliance's ebpf-agent may not; there the
    // sysctl is set at boot (usr/lib/sysctl.d/50-clawos-bpf.conf) instead.
    _stats: Option<OwnedFd>,
}

fn take<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
    ebpf: &mut Ebpf,
    name: &'static str,
) -> Result<T, MonitorError> {
    let map = ebpf.take_map(name).ok_or(MonitorError::Missing { kind: "map", name })?;
    T::try_from(map).map_err(|source| MonitorError::Map { step: "opening", name, source })
}

impl Monitor {
    /// Loads the object at `path` and attaches every program. The scope map
    /// starts empty: nothing is monitored until [`Monitor::apply`].
    pub fn attach(path: &Path) -> Result<Self, MonitorError> {
        Self::attach_with_ring_sizes(path, &[])
    }

    /// [`Monitor::attach`] with some ring buffers resized: (name from
    /// [`RING_BUFFERS`], bytes: a power of two and a multiple of the page
    /// size). The tests use it to prove that overflow is counted, not hidden.
    pub fn attach_with_ring_sizes(path: &Path, ring_sizes: &[(&str, u32)]) -> Result<Self, MonitorError> {
        // Read once: aya needs the kernel's BTF to attach the LSM programs,
        // and the offsets come from the same data.
        let btf_path = Path::new(offsets::KERNEL_BTF);
        let btf_bytes = std::fs::read(btf_path)
            .map_err(|error| MonitorError::Btf(aya::BtfError::FileError { path: btf_path.to_owned(), error }))?;
        let btf = Btf::parse(&btf_bytes, aya::Endianness::default()).map_err(MonitorError::Btf)?;
        let kernel_offsets = offsets::from_btf_bytes(&btf_bytes, btf_path).map_err(MonitorError::Offsets)?;
        let mut loader = EbpfLoader::new();
        loader.btf(Some(&btf));
        loader.set_global("KERNEL_OFFSETS", &kernel_offsets, true);
        for &(name, bytes) in ring_sizes {
            loader.set_max_entries(name, bytes);
        }
        let mut ebpf = loader
            .load_file(path)
            .map_err(|source| MonitorError::Load { path: path.to_owned(), source: Box::new(source) })?;
        let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).ok();
        for (name, attach) in &PROGRAMS {
            let name: &'static str = name;
            let program = ebpf.program_mut(name).ok_or(MonitorError::Missing { kind: "program", name })?;
            let err = |step| move |source| MonitorError::Program { step, name, source };
            match attach {
                Attach::TracePoint(category, event) => {
                    let program: &mut TracePoint = program.try_into().map_err(err("typing"))?;
                    program.load().map_err(err("verifying"))?;
                    program.attach(category, event).map_err(err("attaching"))?;
                }
                Attach::RawTracePoint(event) => {
                    let program: &mut RawTracePoint = program.try_into().map_err(err("typing"))?;
                    program.load().map_err(err("verifying"))?;
                    program.attach(event).map_err(err("attaching"))?;
                }
                Attach::Lsm(hook) => {
                    let program: &mut Lsm = program.try_into().map_err(err("typing"))?;
                    program.load(hook, &btf).map_err(err("verifying"))?;
                    program.attach().map_err(err("attaching"))?;
                }
            }
        }
        let mut rings = Vec::new();
        for name in RING_BUFFERS {
            rings.push(take(&mut ebpf, name)?);
        }
        Ok(Self {
            scope: take(&mut ebpf, "SCOPE")?,
            open_grants: take(&mut ebpf, "OPEN_GRANTS")?,
            connect_grants: take(&mut ebpf, "CONNECT_GRANTS")?,
            syscall_counts: take(&mut ebpf, "SYSCALL_COUNTS")?,
            lost_events: take(&mut ebpf, "LOST_EVENTS")?,
            coalesced_opens: take(&mut ebpf, "COALESCED_OPENS")?,
            applied: Vec::new(),
            rings,
            ebpf,
            _stats: stats,
        })
    }

    /// Hands the programs' aya-log records (diagnostics that are not
    /// events, such as a path the open-grant check could not read) to
    /// `logger`. aya-log reads each CPU's buffer in a task of the current
    /// tokio runtime, so this must be called inside one (with I/O enabled),
    /// and only once.
    pub fn forward_program_logs<T: log::Log + 'static>(&mut self, logger: T) -> Result<(), MonitorError> {
        aya_log::EbpfLogger::init_with_logger(&mut self.ebpf, logger).map(drop).map_err(MonitorError::Logs)
    }

    /// Makes the maps hold exactly `entries`: new entries and grants are
    /// inserted first, stale ones removed after, so a cgroup never passes
    /// through a state with less policy than either version gives it. The
    /// same entries as last time cost nothing: the agent resolves every
    /// second, and each tool cgroup carries dozens of grant keys.
    pub fn apply(&mut self, entries: &[ScopeEntry]) -> Result<(), MonitorError> {
        if entries == self.applied.as_slice() {
            return Ok(());
        }
        let map_err = |step, name| move |source| MonitorError::Map { step, name, source };
        let mut open = HashSet::new();
        let mut connect = HashSet::new();
        for entry in entries {
            for &(bits, key) in &entry.open_grants {
                self.open_grants.insert(&Key::new(bits, key), 1, 0).map_err(map_err("updating", "OPEN_GRANTS"))?;
                open.insert((bits, key));
            }
            for &(bits, key) in &entry.connect_grants {
                self.connect_grants
                    .insert(&Key::new(bits, key), 1, 0)
                    .map_err(map_err("updating", "CONNECT_GRANTS"))?;
                connect.insert((bits, key.cgroup_id, key.addr));
            }
        }
        for entry in entries {
            self.scope.insert(entry.cgroup_id, entry.policy, 0).map_err(map_err("updating", "SCOPE"))?;
        }
        let wanted: HashSet<u64> = entries.iter().map(|entry| entry.cgroup_id).collect();
        let stale: Vec<u64> = self.scope.keys().filter_map(Result::ok).filter(|id| !wanted.contains(id)).collect();
        for id in stale {
            self.scope.remove(&id).map_err(map_err("pruning", "SCOPE"))?;
            // The cgroup's counter goes with it; a missing one is no error.
            let _ = self.syscall_counts.remove(&id);
        }
        let stale: Vec<Key<PathGrantKey>> = self
            .open_grants
            .keys()
            .filter_map(Result::ok)
            .filter(|key| !open.contains(&(key.prefix_len(), key.data())))
            .collect();
        for key in stale {
            self.open_grants.remove(&key).map_err(map_err("pruning", "OPEN_GRANTS"))?;
        }
        let stale: Vec<Key<NetGrantKey>> = self
            .connect_grants
            .keys()
            .filter_map(Result::ok)
            .filter(|key| !connect.contains(&(key.prefix_len(), key.data().cgroup_id, key.data().addr)))
            .collect();
        for key in stale {
            self.connect_grants.remove(&key).map_err(map_err("pruning", "CONNECT_GRANTS"))?;
        }
        self.applied = entries.to_vec();
        Ok(())
    }

    /// Decodes every pending record of every ring buffer into `sink`.
    pub fn drain(&mut self, mut sink: impl FnMut(Result<Event, DecodeError>)) {
        for ring in &mut self.rings {
            while let Some(item) = ring.next() {
                sink(Event::decode(&item));
            }
        }
    }

    /// Syscalls entered per monitored cgroup id since it entered the scope.
    pub fn syscall_counts(&self) -> Vec<(u64, u64)> {
        self.syscall_counts
            .iter()
            .filter_map(Result::ok)
            .map(|(cgroup_id, per_cpu)| (cgroup_id, per_cpu.iter().sum()))
            .collect()
    }

    fn coalesced_opens(&self) -> u64 {
        self.coalesced_opens.get(&0, 0).map_or(0, |per_cpu| per_cpu.iter().sum())
    }

    /// Per-program run statistics and losses.
    pub fn program_stats(&self) -> Vec<ProgramStats> {
        PROGRAMS
            .iter()
            .enumerate()
            .map(|(index, (name, _))| {
                let info = self.ebpf.program(name).and_then(|program| program.info().ok());
                let lost_events = u32::try_from(index)
                    .ok()
                    .filter(|&index| index <= ProgramId::SbMount as u32)
                    .and_then(|index| self.lost_events.get(&index, 0).ok())
                    .map_or(0, |per_cpu| per_cpu.iter().sum());
                ProgramStats {
                    name,
                    id: info.as_ref().map_or(0, |info| info.id()),
                    run_count: info.as_ref().map_or(0, |info| info.run_count()),
                    run_time_ns: info.map_or(0, |info| u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX)),
                    lost_events,
                    coalesced_events: if *name == "file_open" { self.coalesced_opens() } else { 0 },
                }
            })
            .collect()
    }
}

/// The cgroup id of the calling process: the inode of its cgroup v2
/// directory (what `bpf_get_current_cgroup_id` returns).
pub fn own_cgroup() -> std::io::Result<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let text = std::fs::read_to_string("/proc/self/cgroup")?;
    let relative = text
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or_else(|| std::io::Error::other("no cgroup v2 entry in /proc/self/cgroup"))?
        .trim_start_matches('/')
        .to_owned();
    let ino = std::fs::metadata(Path::new(policy::CGROUP_ROOT).join(&relative))?.ino();
    Ok((relative, ino))
}

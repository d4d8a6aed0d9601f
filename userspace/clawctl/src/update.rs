//! `clawctl update`: the box's A/B updates (specs/update/README.md).
//!
//! Owns: the health gate that decides whether a boot gets blessed
//! (`update gate`, run by clawos-update-gate.service before
//! boot-complete.target) and its record, dropping what the previous
//! version needed to unseal once a version is blessed (`update settle`,
//! clawos-update-settle.service), and the operator's view and controls:
//! `status`, `check`, `apply`, `rollback`; and the newest version each
//! source has listed, so a source that goes backwards is caught.
//!
//! Must not own: writing slots or counting boots. systemd-sysupdate writes
//! an update into the unused root slot and its UKI onto the ESP with a try
//! counter, systemd-boot counts the tries and falls back, systemd-bless-boot
//! marks a boot good once boot-complete.target is reached. This module
//! drives those tools and reads their state (partition labels, UKI file
//! names, systemd-boot's EFI variables); it never writes a partition itself.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use clawos_api::router::{self, SubscribeEvents};
use clawos_api::security_agent;
use clawos_api::NoParams;
use clawos_ipc::{ComponentId, IpcClient};
use serde::{Deserialize, Serialize};

mod measure;

/// Where /etc/fstab mounts the ESP (on first access).
const ESP: &str = "/efi";
/// The UKIs systemd-boot finds by itself (Boot Loader Specification type #2).
const UKI_DIR: &str = "/efi/EFI/Linux";
/// The health gate's record, one JSON object per gated boot, on /clawfs so
/// it outlives the boot (and the version) it describes.
const HEALTH_LOG: &str = "/var/lib/clawos/update/health.jsonl";
/// The public half of the release key (scripts/update-artifacts.sh), which
/// systemd-pull checks an update's SHA256SUMS.gpg against.
const RELEASE_KEYRING: &str = "/etc/systemd/import-pubring.gpg";
/// The newest version each source's signed listing has held (a JSON object
/// keyed by the source's URL), on /clawfs so it outlives every version.
const SOURCES_SEEN: &str = "/var/lib/clawos/update/sources.json";
/// The transfer definitions `check` and `apply` write for one source.
const DEFINITIONS: &str = "/run/clawos-update/sysupdate.d";
/// The firmware's event log and the TPM's PCR values, as the kernel shows them.
const EVENT_LOG: &str = "/sys/kernel/security/tpm0/binary_bios_measurements";
const PCR_DIR: &str = "/sys/class/tpm/tpm0/pcr-sha256";
/// systemd-boot's vendor GUID for its EFI variables.
const LOADER_GUID: &str = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";
/// Tries systemd-boot gives a new version before it falls back
/// (specs/update/README.md, "Boot counting").
const TRIES: u32 = 3;

#[derive(Subcommand)]
pub enum UpdateCommand {
    /// The booted version, both root slots, the UKIs on the ESP with their
    /// tries, and what the health gate found on recent boots.
    Status(StatusArgs),
    /// The versions a source offers, its signature checked.
    Check(SourceArgs),
    /// Write the newest version a source offers into the unused slot; it
    /// boots next (three tries to pass the health gate).
    Apply(ApplyArgs),
    /// Mark the booted version bad so the next boot starts the previous one.
    Rollback(RollbackArgs),
    /// The health gate (clawos-update-gate.service): waits until every
    /// component is healthy, /clawfs is mounted and a TPM vault is unsealed,
    /// records the outcome, and on a boot that counts tries reboots on failure.
    Gate(GateArgs),
    /// Once the booted version is blessed and no newer one waits for its
    /// first boot (clawos-update-settle.service): the vault and /clawfs's
    /// TPM2 keyslots are sealed to this boot alone, so the version before
    /// it asks for the recovery keys.
    Settle,
}

#[derive(Args)]
pub struct StatusArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct SourceArgs {
    /// A directory or an http(s):// URL holding the update's files and its
    /// signed SHA256SUMS (make update-artifacts).
    source: String,
    /// Forget the newest version this source listed before: for a source
    /// reset on purpose, whose listing is now older than it was.
    #[arg(long)]
    forget_seen: bool,
}

#[derive(Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Reboot into the new version once it is written.
    #[arg(long)]
    reboot: bool,
}

#[derive(Args)]
pub struct RollbackArgs {
    /// Reboot into the previous version at once.
    #[arg(long)]
    reboot: bool,
}

#[derive(Args)]
pub struct GateArgs {
    /// How long to wait for the box to become healthy.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
}

pub async fn run(command: UpdateCommand) -> anyhow::Result<ExitCode> {
    match command {
        UpdateCommand::Status(args) => status(args),
        UpdateCommand::Check(args) => check(&args),
        UpdateCommand::Apply(args) => apply(args).await,
        UpdateCommand::Rollback(args) => rollback(args),
        UpdateCommand::Gate(args) => gate(args).await,
        UpdateCommand::Settle => settle().await,
    }
}

/// One UKI on the ESP, as its file name says: `clawos_<version>.efi` (good,
/// or never counted), `clawos_<version>+<left>-<done>.efi` (tries counted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Uki {
    file: String,
    version: String,
    tries_left: Option<u32>,
    tries_done: Option<u32>,
}

impl Uki {
    fn parse(file: &str) -> Option<Uki> {
        let stem = file.strip_prefix("clawos_")?.strip_suffix(".efi")?;
        let (version, counter) = match stem.split_once('+') {
            Some((version, counter)) => (version, Some(counter)),
            None => (stem, None),
        };
        let (tries_left, tries_done) = match counter {
            None => (None, None),
            Some(counter) => match counter.split_once('-') {
                Some((left, done)) => (Some(left.parse().ok()?), Some(done.parse().ok()?)),
                None => (Some(counter.parse().ok()?), Some(0)),
            },
        };
        (!version.is_empty()).then(|| Uki {
            file: file.to_owned(),
            version: version.to_owned(),
            tries_left,
            tries_done,
        })
    }

    /// systemd-boot's view: good (blessed or never counted), bad (no tries
    /// left: booted only when nothing else is), or still on trial.
    fn state(&self) -> &'static str {
        match self.tries_left {
            None => "good",
            Some(0) => "bad",
            Some(_) => "trying",
        }
    }
}

/// Orders versions as systemd-boot and systemd-sysupdate do for ours
/// (dotted numbers, scripts/lib.sh clawos_version): part by part,
/// numerically where both parts are numbers.
fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let mut left = a.split('.');
    let mut right = b.split('.');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => {
                let order = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(x), Ok(y)) => x.cmp(&y),
                    _ => x.cmp(y),
                };
                if order.is_ne() {
                    return order;
                }
            }
        }
    }
}

fn ukis() -> anyhow::Result<Vec<Uki>> {
    let mut ukis: Vec<Uki> = fs::read_dir(UKI_DIR)
        .with_context(|| format!("cannot read {UKI_DIR} (is the ESP mounted at {ESP}?)"))?
        .filter_map(|entry| Uki::parse(&entry.ok()?.file_name().to_string_lossy()))
        .collect();
    ukis.sort_by(|a, b| compare_versions(&b.version, &a.version));
    Ok(ukis)
}

/// A root slot or its hash tree: a GPT partition named `clawos_<version>`,
/// `clawos_<version>_verity`, or `_empty` (never written).
#[derive(Debug, Serialize)]
struct Slot {
    device: String,
    label: String,
}

fn slots() -> anyhow::Result<Vec<Slot>> {
    let mut slots = Vec::new();
    for entry in fs::read_dir("/sys/class/block").context("cannot list /sys/class/block")? {
        let entry = entry?;
        let Ok(uevent) = fs::read_to_string(entry.path().join("uevent")) else { continue };
        let Some(label) = uevent.lines().find_map(|line| line.strip_prefix("PARTNAME=")) else { continue };
        if label.starts_with("clawos_") || label == "_empty" {
            slots.push(Slot {
                device: format!("/dev/{}", entry.file_name().to_string_lossy()),
                label: label.to_owned(),
            });
        }
    }
    slots.sort_by(|a, b| a.device.cmp(&b.device));
    Ok(slots)
}

/// A systemd-boot EFI variable (UTF-16LE after a 4-byte attribute word).
fn loader_variable(name: &str) -> Option<String> {
    let raw = fs::read(format!("/sys/firmware/efi/efivars/{name}-{LOADER_GUID}")).ok()?;
    let units: Vec<u16> = raw.get(4..)?.chunks_exact(2).map(|pair| u16::from_le_bytes([pair[0], pair[1]])).collect();
    Some(String::from_utf16_lossy(&units).trim_end_matches('\0').to_owned())
}

fn booted_version() -> anyhow::Result<String> {
    let os_release = fs::read_to_string("/usr/lib/os-release").context("cannot read /usr/lib/os-release")?;
    os_release
        .lines()
        .find_map(|line| line.strip_prefix("IMAGE_VERSION="))
        .map(|version| version.trim_matches('"').to_owned())
        .context("os-release has no IMAGE_VERSION")
}

/// What the health gate found on one boot (a line of HEALTH_LOG).
#[derive(Debug, Serialize, Deserialize)]
struct GateRecord {
    time: String,
    boot_id: String,
    version: String,
    /// Whether systemd-boot counted this boot's tries (a version on trial).
    counted: bool,
    healthy: bool,
    /// What was wrong when the gate gave up; empty when healthy.
    problems: Vec<String>,
    waited_s: f64,
}

fn gate_records() -> Vec<GateRecord> {
    fs::read_to_string(HEALTH_LOG)
        .map(|text| text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect())
        .unwrap_or_default()
}

#[derive(Serialize)]
struct Status {
    booted_version: String,
    booted_entry: Option<String>,
    ukis: Vec<UkiStatus>,
    slots: Vec<Slot>,
    /// Why the box runs an older version than the newest on the ESP, if it does.
    fell_back: Option<String>,
    recent_gates: Vec<GateRecord>,
}

#[derive(Serialize)]
struct UkiStatus {
    #[serde(flatten)]
    uki: Uki,
    state: &'static str,
}

fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let booted = booted_version()?;
    let ukis = ukis()?;
    let records = gate_records();
    // The newest version on the ESP is bad and it is not what runs: systemd-boot
    // fell back. The gate's records of its boots say why.
    let fell_back = ukis.first().filter(|newest| newest.state() == "bad" && newest.version != booted).map(|newest| {
        let failures: Vec<&GateRecord> = records.iter().filter(|r| r.version == newest.version && !r.healthy).collect();
        // Each try's reasons, so a gate that someone fails on purpose shows
        // how; a try without a record never got as far as the gate.
        let reasons = if failures.is_empty() {
            "no health record (it did not get as far as the gate)".to_owned()
        } else {
            let tries: Vec<String> = failures
                .iter()
                .enumerate()
                .map(|(n, r)| format!("try {} ({}): {}", n + 1, r.time, r.problems.join("; ")))
                .collect();
            tries.join(" | ")
        };
        format!(
            "{} used up its {} tries ({} failed the health gate) and systemd-boot went back to {}: {}",
            newest.version,
            newest.tries_done.unwrap_or(0),
            failures.len(),
            booted,
            reasons
        )
    });
    let status = Status {
        booted_version: booted,
        booted_entry: loader_variable("LoaderEntrySelected"),
        ukis: ukis.into_iter().map(|uki| UkiStatus { state: uki.state(), uki }).collect(),
        slots: slots()?,
        fell_back,
        recent_gates: records.into_iter().rev().take(5).collect(),
    };
    if args.json {
        println!("{}", crate::shown::json(&status)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("booted:  {} ({})", status.booted_version, status.booted_entry.as_deref().unwrap_or("entry unknown"));
    if let Some(fell_back) = &status.fell_back {
        println!("ROLLED BACK: {fell_back}");
    }
    println!("versions on the ESP:");
    for uki in &status.ukis {
        let tries = match (uki.uki.tries_left, uki.uki.tries_done) {
            (Some(left), Some(done)) => format!(" ({left} tries left, {done} used)"),
            _ => String::new(),
        };
        println!("  {:<16} {}{}", uki.uki.version, uki.state, tries);
    }
    println!("root slots:");
    for slot in &status.slots {
        println!("  {:<12} {}", slot.device, slot.label);
    }
    println!("health gate, latest boots first:");
    for record in &status.recent_gates {
        let outcome =
            if record.healthy { "healthy".to_owned() } else { format!("FAILED: {}", record.problems.join("; ")) };
        println!("  {} {:<16} {}", record.time, record.version, outcome);
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the three transfers (root, its hash tree, the UKI) for SOURCE and
/// runs `systemd-sysupdate VERB` on them. Every source is read through
/// systemd-pull with Verify=yes: SHA256SUMS must carry a valid signature by
/// the release key before anything is listed or written, and every file
/// must match its line in SHA256SUMS.
fn sysupdate(source: &str, verb: &[&str]) -> anyhow::Result<String> {
    let url = source_url(source)?;
    let disk = boot_disk(Path::new("/sys/class/block"), &booted_version()?)?;
    let dir = Path::new(DEFINITIONS);
    if dir.exists() {
        fs::remove_dir_all(dir).with_context(|| format!("cannot clear {DEFINITIONS}"))?;
    }
    fs::create_dir_all(dir).with_context(|| format!("cannot create {DEFINITIONS}"))?;
    for (name, text) in transfers(&url, &disk) {
        fs::write(dir.join(name), text).with_context(|| format!("cannot write {DEFINITIONS}/{name}"))?;
    }
    // Not on PATH in systemd 257 (a libexec binary there).
    let binary = ["/usr/bin/systemd-sysupdate", "/usr/lib/systemd/systemd-sysupdate"]
        .into_iter()
        .find(|path| Path::new(path).exists())
        .context("systemd-sysupdate is not installed")?;
    let output = Command::new(binary)
        .arg(format!("--definitions={DEFINITIONS}"))
        .args(["--no-pager", "--no-legend"])
        .args(verb)
        .output()
        .context("cannot run systemd-sysupdate")?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "systemd-sysupdate {} refused {source} ({}): {}",
            verb.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(stdout)
}

/// `systemd-sysupdate list --json=short`: every version installed here or
/// offered by the source (`all`).
#[derive(Deserialize)]
struct Listing {
    all: Vec<String>,
}

/// The newest version a source's signed listing held, and when it was seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Seen {
    newest: String,
    time: String,
}

/// Whether a source went backwards (specs/update/README.md, "A source that
/// goes backwards"): its listing, with what is installed here, now ends
/// below the newest version it listed before. A mirror that replays an old
/// signed SHA256SUMS to hold the box on a version with a known hole looks
/// exactly like this, and its signature checks.
fn went_backwards(url: &str, seen: Option<&Seen>, newest_now: &str) -> Option<String> {
    let seen = seen?;
    compare_versions(newest_now, &seen.newest).is_lt().then(|| {
        format!(
            "{url} went backwards: its signed listing now ends at {newest_now}, but on {} it listed {}. \
             A mirror replaying an old release list looks like this, so nothing is applied from it; \
             if the source was reset on purpose, run this again with --forget-seen",
            seen.time, seen.newest
        )
    })
}

fn sources_seen() -> std::collections::BTreeMap<String, Seen> {
    fs::read(SOURCES_SEEN).ok().and_then(|raw| serde_json::from_slice(&raw).ok()).unwrap_or_default()
}

/// The source's versions with what is installed here, newest first, once
/// its signature checked; refused when the source went backwards, else the
/// newest is recorded as this source's.
fn list_source(args: &SourceArgs) -> anyhow::Result<Vec<String>> {
    let url = source_url(&args.source)?;
    let listing: Listing = serde_json::from_str(&sysupdate(&args.source, &["--json=short", "list"])?)
        .context("systemd-sysupdate list gave no JSON listing")?;
    let mut versions = listing.all;
    versions.sort_by(|a, b| compare_versions(b, a));
    let newest = versions.first().context("the source and this box list no version at all")?.clone();
    let mut seen = sources_seen();
    if args.forget_seen {
        seen.remove(&url);
    }
    if let Some(refusal) = went_backwards(&url, seen.get(&url), &newest) {
        bail!(refusal);
    }
    if seen.get(&url).is_none_or(|before| compare_versions(&newest, &before.newest).is_gt()) {
        seen.insert(url, Seen { newest, time: fsutil::now_rfc3339() });
        let path = Path::new(SOURCES_SEEN);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        fsutil::write_atomic(path, &serde_json::to_vec_pretty(&seen)?, 0o600)
            .with_context(|| format!("cannot write {SOURCES_SEEN}"))?;
    }
    Ok(versions)
}

fn check(args: &SourceArgs) -> anyhow::Result<ExitCode> {
    let versions = list_source(args)?;
    let booted = booted_version()?;
    let installed: Vec<String> = ukis()?.into_iter().map(|uki| uki.version).collect();
    println!("versions at {} (and on this box), newest first:", args.source);
    for version in versions {
        let state = if version == booted {
            "running"
        } else if installed.contains(&version) {
            "installed"
        } else if compare_versions(&version, &booted).is_gt() {
            "offered, newer"
        } else {
            "offered, older"
        };
        println!("  {version:<16} {state}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A directory becomes a file:// URL, so a local update takes the same
/// signature and hash checks as a remote one.
fn source_url(source: &str) -> anyhow::Result<String> {
    if source.starts_with("http://") || source.starts_with("https://") || source.starts_with("file://") {
        return Ok(format!("{}/", source.trim_end_matches('/')));
    }
    let path = fs::canonicalize(source).with_context(|| format!("no update at {source}"))?;
    if !path.join("SHA256SUMS").is_file() {
        bail!("{} holds no SHA256SUMS: not an update (make update-artifacts)", path.display());
    }
    Ok(format!("file://{}/", path.display()))
}

/// The disk (`/dev/<name>`) holding the partition of the booted root slot,
/// labelled `clawos_<booted>`, as `sys_class_block` (/sys/class/block)
/// shows it. The transfers name it rather than let sysupdate find it
/// (`Path=auto`): sysupdate looks for the disk behind /usr, and with a
/// system extension merged /usr is an overlay with no disk behind it
/// ("Failed to find whole disk device for partition backing file
/// system"), so a box with Node.js installed could not be updated.
fn boot_disk(sys_class_block: &Path, booted: &str) -> anyhow::Result<String> {
    let label = format!("clawos_{booted}");
    let entries =
        fs::read_dir(sys_class_block).with_context(|| format!("cannot list {}", sys_class_block.display()))?;
    for entry in entries {
        let entry = entry?;
        let Ok(uevent) = fs::read_to_string(entry.path().join("uevent")) else { continue };
        if !uevent.lines().any(|line| line.strip_prefix("PARTNAME=") == Some(label.as_str())) {
            continue;
        }
        // A partition's directory is its disk's child: .../block/sda/sda3.
        let device =
            fs::canonicalize(entry.path()).with_context(|| format!("cannot resolve {}", entry.path().display()))?;
        let disk = device.parent().and_then(Path::file_name).context("a partition outside a disk")?;
        return Ok(format!("/dev/{}", disk.to_string_lossy()));
    }
    bail!("no partition is labelled {label}: the disk of the booted root slot is not found")
}

/// The transfer definitions (sysupdate.d(5)) writing to `disk`. The file
/// names the update carries (scripts/update-artifacts.sh) hold the version
/// (@v) and the partition UUIDs (@u) the UKI's dm-mod.create= table names,
/// which sysupdate gives the partitions it writes.
fn transfers(url: &str, disk: &str) -> [(&'static str, String); 3] {
    let partition = |name: &str, label: &str, kind: &str| {
        format!(
            "[Transfer]\nVerify=yes\nProtectVersion=%A\n\n[Source]\nType=url-file\nPath={url}\nMatchPattern=clawos_@v_@u.{name}.raw.gz\n\n\
             [Target]\nType=partition\nPath={disk}\nMatchPattern={label}\nMatchPartitionType={kind}\nReadOnly=yes\n",
        )
    };
    [
        ("10-root.transfer", partition("root", "clawos_@v", "root")),
        ("11-root-verity.transfer", partition("root-verity", "clawos_@v_verity", "root-verity")),
        (
            "20-uki.transfer",
            format!(
                "[Transfer]\nVerify=yes\nProtectVersion=%A\n\n[Source]\nType=url-file\nPath={url}\nMatchPattern=clawos_@v.efi\n\n\
                 [Target]\nType=regular-file\nPath=/EFI/Linux\nPathRelativeTo=esp\nMatchPattern=clawos_@v+@l-@d.efi clawos_@v+@l.efi clawos_@v.efi\n\
                 Mode=0444\nTriesLeft={TRIES}\nTriesDone=0\nInstancesMax=2\n",
            ),
        ),
    ]
}

async fn apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    if !Path::new(RELEASE_KEYRING).is_file() {
        bail!("{RELEASE_KEYRING} is missing: this image cannot check an update's signature");
    }
    let started = Instant::now();
    let before = booted_version()?;
    list_source(&args.source)?;
    let had = ukis()?;
    let output = sysupdate(&args.source.source, &["update"])?;
    let Some(new) = ukis()?.into_iter().find(|uki| !had.iter().any(|old| old.version == uki.version)) else {
        println!("Nothing newer than {before} at {}.", args.source.source);
        return Ok(ExitCode::SUCCESS);
    };
    let new_path = Path::new(UKI_DIR).join(&new.file);
    if let Err(error) = prepare_tpm(&new_path).await {
        // Its boot would not open /clawfs or the vault: take the UKI away
        // so nothing boots the new slot, which the next update reuses.
        let removed = fs::remove_file(&new_path);
        sync_esp();
        bail!(
            "{} is written but the TPM-sealed secrets could not be prepared for it, so it will not boot{}: {error:#}",
            new.version,
            if removed.is_ok() { " (its UKI was removed)" } else { "" }
        );
    }
    print!("{output}");
    println!(
        "Installed {} in {:.1} s; it boots next ({TRIES} tries to pass the health gate, then back to {before}).",
        new.version,
        started.elapsed().as_secs_f64()
    );
    if args.reboot {
        reboot()?;
    }
    Ok(ExitCode::SUCCESS)
}

fn rollback(args: RollbackArgs) -> anyhow::Result<ExitCode> {
    let booted = booted_version()?;
    let ukis = ukis()?;
    let current = ukis
        .iter()
        .find(|uki| uki.version == booted)
        .with_context(|| format!("no UKI of the booted version {booted} in {UKI_DIR}"))?;
    let previous = ukis
        .iter()
        .find(|uki| uki.state() != "bad" && compare_versions(&uki.version, &booted).is_lt())
        .with_context(|| format!("no older good version than {booted} on the ESP to go back to"))?;
    // No tries left: systemd-boot boots it only when nothing else is bootable.
    let bad = format!("clawos_{}+0-{}.efi", current.version, current.tries_done.unwrap_or(0));
    fs::rename(Path::new(UKI_DIR).join(&current.file), Path::new(UKI_DIR).join(&bad))
        .with_context(|| format!("cannot rename {} to {bad}", current.file))?;
    sync_esp();
    println!("Marked {booted} bad ({bad}); the next boot starts {}.", previous.version);
    if args.reboot {
        reboot()?;
    }
    Ok(ExitCode::SUCCESS)
}

fn sync_esp() {
    if let Ok(dir) = fs::File::open(UKI_DIR) {
        let _ = dir.sync_all();
    }
}

fn reboot() -> anyhow::Result<()> {
    let status =
        Command::new("systemctl").args(["--no-block", "reboot"]).status().context("cannot run systemctl reboot")?;
    if !status.success() {
        bail!("systemctl reboot failed: {status}");
    }
    Ok(())
}

/// What keeps this boot from being blessed (empty when nothing does), and
/// whether waiting could change it: a vault the TPM refused stays sealed.
async fn problems() -> (Vec<String>, bool) {
    let mut problems = Vec::new();
    let mut lasting = false;
    match crate::status::collect().await {
        Ok(rows) => {
            for row in rows.iter().filter(|row| row.health != "healthy") {
                let error = row.error.as_deref().map(|error| format!(" ({error})")).unwrap_or_default();
                problems.push(format!("{} is {}{error}", row.component.as_str(), row.health));
            }
        }
        Err(error) => problems.push(format!("component status: {error:#}")),
    }
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    if !mounts.lines().any(|line| line.split(' ').nth(4) == Some("/clawfs")) {
        problems.push("/clawfs is not mounted".into());
    }
    match vault_problem().await {
        Ok(Some((problem, refused))) => {
            problems.push(problem);
            lasting = refused;
        }
        Ok(None) => {}
        Err(error) => problems.push(format!("vault status: {error:#}")),
    }
    (problems, lasting)
}

/// A vault sealed by the TPM must unseal by itself on a good boot (true:
/// the TPM refused this boot's PCRs, which waiting does not change); a
/// passphrase vault waits for its operator and does not hold the boot back.
async fn vault_problem() -> anyhow::Result<Option<(String, bool)>> {
    let (client, _events) = crate::ipc::connect(ComponentId::SecurityAgent).await?;
    let status =
        security_agent::Client::new(&client).with_timeout(Duration::from_secs(5)).vault_status(&NoParams {}).await?;
    Ok((status.initialized && status.protection.as_deref() == Some("tpm2") && status.state != "unsealed")
        .then(|| (format!("the vault is not unsealed ({})", status.state_description), status.state == "pcr-mismatch")))
}

/// How long the gate waits for an event before it looks again anyway: the
/// mount and the vault send none.
const GATE_RECHECK: Duration = Duration::from_secs(2);

/// The router's events that change a component's health: the gate looks
/// again as soon as one arrives. `None` when the router cannot be reached
/// (it is one of the components the gate waits for): then it looks every
/// [`GATE_RECHECK`] alone.
async fn health_events() -> Option<(IpcClient, tokio::sync::mpsc::Receiver<clawos_ipc::Message>)> {
    let (client, events) = crate::ipc::connect(ComponentId::Router).await.ok()?;
    let names = ["component_ready", "component_shutdown", "heartbeat"].map(str::to_owned).to_vec();
    router::Client::new(&client).subscribe_events(&SubscribeEvents { events: names }).await.ok()?;
    Some((client, events))
}

async fn gate(args: GateArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let deadline = Duration::from_secs(args.timeout_s);
    let mut events = health_events().await;
    let (mut found, mut lasting) = problems().await;
    let mut said = Vec::new();
    while !found.is_empty() && !lasting && started.elapsed() < deadline {
        if found != said {
            // The problems quote components' own error messages.
            eprintln!("waiting {:.1} s: {}", started.elapsed().as_secs_f64(), crate::shown::Line(&found.join("; ")));
            said.clone_from(&found);
        }
        let wait = GATE_RECHECK.min(deadline.saturating_sub(started.elapsed()));
        match &mut events {
            Some((_, received)) => {
                // Closed: the router went away; polling from here on.
                if let Ok(None) = tokio::time::timeout(wait, received.recv()).await {
                    events = None;
                }
            }
            None => tokio::time::sleep(wait).await,
        }
        (found, lasting) = problems().await;
    }
    let counted = loader_variable("LoaderBootCountPath").is_some();
    let record = GateRecord {
        time: fsutil::now_rfc3339(),
        boot_id: fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default().trim().to_owned(),
        version: booted_version()?,
        counted,
        healthy: found.is_empty(),
        problems: found,
        waited_s: (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
    };
    append_record(&record)?;
    if record.healthy {
        println!("healthy after {:.1} s: this boot of {} may be blessed", record.waited_s, record.version);
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("unhealthy after {:.1} s: {}", record.waited_s, record.problems.join("; "));
    // A version on trial with a good one to go back to: this try is used up;
    // systemd-boot decides on the next boot whether it gets another or the
    // previous version runs. A box with nothing to go back to (a freshly
    // flashed image) stays up for its operator instead of rebooting in vain.
    let fallback =
        ukis().unwrap_or_default().into_iter().find(|uki| uki.version != record.version && uki.state() == "good");
    if let (true, Some(fallback)) = (counted, fallback) {
        eprintln!("{} is on trial and {} is good: rebooting", record.version, fallback.version);
        reboot()?;
    }
    Ok(ExitCode::FAILURE)
}

/// `update settle` (specs/update/README.md, "The TPM across an update"):
/// after a version's blessing, the PCR 4 branch the previous version unseals
/// under is dropped from the vault and its TPM2 keyslot wiped from /clawfs,
/// so picking the previous version in the boot menu (or renaming UKIs on the
/// unauthenticated ESP) boots a version that asks for the recovery keys.
/// Not while a newer version waits for its first boots: its branch and
/// keyslot are the ones it needs. Nothing to do without a TPM.
async fn settle() -> anyhow::Result<ExitCode> {
    let booted = booted_version()?;
    let ukis = ukis()?;
    if !ukis.iter().any(|uki| uki.version == booted && uki.state() == "good") {
        println!("{booted} is not blessed: nothing to settle");
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(waiting) =
        ukis.iter().find(|uki| uki.state() == "trying" && compare_versions(&uki.version, &booted).is_gt())
    {
        println!("{} waits for its first boot: its TPM branch and keyslot stay", waiting.version);
        return Ok(ExitCode::SUCCESS);
    }
    if !Path::new("/dev/tpmrm0").exists() {
        return Ok(ExitCode::SUCCESS);
    }
    let (client, _events) = crate::ipc::connect(ComponentId::SecurityAgent).await?;
    let vault = security_agent::Client::new(&client);
    let status = vault.vault_status(&NoParams {}).await?;
    if status.protection.as_deref() == Some("tpm2") && status.tpm_branches.unwrap_or(1) > 1 {
        if status.state != "unsealed" {
            bail!("the vault is {}: it cannot be resealed to this boot", status.state_description);
        }
        vault.vault_reseal(&NoParams {}).await?;
        println!("the vault is sealed to this boot of {booted} alone");
    }
    let this_boot = fsutil::hex(&measure::policy_pcr_digest(&[4, 12], &[read_pcr(4)?, read_pcr(12)?]));
    let output = Command::new("/usr/sbin/clawfs-keys")
        .args(["settle", &this_boot])
        .output()
        .context("cannot run clawfs-keys")?;
    if !output.status.success() {
        bail!("/clawfs's TPM2 keyslots: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    Ok(ExitCode::SUCCESS)
}

fn append_record(record: &GateRecord) -> anyhow::Result<()> {
    let path = PathBuf::from(HEALTH_LOG);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot open {HEALTH_LOG}"))?;
    writeln!(file, "{}", serde_json::to_string(record)?)?;
    file.sync_all()?;
    Ok(())
}

/// The booted UKI: the one of the running version (one UKI per version;
/// systemd-stub's StubImageIdentifier names the file as it was before
/// systemd-bless-boot renamed it).
fn booted_uki() -> anyhow::Result<PathBuf> {
    let version = booted_version()?;
    let uki = ukis()?
        .into_iter()
        .find(|uki| uki.version == version)
        .with_context(|| format!("no UKI of the running version {version} in {UKI_DIR}"))?;
    Ok(Path::new(UKI_DIR).join(uki.file))
}

/// Makes the TPM-sealed secrets open under `new_uki` as well as under this
/// boot (specs/update/README.md, "The TPM across an update"): computes the
/// PCR 4 its boot will have (measure.rs) and has the vault and /clawfs's
/// TPM2 keyslot accept it. Nothing to do on a box without a TPM.
async fn prepare_tpm(new_uki: &Path) -> anyhow::Result<()> {
    if !Path::new("/dev/tpmrm0").exists() {
        return Ok(());
    }
    let log = measure::parse_event_log(
        &fs::read(EVENT_LOG).with_context(|| format!("cannot read the firmware's event log {EVENT_LOG}"))?,
    )?;
    let (pcr4, pcr12) = (read_pcr(4)?, read_pcr(12)?);
    if measure::replay(&log, 4, &[]) != pcr4 {
        bail!("the firmware's event log does not add up to PCR 4: the update's PCR 4 cannot be computed");
    }
    let booted = fs::read(booted_uki()?).context("cannot read the booted UKI")?;
    let new = fs::read(new_uki).with_context(|| format!("cannot read {}", new_uki.display()))?;
    let replacements = measure::uki_replacements(&booted, &new)?;
    if !log.iter().any(|extension| extension.pcr == 4 && extension.sha256 == replacements[0].0) {
        bail!("the booted UKI is not in the firmware's event log: the update's PCR 4 cannot be computed");
    }
    let next4 = measure::replay(&log, 4, &replacements);
    let next4_hex = fsutil::hex(&next4);

    let (client, _events) = crate::ipc::connect(ComponentId::SecurityAgent).await?;
    let vault = security_agent::Client::new(&client);
    let status = vault.vault_status(&NoParams {}).await?;
    if status.initialized && status.protection.as_deref() == Some("tpm2") {
        vault.vault_prepare_update(&security_agent::VaultPrepareUpdate { pcr4: next4_hex.clone() }).await?;
    }
    // Keep the keyslots of this boot and of the update's, by the policy
    // hash systemd-cryptenroll records for a PCR 4+12 keyslot.
    let this_boot = fsutil::hex(&measure::policy_pcr_digest(&[4, 12], &[pcr4, pcr12]));
    let next_boot = fsutil::hex(&measure::policy_pcr_digest(&[4, 12], &[next4, pcr12]));
    let output = Command::new("/usr/sbin/clawfs-keys")
        .args(["allow-boot", &next4_hex, &this_boot, &next_boot])
        .output()
        .context("cannot run clawfs-keys")?;
    if !output.status.success() {
        bail!("/clawfs's TPM2 keyslot for the update: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(())
}

/// A PCR's SHA-256 value as the kernel reads it from the TPM.
fn read_pcr(pcr: u8) -> anyhow::Result<[u8; 32]> {
    let text = fs::read_to_string(format!("{PCR_DIR}/{pcr}"))
        .with_context(|| format!("cannot read PCR {pcr} from {PCR_DIR}"))?;
    let text = text.trim();
    fsutil::unhex(text)
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .with_context(|| format!("PCR {pcr} reads as {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uki_names_parse_as_systemd_boot_counts_them() {
        let fresh = Uki::parse("clawos_0.1.9+3.efi").unwrap();
        assert_eq!(
            (fresh.version.as_str(), fresh.tries_left, fresh.tries_done, fresh.state()),
            ("0.1.9", Some(3), Some(0), "trying")
        );
        let tried = Uki::parse("clawos_0.1.9+2-1.efi").unwrap();
        assert_eq!((tried.tries_left, tried.tries_done, tried.state()), (Some(2), Some(1), "trying"));
        let bad = Uki::parse("clawos_0.1.9+0-3.efi").unwrap();
        assert_eq!(bad.state(), "bad");
        let blessed = Uki::parse("clawos_0.1.9.efi").unwrap();
        assert_eq!((blessed.version.as_str(), blessed.state()), ("0.1.9", "good"));
        for other in ["BOOTX64.EFI", "clawos_.efi", "clawos_1+x.efi", "clawos_1+1-y.efi", "debian_1.efi"] {
            assert_eq!(Uki::parse(other), None, "{other}");
        }
    }

    #[test]
    fn versions_order_numerically_part_by_part() {
        use std::cmp::Ordering::*;
        assert_eq!(compare_versions("0.1.10", "0.1.9"), Greater);
        assert_eq!(compare_versions("0.1.9", "0.1.9"), Equal);
        assert_eq!(compare_versions("0.2", "0.1.99"), Greater);
        assert_eq!(compare_versions("0.1", "0.1.0"), Less);
    }

    #[test]
    fn sources_become_urls_and_a_directory_must_hold_sha256sums() {
        assert_eq!(source_url("http://10.0.2.2:8080/v2").unwrap(), "http://10.0.2.2:8080/v2/");
        let dir = tempfile::tempdir().unwrap();
        assert!(source_url(dir.path().to_str().unwrap()).is_err());
        fs::write(dir.path().join("SHA256SUMS"), "").unwrap();
        let url = source_url(dir.path().to_str().unwrap()).unwrap();
        assert!(url.starts_with("file:///") && url.ends_with('/'), "{url}");
        assert!(source_url("/nonexistent/update").is_err());
    }

    #[test]
    fn a_source_whose_listing_ends_below_what_it_listed_before_went_backwards() {
        let seen = Seen { newest: "0.1.10".into(), time: "2026-11-27T10:00:00Z".into() };
        let url = "http://mirror.invalid/stable/";
        let refusal = went_backwards(url, Some(&seen), "0.1.9").expect("0.1.9 after 0.1.10 is backwards");
        assert!(refusal.contains("ends at 0.1.9") && refusal.contains("listed 0.1.10"), "{refusal}");
        assert!(refusal.contains("--forget-seen"), "{refusal}");
        // The same or newer is not; a source never seen has nothing to go back from.
        assert_eq!(went_backwards(url, Some(&seen), "0.1.10"), None);
        assert_eq!(went_backwards(url, Some(&seen), "0.1.11"), None);
        assert_eq!(went_backwards(url, None, "0.0.1"), None);
    }

    #[test]
    fn transfers_carry_the_source_and_verify_it() {
        for (name, text) in transfers("http://example.invalid/u/", "/dev/sdb") {
            assert!(text.contains("Path=http://example.invalid/u/\n"), "{name}");
            assert!(text.contains("Verify=yes\n"), "{name}");
            assert_eq!(text.contains("Path=/dev/sdb\n"), text.contains("Type=partition"), "{name}");
        }
    }

    #[test]
    fn the_boot_disk_is_the_one_holding_the_booted_slot() {
        // /sys/class/block as the kernel lays it out: links to partitions
        // under their disks, each with its uevent.
        let sys = tempfile::tempdir().unwrap();
        let class = sys.path().join("class/block");
        fs::create_dir_all(&class).unwrap();
        for (disk, partition, label) in
            [("sda", "sda3", "clawos_0.1.7"), ("sdb", "sdb2", "clawos_0.1.8"), ("sdb", "sdb3", "clawos_0.1.8_verity")]
        {
            let dir = sys.path().join("devices/block").join(disk).join(partition);
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("uevent"), format!("DEVNAME={partition}\nPARTNAME={label}\n")).unwrap();
            std::os::unix::fs::symlink(&dir, class.join(partition)).unwrap();
        }
        assert_eq!(boot_disk(&class, "0.1.8").unwrap(), "/dev/sdb");
        assert_eq!(boot_disk(&class, "0.1.7").unwrap(), "/dev/sda");
        let missing = boot_disk(&class, "0.1.9").unwrap_err().to_string();
        assert!(missing.contains("no partition is labelled clawos_0.1.9"), "{missing}");
    }
}

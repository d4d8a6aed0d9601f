//! `clawctl extension`: the box's system extensions (specs/extensions/README.md),
//! signed images that systemd-sysext merges over /usr, such as the Node.js
//! and Python the MCP servers of npm and PyPI run on.
//!
//! Owns: putting an image where systemd-sysext.service looks
//! (`/var/lib/extensions`, on /clawfs, so it outlives reboots and A/B
//! updates) only after it merged in a trial, and the operator's view of
//! what is installed and merged.
//!
//! Must not own: checking signatures or levels itself. systemd-sysext does
//! both, under the image policy of `systemd-sysext.service.d/50-clawos.conf`
//! (a root partition with dm-verity whose root hash is signed by a
//! certificate in /usr/lib/verity.d). The trial runs that same check in a
//! mount namespace of its own: one image it refuses at boot would keep
//! every extension from merging, so a refused image never gets where the
//! boot would find it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context};
use clap::Subcommand;
use serde::{Deserialize, Serialize};

use crate::shown::Line;

/// Where systemd-sysext.service finds the installed extensions.
const INSTALLED: &str = "/var/lib/extensions";
/// Where an image waits for its trial: on the same filesystem as
/// INSTALLED, so it gets there by one rename.
const STAGING: &str = "/var/lib/clawos/extension-staging";
/// The image policy of systemd-sysext.service.d/50-clawos.conf, for the
/// trial; the boot checks show an image refused by one is refused by both.
const POLICY: &str = "root=signed+absent:usr=signed+absent";
/// The merged extensions' release files.
const RELEASES: &str = "/usr/lib/extension-release.d";

#[derive(Subcommand)]
pub enum ExtensionCommand {
    /// Install extension images (NAME.raw): each tried alone under the
    /// box's policy (signed by the extension key, built for this image's
    /// extension level), then all merged at once; one refused and none is
    /// installed. An image of the same name is replaced.
    Install {
        /// The images, each named NAME.raw as it was built (make extensions).
        #[arg(required = true)]
        images: Vec<PathBuf>,
    },
    /// The installed extensions: version (while merged), merged or not, size.
    List {
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Unmerge and remove an extension.
    Remove {
        /// Its name (NAME of NAME.raw).
        name: String,
    },
}

/// An installed extension as `list` shows it.
#[derive(Debug, Serialize)]
struct Installed {
    name: String,
    /// SYSEXT_VERSION_ID of its release file; absent while not merged.
    version: Option<String>,
    merged: bool,
    bytes: u64,
}

pub async fn run(command: ExtensionCommand) -> anyhow::Result<ExitCode> {
    match command {
        ExtensionCommand::Install { images } => install(&images)?,
        ExtensionCommand::List { json } => {
            let installed = list()?;
            if json {
                println!("{}", crate::shown::json(&serde_json::json!({ "extensions": installed }))?);
            } else if installed.is_empty() {
                println!("no system extension is installed (clawctl extension install NAME.raw)");
            } else {
                for extension in &installed {
                    let state = if extension.merged { "merged" } else { "NOT merged" };
                    let version = extension.version.as_deref().unwrap_or("-");
                    println!("{}  {}  {state}  {} MiB", extension.name, Line(version), extension.bytes >> 20);
                }
            }
        }
        ExtensionCommand::Remove { name } => remove(&name)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// A name systemd-sysext and image/extension/build.sh both take: lower-case
/// letters, digits and '-', at most 63.
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// NAME of an image file NAME.raw.
fn image_name(image: &Path) -> anyhow::Result<String> {
    let file = image.file_name().and_then(|f| f.to_str()).unwrap_or_default();
    match file.strip_suffix(".raw") {
        Some(name) if is_name(name) => Ok(name.to_owned()),
        _ => bail!(
            "{}: an extension image is named NAME.raw as it was built, NAME of lower-case letters, digits and '-'",
            image.display()
        ),
    }
}

/// One KEY=value of an os-release style file.
fn release_field(release: &str, key: &str) -> Option<String> {
    release.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix('=')?;
        Some(value.trim_matches('"').to_owned())
    })
}

fn install(images: &[PathBuf]) -> anyhow::Result<()> {
    let mut names = Vec::new();
    for image in images {
        let name = image_name(image)?;
        if names.contains(&name) {
            bail!("{name} is named twice");
        }
        names.push(name);
    }
    fs::create_dir_all(STAGING).with_context(|| format!("cannot create {STAGING}"))?;
    let mut staged = Vec::new();
    let mut tried = || -> anyhow::Result<Vec<String>> {
        let mut releases = Vec::new();
        for (image, name) in images.iter().zip(&names) {
            let path = Path::new(STAGING).join(format!("{name}.raw"));
            staged.push(path.clone());
            copy_synced(image, &path)?;
            releases.push(trial_merge(&path, name).with_context(|| format!("{name} is not installed"))?);
        }
        Ok(releases)
    };
    let releases = match tried() {
        Ok(releases) => releases,
        Err(error) => {
            for path in &staged {
                let _ = fs::remove_file(path);
            }
            return Err(if names.len() > 1 { error.context("no extension was installed") } else { error });
        }
    };
    fs::create_dir_all(INSTALLED).with_context(|| format!("cannot create {INSTALLED}"))?;
    for (path, name) in staged.iter().zip(&names) {
        let target = Path::new(INSTALLED).join(format!("{name}.raw"));
        fs::rename(path, &target).with_context(|| format!("cannot move {} to {}", path.display(), target.display()))?;
    }
    sync_dir(Path::new(INSTALLED))?;
    // One refresh for them all: systemd-sysext unmerges and merges every
    // installed image each time, which is what an install costs.
    refresh()?;
    let merged = merged()?;
    for (name, release) in names.iter().zip(&releases) {
        if !merged.contains(name) {
            bail!(
                "{name} is installed in {INSTALLED} but systemd-sysext did not merge it: journalctl -u systemd-sysext"
            );
        }
        let version = release_field(release, "SYSEXT_VERSION_ID").unwrap_or_else(|| "-".into());
        println!("extension {name} {} installed and merged into /usr", Line(&version));
    }
    Ok(())
}

fn list() -> anyhow::Result<Vec<Installed>> {
    let merged = merged()?;
    let mut installed = Vec::new();
    let entries = match fs::read_dir(INSTALLED) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(installed),
        Err(error) => return Err(error).context(format!("cannot read {INSTALLED}")),
    };
    for entry in entries {
        let entry = entry?;
        let Ok(name) = image_name(&entry.path()) else { continue };
        let is_merged = merged.contains(&name);
        let version = is_merged
            .then(|| fs::read_to_string(Path::new(RELEASES).join(format!("extension-release.{name}"))).ok())
            .flatten()
            .and_then(|release| release_field(&release, "SYSEXT_VERSION_ID"));
        installed.push(Installed { name, version, merged: is_merged, bytes: entry.metadata()?.len() });
    }
    installed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(installed)
}

fn remove(name: &str) -> anyhow::Result<()> {
    if !is_name(name) {
        bail!("'{name}' is not an extension's name");
    }
    let target = Path::new(INSTALLED).join(format!("{name}.raw"));
    match fs::remove_file(&target) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => bail!("no extension {name} is installed"),
        Err(error) => return Err(error).context(format!("cannot remove {}", target.display())),
    }
    sync_dir(Path::new(INSTALLED))?;
    refresh()?;
    if merged()?.iter().any(|merged| merged == name) {
        bail!("{name} is removed from {INSTALLED} but still merged: journalctl -u systemd-sysext");
    }
    println!("extension {name} unmerged and removed");
    Ok(())
}

/// Merges the image alone over a private view of the root, as the boot's
/// systemd-sysext would: the same policy, the host's os-release to match.
/// Returns the image's release file.
fn trial_merge(image: &Path, name: &str) -> anyhow::Result<String> {
    // In a mount namespace of its own, gone with it: the read-only root
    // alone (no submounts) on a fresh tmpfs, with a fresh /run holding the
    // image as the one extension. Its mounts are shared among themselves
    // (made private from the host's first), because systemd-sysext merges
    // in a child namespace whose mounts must come back to this one; and the
    // root is not under /run, which that child keeps to itself.
    let script = r#"
        image=$1 name=$2 policy=$3
        mount --make-rshared /
        mount -t tmpfs -o mode=0700 tmpfs /tmp
        root=/tmp/root
        mkdir "$root"
        mount --bind / "$root"
        mount -t tmpfs -o mode=0755 tmpfs "$root/run"
        mkdir "$root/run/extensions"
        : > "$root/run/extensions/$name.raw"
        mount --bind -o ro "$image" "$root/run/extensions/$name.raw"
        systemd-sysext merge --root="$root" --image-policy="$policy" --no-reload
        cat "$root/usr/lib/extension-release.d/extension-release.$name"
    "#;
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "sh", "-euc", script, "sh"])
        .arg(image)
        .args([name, POLICY])
        // Why an image is refused (a signature, a level) is said at debug level.
        .env("SYSTEMD_LOG_LEVEL", "debug")
        .output()
        .context("cannot run unshare for the trial merge")?;
    if !output.status.success() {
        bail!("systemd-sysext refused it: {}", refusal(&String::from_utf8_lossy(&output.stderr)));
    }
    let release = String::from_utf8_lossy(&output.stdout).into_owned();
    if release_field(&release, "ID").as_deref() != Some("clawos") {
        bail!("its release file names no ID=clawos");
    }
    Ok(release)
}

/// What of systemd-sysext's debug output says why it refused an image: its
/// lines about the policy, the signature and the level (systemd 257's
/// wording); else its last lines.
fn refusal(said: &str) -> String {
    const WHY: [&str; 5] =
        ["does not match image policy", "PKCS#7 validation failed", "worked neither", "API level", "not compatible"];
    let lines: Vec<&str> = said.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let why: Vec<&str> = lines.iter().copied().filter(|line| WHY.iter().any(|w| line.contains(w))).collect();
    let shown = if why.is_empty() { lines[lines.len().saturating_sub(3)..].to_vec() } else { why };
    shown.join("; ")
}

/// The extensions merged into /usr now.
fn merged() -> anyhow::Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Hierarchy {
        hierarchy: String,
        #[serde(default)]
        extensions: serde_json::Value,
    }
    let output = Command::new("systemd-sysext")
        .args(["status", "--json=short"])
        .output()
        .context("cannot run systemd-sysext status")?;
    if !output.status.success() {
        bail!("systemd-sysext status: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    let hierarchies: Vec<Hierarchy> =
        serde_json::from_slice(&output.stdout).context("cannot read systemd-sysext status --json")?;
    // "extensions" is a list of names, or "none".
    Ok(hierarchies
        .into_iter()
        .filter(|h| h.hierarchy == "/usr")
        .flat_map(|h| match h.extensions {
            serde_json::Value::Array(names) => {
                names.into_iter().filter_map(|n| n.as_str().map(str::to_owned)).collect()
            }
            _ => Vec::new(),
        })
        .collect())
}

/// systemd-sysext.service merges what is installed now (its refresh, under
/// the unit's policy).
fn refresh() -> anyhow::Result<()> {
    let status = Command::new("systemctl")
        .args(["reload-or-restart", "systemd-sysext.service"])
        .status()
        .context("cannot run systemctl")?;
    if !status.success() {
        bail!("systemd-sysext.service failed to merge the extensions: journalctl -u systemd-sysext");
    }
    Ok(())
}

/// Copies FROM to TO (replaced) and syncs it, so the rename that installs
/// it never names a file the disk does not hold yet.
fn copy_synced(from: &Path, to: &Path) -> anyhow::Result<()> {
    let mut source = fs::File::open(from).with_context(|| format!("cannot open {}", from.display()))?;
    let mut target = fs::File::create(to).with_context(|| format!("cannot create {}", to.display()))?;
    std::io::copy(&mut source, &mut target)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    target.flush()?;
    target.sync_all().with_context(|| format!("cannot sync {}", to.display()))?;
    Ok(())
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("cannot sync {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_what_sysext_and_the_build_take() {
        for good in ["nodejs", "python", "a", "mcp-time-2"] {
            assert!(is_name(good), "{good}");
        }
        for bad in ["", "-x", "Node", "a.b", "a_b", "../x", &"x".repeat(64)] {
            assert!(!is_name(bad), "{bad}");
        }
        assert_eq!(image_name(Path::new("/tmp/nodejs.raw")).unwrap(), "nodejs");
        assert!(image_name(Path::new("/tmp/nodejs.img")).is_err());
        assert!(image_name(Path::new("/tmp/.raw")).is_err());
    }

    #[test]
    fn a_refusal_names_what_systemd_sysext_said() {
        let said = "Opened image.\nFailed to read /etc/os-release file of image, ignoring\n\
                    Userspace PKCS#7 validation failed: error:10800080:PKCS7 routines::signer certificate not found\n\
                    Failed to merge hierarchies\n";
        assert_eq!(
            refusal(said),
            "Userspace PKCS#7 validation failed: error:10800080:PKCS7 routines::signer certificate not found"
        );
        let said = "Userspace PKCS#7 validation succeeded.\n\
                    Extension 'x' is for API level '0000', but running on API level '0587'\nNo suitable extensions found\n";
        assert!(refusal(said).starts_with("Extension 'x' is for API level '0000'"));
        assert_eq!(refusal("a\nb\nc\nd\n"), "b; c; d");
    }

    #[test]
    fn release_fields_are_read_quoted_or_not() {
        let release = "ID=clawos\nSYSEXT_LEVEL=\"abc\"\nSYSEXT_VERSION_ID=20.19.2+dfsg-1\nSYSEXT_ID=nodejs\n";
        assert_eq!(release_field(release, "ID").as_deref(), Some("clawos"));
        assert_eq!(release_field(release, "SYSEXT_LEVEL").as_deref(), Some("abc"));
        assert_eq!(release_field(release, "SYSEXT_VERSION_ID").as_deref(), Some("20.19.2+dfsg-1"));
        assert_eq!(release_field(release, "SYSEXT"), None);
    }
}

//! A component's TOML config, `/etc/clawos/<component>.toml`. The file is
//! optional; every setting has the default the spec or the image wants.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawos_ipc::timeouts::{HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT};
use clawos_ipc::{ComponentId, RateLimit};
use serde::Deserialize;

/// Overrides the config directory (tests, side-by-side instances).
pub const CONFIG_DIR_ENV: &str = "CLAWOS_CONFIG_DIR";
/// Where component configs live in the image.
pub const DEFAULT_CONFIG_DIR: &str = "/etc/clawos";

/// Settings every component has.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// IPC server settings.
    #[serde(default)]
    pub ipc: IpcConfig,
    /// Heartbeat settings.
    #[serde(default)]
    pub heartbeat: HeartbeatConfig,
    /// Settings only this component understands; it parses them itself.
    #[serde(default)]
    pub component: toml::Table,
}

/// `[ipc]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpcConfig {
    /// The identity + ACL file (default `/etc/clawos/ipc-acl.toml`).
    #[serde(default = "default_policy_path")]
    pub policy_path: PathBuf,
    /// Per-connection rate limit (default 100/s, burst 200).
    #[serde(default)]
    pub rate_limit: RateLimit,
}

impl Default for IpcConfig {
    fn default() -> Self {
        IpcConfig { policy_path: default_policy_path(), rate_limit: RateLimit::default() }
    }
}

fn default_policy_path() -> PathBuf {
    PathBuf::from(clawos_ipc::policy::DEFAULT_POLICY_PATH)
}

/// `[heartbeat]`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatConfig {
    /// How often to send heartbeats, ms (default 30000).
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
    /// Silence after which a peer is unhealthy, ms (default 90000).
    #[serde(default = "default_unhealthy_after_ms")]
    pub unhealthy_after_ms: u64,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        HeartbeatConfig { interval_ms: default_interval_ms(), unhealthy_after_ms: default_unhealthy_after_ms() }
    }
}

fn default_interval_ms() -> u64 {
    HEARTBEAT_INTERVAL.as_millis() as u64
}

fn default_unhealthy_after_ms() -> u64 {
    HEARTBEAT_TIMEOUT.as_millis() as u64
}

impl HeartbeatConfig {
    /// The heartbeat period.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    /// The unhealthy threshold.
    pub fn unhealthy_after(&self) -> Duration {
        Duration::from_millis(self.unhealthy_after_ms)
    }
}

/// A config file that exists but cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Unreadable.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid config TOML.
    #[error("invalid config {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The TOML error.
        #[source]
        source: toml::de::Error,
    },
    /// Parsed, but a value is unusable.
    #[error("invalid config {path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The config path of `component`.
pub fn config_path(component: ComponentId) -> PathBuf {
    let dir = std::env::var_os(CONFIG_DIR_ENV).map_or_else(|| PathBuf::from(DEFAULT_CONFIG_DIR), PathBuf::from);
    dir.join(format!("{component}.toml"))
}

impl RuntimeConfig {
    /// Reads `path`, or returns the defaults if it does not exist.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(ConfigError::Read { path: path.to_owned(), source }),
        };
        let config: RuntimeConfig =
            toml::from_str(&text).map_err(|source| ConfigError::Parse { path: path.to_owned(), source })?;
        let invalid = |reason: &str| ConfigError::Invalid { path: path.to_owned(), reason: reason.to_owned() };
        if config.heartbeat.interval_ms == 0 {
            return Err(invalid("heartbeat.interval_ms must be > 0"));
        }
        if config.heartbeat.unhealthy_after_ms <= config.heartbeat.interval_ms {
            return Err(invalid("heartbeat.unhealthy_after_ms must exceed heartbeat.interval_ms"));
        }
        if config.ipc.rate_limit.messages_per_second > 0 && config.ipc.rate_limit.burst == 0 {
            return Err(invalid("ipc.rate_limit.burst must be > 0 when a rate is set"));
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<RuntimeConfig, ConfigError> {
        let dir = std::env::temp_dir().join(format!("clawos-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{:x}.toml", text.len() * 31 + text.bytes().map(usize::from).sum::<usize>()));
        std::fs::write(&path, text).unwrap();
        let loaded = RuntimeConfig::load(&path);
        std::fs::remove_file(&path).unwrap();
        // The last test of this process to finish removes the directory.
        let _ = std::fs::remove_dir(&dir);
        loaded
    }

    #[test]
    fn missing_file_means_spec_defaults() {
        let config = RuntimeConfig::load(Path::new("/nonexistent/clawos/router.toml")).unwrap();
        assert_eq!(config.heartbeat.interval(), Duration::from_secs(30));
        assert_eq!(config.heartbeat.unhealthy_after(), Duration::from_secs(90));
        assert_eq!(config.ipc.rate_limit, RateLimit { messages_per_second: 100, burst: 200 });
        assert_eq!(config.ipc.policy_path, Path::new("/etc/clawos/ipc-acl.toml"));
    }

    #[test]
    fn values_are_read_and_checked() {
        let config = load("[heartbeat]\ninterval_ms = 100\nunhealthy_after_ms = 300\n[component]\nport = 1").unwrap();
        assert_eq!(config.heartbeat.interval(), Duration::from_millis(100));
        assert_eq!(config.component["port"].as_integer(), Some(1));
        let error = load("[heartbeat]\ninterval_ms = 100\nunhealthy_after_ms = 50").unwrap_err();
        assert!(error.to_string().contains("unhealthy_after_ms"), "{error}");
        assert!(matches!(load("[ipc]\ntypo = 1"), Err(ConfigError::Parse { .. })));
    }
}

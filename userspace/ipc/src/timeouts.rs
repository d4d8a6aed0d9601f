//! Timeout values from the spec's "Timeout Values" section. Each method's
//! own default timeout belongs to the method and lives in `clawos-api`
//! beside its name and types; servers are given it as a function
//! ([`crate::ServerSettings::method_timeout`]).

use std::time::Duration;

/// Request timeout when neither the caller nor the method sets one.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_millis(5000);
/// No request may wait longer than this, whatever the caller asks.
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_millis(30_000);
/// A connection is closed after this many timeouts in a row.
pub const MAX_CONSECUTIVE_TIMEOUTS: u32 = 3;
/// How often components send heartbeats.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(30);
/// A component silent for this long is unhealthy (3 x interval).
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(90);

/// The timeout that applies to a request: the caller's `timeout_ms`, else
/// the method's default, capped at [`MAX_REQUEST_TIMEOUT`].
pub fn effective_timeout(requested_ms: Option<u64>, method_default: Duration) -> Duration {
    requested_ms.map(Duration::from_millis).unwrap_or(method_default).min(MAX_REQUEST_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_default_caller_override_and_cap() {
        let ten = Duration::from_millis(10_000);
        assert_eq!(effective_timeout(None, ten), ten);
        assert_eq!(effective_timeout(Some(250), ten), Duration::from_millis(250));
        assert_eq!(effective_timeout(Some(600_000), ten), MAX_REQUEST_TIMEOUT);
        assert_eq!(effective_timeout(None, Duration::from_secs(60)), MAX_REQUEST_TIMEOUT);
    }
}

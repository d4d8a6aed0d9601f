//! Timeout values from the spec's "Timeout Values" section.

use std::time::Duration;

/// Request timeout when neither the caller nor the method table sets one.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_millis(5000);
/// No request may wait longer than this, whatever the caller asks.
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_millis(30_000);
/// A connection is closed after this many timeouts in a row.
pub const MAX_CONSECUTIVE_TIMEOUTS: u32 = 3;
/// How often components send heartbeats.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(30);
/// A component silent for this long is unhealthy (3 x interval).
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(90);

/// The spec's "Method-Specific Timeouts" default for `method`.
pub fn method_default_timeout(method: &str) -> Duration {
    let millis = match method {
        "execute_tool" => 10_000,
        "get_metrics" | "schedule_task" | "subscribe_events" => 2000,
        "check_policy" | "route_message" => 1000,
        "read_file" | "write_file" => 5000,
        _ => return DEFAULT_REQUEST_TIMEOUT,
    };
    Duration::from_millis(millis)
}

/// The timeout that applies to a request: the caller's `timeout_ms` or the
/// method default, capped at [`MAX_REQUEST_TIMEOUT`].
pub fn effective_timeout(method: &str, requested_ms: Option<u64>) -> Duration {
    requested_ms
        .map(Duration::from_millis)
        .unwrap_or_else(|| method_default_timeout(method))
        .min(MAX_REQUEST_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_defaults_caller_override_and_cap() {
        assert_eq!(effective_timeout("execute_tool", None), Duration::from_millis(10_000));
        assert_eq!(effective_timeout("check_policy", None), Duration::from_millis(1000));
        assert_eq!(effective_timeout("unknown_method", None), DEFAULT_REQUEST_TIMEOUT);
        assert_eq!(effective_timeout("get_metrics", Some(250)), Duration::from_millis(250));
        assert_eq!(effective_timeout("execute_tool", Some(600_000)), MAX_REQUEST_TIMEOUT);
    }
}

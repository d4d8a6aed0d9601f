//! The spec's error codes 0-8, their errno mapping and retry policy.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// An IPC error code (spec "Error Code Mapping").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
#[repr(u8)]
pub enum ErrorCode {
    /// Operation completed successfully.
    Success = 0,
    /// Operation would block; retry with backoff.
    Eagain = 1,
    /// I/O error; retry up to 3 times.
    Eio = 2,
    /// Entity not found.
    Enoent = 3,
    /// Permission denied.
    Eperm = 4,
    /// Protocol error (invalid message, version mismatch).
    Eproto = 5,
    /// No response within the timeout; retry up to 2 times.
    Etimeout = 6,
    /// Internal error; log and escalate.
    Einternal = 7,
    /// Unrecoverable; trigger rollback.
    Epanic = 8,
}

/// What a caller does after receiving an error code (spec Appendix B).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    /// Do not retry.
    Never,
    /// Retry with exponential backoff from `initial`, doubling up to `max`.
    Backoff {
        /// First delay.
        initial: Duration,
        /// Delay cap.
        max: Duration,
    },
    /// Retry immediately up to this many times, then fail.
    Times(u32),
}

impl RetryPolicy {
    /// Delay before retry number `attempt` (0-based), or `None` when the
    /// policy says to stop.
    pub fn delay_before_retry(self, attempt: u32) -> Option<Duration> {
        match self {
            RetryPolicy::Never => None,
            RetryPolicy::Times(limit) => (attempt < limit).then_some(Duration::ZERO),
            RetryPolicy::Backoff { initial, max } => {
                let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
                Some(initial.saturating_mul(factor).min(max))
            }
        }
    }
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::Success,
        ErrorCode::Eagain,
        ErrorCode::Eio,
        ErrorCode::Enoent,
        ErrorCode::Eperm,
        ErrorCode::Eproto,
        ErrorCode::Etimeout,
        ErrorCode::Einternal,
        ErrorCode::Epanic,
    ];

    /// The spec's name, e.g. `EPROTO`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Success => "SUCCESS",
            ErrorCode::Eagain => "EAGAIN",
            ErrorCode::Eio => "EIO",
            ErrorCode::Enoent => "ENOENT",
            ErrorCode::Eperm => "EPERM",
            ErrorCode::Eproto => "EPROTO",
            ErrorCode::Etimeout => "ETIMEOUT",
            ErrorCode::Einternal => "EINTERNAL",
            ErrorCode::Epanic => "EPANIC",
        }
    }

    /// The Linux errno a seccomp filter returns for this code (Appendix B,
    /// "Seccomp Mapping Table"); `None` for IPC-only codes.
    pub fn errno(self) -> Option<i32> {
        match self {
            ErrorCode::Eagain => Some(nix::libc::EAGAIN),
            ErrorCode::Eio => Some(nix::libc::EIO),
            ErrorCode::Enoent => Some(nix::libc::ENOENT),
            ErrorCode::Eperm => Some(nix::libc::EPERM),
            _ => None,
        }
    }

    /// The IPC code for an errno, the inverse of [`ErrorCode::errno`].
    pub fn from_errno(errno: i32) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|code| code.errno() == Some(errno))
    }

    /// How a caller retries after this code.
    pub fn retry_policy(self) -> RetryPolicy {
        match self {
            ErrorCode::Eagain => {
                RetryPolicy::Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(5) }
            }
            ErrorCode::Eio => RetryPolicy::Times(3),
            ErrorCode::Etimeout => RetryPolicy::Times(2),
            _ => RetryPolicy::Never,
        }
    }
}

/// A number outside 0-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown IPC error code {0} (valid codes are 0-8)")]
pub struct UnknownErrorCode(pub u8);

impl TryFrom<u8> for ErrorCode {
    type Error = UnknownErrorCode;

    fn try_from(value: u8) -> Result<Self, Self::Error> {
        ErrorCode::ALL.get(usize::from(value)).copied().ok_or(UnknownErrorCode(value))
    }
}

impl From<ErrorCode> for u8 {
    fn from(code: ErrorCode) -> u8 {
        code as u8
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_spec_table() {
        for (number, code) in ErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(u8::from(code) as usize, number);
            assert_eq!(ErrorCode::try_from(number as u8).unwrap(), code);
        }
        assert_eq!(ErrorCode::try_from(9), Err(UnknownErrorCode(9)));
        assert_eq!(serde_json::to_string(&ErrorCode::Eproto).unwrap(), "5");
        assert!(serde_json::from_str::<ErrorCode>("9").is_err());
    }

    #[test]
    fn errno_mapping_matches_appendix_b() {
        assert_eq!(ErrorCode::Eagain.errno(), Some(11));
        assert_eq!(ErrorCode::Eio.errno(), Some(5));
        assert_eq!(ErrorCode::Enoent.errno(), Some(2));
        assert_eq!(ErrorCode::Eperm.errno(), Some(1));
        for code in
            [ErrorCode::Success, ErrorCode::Eproto, ErrorCode::Etimeout, ErrorCode::Einternal, ErrorCode::Epanic]
        {
            assert_eq!(code.errno(), None, "{code}");
        }
        assert_eq!(ErrorCode::from_errno(11), Some(ErrorCode::Eagain));
        assert_eq!(ErrorCode::from_errno(22), None);
    }

    #[test]
    fn retry_policies_match_appendix_b() {
        let eagain = ErrorCode::Eagain.retry_policy();
        assert_eq!(eagain.delay_before_retry(0), Some(Duration::from_millis(100)));
        assert_eq!(eagain.delay_before_retry(3), Some(Duration::from_millis(800)));
        assert_eq!(eagain.delay_before_retry(40), Some(Duration::from_secs(5)));
        assert_eq!(ErrorCode::Eio.retry_policy().delay_before_retry(2), Some(Duration::ZERO));
        assert_eq!(ErrorCode::Eio.retry_policy().delay_before_retry(3), None);
        assert_eq!(ErrorCode::Etimeout.retry_policy().delay_before_retry(1), Some(Duration::ZERO));
        assert_eq!(ErrorCode::Etimeout.retry_policy().delay_before_retry(2), None);
        for code in [ErrorCode::Enoent, ErrorCode::Eperm, ErrorCode::Eproto, ErrorCode::Einternal, ErrorCode::Epanic] {
            assert_eq!(code.retry_policy(), RetryPolicy::Never, "{code}");
        }
    }
}

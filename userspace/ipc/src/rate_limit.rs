//! Per-connection token bucket (spec "Rate Limiting": 100 messages/s, burst 200).

use std::time::Instant;

use serde::Deserialize;

/// Rate limit settings, as read from a component's config.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Sustained messages per second; 0 lifts the limit.
    pub messages_per_second: u32,
    /// Messages allowed at once after an idle period.
    pub burst: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit { messages_per_second: 100, burst: 200 }
    }
}

impl RateLimit {
    /// No limit (benchmarks, trusted links).
    pub const UNLIMITED: RateLimit = RateLimit { messages_per_second: 0, burst: 0 };
}

/// A token bucket that starts full.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    limit: RateLimit,
    tokens: f64,
    refilled_at: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(limit: RateLimit, now: Instant) -> Self {
        TokenBucket { limit, tokens: f64::from(limit.burst), refilled_at: now }
    }

    /// Takes one token; `false` means the message must be answered with EAGAIN.
    pub fn try_take(&mut self, now: Instant) -> bool {
        if self.limit.messages_per_second == 0 {
            return true;
        }
        let elapsed = now.saturating_duration_since(self.refilled_at).as_secs_f64();
        self.tokens =
            (self.tokens + elapsed * f64::from(self.limit.messages_per_second)).min(f64::from(self.limit.burst));
        self.refilled_at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn burst_then_sustained_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(RateLimit::default(), start);
        let granted = (0..250).filter(|_| bucket.try_take(start)).count();
        assert_eq!(granted, 200);
        // 100 ms at 100/s refills 10 tokens.
        let later = start + Duration::from_millis(100);
        let granted = (0..50).filter(|_| bucket.try_take(later)).count();
        assert_eq!(granted, 10);
        let mut unlimited = TokenBucket::new(RateLimit::UNLIMITED, start);
        assert!((0..10_000).all(|_| unlimited.try_take(start)));
    }
}

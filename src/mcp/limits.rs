//! The rate limit of `/mcp`: a token bucket per member (tenant and user, whichever of their
//! API tokens calls), `MNOTE_MCP_RATE_LIMIT` requests a minute with bursts of the same size,
//! in this process. Tool calls, resource reads and the tool and resource lists take one each;
//! a refused tool call is a tool error `rate_limited` with the seconds to wait, any other
//! refused request a protocol error with the same code.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

/// Buckets kept at most; past it, full (idle) buckets are forgotten.
const MAX_BUCKETS: usize = 10_000;

pub struct RateLimit {
    per_minute: u32,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimit {
    /// `per_minute = 0` turns the limit off.
    pub fn new(per_minute: u32) -> Self {
        RateLimit { per_minute, buckets: Mutex::new(HashMap::new()) }
    }

    /// Take one call for `key`; `Err(seconds to wait)` when its bucket is empty.
    pub fn take(&self, key: &str) -> Result<(), u64> {
        self.take_at(key, Instant::now())
    }

    fn take_at(&self, key: &str, now: Instant) -> Result<(), u64> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let capacity = f64::from(self.per_minute);
        let per_sec = capacity / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(key) {
            buckets.retain(|_, b| b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * per_sec < capacity);
        }
        let b = buckets.entry(key.to_string()).or_insert(Bucket { tokens: capacity, at: now });
        b.tokens = (b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * per_sec).min(capacity);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            let wait = Duration::from_secs_f64((1.0 - b.tokens) / per_sec);
            Err(wait.as_secs().max(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_gets_its_burst_then_waits_for_the_refill() {
        let l = RateLimit::new(3);
        let t0 = Instant::now();
        assert!((0..3).all(|_| l.take_at("a", t0).is_ok()));
        let wait = l.take_at("a", t0).unwrap_err();
        assert!((1..=20).contains(&wait), "{wait}");
        assert!(l.take_at("b", t0).is_ok(), "another member has their own bucket");
        assert!(l.take_at("a", t0 + Duration::from_secs(21)).is_ok(), "one call back after 20 s");
        assert!(RateLimit::new(0).take_at("a", t0).is_ok());
    }
}

//! Health of the vector side: pgvector inside the database.
//!
//! A pgvector build that does not suit the CPU kills the backend of every vector statement
//! (SIGILL), and Postgres then restarts all its connections. Vector work must not turn that
//! into a crash loop: when a vector write or query fails because its backend died
//! ([`is_backend_failure`]), the side is marked unhealthy and
//! - the embedding backlog backs off exponentially (`retry_min` doubling up to `retry_max`)
//!   and then pauses: after [`PAUSE_AFTER`] failures in a row it tries once per `retry_max`;
//! - searches skip the vector side and answer lexically with `degraded: true,
//!   degradedReason: "vector_backend_unavailable"`;
//! - `/readyz` and `/metrics` report it.
//!
//! The next due attempt (a cheap distance probe, then the backlog's real write) heals it by
//! itself once the database is healthy. Lexical search, the viewer and ingest never wait on it.

use std::{
    sync::Mutex,
    time::{Duration, Instant, SystemTime},
};

use serde::Serialize;

/// The stable code of an unhealthy vector side.
pub const CODE: &str = "vector_backend_unavailable";

/// Failures in a row after which the backlog only tries once per `retry_max` (paused).
pub const PAUSE_AFTER: u32 = 6;

pub struct VectorHealth {
    retry_min: Duration,
    retry_max: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Failures in a row; 0 = healthy.
    failures: u32,
    since: Option<SystemTime>,
    /// When the next attempt may touch vectors.
    retry_at: Option<Instant>,
}

/// What `/readyz` shows of the vector side.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `ok`, `backing_off` or `paused`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    #[serde(skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// Unix seconds of the first failure in a row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl VectorHealth {
    pub fn new(retry_min: Duration, retry_max: Duration) -> Self {
        VectorHealth { retry_min, retry_max: retry_max.max(retry_min), state: Mutex::new(State::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_healthy(&self) -> bool {
        self.lock().failures == 0
    }

    /// Whether background work may touch vectors now: always while healthy; while unhealthy,
    /// once per due retry (the caller is the probe; others wait for the next retry time).
    pub fn try_begin(&self) -> bool {
        let mut s = self.lock();
        if s.failures == 0 {
            return true;
        }
        let now = Instant::now();
        match s.retry_at {
            Some(t) if t > now => false,
            _ => {
                // Claim this retry: until the attempt reports back, nobody else starts one.
                s.retry_at = Some(now + self.delay(s.failures));
                true
            }
        }
    }

    /// The backoff after `failures` failures in a row.
    fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(20);
        self.retry_min.saturating_mul(1 << doublings).min(self.retry_max)
    }

    /// A vector statement failed because its backend died (see [`is_backend_failure`]).
    pub fn record_failure(&self, error: &dyn std::fmt::Display) {
        let failures = {
            let mut s = self.lock();
            s.failures = s.failures.saturating_add(1);
            s.since.get_or_insert_with(SystemTime::now);
            s.retry_at = Some(Instant::now() + self.delay(s.failures));
            s.failures
        };
        metrics::counter!("vector_backend_failures_total").increment(1);
        tracing::warn!(
            code = CODE,
            failures,
            retry_in_ms = self.delay(failures).as_millis() as u64,
            "vector backend failed: {error}; vector search is off and the embedding backlog backs off"
        );
    }

    /// Vector work succeeded: the side is healthy again.
    pub fn record_success(&self) {
        let was = {
            let mut s = self.lock();
            std::mem::take(&mut *s).failures
        };
        if was > 0 {
            tracing::info!("vector backend is healthy again after {was} failed attempts");
        }
    }

    pub fn report(&self) -> Report {
        let s = self.lock();
        if s.failures == 0 {
            return Report { status: "ok", code: None, failures: 0, since: None, retry_in_ms: None };
        }
        let retry_in = s.retry_at.map(|t| t.saturating_duration_since(Instant::now()).as_millis() as u64);
        Report {
            status: if s.failures >= PAUSE_AFTER { "paused" } else { "backing_off" },
            code: Some(CODE),
            failures: s.failures,
            since: s.since.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok()).map(|d| d.as_secs()),
            retry_in_ms: retry_in,
        }
    }
}

/// Whether `e` means the database backend serving the statement died or is restarting, as
/// opposed to an error in the statement: the connection was terminated (`57P01`), another
/// backend crashed (`57P02`), the server is recovering (`57P03`), the connection broke
/// (class `08`, or an I/O error / EOF on the socket), or the server hit an I/O error (`58030`).
pub fn is_backend_failure(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(d) => {
            d.code().is_some_and(|c| matches!(c.as_ref(), "57P01" | "57P02" | "57P03" | "58030") || c.starts_with("08"))
        }
        _ => false,
    }
}

/// [`is_backend_failure`] anywhere in an error chain.
pub fn is_backend_failure_any(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<sqlx::Error>().is_some_and(is_backend_failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backs_off_exponentially_then_pauses_and_heals() {
        let h = VectorHealth::new(Duration::from_millis(100), Duration::from_millis(1600));
        assert!(h.is_healthy());
        assert!(h.try_begin());
        assert_eq!(h.report().status, "ok");
        let delays: Vec<Duration> = (1..=7).map(|n| h.delay(n)).collect();
        assert_eq!(delays.iter().map(|d| d.as_millis()).collect::<Vec<_>>(), [100, 200, 400, 800, 1600, 1600, 1600]);

        h.record_failure(&"terminated");
        assert!(!h.is_healthy());
        assert!(!h.try_begin(), "not before the retry time");
        let r = h.report();
        assert_eq!((r.status, r.code, r.failures), ("backing_off", Some(CODE), 1));
        assert!(r.retry_in_ms.unwrap() <= 100);
        for _ in 1..PAUSE_AFTER {
            h.record_failure(&"terminated");
        }
        assert_eq!(h.report().status, "paused");
        h.record_success();
        assert!(h.is_healthy());
        assert_eq!(h.report(), Report { status: "ok", code: None, failures: 0, since: None, retry_in_ms: None });
    }

    #[test]
    fn one_probe_per_due_retry() {
        let h = VectorHealth::new(Duration::from_millis(20), Duration::from_secs(60));
        h.record_failure(&"x");
        std::thread::sleep(Duration::from_millis(30));
        // Due: the first caller probes, the next waits for its outcome (or the next retry).
        assert!(h.try_begin());
        assert!(!h.try_begin());
    }

    #[test]
    fn connection_deaths_count_statement_errors_do_not() {
        let io = sqlx::Error::Io(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "eof"));
        assert!(is_backend_failure(&io));
        assert!(!is_backend_failure(&sqlx::Error::RowNotFound));
        assert!(!is_backend_failure(&sqlx::Error::PoolTimedOut));
        let chained = anyhow::Error::new(io).context("embedding backlog");
        assert!(is_backend_failure_any(&chained));
        assert!(!is_backend_failure_any(&anyhow::anyhow!("the embedder returned 3 vectors for 4 texts")));
    }
}

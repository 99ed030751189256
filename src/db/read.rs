//! Read replicas (`MNOTE_READ_DATABASE_URL`): read-only work runs on a Postgres hot standby,
//! under the same app role and the same row-level security (a physical standby has the
//! primary's catalogue, roles and policies).
//!
//! [`Reads::begin`] hands out a read-only [`TenantTx`] on the standby when three things hold,
//! else on the primary, never an error because of the standby:
//! * **healthy**: the background check (every 500 ms while it is up; with backoff from 1 s to
//!   10 s while it is down) reached it, it is in recovery (a promoted standby is not used: promotion
//!   is out of scope), its role is confined, and it is at most `MNOTE_READ_MAX_LAG_MS` behind;
//! * **fresh**: it has replayed the tenant's last write. Every committed transaction that wrote
//!   (`pg_current_xact_id_if_assigned()` before the commit) records the primary's
//!   `pg_current_wal_insert_lsn()` after it for its tenant, in this process at once and in every
//!   other process through `NOTIFY mnote_read_lsn` (`<tenant>:<lsn>`). A read needs the
//!   standby's `pg_last_wal_replay_lsn()` at or past that position: the last one the check saw,
//!   else one asked inside the read's own transaction (before its first query, so the query's
//!   snapshot includes the write);
//! * **reachable now**: opening the transaction there worked. A standby lost in the middle of a
//!   read is marked down ([`Reads::failed`]) and the caller retries on the primary.
//!
//! Writes, the journal, `LISTEN`/`NOTIFY`, ingest and everything that must read its own write
//! use the primary pool (`AppState::pool`) as before; only the reads that go through [`Reads`]
//! move.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Arc, LazyLock, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use sqlx::{PgPool, postgres::PgPoolOptions};
use uuid::Uuid;

use super::{Scope, TenantTx};

/// Where reads go.
pub struct Reads {
    primary: PgPool,
    standby: Option<Arc<Health>>,
    /// This instance's floor for every tenant: `u64::MAX` until its listener of the other
    /// processes' writes runs, then the primary's position when it (re)started listening.
    floor: Arc<AtomicU64>,
}

/// The standby's pool and what the background check last saw.
pub struct Health {
    pool: PgPool,
    max_lag: Duration,
    up: AtomicBool,
    /// The last replay position seen (it only grows while the standby is in recovery).
    replay_lsn: AtomicU64,
    state: Mutex<Report>,
}

/// What `/readyz` and `/metrics` show of the read replica.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `off` (not configured), `up`, `lagging`, `down`.
    pub status: &'static str,
    /// Reads go to the standby (`true`) or to the primary.
    pub serving: bool,
    pub lag_ms: Option<u64>,
    /// Why it is not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Reads {
    /// Every read on `primary`.
    pub fn primary_only(primary: PgPool) -> Arc<Reads> {
        Arc::new(Reads { primary, standby: None, floor: Arc::new(AtomicU64::new(0)) })
    }

    /// Reads on the standby at `url` while it is healthy and fresh; starts the background check
    /// and the listener of the other processes' writes. The standby's pool connects lazily, so
    /// a standby that is down at startup only means reads on the primary.
    pub fn with_standby(primary: PgPool, url: &str, max_connections: u32, max_lag: Duration) -> anyhow::Result<Arc<Reads>> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(2))
            .connect_lazy(url)
            .map_err(|e| anyhow::anyhow!("MNOTE_READ_DATABASE_URL: {e}"))?;
        TRACKING.store(true, Ordering::Relaxed);
        // Until the listener of the other processes' writes runs, no tenant is known fresh.
        let floor = Arc::new(AtomicU64::new(u64::MAX));
        let health = Arc::new(Health {
            pool,
            max_lag,
            up: AtomicBool::new(false),
            replay_lsn: AtomicU64::new(0),
            state: Mutex::new(Report { status: "down", serving: false, lag_ms: None, reason: Some("not checked yet".into()) }),
        });
        tokio::spawn(check_loop(primary.clone(), health.clone()));
        tokio::spawn(listen_writes(primary.clone(), floor.clone()));
        Ok(Arc::new(Reads { primary, standby: Some(health), floor }))
    }

    /// A read-only transaction for `tenant`, on the standby when it may serve it.
    pub async fn begin(&self, tenant: Uuid, scope: Scope) -> Result<TenantTx, sqlx::Error> {
        if let Some(h) = &self.standby {
            match self.try_standby(h, tenant, scope).await {
                Ok(Some(tx)) => {
                    metrics::counter!("db_reads_total", "target" => "standby", "reason" => "ok").increment(1);
                    return Ok(tx);
                }
                Ok(None) => {}
                Err(e) => {
                    h.mark_down(&format!("{e}"));
                    metrics::counter!("db_reads_total", "target" => "primary", "reason" => "standby_failed").increment(1);
                }
            }
        }
        TenantTx::begin_read_only(&self.primary, tenant, scope).await
    }

    /// `None`: the standby may not serve this read (down, lagging or not fresh for the tenant).
    async fn try_standby(&self, h: &Arc<Health>, tenant: Uuid, scope: Scope) -> Result<Option<TenantTx>, sqlx::Error> {
        if !h.up.load(Ordering::Acquire) {
            metrics::counter!("db_reads_total", "target" => "primary", "reason" => "standby_unhealthy").increment(1);
            return Ok(None);
        }
        let need = FRESHNESS.need(tenant).max(self.floor.load(Ordering::Acquire));
        let mut tx = TenantTx::begin_read_only(&h.pool, tenant, scope).await?;
        if !reached(h.replay_lsn.load(Ordering::Acquire), need) {
            let now = sqlx::query_scalar!("select pg_last_wal_replay_lsn()::text").fetch_one(&mut *tx).await?;
            let now = now.as_deref().and_then(parse_lsn).unwrap_or(0);
            h.replay_lsn.fetch_max(now, Ordering::AcqRel);
            if !reached(now, need) {
                metrics::counter!("db_reads_total", "target" => "primary", "reason" => "not_fresh").increment(1);
                return Ok(None);
            }
        }
        tx.standby = Some(h.clone());
        Ok(Some(tx))
    }

    /// Run `f` in a read transaction (committed after it), once more on the primary when the
    /// standby was lost under it.
    pub async fn run<T, E, F>(&self, tenant: Uuid, scope: Scope, mut f: F) -> Result<T, E>
    where
        E: From<sqlx::Error>,
        F: for<'c> FnMut(&'c mut TenantTx) -> futures_util::future::BoxFuture<'c, Result<T, E>>,
    {
        let mut tx = self.begin(tenant, scope).await?;
        let first = f(&mut tx).await;
        if first.is_err() && standby_lost(&mut tx).await {
            drop(tx);
            let mut tx = self.begin(tenant, scope).await?;
            let v = f(&mut tx).await?;
            finish(tx).await?;
            return Ok(v);
        }
        let v = first?;
        finish(tx).await?;
        Ok(v)
    }

    /// The read replica as `/readyz` shows it.
    pub fn report(&self) -> Report {
        match &self.standby {
            None => Report { status: "off", serving: false, lag_ms: None, reason: None },
            Some(h) => h.state.lock().expect("read replica state").clone(),
        }
    }
}

/// Ends a read transaction. On the standby a failed commit loses nothing (the transaction only
/// read, and its reads are done): the standby is marked down and the result stands (seen: the
/// standby killed between a read's last statement and its commit).
pub async fn finish(tx: TenantTx) -> Result<(), sqlx::Error> {
    let standby = tx.standby.clone();
    match (tx.commit().await, standby) {
        (Err(e), Some(h)) => {
            h.mark_down(&format!("{e}"));
            Ok(())
        }
        (r, _) => r,
    }
}

/// After a read failed: `true` when it ran on the standby and the transaction is no longer
/// usable there, so the caller should run it again (a new [`Reads::begin`]): the connection was
/// lost (the standby is then marked down and the retry goes to the primary) or a statement
/// failed there (e.g. cancelled by a conflict with recovery). `false` when the transaction is
/// fine (the failure was the caller's own, e.g. not found) or ran on the primary.
pub async fn standby_lost(tx: &mut TenantTx) -> bool {
    let Some(h) = tx.standby.clone() else { return false };
    match sqlx::query!("select 1 as one").fetch_one(&mut **tx).await {
        Ok(_) => false,
        Err(e) => {
            if connection_lost(&e) || !matches!(e, sqlx::Error::Database(_)) {
                h.mark_down(&format!("{e}"));
                metrics::counter!("db_reads_total", "target" => "primary", "reason" => "standby_lost").increment(1);
            }
            true
        }
    }
}

/// A lost connection: I/O, the pool, or the server shutting down / the connection failing.
fn connection_lost(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(d) => d.code().is_some_and(|c| c.starts_with("57P") || c.starts_with("08")),
        _ => false,
    }
}

impl Health {
    fn mark_down(&self, why: &str) {
        if self.up.swap(false, Ordering::AcqRel) {
            tracing::warn!("read replica: reads go to the primary ({why})");
        }
        let mut s = self.state.lock().expect("read replica state");
        *s = Report { status: "down", serving: false, lag_ms: None, reason: Some(short(why)) };
    }

    fn set(&self, report: Report) {
        let was = self.up.swap(report.serving, Ordering::AcqRel);
        if was != report.serving {
            if report.serving {
                tracing::info!("read replica: reads go to the standby again");
            } else {
                tracing::warn!(status = report.status, reason = ?report.reason, "read replica: reads go to the primary");
            }
        }
        *self.state.lock().expect("read replica state") = report;
    }
}

fn short(s: &str) -> String {
    s.chars().take(200).collect()
}

/// The background check: the primary's WAL position (sampled, for the lag), then the standby's
/// state. While up every 500 ms; while down with backoff (1 s doubling to 10 s).
async fn check_loop(primary: PgPool, h: Arc<Health>) {
    // (when, primary WAL position): the lag is the age of the oldest position not yet replayed.
    let mut samples: VecDeque<(Instant, u64)> = VecDeque::new();
    let mut backoff = Duration::from_secs(1);
    loop {
        if primary.is_closed() {
            return;
        }
        let report = check_once(&primary, &h, &mut samples).await;
        let serving = report.serving;
        h.set(report);
        if serving {
            backoff = Duration::from_secs(1);
            tokio::time::sleep(Duration::from_millis(500)).await;
        } else {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(10));
        }
    }
}

async fn check_once(primary: &PgPool, h: &Health, samples: &mut VecDeque<(Instant, u64)>) -> Report {
    let down = |why: String| Report { status: "down", serving: false, lag_ms: None, reason: Some(short(&why)) };
    let at = Instant::now();
    match sqlx::query_scalar!(r#"select pg_current_wal_insert_lsn()::text as "lsn!""#).fetch_one(primary).await {
        Ok(l) => {
            let lsn = parse_lsn(&l).unwrap_or(0);
            // A write whose position could not be read blocked every tenant: lifted now.
            let _ = FRESHNESS.floor.compare_exchange(u64::MAX, lsn, Ordering::AcqRel, Ordering::Acquire);
            samples.push_back((at, lsn));
            if samples.len() > 2000 {
                samples.pop_front();
            }
        }
        Err(e) => return down(format!("the primary: {e}")),
    }
    let row = tokio::time::timeout(
        Duration::from_secs(3),
        sqlx::query!(
            r#"select pg_is_in_recovery() as "recovering!", pg_last_wal_replay_lsn()::text as replay,
                    coalesce((select rolsuper or rolbypassrls from pg_roles where rolname = current_user), false) as "unconfined!""#,
        )
        .fetch_one(&h.pool),
    )
    .await
    .unwrap_or_else(|_| Err(sqlx::Error::PoolTimedOut));
    let (recovering, replay, unconfined) = match row {
        Ok(r) => (r.recovering, r.replay, r.unconfined),
        Err(e) => return down(format!("unreachable: {e}")),
    };
    if unconfined {
        return down("its role is superuser or has BYPASSRLS".into());
    }
    if !recovering {
        return down("not in recovery (promoted?): not used as a read replica".into());
    }
    let replay = replay.as_deref().and_then(parse_lsn).unwrap_or(0);
    h.replay_lsn.fetch_max(replay, Ordering::AcqRel);
    while samples.front().is_some_and(|(_, lsn)| reached(replay, *lsn)) {
        samples.pop_front();
    }
    let lag = samples.front().map(|(t, _)| t.elapsed()).unwrap_or_default();
    let lag_ms = lag.as_millis() as u64;
    if lag > h.max_lag {
        return Report {
            status: "lagging",
            serving: false,
            lag_ms: Some(lag_ms),
            reason: Some(format!("replay is {lag_ms} ms behind (MNOTE_READ_MAX_LAG_MS={})", h.max_lag.as_millis())),
        };
    }
    Report { status: "up", serving: true, lag_ms: Some(lag_ms), reason: None }
}

// ---- freshness: the WAL position of each tenant's last write -------------------------------

static TRACKING: AtomicBool = AtomicBool::new(false);
static FRESHNESS: LazyLock<Freshness> = LazyLock::new(Freshness::default);
const CHANNEL: &str = "mnote_read_lsn";

#[derive(Default)]
struct Freshness {
    /// Every tenant's floor in this process: `u64::MAX` after a write whose position could not
    /// be read, until the next health check reads the primary's position.
    floor: AtomicU64,
    by_tenant: Mutex<HashMap<Uuid, u64>>,
}

impl Freshness {
    fn need(&self, tenant: Uuid) -> u64 {
        let t = self.by_tenant.lock().expect("freshness").get(&tenant).copied().unwrap_or(0);
        t.max(self.floor.load(Ordering::Acquire))
    }

    fn note(&self, tenant: Uuid, lsn: u64) {
        let mut m = self.by_tenant.lock().expect("freshness");
        let e = m.entry(tenant).or_insert(0);
        *e = (*e).max(lsn);
    }
}

/// Whether committed writes record their WAL position (a read replica is configured in this
/// process).
pub(super) fn tracking() -> bool {
    TRACKING.load(Ordering::Relaxed)
}

/// After a committed write of `tenant`: the primary's WAL position now is at or past the
/// commit; recorded here and announced to the other processes.
pub(super) async fn after_write(pool: &PgPool, tenant: Uuid) {
    let r = sqlx::query!(
        r#"select l::text as "lsn!", pg_notify($1, $2 || ':' || l::text) as "notified: ()" from pg_current_wal_insert_lsn() l"#,
        CHANNEL,
        tenant.to_string(),
    )
    .fetch_one(pool)
    .await;
    match r.ok().map(|row| row.lsn).as_deref().and_then(parse_lsn) {
        Some(lsn) => FRESHNESS.note(tenant, lsn),
        // Unknown position: no tenant is known fresh until the next health check has read
        // the primary's position (which is past this commit).
        None => FRESHNESS.floor.store(u64::MAX, Ordering::Release),
    }
}

/// `floor` := the primary's position now (`u64::MAX` when it cannot be read).
async fn reset_floor(pool: &PgPool, floor: &AtomicU64) {
    let lsn = sqlx::query_scalar!(r#"select pg_current_wal_insert_lsn()::text as "lsn!""#).fetch_one(pool).await;
    floor.store(lsn.ok().as_deref().and_then(parse_lsn).unwrap_or(u64::MAX), Ordering::Release);
}

/// The other processes' writes (`NOTIFY mnote_read_lsn`). After every (re)connect `floor` is
/// the primary's position, covering what was committed while not listening.
async fn listen_writes(pool: PgPool, floor: Arc<AtomicU64>) {
    loop {
        match sqlx::postgres::PgListener::connect_with(&pool).await {
            Ok(mut l) => {
                if l.listen(CHANNEL).await.is_ok() {
                    reset_floor(&pool, &floor).await;
                    while let Ok(n) = l.recv().await {
                        if let Some((t, lsn)) = n.payload().split_once(':')
                            && let (Ok(t), Some(lsn)) = (Uuid::parse_str(t), parse_lsn(lsn))
                        {
                            FRESHNESS.note(t, lsn);
                        }
                    }
                }
                // Lost: until the listener is back, no tenant is known fresh.
                floor.store(u64::MAX, Ordering::Release);
            }
            Err(e) => tracing::debug!("{CHANNEL} listener: {e}"),
        }
        if pool.is_closed() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Whether a standby that replayed up to `replay` (the end of its last record) has everything
/// the primary had inserted at `target` (`pg_current_wal_insert_lsn()`, where the next record
/// goes). The two differ by a page header when the last record ended exactly at a WAL page
/// boundary: the next record starts after the header (24 bytes, 40 at a segment's start).
fn reached(replay: u64, target: u64) -> bool {
    const PAGE: u64 = 8192;
    replay >= target || (replay.is_multiple_of(PAGE) && target > replay && target - replay <= 40)
}

/// `16/B374D848` → its 64-bit position.
pub fn parse_lsn(s: &str) -> Option<u64> {
    let (hi, lo) = s.trim().split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsn_parses() {
        assert_eq!(parse_lsn("0/16B3748"), Some(0x16B3748));
        assert_eq!(parse_lsn("16/B374D848"), Some((0x16 << 32) | 0xB374D848));
        assert_eq!(parse_lsn("nope"), None);
    }

    #[test]
    fn a_page_header_after_the_last_record_counts_as_replayed() {
        assert!(reached(100, 100) && reached(101, 100) && !reached(99, 100));
        assert!(reached(8192, 8192 + 24) && reached(16 << 20, (16 << 20) + 40));
        assert!(!reached(8192, 8192 + 41) && !reached(8190, 8192 + 24));
    }

    #[test]
    fn freshness_is_per_tenant_and_never_below_the_floor() {
        let f = Freshness::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        f.note(a, 100);
        f.note(a, 50);
        assert_eq!(f.need(a), 100);
        assert_eq!(f.need(b), 0);
        f.floor.store(70, Ordering::Release);
        assert_eq!((f.need(a), f.need(b)), (100, 70));
    }
}

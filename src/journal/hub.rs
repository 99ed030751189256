//! Fan-out of live run events inside one process. Every SSE client of a run subscribes to the
//! run's one [`Feed`]: a task that, on each `mnote_run` wake-up for that run, reads the new
//! events once and broadcasts them to all its subscribers — so 500 browsers watching one run
//! cost one query per append, not 500. Clients check their access (under RLS) when they
//! connect and periodically; the feed itself reads as the tenant's background scope.
//!
//! A client keeps its own cursor: a batch that starts past `cursor + 1` (it subscribed while
//! the feed was between reads) makes it read the gap from the database itself, and seqs at or
//! below the cursor are skipped, so nothing is lost or repeated. A client that falls more
//! than the feed's buffer behind (a reader slower than the run) is cut off instead of
//! re-reading: it reconnects with `Last-Event-ID`.
//!
//! The hub also bounds what clients cost the database (issue 31 item 9): each member holds at
//! most `MNOTE_SSE_MAX_PER_USER` streams ([`RunHub::admit`]), and the clients' own reads (the
//! first page, a gap, the access re-check) share [`RunHub::read_permit`]'s few permits, a
//! quarter of the pool, so a crowd of streams never takes the connections other requests need.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use sqlx::PgPool;
use tokio::sync::broadcast::{self, error::RecvError};
use uuid::Uuid;

use super::store::{self, EventRow, EventView};
use crate::db::{Scope, TenantTx};

/// A feed re-reads at least this often even without a wake-up (a missed notification).
const IDLE_REREAD: Duration = Duration::from_secs(5);

/// A batch of consecutive events of one run.
pub type Batch = Arc<Vec<EventView>>;

pub struct Feed {
    tx: broadcast::Sender<Batch>,
    /// `true` once the feed's task knows the position it broadcasts after.
    started: tokio::sync::watch::Sender<bool>,
    /// `false` once the feed's task has stopped (the run ended, or nobody listened at a
    /// wake-up): such a feed broadcasts nothing more, so [`RunHub::watch`] starts a new one.
    running: AtomicBool,
}

impl Feed {
    pub fn subscribe(&self) -> broadcast::Receiver<Batch> {
        self.tx.subscribe()
    }

    /// Wait (at most `limit`) until the feed knows where it starts. A client's own read made
    /// after this sees every event the feed will not broadcast; a read made before could miss
    /// one appended between that read and the feed's start (the run's last event, say).
    pub async fn started(&self, limit: Duration) {
        let mut rx = self.started.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|s| *s)).await;
    }
}

/// Marks the feed stopped when its task ends, however it ends.
struct Stopped(Weak<Feed>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(f) = self.0.upgrade() {
            f.running.store(false, Ordering::Release);
            f.started.send_replace(true);
        }
    }
}

/// The process's feeds, one per watched run.
pub struct RunHub {
    pool: PgPool,
    pings: broadcast::Sender<String>,
    feeds: Mutex<HashMap<Uuid, Weak<Feed>>>,
    /// Open streams per member (tenant, user).
    streams: Mutex<HashMap<(Uuid, Uuid), usize>>,
    /// The clients' own database reads share these.
    reads: tokio::sync::Semaphore,
    /// Reads done by clients (not by feeds), for tests and metrics.
    client_reads: AtomicU64,
}

/// One open stream of a member; dropping it frees the slot.
pub struct StreamSlot {
    hub: Arc<RunHub>,
    key: (Uuid, Uuid),
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut streams = self.hub.streams.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = streams.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                streams.remove(&self.key);
            }
        }
    }
}

impl RunHub {
    pub fn new(pool: PgPool, pings: broadcast::Sender<String>) -> Self {
        let permits = (pool.options().get_max_connections() as usize / 4).max(1);
        RunHub {
            pool,
            pings,
            feeds: Mutex::new(HashMap::new()),
            streams: Mutex::new(HashMap::new()),
            reads: tokio::sync::Semaphore::new(permits),
            client_reads: AtomicU64::new(0),
        }
    }

    /// A stream slot for the member, or `None` when they already hold `max`.
    pub fn admit(self: &Arc<Self>, tenant: Uuid, user: Uuid, max: usize) -> Option<StreamSlot> {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        let n = streams.entry((tenant, user)).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(StreamSlot { hub: self.clone(), key: (tenant, user) })
    }

    /// Wait for one of the permits the clients' own reads share (counted).
    pub async fn read_permit(&self) -> tokio::sync::SemaphorePermit<'_> {
        self.client_reads.fetch_add(1, Ordering::Relaxed);
        self.reads.acquire().await.expect("the semaphore is never closed")
    }

    /// How many reads clients have done (the first page, gaps, re-checks) in this process.
    pub fn client_reads(&self) -> u64 {
        self.client_reads.load(Ordering::Relaxed)
    }

    /// The run's feed (started if nobody watches it yet) and a receiver of its batches. Keep
    /// the `Arc<Feed>` while receiving: the feed stops when the last holder lets go.
    pub fn watch(&self, tenant: Uuid, run: Uuid) -> (Arc<Feed>, broadcast::Receiver<Batch>) {
        let mut feeds = self.feeds.lock().unwrap_or_else(|e| e.into_inner());
        feeds.retain(|_, f| f.strong_count() > 0);
        if let Some(feed) = feeds.get(&run).and_then(Weak::upgrade).filter(|f| f.running.load(Ordering::Acquire)) {
            let rx = feed.subscribe();
            return (feed, rx);
        }
        let (tx, rx) = broadcast::channel(256);
        let feed = Arc::new(Feed { tx, started: tokio::sync::watch::Sender::new(false), running: AtomicBool::new(true) });
        feeds.insert(run, Arc::downgrade(&feed));
        // Subscribed to the wake-ups before the feed's first read.
        let pings = self.pings.subscribe();
        tokio::spawn(follow(self.pool.clone(), tenant, run, Arc::downgrade(&feed), pings));
        (feed, rx)
    }
}

async fn read_after(pool: &PgPool, tenant: Uuid, run: Uuid, after: i64) -> sqlx::Result<Vec<EventRow>> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let rows = store::events_after(&mut tx, run, after, store::PAGE).await?;
    tx.commit().await?;
    Ok(rows)
}

async fn last_seq(pool: &PgPool, tenant: Uuid, run: Uuid) -> sqlx::Result<i64> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let n = sqlx::query_scalar!("select max(seq) from ai_run_event where tenant_id = $2 and run_id = $1", run, tenant)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(n.unwrap_or(0))
}

/// The feed's task: read what is new on each wake-up, broadcast it, stop when nobody
/// listens or the run's ending event went out.
async fn follow(pool: PgPool, tenant: Uuid, run: Uuid, feed: Weak<Feed>, mut pings: broadcast::Receiver<String>) {
    let _stopped = Stopped(feed.clone());
    let prefix = format!("{tenant}:{run}:");
    let mut last = match last_seq(&pool, tenant, run).await {
        Ok(n) => n,
        Err(e) => {
            tracing::debug!(run = %run, "run feed: {e}");
            0
        }
    };
    match feed.upgrade() {
        Some(f) => f.started.send_replace(true),
        None => return,
    };
    loop {
        let woke = tokio::time::timeout(IDLE_REREAD, async {
            loop {
                match pings.recv().await {
                    Ok(m) if m.starts_with(&prefix) && !m.ends_with(":cancel") => return true,
                    Ok(_) => continue,
                    Err(RecvError::Lagged(_)) => return true,
                    Err(RecvError::Closed) => return false,
                }
            }
        })
        .await;
        if woke == Ok(false) {
            return;
        }
        let Some(f) = feed.upgrade() else { return };
        if f.tx.receiver_count() == 0 {
            return;
        }
        match read_after(&pool, tenant, run, last).await {
            Ok(rows) if !rows.is_empty() => {
                last = rows.last().map_or(last, |r| r.seq);
                let ended = rows.iter().any(|r| r.event.ends_stream());
                let _ = f.tx.send(Arc::new(rows.iter().map(EventRow::view).collect()));
                if ended {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(run = %run, "run feed read: {e}"),
        }
    }
}

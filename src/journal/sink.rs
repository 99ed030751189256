//! Where a runtime writes its events. Token deltas are coalesced (one `message.delta` row per
//! [`COALESCE`] at most, flushed by a ticker even when the stream stalls), every other event
//! flushes the pending text first, so the journal's order is the order things happened.
//! Appends survive a Postgres restart: a failed append is retried (it is one transaction, so
//! a retry never leaves half an append) for up to [`RETRY_FOR`].

use std::{
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use sqlx::PgPool;
use tokio::sync::Mutex;
use uuid::Uuid;

use super::{Event, EventSource, store};
use crate::db::{Scope, TenantTx};

/// Deltas arriving within this window become one event.
pub const COALESCE: Duration = Duration::from_millis(75);
/// How long an append keeps retrying while the database is away.
pub const RETRY_FOR: Duration = Duration::from_secs(20);

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("the run journal could not be written: {0}")]
    Db(#[from] sqlx::Error),
}

enum Target {
    Db {
        pool: PgPool,
        tenant: Uuid,
        run: Uuid,
    },
    /// Tests and evaluation: events kept in memory.
    Memory(std::sync::Mutex<Vec<(EventSource, Event)>>),
}

#[derive(Default)]
struct Pending {
    text: String,
    since: Option<Instant>,
    /// Every delta so far (the answer as streamed).
    streamed: String,
}

struct Inner {
    target: Target,
    source: EventSource,
    pending: Mutex<Pending>,
    coalesce: Duration,
}

/// A run's event writer; cheap to clone (runtimes hand it to callbacks).
#[derive(Clone)]
pub struct EventSink {
    inner: Arc<Inner>,
}

impl EventSink {
    /// Events of `run` go to the journal; `source` is what agent events are attributed to.
    pub fn db(pool: PgPool, tenant: Uuid, run: Uuid, source: EventSource) -> Self {
        Self::db_with(pool, tenant, run, source, COALESCE)
    }

    /// [`EventSink::db`] with another coalescing window (`Duration::ZERO`: a row per delta).
    pub fn db_with(pool: PgPool, tenant: Uuid, run: Uuid, source: EventSource, coalesce: Duration) -> Self {
        let sink = Self::new(Target::Db { pool, tenant, run }, source, coalesce);
        if !coalesce.is_zero() {
            tokio::spawn(ticker(Arc::downgrade(&sink.inner), coalesce));
        }
        sink
    }

    /// Events kept in memory ([`EventSink::recorded`]); deltas are not coalesced.
    pub fn memory(source: EventSource) -> Self {
        Self::new(Target::Memory(Default::default()), source, Duration::ZERO)
    }

    fn new(target: Target, source: EventSource, coalesce: Duration) -> Self {
        EventSink { inner: Arc::new(Inner { target, source, pending: Mutex::new(Pending::default()), coalesce }) }
    }

    /// The agent's source (`hermes`, `reasonix`, `chat_only`).
    pub fn source(&self) -> EventSource {
        self.inner.source
    }

    /// Part of the answer, as it streams.
    pub async fn delta(&self, text: &str) -> Result<(), JournalError> {
        if text.is_empty() {
            return Ok(());
        }
        let mut p = self.inner.pending.lock().await;
        p.text.push_str(text);
        p.streamed.push_str(text);
        p.since.get_or_insert_with(Instant::now);
        if p.since.is_some_and(|t| t.elapsed() >= self.inner.coalesce) {
            self.flush_locked(&mut p).await?;
        }
        Ok(())
    }

    /// Any other event, after the text pending before it.
    pub async fn emit(&self, source: EventSource, event: Event) -> Result<(), JournalError> {
        let mut p = self.inner.pending.lock().await;
        let mut batch = take_text(&mut p, self.inner.source);
        batch.push((source, event));
        self.write(&batch).await
    }

    /// An event attributed to the agent.
    pub async fn agent(&self, event: Event) -> Result<(), JournalError> {
        self.emit(self.inner.source, event).await
    }

    /// Write the pending text now.
    pub async fn flush(&self) -> Result<(), JournalError> {
        let mut p = self.inner.pending.lock().await;
        self.flush_locked(&mut p).await
    }

    /// Everything streamed so far.
    pub async fn streamed(&self) -> String {
        self.inner.pending.lock().await.streamed.clone()
    }

    /// The events of a memory sink (empty for a journal sink).
    pub fn recorded(&self) -> Vec<(EventSource, Event)> {
        match &self.inner.target {
            Target::Memory(m) => m.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            Target::Db { .. } => Vec::new(),
        }
    }

    async fn flush_locked(&self, p: &mut Pending) -> Result<(), JournalError> {
        let batch = take_text(p, self.inner.source);
        if batch.is_empty() { Ok(()) } else { self.write(&batch).await }
    }

    async fn write(&self, batch: &[(EventSource, Event)]) -> Result<(), JournalError> {
        match &self.inner.target {
            Target::Memory(m) => {
                m.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(batch);
                Ok(())
            }
            Target::Db { pool, tenant, run } => Ok(retrying(|| append_once(pool, *tenant, *run, batch)).await?),
        }
    }
}

/// Run `f` again on connection failures ([`is_transient`]: a Postgres restart) for up to
/// [`RETRY_FOR`], backing off from 100 ms to 2 s. Every journal write goes through this.
pub async fn retrying<T, F, Fut>(mut f: F) -> sqlx::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = sqlx::Result<T>>,
{
    let started = Instant::now();
    let mut wait = Duration::from_millis(100);
    loop {
        match f().await {
            Err(e) if is_transient(&e) && started.elapsed() < RETRY_FOR => {
                tracing::warn!("journal write failed, retrying: {e}");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            r => return r,
        }
    }
}

fn take_text(p: &mut Pending, source: EventSource) -> Vec<(EventSource, Event)> {
    p.since = None;
    if p.text.is_empty() {
        return Vec::new();
    }
    vec![(source, Event::MessageDelta { text: std::mem::take(&mut p.text) })]
}

async fn append_once(pool: &PgPool, tenant: Uuid, run: Uuid, batch: &[(EventSource, Event)]) -> sqlx::Result<()> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    store::append(&mut tx, tenant, run, batch).await?;
    tx.commit().await
}

/// A connection-level failure (the database restarting, the pool exhausted), worth retrying.
pub fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(d) => {
            let code = d.code().unwrap_or_default();
            // 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now, 08* connection
            code.starts_with("57P") || code.starts_with("08")
        }
        _ => false,
    }
}

/// Flushes text that has waited a whole window (a stalled stream still shows what it sent).
async fn ticker(inner: Weak<Inner>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let sink = EventSink { inner };
        let due = {
            let p = sink.inner.pending.lock().await;
            p.since.is_some_and(|t| t.elapsed() >= every)
        };
        if due && let Err(e) = sink.flush().await {
            tracing::warn!("journal flush: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_memory_sink_keeps_deltas_before_the_event_that_follows_them() {
        let s = EventSink::memory(EventSource::Hermes);
        s.delta("Hel").await.unwrap();
        s.delta("lo").await.unwrap();
        s.emit(EventSource::Mnote, Event::ChangedFiles { files: vec![] }).await.unwrap();
        let got = s.recorded();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].1, Event::MessageDelta { text: "Hel".into() });
        assert_eq!(got[2].0, EventSource::Mnote);
        assert_eq!(s.streamed().await, "Hello");
    }
}

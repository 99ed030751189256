//! Where a runtime writes its events. Token deltas are coalesced (one `message.delta` row per
//! [`COALESCE`] at most, flushed by a ticker even when the stream stalls), every other event
//! flushes the pending text first, so the journal's order is the order things happened.
//! Appends survive a Postgres restart: a failed append is retried (it is one transaction, so
//! a retry never leaves half an append) for up to [`RETRY_FOR`].
//!
//! A journal sink also bounds what one run may write ([`Limits`], from `MNOTE_RUN_MAX_*`):
//! the streamed answer (`answer_too_large`), one event's JSON (`event_too_large`; streamed
//! text is split into deltas under it instead), the number of events (`too_many_events`) and
//! their total size (`journal_too_large`). Past a limit nothing more is written and the
//! runtime gets [`JournalError::Limit`], which fails the run with that code.

use std::{
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use sqlx::PgPool;
use tokio::sync::Mutex;
use uuid::Uuid;

use super::{
    event::{Event, EventSource},
    store,
};
use crate::db::{Scope, TenantTx};

/// Deltas arriving within this window become one event.
pub const COALESCE: Duration = Duration::from_millis(75);
/// How long an append keeps retrying while the database is away.
pub const RETRY_FOR: Duration = Duration::from_secs(20);

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("the run journal could not be written: {0}")]
    Db(#[from] sqlx::Error),
    /// The run passed one of its [`Limits`]; `code` is the run's failure code.
    #[error("{message}")]
    Limit { code: &'static str, message: String },
}

impl JournalError {
    /// The run's failure code.
    pub fn code(&self) -> &'static str {
        match self {
            JournalError::Db(_) => "journal_unavailable",
            JournalError::Limit { code, .. } => code,
        }
    }
}

/// What one run may write through its sink.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The streamed answer, in bytes.
    pub answer_bytes: usize,
    /// One event's JSON, in bytes.
    pub event_bytes: usize,
    /// Events in the run's journal.
    pub events: i64,
    /// All events' JSON together, in bytes.
    pub journal_bytes: usize,
}

impl Limits {
    pub const NONE: Limits =
        Limits { answer_bytes: usize::MAX, event_bytes: usize::MAX, events: i64::MAX, journal_bytes: usize::MAX };

    pub fn of(cfg: &crate::config::AgentsConfig) -> Self {
        Limits {
            answer_bytes: cfg.max_answer_bytes,
            event_bytes: cfg.max_event_bytes,
            events: cfg.max_events,
            // Room for the answer streamed once plus every other event at its largest size
            // a few times over; a run past it is producing far more than it can show.
            journal_bytes: cfg.max_answer_bytes.saturating_mul(4).max(cfg.max_event_bytes.saturating_mul(64)),
        }
    }

    /// The largest delta text written as one event (room for JSON escapes: a control
    /// character takes six bytes).
    fn delta_bytes(&self) -> usize {
        (self.event_bytes / 8).max(1)
    }
}

fn limit(code: &'static str, message: String) -> JournalError {
    JournalError::Limit { code, message }
}

enum Target {
    Db {
        pool: PgPool,
        tenant: Uuid,
        run: Uuid,
        /// Write only while the run is `running` ([`store::append_if_running`]).
        only_running: bool,
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
    /// Events written (the run's `run.created` counts).
    events: i64,
    /// Bytes of event JSON written.
    bytes: usize,
}

struct Inner {
    target: Target,
    source: EventSource,
    pending: Mutex<Pending>,
    coalesce: Duration,
    limits: Limits,
}

/// A run's event writer; cheap to clone (runtimes hand it to callbacks).
#[derive(Clone)]
pub struct EventSink {
    inner: Arc<Inner>,
}

impl EventSink {
    /// The run whose journal this writes (`None`: kept in memory).
    pub fn run_id(&self) -> Option<Uuid> {
        match &self.inner.target {
            Target::Db { run, .. } => Some(*run),
            Target::Memory(_) => None,
        }
    }

    /// Events of `run` go to the journal; `source` is what agent events are attributed to.
    pub fn db(pool: PgPool, tenant: Uuid, run: Uuid, source: EventSource) -> Self {
        Self::db_with(pool, tenant, run, source, COALESCE)
    }

    /// [`EventSink::db`] with another coalescing window (`Duration::ZERO`: a row per delta).
    pub fn db_with(pool: PgPool, tenant: Uuid, run: Uuid, source: EventSource, coalesce: Duration) -> Self {
        Self::db_limited(pool, tenant, run, source, coalesce, Limits::NONE)
    }

    /// A run's journal sink under `limits` (what the executor uses).
    pub fn db_limited(pool: PgPool, tenant: Uuid, run: Uuid, source: EventSource, coalesce: Duration, limits: Limits) -> Self {
        let sink = Self::new(Target::Db { pool, tenant, run, only_running: false }, source, coalesce, limits);
        if !coalesce.is_zero() {
            tokio::spawn(ticker(Arc::downgrade(&sink.inner), coalesce));
        }
        sink
    }

    /// Another writer of a live run's journal, beside its executor's sink (a tool call that
    /// arrived at `/mcp` with the run's token, on any replica): no coalescing, and nothing is
    /// written once the run is no longer `running` (an append then fails with `RowNotFound`).
    pub fn db_while_running(pool: PgPool, tenant: Uuid, run: Uuid, source: EventSource, limits: Limits) -> Self {
        Self::new(Target::Db { pool, tenant, run, only_running: true }, source, Duration::ZERO, limits)
    }

    /// Events kept in memory ([`EventSink::recorded`]); deltas are not coalesced.
    pub fn memory(source: EventSource) -> Self {
        Self::new(Target::Memory(Default::default()), source, Duration::ZERO, Limits::NONE)
    }

    /// [`EventSink::memory`] under `limits`.
    pub fn memory_limited(source: EventSource, limits: Limits) -> Self {
        Self::new(Target::Memory(Default::default()), source, Duration::ZERO, limits)
    }

    fn new(target: Target, source: EventSource, coalesce: Duration, limits: Limits) -> Self {
        let pending = Pending { events: 1, ..Pending::default() };
        EventSink { inner: Arc::new(Inner { target, source, pending: Mutex::new(pending), coalesce, limits }) }
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
        let limits = self.inner.limits;
        if p.streamed.len().saturating_add(text.len()) > limits.answer_bytes {
            return Err(limit("answer_too_large", format!("the answer grew past the limit of {} bytes", limits.answer_bytes)));
        }
        p.streamed.push_str(text);
        // Text arriving faster than the window is written in pieces under the event limit.
        let mut rest = text;
        while !rest.is_empty() {
            let room = limits.delta_bytes().saturating_sub(p.text.len()).max(1);
            let mut cut = rest.len().min(room);
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            p.text.push_str(&rest[..cut]);
            rest = &rest[cut..];
            if p.text.len() >= limits.delta_bytes() {
                self.flush_locked(&mut p).await?;
            }
        }
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
        self.write(&mut p, &batch).await
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
        if batch.is_empty() { Ok(()) } else { self.write(p, &batch).await }
    }

    async fn write(&self, p: &mut Pending, batch: &[(EventSource, Event)]) -> Result<(), JournalError> {
        let limits = self.inner.limits;
        if p.events.saturating_add(batch.len() as i64) > limits.events {
            return Err(limit("too_many_events", format!("the run wrote more than {} events", limits.events)));
        }
        let mut bytes = 0usize;
        for (_, e) in batch {
            let n = serde_json::to_vec(&e.split().1).map_or(0, |v| v.len());
            if n > limits.event_bytes {
                let kind = e.split().0;
                return Err(limit(
                    "event_too_large",
                    format!("a {kind} event of {n} bytes is over the limit of {} bytes", limits.event_bytes),
                ));
            }
            bytes += n;
        }
        if p.bytes.saturating_add(bytes) > limits.journal_bytes {
            return Err(limit("journal_too_large", format!("the run wrote more than {} bytes of events", limits.journal_bytes)));
        }
        p.events += batch.len() as i64;
        p.bytes += bytes;
        match &self.inner.target {
            Target::Memory(m) => {
                m.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(batch);
                Ok(())
            }
            Target::Db { pool, tenant, run, only_running } => {
                Ok(retrying(|| append_once(pool, *tenant, *run, batch, *only_running)).await?)
            }
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

async fn append_once(
    pool: &PgPool,
    tenant: Uuid,
    run: Uuid,
    batch: &[(EventSource, Event)],
    only_running: bool,
) -> sqlx::Result<()> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    if only_running {
        store::append_if_running(&mut tx, tenant, run, batch).await?;
    } else {
        store::append(&mut tx, tenant, run, batch).await?;
    }
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
    use crate::ai::AgentId;

    #[tokio::test]
    async fn a_memory_sink_keeps_deltas_before_the_event_that_follows_them() {
        let s = EventSink::memory(EventSource::Agent(AgentId::Hermes));
        s.delta("Hel").await.unwrap();
        s.delta("lo").await.unwrap();
        s.emit(EventSource::Mnote, Event::ChangedFiles { files: vec![] }).await.unwrap();
        let got = s.recorded();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].1, Event::MessageDelta { text: "Hel".into() });
        assert_eq!(got[2].0, EventSource::Mnote);
        assert_eq!(s.streamed().await, "Hello");
    }

    /// Issue 31 item 10: 2,000 plan events of 100 KB and a 105-million-character answer were
    /// journaled. Each limit stops the run with its own code, and streamed text is cut into
    /// deltas under the event limit rather than refused.
    #[tokio::test]
    async fn a_limited_sink_refuses_past_each_limit_with_its_code() {
        let limits = Limits { answer_bytes: 1000, event_bytes: 400, events: 100, journal_bytes: 100_000 };
        let s = EventSink::memory_limited(EventSource::Agent(AgentId::Hermes), limits);
        s.delta(&"a".repeat(900)).await.unwrap();
        let deltas = s.recorded();
        assert!(deltas.len() >= 2, "900 bytes of text in deltas of at most 50: {}", deltas.len());
        let e = s.delta(&"b".repeat(200)).await.unwrap_err();
        assert_eq!(e.code(), "answer_too_large");
        assert_eq!(s.streamed().await.len(), 900, "nothing past the limit is kept");

        let s = EventSink::memory_limited(EventSource::Agent(AgentId::Hermes), Limits { events: 5, ..limits });
        let big = Event::ChangedFiles { files: vec!["x".repeat(500)] };
        assert_eq!(s.agent(big).await.unwrap_err().code(), "event_too_large");
        for _ in 0..4 {
            s.agent(Event::ChangedFiles { files: vec![] }).await.unwrap();
        }
        let e = s.agent(Event::ChangedFiles { files: vec![] }).await.unwrap_err();
        assert_eq!(e.code(), "too_many_events", "run.created and 4 events are the 5 allowed");

        let s = EventSink::memory_limited(
            EventSource::Agent(AgentId::Hermes),
            Limits { journal_bytes: 1000, events: 1000, ..limits },
        );
        let mut codes = Vec::new();
        for _ in 0..10 {
            if let Err(e) = s.agent(Event::ChangedFiles { files: vec!["f".repeat(300)] }).await {
                codes.push(e.code());
            }
        }
        assert_eq!(codes.first(), Some(&"journal_too_large"), "{codes:?}");
    }
}

//! Reading a run's journal: a JSON page (`?afterSeq=N`) or a server-sent-event stream of the
//! same events (`id:` = seq, `Last-Event-ID` honoured, keep-alive comments, ends after the
//! event that ends the run; a reconnect at or past that event is `204 No Content`, see
//! [`over_after`]). Both read under the caller's RLS and apply terminal
//! reconciliation: a run whose status is terminal but whose journal lacks the terminal event
//! gets one supplied (marked `reconciled: true`, never stored).
//!
//! The stream subscribes to the run's feed in the process's [`super::hub`] before it reads;
//! the feed's batches are the data, a gap before a batch is read by the client itself, and a
//! client that lags past the feed's buffer is cut off (it reconnects with `Last-Event-ID`).
//!
//! Access is re-checked every `MNOTE_SSE_RECHECK_SECS` however busy the stream is: the API
//! token still live (not revoked or expired) or the session's epoch unchanged, the caller
//! still a member, the run still visible under RLS. When any fails, the stream ends (closes,
//! with no further event); reconnecting then gets the refusal as an HTTP error.

use std::{
    convert::Infallible,
    time::{Duration, Instant},
};

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde::Serialize;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use super::{
    event::{Event, EventSource, RunCompleted, RunFailed, RunStatus, RunStopped},
    receipt::Receipt,
    store::{self, EventRow, EventView, RunRow},
};
use crate::{
    auth::{Auth, tokens},
    db::{Scope, TenantTx},
    error::AppResult,
    state::AppState,
};

/// What the stream's caller signed in with, to re-check while the stream is open.
#[derive(Clone, Debug)]
pub enum Grant {
    /// An API token, by its hash.
    Token(String),
    /// A browser session, by the account's session epoch when it was opened.
    Session { epoch: i32 },
}

/// Whether `auth` may still read `run`: its credential is live, it is still a member, and the
/// run is still visible to it under RLS.
async fn still_allowed(state: &AppState, auth: &Auth, grant: &Grant, run: Uuid) -> AppResult<bool> {
    match grant {
        Grant::Token(hash) => {
            let mut tx = TenantTx::begin(&state.pool, auth.tenant_id, Scope::System).await?;
            let live = tokens::is_live_for(&mut tx, hash, auth.user_id).await?;
            tx.commit().await?;
            if !live {
                return Ok(false);
            }
        }
        Grant::Session { epoch } => {
            if crate::auth::account::session_epoch(&state.pool, auth.user_id).await? != Some(*epoch) {
                return Ok(false);
            }
        }
    }
    let mut tx = auth.tx(state).await?;
    let member = crate::auth::directory::member(&mut tx, auth.user_id).await?.is_some();
    let visible = member && store::get(&mut tx, run).await?.is_some();
    tx.commit().await?;
    Ok(visible)
}

/// `GET …/events?afterSeq=N` as JSON.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventPage {
    pub items: Vec<EventView>,
    pub status: RunStatus,
    /// The seq to ask after next time.
    pub last_seq: i64,
    /// Whether the run's journal is complete (its ending event is in `items` or before).
    pub ended: bool,
}

/// The events after `after`, plus a reconciled ending when the run ended without one.
async fn read(state: &AppState, auth: &Auth, run: Uuid, after: i64) -> AppResult<Option<(RunRow, Vec<EventView>, bool)>> {
    let mut tx = auth.tx(state).await?;
    let Some(row) = store::get(&mut tx, run).await? else { return Ok(None) };
    let rows = store::events_after(&mut tx, run, after, store::PAGE).await?;
    let ending = store::ending_seq(&mut tx, run).await?;
    tx.commit().await?;
    let mut items: Vec<EventView> = rows.iter().map(EventRow::view).collect();
    let ended = match ending {
        // Ended in the journal: complete once the page reaches that event.
        Some(seq) => items.last().map_or(after, |e| e.seq) >= seq,
        None => {
            let status = row.status;
            if status.is_terminal() || status == RunStatus::Interrupted {
                // The status says it ended; the journal does not show it: supply the ending.
                let complete_page = (rows.len() as i64) < store::PAGE;
                match reconciled(&row) {
                    Some(e) if complete_page => {
                        if e.seq > after {
                            items.push(e);
                        }
                        true
                    }
                    _ => false,
                }
            } else {
                false
            }
        }
    };
    Ok(Some((row, items, ended)))
}

/// Whether the run is gone (`None`) or its events after `after` are over: the run has ended
/// and `after` is at or past its ending event (the journal's, else the one its status implies,
/// [`reconciled`]). A stream resumed there would end at once, empty; the handler answers
/// `204 No Content` instead, which tells a standard EventSource client to stop reconnecting.
pub async fn over_after(state: &AppState, auth: &Auth, run: Uuid, after: i64) -> AppResult<Option<bool>> {
    let mut tx = auth.tx(state).await?;
    let Some(row) = store::get(&mut tx, run).await? else { return Ok(None) };
    let ending = store::ending_seq(&mut tx, run).await?;
    tx.commit().await?;
    Ok(Some(match ending {
        Some(seq) => after >= seq,
        None => reconciled(&row).is_some_and(|e| after >= e.seq),
    }))
}

/// The ending event the run's status implies.
fn reconciled(row: &RunRow) -> Option<EventView> {
    let stopped =
        |default: &str| RunStopped { reason: row.status_reason.clone().unwrap_or_else(|| default.into()), reconciled: true };
    let event = match row.status {
        RunStatus::Completed => {
            let answer = row.answer.as_deref().unwrap_or_default();
            let completed = match &row.receipt {
                Some(r) => RunCompleted::of(answer, &r.0),
                None => RunCompleted::of(answer, &Receipt::empty()),
            };
            Event::RunCompleted(RunCompleted { reconciled: true, ..completed })
        }
        RunStatus::Failed => Event::RunFailed(RunFailed {
            code: row.error_code.clone().unwrap_or_else(|| "internal".into()),
            message: row.error_message.clone().unwrap_or_default(),
            reconciled: true,
        }),
        RunStatus::Cancelled => Event::RunCancelled(stopped("user")),
        RunStatus::Interrupted => Event::RunInterrupted(stopped("worker_lost")),
        RunStatus::Pending | RunStatus::Running => return None,
    };
    Some(EventView {
        schema: "mnote.ai_run_event.v1",
        host_run_id: row.id,
        seq: row.last_seq() + 1,
        source: EventSource::Mnote.as_str().into(),
        event,
        created_at: row.ended_at.unwrap_or(row.updated_at),
    })
}

/// The JSON page.
pub async fn page(state: &AppState, auth: &Auth, run: Uuid, after: i64) -> AppResult<Option<EventPage>> {
    let Some((row, items, ended)) = read(state, auth, run, after).await? else { return Ok(None) };
    let last_seq = items.last().map(|e| e.seq).unwrap_or(after.max(0)).max(after);
    Ok(Some(EventPage { items, status: row.status, last_seq, ended }))
}

fn sse_event(e: &EventView) -> SseEvent {
    SseEvent::default()
        .id(e.seq.to_string())
        .event(e.event.kind())
        .json_data(e)
        .unwrap_or_else(|_| SseEvent::default().comment("unserializable event"))
}

/// How often a quiet stream re-reads under the caller's RLS (an ending the journal lacks):
/// besides that, it is fed by the process's [`super::hub`].
const IDLE_REREAD: Duration = Duration::from_secs(15);

/// How long a new stream waits for its run's feed to start before its first read.
const FEED_START: Duration = Duration::from_secs(5);

/// The SSE stream of `run` after `after` (the caller has checked that the run is visible and
/// holds one of its stream slots).
pub fn sse(
    state: AppState,
    auth: Auth,
    grant: Grant,
    slot: super::hub::StreamSlot,
    run: Uuid,
    after: i64,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    // Subscribed before the first read: nothing appended after the read is missed.
    let (feed, rx) = state.run_hub.watch(auth.tenant_id, run);
    let every = state.config.sse_recheck;
    let init = Cursor {
        state,
        auth,
        grant,
        _slot: slot,
        _feed: feed,
        rx,
        cursor: after,
        done: false,
        reread: true,
        started: false,
        idle_at: Instant::now() + IDLE_REREAD,
        recheck_at: Instant::now() + every,
        queue: Default::default(),
    };
    let stream = futures_util::stream::unfold(init, move |mut c| async move {
        loop {
            if Instant::now() >= c.recheck_at {
                // However busy the stream: a revoked token or a demoted admin stops here.
                // In a task of its own: a read permit is never held by a client that stopped
                // reading (a future only moves while its stream is polled).
                let (state, auth, grant) = (c.state.clone(), c.auth.clone(), c.grant.clone());
                let allowed = tokio::spawn(async move {
                    let _permit = state.run_hub.read_permit().await;
                    still_allowed(&state, &auth, &grant, run).await
                })
                .await
                .unwrap_or(Ok(false));
                match allowed {
                    Ok(true) => c.recheck_at = Instant::now() + every,
                    Ok(false) => return None,
                    Err(e) => {
                        tracing::debug!(run = %run, "run stream access check failed: {e}");
                        return None;
                    }
                }
            }
            if let Some(e) = c.queue.pop_front() {
                return Some((Ok(e), c));
            }
            if c.done {
                return None;
            }
            if c.reread {
                c.reread = false;
                if !c.started {
                    // The first read waits for the feed's start: nothing falls between the two.
                    c.started = true;
                    c._feed.started(FEED_START).await;
                }
                c.idle_at = Instant::now() + IDLE_REREAD;
                let (state, auth, cursor) = (c.state.clone(), c.auth.clone(), c.cursor);
                let got = tokio::spawn(async move {
                    let _permit = state.run_hub.read_permit().await;
                    read(&state, &auth, run, cursor).await
                })
                .await
                .unwrap_or(Ok(None));
                match got {
                    Ok(Some((_, items, ended))) => {
                        // A full page: the next one at once (not after the idle re-read).
                        c.reread = !ended && items.len() as i64 >= store::PAGE;
                        c.take(&items);
                        c.done = ended;
                    }
                    // The run is gone (or no longer visible): end the stream.
                    Ok(None) => return None,
                    Err(e) => tracing::debug!(run = %run, "run stream read failed: {e}"),
                }
                continue;
            }
            tokio::select! {
                got = c.rx.recv() => match got {
                    Ok(batch) => {
                        c.idle_at = Instant::now() + IDLE_REREAD;
                        if batch.first().is_some_and(|e| e.seq > c.cursor + 1) {
                            c.reread = true; // a gap: read it ourselves
                        } else {
                            c.take(&batch);
                            c.done = batch.iter().any(|e| e.event.ends_stream());
                        }
                    }
                    // Fell further behind than the feed keeps: cut off rather than re-read
                    // the journal (the client resumes with Last-Event-ID).
                    Err(RecvError::Lagged(_)) => return None,
                    Err(RecvError::Closed) => c.reread = true,
                },
                _ = tokio::time::sleep_until(c.recheck_at.into()) => {}
                // A deadline of its own: the access checks above wake this loop more often
                // than this and must not put the re-read off.
                _ = tokio::time::sleep_until(c.idle_at.into()) => c.reread = true,
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)).text("keep-alive"))
}

/// One SSE client's position.
struct Cursor {
    state: AppState,
    auth: Auth,
    grant: Grant,
    /// Holds the member's stream slot while the stream is open.
    _slot: super::hub::StreamSlot,
    /// When access is checked next.
    recheck_at: Instant,
    /// Keeps the run's feed alive while this client listens.
    _feed: std::sync::Arc<super::hub::Feed>,
    rx: tokio::sync::broadcast::Receiver<super::hub::Batch>,
    cursor: i64,
    done: bool,
    reread: bool,
    /// Whether the feed's start was awaited (before the first read).
    started: bool,
    /// When a quiet stream re-reads by itself (a missed wake-up, an ending the journal lacks).
    idle_at: Instant,
    queue: std::collections::VecDeque<SseEvent>,
}

impl Cursor {
    /// Queue the events past the cursor, in order.
    fn take(&mut self, items: &[EventView]) {
        for e in items {
            if e.seq > self.cursor {
                self.cursor = e.seq;
                self.queue.push_back(sse_event(e));
            }
        }
    }
}

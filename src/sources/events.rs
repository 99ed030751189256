//! Live source status for the KB page: Postgres `NOTIFY mnote_source` (fired by triggers on
//! `source` and `rag_doc`) → one relay task per process (`db::notify`, started with the
//! `AppState`) → a broadcast channel → one server-sent-event stream per open KB page. The
//! browser never polls.
//!
//! Every event is a whole snapshot: the KB's source ids in page order and each row's status
//! cell rendered by the same template as the page (`kbs/status_cell.html`), so the live view
//! cannot disagree with a reload. A snapshot is sent on every (re)connect, on every change,
//! and, when it differs from the last one sent, on a periodic re-read — which heals the
//! notifications lost while the database restarted. A database error never ends the stream;
//! only a user who lost access does.

use std::{convert::Infallible, sync::Arc, time::Duration};

use askama::Template;
use axum::{
    extract::{Path, State},
    response::sse::{Event, KeepAlive, Sse},
};
use futures_util::{Stream, StreamExt};
use serde::Serialize;
use tokio_stream::wrappers::BroadcastStream;
use tower_sessions::Session;
use uuid::Uuid;

use super::{Source, queries};
use crate::{
    auth::Auth,
    error::{AppError, AppResult},
    kbs::{self, Kb},
    state::AppState,
    web::{Lang, PageCtx},
};

/// How often an open stream re-reads the state (and re-checks that its user may still see
/// the KB: a removed member, a KB made private), besides on every change.
const RECHECK: Duration = Duration::from_secs(5);

/// One row's status cell, as the KB page renders it.
#[derive(Template)]
#[template(path = "kbs/status_cell.html")]
pub struct StatusCell<'a> {
    pub ctx: &'a PageCtx,
    pub kb: &'a Kb,
    pub s: &'a Source,
    pub stuck_after: Duration,
    /// The passages the source gave, when the reader may count them.
    pub passages: Option<i64>,
}

/// How long a source may wait or parse before the retry button is offered.
pub fn stuck_after(cfg: &crate::config::Config) -> Duration {
    cfg.parse_timeout + Duration::from_secs(60)
}

/// The `sources` event: ids in page order and each row's status cell.
#[derive(Serialize, PartialEq)]
pub struct Snapshot {
    pub ids: Vec<Uuid>,
    pub cells: Vec<String>,
    /// Removed sources (restorable), so the page knows when its "removed" list changed.
    pub removed: Vec<Uuid>,
}

/// The KB's state as the page shows it (under the user's RLS).
pub async fn snapshot(state: &AppState, auth: &Auth, ctx: &PageCtx, kb: Uuid) -> AppResult<Option<Snapshot>> {
    let mut tx = auth.tx(state).await?;
    // Access, with the user's role now: losing it ends the stream.
    let Some(m) = crate::auth::directory::member(&mut tx, auth.user_id).await? else { return Ok(None) };
    let now = Auth { role: m.role, ..auth.clone() };
    let kb = match kbs::readable(&mut tx, &now, kb).await {
        Ok(k) => k,
        Err(AppError::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    let items = queries::list(&mut tx, kb.id).await?;
    let removed = queries::removed(&mut tx, kb.id).await?;
    let counts = queries::block_counts(&mut tx, kb.id).await?;
    tx.commit().await?;
    let stuck = stuck_after(&state.config);
    let cells = items
        .iter()
        .map(|s| StatusCell { ctx, kb: &kb, s, stuck_after: stuck, passages: super::passages_of(&kb, &counts, s) }.render())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| AppError::Internal(e.into()))?;
    Ok(Some(Snapshot { ids: items.iter().map(|s| s.id).collect(), cells, removed: removed.iter().map(|s| s.id).collect() }))
}

fn event(s: &Snapshot) -> Event {
    Event::default().event("sources").data(serde_json::to_string(s).unwrap_or_default())
}

/// `GET /kbs/{id}/events`: `event: sources` with the whole status, now and on each change.
pub async fn kb_events(
    State(state): State<AppState>,
    auth: Auth,
    lang: Lang,
    session: Session,
    Path(kb): Path<Uuid>,
) -> AppResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let csrf = crate::auth::csrf::token(&session).await?;
    let ctx = Arc::new(PageCtx { lang, csrf, user: None, path: format!("/kbs/{kb}"), flash: None, flash_error: false });
    let first = snapshot(&state, &auth, &ctx, kb).await?.ok_or(AppError::NotFound)?;
    let first_event = event(&first);
    let key = format!("{}:{}", auth.tenant_id, kb);
    // `true`: a change of this KB (or missed notifications); `false`: the periodic re-read.
    let changes = BroadcastStream::new(state.source_events.subscribe())
        .filter(move |m| std::future::ready(matches!(m, Ok(k) if *k == key) || m.is_err()))
        .map(|_| true);
    let ticks =
        tokio_stream::wrappers::IntervalStream::new(tokio::time::interval_at(tokio::time::Instant::now() + RECHECK, RECHECK))
            .map(|_| false);
    let last = Arc::new(tokio::sync::Mutex::new(first));
    let updates = futures_util::stream::select(changes, ticks)
        .then(move |change| {
            let (state, auth, ctx, last) = (state.clone(), auth.clone(), ctx.clone(), last.clone());
            async move {
                match snapshot(&state, &auth, &ctx, kb).await {
                    // Access lost: the stream ends.
                    Ok(None) => None,
                    Ok(Some(snap)) => {
                        let mut last = last.lock().await;
                        if !change && *last == snap {
                            return Some(None);
                        }
                        let e = event(&snap);
                        *last = snap;
                        Some(Some(e))
                    }
                    // The database is away: keep the stream; the next re-read heals it.
                    Err(e) => {
                        tracing::debug!("kb events: {e}");
                        Some(None)
                    }
                }
            }
        })
        .take_while(|allowed| std::future::ready(allowed.is_some()))
        .filter_map(|e| std::future::ready(e.flatten()));
    let stream = futures_util::stream::once(std::future::ready(first_event)).chain(updates).map(Ok);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

//! Live source status for the KB page: Postgres `NOTIFY mnote_source` (fired by triggers on
//! `source` and `rag_doc`) → one relay task per process (`db::notify`, started with the
//! `AppState`) → a broadcast channel → one server-sent-event stream per open KB page. The
//! browser never polls.

use std::{convert::Infallible, time::Duration};

use axum::{
    extract::{Path, State},
    response::sse::{Event, KeepAlive, Sse},
};
use futures_util::{Stream, StreamExt};
use serde_json::json;
use tokio_stream::wrappers::BroadcastStream;
use uuid::Uuid;

use super::queries;
use crate::{auth::Auth, error::AppResult, kbs, state::AppState};

/// How often an open stream re-checks that its user may still see the KB (a removed member,
/// a KB made private), besides on every change.
const ACCESS_RECHECK: Duration = Duration::from_secs(15);

/// Whether `auth`'s user is still a member and may still see the KB (with their role now).
async fn still_allowed(state: &AppState, auth: &Auth, kb: Uuid) -> AppResult<bool> {
    let mut tx = auth.tx(state).await?;
    let Some(m) = crate::tenants::queries::member(&mut tx, auth.user_id).await? else { return Ok(false) };
    let now = Auth { role: m.role, ..auth.clone() };
    let visible = kbs::visible(&mut tx, &now, kb).await.is_ok();
    tx.commit().await?;
    Ok(visible)
}

async fn snapshot(state: &AppState, auth: &Auth, kb: Uuid) -> AppResult<Event> {
    let mut tx = auth.tx(state).await?;
    let items = queries::list(&mut tx, kb).await?;
    tx.commit().await?;
    let items: Vec<_> = items
        .iter()
        .map(|s| json!({"id": s.id, "status": s.status, "error": s.error_code.as_ref().map(|c| json!({"code": c, "message": s.error_message}))}))
        .collect();
    Ok(Event::default().event("sources").data(json!({ "items": items }).to_string()))
}

/// `GET /kbs/{id}/events`: `event: sources` with every source's status, now and on each change.
pub async fn kb_events(
    State(state): State<AppState>,
    auth: Auth,
    Path(kb): Path<Uuid>,
) -> AppResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    {
        let mut tx = auth.tx(&state).await?;
        kbs::visible(&mut tx, &auth, kb).await?;
        tx.commit().await?;
    }
    let first = snapshot(&state, &auth, kb).await?;
    let key = format!("{}:{}", auth.tenant_id, kb);
    // `Some(())`: a change of this KB (or missed notifications); `None`: the periodic check.
    let changes = BroadcastStream::new(state.source_events.subscribe())
        .filter(move |m| std::future::ready(matches!(m, Ok(k) if *k == key) || m.is_err()))
        .map(|_| Some(()));
    let ticks = tokio_stream::wrappers::IntervalStream::new(tokio::time::interval_at(
        tokio::time::Instant::now() + ACCESS_RECHECK,
        ACCESS_RECHECK,
    ))
    .map(|_| None);
    let updates = futures_util::stream::select(changes, ticks)
        .then(move |change| {
            let (state, auth) = (state.clone(), auth.clone());
            async move {
                // Access is checked again before anything is sent; losing it ends the stream.
                if !still_allowed(&state, &auth, kb).await.unwrap_or(false) {
                    return None;
                }
                Some(match change {
                    Some(()) => snapshot(&state, &auth, kb).await.ok(),
                    None => None,
                })
            }
        })
        .take_while(|allowed| std::future::ready(allowed.is_some()))
        .filter_map(|e| std::future::ready(e.flatten()));
    let stream = futures_util::stream::once(std::future::ready(first)).chain(updates).map(Ok);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

//! Live source status for the KB page: Postgres `NOTIFY mnote_source` (fired by triggers on
//! `source` and `rag_doc`) → one relay task per process (`db::notify`, started with the
//! `AppState`) → a broadcast channel → one server-sent-event stream per open KB page. The
//! browser never polls.

use std::convert::Infallible;

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
    let changes = BroadcastStream::new(state.source_events.subscribe())
        .filter(move |m| std::future::ready(matches!(m, Ok(k) if *k == key) || m.is_err()))
        .then(move |_| {
            let (state, auth) = (state.clone(), auth.clone());
            async move { snapshot(&state, &auth, kb).await.ok() }
        })
        .filter_map(std::future::ready);
    let stream = futures_util::stream::once(std::future::ready(first)).chain(changes).map(Ok);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

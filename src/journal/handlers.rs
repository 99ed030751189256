//! `/api/page-ai/runs/…` read side: read, events (JSON or SSE), cancel, a session's active run
//! and history. Creating a run is `runs` (`POST /api/page-ai/runs`).

use axum::{
    Json,
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    event::RunStatus,
    store::{self, CancelOutcome, RunView},
    stream,
};
use crate::{
    auth::Auth,
    error::{AppError, AppResult, Items},
    state::AppState,
};

async fn load(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<store::RunRow> {
    let mut tx = auth.tx(state).await?;
    let run = store::get(&mut tx, id).await?;
    tx.commit().await?;
    run.ok_or(AppError::NotFound)
}

/// `GET /api/page-ai/runs/{hostRunId}`
pub async fn get(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Json<store::RunView>> {
    Ok(Json(load(&state, &auth, id).await?.view()))
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventsQuery {
    #[serde(default)]
    pub after_seq: Option<i64>,
}

/// `GET /api/page-ai/runs/{hostRunId}/events?afterSeq=N`: JSON, or SSE with
/// `Accept: text/event-stream` (`Last-Event-ID` wins over `afterSeq`; `204 No Content` when the
/// run has ended and the cursor is at or past its ending event).
pub async fn events(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
    session: tower_sessions::Session,
) -> AppResult<Response> {
    let wants_sse = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"));
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<i64>().ok());
    let after = last_event_id.or(q.after_seq).unwrap_or(0).max(0);
    if wants_sse {
        // A reconnect after the run's ending event: 204 stops a standard EventSource client
        // (an empty 200 stream would have it reconnect every few seconds, forever).
        if stream::over_after(&state, &auth, id, after).await?.ok_or(AppError::NotFound)? {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let grant = match crate::auth::bearer_token(&headers) {
            Some(token) => stream::Grant::Token(crate::auth::tokens::hash(token)),
            None => stream::Grant::Session {
                epoch: session.get::<i32>(crate::auth::EPOCH).await.map_err(crate::auth::session_err)?.unwrap_or(0),
            },
        };
        let max = state.config.sse_max_per_user;
        let Some(slot) = state.run_hub.admit(auth.tenant_id, auth.user_id, max) else {
            return Err(AppError::limit(
                "too_many_streams",
                format!("you already have {max} run event streams open; close one first"),
            ));
        };
        return Ok(stream::sse(state, auth, grant, slot, id, after).into_response());
    }
    let page = stream::page(&state, &auth, id, after).await?.ok_or(AppError::NotFound)?;
    Ok(Json(page).into_response())
}

/// `POST /api/page-ai/runs/{hostRunId}/cancel` → the run (already `cancelled`, or about to be).
/// What a cancel request did, and the run as it is now.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Cancelled {
    /// `cancelled`, `requested` (the run's worker stops it) or `already_ended`.
    cancel: &'static str,
    run: RunView,
}

pub async fn cancel(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Json<Cancelled>> {
    let run = load(&state, &auth, id).await?;
    if run.actor_id != auth.user_id && !auth.role.is_admin() {
        return Err(AppError::NotFound);
    }
    let mut tx = auth.tx(&state).await?;
    let outcome = store::request_cancel(&mut tx, auth.tenant_id, id).await?;
    let run = store::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    let outcome = match outcome {
        CancelOutcome::Cancelled => "cancelled",
        CancelOutcome::Requested => "requested",
        CancelOutcome::AlreadyEnded => "already_ended",
    };
    Ok(Json(Cancelled { cancel: outcome, run: run.view() }))
}

/// `GET /api/page-ai/sessions/{sessionId}/active-run` → `mnote.ai_active_run.v1`.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveRun {
    schema: &'static str,
    session_id: String,
    run: Option<RunView>,
    resumable: bool,
}

pub async fn active_run(State(state): State<AppState>, auth: Auth, Path(session): Path<String>) -> AppResult<Json<ActiveRun>> {
    let mut tx = auth.tx(&state).await?;
    let run = store::active_run(&mut tx, auth.user_id, &session).await?;
    tx.commit().await?;
    let resumable = run.as_ref().is_some_and(|r| r.status == RunStatus::Interrupted);
    Ok(Json(ActiveRun { schema: "mnote.ai_active_run.v1", session_id: session, run: run.map(|r| r.view()), resumable }))
}

/// `GET /api/page-ai/sessions/{sessionId}/runs` → the session's runs, newest first.
pub async fn session_runs(
    State(state): State<AppState>,
    auth: Auth,
    Path(session): Path<String>,
) -> AppResult<Json<Items<RunView>>> {
    let mut tx = auth.tx(&state).await?;
    let runs = store::session_runs(&mut tx, auth.user_id, &session, 100).await?;
    tx.commit().await?;
    Ok(Json(runs.iter().map(|r| r.view()).collect::<Vec<_>>().into()))
}

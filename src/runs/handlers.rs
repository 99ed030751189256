//! `POST /api/page-ai/runs`: create a run (idempotent on `requestId`); the conversations
//! (list, one with its runs, rename, delete). The run's reads, events, cancel and sessions are
//! `journal::handlers`.

use axum::{
    Json,
    extract::{Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};

use super::{
    conversations as conv,
    service::{CreateRun, Started, start},
};
use crate::{
    auth::Auth,
    error::{ApiJson, AppError, AppResult},
    state::AppState,
};

/// `POST /api/page-ai/runs` → 201 with the new run, 200 with the run this request created
/// before, 409 when the request id is another user's.
pub async fn create(State(state): State<AppState>, auth: Auth, ApiJson(body): ApiJson<CreateRun>) -> AppResult<Response> {
    Ok(match start(&state, &auth, &body).await? {
        Started::New(run) => (StatusCode::CREATED, Json(run.view())).into_response(),
        Started::Again(run) => (StatusCode::OK, Json(run.view())).into_response(),
    })
}

/// A conversation id from the path: the API's client-id rule, else `not_found`.
fn conversation_id(id: &str) -> AppResult<&str> {
    let ok = !id.is_empty() && id.len() <= 200 && id.chars().all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c));
    if ok { Ok(id) } else { Err(AppError::NotFound) }
}

/// `GET /api/page-ai/conversations?q=&limit=`: the caller's conversations, most recently
/// active first; `q` searches titles and questions.
pub async fn conversations(
    State(state): State<AppState>,
    auth: Auth,
    Query(q): Query<conv::ListQuery>,
) -> AppResult<Json<conv::ConversationList>> {
    let text = q.q.unwrap_or_default();
    if text.chars().count() > 200 {
        return Err(AppError::invalid("q", "at most 200 characters"));
    }
    let mut tx = auth.tx(&state).await?;
    let rows = conv::list(&mut tx, auth.user_id, &text, q.limit.unwrap_or(50)).await?;
    tx.commit().await?;
    Ok(Json(conv::ConversationList { items: rows.iter().map(|r| r.view()).collect() }))
}

/// `GET /api/page-ai/conversations/{id}`: the conversation with its runs, oldest first.
pub async fn conversation(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
) -> AppResult<Json<conv::ConversationDetail>> {
    let id = conversation_id(&id)?;
    let mut tx = auth.tx(&state).await?;
    let row = conv::get(&mut tx, auth.user_id, id).await?.ok_or(AppError::NotFound)?;
    let runs = conv::runs(&mut tx, auth.user_id, id).await?;
    tx.commit().await?;
    Ok(Json(conv::ConversationDetail { conversation: row.view(), runs: runs.iter().map(|r| r.view()).collect() }))
}

/// `PATCH /api/page-ai/conversations/{id}` `{"title"}` → the conversation.
pub async fn rename_conversation(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<conv::Rename>,
) -> AppResult<Json<conv::ConversationView>> {
    let id = conversation_id(&id)?;
    let title = conv::checked_title(&body.title)?;
    let mut tx = auth.tx(&state).await?;
    let row = conv::rename(&mut tx, auth.user_id, id, &title).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(Json(row.view()))
}

/// `DELETE /api/page-ai/conversations/{id}` → 204: the conversation and its runs are deleted
/// (409 `conflict` while one of its runs is waiting or running).
pub async fn delete_conversation(State(state): State<AppState>, auth: Auth, Path(id): Path<String>) -> AppResult<StatusCode> {
    let id = conversation_id(&id)?;
    let mut tx = auth.tx(&state).await?;
    conv::delete(&mut tx, auth.user_id, id).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

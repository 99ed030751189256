//! Conversations on `/ai`: the list of the caller's conversations (search, rename, delete with
//! a confirmation), the earlier turns of the one shown, and retry/regenerate as plain forms.

use axum::{
    Form,
    extract::{Path, State},
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use tower_sessions::Session;
use uuid::Uuid;

use super::{CreateRun, RunDetail, back_with, run_detail, service, valid_client_id};
use crate::{
    auth::Auth,
    error::{AppError, AppResult},
    journal::store::{self, RunRow},
    runs::conversations as conv,
    state::AppState,
    web::{
        Page, PageCtx,
        confirm::{ConfirmForm, ConfirmPage},
        flash, render,
    },
};

/// One conversation in the list.
pub struct ConversationItem {
    pub id: String,
    pub title: String,
    pub when: String,
    /// "3 turns"
    pub turns: String,
    pub current: bool,
    /// The delete dialog's text.
    pub confirm: String,
}

/// The caller's conversations for the list (`q` searches titles and questions).
pub async fn items(
    ctx: &PageCtx,
    conn: &mut crate::db::TenantTx,
    auth: &Auth,
    q: &str,
    current: Option<&str>,
) -> AppResult<Vec<ConversationItem>> {
    let rows = conv::list(conn, auth.user_id, q, 100).await?;
    Ok(rows
        .into_iter()
        .map(|r| ConversationItem {
            turns: if r.run_count == 1 {
                ctx.t("conversations.turns_one")
            } else {
                ctx.t("conversations.turns").replace("{n}", &r.run_count.to_string())
            },
            when: r.updated_at.format("%m-%d %H:%M").to_string(),
            current: Some(r.id.as_str()) == current,
            confirm: ctx.t("conversations.delete_message").replace("{title}", &r.title),
            id: r.id,
            title: r.title,
        })
        .collect())
}

/// The conversation's runs around the shown one: those before it and those after it, each
/// rendered from its row (question, status, answer with its checked citations).
pub fn around(ctx: &PageCtx, runs: &[RunRow], shown: Option<Uuid>) -> (Vec<RunDetail>, Vec<RunDetail>) {
    let at = shown.and_then(|id| runs.iter().position(|r| r.id == id));
    let (before, after) = match at {
        Some(i) => (&runs[..i], &runs[i + 1..]),
        None => (runs, &runs[..0]),
    };
    let detail = |r: &RunRow| run_detail(ctx, r, &[]);
    (before.iter().map(detail).collect(), after.iter().map(detail).collect())
}

/// The title of the shown conversation, if it has one yet.
pub async fn title(conn: &mut crate::db::TenantTx, auth: &Auth, id: &str) -> AppResult<Option<String>> {
    Ok(conv::get(conn, auth.user_id, id).await?.map(|c| c.title))
}

async fn own_run(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<RunRow> {
    let mut tx = auth.tx(state).await?;
    let run = store::get(&mut tx, id).await?.filter(|r| r.actor_id == auth.user_id);
    tx.commit().await?;
    run.ok_or(AppError::NotFound)
}

#[derive(Debug, Deserialize)]
pub struct RetryForm {
    request_id: String,
}

/// `POST /ai/runs/{id}/retry`: the same question again, in the same conversation (retry after
/// a cancel or failure, regenerate after an answer) → the new run.
pub async fn retry_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(id): Path<Uuid>,
    Form(f): Form<RetryForm>,
) -> AppResult<Response> {
    let run = own_run(&state, &page.auth, id).await?;
    let back = format!("/ai/runs/{id}");
    if run.status.is_live() {
        return back_with(&session, back, AppError::Conflict(page.ctx.t("conversations.still_running"))).await;
    }
    let body = CreateRun {
        request_id: f.request_id,
        session_id: run.session_id.clone(),
        agent_id: run.agent_id.to_string(),
        prompt: run.prompt.clone(),
        context_refs: run.context(),
        parent_run_id: None,
        resume_request_id: None,
    };
    match service::start(&state, &page.auth, &body).await {
        Ok(started) => Ok(Redirect::to(&format!("/ai/runs/{}", started.run().id)).into_response()),
        Err(e) => back_with(&session, back, e).await,
    }
}

#[derive(Debug, Deserialize)]
pub struct RenameForm {
    title: String,
}

fn checked_id(id: &str) -> AppResult<&str> {
    if valid_client_id(id) { Ok(id) } else { Err(AppError::NotFound) }
}

/// `POST /ai/conversations/{id}/rename`
pub async fn rename_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(id): Path<String>,
    Form(f): Form<RenameForm>,
) -> AppResult<Response> {
    let id = checked_id(&id)?;
    let back = format!("/ai?session={id}");
    let title = match conv::checked_title(&f.title) {
        Ok(t) => t,
        Err(e) => return back_with(&session, back, e).await,
    };
    let mut tx = page.auth.tx(&state).await?;
    conv::rename(&mut tx, page.auth.user_id, id, &title).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    flash(&session, page.ctx.t("conversations.renamed")).await?;
    Ok(Redirect::to(&back).into_response())
}

/// `POST /ai/conversations/{id}/delete`: with `confirm=yes` (the dialog, or the confirmation
/// page) the conversation and its runs are deleted; without it, the confirmation page.
pub async fn delete_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(id): Path<String>,
    Form(f): Form<ConfirmForm>,
) -> AppResult<Response> {
    let id = checked_id(&id)?;
    let mut tx = page.auth.tx(&state).await?;
    if !f.confirmed() {
        let c = conv::get(&mut tx, page.auth.user_id, id).await?.ok_or(AppError::NotFound)?;
        tx.commit().await?;
        return render(ConfirmPage {
            title: page.ctx.t("conversations.delete_title"),
            lines: vec![page.ctx.t("conversations.delete_message").replace("{title}", &c.title)],
            action: format!("/ai/conversations/{id}/delete"),
            ok_label: page.ctx.t("conversations.delete"),
            cancel_url: format!("/ai?session={id}"),
            ctx: page.ctx,
        });
    }
    match conv::delete(&mut tx, page.auth.user_id, id).await {
        Ok(()) => {
            tx.commit().await?;
            flash(&session, page.ctx.t("conversations.deleted")).await?;
            Ok(Redirect::to("/ai").into_response())
        }
        Err(AppError::Conflict(_)) => {
            let e = AppError::Conflict(page.ctx.t("conversations.still_running"));
            back_with(&session, format!("/ai?session={id}"), e).await
        }
        Err(e) => Err(e),
    }
}

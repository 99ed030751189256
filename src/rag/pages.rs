//! Browser pages: a KB's knowledge-RAG page (binding, test, unbind, sync state per source,
//! live), and the former Ask page's addresses, which lead to the assistant (`/ai`).

use askama::Template;
use axum::{
    Form, Json,
    extract::{Path, Query, State},
    response::{Redirect, Response},
};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;
use uuid::Uuid;

use super::{
    binding::{self, BindingView},
    handlers::{self, BindBody},
    held::Drift,
    status::{self, Item},
};
use crate::{
    error::{AppError, AppResult},
    state::AppState,
    web::{Page, PageCtx, flash, flash_error, render},
};

#[derive(Template)]
#[template(path = "rag/kb.html")]
struct KbRagPage {
    ctx: PageCtx,
    kb: crate::kbs::Kb,
    binding: Option<BindingView>,
    items: Vec<ItemRow>,
    /// What LightRAG holds against what we sent, in words (`lost` says it lost documents).
    drift: Option<DriftLine>,
    allowed: Vec<String>,
}

#[derive(Serialize)]
pub struct DriftLine {
    lost: bool,
    text: String,
}

fn drift_line(ctx: &PageCtx, d: Option<&Drift>) -> DriftLine {
    match d {
        Some(d) if d.missing > 0 => {
            DriftLine { lost: true, text: ctx.t("rag.drift.lost").replace("{n}", &ctx.count(d.missing, "document")) }
        }
        Some(d) => DriftLine { lost: false, text: ctx.t("rag.drift.ok").replace("{n}", &d.held.to_string()) },
        None => DriftLine { lost: false, text: ctx.t("rag.drift.unchecked") },
    }
}

/// A status item with its diagnostics in words.
struct ItemRow {
    item: Item,
    state: String,
    notes: Vec<String>,
}

fn item_row(ctx: &PageCtx, item: Item) -> ItemRow {
    let state = match &item.lightrag_status {
        Some(s) => ctx.tk("rag.state", s),
        None => ctx.t("rag.state.not_sent"),
    };
    let mut notes = Vec::new();
    if item.lightrag_status.as_deref() == Some("processed") && item.ocr_text_exposed == Some(false) {
        notes.push(ctx.t("rag.diag.ocr_not_exposed"));
    }
    if item.ocr_text_exposed == Some(true) {
        notes.push(ctx.t("rag.diag.ocr_exposed"));
    }
    if item.lost {
        notes.push(ctx.t("rag.diag.lost"));
    }
    if !item.locator_available {
        notes.push(ctx.t("rag.diag.no_locator"));
    }
    match &item.error {
        Some(e) if e.code == super::sync::DUPLICATE => notes.push(ctx.t("rag.diag.duplicate")),
        Some(e) => notes.push(format!("{} ({})", e.message, e.code)),
        None => {}
    }
    ItemRow { item, state, notes }
}

/// A visible KB, its live binding, the sync state of its sources (rows in words) and the
/// drift from what LightRAG holds (the cached listing; asked after the transaction).
async fn kb_state(
    state: &AppState,
    page: &Page,
    id: Uuid,
) -> AppResult<(crate::kbs::Kb, Option<BindingView>, Vec<ItemRow>, Option<DriftLine>)> {
    let mut tx = page.auth.tx(state).await?;
    let kb = crate::kbs::readable(&mut tx, &page.auth, id).await?;
    let b = binding::active(&mut tx, id).await?;
    let mut items = match &b {
        Some(b) => status::items(&mut tx, b).await?,
        None => Vec::new(),
    };
    tx.commit().await?;
    let drift = match &b {
        Some(b) => Some(drift_line(&page.ctx, status::drift(&state.config.rag, b, &mut items).await.as_ref())),
        None => None,
    };
    let rows = items.into_iter().map(|i| item_row(&page.ctx, i)).collect();
    Ok((kb, b.map(|b| b.view()), rows, drift))
}

pub async fn kb_rag_page(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Response> {
    let (kb, binding, items, drift) = kb_state(&state, &page, id).await?;
    let allowed = if kb.can_manage { state.config.rag.allowed_urls.clone() } else { Vec::new() };
    render(KbRagPage { ctx: page.ctx, kb, binding, items, drift, allowed })
}

/// One row of the sync table as the page's live refresh reads it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusRow {
    source_id: Uuid,
    state: String,
    status: Option<String>,
    notes: Vec<String>,
}

/// The sync table's rows and the drift line.
#[derive(Serialize)]
pub struct StatusView {
    items: Vec<StatusRow>,
    drift: Option<DriftLine>,
}

/// The rows of the sync table and the drift line, for the page's live refresh.
pub async fn status_json(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Json<StatusView>> {
    let (_, _, items, drift) = kb_state(&state, &page, id).await?;
    let items = items
        .into_iter()
        .map(|r| StatusRow { source_id: r.item.source_id, state: r.state, status: r.item.lightrag_status, notes: r.notes })
        .collect();
    Ok(Json(StatusView { items, drift }))
}

#[derive(Deserialize)]
pub struct BindForm {
    url: String,
    #[serde(default)]
    api_key: String,
    #[serde(default)]
    label: String,
}

/// A form error is shown on the page it came from, not as an error page.
async fn back(session: &Session, id: Uuid, result: AppResult<String>) -> AppResult<Redirect> {
    match result {
        Ok(m) => flash(session, m).await?,
        Err(e @ (AppError::Invalid { .. } | AppError::Upstream(_))) => flash_error(session, e.to_string()).await?,
        Err(e) => return Err(e),
    }
    Ok(Redirect::to(&format!("/kbs/{id}/knowledge-rag")))
}

fn check_words(ctx: &PageCtx, v: &BindingView) -> String {
    match (&v.reachable, &v.error) {
        (Some(true), _) => format!("{} {}", ctx.t("rag.reachable"), v.version.clone().unwrap_or_default()),
        (_, Some(e)) => format!("{}{}{} ({})", ctx.t("rag.unreachable"), ctx.colon(), e.message, e.code),
        _ => ctx.t("rag.unreachable"),
    }
}

pub async fn bind_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: crate::auth::ClientIp,
    Path(id): Path<Uuid>,
    Form(f): Form<BindForm>,
) -> AppResult<Redirect> {
    let body = BindBody { url: f.url, api_key: Some(f.api_key), label: Some(f.label) };
    let r = handlers::bind(&state, &page.auth, &ip, id, body)
        .await
        .map(|v| format!("{} · {}", page.ctx.t("rag.saved"), check_words(&page.ctx, &v)));
    back(&session, id, r).await
}

pub async fn test_form(State(state): State<AppState>, session: Session, page: Page, Path(id): Path<Uuid>) -> AppResult<Redirect> {
    let v = handlers::test_kb(&state, &page.auth, id).await?;
    back(&session, id, Ok(check_words(&page.ctx, &v))).await
}

pub async fn unbind_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: crate::auth::ClientIp,
    Path(id): Path<Uuid>,
) -> AppResult<Redirect> {
    handlers::unbind(&state, &page.auth, &ip, id).await?;
    back(&session, id, Ok(page.ctx.t("rag.unbound"))).await
}

#[derive(Deserialize, Default)]
pub struct AskQuery {
    #[serde(default)]
    q: String,
}

/// `/ask` and `/kbs/{id}/ask` (the former LightRAG Ask page) are the assistant now: `303` to
/// `/ai` with the KB and the question kept (`ask`, filled into the question box; `q` there
/// searches the conversations). A KB, or all of the caller's KBs, bound to no LightRAG server
/// get a notice saying the assistant answers from the documents' passages, and how to connect
/// one (or to ask an admin).
async fn ask(state: &AppState, session: &Session, page: Page, kb: Option<Uuid>, q: AskQuery) -> AppResult<Redirect> {
    let mut tx = page.auth.tx(state).await?;
    let (kbs, can_manage) = match kb {
        Some(id) => {
            let k = crate::kbs::readable(&mut tx, &page.auth, id).await?;
            (vec![id], k.can_manage)
        }
        None => {
            let all = crate::kbs::queries::list_readable(&mut tx, page.auth.user_id, page.auth.role.is_admin()).await?;
            (all.into_iter().map(|k| k.id).collect(), page.auth.role.is_admin())
        }
    };
    let bound = !binding::active_for(&mut tx, &kbs).await?.is_empty();
    tx.commit().await?;
    if !bound && !kbs.is_empty() {
        let key = match (kb.is_some(), can_manage) {
            (true, true) => "assistant.unbound_admin",
            (true, false) => "assistant.unbound_member",
            (false, true) => "assistant.unbound_all_admin",
            (false, false) => "assistant.unbound_all_member",
        };
        flash(session, page.ctx.t(key)).await?;
    }
    Ok(Redirect::to(&ai_url(kb, &q.q)))
}

/// `/ai` with the KB ticked and the question to fill in.
fn ai_url(kb: Option<Uuid>, q: &str) -> String {
    let mut params: Vec<(&str, String)> = Vec::new();
    if let Some(k) = kb {
        params.push(("kb", k.to_string()));
    }
    let q: String = q.trim().chars().take(4000).collect();
    if !q.is_empty() {
        params.push(("ask", q));
    }
    let query = serde_urlencoded::to_string(&params).unwrap_or_default();
    if query.is_empty() { "/ai".into() } else { format!("/ai?{query}") }
}

pub async fn ask_page(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Query(q): Query<AskQuery>,
) -> AppResult<Redirect> {
    ask(&state, &session, page, None, q).await
}

pub async fn ask_kb_page(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(id): Path<Uuid>,
    Query(q): Query<AskQuery>,
) -> AppResult<Redirect> {
    ask(&state, &session, page, Some(id), q).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assistant_url_keeps_the_kb_and_the_question() {
        let kb = Uuid::from_u128(7);
        assert_eq!(ai_url(Some(kb), " Who leads & why? "), format!("/ai?kb={kb}&ask=Who+leads+%26+why%3F"));
        assert_eq!(ai_url(None, ""), "/ai");
        assert_eq!(ai_url(None, "线程"), "/ai?ask=%E7%BA%BF%E7%A8%8B");
    }
}

//! Browser pages: a KB's knowledge-RAG page (binding, test, unbind, sync state per source,
//! live) and the Ask page (per KB, and across the user's KBs).

use askama::Template;
use axum::{
    Form, Json,
    extract::{Path, Query, State},
    response::{Redirect, Response},
};
use serde::Deserialize;
use tower_sessions::Session;
use uuid::Uuid;

use super::{
    binding::{self, BindingView},
    client::QueryMode,
    handlers::{self, BindBody},
    held::Drift,
    query::{self, AnswerPart, QueryInput, QueryResult, QuoteSource, answer_parts},
    status::{self, Item},
};
use crate::{
    error::{AppError, AppResult},
    state::AppState,
    web::{Page, PageCtx, flash, render},
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

struct DriftLine {
    lost: bool,
    text: String,
}

fn drift_line(ctx: &PageCtx, d: Option<&Drift>) -> DriftLine {
    match d {
        Some(d) if d.missing > 0 => {
            DriftLine { lost: true, text: ctx.t("rag.drift.lost").replace("{n}", &d.missing.to_string()) }
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
    let kb = crate::kbs::visible(&mut tx, &page.auth, id).await?;
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

/// The rows of the sync table and the drift line, for the page's live refresh.
pub async fn status_json(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Json<serde_json::Value>> {
    let (_, _, items, drift) = kb_state(&state, &page, id).await?;
    let rows: Vec<serde_json::Value> = items
        .into_iter()
        .map(|r| serde_json::json!({ "sourceId": r.item.source_id, "state": r.state, "status": r.item.lightrag_status, "notes": r.notes }))
        .collect();
    let drift = drift.map(|d| serde_json::json!({ "lost": d.lost, "text": d.text }));
    Ok(Json(serde_json::json!({ "items": rows, "drift": drift })))
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
    let msg = match result {
        Ok(m) => m,
        Err(e @ (AppError::Invalid { .. } | AppError::Upstream(_))) => e.to_string(),
        Err(e) => return Err(e),
    };
    flash(session, msg).await?;
    Ok(Redirect::to(&format!("/kbs/{id}/knowledge-rag")))
}

fn check_words(ctx: &PageCtx, v: &BindingView) -> String {
    match (&v.reachable, &v.error) {
        (Some(true), _) => format!("{} {}", ctx.t("rag.reachable"), v.version.clone().unwrap_or_default()),
        (_, Some(e)) => format!("{}: {} ({})", ctx.t("rag.unreachable"), e.message, e.code),
        _ => ctx.t("rag.unreachable"),
    }
}

pub async fn bind_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(id): Path<Uuid>,
    Form(f): Form<BindForm>,
) -> AppResult<Redirect> {
    let body = BindBody { url: f.url, api_key: Some(f.api_key), label: Some(f.label) };
    let r = handlers::bind(&state, &page.auth, id, body)
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
    Path(id): Path<Uuid>,
) -> AppResult<Redirect> {
    handlers::unbind(&state, &page.auth, id).await?;
    back(&session, id, Ok(page.ctx.t("rag.unbound"))).await
}

#[derive(Deserialize, Default)]
pub struct AskQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    mode: String,
}

#[derive(Template)]
#[template(path = "rag/ask.html")]
struct AskPage {
    ctx: PageCtx,
    kb: Option<crate::kbs::Kb>,
    action: String,
    q: String,
    modes: Vec<(String, bool)>,
    error: Option<String>,
    result: Option<AskView>,
}

struct AskView {
    degraded: Option<String>,
    /// The answer as text runs; `Some(n, url)` for a `[n]` citation marker.
    answer: Vec<(String, Option<(String, String)>)>,
    refs: Vec<RefView>,
    dropped: usize,
}

struct RefView {
    n: String,
    title: String,
    place: String,
    url: String,
    quote: String,
    notes: Vec<String>,
}

fn view_of(ctx: &PageCtx, r: QueryResult) -> AskView {
    let url_of = |n: &str| r.references.iter().find(|x| x.reference_id == n).map(|x| x.citation_url.clone());
    let text = r.answer.clone().unwrap_or_default();
    let answer = answer_parts(&text)
        .into_iter()
        .map(|p| match p {
            AnswerPart::Marker(n) if url_of(n).is_some() => (String::new(), Some((n.to_string(), url_of(n).unwrap_or_default()))),
            AnswerPart::Marker(n) => (format!("[{n}]"), None),
            AnswerPart::Text(t) => (t.to_string(), None),
        })
        .collect();
    let refs = r
        .references
        .iter()
        .map(|x| {
            let mut notes = Vec::new();
            if x.locator_degraded {
                notes.push(ctx.t("rag.diag.approximate"));
            }
            match x.quote_source {
                QuoteSource::Evidence => notes.push(ctx.t("rag.diag.quote_from_evidence")),
                QuoteSource::Missing => notes.push(ctx.t("rag.diag.quote_missing")),
                QuoteSource::Placeholder => notes.push(ctx.t("rag.diag.placeholder")),
                QuoteSource::Chunk => {}
            }
            if x.content_diagnostics.ocr_text_exposed == Some(false) {
                notes.push(ctx.t("rag.diag.ocr_not_exposed"));
            }
            if x.block_count > 1 {
                notes.push(ctx.t("rag.diag.spans").replace("{n}", &x.block_count.to_string()));
            }
            RefView {
                n: x.reference_id.clone(),
                title: crate::search::open::source_title(&x.source_path),
                place: x.locator.place().citation_label().unwrap_or_default(),
                url: x.citation_url.clone(),
                quote: x.quote.clone(),
                notes,
            }
        })
        .collect();
    let degraded = r.degraded.then(|| {
        let e = r.errors.first().map(|e| format!("{} ({})", e.error.message, e.error.code)).unwrap_or_default();
        format!("{} {e}", ctx.t("rag.degraded"))
    });
    AskView { degraded, answer, refs, dropped: r.dropped_references }
}

async fn ask(state: &AppState, page: Page, kb: Option<Uuid>, q: AskQuery) -> AppResult<Response> {
    let kb_row = match kb {
        Some(id) => {
            let mut tx = page.auth.tx(state).await?;
            let k = crate::kbs::visible(&mut tx, &page.auth, id).await?;
            tx.commit().await?;
            Some(k)
        }
        None => None,
    };
    let mode = handlers::parse_mode(Some(&q.mode)).unwrap_or(QueryMode::Mix);
    let modes = QueryMode::ALL.iter().map(|m| (m.as_str().to_string(), *m == mode)).collect();
    let (mut error, mut result) = (None, None);
    if !q.q.trim().is_empty() {
        let input = QueryInput { kb_ids: kb.into_iter().collect(), query: q.q.clone(), mode, top_k: None, answer: true };
        match query::run(state, &page.auth, input).await {
            Ok(r) => result = Some(view_of(&page.ctx, r)),
            Err(e @ AppError::Invalid { .. }) => error = Some(e.to_string()),
            Err(e) => return Err(e),
        }
    }
    let action = kb.map(|k| format!("/kbs/{k}/ask")).unwrap_or_else(|| "/ask".into());
    render(AskPage { ctx: page.ctx, kb: kb_row, action, q: q.q, modes, error, result })
}

pub async fn ask_page(State(state): State<AppState>, page: Page, Query(q): Query<AskQuery>) -> AppResult<Response> {
    ask(&state, page, None, q).await
}

pub async fn ask_kb_page(
    State(state): State<AppState>,
    page: Page,
    Path(id): Path<Uuid>,
    Query(q): Query<AskQuery>,
) -> AppResult<Response> {
    ask(&state, page, Some(id), q).await
}

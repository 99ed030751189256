//! The knowledge-RAG API: binding (`/api/kbs/{id}/knowledge-rag`), status, query and
//! open-reference. Thin: validation and access here, the work in the sibling modules.

use axum::{
    Json,
    extract::{Path, Query, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    binding::{self, BindingView},
    client::QueryMode,
    query::{self, QueryInput, QueryResult, Reference},
    status::{self, KbStatus},
};
use crate::{
    audit::Action,
    auth::{Auth, ClientIp},
    error::{ApiJson, AppError, AppResult},
    evidence::KbScope,
    search::handlers::{DocumentHit, DocumentSearchResponse, DocumentsQuery},
    state::AppState,
};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BindBody {
    pub url: String,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub label: Option<String>,
}

/// Bind (or re-bind) a KB the caller manages, then contact the endpoint once.
pub async fn bind(state: &AppState, auth: &Auth, ip: &ClientIp, kb: Uuid, body: BindBody) -> AppResult<BindingView> {
    let cfg = &state.config.rag;
    // Access first: who may not manage the KB learns nothing about the allow-list.
    let mut tx = auth.tx(state).await?;
    crate::kbs::managed(&mut tx, auth, kb).await?;
    let url = binding::allowed_url(cfg, &body.url)?;
    let label = body.label.as_deref().map(str::trim).filter(|l| !l.is_empty());
    if label.is_some_and(|l| l.chars().count() > 100 || l.chars().any(char::is_control)) {
        return Err(AppError::invalid("label", "at most 100 characters"));
    }
    let key = body.api_key.as_deref().map(str::trim).filter(|k| !k.is_empty());
    if key.is_some_and(|k| k.len() > 4096 || k.chars().any(char::is_control)) {
        return Err(AppError::invalid("apiKey", "a printable key of at most 4096 characters"));
    }
    let cipher = key.map(|k| binding::seal_key(cfg, kb, k)).transpose()?;
    let keyed = if cipher.is_some() { "with key" } else { "no key" };
    let b = binding::put(&mut tx, auth.tenant_id, kb, &url, label, cipher, auth.user_id).await?;
    auth.audit(&mut tx, ip, Action::RagBind, format!("kb:{kb}"), format!("{url} ({keyed})")).await?;
    tx.commit().await?;
    test(state, auth, b).await
}

async fn test(state: &AppState, auth: &Auth, b: binding::Binding) -> AppResult<BindingView> {
    let outcome = super::check(&state.config.rag, &b).await;
    let mut tx = auth.tx(state).await?;
    binding::record_check(&mut tx, b.id, outcome.as_ref().map(|v| v.as_deref())).await?;
    let b = binding::active(&mut tx, b.kb_id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(b.view())
}

pub async fn put_binding(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path(kb): Path<Uuid>,
    ApiJson(body): ApiJson<BindBody>,
) -> AppResult<Json<BindingView>> {
    Ok(Json(bind(&state, &auth, &ip, kb, body).await?))
}

pub async fn get_binding(State(state): State<AppState>, auth: Auth, Path(kb): Path<Uuid>) -> AppResult<Json<BindingView>> {
    let mut tx = auth.tx(&state).await?;
    crate::kbs::readable(&mut tx, &auth, kb).await?;
    let b = binding::active(&mut tx, kb).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(Json(b.view()))
}

/// "Test connection": `/health` and the key, now.
/// Test a managed KB's endpoint now (API and page).
pub async fn test_kb(state: &AppState, auth: &Auth, kb: Uuid) -> AppResult<BindingView> {
    let mut tx = auth.tx(state).await?;
    crate::kbs::managed(&mut tx, auth, kb).await?;
    let b = binding::active(&mut tx, kb).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    test(state, auth, b).await
}

pub async fn test_binding(State(state): State<AppState>, auth: Auth, Path(kb): Path<Uuid>) -> AppResult<Json<BindingView>> {
    Ok(Json(test_kb(&state, &auth, kb).await?))
}

pub async fn unbind(state: &AppState, auth: &Auth, ip: &ClientIp, kb: Uuid) -> AppResult<()> {
    let mut tx = auth.tx(state).await?;
    crate::kbs::managed(&mut tx, auth, kb).await?;
    if !binding::retire(&mut tx, kb).await? {
        return Err(AppError::NotFound);
    }
    auth.audit(&mut tx, ip, Action::RagUnbind, format!("kb:{kb}"), "").await?;
    tx.commit().await?;
    Ok(())
}

pub async fn delete_binding(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path(kb): Path<Uuid>,
) -> AppResult<StatusCode> {
    unbind(&state, &auth, &ip, kb).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusQuery {
    kb_id: Option<Uuid>,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct StatusResponse {
    schema: &'static str,
    items: Vec<KbStatus>,
}

pub async fn status(State(state): State<AppState>, auth: Auth, Query(q): Query<StatusQuery>) -> AppResult<Json<StatusResponse>> {
    let mut tx = auth.tx(&state).await?;
    let bindings = match q.kb_id {
        Some(kb) => {
            crate::kbs::readable(&mut tx, &auth, kb).await?;
            binding::active(&mut tx, kb).await?.into_iter().collect()
        }
        None => {
            let kbs: Vec<Uuid> = crate::kbs::queries::list_readable(&mut tx, auth.user_id, auth.role.is_admin())
                .await?
                .into_iter()
                .map(|k| k.id)
                .collect();
            binding::active_for(&mut tx, &kbs).await?
        }
    };
    let items = status::of(&mut tx, &state.config.rag, &bindings).await?;
    tx.commit().await?;
    Ok(Json(StatusResponse { schema: status::SCHEMA, items }))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueryBody {
    #[serde(default)]
    kb_ids: Vec<Uuid>,
    #[schemars(length(min = 2), regex(pattern = r"\S"))]
    query: String,
    #[serde(default)]
    #[schemars(with = "Option<QueryMode>")]
    mode: Option<String>,
    #[serde(default)]
    #[schemars(range(min = 1, max = 200))]
    top_k: Option<u32>,
    #[serde(default)]
    answer: bool,
}

pub fn parse_mode(m: Option<&str>) -> AppResult<QueryMode> {
    match m.map(str::trim).filter(|m| !m.is_empty()) {
        None => Ok(QueryMode::Mix),
        Some(m) => m.parse().map_err(|_| AppError::invalid("mode", "mix, hybrid, local, global or naive")),
    }
}

pub async fn query(State(state): State<AppState>, auth: Auth, ApiJson(b): ApiJson<QueryBody>) -> AppResult<Json<QueryResult>> {
    let mode = parse_mode(b.mode.as_deref())?;
    if b.top_k.is_some_and(|k| !(1..=200).contains(&k)) {
        return Err(AppError::invalid("topK", "1 to 200"));
    }
    let input = QueryInput { kb_ids: b.kb_ids, query: b.query, mode, top_k: b.top_k, answer: b.answer };
    Ok(Json(query::run(&state, &auth, input).await?))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenBody {
    file_path: String,
    #[serde(default)]
    #[allow(dead_code)] // accepted for clients that have it; chunk texts are matched instead
    chunk_id: Option<String>,
    #[serde(default)]
    quote: Option<String>,
}

pub async fn open_reference(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(b): ApiJson<OpenBody>,
) -> AppResult<Json<Reference>> {
    if b.file_path.trim().is_empty() || b.file_path.len() > 1024 {
        return Err(AppError::invalid("filePath", "LightRAG's file_path of a reference"));
    }
    Ok(Json(query::open_reference(&state, &auth, &KbScope::Readable, &b.file_path, b.quote.as_deref()).await?))
}

/// A hit of `GET /api/search/documents`: an ordinary one, or text LightRAG holds (OCR) with
/// what is known of its content.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentResult {
    #[serde(flatten)]
    pub hit: DocumentHit,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_diagnostics: Option<query::ContentDiagnostics>,
}

/// `GET /api/search/documents`: the ordinary document search (`search`), plus, with
/// `includeOcr=true` and fewer ordinary results than `limit`, OCR text LightRAG holds for the
/// caller's bound KBs (`matchSource: knowledge_rag_ocr`). LightRAG down: the ordinary results
/// with `degraded: true, degradedReason: "knowledge_rag_unavailable"` (or its timeout code).
pub async fn documents(
    State(state): State<AppState>,
    auth: Auth,
    Query(p): Query<DocumentsQuery>,
) -> AppResult<Json<DocumentSearchResponse<DocumentResult>>> {
    let (body, limit) = crate::search::handlers::document_search(&state, &auth, &p).await?;
    let mut body = body.map_results(|hit| DocumentResult { hit, content_diagnostics: None });
    if !p.include_ocr.unwrap_or(false) {
        return Ok(Json(body));
    }
    let (mut degraded, mut reason) = (false, None);
    if body.results.len() < limit
        && let Some(r) = query::ocr_hits(&state, &auth, &p.q).await?
    {
        degraded = r.degraded;
        reason = r.degraded_reason;
        for x in r.references {
            if body.results.len() >= limit || body.results.iter().any(|d| d.hit.source_id == x.source_id) {
                continue;
            }
            body.results.push(DocumentResult {
                hit: DocumentHit {
                    source_id: x.source_id,
                    title: crate::search::open::source_title(&x.source_path),
                    path: x.source_path.clone(),
                    resource_path: x.source_path,
                    resource_kind: x.locator.resource_kind,
                    kb_id: x.kb_id,
                    score: None,
                    match_source: "knowledge_rag_ocr",
                    match_count: 1,
                    snippet: x.quote,
                    highlights: Vec::new(),
                    best_evidence_id: x.evidence_id,
                    open_action: x.open_action,
                    citation_markdown: x.citation_markdown,
                },
                content_diagnostics: Some(x.content_diagnostics),
            });
        }
    }
    body.degraded = Some(degraded);
    body.degraded_reason = Some(reason.map(str::to_string));
    Ok(Json(body))
}

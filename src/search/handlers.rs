//! HTTP handlers of the evidence tools. Thin: parse, open the caller's transaction, call the
//! search core, answer JSON.

use axum::{Json, extract::State};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    open::{self, ToolError},
    query::{self, SearchError},
};
use crate::{
    auth::Auth,
    error::{ApiJson, AppError, AppResult},
    evidence::{
        KbScope, SourceKind,
        tools::{
            Mode, OpenAction, OpenRequest, OpenResponse, ReadRequest, ReadResponse, SearchHit, SearchRequest, SearchResponse,
        },
    },
    state::AppState,
};

impl From<SearchError> for AppError {
    fn from(e: SearchError) -> Self {
        match e {
            SearchError::Invalid(m) => AppError::invalid("query", m),
            SearchError::Db(e) | SearchError::VectorBackend(e) => AppError::Sqlx(e),
        }
    }
}

impl From<ToolError> for AppError {
    fn from(e: ToolError) -> Self {
        match e {
            ToolError::Invalid(m) => AppError::invalid("locator", m),
            ToolError::NotFound => AppError::NotFound,
            ToolError::Db(e) => AppError::Sqlx(e),
        }
    }
}

/// `POST /api/evidence/search`
pub async fn search(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(req): ApiJson<SearchRequest>,
) -> AppResult<Json<SearchResponse>> {
    let resp = query::search_retrying(|| auth.read_tx(&state), &state.search_engine(), &req).await?;
    Ok(Json(resp.map_results(SearchHit::from)))
}

/// `POST /api/evidence/read`
pub async fn read(State(state): State<AppState>, auth: Auth, ApiJson(r): ApiJson<ReadRequest>) -> AppResult<Json<ReadResponse>> {
    let url = state.config.public_url.clone();
    let v = auth
        .read(&state, move |tx| {
            let (r, url) = (r.clone(), url.clone());
            Box::pin(async move { AppResult::Ok(open::read(tx, &r, &KbScope::Readable, url.as_deref()).await?) })
        })
        .await?;
    Ok(Json(v))
}

/// `POST /api/evidence/open`
pub async fn open(State(state): State<AppState>, auth: Auth, ApiJson(r): ApiJson<OpenRequest>) -> AppResult<Json<OpenResponse>> {
    let url = state.config.public_url.clone();
    let v = auth
        .read(&state, move |tx| {
            let (r, url) = (r.clone(), url.clone());
            Box::pin(async move { AppResult::Ok(open::open(tx, &r, &KbScope::Readable, url.as_deref()).await?) })
        })
        .await?;
    Ok(Json(v))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentsQuery {
    pub q: String,
    #[serde(default)]
    pub include_ocr: Option<bool>,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// One document of `GET /api/search/documents`: its best hit, and how many hits it had.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentHit {
    pub source_id: Uuid,
    pub title: String,
    pub path: String,
    pub resource_path: String,
    pub resource_kind: SourceKind,
    pub kb_id: Uuid,
    /// The lexical score; none for text LightRAG holds (OCR).
    pub score: Option<f64>,
    /// `markdown`, `resource`, `ocr` or, for LightRAG's OCR text, `knowledge_rag_ocr`.
    pub match_source: &'static str,
    pub match_count: usize,
    pub snippet: String,
    pub highlights: Vec<[usize; 2]>,
    pub best_evidence_id: Option<Uuid>,
    pub open_action: OpenAction,
    pub citation_markdown: String,
}

/// What the search covered: ordinary text, and LightRAG's OCR text when asked.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentBoundary {
    pub kind: &'static str,
    pub include_ocr: bool,
}

/// `mnote.document_search_response.v1` (`rag` adds LightRAG's OCR hits as their own type).
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentSearchResponse<H = DocumentHit> {
    pub ok: bool,
    pub schema: &'static str,
    pub query: String,
    pub boundary: DocumentBoundary,
    pub took_ms: f64,
    pub results: Vec<H>,
    /// Only with `includeOcr=true`: whether LightRAG could not be asked, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<Option<String>>,
}

impl<H> DocumentSearchResponse<H> {
    /// The same response with each hit turned into another type (`rag` adds OCR hits).
    pub fn map_results<T>(self, f: impl FnMut(H) -> T) -> DocumentSearchResponse<T> {
        let DocumentSearchResponse { ok, schema, query, boundary, took_ms, results, degraded, degraded_reason } = self;
        let results = results.into_iter().map(f).collect();
        DocumentSearchResponse { ok, schema, query, boundary, took_ms, results, degraded, degraded_reason }
    }
}

/// The ordinary part of `GET /api/search/documents?q=&includeOcr=&limit=` (the route lives
/// in `rag`, which adds knowledge-RAG OCR hits when asked): lexical hits grouped by source;
/// with `includeOcr=false` (the default) text that exists only in OCR output is not matched.
/// Returns the response and the requested limit.
pub async fn document_search(state: &AppState, auth: &Auth, p: &DocumentsQuery) -> AppResult<(DocumentSearchResponse, usize)> {
    let limit = p.limit.unwrap_or(20);
    if limit == 0 || limit > 100 {
        return Err(AppError::invalid("limit", "limit must be between 1 and 100"));
    }
    let include_ocr = p.include_ocr.unwrap_or(false);
    let mut req = SearchRequest::new(p.q.clone(), Mode::Lexical);
    req.include_ocr = Some(include_ocr);
    let mut tx = auth.read_tx(state).await?;
    let resp = query::run(&mut tx, &state.search_engine(), &req, query::MAX_TOP_K).await?;
    tx.commit().await?;
    let mut docs: Vec<DocumentHit> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for hit in resp.results {
        if let Some(&i) = seen.get(&hit.source_id) {
            let d: &mut DocumentHit = &mut docs[i];
            d.match_count += 1;
            continue;
        }
        if docs.len() == limit {
            continue;
        }
        let query::Hit { api, source_id, is_ocr, kind, resource_path, .. } = hit;
        let match_source = if is_ocr {
            "ocr"
        } else if matches!(kind, SourceKind::Markdown | SourceKind::Text) {
            "markdown"
        } else {
            "resource"
        };
        seen.insert(source_id, docs.len());
        docs.push(DocumentHit {
            source_id,
            title: api.source_title,
            path: resource_path.clone(),
            resource_path,
            resource_kind: kind,
            kb_id: api.source.kb_id,
            score: Some(api.score),
            match_source,
            match_count: 1,
            snippet: api.quote,
            highlights: api.highlights,
            best_evidence_id: Some(api.evidence_id),
            open_action: api.open_action,
            citation_markdown: api.citation_markdown,
        });
    }
    let body = DocumentSearchResponse {
        ok: true,
        schema: "mnote.document_search_response.v1",
        query: p.q.clone(),
        boundary: DocumentBoundary {
            kind: if include_ocr { "ordinary_local_search_with_knowledge_ocr" } else { "ordinary_local_search" },
            include_ocr,
        },
        took_ms: resp.took_ms,
        results: docs,
        degraded: None,
        degraded_reason: None,
    };
    Ok((body, limit))
}

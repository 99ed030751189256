//! HTTP handlers of the evidence tools. Thin: parse, open the caller's transaction, call the
//! search core, answer JSON.

use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    open::{self, ToolError},
    query::{self, SearchError},
};
use crate::{
    auth::Auth,
    error::{ApiJson, AppError, AppResult},
    evidence::{
        SourceKind,
        tools::{Mode, OpenRequest, OpenResponse, ReadRequest, ReadResponse, SearchHit, SearchRequest, SearchResponse},
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
            Box::pin(async move { AppResult::Ok(open::read(tx, &r, url.as_deref()).await?) })
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
            Box::pin(async move { AppResult::Ok(open::open(tx, &r, url.as_deref()).await?) })
        })
        .await?;
    Ok(Json(v))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentsQuery {
    pub q: String,
    #[serde(default)]
    pub include_ocr: Option<bool>,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The ordinary part of `GET /api/search/documents?q=&includeOcr=&limit=` (the route lives
/// in `rag`, which adds knowledge-RAG OCR hits when asked): lexical hits grouped by source;
/// with `includeOcr=false` (the default) text that exists only in OCR output is not matched.
/// Returns the response body and the requested limit.
pub async fn document_search(state: &AppState, auth: &Auth, p: &DocumentsQuery) -> AppResult<(Value, usize)> {
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
    let mut docs: Vec<Value> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for hit in resp.results {
        if let Some(&i) = seen.get(&hit.source_id) {
            let d: &mut Value = &mut docs[i];
            d["matchCount"] = json!(d["matchCount"].as_u64().unwrap_or(0) + 1);
            continue;
        }
        if docs.len() == limit {
            continue;
        }
        let match_source = if hit.is_ocr {
            "ocr"
        } else if matches!(hit.kind, SourceKind::Markdown | SourceKind::Text) {
            "markdown"
        } else {
            "resource"
        };
        seen.insert(hit.source_id, docs.len());
        docs.push(json!({
            "sourceId": hit.source_id,
            "title": hit.source_title,
            "path": hit.resource_path,
            "resourcePath": hit.resource_path,
            "resourceKind": hit.kind,
            "kbId": hit.source.kb_id,
            "score": hit.score,
            "matchSource": match_source,
            "matchCount": 1,
            "snippet": hit.quote,
            "highlights": hit.highlights,
            "bestEvidenceId": hit.evidence_id,
            "openAction": hit.open_action,
            "citationMarkdown": hit.citation_markdown,
        }));
    }
    let body = json!({
        "ok": true,
        "schema": "mnote.document_search_response.v1",
        "query": p.q,
        "boundary": {
            "kind": if include_ocr { "ordinary_local_search_with_knowledge_ocr" } else { "ordinary_local_search" },
            "includeOcr": include_ocr,
        },
        "tookMs": resp.took_ms,
        "results": docs,
    });
    Ok((body, limit))
}

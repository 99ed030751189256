//! Knowledge RAG: a KB bound to a LightRAG server (one workspace per server process, so
//! isolation never relies on LightRAG), its sources mirrored there, and LightRAG's answers
//! turned into our located, diagnosed citations.
//!
//! - [`client`]: the HTTP client for LightRAG (the only code that builds its URLs);
//! - [`binding`]: the KB ↔ endpoint binding, URL allow-list, sealed API key;
//! - [`docs`] + [`sync`]: one LightRAG document per indexed source, kept in step;
//! - [`held`]: what LightRAG really holds (bounded, cached), the drift from what we sent;
//! - [`mapping`]: chunk text → evidence blocks; [`query`]: query, open_reference;
//!   [`stream`]: the answer streamed (`/query/stream`) for the assistant's runs;
//! - [`status`], [`handlers`] (API), [`pages`] (KB knowledge-RAG page, Ask page).

pub mod bench;
pub mod binding;
pub mod blocks;
pub mod client;
pub mod docs;
pub mod handlers;
pub mod held;
pub mod mapping;
pub mod pages;
pub mod query;
pub mod resync;
pub mod status;
pub mod stream;
pub mod sync;

use serde::Serialize;

use crate::config::RagConfig;

/// `{code, message}` of a LightRAG failure, as responses carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ErrorView {
    pub code: String,
    pub message: String,
}

/// Ask an endpoint whether it is up and the key is accepted (a quick probe, no retries):
/// LightRAG's version.
pub async fn check(cfg: &RagConfig, b: &binding::Binding) -> Result<Option<String>, client::RagError> {
    let c = b.client(cfg)?.probe(cfg.timeout)?;
    let h = c.health().await?;
    c.verify_key().await?;
    Ok(h.core_version)
}

pub fn api_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::{get, post};
    use handlers as h;
    axum::Router::new()
        .route("/api/kbs/{id}/knowledge-rag", get(h::get_binding).put(h::put_binding).delete(h::delete_binding))
        .route("/api/kbs/{id}/knowledge-rag/test", post(h::test_binding))
        .route("/api/knowledge-rag/status", get(h::status))
        .route("/api/knowledge-rag/query", post(h::query))
        .route("/api/knowledge-rag/open-reference", post(h::open_reference))
        // The document search with knowledge-RAG OCR hits (its ordinary part is `search`'s).
        .route("/api/search/documents", get(h::documents))
}

/// The OpenAPI description of [`api_router`]'s routes.
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    use handlers as h;
    d.op("get", "/api/kbs/{id}/knowledge-rag").summary("The knowledge base's LightRAG binding").ok::<binding::BindingView>(200);
    d.op("put", "/api/kbs/{id}/knowledge-rag")
        .summary("Bind the knowledge base to a LightRAG endpoint (allow-listed), then check it once")
        .body::<h::BindBody>()
        .ok::<binding::BindingView>(200)
        .errors(&[(502, &["upstream_unavailable"])]);
    d.op("delete", "/api/kbs/{id}/knowledge-rag").summary("Unbind the knowledge base from LightRAG").empty(204);
    d.op("post", "/api/kbs/{id}/knowledge-rag/test").summary("Check the binding's endpoint now").ok::<binding::BindingView>(200);
    d.op("get", "/api/knowledge-rag/status")
        .summary("What each bound knowledge base's LightRAG holds (`mnote.knowledge_rag.status.v1`)")
        .query::<h::StatusQuery>()
        .ok::<h::StatusResponse>(200)
        .errors(&[(404, &["not_found"])]);
    d.op("post", "/api/knowledge-rag/query")
        .summary("Query LightRAG for bound knowledge bases; references mapped to evidence")
        .body::<h::QueryBody>()
        .ok::<query::QueryResult>(200)
        .errors(&[(404, &["not_found"])]);
    d.op("post", "/api/knowledge-rag/open-reference")
        .summary("Map a LightRAG reference (its file path, a quote) to evidence")
        .body::<h::OpenBody>()
        .ok::<query::Reference>(200)
        .errors(&[(404, &["not_found"])]);
    d.op("get", "/api/search/documents")
        .summary("Documents matching a query, best hit each (with `includeOcr`: LightRAG's OCR text too)")
        .query::<crate::search::handlers::DocumentsQuery>()
        .ok::<crate::search::handlers::DocumentSearchResponse<h::DocumentResult>>(200);
}

pub fn page_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::{get, post};
    use pages as p;
    axum::Router::new()
        .route("/kbs/{id}/knowledge-rag", get(p::kb_rag_page).post(p::bind_form))
        .route("/kbs/{id}/knowledge-rag/test", post(p::test_form))
        .route("/kbs/{id}/knowledge-rag/unbind", post(p::unbind_form))
        .route("/kbs/{id}/knowledge-rag/status.json", get(p::status_json))
        .route("/kbs/{id}/ask", get(p::ask_kb_page))
        .route("/ask", get(p::ask_page))
}

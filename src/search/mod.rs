//! Evidence search (SPEC §5): text analysis, BM25 + vector + hybrid + graph queries, the
//! evidence tools and their API.
pub mod analyze;
pub mod bench;
mod bench_lexical;
pub mod bench_replica;
#[cfg(feature = "bench-tantivy")]
mod bench_tantivy;
pub mod embed;
pub mod eval;
pub mod handlers;
pub mod memindex;
pub mod open;
pub mod outline;
pub mod pages;
pub mod query;
pub mod vector_health;
pub mod vectors;

/// The evidence tools API and the `/search` page.
pub fn api_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::post;
    axum::Router::new()
        .route("/api/evidence/search", post(handlers::search))
        .route("/api/evidence/read", post(handlers::read))
        .route("/api/evidence/open", post(handlers::open))
}

/// The OpenAPI description of [`api_router`]'s routes.
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    use crate::evidence::tools as t;
    d.op("post", "/api/evidence/search")
        .summary("Search evidence (lexical, vector, hybrid or graph) in the caller's knowledge bases")
        .body::<t::SearchRequest>()
        .ok::<t::SearchResponse>(200);
    d.op("post", "/api/evidence/read")
        .summary("Read a block of evidence with its neighbours and section")
        .body::<t::ReadRequest>()
        .ok::<t::ReadResponse>(200)
        .errors(&[(404, &["not_found"])]);
    d.op("post", "/api/evidence/open")
        .summary("Where the viewer shows a block of evidence (its citation and URL)")
        .body::<t::OpenRequest>()
        .ok::<t::OpenResponse>(200)
        .errors(&[(404, &["not_found"])]);
}

pub fn page_router() -> axum::Router<crate::state::AppState> {
    axum::Router::new().route("/search", axum::routing::get(pages::search_page))
}

//! A run's home: `runs::start` (the run service: a request checked, preferences frozen, the
//! run created and handed to the executor), its API (`POST /api/page-ai/runs`) and the
//! assistant's pages (`/ai`, the no-JavaScript run page, the result fragment). The journal
//! (`journal`) stores and streams what runs write; `agents` executes them.

pub mod conversations;
pub mod handlers;
pub mod pages;
pub mod service;

/// A run's tool offer: one function for run creation, the executor, the run's MCP token and
/// plain MCP (it lives in `agents`, which all of them reach).
pub use crate::agents::offer::{Offer, offer};

pub use service::{CreateRun, Started, start};

use crate::state::AppState;

/// `POST /api/page-ai/runs` and the conversations (`/api/page-ai/conversations…`).
pub fn api_router() -> axum::Router<AppState> {
    use axum::routing::{get, post};
    use handlers as h;
    axum::Router::new()
        .route("/api/page-ai/runs", post(h::create))
        .route("/api/page-ai/conversations", get(h::conversations))
        .route(
            "/api/page-ai/conversations/{id}",
            get(h::conversation).patch(h::rename_conversation).delete(h::delete_conversation),
        )
}

/// The OpenAPI description of [`api_router`]'s routes.
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    use crate::journal::store::RunView;
    d.op("post", "/api/page-ai/runs")
        .summary("Start a run (idempotent on `requestId`: 200 with the run an earlier request created)")
        .body::<CreateRun>()
        .ok::<RunView>(201)
        .ok::<RunView>(200)
        .errors(&[(409, &["conflict"]), (429, &["too_many_runs"])]);
    d.op("get", "/api/page-ai/conversations")
        .summary("The caller's conversations, most recently active first (`q` searches them)")
        .query::<conversations::ListQuery>()
        .ok::<conversations::ConversationList>(200);
    d.op("get", "/api/page-ai/conversations/{id}")
        .summary("A conversation with its runs, oldest first")
        .string_param("id")
        .ok::<conversations::ConversationDetail>(200);
    d.op("patch", "/api/page-ai/conversations/{id}")
        .summary("Rename a conversation")
        .string_param("id")
        .body::<conversations::Rename>()
        .ok::<conversations::ConversationView>(200);
    d.op("delete", "/api/page-ai/conversations/{id}")
        .summary("Delete a conversation and its runs")
        .string_param("id")
        .empty(204)
        .errors(&[(409, &["conflict"])]);
}

/// The Page AI pages (`/ai`, `/ai/runs/{id}…`, the script; the agent settings page is
/// `agents::pages`).
pub fn page_router() -> axum::Router<AppState> {
    use axum::routing::{get, post};
    use pages as p;
    axum::Router::new()
        .route("/ai", get(p::ai_page))
        .route("/ai/runs", post(p::create_form))
        .route("/ai/runs/{id}", get(p::run_page))
        .route("/ai/runs/{id}/result", get(p::result_fragment))
        .route("/ai/runs/{id}/cancel", post(p::cancel_form))
        .route("/ai/runs/{id}/resume", post(p::resume_form))
        .route("/ai/runs/{id}/retry", post(p::conversations::retry_form))
        .route("/ai/conversations/{id}/rename", post(p::conversations::rename_form))
        .route("/ai/conversations/{id}/delete", post(p::conversations::delete_form))
}

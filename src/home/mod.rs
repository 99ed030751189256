//! The home of a signed-in user: the dashboard and its "Getting started" checklist. It sits
//! above the features whose facts the checklist reads (grants, KBs, sources, agents, runs,
//! members); nothing but `startup` imports it.

pub mod dashboard;
pub mod start;

/// `/`, `/start/search`, `/start/hide`.
pub fn page_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/", get(dashboard::dashboard))
        .route("/start/search", get(start::start_search))
        .route("/start/hide", post(start::hide_checklist))
}

//! The agents' JSON API: configuration (`config`), descriptors, preferences and the tenant's
//! capability switches, in one router.

use axum::routing::get;

use super::{capabilities, config, connect, descriptors, preferences};
use crate::state::AppState;

/// `GET /api/page-ai/agents/descriptors`, `GET/PATCH /api/page-ai/preferences`,
/// `GET/PATCH /api/page-ai/capabilities`, the configuration routes of `config` and the
/// provider checks of `connect` (list models, test connection).
pub fn api_router() -> axum::Router<AppState> {
    axum::Router::new()
        .merge(config::api_router())
        .merge(connect::api_router())
        .route("/api/page-ai/agents/descriptors", get(descriptors::get_handler))
        .route("/api/page-ai/preferences", get(preferences::get_handler).patch(preferences::patch_handler))
        .route("/api/page-ai/capabilities", get(capabilities::get_handler).patch(capabilities::patch_handler))
}

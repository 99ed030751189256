//! The run journal: every AI run is a row (`mnote.ai_run.v1`) with an append-only list of
//! events (`mnote.ai_run_event.v1`), both in Postgres under forced RLS. A browser that
//! refreshes asks for the events after the last seq it rendered; any replica serves any run's
//! stream because appends wake listeners through `NOTIFY mnote_run`.
//!
//! This module knows nothing about agents (it is a leaf): runtimes write through
//! [`sink::EventSink`], the executor in `agents` drives the lifecycle with [`store`], and
//! `runs` creates runs and renders them.

pub mod bench;
mod event;
pub mod handlers;
pub mod hub;
pub mod receipt;
pub mod reconcile;
pub mod sink;
pub mod store;
pub mod stream;

pub use event::{
    ContextRefs, ErrorBody, Event, EventSource, PlanEntry, RunCompleted, RunCreated, RunFailed, RunStatus, RunStopped,
    ToolCompleted, ToolStarted, Verdict,
};
pub use receipt::Receipt;

use crate::state::AppState;

/// `/api/page-ai/runs/{id}…` (reads, events, cancel) and `/api/page-ai/sessions/…`; creating a
/// run is `runs::api_router`.
/// The OpenAPI description of [`api_router`]'s routes.
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    use crate::error::Items;
    use handlers as h;
    d.op("get", "/api/page-ai/runs/{id}").summary("A run (`mnote.ai_run.v1`)").ok::<store::RunView>(200);
    d.op("get", "/api/page-ai/runs/{id}/events")
        .summary("A run's events after `afterSeq` as JSON, or with `Accept: text/event-stream` as server-sent events")
        .query::<h::EventsQuery>()
        .header("Last-Event-ID", "SSE: the last event seen (wins over afterSeq)")
        .ok::<stream::EventPage>(200)
        .content(
            200,
            "text/event-stream",
            serde_json::json!({"type": "string", "description": "events `id: <seq>`, `event: <kind>`, `data: <mnote.ai_run_event.v1 JSON>`"}),
            "with Accept: text/event-stream",
        )
        .empty(204)
        .errors(&[(429, &["too_many_streams"])]);
    d.op("post", "/api/page-ai/runs/{id}/cancel").summary("Cancel a run").ok::<h::Cancelled>(200);
    d.op("get", "/api/page-ai/sessions/{session}/active-run")
        .summary("A session's active run (`mnote.ai_active_run.v1`)")
        .string_param("session")
        .ok::<h::ActiveRun>(200);
    d.op("get", "/api/page-ai/sessions/{session}/runs")
        .summary("A session's runs, newest first")
        .string_param("session")
        .ok::<Items<store::RunView>>(200);
}

pub fn api_router() -> axum::Router<AppState> {
    use axum::routing::{get, post};
    use handlers as h;
    axum::Router::new()
        .route("/api/page-ai/runs/{id}", get(h::get))
        .route("/api/page-ai/runs/{id}/events", get(h::events))
        .route("/api/page-ai/runs/{id}/cancel", post(h::cancel))
        .route("/api/page-ai/sessions/{session}/active-run", get(h::active_run))
        .route("/api/page-ai/sessions/{session}/runs", get(h::session_runs))
}

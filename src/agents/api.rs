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

/// The OpenAPI description of [`api_router`]'s routes (the agents' configuration and
/// connection routes included).
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    use serde_json::{Map, Value};
    let agent_errors: &[(u16, &[&str])] = &[(404, &["not_found"])];
    let provider_errors: &[(u16, &[&str])] = &[
        (404, &["not_found"]),
        (502, &["llm_unauthorized", "llm_unavailable", "llm_bad_response", "llm_stream_error", "upstream_unavailable"]),
        (504, &["llm_timeout"]),
    ];
    d.op("get", "/api/page-ai/agents")
        .summary("The agents and how each is configured in this team")
        .ok::<crate::error::Items<config::AgentView>>(200);
    d.op("get", "/api/page-ai/agents/{agent}/config")
        .summary("An agent's configuration (never its key)")
        .string_param("agent")
        .ok::<config::AgentView>(200)
        .errors(agent_errors);
    d.op("put", "/api/page-ai/agents/{agent}/config")
        .summary("Configure an agent's endpoint, model and key (admins)")
        .string_param("agent")
        .body::<config::ConfigInput>()
        .ok::<config::AgentView>(200)
        .errors(&[(404, &["not_found"]), (502, &["upstream_unavailable"])]);
    d.op("delete", "/api/page-ai/agents/{agent}/config")
        .summary("Remove an agent's configuration (admins)")
        .string_param("agent")
        .empty(204)
        .errors(agent_errors);
    d.op("post", "/api/page-ai/agents/{agent}/models")
        .summary("The models a provider endpoint serves (admins)")
        .string_param("agent")
        .body::<connect::CheckInput>()
        .ok::<connect::ModelsResponse>(200)
        .errors(provider_errors);
    d.op("post", "/api/page-ai/agents/{agent}/test")
        .summary("Test a provider with one small streamed completion (admins)")
        .string_param("agent")
        .body::<connect::CheckInput>()
        .ok::<connect::TestResult>(200)
        .errors(provider_errors);
    d.op("get", "/api/page-ai/agents/descriptors")
        .summary("The agent descriptors with the caller's values (`mnote.ai_agent_descriptors.v1`)")
        .ok::<descriptors::Descriptors>(200);
    d.op("get", "/api/page-ai/preferences")
        .summary("The caller's preference values (`mnote.ai_preferences.v1`)")
        .ok::<preferences::PreferencesView>(200);
    d.op("patch", "/api/page-ai/preferences")
        .summary("Set some preferences (`{key: value}`, `null` resets one)")
        .body::<Map<String, Value>>()
        .ok::<preferences::PreferencesView>(200);
    d.op("get", "/api/page-ai/capabilities")
        .summary("The team's capability switches (`mnote.ai_capabilities.v1`)")
        .ok::<capabilities::CapabilitiesView>(200);
    d.op("patch", "/api/page-ai/capabilities")
        .summary("Switch capabilities on or off (`{capability: bool}`, admins)")
        .body::<Map<String, Value>>()
        .ok::<capabilities::CapabilitiesView>(200);
}

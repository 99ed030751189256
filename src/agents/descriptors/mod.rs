//! Agent descriptors (`mnote.ai_agent_descriptors.v1`): one backend contract that says, per
//! agent, what it is, what it runs on, which capabilities and tools it has in this team, and
//! which settings it takes (the fields the settings pages and the Page AI page are rendered
//! from). Merged on the server, in this order:
//!
//! 1. the static agent registry ([`agent_fields`], [`common_fields`], [`agent_capabilities`]),
//!    plus the operator's extra fields (`MNOTE_AGENT_EXTRA_FIELDS`);
//! 2. the tool registry (`tools::registry`: names, descriptions, schemas, capabilities);
//! 3. the runtime mappings (which provider the agent runs on, whether it is configured);
//! 4. the tenant's admin settings (capability switches, endpoints and models);
//! 5. the user's preferences (each field's `value`);
//! 6. the user's grants (`allowedRoots`, derived from grants only, never a field).
//!
//! Admin-only fields are left out for members; secret values are never returned
//! (`{"set": true|false}`).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    AgentId, Capability, Provider,
    capabilities::{self, Switches},
    config::{self as agent_config, AgentConfigRow},
    queries,
    tools::{self, ToolDef},
};
use crate::{auth::Auth, auth::directory as tq, config::Config, error::AppResult, grants, kbs, state::AppState, web::Lang};

pub const SCHEMA: &str = "mnote.ai_agent_descriptors.v1";
pub const ITEM_SCHEMA: &str = "mnote.ai_agent_descriptor.v1";
pub const COMMON_SCOPE: &str = "ai.common";

/// The published JSON Schema of the descriptors response.
pub const JSON_SCHEMA: &str = include_str!("../../../docs/schemas/mnote.ai_agent_descriptors.v1.json");

mod extra;
mod facts;
mod fields;
mod view;

pub use extra::*;
pub use facts::*;
pub use fields::*;
pub use view::*;

/// The descriptors, merged (pure: everything read is in `facts`).
pub fn build(cfg: &Config, facts: &Facts, lang: Lang) -> Descriptors {
    let specs = all_fields(cfg);
    let resolve = |scope: &str| -> Vec<Field> {
        specs.iter().filter(|s| s.scope() == scope).filter_map(|s| resolve_field(s, facts, lang)).collect()
    };
    let common = CommonSettings { setting_scopes: vec![COMMON_SCOPE.to_string()], fields: resolve(COMMON_SCOPE) };
    let default_kbs: Vec<Uuid> = common
        .fields
        .iter()
        .find(|f| f.key == "ai.common.default_kbs")
        .and_then(|f| f.value.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str()).filter_map(|s| Uuid::parse_str(s).ok()).collect())
        .unwrap_or_default();
    let items = AgentId::ALL
        .into_iter()
        .map(|agent| {
            let scope = format!("ai.agent.{}", agent.as_str());
            let (runtime_provider, note) = agent_config::provider_of(cfg, agent, facts.configs.get(&agent));
            let own = agent_capabilities(agent);
            let capability_states: BTreeMap<Capability, &'static str> =
                own.iter().map(|c| (*c, if facts.switches.enabled(*c) { "enabled" } else { "disabled" })).collect();
            let tools: Vec<ToolView> = if agent.uses_tools() {
                tools::registry().iter().filter(|d| own.contains(&d.capability)).map(|d| tool_view(d, &facts.switches)).collect()
            } else {
                Vec::new()
            };
            Descriptor {
                schema: ITEM_SCHEMA,
                agent_id: agent.as_str(),
                display_name: agent.display_name(),
                provider: agent.configured_provider(),
                runtime_provider,
                runtime_configured: note.is_none(),
                capabilities: own.iter().copied().filter(|c| facts.switches.enabled(*c)).collect(),
                disabled_capabilities: own.iter().copied().filter(|c| !facts.switches.enabled(*c)).collect(),
                capability_states,
                default_context_refs: ContextDefaults {
                    kb_ids: if agent.uses_tools() { default_kbs.clone() } else { Vec::new() },
                },
                allowed_roots: if agent.uses_tools() {
                    facts.grants.iter().map(|(p, perm)| AllowedRoot { path: p.clone(), permission: perm.clone() }).collect()
                } else {
                    Vec::new()
                },
                setting_scopes: vec![COMMON_SCOPE.to_string(), scope.clone()],
                fields: resolve(&scope),
                tools,
            }
        })
        .collect();
    Descriptors { schema: SCHEMA, common, items }
}

/// The caller's descriptors.
pub async fn for_caller(state: &AppState, auth: &Auth, lang: Lang) -> AppResult<Descriptors> {
    let facts = facts(state, auth).await?;
    Ok(build(&state.config, &facts, lang))
}

/// `GET /api/page-ai/agents/descriptors`
pub async fn get_handler(
    axum::extract::State(state): axum::extract::State<AppState>,
    auth: Auth,
    lang: Lang,
) -> AppResult<axum::Json<Descriptors>> {
    Ok(axum::Json(for_caller(&state, &auth, lang).await?))
}

#[cfg(test)]
pub(crate) mod tests;

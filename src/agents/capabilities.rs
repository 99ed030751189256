//! The tenant's capability switches. A capability is a group of registry tools
//! (`evidence`, `knowledge_rag`); an owner/admin can switch one off for the whole team
//! (`PATCH /api/page-ai/capabilities {"knowledge_rag": false}`). A capability never switched is
//! on. Descriptors mark a switched-off capability `disabled` and its tools `enabled: false`,
//! and runs no longer offer those tools (the executor reads the switches when it builds a
//! run's tool box).

use std::collections::BTreeMap;

use axum::{Json, extract::State};
use serde::Serialize;
use serde_json::Value;

use super::{Capability, queries, tools};
use crate::{
    audit::Action,
    auth::{Auth, ClientIp},
    error::{ApiJson, AppError, AppResult},
    state::AppState,
};

pub const SCHEMA: &str = "mnote.ai_capabilities.v1";

/// Every capability of the tool registry, in registry order.
pub fn all() -> Vec<Capability> {
    let mut out: Vec<Capability> = Vec::new();
    for d in tools::registry() {
        if !out.contains(&d.capability) {
            out.push(d.capability);
        }
    }
    out
}

/// The tenant's switches: every capability of [`all`], on unless switched off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Switches(pub BTreeMap<Capability, bool>);

impl Switches {
    /// Everything on (a tenant that never switched anything).
    pub fn all_on() -> Switches {
        Switches(all().into_iter().map(|c| (c, true)).collect())
    }

    pub fn enabled(&self, capability: Capability) -> bool {
        self.0.get(&capability).copied().unwrap_or(true)
    }

    /// The capabilities switched off.
    pub fn disabled(&self) -> Vec<Capability> {
        self.0.iter().filter(|(_, on)| !**on).map(|(c, _)| *c).collect()
    }
}

/// The switches of the transaction's tenant (RLS picks the rows).
pub async fn load(conn: &mut crate::db::TenantTx) -> sqlx::Result<Switches> {
    let mut s = Switches::all_on();
    for (cap, enabled) in queries::capability_switches(conn).await? {
        if let Some(known) = all().into_iter().find(|c| c.as_str() == cap) {
            s.0.insert(known, enabled);
        }
    }
    Ok(s)
}

/// `{"schema": "mnote.ai_capabilities.v1", "capabilities": {"evidence": true, …}}`
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilitiesView {
    pub schema: &'static str,
    pub capabilities: Switches,
    /// The registry tools of each capability.
    pub tools: BTreeMap<Capability, Vec<&'static str>>,
}

fn view(s: Switches) -> CapabilitiesView {
    let mut by_cap: BTreeMap<Capability, Vec<&'static str>> = BTreeMap::new();
    for d in tools::registry() {
        by_cap.entry(d.capability).or_default().push(d.name);
    }
    CapabilitiesView { schema: SCHEMA, capabilities: s, tools: by_cap }
}

/// Read the caller's tenant switches (owners/admins only).
pub async fn get_switches(state: &AppState, auth: &Auth) -> AppResult<Switches> {
    auth.require_admin()?;
    let mut tx = auth.tx(state).await?;
    let s = load(&mut tx).await?;
    tx.commit().await?;
    Ok(s)
}

/// Set some switches (`{capability: bool}`; absent ones are unchanged). Owners/admins only;
/// an unknown capability or a value that is not a boolean is `invalid_input` naming it.
pub async fn patch(state: &AppState, auth: &Auth, ip: &ClientIp, input: &serde_json::Map<String, Value>) -> AppResult<Switches> {
    auth.require_admin()?;
    let mut fields = BTreeMap::new();
    let mut set: Vec<(Capability, bool)> = Vec::new();
    for (k, v) in input {
        match (all().into_iter().find(|c| c.as_str() == k), v) {
            (Some(c), Value::Bool(b)) => set.push((c, *b)),
            (Some(_), _) => {
                fields.insert(k.clone(), "true or false".to_string());
            }
            (None, _) => {
                fields.insert(
                    k.clone(),
                    format!("unknown capability; one of {}", all().iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")),
                );
            }
        }
    }
    if !fields.is_empty() {
        return Err(AppError::Invalid { message: "some capabilities could not be set".into(), fields });
    }
    let mut tx = auth.tx(state).await?;
    let before = load(&mut tx).await?;
    for (c, on) in set {
        queries::set_capability(&mut tx, auth.tenant_id, auth.user_id, c.as_str(), on).await?;
        if before.enabled(c) != on {
            auth.audit(&mut tx, ip, Action::CapabilitySwitch, c.as_str(), if on { "on" } else { "off" }).await?;
        }
    }
    let s = load(&mut tx).await?;
    tx.commit().await?;
    Ok(s)
}

pub async fn get_handler(State(state): State<AppState>, auth: Auth) -> AppResult<Json<CapabilitiesView>> {
    Ok(Json(view(get_switches(&state, &auth).await?)))
}

pub async fn patch_handler(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    ApiJson(input): ApiJson<serde_json::Map<String, Value>>,
) -> AppResult<Json<CapabilitiesView>> {
    Ok(Json(view(patch(&state, &auth, &ip, &input).await?)))
}

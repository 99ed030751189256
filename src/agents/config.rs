//! Which runtime an agent runs on in a tenant. An admin sets `hermes` / `chat_only` to an
//! OpenAI-compatible endpoint (inside the operator's `MNOTE_AGENT_ALLOWED_URLS`, by default the
//! public HTTPS endpoints of the major providers: `crate::config::DEFAULT_AGENT_ALLOWED_URLS`), a model and
//! an API key (sealed at rest, never returned); `reasonix` runs the operator's ACP command
//! (`MNOTE_ACP_REASONIX_COMMAND`). An agent with nothing configured runs on `builtin` and the
//! run says so (`providerNote: not_configured`).

use std::sync::Arc;

use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::db::TenantTx;

use super::{AgentId, AgentRuntime, Provider, acp, builtin, openai};
use crate::{
    audit::Action,
    auth::{Auth, ClientIp},
    config::Config,
    error::{ApiJson, AppError, AppResult, Items},
    platform::SecretString,
    state::AppState,
    web::Lang,
};

/// `GET/PUT/DELETE /api/page-ai/agents/{agentId}/config`, `GET /api/page-ai/agents`.
pub fn api_router() -> axum::Router<AppState> {
    use axum::routing::get;
    axum::Router::new()
        .route("/api/page-ai/agents", get(list))
        .route("/api/page-ai/agents/{agent}/config", get(get_config).put(put_config).delete(delete_config))
}

#[derive(Debug, Clone)]
pub struct AgentConfigRow {
    pub agent_id: String,
    pub endpoint_url: Option<String>,
    pub model: Option<String>,
    pub api_key_cipher: Option<Vec<u8>>,
    /// Other models the endpoint serves (a user may pick one of them or `model`).
    pub extra_models: Vec<String>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// What the API shows of an agent's configuration (never the key).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    pub agent_id: &'static str,
    pub display_name: &'static str,
    /// The provider runs of this agent use now.
    pub provider: Provider,
    /// Why it is not the agent's own provider (`not_configured`), if so.
    pub provider_note: Option<&'static str>,
    pub uses_tools: bool,
    pub endpoint_url: Option<String>,
    pub model: Option<String>,
    pub has_api_key: bool,
    /// Whether an admin can configure it here (`reasonix` is configured by the operator).
    pub configurable: bool,
}

fn aad(tenant: Uuid, agent: AgentId) -> String {
    format!("mnote:tenant:{tenant}:agent:{}:api_key:v1", agent.as_str())
}

/// Whether any agent of the tenant has a model endpoint saved (the getting-started step).
pub async fn any_endpoint(tx: &mut TenantTx) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(
        r#"select exists(select 1 from agent_config where tenant_id = $1 and endpoint_url is not null) as "e!""#,
        tenant
    )
    .fetch_one(&mut **tx)
    .await
}

pub async fn load(tx: &mut TenantTx, agent: AgentId) -> sqlx::Result<Option<AgentConfigRow>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        AgentConfigRow,
        r#"select agent_id, endpoint_url, model, api_key_cipher, extra_models, updated_at as "updated_at: _"
         from agent_config where tenant_id = $2 and agent_id = $1"#,
        agent.as_str(),
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

/// The runtime `agent` runs on, with the provider and why.
pub struct Resolved {
    pub provider: Provider,
    pub note: Option<&'static str>,
    pub runtime: Arc<dyn AgentRuntime>,
}

/// Only the provider and note (for creating a run; the runtime is built by the executor).
pub fn provider_of(cfg: &Config, agent: AgentId, row: Option<&AgentConfigRow>) -> (Provider, Option<&'static str>) {
    let configured = match agent.configured_provider() {
        Provider::OpenAi => row.is_some_and(|r| r.endpoint_url.is_some() && r.model.is_some()),
        Provider::Acp => cfg.agents.acp_command.is_some(),
        Provider::Builtin => true,
    };
    if configured { (agent.configured_provider(), None) } else { (Provider::Builtin, Some("not_configured")) }
}

/// What a run's frozen preferences tune in its runtime (each only within what the team's
/// configuration allows).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tuning {
    /// One of the agent's configured models (else its default model).
    pub model: Option<String>,
    /// At most the operator's `MNOTE_AGENT_MAX_TOOL_ROUNDS`.
    pub max_tool_rounds: Option<usize>,
}

impl AgentConfigRow {
    /// The models a user may pick: the default one, then the extra ones.
    pub fn models(&self) -> Vec<String> {
        let mut out: Vec<String> = self.model.iter().cloned().collect();
        for m in &self.extra_models {
            if !out.contains(m) {
                out.push(m.clone());
            }
        }
        out
    }
}

pub async fn resolve(
    cfg: &Config,
    conn: &mut crate::db::TenantTx,
    tenant: Uuid,
    agent: AgentId,
    tuning: &Tuning,
) -> AppResult<Resolved> {
    let row = load(conn, agent).await?;
    let (provider, note) = provider_of(cfg, agent, row.as_ref());
    let runtime: Arc<dyn AgentRuntime> = match provider {
        Provider::Builtin => Arc::new(builtin::BuiltinRuntime::new()),
        Provider::OpenAi => {
            let row = row.expect("configured");
            let api_key = match &row.api_key_cipher {
                Some(sealed) => Some(open_key(cfg, tenant, agent, sealed)?),
                None => None,
            };
            let model = match &tuning.model {
                Some(m) if row.models().contains(m) => m.clone(),
                _ => row.model.clone().unwrap_or_default(),
            };
            let max_tool_rounds =
                tuning.max_tool_rounds.unwrap_or(cfg.agents.max_tool_rounds).clamp(1, cfg.agents.max_tool_rounds);
            let endpoint = row.endpoint_url.clone().unwrap_or_default();
            Arc::new(openai::OpenAiRuntime::new(openai::OpenAiSettings {
                public_only: public_only(cfg, &endpoint),
                endpoint,
                model,
                api_key,
                with_tools: agent.uses_tools(),
                idle_timeout: cfg.agents.idle_timeout,
                max_tool_rounds,
                max_line_bytes: cfg.agents.max_line_bytes,
            }))
        }
        Provider::Acp => Arc::new(acp::AcpRuntime::new(acp::AcpSettings::from_config(cfg))),
    };
    Ok(Resolved { provider, note, runtime })
}

pub fn open_key(cfg: &Config, tenant: Uuid, agent: AgentId, sealed: &[u8]) -> AppResult<SecretString> {
    let master = cfg
        .rag
        .secret_key
        .as_ref()
        .ok_or_else(|| AppError::Upstream("the server has no secret key to open the stored API key".into()))?;
    let plain = master.open(sealed, aad(tenant, agent).as_bytes()).map_err(|e| AppError::Upstream(e.to_string()))?;
    String::from_utf8(plain).map(SecretString::new).map_err(|_| AppError::Upstream("the stored API key is not text".into()))
}

fn view(cfg: &Config, agent: AgentId, row: Option<&AgentConfigRow>) -> AgentView {
    let (provider, note) = provider_of(cfg, agent, row);
    AgentView {
        agent_id: agent.as_str(),
        display_name: agent.display_name(),
        provider,
        provider_note: note,
        uses_tools: agent.uses_tools(),
        endpoint_url: row.and_then(|r| r.endpoint_url.clone()),
        model: row.and_then(|r| r.model.clone()),
        has_api_key: row.is_some_and(|r| r.api_key_cipher.is_some()),
        configurable: agent.configured_provider() == Provider::OpenAi,
    }
}

fn agent_of(s: &str) -> AppResult<AgentId> {
    AgentId::parse(s).ok_or(AppError::NotFound)
}

/// Every agent with what it runs on (any member: the agent picker).
pub async fn views(state: &AppState, auth: &Auth) -> AppResult<Vec<AgentView>> {
    let mut tx = auth.tx(state).await?;
    let mut out = Vec::new();
    for a in AgentId::ALL {
        let row = load(&mut tx, a).await?;
        out.push(view(&state.config, a, row.as_ref()));
    }
    tx.commit().await?;
    Ok(out)
}

async fn list(State(state): State<AppState>, auth: Auth) -> AppResult<Json<Items<AgentView>>> {
    Ok(Json(views(&state, &auth).await?.into()))
}

async fn get_config(State(state): State<AppState>, auth: Auth, Path(agent): Path<String>) -> AppResult<Json<AgentView>> {
    let agent = agent_of(&agent)?;
    let mut tx = auth.tx(&state).await?;
    let row = load(&mut tx, agent).await?;
    tx.commit().await?;
    Ok(Json(view(&state.config, agent, row.as_ref())))
}

/// `PUT` body. `apiKey`: absent keeps the stored key (unless `endpointUrl` changes: then the
/// key is removed), `""` removes it.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigInput {
    pub endpoint_url: String,
    pub model: String,
    #[serde(default)]
    pub api_key: Option<String>,
}

/// `url` checked against the operator's allow-list (normalized), or why not (in English: the
/// JSON API's words).
pub fn check_endpoint(cfg: &Config, url: &str) -> Result<String, String> {
    check_endpoint_in(cfg, url, Lang::En)
}

/// `url` checked against the operator's allow-list (normalized), or why not in `lang`: a URL
/// outside the list names its origin and what the admin asks the operator to set
/// (`MNOTE_AGENT_ALLOWED_URLS`), never a bare code.
pub fn check_endpoint_in(cfg: &Config, url: &str, lang: Lang) -> Result<String, String> {
    use crate::platform::http::{AllowList, allow_listed};
    allow_listed(&cfg.agents.allowed_urls, url).map_err(|e| {
        let key = match e {
            AllowList::Malformed => "agents.refused.malformed",
            AllowList::NoneAllowed => "agents.refused.none_allowed",
            AllowList::NotAllowed => "agents.refused.not_allowed",
        };
        lang.t(key).replace("{origin}", &origin_of(url))
    })
}

/// Whether `url` is allowed only by entries of the default list of public providers
/// ([`crate::config::DEFAULT_AGENT_ALLOWED_URLS`]) and by no entry the operator wrote: then its
/// connections go to public addresses only (a provider's name that resolved to a private or
/// loopback address is refused). An endpoint the operator listed is theirs to vouch for.
pub fn public_only(cfg: &Config, url: &str) -> bool {
    use crate::platform::http::allow_listed;
    let (defaults, own): (Vec<String>, Vec<String>) =
        cfg.agents.allowed_urls.iter().cloned().partition(|u| crate::config::DEFAULT_AGENT_ALLOWED_URLS.contains(&u.as_str()));
    allow_listed(&defaults, url).is_ok() && allow_listed(&own, url).is_err()
}

/// `scheme://host[:port]` of `url` (what a refusal names), or the start of the text when it is
/// no URL.
pub fn origin_of(url: &str) -> String {
    match reqwest::Url::parse(url.trim()) {
        Ok(u) if u.host_str().is_some() => {
            format!("{}://{}{}", u.scheme(), u.host_str().unwrap_or(""), u.port().map(|p| format!(":{p}")).unwrap_or_default())
        }
        _ => url.trim().chars().take(100).collect(),
    }
}

/// A model name (1–200 characters, trimmed), or why not.
pub fn check_model(model: &str) -> Result<&str, &'static str> {
    let model = model.trim();
    if model.is_empty() || model.chars().count() > 200 || model.contains(',') {
        return Err("a model name (1–200 characters, no comma)");
    }
    Ok(model)
}

/// `key` sealed for `agent` of `tenant` (the server needs `MNOTE_SECRET_KEY`).
pub fn seal_key(cfg: &Config, tenant: Uuid, agent: AgentId, key: &str) -> AppResult<Vec<u8>> {
    let master = cfg
        .rag
        .secret_key
        .as_ref()
        .ok_or_else(|| AppError::Upstream("the server has no secret key (MNOTE_SECRET_KEY) to store API keys with".into()))?;
    Ok(master.seal(key.as_bytes(), aad(tenant, agent).as_bytes()))
}

/// A change of an agent's team configuration from the settings fields: each part absent =
/// unchanged, `Some(None)` = cleared.
#[derive(Debug, Default, Clone)]
pub struct AdminPatch {
    pub endpoint_url: Option<Option<String>>,
    pub model: Option<Option<String>>,
    pub extra_models: Option<Vec<String>>,
    /// `Some(Some(sealed))` replaces the key, `Some(None)` removes it.
    pub api_key: Option<Option<Vec<u8>>>,
}

impl AdminPatch {
    pub fn is_empty(&self) -> bool {
        self.endpoint_url.is_none() && self.model.is_none() && self.extra_models.is_none() && self.api_key.is_none()
    }
}

/// Apply `patch` to `agent`'s configuration in the caller's transaction (values already
/// checked). Row-level security lets only owners/admins write.
pub async fn apply_patch(
    conn: &mut crate::db::TenantTx,
    auth: &Auth,
    ip: &ClientIp,
    agent: AgentId,
    patch: AdminPatch,
) -> AppResult<()> {
    auth.require_admin()?;
    let row = load(conn, agent).await?;
    let key_set = patch.api_key.as_ref().map(Option::is_some);
    let had_key = row.as_ref().is_some_and(|r| r.api_key_cipher.is_some());
    let endpoint = patch.endpoint_url.unwrap_or_else(|| row.as_ref().and_then(|r| r.endpoint_url.clone()));
    let model = patch.model.unwrap_or_else(|| row.as_ref().and_then(|r| r.model.clone()));
    let extra = patch.extra_models.unwrap_or_else(|| row.as_ref().map(|r| r.extra_models.clone()).unwrap_or_default());
    // Another endpoint without a new key: the old key does not follow it to the new host.
    let moved = endpoint != row.as_ref().and_then(|r| r.endpoint_url.clone());
    let key = match patch.api_key {
        Some(k) => k,
        None if moved => None,
        None => row.as_ref().and_then(|r| r.api_key_cipher.clone()),
    };
    sqlx::query!(
        "insert into agent_config (tenant_id, agent_id, endpoint_url, model, extra_models, api_key_cipher, updated_by)
         values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (tenant_id, agent_id) do update set endpoint_url = excluded.endpoint_url, model = excluded.model,
             extra_models = excluded.extra_models, api_key_cipher = excluded.api_key_cipher,
             updated_by = excluded.updated_by, updated_at = now()",
        auth.tenant_id,
        agent.as_str(),
        endpoint,
        model,
        &extra,
        key,
        auth.user_id,
    )
    .execute(&mut **conn)
    .await?;
    let old_model = row.as_ref().and_then(|r| r.model.clone());
    if moved || model != old_model {
        let detail = format!("{} {}", endpoint.as_deref().unwrap_or("-"), model.as_deref().unwrap_or("-"));
        auth.audit(conn, ip, Action::AgentEndpoint, agent.as_str(), detail).await?;
    }
    match (key_set, moved && had_key) {
        (Some(set), _) => auth.audit(conn, ip, Action::AgentKey, agent.as_str(), if set { "set" } else { "removed" }).await?,
        (None, true) => auth.audit(conn, ip, Action::AgentKey, agent.as_str(), "removed (endpoint moved)").await?,
        (None, false) => {}
    }
    Ok(())
}

pub async fn put(state: &AppState, auth: &Auth, ip: &ClientIp, agent: AgentId, input: &ConfigInput) -> AppResult<AgentView> {
    auth.require_admin()?;
    if agent.configured_provider() != Provider::OpenAi {
        return Err(AppError::invalid("agentId", "this agent runs the operator's ACP command; it has no endpoint to set"));
    }
    let url = check_endpoint(&state.config, &input.endpoint_url).map_err(|m| AppError::invalid("endpointUrl", m))?;
    let model = input.model.trim();
    if model.is_empty() || model.len() > 200 {
        return Err(AppError::invalid("model", "a model name (1–200 characters)"));
    }
    let sealed = match input.api_key.as_deref().map(str::trim) {
        None => None,
        Some("") => Some(None),
        Some(k) => Some(Some(seal_key(&state.config, auth.tenant_id, agent, k)?)),
    };
    let mut tx = auth.tx(state).await?;
    sqlx::query!(
        "insert into agent_config (tenant_id, agent_id, endpoint_url, model, api_key_cipher, updated_by)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (tenant_id, agent_id) do update set endpoint_url = excluded.endpoint_url, model = excluded.model,
             api_key_cipher = case when $7 then excluded.api_key_cipher
                 when agent_config.endpoint_url is distinct from excluded.endpoint_url then null
                 else agent_config.api_key_cipher end,
             updated_by = excluded.updated_by, updated_at = now()",
        auth.tenant_id,
        agent.as_str(),
        &url,
        model,
        sealed.clone().flatten(),
        auth.user_id,
        sealed.is_some(),
    )
    .execute(&mut *tx)
    .await?;
    auth.audit(&mut tx, ip, Action::AgentEndpoint, agent.as_str(), format!("{url} {model}")).await?;
    if let Some(k) = &sealed {
        auth.audit(&mut tx, ip, Action::AgentKey, agent.as_str(), if k.is_some() { "set" } else { "removed" }).await?;
    }
    let row = load(&mut tx, agent).await?;
    tx.commit().await?;
    Ok(view(&state.config, agent, row.as_ref()))
}

async fn put_config(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path(agent): Path<String>,
    ApiJson(input): ApiJson<ConfigInput>,
) -> AppResult<Json<AgentView>> {
    let agent = agent_of(&agent)?;
    Ok(Json(put(&state, &auth, &ip, agent, &input).await?))
}

async fn delete_config(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path(agent): Path<String>,
) -> AppResult<StatusCode> {
    auth.require_admin()?;
    let agent = agent_of(&agent)?;
    let mut tx = auth.tx(&state).await?;
    let n = sqlx::query!("delete from agent_config where tenant_id = $2 and agent_id = $1", agent.as_str(), auth.tenant_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if n > 0 {
        auth.audit(&mut tx, &ip, Action::AgentEndpoint, agent.as_str(), "removed").await?;
    }
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

//! `runs::start`: one run request checked against what the caller may see, its preferences
//! frozen, the run created (idempotent on `requestId`) and handed to the executor. Used by the
//! API and the page forms.

use serde::Deserialize;
use serde_json::{Value, json}; // JSON edge: the target hash is of canonical JSON (sorted keys)
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{
    agents::{
        AgentId, config as agent_config, descriptors, executor,
        offer::{self, For},
        preferences::{self as agent_preferences, RunPreferences},
    },
    auth::Auth,
    error::{AppError, AppResult},
    journal::{
        ContextRefs,
        store::{self, Created, NewRun},
    },
    kbs,
    state::AppState,
    web::Lang,
};

const MAX_PROMPT_CHARS: usize = 20_000;

/// `POST /api/page-ai/runs` body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateRun {
    #[schemars(regex(pattern = r"^[A-Za-z0-9_.:-]{1,200}$"))]
    pub request_id: String,
    #[schemars(regex(pattern = r"^[A-Za-z0-9_.:-]{1,200}$"))]
    pub session_id: String,
    /// One of [`AgentId`] (a string here so that an unknown id is refused as `invalid_input`).
    #[schemars(with = "AgentId")]
    pub agent_id: String,
    #[schemars(length(min = 1, max = MAX_PROMPT_CHARS), regex(pattern = r"\S"))]
    pub prompt: String,
    #[serde(default)]
    pub context_refs: ContextRefs,
    /// Resume: the interrupted (or failed, cancelled) run this one continues.
    #[serde(default)]
    pub parent_run_id: Option<Uuid>,
    #[serde(default)]
    pub resume_request_id: Option<String>,
}

/// An id a client makes up: 1–200 characters of `[A-Za-z0-9_.:-]`.
fn client_id(field: &str, v: &str) -> AppResult<()> {
    let ok = !v.is_empty() && v.len() <= 200 && v.chars().all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c));
    if ok { Ok(()) } else { Err(AppError::invalid(field, "1–200 characters: letters, digits, _ . : -")) }
}

/// The hash of the request's target (agent, context, prompt) as canonical JSON (sorted keys).
fn sha256_hex(v: &Value) -> String {
    // JSON edge: canonical JSON hashed
    hex::encode(Sha256::digest(v.to_string().as_bytes()))
}

/// Check the request and the context against what the caller may see.
async fn validate(state: &AppState, auth: &Auth, body: &CreateRun) -> AppResult<AgentId> {
    client_id("requestId", &body.request_id)?;
    client_id("sessionId", &body.session_id)?;
    let agent = AgentId::parse(&body.agent_id).ok_or_else(|| AppError::invalid("agentId", AgentId::expected()))?;
    let prompt = body.prompt.trim();
    if prompt.is_empty() {
        return Err(AppError::invalid("prompt", "ask something"));
    }
    if prompt.chars().count() > MAX_PROMPT_CHARS {
        return Err(AppError::invalid("prompt", format!("at most {MAX_PROMPT_CHARS} characters")));
    }
    let ctx = &body.context_refs;
    if ctx.kb_ids.len() > 50 || ctx.source_ids.len() > 200 || ctx.evidence_ids.len() > 200 {
        return Err(AppError::invalid("contextRefs", "too many references"));
    }
    if body.parent_run_id.is_some() != body.resume_request_id.is_some() {
        return Err(AppError::invalid("resumeRequestId", "a resume names both parentRunId and resumeRequestId"));
    }
    if let Some(r) = &body.resume_request_id {
        client_id("resumeRequestId", r)?;
    }
    let mut tx = auth.tx(state).await?;
    for kb in &ctx.kb_ids {
        kbs::readable(&mut tx, auth, *kb)
            .await
            .map_err(|_| AppError::invalid("contextRefs.kbIds", format!("no knowledge base {kb}")))?;
    }
    if !ctx.source_ids.is_empty() {
        let seen = sqlx::query_scalar!(
            r#"select count(*) as "n!" from source where tenant_id = $2 and id = any($1)"#,
            &ctx.source_ids,
            auth.tenant_id,
        )
        .fetch_one(&mut *tx)
        .await?;
        if seen as usize != ctx.source_ids.len() {
            return Err(AppError::invalid("contextRefs.sourceIds", "a source is unknown or not visible to you"));
        }
    }
    if !ctx.evidence_ids.is_empty() {
        // Evidence rows are tenant-scoped by RLS; private KBs hide them through their source.
        let mut wanted = ctx.evidence_ids.clone();
        wanted.sort_unstable();
        wanted.dedup();
        let seen = sqlx::query_scalar!(
            r#"select count(*) as "n!" from evidence_block e join source s on s.tenant_id = e.tenant_id and s.id = e.source_id
             where e.tenant_id = $2 and e.id = any($1)"#,
            &wanted,
            auth.tenant_id,
        )
        .fetch_one(&mut *tx)
        .await?;
        if seen as usize != wanted.len() {
            return Err(AppError::invalid("contextRefs.evidenceIds", "an evidence id is unknown or not visible to you"));
        }
    }
    if let Some(parent) = body.parent_run_id {
        let p = store::get(&mut tx, parent).await?.filter(|p| p.actor_id == auth.user_id);
        let p = p.ok_or_else(|| AppError::invalid("parentRunId", "no such run of yours"))?;
        if p.status.is_live() {
            return Err(AppError::Conflict("the parent run is still running".into()));
        }
    }
    tx.commit().await?;
    Ok(agent)
}

/// What [`start`] did.
pub enum Started {
    New(store::RunRow),
    /// The same request again: the run it created the first time.
    Again(store::RunRow),
}

impl Started {
    pub fn run(&self) -> &store::RunRow {
        match self {
            Started::New(r) | Started::Again(r) => r,
        }
    }
}

/// Create the run (and start executing it), or find the one this request created before; a
/// request id of another user's run is a conflict. Used by the API and the page form.
pub async fn start(state: &AppState, auth: &Auth, body: &CreateRun) -> AppResult<Started> {
    let agent = validate(state, auth, body).await?;
    // The caller's preferences as of now are frozen into the run (hash + values); the tools
    // it will be offered follow the tenant's switches and those preferences.
    let facts = descriptors::facts(state, auth).await?;
    let preferences = agent_preferences::snapshot(&descriptors::build(&state.config, &facts, Lang::En), agent)?;
    let (provider, note) = agent_config::provider_of(&state.config, agent, facts.configs.get(&agent));
    let prefs = RunPreferences::from_snapshot(&preferences);
    let offered = offer::offer(state, auth, &body.context_refs, For::Run { agent, preferences: &prefs }).await?;
    let mut tx = auth.tx(state).await?;
    let max = state.config.agents.max_runs_per_user;
    if store::live_runs_of(&mut tx, auth.user_id, &body.request_id).await? >= max {
        return Err(AppError::limit(
            "too_many_runs",
            format!("you already have {max} runs waiting or running; wait for one to end or cancel one"),
        ));
    }
    let target = sha256_hex(&json!({"agentId": agent.as_str(), "contextRefs": &body.context_refs, "prompt": body.prompt.trim()}));
    let capability = offered.hash(provider);
    // The session is a conversation: created by its first run (the question is its title).
    super::conversations::touch(&mut tx, auth.tenant_id, auth.user_id, &body.session_id, body.prompt.trim()).await?;
    let created = store::create(
        &mut tx,
        &NewRun {
            tenant_id: auth.tenant_id,
            actor_id: auth.user_id,
            request_id: &body.request_id,
            session_id: &body.session_id,
            agent_id: agent,
            provider,
            provider_note: note,
            prompt: body.prompt.trim(),
            context_refs: &body.context_refs,
            target_snapshot_hash: &target,
            capability_snapshot_hash: &capability,
            preferences: &preferences,
            parent_run_id: body.parent_run_id,
            resume_request_id: body.resume_request_id.as_deref(),
            lease_owner: &state.instance_id,
        },
    )
    .await?;
    tx.commit().await?;
    match created {
        Created::New(run) => {
            executor::spawn(state.clone(), auth.tenant_id, run.id);
            Ok(Started::New(run))
        }
        Created::Existing(run) => Ok(Started::Again(run)),
        Created::Taken => Err(AppError::Conflict("this requestId belongs to another run".into())),
    }
}

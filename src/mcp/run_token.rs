//! Run-scoped tokens at `/mcp`: an ACP run's agent calls our tools over standard MCP with the
//! token it got in `session/new` (`mnoterun_<tenant>_<secret>`, minted by the run's executor,
//! only its SHA-256 stored on the run's row).
//!
//! Such a token authenticates only here and only while its run is `running`: it acts as the
//! run's actor in the run's tenant, its tools are the run's tool offer (the agent's
//! capabilities, the tenant's switches, the run's frozen preferences, the KB scope of the
//! run's context), and every call is journaled into the run (`tool.started`/`tool.completed`,
//! source `tool`, the same compact results as `_mnote/tools/call`) through the database, so the
//! run's receipt counts it whichever replica served it. Nothing else: no resources, no
//! `list_knowledge_bases`.

use uuid::Uuid;

use crate::{
    agents::{
        AgentId,
        offer::{self, For},
        preferences::RunPreferences,
        tools::{ToolBox, ToolDef, ToolResult},
    },
    auth::{Auth, Via, tokens},
    db::{Scope, TenantTx},
    error::AppError,
    journal::{
        ContextRefs,
        sink::{EventSink, Limits},
        store,
    },
    state::AppState,
};

/// The run a run-scoped token belongs to, as its tools see it.
#[derive(Clone, Debug)]
pub struct RunScope {
    pub tenant_id: Uuid,
    pub run_id: Uuid,
    pub agent: AgentId,
    pub context: ContextRefs,
    pub preferences: RunPreferences,
}

/// Whether `token` is a run-scoped token (by its form; [`authenticate`] decides the rest).
pub fn is_run_token(token: &str) -> bool {
    token.starts_with(tokens::RUN_PREFIX)
}

/// The actor and run of a live run's token; `Unauthorized` for anything else (a malformed or
/// unknown token, a run that ended, an actor who is no longer a member).
pub async fn authenticate(state: &AppState, token: &str) -> Result<(Auth, RunScope), AppError> {
    let tenant_id = tokens::run_tenant_of(token).ok_or(AppError::Unauthorized)?;
    let mut tx = TenantTx::begin(&state.pool, tenant_id, Scope::System).await?;
    let Some(run) = store::run_of_mcp_token(&mut tx, &tokens::hash(token)).await? else {
        return Err(AppError::Unauthorized);
    };
    let Some(member) = crate::auth::directory::member(&mut tx, run.actor_id).await? else {
        return Err(AppError::Unauthorized);
    };
    tx.commit().await?;
    let agent = run.agent_id;
    let auth = Auth { user_id: run.actor_id, tenant_id, role: member.role, email: member.email, via: Via::Token };
    let scope = RunScope {
        tenant_id,
        run_id: run.id,
        agent,
        context: run.context(),
        preferences: RunPreferences::from_snapshot(&run.preferences),
    };
    Ok((auth, scope))
}

/// The run's tool offer, as its executor computes it ([`offer::offer`]). Switches that cannot be
/// read offer nothing.
pub async fn offered(state: &AppState, auth: &Auth, run: &RunScope) -> Vec<&'static ToolDef> {
    match offer::offer(state, auth, &run.context, For::Run { agent: run.agent, preferences: &run.preferences }).await {
        Ok(o) => o.0,
        Err(e) => {
            tracing::warn!("mcp: the run's tool offer could not be computed, its token gets no tool: {e}");
            Vec::new()
        }
    }
}

/// Call the registry tool `name` for the run: under its actor and context, journaled into it.
pub async fn call(
    state: &AppState,
    auth: &Auth,
    run: &RunScope,
    citation_base: &str,
    name: &str,
    arguments: serde_json::Value,
) -> ToolResult {
    let offered = offered(state, auth, run).await;
    let events = EventSink::db_while_running(
        state.pool.clone(),
        run.tenant_id,
        run.run_id,
        run.agent.into(),
        Limits::of(&state.config.agents),
    );
    let tools =
        ToolBox::for_run_over_mcp(state.clone(), auth.clone(), run.context.clone(), events, citation_base.to_string(), offered);
    let call_id = format!("mcp-{}", &Uuid::new_v4().simple().to_string()[..12]);
    tools.call(&call_id, name, arguments).await
}

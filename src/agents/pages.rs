//! `/settings/agents`: what each agent runs on in this team. Admins set the OpenAI-compatible
//! endpoint, model and API key of `hermes` and `chat_only` (the key is write-only: the page
//! says only whether one is set); members see the same page read-only. `reasonix` runs the
//! operator's ACP command, so it has nothing to set here.

use askama::Template;
use axum::{
    Form,
    extract::{Path, State},
    response::Redirect,
};
use serde::Deserialize;
use tower_sessions::Session;

use super::{
    AgentId, Provider,
    config::{self, AgentView, ConfigInput},
};
use crate::{
    error::{AppError, AppResult},
    state::AppState,
    web::{Page, PageCtx, flash, render},
};

/// `GET /settings/agents`, `POST /settings/agents/{agent}`.
pub fn page_router() -> axum::Router<AppState> {
    use axum::routing::{get, post};
    axum::Router::new().route("/settings/agents", get(agents_page)).route("/settings/agents/{agent}", post(save_form))
}

/// What `view`'s agent runs on, in words (the agent picker and this page say the same).
pub fn runs_on(ctx: &PageCtx, v: &AgentView) -> String {
    let base = match (v.provider, v.provider_note) {
        (Provider::Builtin, Some("not_configured")) => ctx.t("ai.runs_on.builtin_not_configured"),
        (Provider::Builtin, _) => ctx.t("ai.runs_on.builtin"),
        (Provider::OpenAi, _) => ctx.t("ai.runs_on.openai").replace("{model}", v.model.as_deref().unwrap_or("")),
        (Provider::Acp, _) => ctx.t("ai.runs_on.acp"),
    };
    if v.uses_tools { base } else { format!("{base} · {}", ctx.t("ai.no_tools")) }
}

/// One agent's row.
struct AgentRow {
    view: AgentView,
    runs_on: String,
    /// What the operator decides for an agent configured outside the team (`reasonix`).
    operator_note: Option<String>,
}

#[derive(Template)]
#[template(path = "ai/agents.html")]
struct AgentsPage {
    ctx: PageCtx,
    agents: Vec<AgentRow>,
    is_admin: bool,
    allowed: Vec<String>,
    /// Whether the server can store an API key at all (`MNOTE_SECRET_KEY`).
    can_store_keys: bool,
}

pub async fn agents_page(State(state): State<AppState>, page: Page) -> AppResult<axum::response::Response> {
    let views = config::views(&state, &page.auth).await?;
    let ctx = page.ctx;
    let agents = views
        .into_iter()
        .map(|v| {
            let operator_note = (!v.configurable).then(|| match v.provider {
                Provider::Acp => ctx.t("agents.operator_configured"),
                _ => ctx.t("agents.operator_not_configured"),
            });
            AgentRow { runs_on: runs_on(&ctx, &v), operator_note, view: v }
        })
        .collect();
    let is_admin = page.auth.role.is_admin();
    render(AgentsPage {
        ctx,
        agents,
        is_admin,
        allowed: if is_admin { state.config.agents.allowed_urls.clone() } else { Vec::new() },
        can_store_keys: state.config.rag.secret_key.is_some(),
    })
}

#[derive(Debug, Deserialize)]
pub struct SaveForm {
    endpoint_url: String,
    model: String,
    /// Empty: keep the stored key.
    #[serde(default)]
    api_key: String,
    /// `on`: remove the stored key.
    #[serde(default)]
    remove_key: Option<String>,
}

/// `POST /settings/agents/{agent}`: an error of the API (a URL outside the operator's
/// allow-list, no model) comes back as the page's notice.
pub async fn save_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(agent): Path<String>,
    Form(f): Form<SaveForm>,
) -> AppResult<Redirect> {
    let agent = AgentId::parse(&agent).ok_or(AppError::NotFound)?;
    let api_key =
        if f.remove_key.is_some() { Some(String::new()) } else { Some(f.api_key.trim().to_string()).filter(|k| !k.is_empty()) };
    let input = ConfigInput { endpoint_url: f.endpoint_url.trim().to_string(), model: f.model, api_key };
    let msg = match config::put(&state, &page.auth, agent, &input).await {
        Ok(v) => format!("{} · {}", page.ctx.t("agents.saved").replace("{agent}", v.display_name), runs_on(&page.ctx, &v)),
        Err(e @ (AppError::Invalid { .. } | AppError::Upstream(_))) => format!("{}: {e}", page.ctx.t("agents.not_saved")),
        Err(e) => return Err(e),
    };
    flash(&session, msg).await?;
    Ok(Redirect::to("/settings/agents"))
}

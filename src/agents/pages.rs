//! `/settings/agents`: the agent settings, rendered entirely from the caller's descriptors — a
//! common tab (`ai.common.*`) and one tab per agent (`ai.agent.<agentId>.*`), a control per
//! field kind, each error next to its field; for admins also each agent's team configuration
//! (endpoint, models, API key: write-only) and the capability switches. No form here knows an
//! agent: a field added to a descriptor (the registry or the operator's extra fields) shows up
//! and saves like the others. Plain forms without JavaScript; `ai-run.js` switches the tabs
//! and saves the same forms inline through `PATCH /api/page-ai/preferences`.

use std::collections::BTreeMap;

use askama::Template;
use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use serde_json::{Value, json};
use tower_sessions::Session;

use super::{
    AgentId, Provider,
    capabilities::{self, Switches},
    config::{self as agent_config, AdminPatch, AgentView},
    connect::{self, ModelInfo, Preset},
    descriptors::{self, Descriptor, Descriptors, Field, FieldKind},
    preferences, tools,
};
use crate::{
    auth,
    error::{AppError, AppResult},
    state::AppState,
    web::{Page, PageCtx, flash, render},
};

/// `GET /settings/agents`, `POST /settings/agents/{tab}` (`common`, an agent id, or
/// `capabilities`).
pub fn page_router() -> axum::Router<AppState> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/settings/agents", get(agents_page))
        .route("/settings/agents/{tab}", post(save_form))
        .route("/settings/agents/{tab}/connect", post(connect_form))
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

/// One capability switch as the common tab shows it.
struct CapabilityRow {
    id: &'static str,
    label: String,
    enabled: bool,
    /// The tools it groups.
    tools: String,
}

/// One agent's tab.
struct AgentTab {
    d: Descriptor,
    runs_on: String,
    /// The provider preset the connect section shows selected (`custom` when none fits).
    preset: String,
    /// What the last "list models" / "test connection" of this agent found.
    outcome: Option<ConnectOutcome>,
    /// For admins, on the tab of an agent that runs the operator's ACP command: how its file
    /// access is confined here (`(confinement, words)`).
    sandbox: Option<(&'static str, String)>,
    /// The model "Test connection" uses: the one typed for the last test, else the saved
    /// default model.
    test_model: String,
}

/// The result of a check on the settings page, in the reader's language.
pub struct ConnectOutcome {
    ok: bool,
    message: String,
    /// The server's own words (English, without key or URL query), folded away.
    detail: Option<String>,
    /// A successful listing: the models to pick from.
    models: Vec<ModelInfo>,
    /// The agent's current default model (preselected in the list).
    current_model: String,
}

impl AgentTab {
    fn descriptor(&self) -> &Descriptor {
        &self.d
    }
}

/// How the operator's ACP agent is confined here: the confinement's name and the admin
/// page's words for it (`/readyz` says the same in `acpSandbox`).
fn acp_sandbox_words(ctx: &PageCtx, cfg: &crate::config::Config) -> (&'static str, String) {
    let (name, abi) = cfg.agents.acp_confinement();
    (name, ctx.tk("agents.sandbox", name).replace("{abi}", &abi.map(|a| a.to_string()).unwrap_or_default()))
}

/// What a descriptor's agent runs on, in words (the Page AI picker says the same).
pub fn runs_on_words(ctx: &PageCtx, d: &Descriptor) -> String {
    let model = d.fields.iter().find(|f| f.key.ends_with(".model")).map(Field::text).unwrap_or_default();
    let base = match (d.runtime_provider, d.runtime_configured) {
        (Provider::Builtin, false) => ctx.t("ai.runs_on.builtin_not_configured"),
        (Provider::Builtin, true) => ctx.t("ai.runs_on.builtin"),
        (Provider::OpenAi, _) => ctx.t("ai.runs_on.openai").replace("{model}", &model),
        (Provider::Acp, _) => ctx.t("ai.runs_on.acp"),
    };
    if d.tools.is_empty() { format!("{base} · {}", ctx.t("ai.no_tools")) } else { base }
}

#[derive(Template)]
#[template(path = "settings/agents.html")]
struct SettingsPage {
    ctx: PageCtx,
    descriptors: Descriptors,
    tabs: Vec<AgentTab>,
    tab: String,
    errors: BTreeMap<String, String>,
    is_admin: bool,
    allowed: Vec<String>,
    capabilities: Vec<CapabilityRow>,
    /// Whether the server can store an API key at all (`MNOTE_SECRET_KEY`).
    can_store_keys: bool,
    /// The provider presets inside the allow-list.
    presets: Vec<Preset>,
}

#[derive(Debug, Default, Deserialize)]
pub struct TabQuery {
    #[serde(default)]
    tab: Option<String>,
    /// A provider preset whose URL the tab's endpoint field shows (not saved yet).
    #[serde(default)]
    provider: Option<String>,
}

/// What one render adds for the connect section: a preset picked without JavaScript, the
/// outcome of a check.
#[derive(Default)]
struct ConnectExtra {
    preset: Option<(AgentId, Preset)>,
    outcome: Option<(AgentId, ConnectOutcome)>,
    /// The model typed for the test just made, shown again beside the button.
    tested_model: Option<String>,
}

fn known_tab(tab: Option<&str>) -> String {
    match tab {
        Some(t) if AgentId::parse(t).is_some() => t.to_string(),
        _ => "common".to_string(),
    }
}

async fn page_for(
    state: &AppState,
    page: Page,
    tab: String,
    errors: BTreeMap<String, String>,
    attempted: &BTreeMap<String, Value>,
) -> AppResult<Response> {
    page_with(state, page, tab, errors, attempted, ConnectExtra::default()).await
}

async fn page_with(
    state: &AppState,
    page: Page,
    tab: String,
    errors: BTreeMap<String, String>,
    attempted: &BTreeMap<String, Value>,
    mut extra: ConnectExtra,
) -> AppResult<Response> {
    let mut d = descriptors::for_caller(state, &page.auth, page.ctx.lang).await?;
    let is_admin = page.auth.role.is_admin();
    let mut attempted = attempted.clone();
    if let Some((agent, p)) = extra.preset.filter(|_| is_admin) {
        attempted.insert(format!("ai.agent.{}.endpoint_url", agent.as_str()), json!(p.url));
    }
    let attempted = &attempted;
    // A form that failed shows what was typed (never a secret).
    for f in d.common.fields.iter_mut().chain(d.items.iter_mut().flat_map(|x| x.fields.iter_mut())) {
        if let Some(v) = attempted.get(&f.key)
            && !f.secret
        {
            f.value = v.clone();
        }
    }
    let capabilities = if is_admin {
        let switches: Switches = capabilities::get_switches(state, &page.auth).await?;
        capabilities::all()
            .into_iter()
            .map(|c| CapabilityRow {
                id: c.as_str(),
                label: page.ctx.tk("agents.cap", c.as_str()),
                enabled: switches.enabled(c),
                tools: tools::registry().iter().filter(|t| t.capability == c).map(|t| t.name).collect::<Vec<_>>().join(", "),
            })
            .collect()
    } else {
        Vec::new()
    };
    let failed = !errors.is_empty();
    let tabs = d
        .items
        .iter()
        .map(|x| {
            let url_key = format!("ai.agent.{}.endpoint_url", x.agent_id);
            let url = x.field(&url_key).map(Field::text).unwrap_or_default();
            let preset = match extra.preset {
                Some((a, p)) if a.as_str() == x.agent_id => p.id.to_string(),
                _ => connect::preset_of_url(&url).map(|p| p.id.to_string()).unwrap_or_else(|| "custom".to_string()),
            };
            let outcome = match &extra.outcome {
                Some((a, _)) if a.as_str() == x.agent_id => extra.outcome.take().map(|(_, o)| o),
                _ => None,
            };
            let sandbox = (is_admin && x.runtime_provider == Provider::Acp).then(|| acp_sandbox_words(&page.ctx, &state.config));
            let saved_model = x.field(&format!("ai.agent.{}.default_model", x.agent_id)).map(Field::text).unwrap_or_default();
            let test_model = match (&extra.tested_model, &outcome) {
                (Some(m), Some(_)) => m.clone(),
                _ => saved_model,
            };
            AgentTab { runs_on: runs_on_words(&page.ctx, x), d: x.clone(), preset, outcome, sandbox, test_model }
        })
        .collect();
    let resp = render(SettingsPage {
        ctx: page.ctx,
        descriptors: d,
        tabs,
        tab,
        errors,
        is_admin,
        allowed: if is_admin { state.config.agents.allowed_urls.clone() } else { Vec::new() },
        capabilities,
        can_store_keys: state.config.rag.secret_key.is_some(),
        presets: if is_admin { connect::presets(&state.config) } else { Vec::new() },
    })?;
    Ok(if failed { (StatusCode::UNPROCESSABLE_ENTITY, resp).into_response() } else { resp })
}

/// `GET /settings/agents?tab=`
pub async fn agents_page(State(state): State<AppState>, page: Page, Query(q): Query<TabQuery>) -> AppResult<Response> {
    let tab = known_tab(q.tab.as_deref());
    let preset = match (AgentId::parse(&tab), q.provider.as_deref().and_then(connect::preset)) {
        (Some(a), Some(p)) if a.configured_provider() == Provider::OpenAi && connect::presets(&state.config).contains(&p) => {
            Some((a, p))
        }
        _ => None,
    };
    page_with(&state, page, tab, BTreeMap::new(), &BTreeMap::new(), ConnectExtra { preset, outcome: None, tested_model: None })
        .await
}

/// The connect section's buttons.
#[derive(Debug, Deserialize)]
pub struct ConnectForm {
    /// `models` (list the provider's models), `test` (test the connection), `use` (save
    /// `model` as the default model).
    step: String,
    #[serde(default)]
    model: Option<String>,
}

/// `POST /settings/agents/{agent}/connect` (admins): list the models or test the connection
/// with the saved configuration (the page again, with the outcome in words), or save the
/// model picked from the list (back to the tab with a notice).
pub async fn connect_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: crate::auth::ClientIp,
    Path(tab): Path<String>,
    axum::Form(form): axum::Form<ConnectForm>,
) -> AppResult<Response> {
    page.auth.require_admin()?;
    let agent = AgentId::parse(&tab).filter(|a| a.configured_provider() == Provider::OpenAi).ok_or(AppError::NotFound)?;
    let lang = page.ctx.lang;
    if form.step == "use" {
        let model = form.model.as_deref().unwrap_or("");
        let model = match agent_config::check_model(model) {
            Ok(m) => m.to_string(),
            Err(e) => return Err(AppError::invalid("model", e)),
        };
        let mut tx = page.auth.tx(&state).await?;
        let patch = AdminPatch { model: Some(Some(model.clone())), ..AdminPatch::default() };
        agent_config::apply_patch(&mut tx, &page.auth, &ip, agent, patch).await?;
        tx.commit().await?;
        flash(&session, page.ctx.t("agents.connect.model_saved").replace("{model}", &model)).await?;
        return Ok(Redirect::to(&format!("/settings/agents?tab={tab}#connect-{tab}")).into_response());
    }
    let listing = match form.step.as_str() {
        "models" => true,
        "test" => false,
        _ => return Err(AppError::invalid("step", "one of models, test, use")),
    };
    let checked: AppResult<(Found, String)> = async {
        // "Test connection" tries the model typed beside it (none typed: the saved one).
        let typed = if listing { None } else { form.model.as_deref() };
        let t = connect::target(&state, &page.auth, agent, lang, None, None, typed).await?;
        let current = t.model.clone().unwrap_or_default();
        let found = if listing {
            Found::Models(connect::list_models(&t).await?)
        } else {
            Found::Test(connect::test_connection(&t, lang).await?)
        };
        Ok((found, current))
    }
    .await;
    let outcome = match checked {
        Ok((Found::Models(models), current)) => ConnectOutcome {
            ok: true,
            message: page.ctx.t(if models.is_empty() { "agents.connect.no_models" } else { "agents.connect.models_listed" }),
            detail: None,
            models,
            current_model: current,
        },
        Ok((Found::Test(r), current)) => ConnectOutcome {
            ok: true,
            message: page
                .ctx
                .t(if r.reply.is_empty() { "agents.connect.test_ok_empty" } else { "agents.connect.test_ok" })
                .replace("{model}", &r.model)
                .replace("{reply}", &r.reply)
                .replace("{first}", &r.first_token_ms.to_string())
                .replace("{total}", &r.latency_ms.to_string()),
            detail: None,
            models: Vec::new(),
            current_model: current,
        },
        Err(e) => failed_outcome(&page.ctx, listing, &e),
    };
    let status = if outcome.ok { StatusCode::OK } else { StatusCode::UNPROCESSABLE_ENTITY };
    let tested_model = form.model.filter(|m| !listing && !m.trim().is_empty());
    let extra = ConnectExtra { preset: None, outcome: Some((agent, outcome)), tested_model };
    let resp = page_with(&state, page, tab, BTreeMap::new(), &BTreeMap::new(), extra).await?;
    Ok((status, resp).into_response())
}

/// What a check found.
enum Found {
    Models(Vec<ModelInfo>),
    Test(connect::TestResult),
}

/// A failed check in words: the code's sentence (never the bare code), the server's message
/// folded away; a refused URL or a missing model is its own sentence.
fn failed_outcome(ctx: &PageCtx, listing: bool, e: &AppError) -> ConnectOutcome {
    let (message, detail) = match e {
        AppError::Invalid { fields, .. } => (fields.values().next().cloned().unwrap_or_else(|| e.to_string()), None),
        AppError::Provider { code, message } => {
            let words =
                ctx.lang.t_opt(&format!("agents.connect.error.{code}")).unwrap_or_else(|| ctx.t("agents.connect.error.other"));
            let lead = ctx.t(if listing { "agents.connect.list_failed" } else { "agents.connect.test_failed" });
            let gap = if ctx.is_zh() { "" } else { " " };
            (format!("{lead}{gap}{words}"), Some(message.clone()))
        }
        other => (ctx.t("agents.connect.error.other"), Some(other.public_message())),
    };
    ConnectOutcome { ok: false, message, detail, models: Vec::new(), current_model: String::new() }
}

/// The values a settings form sent for `fields`: `(patch, what to show again on error,
/// errors of values that are not even of the field's kind)`. A checkbox that is not ticked
/// sends nothing, so within a submitted section an absent boolean is `false` and an absent
/// multiselect is empty; an empty secret keeps the stored one (its "remove" box clears it);
/// an empty number resets it.
pub fn form_values<'a>(
    fields: impl Iterator<Item = &'a Field>,
    pairs: &[(String, String)],
    reset: bool,
) -> (serde_json::Map<String, Value>, BTreeMap<String, Value>, BTreeMap<String, String>) {
    let mut patch = serde_json::Map::new();
    let mut shown = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for f in fields {
        let all: Vec<&str> = pairs.iter().filter(|(k, _)| *k == f.key).map(|(_, v)| v.as_str()).collect();
        if reset {
            if !f.secret {
                patch.insert(f.key.clone(), Value::Null);
            }
            continue;
        }
        let first = all.first().copied();
        let v = match f.kind {
            FieldKind::Boolean => json!(all.contains(&"true")),
            FieldKind::Multiselect => json!(all.iter().filter(|v| !v.is_empty()).collect::<Vec<_>>()),
            FieldKind::Secret => {
                let remove = pairs.iter().any(|(k, v)| *k == format!("{}.remove", f.key) && v == "on");
                match first.map(str::trim).filter(|s| !s.is_empty()) {
                    Some(s) => json!(s),
                    None if remove => Value::Null,
                    None => continue,
                }
            }
            FieldKind::Number => match first.map(str::trim) {
                None => continue,
                Some("") => Value::Null,
                Some(s) => match s.parse::<f64>() {
                    Ok(n) if n.fract() == 0.0 && n.abs() < 1e15 => json!(n as i64),
                    Ok(n) => json!(n),
                    Err(_) => {
                        errors.insert(f.key.clone(), "a number".to_string());
                        shown.insert(f.key.clone(), json!(s));
                        continue;
                    }
                },
            },
            FieldKind::Select | FieldKind::String => match first {
                None => continue,
                Some(s) => json!(s),
            },
        };
        if !f.secret {
            shown.insert(f.key.clone(), v.clone());
        }
        patch.insert(f.key.clone(), v);
    }
    (patch, shown, errors)
}

/// `POST /settings/agents/{tab}`: the tab's user or admin section (or the capability
/// switches). Saved: back to the tab with a notice. Not saved: the page again (422) with each
/// error next to its field and the values as typed.
pub async fn save_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: crate::auth::ClientIp,
    Path(tab): Path<String>,
    axum::Form(pairs): axum::Form<Vec<(String, String)>>,
) -> AppResult<Response> {
    let lang = page.ctx.lang;
    if tab == "capabilities" {
        let on: Vec<&str> = pairs.iter().filter(|(k, _)| k == "capability").map(|(_, v)| v.as_str()).collect();
        let input: serde_json::Map<String, Value> =
            capabilities::all().into_iter().map(|c| (c.to_string(), json!(on.contains(&c.as_str())))).collect();
        capabilities::patch(&state, &page.auth, &ip, &input).await?;
        flash(&session, page.ctx.t("agents.saved_inline")).await?;
        return Ok(Redirect::to("/settings/agents?tab=common").into_response());
    }
    if tab != "common" && AgentId::parse(&tab).is_none() {
        return Err(AppError::NotFound);
    }
    let admin_section = pairs.iter().any(|(k, v)| k == "section" && v == "admin");
    if admin_section {
        page.auth.require_admin()?;
    }
    let reset = pairs.iter().any(|(k, _)| k == "reset");
    let d = descriptors::for_caller(&state, &page.auth, lang).await?;
    let fields: Vec<&Field> = if tab == "common" {
        d.common.fields.iter().collect()
    } else {
        d.items.iter().filter(|x| x.agent_id == tab).flat_map(|x| x.fields.iter()).collect()
    };
    let fields = fields.into_iter().filter(|f| f.is_admin() == admin_section);
    let (patch, shown, mut errors) = form_values(fields, &pairs, reset);
    if errors.is_empty() {
        match preferences::patch(&state, &page.auth, &ip, lang, &patch).await {
            Ok(p) => {
                if let Some(l) = p.language {
                    match l {
                        Some(code) => session.insert(auth::LOCALE, code).await.map_err(auth::session_err)?,
                        None => {
                            session.remove::<String>(auth::LOCALE).await.map_err(auth::session_err)?;
                        }
                    }
                }
                flash(&session, page.ctx.t("agents.saved_inline")).await?;
                return Ok(Redirect::to(&format!("/settings/agents?tab={tab}")).into_response());
            }
            Err(AppError::Invalid { fields, .. }) => errors = fields,
            Err(e) => return Err(e),
        }
    }
    page_for(&state, page, known_tab(Some(&tab)), errors, &shown).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::web::Lang;

    #[test]
    fn form_pairs_become_a_tri_state_patch() {
        let cfg = Config::for_tests("postgres://x".into(), "/tmp".into(), vec![]);
        let d = descriptors::build(&cfg, &descriptors::Facts::sample(true), Lang::En);
        let hermes = d.get(AgentId::Hermes).unwrap();
        let pairs: Vec<(String, String)> = vec![
            ("ai.agent.hermes.max_tool_rounds".into(), "".into()),
            ("ai.agent.hermes.api_key".into(), "".into()),
            ("ai.agent.hermes.endpoint_url".into(), "http://x".into()),
        ];
        let (patch, _, errors) = form_values(hermes.fields.iter(), &pairs, false);
        assert!(errors.is_empty());
        assert_eq!(patch["ai.agent.hermes.max_tool_rounds"], Value::Null, "empty number: reset");
        assert!(!patch.contains_key("ai.agent.hermes.api_key"), "empty secret: kept");
        assert_eq!(patch["ai.agent.hermes.use_knowledge_rag"], json!(false), "unticked box: false");
        assert!(!patch.contains_key("ai.agent.hermes.model"), "absent select: unchanged");
        let pairs = vec![("ai.agent.hermes.max_tool_rounds".to_string(), "many".to_string())];
        let (_, shown, errors) = form_values(hermes.fields.iter(), &pairs, false);
        assert_eq!(errors["ai.agent.hermes.max_tool_rounds"], "a number");
        assert_eq!(shown["ai.agent.hermes.max_tool_rounds"], json!("many"));
        let (patch, _, _) = form_values(d.common.fields.iter(), &[], true);
        assert!(patch.values().all(Value::is_null) && patch.len() == d.common.fields.len());
    }
}

//! Each user's agent preferences (`mnote.ai_preferences.v1`): the effective value of every
//! descriptor field the caller may see (defaults filled in, secrets as `{"set": bool}`), and a
//! tri-state update (`PATCH {key: value | null}`: a value sets it, `null` resets it to the
//! default, an absent key is unchanged), checked against the descriptor (kind, options,
//! validation, auth) with one error per field. User fields are the user's own rows
//! (`ai_preference`, visible to that user only); admin fields are the team's agent
//! configuration; the UI language is the account's.
//!
//! A run freezes the caller's values at creation ([`snapshot`]: `mnote.ai_run_preferences.v1`
//! with a hash); [`RunPreferences`] reads them back for the runtime.

use std::collections::{BTreeMap, HashMap};

use axum::{Json, extract::State};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    AgentId, PreferenceValue, RunPreferencesSnapshot,
    config::{self as agent_config, AdminPatch},
    descriptors::{
        self, ConfigColumn, Descriptors, FieldAuth, FieldKind, FieldOption, FieldSpec, Storage, all_fields, options_for,
    },
    queries,
};
use crate::{
    auth::Auth,
    auth::directory as tq,
    config::Config,
    error::{ApiJson, AppError, AppResult},
    state::AppState,
    web::Lang,
};

pub const SCHEMA: &str = "mnote.ai_preferences.v1";
pub const RUN_SCHEMA: &str = "mnote.ai_run_preferences.v1";

/// The published JSON Schema of the preferences response.
pub const JSON_SCHEMA: &str = include_str!("../../docs/schemas/mnote.ai_preferences.v1.json");

/// Longest string a field takes when it names no `max`.
const MAX_TEXT: usize = 2000;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PreferencesView {
    pub schema: &'static str,
    pub values: BTreeMap<String, Value>,
}

/// Every value the caller sees in `d`.
pub fn view_of(d: &Descriptors) -> PreferencesView {
    PreferencesView { schema: SCHEMA, values: d.fields().map(|f| (f.key.clone(), f.value.clone())).collect() }
}

/// `value` checked against the field: the value to store (normalized), or why not.
pub fn check(spec: &FieldSpec, options: Option<&[FieldOption]>, value: &Value) -> Result<Value, String> {
    let v = &spec.validation;
    let one_of = |s: &str| -> Result<(), String> {
        match options {
            Some(o) if !o.iter().any(|x| x.value == s) => {
                if o.is_empty() {
                    Err("there is nothing to choose from yet".into())
                } else {
                    Err(format!("one of: {}", o.iter().map(|x| x.value.as_str()).collect::<Vec<_>>().join(", ")))
                }
            }
            _ => Ok(()),
        }
    };
    let text = |s: &str| -> Result<String, String> {
        let t = s.trim();
        let n = t.chars().count();
        let max = v.max.map(|m| m as usize).unwrap_or(MAX_TEXT);
        if let Some(min) = v.min
            && n < min as usize
        {
            return Err(format!("at least {min} characters"));
        }
        if n > max {
            return Err(format!("at most {max} characters"));
        }
        if let Some(p) = &v.pattern
            && !t.is_empty()
            && !regex::Regex::new(p).map(|re| re.is_match(t)).unwrap_or(false)
        {
            return Err(format!("must match {p}"));
        }
        Ok(t.to_string())
    };
    match spec.kind {
        FieldKind::Select => {
            let s = value.as_str().ok_or("a text value (one of the options)")?;
            one_of(s)?;
            Ok(json!(s))
        }
        FieldKind::Multiselect => {
            let a = value.as_array().ok_or("a list of options")?;
            if a.len() > 100 {
                return Err("at most 100 choices".into());
            }
            let mut out: Vec<&str> = Vec::new();
            for x in a {
                let s = x.as_str().ok_or("a list of options (text values)")?;
                one_of(s)?;
                if !out.contains(&s) {
                    out.push(s);
                }
            }
            Ok(json!(out))
        }
        FieldKind::String | FieldKind::Secret => {
            let s = value.as_str().ok_or("a text value")?;
            Ok(json!(text(s)?))
        }
        FieldKind::Boolean => value.as_bool().map(Value::Bool).ok_or_else(|| "true or false".to_string()),
        FieldKind::Number => {
            let n = value.as_f64().ok_or("a number")?;
            if v.integer && n.fract() != 0.0 {
                return Err("a whole number".into());
            }
            if let Some(min) = v.min
                && n < min
            {
                return Err(format!("at least {min}"));
            }
            if let Some(max) = v.max
                && n > max
            {
                return Err(format!("at most {max}"));
            }
            Ok(if v.integer { json!(n as i64) } else { value.clone() })
        }
    }
}

/// One checked change.
enum Change {
    Set(Value),
    Reset,
}

fn pref_aad(tenant: Uuid, user: Uuid, key: &str) -> String {
    format!("mnote:tenant:{tenant}:user:{user}:pref:{key}:v1")
}

fn agent_of_key(key: &str) -> Option<AgentId> {
    key.strip_prefix("ai.agent.")?.split('.').next().and_then(AgentId::parse)
}

/// What [`patch`] changed besides the stored rows.
pub struct Patched {
    pub view: PreferencesView,
    /// The UI language, when the patch set it (`None` inside: back to the browser's).
    pub language: Option<Option<String>>,
}

/// Check every change of `input` first (all or nothing), then apply them in one transaction.
pub async fn patch(
    state: &AppState,
    auth: &Auth,
    ip: &crate::auth::ClientIp,
    lang: Lang,
    input: &serde_json::Map<String, Value>,
) -> AppResult<Patched> {
    let cfg: &Config = &state.config;
    let facts = descriptors::facts(state, auth).await?;
    let specs = all_fields(cfg);
    let mut errors: BTreeMap<String, String> = BTreeMap::new();
    let mut changes: Vec<(&FieldSpec, Change)> = Vec::new();
    for (key, value) in input {
        let Some(spec) = specs.iter().find(|s| &s.key == key) else {
            errors.insert(key.clone(), "unknown setting".into());
            continue;
        };
        if spec.auth == FieldAuth::Admin && !facts.is_admin {
            errors.insert(key.clone(), "only an owner or admin can change this".into());
            continue;
        }
        if value.is_null() {
            changes.push((spec, Change::Reset));
            continue;
        }
        if spec.is_secret() && !facts.can_store_secrets {
            errors.insert(key.clone(), "the server has no secret key (MNOTE_SECRET_KEY) to store secrets with".into());
            continue;
        }
        let options = options_for(spec, &facts, lang);
        match check(spec, options.as_deref(), value) {
            Ok(v) => changes.push((spec, Change::Set(v))),
            Err(m) => {
                errors.insert(key.clone(), m);
            }
        }
    }
    // Admin fields: the endpoint and models must also pass the configuration's own rules.
    let mut admin: HashMap<AgentId, AdminPatch> = HashMap::new();
    let mut language = None;
    for (spec, change) in &changes {
        let text = |c: &Change| match c {
            Change::Set(v) => v.as_str().map(str::trim).filter(|s| !s.is_empty()).map(String::from),
            Change::Reset => None,
        };
        match spec.storage {
            Storage::Config(col) => {
                let Some(agent) = agent_of_key(&spec.key) else { continue };
                let p = admin.entry(agent).or_default();
                match col {
                    ConfigColumn::EndpointUrl => match text(change) {
                        None => p.endpoint_url = Some(None),
                        Some(u) => match agent_config::check_endpoint_in(cfg, &u, lang) {
                            Ok(u) => p.endpoint_url = Some(Some(u)),
                            Err(m) => {
                                errors.insert(spec.key.clone(), m);
                            }
                        },
                    },
                    ConfigColumn::DefaultModel => match text(change) {
                        None => p.model = Some(None),
                        Some(m) => match agent_config::check_model(&m) {
                            Ok(m) => p.model = Some(Some(m.to_string())),
                            Err(e) => {
                                errors.insert(spec.key.clone(), e.into());
                            }
                        },
                    },
                    ConfigColumn::ExtraModels => {
                        let raw = text(change).unwrap_or_default();
                        let mut models: Vec<String> = Vec::new();
                        for m in raw.split(',').map(str::trim).filter(|m| !m.is_empty()) {
                            match agent_config::check_model(m) {
                                Ok(m) if !models.iter().any(|x| x == m) => models.push(m.to_string()),
                                Ok(_) => {}
                                Err(e) => {
                                    errors.insert(spec.key.clone(), e.into());
                                }
                            }
                        }
                        if models.len() > 20 {
                            errors.insert(spec.key.clone(), "at most 20 models".into());
                        }
                        p.extra_models = Some(models);
                    }
                    ConfigColumn::ApiKey => match text(change) {
                        None => p.api_key = Some(None),
                        Some(k) => p.api_key = Some(Some(agent_config::seal_key(cfg, auth.tenant_id, agent, &k)?)),
                    },
                }
            }
            Storage::Locale => {
                language = Some(text(change).filter(|l| l != "auto"));
            }
            Storage::Preference => {}
        }
    }
    if !errors.is_empty() {
        let message = format!("{} setting(s) could not be saved", errors.len());
        return Err(AppError::Invalid { message, fields: errors });
    }
    let mut tx = auth.tx(state).await?;
    for (spec, change) in &changes {
        if spec.storage != Storage::Preference {
            continue;
        }
        match change {
            Change::Reset => queries::reset_preference(&mut tx, auth.user_id, &spec.key).await?,
            Change::Set(v) if spec.is_secret() => {
                let master = cfg.rag.secret_key.as_ref().ok_or_else(|| AppError::Upstream("no secret key".into()))?;
                let plain = v.as_str().unwrap_or_default();
                let sealed = master.seal(plain.as_bytes(), pref_aad(auth.tenant_id, auth.user_id, &spec.key).as_bytes());
                queries::set_secret_preference(&mut tx, auth.tenant_id, auth.user_id, &spec.key, &sealed).await?;
            }
            Change::Set(v) => queries::set_preference(&mut tx, auth.tenant_id, auth.user_id, &spec.key, v).await?,
        }
    }
    for a in AgentId::ALL {
        if let Some(p) = admin.remove(&a).filter(|p| !p.is_empty()) {
            agent_config::apply_patch(&mut tx, auth, ip, a, p).await?;
        }
    }
    if let Some(l) = &language {
        tq::set_locale(&mut *tx, auth.user_id, l.as_deref()).await?;
    }
    tx.commit().await?;
    let d = descriptors::for_caller(state, auth, lang).await?;
    Ok(Patched { view: view_of(&d), language })
}

/// `GET /api/page-ai/preferences`
pub async fn get_handler(State(state): State<AppState>, auth: Auth, lang: Lang) -> AppResult<Json<PreferencesView>> {
    Ok(Json(view_of(&descriptors::for_caller(&state, &auth, lang).await?)))
}

/// `PATCH /api/page-ai/preferences`
pub async fn patch_handler(
    State(state): State<AppState>,
    auth: Auth,
    ip: crate::auth::ClientIp,
    lang: Lang,
    ApiJson(input): ApiJson<serde_json::Map<String, Value>>,
) -> AppResult<Json<PreferencesView>> {
    Ok(Json(patch(&state, &auth, &ip, lang, &input).await?.view))
}

// ---- what a run freezes ----

/// The values a run of `agent` freezes: the user fields of `ai.common` and of that agent (no
/// secrets, no team configuration), with the SHA-256 of their canonical JSON. A field value
/// that is not a preference value (a checked field never holds one) is an error naming it.
pub fn snapshot(d: &Descriptors, agent: AgentId) -> AppResult<RunPreferencesSnapshot> {
    let scope = format!("ai.agent.{}.", agent.as_str());
    let mut values = BTreeMap::new();
    for f in d.fields().filter(|f| f.auth == FieldAuth::User && !f.secret) {
        if f.key.starts_with("ai.common.") || f.key.starts_with(&scope) {
            let v = PreferenceValue::deserialize(&f.value)
                .map_err(|e| anyhow::anyhow!("the preference {} does not hold a preference value: {e}", f.key))?;
            values.insert(f.key.clone(), v);
        }
    }
    Ok(RunPreferencesSnapshot::of(values))
}

/// A run's frozen preferences, read back.
#[derive(Debug, Clone, Default)]
pub struct RunPreferences {
    pub values: BTreeMap<String, PreferenceValue>,
}

impl RunPreferences {
    /// From the run's `preferences` column.
    pub fn from_snapshot(s: &RunPreferencesSnapshot) -> RunPreferences {
        RunPreferences { values: s.values.clone() }
    }

    fn agent_value(&self, agent: AgentId, name: &str) -> Option<&PreferenceValue> {
        self.values.get(&format!("ai.agent.{}.{name}", agent.as_str()))
    }

    /// What the runtime is tuned with.
    pub fn tuning(&self, agent: AgentId) -> agent_config::Tuning {
        agent_config::Tuning {
            model: self.agent_value(agent, "model").and_then(PreferenceValue::as_str).map(String::from),
            max_tool_rounds: self.agent_value(agent, "max_tool_rounds").and_then(PreferenceValue::as_u64).map(|n| n as usize),
        }
    }

    /// Whether the user wants the knowledge-RAG tools in runs of `agent` (default yes).
    pub fn use_knowledge_rag(&self, agent: AgentId) -> bool {
        self.agent_value(agent, "use_knowledge_rag").and_then(PreferenceValue::as_bool).unwrap_or(true)
    }

    /// The values of `ai.common` and the agent's scope (handed to an ACP agent).
    pub fn for_agent(&self, agent: AgentId) -> BTreeMap<String, PreferenceValue> {
        let scope = format!("ai.agent.{}.", agent.as_str());
        self.values
            .iter()
            .filter(|(k, _)| k.starts_with("ai.common.") || k.starts_with(&scope))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::descriptors::{Label, OptionsSource, Validation};

    fn spec(kind: FieldKind, validation: Validation) -> FieldSpec {
        FieldSpec {
            key: "ai.common.x".into(),
            label: Label::Key("x"),
            help: None,
            kind,
            default: Value::Null,
            options: Vec::new(),
            options_source: None,
            auth: FieldAuth::User,
            validation,
            storage: Storage::Preference,
        }
    }

    #[test]
    fn values_are_checked_by_kind_options_and_validation() {
        let opts =
            vec![FieldOption { value: "a".into(), label: "A".into() }, FieldOption { value: "b".into(), label: "B".into() }];
        let sel = spec(FieldKind::Select, Validation::default());
        assert_eq!(check(&sel, Some(&opts), &json!("a")), Ok(json!("a")));
        assert!(check(&sel, Some(&opts), &json!("c")).unwrap_err().contains("one of: a, b"));
        assert!(check(&sel, Some(&opts), &json!(1)).is_err());
        let multi =
            FieldSpec { options_source: Some(OptionsSource::VisibleKbs), ..spec(FieldKind::Multiselect, Validation::default()) };
        assert_eq!(check(&multi, Some(&opts), &json!(["b", "a", "b"])), Ok(json!(["b", "a"])));
        assert!(check(&multi, Some(&opts), &json!(["z"])).is_err());
        let num = spec(FieldKind::Number, Validation { min: Some(1.0), max: Some(4.0), pattern: None, integer: true });
        assert_eq!(check(&num, None, &json!(3)), Ok(json!(3)));
        assert!(check(&num, None, &json!(5)).unwrap_err().contains("at most 4"));
        assert!(check(&num, None, &json!(2.5)).unwrap_err().contains("whole"));
        assert!(check(&num, None, &json!("3")).is_err());
        let s = spec(
            FieldKind::String,
            Validation { min: Some(1.0), max: Some(8.0), pattern: Some("^[a-z]+$".into()), integer: false },
        );
        assert_eq!(check(&s, None, &json!(" abc ")), Ok(json!("abc")));
        assert!(check(&s, None, &json!("ABC")).unwrap_err().contains("must match"));
        assert!(check(&s, None, &json!("abcdefghij")).unwrap_err().contains("at most 8"));
        assert!(check(&spec(FieldKind::Boolean, Validation::default()), None, &json!("yes")).is_err());
    }

    #[test]
    fn the_snapshot_hash_follows_the_values() {
        let cfg = Config::for_tests("postgres://x".into(), "/tmp".into(), vec![]);
        let mut f = crate::agents::descriptors::tests::facts(false);
        let a = snapshot(&descriptors::build(&cfg, &f, Lang::En), AgentId::Hermes).unwrap();
        assert_eq!(serde_json::to_value(&a).unwrap()["schema"], RUN_SCHEMA);
        assert_eq!(a.values["ai.common.default_agent"], "hermes".into());
        assert!(!a.values.contains_key("ai.agent.reasonix.profile_id"), "only the run's agent");
        f.stored.insert("ai.common.citation_style".into(), descriptors::Stored::Value(json!("footnotes")));
        let b = snapshot(&descriptors::build(&cfg, &f, Lang::En), AgentId::Hermes).unwrap();
        assert_ne!(a.hash, b.hash);
        let p = RunPreferences::from_snapshot(&b);
        assert!(p.use_knowledge_rag(AgentId::Hermes));
        assert_eq!(p.tuning(AgentId::Hermes).max_tool_rounds, Some(cfg.agents.max_tool_rounds));
    }
}

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
    AgentId, Provider,
    capabilities::{self, Switches},
    config::{self as agent_config, AgentConfigRow},
    queries,
    tools::{self, ToolDef},
};
use crate::{auth::Auth, config::Config, error::AppResult, grants, kbs, state::AppState, tenants::queries as tq, web::Lang};

pub const SCHEMA: &str = "mnote.ai_agent_descriptors.v1";
pub const ITEM_SCHEMA: &str = "mnote.ai_agent_descriptor.v1";
pub const COMMON_SCOPE: &str = "ai.common";

/// The published JSON Schema of the descriptors response.
pub const JSON_SCHEMA: &str = include_str!("../../docs/schemas/mnote.ai_agent_descriptors.v1.json");

/// The control a field gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FieldKind {
    Select,
    Multiselect,
    String,
    Boolean,
    Number,
    Secret,
}

impl FieldKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldKind::Select => "select",
            FieldKind::Multiselect => "multiselect",
            FieldKind::String => "string",
            FieldKind::Boolean => "boolean",
            FieldKind::Number => "number",
            FieldKind::Secret => "secret",
        }
    }
}

/// Who may set a field: every member for themselves, or owners/admins for the team.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FieldAuth {
    User,
    Admin,
}

/// Options the server resolves for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OptionsSource {
    /// The knowledge bases the caller can read.
    VisibleKbs,
    /// The models the team's admin configured for the agent.
    ConfiguredModels,
}

/// Where a field's value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// The user's own preference row (`ai_preference`).
    Preference,
    /// The account's UI language (`app_user.locale`: a person has one language in every team).
    Locale,
    /// The team's configuration of an agent (`agent_config`), admins only.
    Config(ConfigColumn),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigColumn {
    EndpointUrl,
    DefaultModel,
    ExtraModels,
    ApiKey,
}

/// A label: a catalogue key (built-in fields) or the operator's own words (extra fields).
#[derive(Debug, Clone, PartialEq)]
pub enum Label {
    Key(&'static str),
    Text { en: String, zh: String },
}

impl Label {
    pub fn in_lang(&self, lang: Lang) -> String {
        match self {
            Label::Key(k) => lang.t(k),
            Label::Text { en, zh } => {
                if lang == Lang::ZhCn && !zh.is_empty() {
                    zh.clone()
                } else {
                    en.clone()
                }
            }
        }
    }

    fn same(s: &str) -> Label {
        Label::Text { en: s.to_string(), zh: s.to_string() }
    }
}

/// `min`/`max` (numbers: the value; strings: the length in characters), `pattern` (strings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Validation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Numbers: whole numbers only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub integer: bool,
}

impl Validation {
    fn is_empty(&self) -> bool {
        self.min.is_none() && self.max.is_none() && self.pattern.is_none() && !self.integer
    }
}

/// One setting as the registry defines it.
#[derive(Debug, Clone)]
pub struct FieldSpec {
    pub key: String,
    pub label: Label,
    pub help: Option<Label>,
    pub kind: FieldKind,
    pub default: Value,
    pub options: Vec<(String, Label)>,
    pub options_source: Option<OptionsSource>,
    pub auth: FieldAuth,
    pub validation: Validation,
    pub storage: Storage,
}

impl FieldSpec {
    fn user(key: &str, label: &'static str, kind: FieldKind, default: Value) -> FieldSpec {
        FieldSpec {
            key: key.to_string(),
            label: Label::Key(label),
            help: None,
            kind,
            default,
            options: Vec::new(),
            options_source: None,
            auth: FieldAuth::User,
            validation: Validation::default(),
            storage: Storage::Preference,
        }
    }

    fn admin(agent: AgentId, name: &str, label: &'static str, kind: FieldKind, column: ConfigColumn) -> FieldSpec {
        FieldSpec {
            auth: FieldAuth::Admin,
            storage: Storage::Config(column),
            ..FieldSpec::user(&format!("ai.agent.{}.{name}", agent.as_str()), label, kind, Value::Null)
        }
    }

    fn help(mut self, key: &'static str) -> Self {
        self.help = Some(Label::Key(key));
        self
    }

    fn options(mut self, opts: Vec<(String, Label)>) -> Self {
        self.options = opts;
        self
    }

    fn source(mut self, s: OptionsSource) -> Self {
        self.options_source = Some(s);
        self
    }

    fn validation(mut self, min: Option<f64>, max: Option<f64>, pattern: Option<&str>) -> Self {
        self.validation = Validation { min, max, pattern: pattern.map(String::from), integer: self.kind == FieldKind::Number };
        self
    }

    pub fn is_secret(&self) -> bool {
        self.kind == FieldKind::Secret
    }

    /// The scope the key lives in (`ai.common`, `ai.agent.hermes`).
    pub fn scope(&self) -> &str {
        match self.key.rfind('.') {
            Some(i) => &self.key[..i],
            None => &self.key,
        }
    }
}

pub const CITATION_STYLES: [&str; 2] = ["inline", "footnotes"];

/// The LightRAG modes a user may pick for the built-in assistant (`auto`: mix, then naive),
/// with their labels (explained, in both languages).
pub const RAG_MODES: [(&str, &str); 6] = [
    ("auto", "assistant.rag_mode_option.auto"),
    ("mix", "assistant.rag_mode_option.mix"),
    ("hybrid", "assistant.rag_mode_option.hybrid"),
    ("local", "assistant.rag_mode_option.local"),
    ("global", "assistant.rag_mode_option.global"),
    ("naive", "assistant.rag_mode_option.naive"),
];
pub const UI_LANGUAGES: [&str; 3] = ["auto", "en", "zh-CN"];

/// The `ai.common.*` fields.
pub fn common_fields() -> Vec<FieldSpec> {
    use FieldKind::*;
    vec![
        FieldSpec::user("ai.common.default_agent", "agents.field.default_agent", Select, json!("hermes"))
            .options(AgentId::ALL.iter().map(|a| (a.as_str().to_string(), Label::same(a.display_name()))).collect())
            .help("agents.help.default_agent"),
        FieldSpec::user("ai.common.default_kbs", "agents.field.default_kbs", Multiselect, json!([]))
            .source(OptionsSource::VisibleKbs)
            .help("agents.help.default_kbs"),
        FieldSpec::user("ai.common.citation_style", "agents.field.citation_style", Select, json!("inline"))
            .options(CITATION_STYLES.iter().map(|s| (s.to_string(), Label::Key(citation_label(s)))).collect())
            .help("agents.help.citation_style"),
        FieldSpec {
            storage: Storage::Locale,
            ..FieldSpec::user("ai.common.ui_language", "agents.field.ui_language", Select, json!("auto"))
                .options(UI_LANGUAGES.iter().map(|s| (s.to_string(), Label::Key(language_label(s)))).collect())
        },
    ]
}

fn citation_label(s: &str) -> &'static str {
    match s {
        "footnotes" => "agents.option.citation_footnotes",
        _ => "agents.option.citation_inline",
    }
}

fn language_label(s: &str) -> &'static str {
    match s {
        "en" => "agents.option.lang_en",
        "zh-CN" => "agents.option.lang_zh",
        _ => "agents.option.lang_auto",
    }
}

/// The capabilities an agent has by nature (`chat_only` has none: no tools).
pub fn agent_capabilities(agent: AgentId) -> Vec<&'static str> {
    if agent.uses_tools() { capabilities::all() } else { Vec::new() }
}

/// The `ai.agent.<agentId>.*` fields of the static registry.
pub fn agent_fields(cfg: &Config, agent: AgentId) -> Vec<FieldSpec> {
    use FieldKind::*;
    let id = agent.as_str();
    let key = |name: &str| format!("ai.agent.{id}.{name}");
    let mut out = Vec::new();
    if agent.configured_provider() == Provider::OpenAi {
        out.push(
            FieldSpec::user(&key("model"), "agents.field.model", Select, Value::Null)
                .source(OptionsSource::ConfiguredModels)
                .help("agents.help.model"),
        );
    }
    if agent == AgentId::Reasonix {
        out.push(
            FieldSpec::user(&key("profile_id"), "agents.field.profile_id", String, json!("default"))
                .validation(Some(1.0), Some(64.0), Some("^[A-Za-z0-9_.-]+$"))
                .help("agents.help.profile_id"),
        );
    }
    if agent.uses_tools() {
        let max = cfg.agents.max_tool_rounds as f64;
        if agent.configured_provider() == Provider::OpenAi {
            out.push(
                FieldSpec::user(
                    &key("max_tool_rounds"),
                    "agents.field.max_tool_rounds",
                    Number,
                    json!(cfg.agents.max_tool_rounds),
                )
                .validation(Some(1.0), Some(max), None)
                .help("agents.help.max_tool_rounds"),
            );
        }
        out.push(
            FieldSpec::user(&key("use_knowledge_rag"), "agents.field.use_knowledge_rag", Boolean, json!(true))
                .help("agents.help.use_knowledge_rag"),
        );
        // Advanced (folded away on the settings page): how the built-in assistant asks LightRAG.
        out.push(
            FieldSpec::user(&key("knowledge_rag_mode"), "assistant.rag_mode", Select, json!("auto"))
                .options(RAG_MODES.iter().map(|(v, l)| (v.to_string(), Label::Key(l))).collect())
                .help("assistant.rag_mode_help"),
        );
    }
    if agent.configured_provider() == Provider::OpenAi {
        out.push(
            FieldSpec::admin(agent, "endpoint_url", "agents.endpoint", String, ConfigColumn::EndpointUrl)
                .validation(None, Some(2000.0), Some("^https?://"))
                .help("agents.help.endpoint_url"),
        );
        out.push(
            FieldSpec::admin(agent, "default_model", "agents.field.default_model", String, ConfigColumn::DefaultModel)
                .validation(None, Some(200.0), None),
        );
        out.push(
            FieldSpec::admin(agent, "extra_models", "agents.field.extra_models", String, ConfigColumn::ExtraModels)
                .validation(None, Some(1000.0), None)
                .help("agents.help.extra_models"),
        );
        out.push(FieldSpec::admin(agent, "api_key", "agents.api_key", Secret, ConfigColumn::ApiKey).validation(
            Some(1.0),
            Some(4096.0),
            None,
        ));
    }
    out
}

// ---- the operator's extra fields ----

/// One field the operator adds (`MNOTE_AGENT_EXTRA_FIELDS`, a JSON array of these): always a
/// user preference of `ai.common.*` or `ai.agent.<agentId>.*`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraField {
    pub key: String,
    pub label: ExtraLabel,
    pub kind: FieldKind,
    #[serde(default)]
    pub default: Value,
    #[serde(default)]
    pub options: Vec<ExtraOption>,
    #[serde(default)]
    pub options_source: Option<OptionsSource>,
    #[serde(default)]
    pub validation: Validation,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraLabel {
    pub en: String,
    #[serde(default, rename = "zh-CN")]
    pub zh_cn: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraOption {
    pub value: String,
    pub label: ExtraLabel,
}

fn key_re() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"^ai\.(common|agent\.(hermes|reasonix|chat_only))\.[a-z0-9_]{1,60}$").expect("valid"))
}

/// The operator's extra fields, checked: a bad definition is an error naming it.
pub fn extra_fields(cfg: &Config) -> Result<Vec<FieldSpec>, String> {
    let Some(raw) = cfg.agents.extra_fields.as_deref().filter(|s| !s.trim().is_empty()) else { return Ok(Vec::new()) };
    let defs: Vec<ExtraField> = serde_json::from_str(raw).map_err(|e| format!("MNOTE_AGENT_EXTRA_FIELDS: {e}"))?;
    let builtin: Vec<String> =
        common_fields().into_iter().chain(AgentId::ALL.iter().flat_map(|a| agent_fields(cfg, *a))).map(|f| f.key).collect();
    let mut out: Vec<FieldSpec> = Vec::new();
    for d in defs {
        if !key_re().is_match(&d.key) {
            return Err(format!("MNOTE_AGENT_EXTRA_FIELDS: {} is not an ai.common.* or ai.agent.<agentId>.* key", d.key));
        }
        if builtin.contains(&d.key) || out.iter().any(|f| f.key == d.key) {
            return Err(format!("MNOTE_AGENT_EXTRA_FIELDS: {} is defined twice", d.key));
        }
        if let Some(p) = &d.validation.pattern {
            regex::Regex::new(p).map_err(|e| format!("MNOTE_AGENT_EXTRA_FIELDS: {}: pattern: {e}", d.key))?;
        }
        let listed = matches!(d.kind, FieldKind::Select | FieldKind::Multiselect);
        if listed && d.options.is_empty() && d.options_source.is_none() {
            return Err(format!("MNOTE_AGENT_EXTRA_FIELDS: {} needs options or optionsSource", d.key));
        }
        let spec = FieldSpec {
            key: d.key.clone(),
            label: Label::Text { en: d.label.en, zh: d.label.zh_cn },
            help: None,
            kind: d.kind,
            default: d.default,
            options: d.options.into_iter().map(|o| (o.value, Label::Text { en: o.label.en, zh: o.label.zh_cn })).collect(),
            options_source: d.options_source,
            auth: FieldAuth::User,
            validation: d.validation,
            storage: Storage::Preference,
        };
        out.push(spec);
    }
    Ok(out)
}

/// Every field the registry defines (common first, then each agent's), the operator's extra
/// fields included (a bad definition is logged and left out).
pub fn all_fields(cfg: &Config) -> Vec<FieldSpec> {
    let extras = extra_fields(cfg).unwrap_or_else(|e| {
        tracing::warn!("{e}; the extra fields are left out");
        Vec::new()
    });
    let mut out = common_fields();
    out.extend(extras.iter().filter(|f| f.scope() == COMMON_SCOPE).cloned());
    for a in AgentId::ALL {
        out.extend(agent_fields(cfg, a));
        let scope = format!("ai.agent.{}", a.as_str());
        out.extend(extras.iter().filter(|f| f.scope() == scope).cloned());
    }
    out
}

// ---- what the merge reads ----

/// A stored preference: its value, or only that a secret is set.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    Value(Value),
    Secret,
}

/// Everything the descriptors are merged from, read in one tenant transaction as the caller.
#[derive(Debug, Clone)]
pub struct Facts {
    pub is_admin: bool,
    /// The KBs the caller can read: `(id, name)`.
    pub kbs: Vec<(Uuid, String)>,
    pub configs: HashMap<AgentId, AgentConfigRow>,
    pub switches: Switches,
    pub stored: BTreeMap<String, Stored>,
    /// The account's UI language (`None`: from the browser).
    pub locale: Option<String>,
    /// The caller's active grants: `(root path, permission)`.
    pub grants: Vec<(String, String)>,
    /// Whether the server can seal secrets (`MNOTE_SECRET_KEY`).
    pub can_store_secrets: bool,
}

/// The caller's facts, read on the read replica when it may serve them (`db::read`).
pub async fn facts(state: &AppState, auth: &Auth) -> AppResult<Facts> {
    facts_tx(auth.read_tx(state).await?, &state.config, auth).await
}

/// [`facts`] with only a pool and the configuration (the CLI's self-test).
pub async fn facts_in(pool: &sqlx::PgPool, cfg: &Config, auth: &Auth) -> AppResult<Facts> {
    facts_tx(auth.tx_pool(pool).await?, cfg, auth).await
}

async fn facts_tx(mut tx: crate::db::TenantTx, cfg: &Config, auth: &Auth) -> AppResult<Facts> {
    let kbs =
        kbs::queries::list(&mut tx, auth.user_id, auth.role.is_admin()).await?.into_iter().map(|k| (k.id, k.name)).collect();
    let mut configs = HashMap::new();
    for a in AgentId::ALL {
        if let Some(row) = agent_config::load(&mut tx, a).await? {
            configs.insert(a, row);
        }
    }
    let switches = capabilities::load(&mut tx).await?;
    let stored = queries::preferences(&mut tx, auth.user_id)
        .await?
        .into_iter()
        .map(|r| {
            let v = match (r.value, r.secret_cipher) {
                (_, Some(_)) => Stored::Secret,
                (Some(v), None) => Stored::Value(v),
                (None, None) => Stored::Value(Value::Null),
            };
            (r.key, v)
        })
        .collect();
    let grants =
        grants::queries::active_for_user(&mut tx, auth.user_id).await?.into_iter().map(|g| (g.root_path, g.permission)).collect();
    let locale = tq::user_by_id(&mut *tx, auth.user_id).await?.and_then(|u| u.locale);
    tx.commit().await?;
    Ok(Facts {
        is_admin: auth.role.is_admin(),
        kbs,
        configs,
        switches,
        stored,
        locale,
        grants,
        can_store_secrets: cfg.rag.secret_key.is_some(),
    })
}

impl Facts {
    /// The models an admin configured for `agent`: its default model, then the extra ones.
    pub fn models(&self, agent: AgentId) -> Vec<String> {
        self.configs.get(&agent).map(AgentConfigRow::models).unwrap_or_default()
    }

    /// Facts without a database (the self-test, unit tests): one KB, one grant, nothing
    /// configured or stored, everything switched on.
    pub fn sample(is_admin: bool) -> Facts {
        Facts {
            is_admin,
            kbs: vec![(Uuid::from_u128(7), "Handbook".into())],
            configs: HashMap::new(),
            switches: Switches::all_on(),
            stored: BTreeMap::new(),
            locale: None,
            grants: vec![("/data/team".into(), "read".into())],
            can_store_secrets: true,
        }
    }
}

fn agent_of_key(key: &str) -> Option<AgentId> {
    key.strip_prefix("ai.agent.")?.split('.').next().and_then(AgentId::parse)
}

// ---- the merged result ----

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FieldOption {
    pub value: String,
    pub label: String,
}

/// One field as the caller sees it, with its effective value.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Field {
    pub key: String,
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    pub kind: FieldKind,
    pub default: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<FieldOption>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options_source: Option<OptionsSource>,
    pub auth: FieldAuth,
    pub secret: bool,
    #[serde(skip_serializing_if = "Validation::is_empty")]
    pub validation: Validation,
    /// The caller's effective value (the default when unset); a secret is `{"set": bool}`.
    pub value: Value,
}

impl Field {
    pub fn is_admin(&self) -> bool {
        self.auth == FieldAuth::Admin
    }

    /// The value as a form shows it (strings as they are, numbers without `.0`).
    pub fn text(&self) -> String {
        match &self.value {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            Value::Number(n) => n.to_string(),
            other => other.to_string(),
        }
    }

    pub fn is_on(&self) -> bool {
        self.value == Value::Bool(true)
    }

    pub fn secret_set(&self) -> bool {
        self.value.get("set") == Some(&Value::Bool(true))
    }

    /// Whether `option` is the value (select) or among the values (multiselect).
    pub fn has(&self, option: &str) -> bool {
        match &self.value {
            Value::String(s) => s == option,
            Value::Array(a) => a.iter().any(|v| v.as_str() == Some(option)),
            _ => false,
        }
    }

    pub fn options_list(&self) -> &[FieldOption] {
        self.options.as_deref().unwrap_or(&[])
    }

    /// `min`/`max` as a form attribute (`""` when unset).
    pub fn min_attr(&self) -> String {
        self.validation.min.map(fmt_num).unwrap_or_default()
    }

    pub fn max_attr(&self) -> String {
        self.validation.max.map(fmt_num).unwrap_or_default()
    }

    pub fn pattern_attr(&self) -> String {
        self.validation.pattern.clone().unwrap_or_default()
    }
}

fn fmt_num(n: f64) -> String {
    if n.fract() == 0.0 { format!("{}", n as i64) } else { n.to_string() }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolView {
    pub name: &'static str,
    pub function_name: &'static str,
    pub capability_ids: Vec<&'static str>,
    pub enabled: bool,
    pub description: &'static str,
    pub input_schema: &'static Value,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRoot {
    pub path: String,
    pub permission: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextDefaults {
    pub kb_ids: Vec<Uuid>,
}

/// `mnote.ai_agent_descriptor.v1`
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub schema: &'static str,
    pub agent_id: &'static str,
    pub display_name: &'static str,
    /// The provider the agent runs on once configured (`openai`, `acp`).
    pub provider: Provider,
    /// What runs of it use now (`builtin` while it is not configured).
    pub runtime_provider: Provider,
    pub runtime_configured: bool,
    /// The capabilities it has in this team (switched-off ones are not listed).
    pub capabilities: Vec<&'static str>,
    /// Every capability of the agent: `enabled` or `disabled` (switched off by an admin).
    pub capability_states: BTreeMap<&'static str, &'static str>,
    pub disabled_capabilities: Vec<&'static str>,
    pub default_context_refs: ContextDefaults,
    /// What the agent may reach on disk: the caller's active grants (none without tools).
    pub allowed_roots: Vec<AllowedRoot>,
    pub setting_scopes: Vec<String>,
    pub fields: Vec<Field>,
    pub tools: Vec<ToolView>,
}

impl Descriptor {
    pub fn field(&self, key: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.key == key)
    }

    pub fn user_fields(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(|f| !f.is_admin())
    }

    pub fn admin_fields(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(|f| f.is_admin())
    }

    pub fn has_admin_fields(&self) -> bool {
        self.fields.iter().any(|f| f.is_admin())
    }

    pub fn capability_enabled(&self, cap: &str) -> bool {
        self.capabilities.contains(&cap)
    }
}

/// The `ai.common` settings shared by every agent.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonSettings {
    pub setting_scopes: Vec<String>,
    pub fields: Vec<Field>,
}

/// `mnote.ai_agent_descriptors.v1`
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Descriptors {
    pub schema: &'static str,
    pub common: CommonSettings,
    pub items: Vec<Descriptor>,
}

impl Descriptors {
    pub fn get(&self, agent: AgentId) -> Option<&Descriptor> {
        self.items.iter().find(|d| d.agent_id == agent.as_str())
    }

    /// Every field the caller sees, common ones first.
    pub fn fields(&self) -> impl Iterator<Item = &Field> {
        self.common.fields.iter().chain(self.items.iter().flat_map(|d| d.fields.iter()))
    }

    pub fn value(&self, key: &str) -> Option<&Value> {
        self.fields().find(|f| f.key == key).map(|f| &f.value)
    }

    /// The caller's default agent.
    pub fn default_agent(&self) -> AgentId {
        self.value("ai.common.default_agent").and_then(Value::as_str).and_then(AgentId::parse).unwrap_or(AgentId::Hermes)
    }

    /// The caller's default KBs (empty: every KB they can read).
    pub fn default_kbs(&self) -> Vec<Uuid> {
        self.value("ai.common.default_kbs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|v| v.as_str()).filter_map(|s| Uuid::parse_str(s).ok()).collect())
            .unwrap_or_default()
    }
}

/// A field's options for the caller (static, or resolved from its source).
pub fn options_for(spec: &FieldSpec, facts: &Facts, lang: Lang) -> Option<Vec<FieldOption>> {
    let agent = agent_of_key(&spec.key);
    match spec.options_source {
        Some(OptionsSource::VisibleKbs) => {
            Some(facts.kbs.iter().map(|(id, name)| FieldOption { value: id.to_string(), label: name.clone() }).collect())
        }
        Some(OptionsSource::ConfiguredModels) => Some(
            agent
                .map(|a| facts.models(a))
                .unwrap_or_default()
                .into_iter()
                .map(|m| FieldOption { label: m.clone(), value: m })
                .collect(),
        ),
        None if spec.options.is_empty() => None,
        None => Some(spec.options.iter().map(|(v, l)| FieldOption { value: v.clone(), label: l.in_lang(lang) }).collect()),
    }
}

/// The default the caller gets (a model field defaults to the agent's configured model).
pub fn default_for(spec: &FieldSpec, facts: &Facts) -> Value {
    match (spec.options_source, agent_of_key(&spec.key)) {
        (Some(OptionsSource::ConfiguredModels), Some(a)) => facts.models(a).first().map(|m| json!(m)).unwrap_or(Value::Null),
        _ => spec.default.clone(),
    }
}

/// Whether a stored value still fits the field (an option that went away, a KB no longer
/// visible): the part that fits, or `None` for the default.
fn still_valid(spec: &FieldSpec, options: Option<&[FieldOption]>, v: &Value) -> Option<Value> {
    let known = |s: &str| options.is_none_or(|o| o.iter().any(|x| x.value == s));
    match spec.kind {
        FieldKind::Select => v.as_str().filter(|s| known(s)).map(|s| json!(s)),
        FieldKind::Multiselect => {
            let a = v.as_array()?;
            Some(Value::Array(a.iter().filter(|x| x.as_str().is_some_and(known)).cloned().collect()))
        }
        FieldKind::Boolean => v.as_bool().map(Value::Bool),
        FieldKind::Number => v.as_f64().map(|_| v.clone()),
        FieldKind::String => v.as_str().map(|s| json!(s)),
        FieldKind::Secret => None,
    }
}

/// The effective value of `spec` for the caller.
pub fn value_for(spec: &FieldSpec, facts: &Facts, options: Option<&[FieldOption]>) -> Value {
    let agent = agent_of_key(&spec.key);
    let row = agent.and_then(|a| facts.configs.get(&a));
    match spec.storage {
        Storage::Locale => json!(facts.locale.clone().unwrap_or_else(|| "auto".into())),
        Storage::Config(c) => match c {
            ConfigColumn::EndpointUrl => json!(row.and_then(|r| r.endpoint_url.clone()).unwrap_or_default()),
            ConfigColumn::DefaultModel => json!(row.and_then(|r| r.model.clone()).unwrap_or_default()),
            ConfigColumn::ExtraModels => json!(row.map(|r| r.extra_models.join(", ")).unwrap_or_default()),
            ConfigColumn::ApiKey => json!({"set": row.is_some_and(|r| r.api_key_cipher.is_some())}),
        },
        Storage::Preference if spec.is_secret() => json!({"set": facts.stored.get(&spec.key) == Some(&Stored::Secret)}),
        Storage::Preference => match facts.stored.get(&spec.key) {
            Some(Stored::Value(v)) => still_valid(spec, options, v).unwrap_or_else(|| default_for(spec, facts)),
            _ => default_for(spec, facts),
        },
    }
}

/// A field for the caller, or `None` when it is an admin field and the caller is a member.
pub fn resolve_field(spec: &FieldSpec, facts: &Facts, lang: Lang) -> Option<Field> {
    if spec.auth == FieldAuth::Admin && !facts.is_admin {
        return None;
    }
    let options = options_for(spec, facts, lang);
    let value = value_for(spec, facts, options.as_deref());
    Some(Field {
        key: spec.key.clone(),
        label: spec.label.in_lang(lang),
        help: spec.help.as_ref().map(|h| h.in_lang(lang)),
        kind: spec.kind,
        default: if spec.is_secret() { json!({"set": false}) } else { default_for(spec, facts) },
        options,
        options_source: spec.options_source,
        auth: spec.auth,
        secret: spec.is_secret(),
        validation: spec.validation.clone(),
        value,
    })
}

fn tool_view(d: &'static ToolDef, switches: &Switches) -> ToolView {
    ToolView {
        name: d.name,
        function_name: &d.function_name,
        capability_ids: vec![d.capability],
        enabled: switches.enabled(d.capability),
        description: d.description,
        input_schema: &d.parameters,
    }
}

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
            let capability_states: BTreeMap<&'static str, &'static str> =
                own.iter().map(|c| (*c, if facts.switches.enabled(c) { "enabled" } else { "disabled" })).collect();
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
                capabilities: own.iter().copied().filter(|c| facts.switches.enabled(c)).collect(),
                disabled_capabilities: own.iter().copied().filter(|c| !facts.switches.enabled(c)).collect(),
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
pub(crate) mod tests {
    use super::*;

    pub fn facts(admin: bool) -> Facts {
        Facts::sample(admin)
    }

    fn cfg() -> Config {
        Config::for_tests("postgres://x".into(), "/tmp".into(), vec![])
    }

    #[test]
    fn three_agents_with_their_tools_and_admin_fields_only_for_admins() {
        let cfg = cfg();
        let member = build(&cfg, &facts(false), Lang::En);
        let ids: Vec<&str> = member.items.iter().map(|d| d.agent_id).collect();
        assert_eq!(ids, ["hermes", "reasonix", "chat_only"]);
        let hermes = member.get(AgentId::Hermes).unwrap();
        assert_eq!(hermes.tools.len(), tools::registry().len());
        assert!(hermes.fields.iter().all(|f| f.auth == FieldAuth::User), "{:?}", hermes.fields);
        assert!(member.get(AgentId::ChatOnly).unwrap().tools.is_empty());
        assert!(member.get(AgentId::ChatOnly).unwrap().allowed_roots.is_empty());
        assert_eq!(hermes.allowed_roots[0].path, "/data/team");
        let admin = build(&cfg, &facts(true), Lang::En);
        let key = admin.get(AgentId::Hermes).unwrap().field("ai.agent.hermes.api_key").unwrap();
        assert_eq!(key.value, json!({"set": false}));
        assert!(key.secret);
        let kbs = admin.common.fields.iter().find(|f| f.key == "ai.common.default_kbs").unwrap();
        assert_eq!(kbs.options.as_ref().unwrap()[0].label, "Handbook");
    }

    #[test]
    fn a_switched_off_capability_is_disabled_with_its_tools() {
        let mut f = facts(false);
        f.switches.0.insert(tools::CAPABILITY_KNOWLEDGE_RAG, false);
        let d = build(&cfg(), &f, Lang::En);
        let r = d.get(AgentId::Reasonix).unwrap();
        assert_eq!(r.capability_states["knowledge_rag"], "disabled");
        assert!(!r.capabilities.contains(&"knowledge_rag"));
        assert_eq!(r.disabled_capabilities, ["knowledge_rag"]);
        for t in &r.tools {
            assert_eq!(t.enabled, !t.name.starts_with("mnote.knowledge_rag."), "{}", t.name);
        }
    }

    #[test]
    fn stored_values_that_no_longer_fit_fall_back_to_the_default() {
        let mut f = facts(false);
        f.stored.insert("ai.common.default_agent".into(), Stored::Value(json!("gone")));
        f.stored.insert("ai.common.default_kbs".into(), Stored::Value(json!([Uuid::from_u128(7), Uuid::from_u128(8)])));
        let d = build(&cfg(), &f, Lang::En);
        assert_eq!(d.default_agent(), AgentId::Hermes);
        assert_eq!(d.default_kbs(), [Uuid::from_u128(7)]);
    }

    #[test]
    fn extra_fields_are_checked() {
        let mut c = cfg();
        c.agents.extra_fields = Some(r#"[{"key": "ai.agent.reasonix.tone", "label": {"en": "Tone", "zh-CN": "语气"}, "kind": "select", "default": "plain", "options": [{"value": "plain", "label": {"en": "Plain"}}]}]"#.into());
        let f = extra_fields(&c).unwrap();
        assert_eq!(f[0].scope(), "ai.agent.reasonix");
        let d = build(&c, &facts(false), Lang::ZhCn);
        assert_eq!(d.get(AgentId::Reasonix).unwrap().field("ai.agent.reasonix.tone").unwrap().label, "语气");
        c.agents.extra_fields = Some(r#"[{"key": "ai.agent.nobody.x", "label": {"en": "X"}, "kind": "string"}]"#.into());
        assert!(extra_fields(&c).is_err());
        c.agents.extra_fields = Some(r#"[{"key": "ai.common.default_agent", "label": {"en": "X"}, "kind": "string"}]"#.into());
        assert!(extra_fields(&c).unwrap_err().contains("twice"));
    }
}

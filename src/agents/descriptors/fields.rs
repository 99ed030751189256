//! The static agent registry: the field specifications, common and per agent.

#[allow(unused_imports)]
use super::*;

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
    pub(super) fn is_empty(&self) -> bool {
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
    pub(super) fn user(key: &str, label: &'static str, kind: FieldKind, default: Value) -> FieldSpec {
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

    pub(super) fn admin(agent: AgentId, name: &str, label: &'static str, kind: FieldKind, column: ConfigColumn) -> FieldSpec {
        FieldSpec {
            auth: FieldAuth::Admin,
            storage: Storage::Config(column),
            ..FieldSpec::user(&format!("ai.agent.{}.{name}", agent.as_str()), label, kind, Value::Null)
        }
    }

    pub(super) fn help(mut self, key: &'static str) -> Self {
        self.help = Some(Label::Key(key));
        self
    }

    pub(super) fn options(mut self, opts: Vec<(String, Label)>) -> Self {
        self.options = opts;
        self
    }

    pub(super) fn source(mut self, s: OptionsSource) -> Self {
        self.options_source = Some(s);
        self
    }

    pub(super) fn validation(mut self, min: Option<f64>, max: Option<f64>, pattern: Option<&str>) -> Self {
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

/// An agent's name in both languages (`agents.name.<id>`, e.g. "Chat only", "仅对话").
fn agent_label(a: AgentId) -> Label {
    let name = |lang: Lang| lang.agent_name(a.as_str(), a.display_name());
    Label::Text { en: name(Lang::En), zh: name(Lang::ZhCn) }
}

/// The `ai.common.*` fields.
pub fn common_fields() -> Vec<FieldSpec> {
    use FieldKind::*;
    vec![
        FieldSpec::user("ai.common.default_agent", "agents.field.default_agent", Select, json!("hermes"))
            .options(AgentId::ALL.iter().map(|a| (a.as_str().to_string(), agent_label(*a))).collect())
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

pub(super) fn citation_label(s: &str) -> &'static str {
    match s {
        "footnotes" => "agents.option.citation_footnotes",
        _ => "agents.option.citation_inline",
    }
}

pub(super) fn language_label(s: &str) -> &'static str {
    match s {
        "en" => "agents.option.lang_en",
        "zh-CN" => "agents.option.lang_zh",
        _ => "agents.option.lang_auto",
    }
}

/// The capabilities an agent has by nature (`chat_only` has none: no tools).
pub fn agent_capabilities(agent: AgentId) -> Vec<crate::ai::Capability> {
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
        // The order an admin works in: where, the key, then which model.
        out.push(FieldSpec::admin(agent, "api_key", "agents.api_key", Secret, ConfigColumn::ApiKey).validation(
            Some(1.0),
            Some(4096.0),
            None,
        ));
        out.push(
            FieldSpec::admin(agent, "default_model", "agents.field.default_model", String, ConfigColumn::DefaultModel)
                .validation(None, Some(200.0), None),
        );
        out.push(
            FieldSpec::admin(agent, "extra_models", "agents.field.extra_models", String, ConfigColumn::ExtraModels)
                .validation(None, Some(1000.0), None)
                .help("agents.help.extra_models"),
        );
    }
    out
}

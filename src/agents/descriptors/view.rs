//! The merged result: fields with their options and values, tools, descriptors.

#[allow(unused_imports)]
use super::*;

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

pub(super) fn fmt_num(n: f64) -> String {
    if n.fract() == 0.0 { format!("{}", n as i64) } else { n.to_string() }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolView {
    pub name: &'static str,
    pub function_name: &'static str,
    pub capability_ids: Vec<Capability>,
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
    pub capabilities: Vec<Capability>,
    /// Every capability of the agent: `enabled` or `disabled` (switched off by an admin).
    pub capability_states: BTreeMap<Capability, &'static str>,
    pub disabled_capabilities: Vec<Capability>,
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

    pub fn capability_enabled(&self, cap: Capability) -> bool {
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
pub(super) fn still_valid(spec: &FieldSpec, options: Option<&[FieldOption]>, v: &Value) -> Option<Value> {
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

pub(super) fn tool_view(d: &'static ToolDef, switches: &Switches) -> ToolView {
    ToolView {
        name: d.name,
        function_name: &d.function_name,
        capability_ids: vec![d.capability],
        enabled: switches.enabled(d.capability),
        description: d.description,
        input_schema: &d.parameters,
    }
}

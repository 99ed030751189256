//! The operator's extra fields (`MNOTE_AGENT_EXTRA_FIELDS`), parsed and checked.

#[allow(unused_imports)]
use super::*;

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

pub(super) fn key_re() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        let agents = AgentId::alternation();
        regex::Regex::new(&format!(r"^ai\.(common|agent\.({agents}))\.[a-z0-9_]{{1,60}}$")).expect("valid")
    })
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

//! What the assistant's compact panel on the KB and viewer pages shows
//! (`templates/ai/panel.html`): a small type in `web`, so the pages that include the panel
//! (`kbs`, `viewer`) name no run module. `runs` renders the same words on `/ai`.

use uuid::Uuid;

use super::Lang;
use crate::ai::AgentId;

/// The agents a panel (and `/ai`) offers: wire id and display name, from [`AgentId::ALL`].
pub fn agents() -> Vec<(&'static str, &'static str)> {
    AgentId::ALL.iter().map(|a| (a.as_str(), a.display_name())).collect()
}

/// A fresh id for a form: the `requestId` of the run the form will create, or a session's id.
pub fn fresh_id() -> String {
    Uuid::new_v4().to_string()
}

/// The tool error codes the catalogue has words for (`assist.tool_error.<code>`).
pub const TOOL_ERRORS: &[&str] = &[
    "unknown_tool",
    "invalid_arguments",
    "not_found",
    "too_many_calls",
    "knowledge_rag_unavailable",
    "knowledge_rag_timeout",
    "knowledge_rag_unauthorized",
    "knowledge_rag_bad_response",
    "internal",
];

/// A failed tool call in the reader's words (never the raw code or the server's English).
pub fn tool_error_words(lang: Lang, code: &str) -> String {
    lang.t_opt(&format!("assist.tool_error.{code}")).unwrap_or_else(|| lang.t("assist.tool_error.other"))
}

/// What the agent with wire id `agent` is, in one line of `lang` (the picker's option).
pub fn about(lang: Lang, agent: &str) -> String {
    lang.t(&format!("assist.about.{agent}"))
}

/// The tools the catalogue has words for (`ai.tool_label.<name with _ for .>`); the agents'
/// registry test checks it names every registered tool.
pub const TOOL_LABELS: &[&str] = &[
    "mnote.evidence.search",
    "mnote.evidence.open",
    "mnote.evidence.read",
    "mnote.evidence.outline",
    "mnote.knowledge_rag.query",
    "mnote.knowledge_rag.open_reference",
];

/// A tool's name in words, in the page's language (`ai.tool_label.mnote_evidence_search`);
/// a tool the catalogue does not know keeps its own name.
pub fn tool_label(lang: Lang, name: &str) -> String {
    lang.t_opt(&format!("ai.tool_label.{}", name.replace('.', "_"))).unwrap_or_else(|| name.to_string())
}

/// The words `ai-run.js` shows, in the page's language (`data-labels` of the component).
pub fn labels(lang: Lang) -> String {
    const KEYS: &[&str] = &[
        "status.pending",
        "status.running",
        "status.completed",
        "status.failed",
        "status.cancelled",
        "status.interrupted",
        "tool.running",
        "tool.ok",
        "tool.failed",
        "plan",
        "tools",
        "cancel",
        "cancelling",
        "resume",
        "no_runs",
        "start_failed",
        "network",
        "run_gone",
        "changed_files",
        "runs_on.builtin_not_configured",
        "runs_on.builtin",
        "runs_on.openai",
        "runs_on.openai_run",
        "runs_on.acp",
        "no_tools",
        "results",
        "how_made",
    ];
    let mut map: serde_json::Map<String, serde_json::Value> =
        KEYS.iter().map(|k| (k.to_string(), serde_json::Value::String(lang.t(&format!("ai.{k}"))))).collect();
    for (id, name) in agents() {
        map.insert(format!("agent.{id}"), serde_json::Value::String(lang.agent_name(id, name)));
        map.insert(format!("about.{id}"), serde_json::Value::String(about(lang, id)));
    }
    map.insert("results_one".into(), serde_json::Value::String(lang.t("assist.result_one")));
    map.insert("tool_error.other".into(), serde_json::Value::String(lang.t("assist.tool_error.other")));
    for code in TOOL_ERRORS {
        map.insert(format!("tool_error.{code}"), serde_json::Value::String(tool_error_words(lang, code)));
    }
    map.insert("run_error.other".into(), serde_json::Value::String(lang.t("assist.run_error.other")));
    for name in TOOL_LABELS {
        map.insert(format!("tool_label.{name}"), serde_json::Value::String(tool_label(lang, name)));
    }
    serde_json::Value::Object(map).to_string()
}

/// What the compact panel of another page puts in context, and the words it shows.
pub struct AiPanel {
    /// Which page's session this is (`kb:<id>`, `source:<id>`): a run resumes on the page it
    /// was started from.
    pub scope: String,
    pub kb_id: Option<Uuid>,
    pub source_id: Option<Uuid>,
    /// Where a form error sends a browser without JavaScript.
    pub back: String,
    /// `data-labels`: [`labels`] in the page's language.
    pub labels: String,
    /// The run this form creates, and the conversation (session) it starts.
    pub request_id: String,
    pub session_id: String,
    pub agents: Vec<(&'static str, &'static str)>,
}

impl AiPanel {
    fn new(lang: Lang, scope: String, kb_id: Option<Uuid>, source_id: Option<Uuid>, back: String) -> AiPanel {
        AiPanel {
            scope,
            kb_id,
            source_id,
            back,
            labels: labels(lang),
            request_id: fresh_id(),
            session_id: fresh_id(),
            agents: agents(),
        }
    }

    /// The KB page: that knowledge base.
    pub fn for_kb(lang: Lang, kb: Uuid) -> AiPanel {
        AiPanel::new(lang, format!("kb:{kb}"), Some(kb), None, format!("/kbs/{kb}"))
    }

    /// The viewer (`/sources/{id}/view`): the open document; its KB is looked up when the run
    /// is created (the form) or by the script (`/api/sources/{id}`).
    pub fn for_source(lang: Lang, id: Uuid) -> AiPanel {
        AiPanel::new(lang, format!("source:{id}"), None, Some(id), format!("/sources/{id}/view"))
    }
}

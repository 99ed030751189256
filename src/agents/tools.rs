//! The one tool registry: every MNote tool an agent can call, defined once (name, function
//! name, description, JSON Schema of its input), and [`ToolBox`], which executes calls
//! in-process under the run actor's grants and KB visibility, journals
//! `tool.started`/`tool.completed`, and records what each call returned for the receipt.
//!
//! (Interface first; the implementation lands with the builtin runtime.)

use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::{
    auth::Auth,
    journal::{ContextRefs, ErrorBody, sink::EventSink},
    state::AppState,
};

/// One tool as offered to agents.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDef {
    /// `mnote.evidence.search`
    pub name: &'static str,
    /// The same name as OpenAI function names allow it (`mnote_evidence_search`).
    pub function_name: &'static str,
    pub description: &'static str,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// The capability the tool belongs to (`evidence`, `knowledge_rag`).
    pub capability: &'static str,
}

/// Every tool of the registry.
pub fn registry() -> &'static [ToolDef] {
    &[]
}

/// What one call returned, compactly (for the receipt and `tool.completed`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    pub call_id: String,
    pub name: String,
    pub ok: bool,
    pub count: Option<usize>,
    pub evidence_ids: Vec<Uuid>,
}

/// The result of a call, for the agent.
#[derive(Debug, Clone)]
pub struct ToolResult {
    pub ok: bool,
    /// The typed output serialized for the model (or `{"error": {code, message}}`).
    pub content: Value,
    pub evidence_ids: Vec<Uuid>,
    pub error: Option<ErrorBody>,
}

/// A run's tools: the registry filtered to what this run may use, bound to its actor.
pub struct ToolBox {
    #[allow(dead_code)]
    state: AppState,
    actor: Auth,
    context: ContextRefs,
    #[allow(dead_code)]
    events: EventSink,
    offered: Vec<&'static ToolDef>,
    calls: Mutex<Vec<ToolCallRecord>>,
}

impl ToolBox {
    /// `enabled = false` (chat_only): no tools at all.
    pub async fn prepare(state: AppState, actor: Auth, context: ContextRefs, events: EventSink, enabled: bool) -> Self {
        let offered = if enabled { registry().iter().collect() } else { Vec::new() };
        ToolBox { state, actor, context, events, offered, calls: Mutex::new(Vec::new()) }
    }

    pub fn actor(&self) -> &Auth {
        &self.actor
    }

    pub fn context(&self) -> &ContextRefs {
        &self.context
    }

    /// The tools this run may call.
    pub fn offered(&self) -> &[&'static ToolDef] {
        &self.offered
    }

    /// Call `name` (dotted or function name) with `arguments`; never panics, errors come back
    /// as a failed [`ToolResult`].
    pub async fn call(&self, call_id: &str, name: &str, arguments: Value) -> ToolResult {
        let _ = (call_id, arguments);
        ToolResult {
            ok: false,
            content: serde_json::json!({"error": {"code": "unknown_tool", "message": name}}),
            evidence_ids: Vec::new(),
            error: Some(ErrorBody { code: "unknown_tool".into(), message: format!("no tool named {name}") }),
        }
    }

    /// `citationMarkdown` of an evidence id the actor may see (from this run's results, else
    /// looked up); `None` when it does not exist or is not visible.
    pub async fn citation(&self, evidence_id: Uuid) -> Option<String> {
        let _ = evidence_id;
        None
    }

    /// `text` with every `[evidence:<uuid>]` marker a model or agent wrote replaced by that
    /// evidence's `citationMarkdown` link (markers naming evidence the actor cannot see stay
    /// as they are, so verification flags them).
    pub async fn link_citations(&self, text: &str) -> String {
        text.to_string()
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<ToolCallRecord> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

//! The one tool registry: every MNote tool an agent can call, defined once (name, function
//! name, description, JSON Schema of its typed arguments), and [`ToolBox`], which executes
//! calls in-process under the run actor's grants and KB visibility, journals
//! `tool.started`/`tool.completed`, and records what each call returned for the receipt.
//!
//! The arguments are agent-facing: what to look for, never where — the run's context
//! (`contextRefs`) decides the knowledge bases, and the actor's rights decide what is visible.
//! What a tool returns to the model is compact typed JSON (quotes, evidence ids, citation
//! links), never raw provider chunks.
//!
//! The registry itself (names, capabilities, typed arguments and outputs) is in `registry`, the
//! tools' implementations in `run`; every public item is re-exported here.

use std::{collections::HashMap, sync::Mutex};

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::citations::{self, Found};
use crate::{
    auth::Auth,
    error::AppError,
    evidence::tools::ReadRequest,
    journal::{ContextRefs, ErrorBody, Event, EventSource, ToolCompleted, ToolStarted, sink::EventSink},
    search::open,
    state::AppState,
};

mod rag_stream;
mod registry;
mod run;

pub use registry::{
    CAPABILITY_EVIDENCE, CAPABILITY_KNOWLEDGE_RAG, EvidenceHit, Located, OPEN, OUTLINE, OpenArgs, OpenOutput, OutlineArgs,
    RAG_OPEN_REFERENCE, RAG_QUERY, READ, RagMode, RagOpenArgs, RagQueryArgs, RagQueryOutput, RagReference, ReadArgs, ReadBlock,
    ReadOutput, SEARCH, SearchArgs, SearchOutput, ToolDef, lookup, output_of, output_schema, parameters, registry,
};

/// `tool.started` keeps at most this much of the arguments.
const MAX_ARGUMENT_BYTES: usize = 2048;

// ---- calls ----

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

/// A successful call.
struct Done {
    content: Value,
    count: Option<usize>,
    evidence_ids: Vec<Uuid>,
    summary: String,
}

fn failure(code: &str, message: impl Into<String>) -> ErrorBody {
    ErrorBody { code: code.into(), message: message.into() }
}

/// An error of a service function as the agent sees it: a stable code and a message that
/// never carries server internals.
fn from_app(e: AppError) -> ErrorBody {
    let code = match e.code() {
        "invalid_input" => "invalid_arguments",
        c => c,
    };
    if e.status().is_server_error() {
        tracing::warn!(code, "tool call failed: {e:#}");
    }
    failure(code, e.public_message())
}

fn parse<T: serde::de::DeserializeOwned>(arguments: Value) -> Result<T, ErrorBody> {
    // A model that sends no arguments at all sends `null` or `""`.
    let arguments = match arguments {
        Value::Null => json!({}),
        Value::String(s) if s.trim().is_empty() => json!({}),
        // Some agents send the arguments as a JSON string.
        Value::String(s) => serde_json::from_str(&s).map_err(|e| failure("invalid_arguments", e.to_string()))?,
        v => v,
    };
    serde_json::from_value(arguments).map_err(|e| failure("invalid_arguments", e.to_string()))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The arguments as `tool.started` records them: as sent, or a prefix when they are large.
fn capped_arguments(arguments: &Value) -> Value {
    let s = arguments.to_string();
    if s.len() <= MAX_ARGUMENT_BYTES {
        return arguments.clone();
    }
    let mut end = MAX_ARGUMENT_BYTES - 64;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    json!({"truncated": true, "bytes": s.len(), "prefix": &s[..end]})
}

/// A run's tools: the registry filtered to what this run may use, bound to its actor.
/// [`ToolBox::detached`] is the same without a run (MCP): nothing journaled, and results carry
/// absolute citation URLs and locators.
pub struct ToolBox {
    state: AppState,
    actor: Auth,
    context: ContextRefs,
    /// The run's journal (`None`: detached).
    events: Option<EventSink>,
    /// Detached: the absolute base of citation URLs (`MNOTE_PUBLIC_URL`, else the request's
    /// origin); results then carry `citationUrl` + `locator` and absolute `citationMarkdown`.
    citation_base: Option<String>,
    offered: Vec<&'static ToolDef>,
    calls: Mutex<Vec<ToolCallRecord>>,
    /// `citationMarkdown` of every evidence id this run's tools returned.
    cited: Mutex<HashMap<Uuid, String>>,
}

impl ToolBox {
    /// `enabled = false` (chat_only): no tools at all. The evidence tools otherwise, and the
    /// knowledge-RAG tools when a KB of the context (every visible KB when the context names
    /// none) has an active LightRAG binding.
    pub async fn prepare(state: AppState, actor: Auth, context: ContextRefs, events: EventSink, enabled: bool) -> Self {
        let offered = if enabled { Self::offered_for(&state, &actor, &context).await } else { Vec::new() };
        ToolBox {
            state,
            actor,
            context,
            events: Some(events),
            citation_base: None,
            offered,
            calls: Mutex::new(Vec::new()),
            cited: Mutex::new(HashMap::new()),
        }
    }

    /// The actor's tools outside a run (MCP): every KB the actor can read, the registry tools
    /// `offered` (see [`ToolBox::offered_for`]), no journal; citations are absolute URLs under
    /// `citation_base`.
    pub fn detached(state: AppState, actor: Auth, citation_base: String, offered: Vec<&'static ToolDef>) -> Self {
        let context = ContextRefs::default();
        ToolBox {
            state,
            actor,
            context,
            events: None,
            citation_base: Some(citation_base.trim_end_matches('/').to_string()),
            offered,
            calls: Mutex::new(Vec::new()),
            cited: Mutex::new(HashMap::new()),
        }
    }

    /// A run's tools as its agent calls them over MCP with the run's token (`mcp::run_token`):
    /// the run's actor, context and tool offer, calls journaled into the run through `events`
    /// like [`ToolBox::call`] everywhere, results with absolute citation URLs and locators
    /// under `citation_base` like [`ToolBox::detached`].
    pub fn for_run_over_mcp(
        state: AppState,
        actor: Auth,
        context: ContextRefs,
        events: EventSink,
        citation_base: String,
        offered: Vec<&'static ToolDef>,
    ) -> Self {
        ToolBox {
            state,
            actor,
            context,
            events: Some(events),
            citation_base: Some(citation_base.trim_end_matches('/').to_string()),
            offered,
            calls: Mutex::new(Vec::new()),
            cited: Mutex::new(HashMap::new()),
        }
    }

    /// The tools `actor` may use in `context`: the evidence tools, and the knowledge-RAG tools
    /// when a KB of the context (every visible KB when it names none) has an active binding.
    pub async fn offered_for(state: &AppState, actor: &Auth, context: &ContextRefs) -> Vec<&'static ToolDef> {
        let mut offered: Vec<&'static ToolDef> = registry().iter().filter(|d| d.capability == CAPABILITY_EVIDENCE).collect();
        match Self::rag_bound(state, actor, context).await {
            Ok(true) => offered.extend(registry().iter().filter(|d| d.capability == CAPABILITY_KNOWLEDGE_RAG)),
            Ok(false) => {}
            Err(e) => tracing::warn!("tool box: knowledge-RAG bindings could not be read, its tools are left out: {e}"),
        }
        offered
    }

    /// The same tools limited to `context` (its KBs searched, its sources first): a detached
    /// tool box for one KB (`mnote bench answers`).
    pub fn within(mut self, context: ContextRefs) -> Self {
        self.context = context;
        self
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

    /// Keep only the tools of `capabilities` (what the tenant's capability switches and the
    /// user's preferences leave): the others are neither offered nor callable.
    pub fn restrict(mut self, capabilities: &[&str]) -> Self {
        self.offered.retain(|d| capabilities.contains(&d.capability));
        self
    }

    /// Call `name` (dotted or function name) with `arguments`; never panics, errors come back
    /// as a failed [`ToolResult`] (`unknown_tool`, `invalid_arguments`, `not_found`, …).
    pub async fn call(&self, call_id: &str, name: &str, arguments: Value) -> ToolResult {
        let def = self.offered.iter().copied().find(|d| d.name == name || d.function_name == name);
        let shown = def.map(|d| d.name.to_string()).unwrap_or_else(|| truncate_chars(name, 100));
        self.journal_started(call_id, &shown, &arguments).await;
        let outcome = match def {
            Some(d) => self.execute(d, arguments).await,
            None => Err(failure("unknown_tool", format!("no tool named {shown} is offered to this run"))),
        };
        self.journal_outcome(call_id, shown, outcome).await
    }

    async fn journal_started(&self, call_id: &str, shown: &str, arguments: &Value) {
        let started =
            ToolStarted { call_id: call_id.to_string(), name: shown.to_string(), arguments: capped_arguments(arguments) };
        if let Some(events) = &self.events
            && let Err(e) = events.emit(EventSource::Tool, Event::ToolStarted(started)).await
        {
            tracing::warn!("tool.started not journaled: {e}");
        }
    }

    /// Journal `tool.completed` for a call's outcome, record it for the receipt, and return it.
    async fn journal_outcome(&self, call_id: &str, shown: String, outcome: Result<Done, ErrorBody>) -> ToolResult {
        let (result, completed) = match outcome {
            Ok(done) => (
                ToolResult { ok: true, content: done.content, evidence_ids: done.evidence_ids.clone(), error: None },
                ToolCompleted {
                    call_id: call_id.to_string(),
                    name: shown.clone(),
                    ok: true,
                    count: done.count,
                    evidence_ids: done.evidence_ids,
                    summary: Some(done.summary),
                    error: None,
                },
            ),
            Err(error) => (
                ToolResult {
                    ok: false,
                    content: json!({"error": {"code": error.code, "message": error.message}}),
                    evidence_ids: Vec::new(),
                    error: Some(error.clone()),
                },
                ToolCompleted {
                    call_id: call_id.to_string(),
                    name: shown.clone(),
                    ok: false,
                    count: None,
                    evidence_ids: Vec::new(),
                    summary: None,
                    error: Some(error),
                },
            ),
        };
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).push(ToolCallRecord {
            call_id: call_id.to_string(),
            name: shown,
            ok: result.ok,
            count: completed.count,
            evidence_ids: result.evidence_ids.clone(),
        });
        if let Some(events) = &self.events
            && let Err(e) = events.emit(EventSource::Tool, Event::ToolCompleted(completed)).await
        {
            tracing::warn!("tool.completed not journaled: {e}");
        }
        result
    }

    /// Run an offered tool without journaling or recording it (a detached tool box: MCP): the
    /// same argument parsing, validation, service calls and typed output as [`ToolBox::call`].
    /// The error codes are the tools' (`invalid_arguments`, `not_found`, `unknown_tool`, …).
    pub async fn run(&self, name: &str, arguments: Value) -> Result<Value, ErrorBody> {
        let def = self.offered.iter().copied().find(|d| d.name == name || d.function_name == name);
        match def {
            Some(d) => self.execute(d, arguments).await.map(|done| done.content),
            None => Err(failure("unknown_tool", format!("no tool named {} is offered", truncate_chars(name, 100)))),
        }
    }

    /// Detached: the absolute viewer URL of `action`, the citation of `title` at `locator`
    /// with it, and the locator; a run's tool box keeps `citation` as it is.
    fn locate(
        &self,
        title: &str,
        locator: &crate::evidence::Locator,
        action: &open::OpenAction,
        citation: String,
    ) -> (String, Located) {
        let Some(base) = &self.citation_base else {
            return (citation, Located::default());
        };
        let url = action.absolute_url.clone().unwrap_or_else(|| format!("{base}{}", action.url));
        let citation = open::citation_markdown(title, &locator.place(), &url);
        (citation, Located { citation_url: Some(url), locator: Some(locator.clone()) })
    }

    /// Each tool's future is boxed: the service futures behind them (LightRAG's HTTP client,
    /// the search core) are deep types, and a runtime that awaits `call` inside its own
    /// `Send` future would otherwise overflow the compiler's auto-trait recursion limit.
    async fn execute(&self, def: &ToolDef, arguments: Value) -> Result<Done, ErrorBody> {
        let run: BoxFuture<'_, Result<Done, ErrorBody>> = match def.name {
            SEARCH => Box::pin(self.search(parse(arguments)?)),
            READ => Box::pin(self.read(parse(arguments)?)),
            OPEN => Box::pin(self.open(parse(arguments)?)),
            OUTLINE => Box::pin(self.outline(parse(arguments)?)),
            RAG_QUERY => Box::pin(self.rag_query(parse(arguments)?)),
            RAG_OPEN_REFERENCE => Box::pin(self.rag_open(parse(arguments)?)),
            other => return Err(failure("unknown_tool", format!("no tool named {other}"))),
        };
        run.await
    }

    fn remember(&self, id: Uuid, citation: &str) {
        self.cited.lock().unwrap_or_else(|e| e.into_inner()).insert(id, citation.to_string());
    }

    /// `citationMarkdown` of an evidence id the actor may see (from this run's results, else
    /// looked up); `None` when it does not exist or is not visible.
    pub async fn citation(&self, evidence_id: Uuid) -> Option<String> {
        if let Some(c) = self.cited.lock().unwrap_or_else(|e| e.into_inner()).get(&evidence_id) {
            return Some(c.clone());
        }
        let req = ReadRequest { evidence_id: Some(evidence_id), locator: None, window: None };
        let public_url = self.state.config.public_url.as_deref();
        let found = async {
            let mut tx = self.actor.tx(&self.state).await?;
            let r = open::open(&mut tx, &req, public_url).await?;
            tx.commit().await?;
            Ok::<_, AppError>(r)
        }
        .await;
        match found {
            Ok(r) => {
                self.remember(evidence_id, &r.citation_markdown);
                Some(r.citation_markdown)
            }
            Err(AppError::NotFound) => None,
            Err(e) => {
                tracing::warn!("citation lookup failed: {e}");
                None
            }
        }
    }

    /// `text` with every `[evidence:<uuid>]` marker a model or agent wrote replaced by that
    /// evidence's `citationMarkdown` link (markers naming evidence the actor cannot see stay
    /// as they are, so verification flags them).
    pub async fn link_citations(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for found in citations::scan(text) {
            let Found::Marker { span, ids, parts } = found else { continue };
            let mut linked = Vec::with_capacity(ids.len());
            for (id, part) in ids.iter().zip(&parts) {
                let link = match id {
                    Some(id) => self.citation(*id).await,
                    None => None,
                };
                linked.push(link.ok_or_else(|| format!("[evidence:{part}]")));
            }
            out.push_str(&text[last..span.start]);
            out.push_str(&render_marker(&text[span.clone()], &linked));
            last = span.end;
        }
        out.push_str(&text[last..]);
        out
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<ToolCallRecord> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A marker's replacement: the links of the ids that resolved; one that did not stays a
/// marker of its own (`Err` holds it); the whole marker as written when nothing resolved.
fn render_marker(raw: &str, parts: &[Result<String, String>]) -> String {
    if parts.iter().all(Result::is_err) {
        return raw.to_string();
    }
    let mut out: Vec<&str> = parts.iter().map(|p| p.as_deref().unwrap_or_else(|m| m.as_str())).collect();
    out.dedup();
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_are_errors_not_panics() {
        assert_eq!(parse::<SearchArgs>(json!({"query": 3})).unwrap_err().code, "invalid_arguments");
        assert_eq!(parse::<SearchArgs>(json!({"query": "x", "kbIds": []})).unwrap_err().code, "invalid_arguments");
        assert_eq!(parse::<ReadArgs>(json!({"evidenceId": "nope"})).unwrap_err().code, "invalid_arguments");
        assert_eq!(parse::<OpenArgs>(Value::Null).unwrap_err().code, "invalid_arguments");
        assert_eq!(parse::<SearchArgs>(json!("{\"query\": \"borrow\"}")).unwrap().query, "borrow");
        assert_eq!(parse::<SearchArgs>(json!({"query": "x", "mode": null, "topK": 3})).unwrap().top_k, Some(3));
    }

    #[test]
    fn large_arguments_are_capped_on_a_char_boundary() {
        let big = json!({"query": "数据".repeat(2000)});
        let c = capped_arguments(&big);
        assert_eq!(c["truncated"], true);
        assert!(c.to_string().len() < MAX_ARGUMENT_BYTES + 200);
        assert_eq!(capped_arguments(&json!({"query": "x"})), json!({"query": "x"}));
    }

    #[test]
    fn markers_become_links_except_for_unknown_evidence() {
        let a = Uuid::from_u128(1);
        let raw = format!("[evidence:{a}, {}]", Uuid::from_u128(2));
        let kept = format!("[evidence:{}]", Uuid::from_u128(2));
        let parts = vec![Ok("[a.md · L1](/u)".to_string()), Err(kept.clone()), Err("[evidence:junk]".to_string())];
        assert_eq!(render_marker(&raw, &parts), format!("[a.md · L1](/u) {kept} [evidence:junk]"));
        assert_eq!(render_marker(&raw, &[Err(format!("[evidence:{a}]")), Err(kept)]), raw);
    }
}

//! The one tool registry: every MNote tool an agent can call, defined once (name, function
//! name, description, JSON Schema of its typed arguments), and [`ToolBox`], which executes
//! calls in-process under the run actor's grants and KB visibility, journals
//! `tool.started`/`tool.completed`, and records what each call returned for the receipt.
//!
//! The arguments are agent-facing: what to look for, never where — the run's context
//! (`contextRefs`) decides the knowledge bases, and the actor's rights decide what is visible.
//! What a tool returns to the model is compact typed JSON (quotes, evidence ids, citation
//! links), never raw provider chunks.

use std::{
    collections::HashMap,
    sync::{Mutex, OnceLock},
};

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::citations::{self, Found};
use crate::{
    auth::Auth,
    error::AppError,
    evidence::tools::{Mode, OutlineRequest, ReadRequest, SearchRequest, uuid_schema},
    journal::{ContextRefs, ErrorBody, Event, EventSource, ToolCompleted, ToolStarted, sink::EventSink},
    rag::{
        self,
        client::QueryMode,
        query::{QueryInput, Reference},
    },
    search::{open, outline, query},
    state::AppState,
};

pub const SEARCH: &str = "mnote.evidence.search";
pub const READ: &str = "mnote.evidence.read";
pub const OPEN: &str = "mnote.evidence.open";
pub const OUTLINE: &str = "mnote.evidence.outline";
pub const RAG_QUERY: &str = "mnote.knowledge_rag.query";
pub const RAG_OPEN_REFERENCE: &str = "mnote.knowledge_rag.open_reference";

pub const CAPABILITY_EVIDENCE: &str = "evidence";
pub const CAPABILITY_KNOWLEDGE_RAG: &str = "knowledge_rag";

/// Passages a search returns unless asked otherwise, and at most.
const DEFAULT_TOP_K: usize = 8;
const MAX_TOP_K: usize = 20;
/// Neighbours `read` returns on each side unless asked otherwise, and at most.
const DEFAULT_WINDOW: usize = 2;
const MAX_WINDOW: usize = 10;
const MAX_QUERY_CHARS: usize = 4000;
/// Text of one block in a `read` result (a long table stays readable, and bounded).
const MAX_BLOCK_CHARS: usize = 2000;
/// `tool.started` keeps at most this much of the arguments.
const MAX_ARGUMENT_BYTES: usize = 2048;

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

// ---- arguments (agent-facing; their JSON Schemas are the tools' `parameters`) ----

/// `mnote.evidence.search`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchArgs {
    /// What to look for: a question or key words, in any language (Chinese text is segmented).
    pub query: String,
    /// `hybrid` (default: words and meaning), `lexical` (exact words), `vector` (meaning) or
    /// `graph` (also passages linked to the matches).
    #[serde(default)]
    pub mode: Option<Mode>,
    /// How many passages to return (1–20, default 8).
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    pub top_k: Option<usize>,
}

/// `mnote.evidence.read`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadArgs {
    /// The passage to read (an `evidenceId` from another tool's result).
    #[schemars(schema_with = "uuid_schema")]
    pub evidence_id: Uuid,
    /// Passages before and after it (0–10, default 2).
    #[serde(default)]
    #[schemars(range(min = 0, max = 10))]
    pub window: Option<usize>,
}

/// `mnote.evidence.open`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenArgs {
    /// The passage to cite (an `evidenceId` from another tool's result).
    #[schemars(schema_with = "uuid_schema")]
    pub evidence_id: Uuid,
}

/// `mnote.evidence.outline`
pub type OutlineArgs = OutlineRequest;

/// LightRAG's retrieval modes.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RagMode {
    Mix,
    Hybrid,
    Local,
    Global,
    Naive,
}

impl From<RagMode> for QueryMode {
    fn from(m: RagMode) -> QueryMode {
        match m {
            RagMode::Mix => QueryMode::Mix,
            RagMode::Hybrid => QueryMode::Hybrid,
            RagMode::Local => QueryMode::Local,
            RagMode::Global => QueryMode::Global,
            RagMode::Naive => QueryMode::Naive,
        }
    }
}

/// `mnote.knowledge_rag.query`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RagQueryArgs {
    /// The question, in any language.
    pub query: String,
    /// `mix` (default: knowledge graph and vectors), `hybrid`, `local` (entities), `global`
    /// (relations) or `naive` (vectors only).
    #[serde(default)]
    pub mode: Option<RagMode>,
}

/// `mnote.knowledge_rag.open_reference`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RagOpenArgs {
    /// LightRAG's `file_path` of the reference.
    pub file_path: String,
    /// The chunk text LightRAG gave for it, if any (locates the passage).
    #[serde(default)]
    pub quote: Option<String>,
}

// ---- what the model sees ----

/// A search result as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceHit {
    pub evidence_id: Uuid,
    pub quote: String,
    pub citation_markdown: String,
    pub source_title: String,
    pub source_id: Uuid,
    pub score: f64,
    /// The heading the passage sits under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
}

/// `mnote.evidence.search` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchOutput {
    pub results: Vec<EvidenceHit>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
}

/// A passage of a `read` result.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadBlock {
    pub evidence_id: Uuid,
    pub text: String,
    pub citation_markdown: String,
    /// The passage asked for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub anchor: bool,
}

/// `mnote.evidence.read` content: the passage with its neighbours and the rest of its
/// section (bounded), in document order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadOutput {
    pub source_id: Uuid,
    pub source_title: String,
    pub section_path: Vec<String>,
    pub blocks: Vec<ReadBlock>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub section_truncated: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
}

/// `mnote.evidence.open` content.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenOutput {
    pub evidence_id: Uuid,
    pub citation_markdown: String,
    pub url: String,
    pub block_found: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
}

/// A knowledge-RAG reference mapped to our evidence, as the model sees it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RagReference {
    /// `null` when only the document could be cited.
    pub evidence_id: Option<Uuid>,
    pub quote: String,
    pub citation_markdown: String,
    pub source_title: String,
    pub source_id: Uuid,
    pub file_path: String,
    pub match_quality: rag::mapping::MatchQuality,
}

impl From<&Reference> for RagReference {
    fn from(r: &Reference) -> Self {
        RagReference {
            evidence_id: r.evidence_id,
            quote: r.quote.clone(),
            citation_markdown: r.citation_markdown.clone(),
            source_title: open::source_title(&r.source_path),
            source_id: r.source_id,
            file_path: r.file_path.clone(),
            match_quality: r.match_quality,
        }
    }
}

/// `mnote.knowledge_rag.query` content.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RagQueryOutput {
    pub references: Vec<RagReference>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<&'static str>,
}

// ---- the registry ----

/// The JSON Schema of `T` as a tool's `parameters`: self-contained (no `$ref`), no meta
/// schema or title (the tool has its own name and description).
fn parameters<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .for_deserialize()
        .into_generator();
    let mut v = serde_json::to_value(generator.into_root_schema_for::<T>()).unwrap_or_else(|_| json!({"type": "object"}));
    if let Some(o) = v.as_object_mut() {
        o.remove("title");
        o.remove("description");
    }
    v
}

/// Every tool of the registry.
pub fn registry() -> &'static [ToolDef] {
    static REGISTRY: OnceLock<Vec<ToolDef>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        vec![
            ToolDef {
                name: SEARCH,
                function_name: "mnote_evidence_search",
                description: "Search the knowledge bases of this conversation for passages (evidence) about a question or \
                              key words, in Chinese or English. Each result has an evidenceId, a quote, the document \
                              title and a citationMarkdown link. Cite a passage by writing [evidence:<evidenceId>] right \
                              after the sentence it supports.",
                parameters: parameters::<SearchArgs>(),
                capability: CAPABILITY_EVIDENCE,
            },
            ToolDef {
                name: READ,
                function_name: "mnote_evidence_read",
                description: "Read a passage in context: the passage, the passages before and after it and the rest of \
                              its section, in document order, each with its evidenceId and citationMarkdown. Use it when \
                              a quote is cut short or the surrounding text matters.",
                parameters: parameters::<ReadArgs>(),
                capability: CAPABILITY_EVIDENCE,
            },
            ToolDef {
                name: OPEN,
                function_name: "mnote_evidence_open",
                description: "The citation link (citationMarkdown) and viewer URL of one passage, and whether the passage \
                              is still indexed.",
                parameters: parameters::<OpenArgs>(),
                capability: CAPABILITY_EVIDENCE,
            },
            ToolDef {
                name: OUTLINE,
                function_name: "mnote_evidence_outline",
                description: "The section tree of one document (its sourceId, e.g. from a search result): headings with \
                              their page or line ranges, how many passages each holds and the evidenceId of its first \
                              passage. Use it to pick the sections of a long document worth reading.",
                parameters: parameters::<OutlineArgs>(),
                capability: CAPABILITY_EVIDENCE,
            },
            ToolDef {
                name: RAG_QUERY,
                function_name: "mnote_knowledge_rag_query",
                description: "Ask the knowledge graph (LightRAG) bound to these knowledge bases, for broad questions that \
                              span many documents. Returns references mapped to passages (evidenceId, quote, \
                              citationMarkdown); cite them like search results.",
                parameters: parameters::<RagQueryArgs>(),
                capability: CAPABILITY_KNOWLEDGE_RAG,
            },
            ToolDef {
                name: RAG_OPEN_REFERENCE,
                function_name: "mnote_knowledge_rag_open_reference",
                description: "Map one LightRAG reference (its file_path, and the chunk text if known) to the passage it \
                              came from, with its evidenceId and citationMarkdown.",
                parameters: parameters::<RagOpenArgs>(),
                capability: CAPABILITY_KNOWLEDGE_RAG,
            },
        ]
    })
}

/// A registry tool by its dotted or function name.
pub fn lookup(name: &str) -> Option<&'static ToolDef> {
    registry().iter().find(|d| d.name == name || d.function_name == name)
}

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
pub struct ToolBox {
    state: AppState,
    actor: Auth,
    context: ContextRefs,
    events: EventSink,
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
        let mut offered: Vec<&'static ToolDef> = Vec::new();
        if enabled {
            offered.extend(registry().iter().filter(|d| d.capability == CAPABILITY_EVIDENCE));
            match rag_bound(&state, &actor, &context).await {
                Ok(true) => offered.extend(registry().iter().filter(|d| d.capability == CAPABILITY_KNOWLEDGE_RAG)),
                Ok(false) => {}
                Err(e) => tracing::warn!("tool box: knowledge-RAG bindings could not be read, its tools are left out: {e}"),
            }
        }
        ToolBox { state, actor, context, events, offered, calls: Mutex::new(Vec::new()), cited: Mutex::new(HashMap::new()) }
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
    /// as a failed [`ToolResult`] (`unknown_tool`, `invalid_arguments`, `not_found`, …).
    pub async fn call(&self, call_id: &str, name: &str, arguments: Value) -> ToolResult {
        let def = self.offered.iter().copied().find(|d| d.name == name || d.function_name == name);
        let shown = def.map(|d| d.name.to_string()).unwrap_or_else(|| truncate_chars(name, 100));
        let started = ToolStarted { call_id: call_id.to_string(), name: shown.clone(), arguments: capped_arguments(&arguments) };
        if let Err(e) = self.events.emit(EventSource::Tool, Event::ToolStarted(started)).await {
            tracing::warn!("tool.started not journaled: {e}");
        }
        let outcome = match def {
            Some(d) => self.execute(d, arguments).await,
            None => Err(failure("unknown_tool", format!("no tool named {shown} is offered to this run"))),
        };
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
        if let Err(e) = self.events.emit(EventSource::Tool, Event::ToolCompleted(completed)).await {
            tracing::warn!("tool.completed not journaled: {e}");
        }
        result
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

    /// Search the context's KBs (every KB the actor can read when it names none); hits from
    /// the context's sources rank first.
    async fn search(&self, args: SearchArgs) -> Result<Done, ErrorBody> {
        let q = args.query.trim();
        if q.is_empty() || q.chars().count() > MAX_QUERY_CHARS {
            return Err(failure("invalid_arguments", format!("query: 1 to {MAX_QUERY_CHARS} characters")));
        }
        let top_k = args.top_k.unwrap_or(DEFAULT_TOP_K);
        if !(1..=MAX_TOP_K).contains(&top_k) {
            return Err(failure("invalid_arguments", format!("topK: 1 to {MAX_TOP_K}")));
        }
        let mut req = SearchRequest::new(q, args.mode.unwrap_or_default());
        let prefer = &self.context.source_ids;
        req.top_k = Some(if prefer.is_empty() { top_k } else { (top_k * 3).min(query::MAX_TOP_K) });
        req.kb_ids = (!self.context.kb_ids.is_empty()).then(|| self.context.kb_ids.clone());
        let resp = query::search_retrying(|| self.actor.tx(&self.state), &self.state.search_engine(), &req)
            .await
            .map_err(|e| from_app(e.into()))?;
        let mut hits = resp.results;
        hits.sort_by_key(|h| !prefer.contains(&h.source_id));
        hits.truncate(top_k);
        let results: Vec<EvidenceHit> = hits
            .into_iter()
            .map(|h| EvidenceHit {
                evidence_id: h.evidence_id,
                quote: h.quote.clone(),
                citation_markdown: h.citation_markdown.clone(),
                source_title: h.source_title.clone(),
                source_id: h.source_id,
                score: (h.score * 10_000.0).round() / 10_000.0,
                section: h.source.section_path.last().cloned(),
            })
            .collect();
        for r in &results {
            self.remember(r.evidence_id, &r.citation_markdown);
        }
        let mut docs: Vec<Uuid> = results.iter().map(|r| r.source_id).collect();
        docs.sort();
        docs.dedup();
        let summary = if results.is_empty() {
            "no results".to_string()
        } else {
            format!("{} in {}", plural(results.len(), "result", "results"), plural(docs.len(), "document", "documents"))
        };
        let out = SearchOutput { degraded: resp.degraded, degraded_reason: resp.degraded_reason, results };
        Ok(Done {
            count: Some(out.results.len()),
            evidence_ids: out.results.iter().map(|r| r.evidence_id).collect(),
            content: serde_json::to_value(&out).unwrap_or_default(),
            summary,
        })
    }

    async fn read(&self, args: ReadArgs) -> Result<Done, ErrorBody> {
        let window = args.window.unwrap_or(DEFAULT_WINDOW);
        if window > MAX_WINDOW {
            return Err(failure("invalid_arguments", format!("window: 0 to {MAX_WINDOW}")));
        }
        let req = ReadRequest { evidence_id: Some(args.evidence_id), locator: None, window: Some(window) };
        let public_url = self.state.config.public_url.as_deref();
        let r = async {
            let mut tx = self.actor.tx(&self.state).await?;
            let r = open::read(&mut tx, &req, public_url).await?;
            tx.commit().await?;
            Ok::<_, AppError>(r)
        }
        .await
        .map_err(from_app)?;
        let anchor_id = r.anchor.as_ref().map(|a| a.evidence_id);
        let mut all: Vec<&crate::evidence::tools::EvidenceBlock> =
            r.previous.iter().chain(&r.anchor).chain(&r.next).chain(&r.section_blocks).collect();
        all.sort_by_key(|b| b.source.char_range[0]);
        all.dedup_by_key(|b| b.evidence_id);
        let source_id = r.anchor.as_ref().map(|a| a.source.source_id).unwrap_or_default();
        let blocks: Vec<ReadBlock> = all
            .into_iter()
            .map(|b| ReadBlock {
                evidence_id: b.evidence_id,
                text: truncate_chars(&b.text, MAX_BLOCK_CHARS),
                citation_markdown: open::citation_markdown(&r.source_title, &b.source.place(), &b.open_action.url),
                anchor: Some(b.evidence_id) == anchor_id,
            })
            .collect();
        for b in &blocks {
            self.remember(b.evidence_id, &b.citation_markdown);
        }
        let summary = format!("{} of {}", plural(blocks.len(), "passage", "passages"), r.source_title);
        let out = ReadOutput {
            source_id,
            source_title: r.source_title,
            section_path: r.section_path,
            section_truncated: r.section_truncated,
            stale: r.stale,
            blocks,
        };
        Ok(Done {
            count: Some(out.blocks.len()),
            evidence_ids: out.blocks.iter().map(|b| b.evidence_id).collect(),
            content: serde_json::to_value(&out).unwrap_or_default(),
            summary,
        })
    }

    async fn open(&self, args: OpenArgs) -> Result<Done, ErrorBody> {
        let req = ReadRequest { evidence_id: Some(args.evidence_id), locator: None, window: None };
        let public_url = self.state.config.public_url.as_deref();
        let r = async {
            let mut tx = self.actor.tx(&self.state).await?;
            let r = open::open(&mut tx, &req, public_url).await?;
            tx.commit().await?;
            Ok::<_, AppError>(r)
        }
        .await
        .map_err(from_app)?;
        self.remember(args.evidence_id, &r.citation_markdown);
        let summary = citations::split_link(&r.citation_markdown).map(|(l, _)| l.to_string()).unwrap_or_default();
        let out = OpenOutput {
            evidence_id: args.evidence_id,
            citation_markdown: r.citation_markdown,
            url: r.open_action.url,
            block_found: r.block_found,
            stale: r.stale,
        };
        Ok(Done {
            count: Some(1),
            evidence_ids: vec![args.evidence_id],
            content: serde_json::to_value(&out).unwrap_or_default(),
            summary,
        })
    }

    async fn outline(&self, args: OutlineArgs) -> Result<Done, ErrorBody> {
        let r = async {
            let mut tx = self.actor.tx(&self.state).await?;
            let r = outline::outline(&mut tx, &args).await?;
            tx.commit().await?;
            Ok::<_, AppError>(r)
        }
        .await
        .map_err(from_app)?;
        fn count(s: &[crate::evidence::tools::OutlineSection]) -> usize {
            s.iter().map(|s| 1 + count(&s.children)).sum()
        }
        let n = count(&r.sections);
        Ok(Done {
            count: Some(n),
            evidence_ids: Vec::new(),
            summary: format!("{} in {}", plural(n, "section", "sections"), r.title),
            content: serde_json::to_value(&r).unwrap_or_default(),
        })
    }

    async fn rag_query(&self, args: RagQueryArgs) -> Result<Done, ErrorBody> {
        let input = QueryInput {
            kb_ids: self.context.kb_ids.clone(),
            query: args.query,
            mode: args.mode.map(QueryMode::from).unwrap_or_default(),
            top_k: None,
            answer: false,
        };
        let r = rag::query::run(&self.state, &self.actor, input).await.map_err(from_app)?;
        let references: Vec<RagReference> = r.references.iter().map(RagReference::from).collect();
        for x in &references {
            if let Some(id) = x.evidence_id {
                self.remember(id, &x.citation_markdown);
            }
        }
        let mut docs: Vec<Uuid> = references.iter().map(|x| x.source_id).collect();
        docs.sort();
        docs.dedup();
        let mut summary =
            format!("{} in {}", plural(references.len(), "reference", "references"), plural(docs.len(), "document", "documents"));
        if r.degraded {
            summary.push_str(" (degraded)");
        }
        let evidence_ids: Vec<Uuid> = references.iter().filter_map(|x| x.evidence_id).collect();
        let out = RagQueryOutput { degraded: r.degraded, degraded_reason: r.degraded_reason, references };
        Ok(Done {
            count: Some(out.references.len()),
            evidence_ids,
            content: serde_json::to_value(&out).unwrap_or_default(),
            summary,
        })
    }

    async fn rag_open(&self, args: RagOpenArgs) -> Result<Done, ErrorBody> {
        if args.file_path.trim().is_empty() || args.file_path.len() > 1024 {
            return Err(failure("invalid_arguments", "filePath: LightRAG's file_path of a reference"));
        }
        let r = rag::query::open_reference(&self.state, &self.actor, &args.file_path, args.quote.as_deref())
            .await
            .map_err(from_app)?;
        let x = RagReference::from(&r);
        if let Some(id) = x.evidence_id {
            self.remember(id, &x.citation_markdown);
        }
        Ok(Done {
            count: Some(1),
            evidence_ids: x.evidence_id.into_iter().collect(),
            summary: x.source_title.clone(),
            content: serde_json::to_value(&x).unwrap_or_default(),
        })
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

/// Whether a KB of the context (every visible KB when it names none) is bound to LightRAG.
async fn rag_bound(state: &AppState, actor: &Auth, context: &ContextRefs) -> sqlx::Result<bool> {
    let mut tx = actor.tx(state).await?;
    let kbs: Vec<Uuid> = if context.kb_ids.is_empty() {
        crate::kbs::queries::list(&mut tx, actor.user_id, actor.role.is_admin()).await?.into_iter().map(|k| k.id).collect()
    } else {
        context.kb_ids.clone()
    };
    let bound = !rag::binding::active_for(&mut tx, &kbs).await?.is_empty();
    tx.commit().await?;
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_names_schemas_and_capabilities() {
        let names: Vec<&str> = registry().iter().map(|d| d.name).collect();
        assert_eq!(names, [SEARCH, READ, OPEN, OUTLINE, RAG_QUERY, RAG_OPEN_REFERENCE]);
        for d in registry() {
            assert_eq!(d.function_name, d.name.replace('.', "_"));
            assert!(d.function_name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{}", d.function_name);
            assert_eq!(d.parameters["type"], "object", "{}: {}", d.name, d.parameters);
            assert!(!d.parameters.to_string().contains("$ref"), "{}: self-contained", d.name);
            assert!(d.parameters.get("$schema").is_none());
            assert!(d.description.len() > 40);
            assert_eq!(lookup(d.function_name).map(|x| x.name), Some(d.name));
        }
        let search = &lookup(SEARCH).unwrap().parameters;
        assert_eq!(search["required"], json!(["query"]));
        assert!(search["properties"].get("kbIds").is_none(), "the run's context decides the KBs");
        assert_eq!(search["additionalProperties"], false);
        assert!(search["properties"]["mode"].to_string().contains("lexical"));
        let outline = &lookup(OUTLINE).unwrap().parameters;
        assert_eq!(outline["properties"]["sourceId"]["format"], "uuid");
        assert_eq!(lookup(RAG_QUERY).unwrap().capability, CAPABILITY_KNOWLEDGE_RAG);
    }

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

//! The tools an agent can call, each defined once, and [`ToolBox`], which executes calls
//! in-process under the run actor's grants and KB visibility, journals
//! `tool.started`/`tool.completed`, and records what each call returned for the receipt.
//!
//! - `tool.rs`: the [`Tool`] trait (name, capability, descriptions, typed arguments and output,
//!   the call, its summary and its Markdown for MCP) and [`ToolDef`], the registry entry derived
//!   from it (function-calling and MCP names, JSON Schemas, the call with JSON arguments);
//! - one file per tool: `search.rs`, `read.rs`, `open.rs`, `outline.rs`, `rag_query.rs`,
//!   `rag_open.rs`;
//! - `registry.rs`: one line per tool;
//! - `env.rs`: [`ToolEnv`], what a tool runs with; `failure.rs`: [`ToolError`] and its
//!   [`ToolErrorCode`]; `cite.rs`: citation links of the evidence a run's tools returned.
//!
//! The arguments are agent-facing: what to look for, never where — the run's context
//! (`contextRefs`) decides the knowledge bases, and the actor's rights decide what is visible.
//! What a tool returns is compact typed output (quotes, evidence ids, citation links), never
//! raw provider chunks. In-process callers use [`ToolBox::invoke`] (typed); only the model's
//! function calls, ACP's `_mnote/tools/call` and MCP go through JSON ([`ToolBox::call`],
//! [`ToolBox::run`]).

use std::{collections::HashMap, future::Future, sync::Mutex};

use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    auth::Auth,
    evidence::KbScope,
    journal::{ContextRefs, ErrorBody, Event, EventSource, ToolCompleted, ToolStarted, sink::EventSink},
    state::AppState,
};

pub mod cite;
mod env;
mod failure;
mod open;
mod outline;
mod rag_open;
mod rag_query;
mod rag_stream;
mod read;
mod registry;
mod search;
mod tool;

pub use crate::journal::receipt::ToolCallRecord;
pub use env::{Located, ToolEnv};
pub use failure::{ToolError, ToolErrorCode, parse};
pub use open::{Open, OpenArgs, OpenOutput};
pub use outline::{Outline, OutlineArgs};
pub use rag_open::{RagOpenArgs, RagOpenReference};
pub use rag_query::{RagMode, RagQuery, RagQueryArgs, RagQueryOutput, RagReference};
pub use read::{Read, ReadArgs, ReadBlock, ReadOutput};
pub use registry::{lookup, lookup_mcp, registry};
pub use search::{EvidenceHit, Search, SearchArgs, SearchOutput};
use tool::Done;
pub use tool::{Called, Capability, Cited, Tool, ToolDef, function_name, mcp_name, output_of, parameters, self_contained};

/// `tool.started` keeps at most this much of the arguments.
const MAX_ARGUMENT_BYTES: usize = 2048;

/// The result of a call by name, as the model, an ACP agent or an MCP client gets it.
#[derive(Debug, Clone)]
pub struct ToolResult {
    pub ok: bool,
    /// The typed output serialized (or `{"error": {code, message}}`).
    pub content: Value,
    /// The output as Markdown, for MCP clients (empty on failure).
    pub text: String,
    pub evidence_ids: Vec<Uuid>,
    pub error: Option<ErrorBody>,
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

/// Typed arguments as a model would send them: the options left unset are absent, not `null`.
fn as_sent(mut arguments: Value) -> Value {
    if let Some(o) = arguments.as_object_mut() {
        o.retain(|_, v| !v.is_null());
    }
    arguments
}

/// A run's tools: the registry filtered to what this run may use, bound to its actor.
/// [`ToolBox::detached`] is the same without a run (MCP): nothing journaled, and results carry
/// absolute citation URLs and locators.
pub struct ToolBox {
    env: ToolEnv,
    /// The run's journal (`None`: detached).
    events: Option<EventSink>,
    offered: Vec<&'static ToolDef>,
    calls: Mutex<Vec<ToolCallRecord>>,
    /// `citationMarkdown` of every evidence id this run's tools returned.
    cited: Mutex<HashMap<Uuid, String>>,
}

impl ToolBox {
    fn new(env: ToolEnv, events: Option<EventSink>, offered: Vec<&'static ToolDef>) -> Self {
        ToolBox { env, events, offered, calls: Mutex::new(Vec::new()), cited: Mutex::new(HashMap::new()) }
    }

    /// `enabled = false` (chat_only): no tools at all. The evidence tools otherwise, and the
    /// knowledge-RAG tools when a KB of the context (every visible KB when the context names
    /// none) has an active LightRAG binding.
    pub async fn prepare(state: AppState, actor: Auth, context: ContextRefs, events: EventSink, enabled: bool) -> Self {
        let offered = if enabled { Self::offered_for(&state, &actor, &context).await } else { Vec::new() };
        Self::new(ToolEnv::new(state, actor, context, None), Some(events), offered)
    }

    /// A run's tools: `offered` ([`super::offer::offer`]), under `actor` in `context`, journaled
    /// through `events`.
    pub fn for_run(
        state: AppState,
        actor: Auth,
        context: ContextRefs,
        events: EventSink,
        offered: Vec<&'static ToolDef>,
    ) -> Self {
        Self::new(ToolEnv::new(state, actor, context, None), Some(events), offered)
    }

    /// The actor's tools outside a run (MCP): every KB the actor can read, the registry tools
    /// `offered` (see [`ToolBox::offered_for`]), no journal; citations are absolute URLs under
    /// `citation_base`.
    pub fn detached(state: AppState, actor: Auth, citation_base: String, offered: Vec<&'static ToolDef>) -> Self {
        Self::new(ToolEnv::new(state, actor, ContextRefs::default(), Some(citation_base)), None, offered)
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
        Self::new(ToolEnv::new(state, actor, context, Some(citation_base)), Some(events), offered)
    }

    /// The tools `actor` may use in `context`: the evidence tools, and the knowledge-RAG tools
    /// when a KB of the context (every visible KB when it names none) has an active binding.
    pub async fn offered_for(state: &AppState, actor: &Auth, context: &ContextRefs) -> Vec<&'static ToolDef> {
        let mut offered: Vec<&'static ToolDef> = registry().iter().filter(|d| d.capability == Capability::Evidence).collect();
        match rag_bound(state, actor, context).await {
            Ok(true) => offered.extend(registry().iter().filter(|d| d.capability == Capability::KnowledgeRag)),
            Ok(false) => {}
            Err(e) => tracing::warn!("tool box: knowledge-RAG bindings could not be read, its tools are left out: {e}"),
        }
        offered
    }

    /// The same tools limited to `context` (its KBs searched, its sources first): a detached
    /// tool box for one KB (`mnote bench answers`).
    pub fn within(mut self, context: ContextRefs) -> Self {
        self.env.set_context(context);
        self
    }

    pub fn actor(&self) -> &Auth {
        self.env.actor()
    }

    pub fn context(&self) -> &ContextRefs {
        self.env.context()
    }

    /// The knowledge bases every tool of the run is bound to (the receipt checks inside them too).
    pub fn scope(&self) -> &KbScope {
        self.env.scope()
    }

    /// The tools this run may call.
    pub fn offered(&self) -> &[&'static ToolDef] {
        &self.offered
    }

    /// Whether this run may call `T`.
    pub fn offers<T: Tool>(&self) -> bool {
        self.offered.iter().any(|d| d.name == T::NAME)
    }

    /// Keep only the tools of `capabilities` (what the tenant's capability switches and the
    /// user's preferences leave): the others are neither offered nor callable.
    pub fn restrict(mut self, capabilities: &[Capability]) -> Self {
        self.offered.retain(|d| capabilities.contains(&d.capability));
        self
    }

    fn find(&self, name: &str) -> Option<&'static ToolDef> {
        self.offered.iter().copied().find(|d| d.is_named(name))
    }

    /// Call `name` (dotted or function name) with JSON `arguments` (a model's or an agent's);
    /// never panics, errors come back as a failed [`ToolResult`] (`unknown_tool`,
    /// `invalid_arguments`, `not_found`, …).
    pub async fn call(&self, call_id: &str, name: &str, arguments: Value) -> ToolResult {
        let def = self.find(name);
        let shown = def.map(|d| d.name.to_string()).unwrap_or_else(|| env::truncate_chars(name, 100));
        let logged = capped_arguments(&arguments);
        let run = async {
            let d = def.ok_or_else(|| ToolError::unknown_tool(format!("no tool named {shown} is offered to this run")))?;
            let c = d.run(&self.env, arguments).await?;
            let ids: Vec<Uuid> = c.done.cited.iter().map(|x| x.evidence_id).collect();
            Ok::<_, ToolError>((c.done, (c.content, c.text, ids)))
        };
        match self.journaled(call_id, &shown, logged, run).await {
            Ok((content, text, evidence_ids)) => ToolResult { ok: true, content, text, evidence_ids, error: None },
            Err(e) => ToolResult {
                ok: false,
                content: e.content(),
                text: String::new(),
                evidence_ids: Vec::new(),
                error: Some(e.into()),
            },
        }
    }

    /// Call `T` with typed arguments (the built-in agent): journaled and recorded like
    /// [`ToolBox::call`]; `unknown_tool` when `T` is not offered to this run.
    pub async fn invoke<T: Tool>(&self, call_id: &str, args: T::Args) -> Result<T::Output, ToolError>
    where
        T::Args: Serialize,
    {
        let logged = capped_arguments(&as_sent(serde_json::to_value(&args).unwrap_or_default()));
        let run = async {
            if !self.offers::<T>() {
                return Err(ToolError::unknown_tool(format!("no tool named {} is offered to this run", T::NAME)));
            }
            // Boxed for the reason `ToolDef::run` is.
            let out = Box::pin(T::call(&self.env, args)).await?;
            Ok::<_, ToolError>((Done::of::<T>(&out), out))
        };
        self.journaled(call_id, T::NAME, logged, run).await
    }

    /// Run an offered tool without journaling or recording it (a detached tool box: MCP): the
    /// same argument parsing, validation, service calls and typed output as [`ToolBox::call`].
    pub async fn run(&self, name: &str, arguments: Value) -> Result<Called, ToolError> {
        let Some(d) = self.find(name) else {
            return Err(ToolError::unknown_tool(format!("no tool named {} is offered", env::truncate_chars(name, 100))));
        };
        let c = d.run(&self.env, arguments).await?;
        self.remember(&c.done.cited);
        Ok(c)
    }

    /// `run` journaled as `name` (`tool.started`, then `tool.completed` with its count,
    /// evidence ids and summary, or its error) and recorded for the receipt.
    async fn journaled<R>(
        &self,
        call_id: &str,
        name: &str,
        arguments: Value,
        run: impl Future<Output = Result<(Done, R), ToolError>>,
    ) -> Result<R, ToolError> {
        let started = ToolStarted { call_id: call_id.to_string(), name: name.to_string(), arguments };
        if let Some(events) = &self.events
            && let Err(e) = events.emit(EventSource::Tool, Event::ToolStarted(started)).await
        {
            tracing::warn!("tool.started not journaled: {e}");
        }
        let mut completed = ToolCompleted {
            call_id: call_id.to_string(),
            name: name.to_string(),
            ok: false,
            count: None,
            evidence_ids: Vec::new(),
            summary: None,
            error: None,
        };
        let result = match run.await {
            Ok((done, r)) => {
                self.remember(&done.cited);
                completed.ok = true;
                completed.count = Some(done.count);
                completed.evidence_ids = done.cited.iter().map(|c| c.evidence_id).collect();
                completed.summary = Some(done.summary);
                Ok(r)
            }
            Err(e) => {
                completed.error = Some(e.clone().into());
                Err(e)
            }
        };
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).push(ToolCallRecord {
            call_id: call_id.to_string(),
            name: name.to_string(),
            ok: completed.ok,
            count: completed.count,
            evidence_ids: completed.evidence_ids.clone(),
        });
        if let Some(events) = &self.events
            && let Err(e) = events.emit(EventSource::Tool, Event::ToolCompleted(completed)).await
        {
            tracing::warn!("tool.completed not journaled: {e}");
        }
        result
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<ToolCallRecord> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Whether a KB of the context (every visible KB when it names none) is bound to LightRAG.
async fn rag_bound(state: &AppState, actor: &Auth, context: &ContextRefs) -> sqlx::Result<bool> {
    let mut tx = actor.tx(state).await?;
    let kbs: Vec<Uuid> = if context.kb_ids.is_empty() {
        crate::kbs::queries::list_readable(&mut tx, actor.user_id, actor.role.is_admin())
            .await?
            .into_iter()
            .map(|k| k.id)
            .collect()
    } else {
        context.kb_ids.clone()
    };
    let bound = !crate::rag::binding::active_for(&mut tx, &kbs).await?.is_empty();
    tx.commit().await?;
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_are_errors_not_panics() {
        let code = |r: Result<SearchArgs, ToolError>| r.unwrap_err().code;
        assert_eq!(code(parse(json!({"query": 3}))), ToolErrorCode::InvalidArguments);
        assert_eq!(code(parse(json!({"query": "x", "kbIds": []}))), ToolErrorCode::InvalidArguments);
        assert_eq!(parse::<ReadArgs>(json!({"evidenceId": "nope"})).unwrap_err().code, ToolErrorCode::InvalidArguments);
        assert_eq!(parse::<OpenArgs>(Value::Null).unwrap_err().code, ToolErrorCode::InvalidArguments);
        assert_eq!(parse::<SearchArgs>(json!("{\"query\": \"borrow\"}")).unwrap().query, "borrow");
        assert_eq!(parse::<SearchArgs>(json!({"query": "x", "mode": null, "topK": 3})).unwrap().top_k, Some(3));
    }

    #[test]
    fn typed_arguments_are_journaled_as_a_model_would_send_them() {
        fn sent(args: impl Serialize) -> Value {
            as_sent(serde_json::to_value(args).unwrap())
        }
        assert_eq!(sent(SearchArgs::query("borrow")), json!({"query": "borrow"}));
        let read = ReadArgs { evidence_id: Uuid::nil(), window: Some(0) };
        assert_eq!(sent(read).to_string(), format!(r#"{{"evidenceId":"{}","window":0}}"#, Uuid::nil()));
    }

    #[test]
    fn large_arguments_are_capped_on_a_char_boundary() {
        let big = json!({"query": "数据".repeat(2000)});
        let c = capped_arguments(&big);
        assert_eq!(c["truncated"], true);
        assert!(c.to_string().len() < MAX_ARGUMENT_BYTES + 200);
        assert_eq!(capped_arguments(&json!({"query": "x"})), json!({"query": "x"}));
    }
}

//! [`Tool`]: everything about one tool in one place — its dotted name (from which its
//! function-calling and MCP names are derived), capability, descriptions, typed arguments and
//! output (whose JSON Schemas are derived), the call, its summary for the journal and its
//! Markdown for MCP clients — and [`ToolDef`], the registry entry derived from it.

use std::future::Future;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    env::ToolEnv,
    failure::{ToolError, parse},
};

pub use crate::ai::Capability;

/// One tool. A new tool is one file implementing this and one line in `registry.rs`.
pub trait Tool: 'static {
    /// The dotted name (`mnote.evidence.search`): the journal's, ACP's and the descriptors'.
    const NAME: &'static str;
    /// `evidence` or `knowledge_rag`: the switch and preference that govern it.
    const CAPABILITY: Capability;
    /// For a run's model: what the tool does and how to cite its results (by marker).
    const DESCRIPTION: &'static str;
    /// For an MCP client's model (whose results carry absolute citation links).
    const MCP_DESCRIPTION: &'static str;
    /// What the agent sends: what to look for, never where (the run's context decides the
    /// knowledge bases). Its JSON Schema is the tool's `parameters` / `inputSchema`. (Arguments
    /// that are also `Serialize` can be passed typed: [`super::ToolBox::invoke`].)
    type Args: DeserializeOwned + JsonSchema + Send;
    /// What the tool returns (compact: quotes, evidence ids, citation links). Its JSON Schema is
    /// MCP's `outputSchema`.
    type Output: Serialize + JsonSchema + Send;

    /// Run the tool as `env`'s actor.
    fn call(env: &ToolEnv, args: Self::Args) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;

    /// How many items the output holds (`tool.completed`'s `count`).
    fn count(out: &Self::Output) -> usize;

    /// The passages the output cites (the receipt's evidence ids, and the citation link each
    /// marker of the answer becomes).
    fn cited(out: &Self::Output) -> Vec<Cited>;

    /// One line for the journal (`tool.completed`'s `summary`): `3 results in 2 documents`.
    fn summary(out: &Self::Output) -> String;

    /// The output as short Markdown, for MCP clients that show text only.
    fn text(out: &Self::Output) -> String;
}

/// A passage an output cites, with its citation link.
#[derive(Debug, Clone, PartialEq)]
pub struct Cited {
    pub evidence_id: Uuid,
    pub citation_markdown: String,
}

impl Cited {
    pub fn new(evidence_id: Uuid, citation_markdown: &str) -> Cited {
        Cited { evidence_id, citation_markdown: citation_markdown.to_string() }
    }
}

/// The function-calling name of a dotted name (OpenAI function names allow no dots):
/// `mnote.evidence.search` → `mnote_evidence_search`.
pub fn function_name(name: &str) -> String {
    name.replace('.', "_")
}

/// The MCP name of a dotted name (the server is MNote already): `mnote.evidence.search` →
/// `evidence_search`.
pub fn mcp_name(name: &str) -> String {
    function_name(name.strip_prefix("mnote.").unwrap_or(name))
}

/// What the journal and the receipt keep of a successful call.
pub(super) struct Done {
    pub count: usize,
    pub cited: Vec<Cited>,
    pub summary: String,
}

impl Done {
    pub fn of<T: Tool>(out: &T::Output) -> Done {
        Done { count: T::count(out), cited: T::cited(out), summary: T::summary(out) }
    }
}

/// A call through the registry (by name, with JSON arguments): the output as JSON and as
/// Markdown, and what the journal keeps of it.
pub struct Called {
    pub content: Value,
    pub text: String,
    pub(super) done: Done,
}

type Runner = for<'a> fn(&'a ToolEnv, Value) -> BoxFuture<'a, Result<Called, ToolError>>;

/// A tool as the registry holds it: names, descriptions and schemas derived from its [`Tool`]
/// implementation, and the call with JSON arguments.
#[derive(Debug)]
pub struct ToolDef {
    /// `mnote.evidence.search`
    pub name: &'static str,
    /// `mnote_evidence_search` ([`function_name`])
    pub function_name: String,
    /// `evidence_search` ([`mcp_name`])
    pub mcp_name: String,
    pub description: &'static str,
    pub mcp_description: &'static str,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// JSON Schema of the output.
    pub output: Value,
    /// The capability the tool belongs to (`evidence`, `knowledge_rag`).
    pub capability: Capability,
    runner: Runner,
}

impl ToolDef {
    pub fn of<T: Tool>() -> ToolDef {
        ToolDef {
            name: T::NAME,
            function_name: function_name(T::NAME),
            mcp_name: mcp_name(T::NAME),
            description: T::DESCRIPTION,
            mcp_description: T::MCP_DESCRIPTION,
            parameters: parameters::<T::Args>(),
            output: output_of::<T::Output>(),
            capability: T::CAPABILITY,
            runner: run_erased::<T>,
        }
    }

    /// Whether `name` is this tool's dotted or function name.
    pub fn is_named(&self, name: &str) -> bool {
        self.name == name || self.function_name == name
    }

    /// Parse `arguments`, run the tool, serialize its output.
    pub(super) fn run<'a>(&self, env: &'a ToolEnv, arguments: Value) -> BoxFuture<'a, Result<Called, ToolError>> {
        (self.runner)(env, arguments)
    }
}

/// The boxed future keeps a caller's own future small: the service futures behind the tools
/// (LightRAG's HTTP client, the search core) are deep types, and a runtime that awaits a call
/// inside its own `Send` future would otherwise overflow the compiler's auto-trait recursion
/// limit.
fn run_erased<T: Tool>(env: &ToolEnv, arguments: Value) -> BoxFuture<'_, Result<Called, ToolError>> {
    Box::pin(async move {
        let args: T::Args = parse(arguments)?;
        let out = T::call(env, args).await?;
        Ok(Called { done: Done::of::<T>(&out), content: serde_json::to_value(&out).unwrap_or_default(), text: T::text(&out) })
    })
}

/// Whether every `$ref` of `schema` names one of its own `$defs` (a recursive type, such as
/// the outline's sections, cannot be inlined).
pub fn self_contained(schema: &Value) -> bool {
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    out.push(r);
                }
                o.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(schema, &mut all);
    all.iter().all(|r| r.strip_prefix("#/$defs/").is_some_and(|name| schema["$defs"].get(name).is_some()))
}

fn settings() -> schemars::generate::SchemaSettings {
    schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    })
}

/// The JSON Schema of `T` as a tool's `parameters`: self-contained (no `$ref`), no meta
/// schema or title (the tool has its own name and description).
pub fn parameters<T: JsonSchema>() -> Value {
    let generator = settings().for_deserialize().into_generator();
    let mut v = serde_json::to_value(generator.into_root_schema_for::<T>()).unwrap_or_else(|_| json!({"type": "object"}));
    if let Some(o) = v.as_object_mut() {
        o.remove("title");
        o.remove("description");
    }
    v
}

/// The JSON Schema of `T` as a tool's output (MCP's `outputSchema`): self-contained, as
/// serialized.
pub fn output_of<T: JsonSchema>() -> Value {
    let generator = settings().for_serialize().into_generator();
    let mut v = serde_json::to_value(generator.into_root_schema_for::<T>()).unwrap_or_else(|_| json!({"type": "object"}));
    if let Some(o) = v.as_object_mut() {
        o.remove("title");
    }
    v
}

/// One passage of a Markdown rendering: its citation link and its text, if any.
pub(super) struct Line<'a> {
    pub citation_markdown: &'a str,
    pub text: Option<&'a str>,
}

/// The Markdown of an output: `header` (if any), the degraded note, one numbered line per
/// passage with its citation link and its text clipped, and how to cite.
pub(super) fn markdown(header: Option<String>, degraded: Option<&str>, lines: &[Line<'_>]) -> String {
    let mut out = String::new();
    if let Some(h) = header {
        out.push_str(&h);
        out.push('\n');
    }
    if let Some(why) = degraded {
        out.push_str(&format!("(partial results: {why})\n"));
    }
    for (i, l) in lines.iter().enumerate() {
        let body = l.text.map(|q| format!(" — “{}”", clip(q, 300))).unwrap_or_default();
        out.push_str(&format!("{}. {}{body}\n", i + 1, l.citation_markdown));
    }
    if !lines.is_empty() {
        out.push_str("\nCite with these links exactly as given.");
    }
    out.trim_end().to_string()
}

/// The header of a list of passages: how many, or that there are none.
pub(super) fn found(n: usize) -> String {
    if n == 0 { "No passages found.".to_string() } else { format!("{n} passage(s):") }
}

/// `s` on one line, at most `max` characters.
fn clip(s: &str, max: usize) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_is_self_contained_when_its_refs_are_its_own_defs() {
        assert!(self_contained(&json!({"type": "object"})));
        assert!(self_contained(&json!({"$defs": {"A": {"type": "object"}}, "items": {"$ref": "#/$defs/A"}})));
        assert!(!self_contained(&json!({"items": {"$ref": "#/$defs/A"}})));
        assert!(!self_contained(&json!({"items": {"$ref": "https://example.org/a.json"}})));
    }

    #[test]
    fn names_are_derived_from_the_dotted_name() {
        assert_eq!(function_name("mnote.evidence.search"), "mnote_evidence_search");
        assert_eq!(mcp_name("mnote.evidence.search"), "evidence_search");
        assert_eq!(mcp_name("mnote.knowledge_rag.open_reference"), "knowledge_rag_open_reference");
    }

    #[test]
    fn the_markdown_numbers_each_passage_with_its_link() {
        let lines = [
            Line { citation_markdown: "[a.md · L3](http://x/v#hl)", text: Some("Scoped   threads\nborrow") },
            Line { citation_markdown: "[b.md](http://x/b)", text: None },
        ];
        let t = markdown(Some(found(2)), Some("vectors down"), &lines);
        assert_eq!(
            t,
            "2 passage(s):\n(partial results: vectors down)\n1. [a.md · L3](http://x/v#hl) — “Scoped threads borrow”\n\
             2. [b.md](http://x/b)\n\nCite with these links exactly as given."
        );
        assert_eq!(markdown(Some(found(0)), None, &[]), "No passages found.");
        let long = "x".repeat(400);
        let one = markdown(None, None, &[Line { citation_markdown: "[c](u)", text: Some(&long) }]);
        assert!(one.starts_with(&format!("1. [c](u) — “{}…”", "x".repeat(300))), "{one}");
    }
}

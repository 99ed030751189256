//! The MCP tools: one table maps each MCP name to its registry tool (`agents::tools`: the
//! same typed arguments and their JSON Schemas, the same service functions through a detached
//! `ToolBox`, the same typed outputs and their schemas as `outputSchema`), plus
//! `list_knowledge_bases`, which only MCP clients need (a run's context names its KBs).
//!
//! Every result is structured content (the typed output, with absolute `citationUrl`,
//! `citationMarkdown` and `locator` for each passage) and a short Markdown text for clients
//! that show text only. Every failure is a tool result with `isError` and a stable code.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{http::Caller, public_code, run_token};
use crate::{
    agents::capabilities,
    agents::tools::{self as registry, CAPABILITY_EVIDENCE, CAPABILITY_KNOWLEDGE_RAG, ToolBox, ToolDef},
    error::AppError,
    evidence::tools::uuid_schema,
    state::AppState,
};

/// One MCP tool: its name, the registry tool it runs (`None`: MCP's own), and its
/// description for the client's model.
pub struct McpTool {
    pub name: &'static str,
    pub registry: Option<&'static str>,
    pub description: &'static str,
}

pub const EVIDENCE_SEARCH: &str = "evidence_search";
pub const EVIDENCE_READ: &str = "evidence_read";
pub const EVIDENCE_OPEN: &str = "evidence_open";
pub const KNOWLEDGE_RAG_QUERY: &str = "knowledge_rag_query";
pub const KNOWLEDGE_RAG_OPEN_REFERENCE: &str = "knowledge_rag_open_reference";
pub const LIST_KNOWLEDGE_BASES: &str = "list_knowledge_bases";

/// Appended to every description: how to cite.
const CITE: &str = " Cite every passage you use with its citationMarkdown link exactly as returned (it opens the \
                    document at the passage, highlighted); never write a page, line or link that a result did not give.";

/// The MCP names of the tools, in the order they are listed.
pub const TOOLS: &[McpTool] = &[
    McpTool {
        name: EVIDENCE_SEARCH,
        registry: Some(registry::SEARCH),
        description: "Search the team's knowledge bases (every one this token's user can read) for passages about a \
                      question or key words, in Chinese or English. Each result has an evidenceId, the quote, the \
                      document title, its locator (page and bbox, lines or DOCX paragraph), an absolute citationUrl and \
                      citationMarkdown.",
    },
    McpTool {
        name: EVIDENCE_READ,
        registry: Some(registry::READ),
        description: "Read a passage in context (an evidenceId from another result): the passage, the passages before \
                      and after it and the rest of its section, in document order, each with its locator, citationUrl \
                      and citationMarkdown. Use it when a quote is cut short or the surrounding text matters.",
    },
    McpTool {
        name: EVIDENCE_OPEN,
        registry: Some(registry::OPEN),
        description: "The citation of one passage (an evidenceId): its quote, locator, absolute citationUrl and \
                      citationMarkdown, and whether it is still indexed.",
    },
    McpTool {
        name: KNOWLEDGE_RAG_QUERY,
        registry: Some(registry::RAG_QUERY),
        description: "Ask the knowledge graph (LightRAG) bound to the team's knowledge bases, for broad questions that \
                      span many documents. Returns LightRAG's references mapped back to passages: quote, locator, \
                      citationUrl and citationMarkdown (evidenceId is null when only the document could be cited).",
    },
    McpTool {
        name: KNOWLEDGE_RAG_OPEN_REFERENCE,
        registry: Some(registry::RAG_OPEN_REFERENCE),
        description: "Map one LightRAG reference (its file_path, and the chunk text if known), e.g. from a LightRAG MCP \
                      server, to the passage it came from: quote, locator, citationUrl and citationMarkdown.",
    },
    McpTool {
        name: LIST_KNOWLEDGE_BASES,
        registry: None,
        description: "The knowledge bases this token's user can read: id, name, description, visibility, how many \
                      sources they hold, whether knowledge RAG (LightRAG) is bound, and the MCP resource URI that \
                      lists their documents. Searches cover all of them.",
    },
];

/// `list_knowledge_bases` takes no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListKbArgs {}

/// One knowledge base of `list_knowledge_bases`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KbSummary {
    #[schemars(schema_with = "uuid_schema")]
    pub id: Uuid,
    pub name: String,
    pub description: String,
    /// `private` (its owner and members) or `team`.
    pub visibility: String,
    pub source_count: i64,
    /// A LightRAG server is bound: `knowledge_rag_query` covers this KB.
    pub knowledge_rag: bool,
    /// The MCP resource listing its documents (`resources/read`).
    pub resource_uri: String,
}

/// `list_knowledge_bases` content.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListKbOutput {
    pub knowledge_bases: Vec<KbSummary>,
}

/// The URI of a KB's resource.
pub fn kb_uri(id: Uuid) -> String {
    format!("mnote://kb/{id}")
}

fn object(v: Value) -> Arc<JsonObject> {
    Arc::new(match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    })
}

fn tool_of(t: &McpTool) -> Tool {
    let (input, output) = match t.registry.and_then(registry::lookup) {
        Some(d) => (d.parameters.clone(), registry::output_schema(d.name).cloned().unwrap_or_else(|| json!({"type": "object"}))),
        None => (registry::parameters::<ListKbArgs>(), registry::output_of::<ListKbOutput>()),
    };
    let description = format!("{}{CITE}", t.description);
    Tool::new(t.name, description, object(input))
        .with_raw_output_schema(object(output))
        .with_annotations(ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false))
}

/// The registry tool of an MCP tool.
fn def_of(t: &McpTool) -> Option<&'static ToolDef> {
    t.registry.and_then(registry::lookup)
}

/// The registry tools `caller` may use: the knowledge-RAG ones only when one of the KBs it can
/// read is bound (the registry's own rule, [`ToolBox::offered_for`]; `evidence_only` skips
/// that lookup), minus the capabilities the tenant switched off (`PATCH
/// /api/page-ai/capabilities`), as for runs. Switches that cannot be read offer nothing.
async fn offered(state: &AppState, caller: &Caller, evidence_only: bool) -> Vec<&'static ToolDef> {
    let mut offered: Vec<&'static ToolDef> = if evidence_only {
        registry::registry().iter().filter(|d| d.capability == CAPABILITY_EVIDENCE).collect()
    } else {
        ToolBox::offered_for(state, &caller.auth, &Default::default()).await
    };
    let switches = async {
        let mut tx = caller.auth.tx(state).await?;
        let s = capabilities::load(&mut tx).await?;
        tx.commit().await?;
        Ok::<_, AppError>(s)
    };
    match switches.await {
        Ok(s) => offered.retain(|d| s.enabled(d.capability)),
        Err(e) => {
            tracing::warn!("mcp: capability switches could not be read, no registry tool is offered: {e}");
            offered.clear();
        }
    }
    offered
}

/// The tools listed to `caller` (see [`offered`]; `list_knowledge_bases` always).
/// A run-scoped token gets the run's tool offer only ([`run_token::offered`]).
pub async fn list(state: &AppState, caller: &Caller) -> Vec<Tool> {
    let offered = match &caller.run {
        Some(run) => run_token::offered(state, &caller.auth, run).await,
        None => offered(state, caller, false).await,
    };
    TOOLS
        .iter()
        .filter(|t| match def_of(t) {
            Some(d) => offered.iter().any(|o| o.name == d.name),
            None => caller.run.is_none(),
        })
        .map(tool_of)
        .collect()
}

/// A failed call: `isError`, our stable code in the text and in the structured content.
pub fn error_result(code: &str, message: &str) -> CallToolResult {
    let code = public_code(code);
    let mut r = CallToolResult::error(vec![ContentBlock::text(format!("Error {code}: {message}"))]);
    r.structured_content = Some(json!({"error": {"code": code, "message": message}}));
    r
}

fn success(content: Value, text: String) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(content);
    r
}

/// Run the MCP tool `name` as the caller; never a protocol error.
pub async fn call(state: &AppState, caller: &Caller, name: &str, arguments: Option<JsonObject>) -> CallToolResult {
    let arguments = arguments.map(Value::Object).unwrap_or(Value::Null);
    let Some(t) = TOOLS.iter().find(|t| t.name == name) else {
        let shown: String = name.chars().take(100).collect();
        return error_result("unknown_tool", &format!("no tool named {shown}"));
    };
    if let Some(run) = &caller.run {
        // The run's own tools, journaled into it; `list_knowledge_bases` is not one of them.
        let Some(def) = def_of(t) else {
            return error_result("unknown_tool", &format!("{name} is not one of this run's tools"));
        };
        let r = run_token::call(state, &caller.auth, run, &caller.citation_base, def.name, arguments).await;
        return match r.error {
            None => {
                let text = render(t.name, &r.content);
                success(r.content, text)
            }
            Some(e) if e.code == "unknown_tool" => {
                error_result("unknown_tool", &format!("{name} is not one of this run's tools"))
            }
            Some(e) => error_result(&e.code, &e.message),
        };
    }
    let Some(def) = def_of(t) else {
        return list_knowledge_bases(state, caller, arguments).await;
    };
    let offered = offered(state, caller, def.capability == CAPABILITY_EVIDENCE).await;
    if !offered.iter().any(|o| o.name == def.name) {
        let why = if def.capability == CAPABILITY_KNOWLEDGE_RAG {
            "needs a knowledge base bound to knowledge RAG, with knowledge RAG switched on for the team"
        } else {
            "is switched off for this team"
        };
        return error_result("unknown_tool", &format!("{name} {why}"));
    }
    let tools = ToolBox::detached(state.clone(), caller.auth.clone(), caller.citation_base.clone(), offered);
    match tools.run(def.name, arguments).await {
        Ok(content) => {
            let text = render(t.name, &content);
            success(content, text)
        }
        Err(e) => error_result(&e.code, &e.message),
    }
}

/// What the text rendering reads of each cited item.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cited {
    citation_markdown: String,
    #[serde(default)]
    quote: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

fn clip(s: &str, max: usize) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// A short Markdown rendering of a tool's output: one line per passage with its citation link.
pub fn render(tool: &str, content: &Value) -> String {
    let items: Vec<Cited> = match ["results", "blocks", "references"].iter().find_map(|k| content.get(*k)) {
        Some(Value::Array(a)) => a.iter().filter_map(|v| Cited::deserialize(v).ok()).collect(),
        _ => Cited::deserialize(content).ok().into_iter().collect(),
    };
    let mut out = String::new();
    match tool {
        EVIDENCE_READ => {
            let title = content.get("sourceTitle").and_then(Value::as_str).unwrap_or_default();
            out.push_str(&format!("{} passage(s) of {title}:\n", items.len()));
        }
        EVIDENCE_OPEN | KNOWLEDGE_RAG_OPEN_REFERENCE => {}
        _ if items.is_empty() => out.push_str("No passages found.\n"),
        _ => out.push_str(&format!("{} passage(s):\n", items.len())),
    }
    if content.get("degraded").and_then(Value::as_bool) == Some(true) {
        let why = content.get("degradedReason").and_then(Value::as_str).unwrap_or("degraded");
        out.push_str(&format!("(partial results: {why})\n"));
    }
    for (i, c) in items.iter().enumerate() {
        let body = c.quote.as_deref().or(c.text.as_deref()).map(|q| format!(" — “{}”", clip(q, 300))).unwrap_or_default();
        out.push_str(&format!("{}. {}{body}\n", i + 1, c.citation_markdown));
    }
    if !items.is_empty() {
        out.push_str("\nCite with these links exactly as given.");
    }
    out.trim_end().to_string()
}

async fn list_knowledge_bases(state: &AppState, caller: &Caller, arguments: Value) -> CallToolResult {
    let args = match arguments {
        Value::Null => Value::Object(JsonObject::new()),
        v => v,
    };
    if let Err(e) = serde_json::from_value::<ListKbArgs>(args) {
        return error_result("invalid_input", &e.to_string());
    }
    match knowledge_bases(state, caller).await {
        Ok(out) => {
            let mut text = format!("{} knowledge base(s):\n", out.knowledge_bases.len());
            for k in &out.knowledge_bases {
                let rag = if k.knowledge_rag { ", knowledge RAG" } else { "" };
                text.push_str(&format!("- {} ({}, {} sources{rag}): {}\n", k.name, k.visibility, k.source_count, k.resource_uri));
            }
            success(serde_json::to_value(&out).unwrap_or_default(), text.trim_end().to_string())
        }
        Err(e) => error_result(e.code(), &e.public_message()),
    }
}

/// The KBs `caller` can read (RLS), with their bindings.
pub async fn knowledge_bases(state: &AppState, caller: &Caller) -> Result<ListKbOutput, AppError> {
    let auth = &caller.auth;
    let mut tx = auth.tx(state).await?;
    let kbs = crate::kbs::queries::list(&mut tx, auth.user_id, auth.role.is_admin()).await?;
    let ids: Vec<Uuid> = kbs.iter().map(|k| k.id).collect();
    let bound = crate::rag::binding::active_for(&mut tx, &ids).await?;
    tx.commit().await?;
    let knowledge_bases = kbs
        .into_iter()
        .map(|k| KbSummary {
            knowledge_rag: bound.iter().any(|b| b.kb_id == k.id),
            resource_uri: kb_uri(k.id),
            id: k.id,
            name: k.name,
            description: k.description,
            visibility: k.visibility,
            source_count: k.source_count,
        })
        .collect();
    Ok(ListKbOutput { knowledge_bases })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mcp_tool_has_its_schemas_and_the_citation_rule() {
        for t in TOOLS {
            let tool = tool_of(t);
            assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", t.name);
            let out = tool.output_schema.as_ref().expect("output schema");
            assert_eq!(out.get("type"), Some(&json!("object")), "{}", t.name);
            assert!(!Value::Object((**out).clone()).to_string().contains("$ref"), "{}: self-contained", t.name);
            assert!(tool.description.as_deref().unwrap_or_default().contains("citationMarkdown"), "{}", t.name);
            if let Some(r) = t.registry {
                assert!(registry::lookup(r).is_some(), "{r}");
            }
        }
        let search = tool_of(&TOOLS[0]);
        let props = Value::Object((**search.output_schema.as_ref().unwrap()).clone());
        let hit = &props["properties"]["results"]["items"]["properties"];
        for f in ["quote", "citationMarkdown", "citationUrl", "locator", "evidenceId"] {
            assert!(hit.get(f).is_some(), "search output schema lacks {f}: {hit}");
        }
    }

    #[test]
    fn the_text_rendering_lists_each_citation() {
        let content = json!({"results": [
            {"evidenceId": Uuid::nil(), "quote": "Scoped   threads\nborrow", "citationMarkdown": "[a.md · L3](http://x/v#hl)"},
        ]});
        let t = render(EVIDENCE_SEARCH, &content);
        assert!(t.contains("1. [a.md · L3](http://x/v#hl) — “Scoped threads borrow”"), "{t}");
        assert_eq!(render(EVIDENCE_SEARCH, &json!({"results": []})), "No passages found.");
        let open = render(EVIDENCE_OPEN, &json!({"citationMarkdown": "[b.pdf · p.2](http://x/b)", "quote": "q"}));
        assert!(open.starts_with("1. [b.pdf · p.2](http://x/b)"), "{open}");
    }

    #[test]
    fn tool_errors_carry_the_public_code() {
        let r = error_result("invalid_arguments", "query: 1 to 4000 characters");
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.structured_content.unwrap()["error"]["code"], "invalid_input");
    }
}

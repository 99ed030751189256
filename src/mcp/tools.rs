//! The MCP tools: every registry tool (`agents::tools`: its MCP name and description, the
//! JSON Schemas of its typed arguments and output, run through a detached `ToolBox`, its
//! output's Markdown), plus `list_knowledge_bases`, which only MCP clients need (a run's
//! context names its KBs).
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

use super::{caller::Caller, run_token};
use crate::{
    agents::offer::{self, For},
    agents::tools::{self as registry, ToolBox, ToolDef, ToolError, ToolErrorCode},
    error::AppError,
    evidence::tools::uuid_schema,
    state::AppState,
};

/// MCP's own tool (after the registry's).
pub const LIST_KNOWLEDGE_BASES: &str = "list_knowledge_bases";

const LIST_KNOWLEDGE_BASES_DESCRIPTION: &str = "The knowledge bases this token's user can read: id, name, description, \
    visibility, how many sources they hold, whether knowledge RAG (LightRAG) is bound, and the MCP resource URI that \
    lists their documents. Searches cover all of them.";

/// Appended to every description: how to cite.
const CITE: &str = " Cite every passage you use with its citationMarkdown link exactly as returned (it opens the \
                    document at the passage, highlighted); never write a page, line or link that a result did not give.";

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

fn tool(name: &str, description: &str, input: Value, output: Value) -> Tool {
    Tool::new(name.to_string(), format!("{description}{CITE}"), object(input))
        .with_raw_output_schema(object(output))
        .with_annotations(ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false))
}

/// A registry tool as MCP lists it.
fn tool_of(d: &ToolDef) -> Tool {
    tool(&d.mcp_name, d.mcp_description, d.parameters.clone(), d.output.clone())
}

fn list_knowledge_bases_tool() -> Tool {
    let (input, output) = (registry::parameters::<ListKbArgs>(), registry::output_of::<ListKbOutput>());
    tool(LIST_KNOWLEDGE_BASES, LIST_KNOWLEDGE_BASES_DESCRIPTION, input, output)
}

/// The registry tools `caller` may use, outside any run ([`offer::offer`] for a member): the
/// knowledge-RAG ones only when one of the KBs it can read is bound, minus the capabilities the
/// tenant switched off (`PATCH /api/page-ai/capabilities`), as for runs. An offer that cannot be
/// computed offers nothing.
async fn offered(state: &AppState, caller: &Caller) -> Vec<&'static ToolDef> {
    match offer::offer(state, &caller.auth, &Default::default(), For::Member).await {
        Ok(o) => o.0,
        Err(e) => {
            tracing::warn!("mcp: the tool offer could not be computed (capability switches?), no registry tool is offered: {e}");
            Vec::new()
        }
    }
}

/// The tools listed to `caller`: the registry tools it is offered (see [`offered`]), in
/// registry order, then `list_knowledge_bases` (not for a run-scoped token, which gets the
/// run's tool offer only: [`run_token::offered`]).
pub async fn list(state: &AppState, caller: &Caller) -> Vec<Tool> {
    let offered = match &caller.run {
        Some(run) => run_token::offered(state, &caller.auth, run).await,
        None => offered(state, caller).await,
    };
    let mut tools: Vec<Tool> =
        registry::registry().iter().filter(|d| offered.iter().any(|o| o.name == d.name)).map(tool_of).collect();
    if caller.run.is_none() {
        tools.push(list_knowledge_bases_tool());
    }
    tools
}

/// A failed call: `isError`, our stable code in the text and in the structured content.
pub fn error_result(code: &str, message: &str) -> CallToolResult {
    let mut r = CallToolResult::error(vec![ContentBlock::text(format!("Error {code}: {message}"))]);
    r.structured_content = Some(json!({"error": {"code": code, "message": message}}));
    r
}

/// A failed tool call, with the code as the API says it (`invalid_input`).
fn tool_error(e: &ToolError) -> CallToolResult {
    error_result(e.code.public(), &e.message)
}

fn success(content: Value, text: String) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(content);
    r
}

/// Run the MCP tool `name` as the caller; never a protocol error.
pub async fn call(state: &AppState, caller: &Caller, name: &str, arguments: Option<JsonObject>) -> CallToolResult {
    let arguments = arguments.map(Value::Object).unwrap_or(Value::Null);
    let def = registry::lookup_mcp(name);
    if def.is_none() && name != LIST_KNOWLEDGE_BASES {
        let shown: String = name.chars().take(100).collect();
        return error_result(ToolErrorCode::UnknownTool.public(), &format!("no tool named {shown}"));
    }
    if let Some(run) = &caller.run {
        // The run's own tools, journaled into it; `list_knowledge_bases` is not one of them.
        let not_offered = || error_result(ToolErrorCode::UnknownTool.public(), &format!("{name} is not one of this run's tools"));
        let Some(def) = def else {
            return not_offered();
        };
        let r = run_token::call(state, &caller.auth, run, &caller.citation_base, def.name, arguments).await;
        return match r.error {
            None => success(r.content, r.text),
            Some(e) if e.code == ToolErrorCode::UnknownTool.as_str() => not_offered(),
            Some(e) => error_result(ToolErrorCode::public_of(&e.code), &e.message),
        };
    }
    let Some(def) = def else {
        return list_knowledge_bases(state, caller, arguments).await;
    };
    let offered = offered(state, caller).await;
    if !offered.iter().any(|o| o.name == def.name) {
        let why = if def.capability == crate::ai::Capability::KnowledgeRag {
            "needs a knowledge base bound to knowledge RAG, with knowledge RAG switched on for the team"
        } else {
            "is switched off for this team"
        };
        return error_result(ToolErrorCode::UnknownTool.public(), &format!("{name} {why}"));
    }
    let tools = ToolBox::detached(state.clone(), caller.auth.clone(), caller.citation_base.clone(), offered);
    match tools.run(def.name, arguments).await {
        Ok(c) => success(c.content, c.text),
        Err(e) => tool_error(&e),
    }
}

async fn list_knowledge_bases(state: &AppState, caller: &Caller, arguments: Value) -> CallToolResult {
    if let Err(e) = registry::parse::<ListKbArgs>(arguments) {
        return tool_error(&e);
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
    let kbs = crate::kbs::queries::list_readable(&mut tx, auth.user_id, auth.role.is_admin()).await?;
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

    /// Every MCP tool as listed to a caller offered everything.
    fn all() -> Vec<Tool> {
        registry::registry().iter().map(tool_of).chain([list_knowledge_bases_tool()]).collect()
    }

    #[test]
    fn the_mcp_list_is_the_registry_and_list_knowledge_bases() {
        let names: Vec<String> = all().iter().map(|t| t.name.to_string()).collect();
        let mut expected: Vec<String> = registry::registry().iter().map(|d| registry::mcp_name(d.name)).collect();
        expected.push(LIST_KNOWLEDGE_BASES.to_string());
        assert_eq!(names, expected);
        assert_eq!(
            names,
            [
                "evidence_search",
                "evidence_read",
                "evidence_open",
                "evidence_outline",
                "knowledge_rag_query",
                "knowledge_rag_open_reference",
                "list_knowledge_bases"
            ]
        );
        for d in registry::registry() {
            assert_eq!(registry::lookup_mcp(&d.mcp_name).map(|x| x.name), Some(d.name));
        }
    }

    #[test]
    fn every_mcp_tool_has_its_schemas_and_the_citation_rule() {
        for tool in all() {
            assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", tool.name);
            let out = tool.output_schema.as_ref().expect("output schema");
            assert_eq!(out.get("type"), Some(&json!("object")), "{}", tool.name);
            assert!(registry::self_contained(&Value::Object((**out).clone())), "{}: self-contained", tool.name);
            assert!(tool.description.as_deref().unwrap_or_default().contains("citationMarkdown"), "{}", tool.name);
        }
        let search = &all()[0];
        let props = Value::Object((**search.output_schema.as_ref().unwrap()).clone());
        let hit = &props["properties"]["results"]["items"]["properties"];
        for f in ["quote", "citationMarkdown", "citationUrl", "locator", "evidenceId"] {
            assert!(hit.get(f).is_some(), "search output schema lacks {f}: {hit}");
        }
    }

    #[test]
    fn tool_errors_carry_the_public_code() {
        let r = tool_error(&ToolError::invalid("query: 1 to 4000 characters"));
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.structured_content.unwrap()["error"]["code"], "invalid_input");
    }
}

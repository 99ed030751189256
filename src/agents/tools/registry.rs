//! The registry: every tool, one line each, in the order they are offered. Everything else
//! (function calling, ACP's offer, MCP's list, the descriptors, the capability switches, the
//! self-test) reads it.

use std::sync::OnceLock;

use super::{
    open::Open, outline::Outline, rag_open::RagOpenReference, rag_query::RagQuery, read::Read, search::Search, tool::ToolDef,
};

/// Every tool of the registry.
pub fn registry() -> &'static [ToolDef] {
    static REGISTRY: OnceLock<Vec<ToolDef>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        vec![
            ToolDef::of::<Search>(),
            ToolDef::of::<Read>(),
            ToolDef::of::<Open>(),
            ToolDef::of::<Outline>(),
            ToolDef::of::<RagQuery>(),
            ToolDef::of::<RagOpenReference>(),
        ]
    })
}

/// A registry tool by its dotted or function name.
pub fn lookup(name: &str) -> Option<&'static ToolDef> {
    registry().iter().find(|d| d.is_named(name))
}

/// A registry tool by its MCP name (`evidence_search`).
pub fn lookup_mcp(name: &str) -> Option<&'static ToolDef> {
    registry().iter().find(|d| d.mcp_name == name)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agents::tools::{
        Tool,
        tool::{function_name, mcp_name, self_contained},
    };

    #[test]
    fn the_registry_names_schemas_and_capabilities() {
        let names: Vec<&str> = registry().iter().map(|d| d.name).collect();
        assert_eq!(
            names,
            [
                "mnote.evidence.search",
                "mnote.evidence.read",
                "mnote.evidence.open",
                "mnote.evidence.outline",
                "mnote.knowledge_rag.query",
                "mnote.knowledge_rag.open_reference"
            ]
        );
        for (i, d) in registry().iter().enumerate() {
            assert!(registry()[i + 1..].iter().all(|o| o.name != d.name && o.mcp_name != d.mcp_name), "{}", d.name);
            assert_eq!(d.function_name, function_name(d.name));
            assert_eq!(d.mcp_name, mcp_name(d.name));
            assert!(d.function_name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{}", d.function_name);
            assert_eq!(d.parameters["type"], "object", "{}: {}", d.name, d.parameters);
            assert_eq!(d.output["type"], "object", "{}: {}", d.name, d.output);
            assert!(!d.parameters.to_string().contains("$ref"), "{}: parameters inlined", d.name);
            for schema in [&d.parameters, &d.output] {
                assert!(self_contained(schema), "{}: self-contained: {schema}", d.name);
                assert!(schema.get("$schema").is_none());
            }
            assert!(d.description.len() > 40 && d.mcp_description.len() > 40);
            assert_eq!(lookup(&d.function_name).map(|x| x.name), Some(d.name));
            assert_eq!(lookup_mcp(&d.mcp_name).map(|x| x.name), Some(d.name));
        }
        let search = &lookup(Search::NAME).unwrap().parameters;
        assert_eq!(search["required"], json!(["query"]));
        assert!(search["properties"].get("kbIds").is_none(), "the run's context decides the KBs");
        assert_eq!(search["additionalProperties"], false);
        assert!(search["properties"]["mode"].to_string().contains("lexical"));
        let outline = &lookup(Outline::NAME).unwrap().parameters;
        assert_eq!(outline["properties"]["sourceId"]["format"], "uuid");
        assert_eq!(lookup(RagQuery::NAME).unwrap().capability, crate::ai::Capability::KnowledgeRag);
        assert!(lookup("evidence_search").is_none() && lookup_mcp("mnote_evidence_search").is_none());
    }
}

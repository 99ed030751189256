//! The registry of [`ToolBox`](super::ToolBox): the tools' names and capabilities, their
//! typed arguments (whose JSON Schemas are the tools' `parameters`) and the typed outputs the
//! model sees.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    evidence::{
        Locator,
        tools::{Mode, OutlineRequest, uuid_schema},
    },
    rag::{self, client::QueryMode, query::Reference},
    search::open,
};

pub const SEARCH: &str = "mnote.evidence.search";
pub const READ: &str = "mnote.evidence.read";
pub const OPEN: &str = "mnote.evidence.open";
pub const OUTLINE: &str = "mnote.evidence.outline";
pub const RAG_QUERY: &str = "mnote.knowledge_rag.query";
pub const RAG_OPEN_REFERENCE: &str = "mnote.knowledge_rag.open_reference";

pub const CAPABILITY_EVIDENCE: &str = "evidence";
pub const CAPABILITY_KNOWLEDGE_RAG: &str = "knowledge_rag";

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceHit {
    /// The passage's id (for `read` and `open`).
    #[schemars(schema_with = "uuid_schema")]
    pub evidence_id: Uuid,
    /// The passage's text as indexed (shortened around the match).
    pub quote: String,
    /// `[document · place](url)`: cite the passage with exactly this link.
    pub citation_markdown: String,
    pub source_title: String,
    #[schemars(schema_with = "uuid_schema")]
    pub source_id: Uuid,
    pub score: f64,
    /// The heading the passage sits under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    #[serde(flatten)]
    pub located: Located,
}

/// Where a passage is, for clients outside a run (MCP): the absolute viewer URL that opens it
/// highlighted and its locator. Empty (absent from the JSON) for a run's agent, which cites by
/// marker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Located {
    /// Absolute URL of the viewer, opened at the passage and highlighted (`MNOTE_PUBLIC_URL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citation_url: Option<String>,
    /// The passage's `mnote.evidence_locator.v1`: document, page and bbox, or lines, or DOCX
    /// paragraph, and the character range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "locator_schema")]
    pub locator: Option<Locator>,
}

/// `mnote.evidence.search` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchOutput {
    pub results: Vec<EvidenceHit>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
}

/// A passage of a `read` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadBlock {
    #[schemars(schema_with = "uuid_schema")]
    pub evidence_id: Uuid,
    pub text: String,
    pub citation_markdown: String,
    /// The passage asked for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub anchor: bool,
    #[serde(flatten)]
    pub located: Located,
}

/// `mnote.evidence.read` content: the passage with its neighbours and the rest of its
/// section (bounded), in document order.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadOutput {
    #[schemars(schema_with = "uuid_schema")]
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
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenOutput {
    #[schemars(schema_with = "uuid_schema")]
    pub evidence_id: Uuid,
    pub citation_markdown: String,
    /// The viewer URL, root-relative.
    pub url: String,
    pub block_found: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    /// The passage's text (outside a run: MCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
    #[serde(flatten)]
    pub located: Located,
}

/// A knowledge-RAG reference mapped to our evidence, as the model sees it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RagReference {
    /// `null` when only the document could be cited.
    #[schemars(schema_with = "optional_uuid_schema")]
    pub evidence_id: Option<Uuid>,
    pub quote: String,
    pub citation_markdown: String,
    pub source_title: String,
    #[schemars(schema_with = "uuid_schema")]
    pub source_id: Uuid,
    pub file_path: String,
    /// `exact`, `fuzzy`, `evidence` or `resource_only` (how the chunk was mapped to a passage).
    #[schemars(with = "String")]
    pub match_quality: rag::mapping::MatchQuality,
    #[serde(flatten)]
    pub located: Located,
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
            located: Located::default(),
        }
    }
}

/// `mnote.knowledge_rag.query` content.
#[derive(Debug, Clone, Serialize, JsonSchema)]
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
pub fn parameters<T: JsonSchema>() -> Value {
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

/// The JSON Schema of `T` as a tool's output (MCP's `outputSchema`): self-contained, as
/// serialized.
pub fn output_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .for_serialize()
        .into_generator();
    let mut v = serde_json::to_value(generator.into_root_schema_for::<T>()).unwrap_or_else(|_| json!({"type": "object"}));
    if let Some(o) = v.as_object_mut() {
        o.remove("title");
    }
    v
}

/// The JSON Schema of what a registry tool returns (the typed outputs above), by its dotted
/// name; `None` for an unknown name.
pub fn output_schema(name: &str) -> Option<&'static Value> {
    static SCHEMAS: OnceLock<Vec<(&'static str, Value)>> = OnceLock::new();
    let all = SCHEMAS.get_or_init(|| {
        vec![
            (SEARCH, output_of::<SearchOutput>()),
            (READ, output_of::<ReadOutput>()),
            (OPEN, output_of::<OpenOutput>()),
            (OUTLINE, output_of::<crate::evidence::tools::OutlineResponse>()),
            (RAG_QUERY, output_of::<RagQueryOutput>()),
            (RAG_OPEN_REFERENCE, output_of::<RagReference>()),
        ]
    });
    all.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
}

fn optional_uuid_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["string", "null"], "format": "uuid"})
}

/// `mnote.evidence_locator.v1` (`evidence::Locator`), the fields a client uses to place a
/// citation; the object carries every field of the locator.
fn locator_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "mnote.evidence_locator.v1: where the passage is in its document",
        "properties": {
            "schema": {"type": "string", "const": crate::evidence::LOCATOR_SCHEMA},
            "sourceId": {"type": "string", "format": "uuid"},
            "kbId": {"type": "string", "format": "uuid"},
            "resourcePath": {"type": "string", "description": "relative to the grant root"},
            "resourceKind": {"type": "string", "enum": ["markdown", "pdf", "docx", "image", "text"]},
            "blockId": {"type": "string"},
            "sourceHash": {"type": "string"},
            "sectionPath": {"type": "array", "items": {"type": "string"}},
            "page": {"type": ["integer", "null"], "description": "1-based (PDF, images)"},
            "bbox": {"type": ["array", "null"], "items": {"type": "number"}, "description": "[x0, y0, x1, y1], top-left origin"},
            "pageSize": {"type": ["array", "null"], "items": {"type": "number"}},
            "lineRange": {"type": ["array", "null"], "items": {"type": "integer"}, "description": "[first, last], 1-based, inclusive"},
            "charRange": {"type": "array", "items": {"type": "integer"}, "description": "[start, end) in the extracted text"},
            "paraIdStart": {"type": ["string", "null"]},
            "paraIdEnd": {"type": ["string", "null"]},
            "paragraphOrdinal": {"type": ["integer", "null"]},
            "quality": {"type": "string"},
            "textFingerprint": {"type": "string"}
        },
        "required": ["schema", "sourceId", "resourcePath", "resourceKind", "blockId", "charRange"]
    })
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
}

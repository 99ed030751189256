//! The typed input and output of the evidence tools `search`, `read` and `open`: one
//! definition for the HTTP API (`/api/evidence/*`), the CLI and, next, the agent runtimes and
//! MCP.
//!
//! `read` and `open` used to answer with `serde_json::json!` objects, whose keys come out in
//! alphabetical order (serde_json without `preserve_order`); their structs declare fields in
//! that order, and nested objects are written the same way ([`sorted`]), so the JSON is
//! byte-for-byte what it was.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use uuid::Uuid;

use super::{Locator, SourceKind};

/// A search mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Lexical,
    Vector,
    #[default]
    Hybrid,
    Graph,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Lexical => "lexical",
            Mode::Vector => "vector",
            Mode::Hybrid => "hybrid",
            Mode::Graph => "graph",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "lexical" => Some(Mode::Lexical),
            "vector" => Some(Mode::Vector),
            "hybrid" => Some(Mode::Hybrid),
            "graph" => Some(Mode::Graph),
            _ => None,
        }
    }
}

/// `POST /api/evidence/search` body.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchRequest {
    #[schemars(length(min = 1, max = 2000), regex(pattern = r"\S"))]
    pub query: String,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub top_k: Option<usize>,
    #[serde(default)]
    pub kb_ids: Option<Vec<Uuid>>,
    #[serde(default)]
    #[schemars(with = "Option<Vec<super::SourceKind>>")]
    pub kinds: Option<Vec<String>>,
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Match text that exists only in OCR output (default true).
    #[serde(default)]
    pub include_ocr: Option<bool>,
    /// Also return evidence of stale sources, flagged `stale: true` (default false).
    #[serde(default)]
    pub include_stale: Option<bool>,
    /// Only these sources (documents), e.g. "the other matches in this document".
    #[serde(default)]
    pub source_ids: Option<Vec<Uuid>>,
    /// Paging: skip this many results (documents, with `groupBy`). Asking for a page (this or
    /// `groupBy`) also gets the response's `total` and `nextOffset`.
    #[serde(default)]
    #[schemars(range(max = 10_000))]
    pub offset: Option<usize>,
    /// `"document"`: results grouped by source, best document first, `topK` documents per
    /// page, each with its best `perGroup` blocks (`groups`).
    #[serde(default)]
    pub group_by: Option<GroupBy>,
    /// Blocks shown per document with `groupBy` (default 3, at most 20).
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    pub per_group: Option<usize>,
}

/// How a paged search groups its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    Document,
}

impl SearchRequest {
    pub fn new(query: impl Into<String>, mode: Mode) -> Self {
        SearchRequest {
            query: query.into(),
            mode,
            top_k: None,
            kb_ids: None,
            kinds: None,
            path_prefix: None,
            include_ocr: None,
            include_stale: None,
            source_ids: None,
            offset: None,
            group_by: None,
            per_group: None,
        }
    }

    /// Whether the caller asked for a page (`offset` or `groupBy`): the answer then counts.
    pub fn is_paged(&self) -> bool {
        self.offset.is_some() || self.group_by.is_some()
    }
}

/// How a hybrid search fused its two lists.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fusion {
    pub rrf_k: f64,
    pub lexical_weight: f64,
    pub vector_weight: f64,
    /// Why the vector side was left out, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

/// Graph mode: the edge a result was reached by.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GraphStep {
    pub hop: u32,
    pub edge_kind: String,
    pub from_evidence_id: Uuid,
}

/// `openAction` of a result: where the viewer shows the evidence highlighted.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenAction {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Root-relative: `/sources/{sourceId}/view?evidence={evidenceId}…#hl`.
    pub url: String,
    /// `MNOTE_PUBLIC_URL` + `url`, when a public URL is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub absolute_url: Option<String>,
}

/// One search result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub evidence_id: Uuid,
    pub quote: String,
    /// `[start, end)` ranges of `quote`, in Unicode code points.
    pub highlights: Vec<[usize; 2]>,
    pub score: f64,
    pub source: Locator,
    pub open_action: OpenAction,
    pub citation_markdown: String,
    pub source_title: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphStep>,
}

/// `mnote.evidence_search_response.v1`. `H` is the result type: [`SearchHit`] on the wire;
/// the search core's own hit carries what grouping by document needs as well.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchResponse<H = SearchHit> {
    pub ok: bool,
    pub schema: &'static str,
    pub mode: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fusion: Option<Fusion>,
    pub took_ms: f64,
    pub results: Vec<H>,
    /// A paged search's counts and groups (`offset` / `groupBy` asked for).
    #[serde(flatten)]
    pub paging: Option<Paging>,
}

/// What a paged search adds to its response.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Paging {
    /// Matching blocks (after every filter). With `totalIsLowerBound` there are at least this
    /// many: only the best [`Paging::depth`] are ranked for paging.
    pub total: usize,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub total_is_lower_bound: bool,
    /// Documents among the ranked blocks (grouped searches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_documents: Option<usize>,
    /// What this page skipped (results, or documents when grouped).
    pub offset: usize,
    /// The `offset` of the next page, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
    /// How many of the best blocks were ranked for paging.
    pub depth: usize,
    /// With `groupBy: "document"`: one entry per document of the page, in rank order; its
    /// blocks are `results[resultRange[0]..resultRange[1]]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<SearchGroup>>,
}

/// One document of a grouped page.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchGroup {
    pub source_id: Uuid,
    pub kb_id: Uuid,
    pub source_title: String,
    pub resource_path: String,
    pub resource_kind: SourceKind,
    /// The file's modification time when known, else when the source last changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Matching blocks of this document among the ranked ones.
    pub total: usize,
    /// `[start, end)` into `results`: the blocks shown for this document (its best ones).
    pub result_range: [usize; 2],
}

impl<H> SearchResponse<H> {
    /// The same response with each result turned into another type.
    pub fn map_results<T>(self, f: impl FnMut(H) -> T) -> SearchResponse<T> {
        SearchResponse {
            ok: self.ok,
            schema: self.schema,
            mode: self.mode,
            degraded: self.degraded,
            degraded_reason: self.degraded_reason,
            fusion: self.fusion,
            took_ms: self.took_ms,
            results: self.results.into_iter().map(f).collect(),
            paging: self.paging,
        }
    }
}

/// `POST /api/evidence/read` body: an evidence id, or a locator (`sourceId` + `blockId`).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadRequest {
    #[serde(default)]
    pub evidence_id: Option<Uuid>,
    /// Any subset of a [`Locator`]'s fields ([`super::LocatorRef`]).
    #[serde(default)]
    pub locator: Option<Value>,
    /// Blocks before and after the anchor (default 2, at most 20).
    #[serde(default)]
    pub window: Option<usize>,
}

/// `POST /api/evidence/open` body: the same as [`ReadRequest`] (`window` is accepted and
/// ignored).
pub type OpenRequest = ReadRequest;

/// `mnote.evidence_open_response.v1`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenResponse {
    /// Whether the block the reference names is still indexed (else the URL opens the page or
    /// line the locator pointed at).
    pub block_found: bool,
    pub citation_markdown: String,
    pub ok: bool,
    #[serde(serialize_with = "sorted")]
    #[schemars(with = "OpenAction")]
    pub open_action: OpenAction,
    pub schema: &'static str,
    pub stale: bool,
}

/// A block of a [`ReadResponse`].
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceBlock {
    pub block_id: String,
    pub evidence_id: Uuid,
    #[serde(serialize_with = "sorted")]
    #[schemars(with = "OpenAction")]
    pub open_action: OpenAction,
    pub source: Locator,
    pub text: String,
    #[serde(rename = "type")]
    pub block_type: String,
}

/// `mnote.evidence_read_response.v1`: the anchor, `window` blocks before and after, the other
/// blocks of its section (bounded), its section path and the source's title and kind.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadResponse {
    pub anchor: Option<EvidenceBlock>,
    pub next: Vec<EvidenceBlock>,
    pub ok: bool,
    pub previous: Vec<EvidenceBlock>,
    pub resource_kind: SourceKind,
    pub resource_path: String,
    pub schema: &'static str,
    pub section_blocks: Vec<EvidenceBlock>,
    pub section_path: Vec<String>,
    pub section_truncated: bool,
    pub source_title: String,
    pub stale: bool,
}

/// `mnote.evidence.outline` input: the source whose section tree is wanted.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutlineRequest {
    /// The source (document) id, e.g. a search result's `sourceId`.
    #[schemars(schema_with = "uuid_schema")]
    pub source_id: Uuid,
}

/// One heading of a source with what lies under it. Ranges and counts include the
/// subsections, so an agent can pick a section of a long document before reading it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutlineSection {
    pub title: String,
    /// 1 = top level (a Markdown `#`, a DOCX "Heading 1", a PDF's outermost heading).
    pub level: u8,
    /// Titles from the outermost section to this one.
    pub path: Vec<String>,
    /// `[first, last]` page (PDF, images), inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_range: Option<[u32; 2]>,
    /// `[first, last]` line (Markdown, text), 1-based and inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_range: Option<[u32; 2]>,
    /// Evidence blocks in the section and its subsections.
    pub block_count: usize,
    /// The section's first evidence block (read it with `mnote.evidence.read`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_uuid_schema")]
    pub first_evidence_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<OutlineSection>,
}

/// `mnote.evidence_outline_response.v1`: a source's section tree as the index stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutlineResponse {
    pub schema: String,
    #[schemars(schema_with = "uuid_schema")]
    pub source_id: Uuid,
    pub title: String,
    #[schemars(with = "String")]
    pub kind: SourceKind,
    pub stale: bool,
    /// Every evidence block of the source (with those before the first heading).
    pub block_count: usize,
    /// Blocks before the first heading (a preamble), not in any section.
    pub unsectioned_block_count: usize,
    pub sections: Vec<OutlineSection>,
    /// More sections exist than were returned (a very long document).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A UUID in a JSON Schema (`schemars` is built without its `uuid` feature).
pub fn uuid_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "format": "uuid"})
}

/// A UUID or `null` in a JSON Schema.
pub fn optional_uuid_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["string", "null"], "format": "uuid"})
}

/// Serialize `v` with its object keys in alphabetical order, as a `json!` value has them.
/// (Sorted explicitly: a dependency turns on serde_json's `preserve_order`, under which a
/// `Value` keeps insertion order.)
fn sorted<T: Serialize, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    let mut v = serde_json::to_value(v).map_err(serde::ser::Error::custom)?;
    v.sort_all_objects();
    v.serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse() {
        for m in ["lexical", "vector", "hybrid", "graph"] {
            assert_eq!(Mode::parse(m).unwrap().as_str(), m);
        }
        assert!(Mode::parse("fuzzy").is_none());
    }

    #[test]
    fn open_response_keys_are_alphabetical_like_the_json_value_it_replaced() {
        let action =
            OpenAction { kind: "mnote.open_resource_locator", url: "/u".into(), absolute_url: Some("https://x/u".into()) };
        let r = OpenResponse {
            block_found: true,
            citation_markdown: "[a](/u)".into(),
            ok: true,
            open_action: action.clone(),
            schema: "mnote.evidence_open_response.v1",
            stale: false,
        };
        let typed = serde_json::to_string(&r).unwrap();
        let mut before = serde_json::json!({
            "ok": true,
            "schema": "mnote.evidence_open_response.v1",
            "openAction": action,
            "citationMarkdown": "[a](/u)",
            "blockFound": true,
            "stale": false,
        });
        before.sort_all_objects(); // what `json!` gave without `preserve_order`
        assert_eq!(typed, before.to_string());
    }
}

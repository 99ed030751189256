//! What a tool runs with ([`ToolEnv`]: the app state, the actor whose rights decide what is
//! visible, the run's context and the [`KbScope`] it decides (the knowledge bases every tool
//! of the run is bounded to, by search and by id), and, outside a run, the base of absolute
//! citation URLs) and what the tools share: [`Located`], and small text helpers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    auth::Auth,
    evidence::{KbScope, Locator},
    journal::ContextRefs,
    search::{open, open::OpenAction},
    state::AppState,
};

/// A tool's environment (the [`ToolBox`](super::ToolBox) holds it).
pub struct ToolEnv {
    pub(super) state: AppState,
    pub(super) actor: Auth,
    pub(super) context: ContextRefs,
    /// The run's knowledge bases (`context.kb_ids`; none = every KB the actor can read): the
    /// one bound that search, read, open, outline and the knowledge-RAG tools apply.
    scope: KbScope,
    /// Outside a run's own journal-only calls (MCP, the benchmark): the absolute base of
    /// citation URLs (`MNOTE_PUBLIC_URL`, else the request's origin); results then carry
    /// `citationUrl` + `locator` and absolute `citationMarkdown`.
    pub(super) citation_base: Option<String>,
}

impl ToolEnv {
    pub fn new(state: AppState, actor: Auth, context: ContextRefs, citation_base: Option<String>) -> ToolEnv {
        let citation_base = citation_base.map(|b| b.trim_end_matches('/').to_string());
        let scope = KbScope::of(&context.kb_ids);
        ToolEnv { state, actor, context, scope, citation_base }
    }

    /// Another context for the same actor (its KBs become the scope).
    pub(super) fn set_context(&mut self, context: ContextRefs) {
        self.scope = KbScope::of(&context.kb_ids);
        self.context = context;
    }

    pub fn actor(&self) -> &Auth {
        &self.actor
    }

    pub fn context(&self) -> &ContextRefs {
        &self.context
    }

    /// The knowledge bases this environment's tools may read from.
    pub fn scope(&self) -> &KbScope {
        &self.scope
    }

    /// Whether results carry absolute URLs and locators (see [`ToolEnv::locate`]).
    pub fn absolute(&self) -> bool {
        self.citation_base.is_some()
    }

    /// With absolute citations: the absolute viewer URL of `action`, the citation of `title`
    /// at `locator` with it, and the locator; otherwise `citation` as it is.
    pub(super) fn locate(&self, title: &str, locator: &Locator, action: &OpenAction, citation: String) -> (String, Located) {
        let Some(base) = &self.citation_base else {
            return (citation, Located::default());
        };
        let url = action.absolute_url.clone().unwrap_or_else(|| format!("{base}{}", action.url));
        let citation = open::citation_markdown(title, &locator.place(), &url);
        (citation, Located { citation_url: Some(url), locator: Some(locator.clone()) })
    }
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
            "resourceKind": {"type": "string", "enum": ["markdown", "pdf", "docx", "image", "text", "spreadsheet", "csv", "html", "email", "slides"]},
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
            "sheet": {"type": ["string", "null"], "description": "spreadsheets: the sheet's name"},
            "sheetHidden": {"type": ["boolean", "null"], "description": "spreadsheets: the sheet is hidden in the workbook"},
            "cellRange": {"type": ["string", "null"], "description": "spreadsheets and CSV: cells in A1 notation, e.g. A5:C5"},
            "slide": {"type": ["object", "null"], "description": "slides: {slide, shapeId, shapeName, shapeType, shapeBox [x, y, w, h] in slide EMU, slideSize, paragraph, tableRow, notes}"},
            "quality": {"type": "string"},
            "textFingerprint": {"type": "string"}
        },
        "required": ["schema", "sourceId", "resourcePath", "resourceKind", "blockId", "charRange"]
    })
}

/// `1 result`, `2 results`.
pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// At most `max` characters of `s`, with `…` when cut.
pub(super) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

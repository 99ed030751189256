//! The evidence domain, shared by ingest, search, the viewer, the CLI and (next) the agent
//! runtimes and MCP: the `mnote.evidence_locator.v1` [`Locator`], source kinds and
//! statuses, locator quality, the place a citation names ([`Place`]) and the typed tool I/O
//! ([`tools`]).
//!
//! Features depend on this module; it depends on none of them.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub mod attachment;
pub mod cells;
pub mod origin;
pub mod slides;
pub mod tools;

/// Which knowledge bases evidence read by id may come from, on top of what the caller may
/// read (RLS): every readable KB, or only a run's KBs (`contextRefs.kbIds`; none named = every
/// readable KB). Search, read, open, outline and the knowledge-RAG tools of a run all take it
/// from the run's `ToolEnv`, so one rule bounds them; evidence outside it is not found, as
/// invisible evidence is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum KbScope {
    /// Every KB the caller may read (the API, MCP without a run).
    #[default]
    Readable,
    /// Only these KBs (never empty).
    Only(Vec<Uuid>),
}

impl KbScope {
    /// A run's scope from its `contextRefs.kbIds`: none named = every readable KB.
    pub fn of(kb_ids: &[Uuid]) -> KbScope {
        if kb_ids.is_empty() { KbScope::Readable } else { KbScope::Only(kb_ids.to_vec()) }
    }

    /// The KBs to bind as `$n::uuid[]` (`null` = no bound beyond RLS).
    pub fn kb_ids(&self) -> Option<&[Uuid]> {
        match self {
            KbScope::Readable => None,
            KbScope::Only(ids) => Some(ids),
        }
    }

    /// Whether evidence of `kb` is inside the scope.
    pub fn allows(&self, kb: Uuid) -> bool {
        self.kb_ids().is_none_or(|ids| ids.contains(&kb))
    }
}

/// What a locator's block text is worth, checked at parse time (SPEC §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Quality {
    /// The block text is exactly what lies under the locator.
    Exact,
    /// Located, but the text under the locator differs (e.g. low-confidence OCR).
    Approximate,
    PageOnly,
    ResourceOnly,
}

impl Quality {
    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Exact => "exact",
            Quality::Approximate => "approximate",
            Quality::PageOnly => "page_only",
            Quality::ResourceOnly => "resource_only",
        }
    }
}

/// The kind of a registered file (`source.kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Markdown,
    Pdf,
    Docx,
    Image,
    Text,
    /// XLSX, XLSM (macros never run), ODS, XLS: located by sheet and cell range.
    Spreadsheet,
    /// CSV and TSV: rows located by line numbers and cell range, no sheet.
    Csv,
    Html,
    Email,
    /// PPTX and ODP: located by slide, shape and paragraph; speaker notes marked.
    Slides,
}

impl SourceKind {
    pub const ALL: [SourceKind; 10] = [
        SourceKind::Markdown,
        SourceKind::Pdf,
        SourceKind::Docx,
        SourceKind::Image,
        SourceKind::Text,
        SourceKind::Spreadsheet,
        SourceKind::Csv,
        SourceKind::Html,
        SourceKind::Email,
        SourceKind::Slides,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Markdown => "markdown",
            SourceKind::Pdf => "pdf",
            SourceKind::Docx => "docx",
            SourceKind::Image => "image",
            SourceKind::Text => "text",
            SourceKind::Spreadsheet => "spreadsheet",
            SourceKind::Csv => "csv",
            SourceKind::Html => "html",
            SourceKind::Email => "email",
            SourceKind::Slides => "slides",
        }
    }

    /// The kind of a file, from its extension (case-insensitive).
    pub fn of_extension(ext: &str) -> Option<SourceKind> {
        Some(match ext.to_ascii_lowercase().as_str() {
            "md" | "markdown" => SourceKind::Markdown,
            "pdf" => SourceKind::Pdf,
            // `.doc`, `.ppt` and `.msg` are registered to say `unsupported_legacy_format`.
            "docx" | "doc" => SourceKind::Docx,
            "png" | "jpg" | "jpeg" | "webp" | "tif" | "tiff" | "bmp" => SourceKind::Image,
            "txt" => SourceKind::Text,
            "xlsx" | "xlsm" | "ods" | "xls" => SourceKind::Spreadsheet,
            "csv" | "tsv" => SourceKind::Csv,
            "html" | "htm" | "xhtml" => SourceKind::Html,
            "eml" | "mbox" | "msg" => SourceKind::Email,
            "pptx" | "odp" | "ppt" => SourceKind::Slides,
            _ => return None,
        })
    }

    /// Kinds cited by page (PDF pages, images) rather than by line or paragraph.
    pub fn is_paged(self) -> bool {
        matches!(self, SourceKind::Pdf | SourceKind::Image)
    }
}

impl std::str::FromStr for SourceKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        SourceKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| format!("unknown kind {s:?}"))
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state of a registered file (`source.status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceStatus {
    Pending,
    Parsing,
    Indexed,
    Failed,
    /// The file is gone, changed beyond its grant, or its grant was revoked: its evidence
    /// stays readable (marked stale) but leaves search unless asked for.
    Stale,
}

impl SourceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceStatus::Pending => "pending",
            SourceStatus::Parsing => "parsing",
            SourceStatus::Indexed => "indexed",
            SourceStatus::Failed => "failed",
            SourceStatus::Stale => "stale",
        }
    }
}

impl std::fmt::Display for SourceStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SourceStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [SourceStatus::Pending, SourceStatus::Parsing, SourceStatus::Indexed, SourceStatus::Failed, SourceStatus::Stale]
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown source status {s:?}"))
    }
}

// `source.kind` and `source.status` are text columns read and bound as these enums.
crate::db::text_column!(SourceKind);
crate::db::text_column!(SourceStatus);

/// The schema id of [`Locator`].
pub const LOCATOR_SCHEMA: &str = "mnote.evidence_locator.v1";

/// `mnote.evidence_locator.v1`: where a block of evidence sits in its original file (SPEC §5).
/// Written once per block by the indexer (`evidence_block.locator`), returned as `source` by
/// every tool. Fields are declared in alphabetical order of their JSON names and absent
/// values are `null`, so the JSON is the same as the object the database holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Locator {
    /// E-mail: the attachment the block comes from (its other fields are the attachment's own
    /// place: a PDF attachment's page and box, a Markdown one's lines…).
    #[serde(default)]
    pub attachment: Option<attachment::AttachmentPlace>,
    /// Paged kinds: `[x0, y0, x1, y1]` in points (images: pixels), top-left origin.
    pub bbox: Option<[f64; 4]>,
    /// The parser's block id (`b{n}`, `p{page}_b{n}`).
    pub block_id: String,
    /// Spreadsheets and CSV: the block's cells in A1 notation (`A5:C5`, `C7`).
    #[serde(default)]
    pub cell_range: Option<String>,
    /// `[start, end)` into the artifact text, in Unicode scalar values.
    pub char_range: [u32; 2],
    pub kb_id: Uuid,
    /// Markdown/text: `[first, last]` 1-based inclusive source lines.
    pub line_range: Option<[u32; 2]>,
    /// Paged kinds: 1-based page.
    pub page: Option<u32>,
    /// Paged kinds: the page's `[width, height]` in the unit of `bbox`.
    pub page_size: Option<[f64; 2]>,
    /// DOCX: `w14:paraId` of the last/first paragraph (only Word writes them).
    pub para_id_end: Option<String>,
    pub para_id_start: Option<String>,
    /// DOCX: 1-based index of the (first) paragraph among the body's paragraphs. HTML: 1-based
    /// index of the block's element among all elements in document order (XPath `(//*)[n]`).
    pub paragraph_ordinal: Option<u32>,
    pub quality: Quality,
    pub resource_kind: SourceKind,
    /// Relative to the grant root (uploads: the file name).
    pub resource_path: String,
    /// Always [`LOCATOR_SCHEMA`].
    pub schema: String,
    pub section_path: Vec<String>,
    /// Spreadsheets: the sheet's name (CSV: none).
    #[serde(default)]
    pub sheet: Option<String>,
    /// Spreadsheets: the sheet is hidden in the workbook (its rows are indexed all the same).
    #[serde(default)]
    pub sheet_hidden: Option<bool>,
    /// Slides: the slide, the shape (type and box in slide EMU) and the paragraph or table row.
    #[serde(default)]
    pub slide: Option<slides::SlidePlace>,
    /// `sha256:<hex>` of the file version the block was parsed from.
    pub source_hash: String,
    pub source_id: Uuid,
    pub text_fingerprint: String,
}

impl Locator {
    /// The place a citation of this block names and the viewer is asked to open.
    pub fn place(&self) -> Place<'_> {
        Place {
            kind: Some(self.resource_kind.as_str()),
            page: self.page,
            first_line: self.line_range.map(|r| r[0]),
            line_range: self.line_range,
            section: self.section_path.last().map(String::as_str),
            section_path: &self.section_path,
            para_id: self.para_id_start.as_deref(),
            fingerprint: Some(self.text_fingerprint.as_str()),
            ordinal: self.paragraph_ordinal,
            sheet: self.sheet.as_deref(),
            cell_range: self.cell_range.as_deref(),
        }
    }
}

/// What a tool caller may pass to name evidence by place: any subset of a [`Locator`]'s
/// fields (unknown ones are ignored). Used to find the block again (`sourceId` + `blockId`
/// + `sourceHash`, else `textFingerprint`) and, when it is gone, for the viewer's hints.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocatorRef {
    pub source_id: Option<String>,
    pub block_id: Option<String>,
    pub source_hash: Option<String>,
    pub text_fingerprint: Option<String>,
    pub resource_kind: Option<String>,
    pub page: Option<u64>,
    pub line_range: Option<Vec<u64>>,
    pub section_path: Option<Vec<String>>,
    pub para_id_start: Option<String>,
    pub paragraph_ordinal: Option<u64>,
    pub sheet: Option<String>,
    pub cell_range: Option<String>,
}

impl LocatorRef {
    /// Read leniently: a field of the wrong type counts as absent (a caller's partial or
    /// stale locator must still open near its place).
    pub fn from_value(v: &serde_json::Value) -> LocatorRef {
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        let n = |k: &str| v.get(k).and_then(|x| x.as_u64());
        LocatorRef {
            source_id: s("sourceId"),
            block_id: s("blockId"),
            source_hash: s("sourceHash"),
            text_fingerprint: s("textFingerprint"),
            resource_kind: s("resourceKind"),
            page: n("page"),
            line_range: v.get("lineRange").and_then(|x| x.as_array()).map(|a| a.iter().filter_map(|x| x.as_u64()).collect()),
            section_path: v
                .get("sectionPath")
                .and_then(|x| x.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()),
            para_id_start: s("paraIdStart"),
            paragraph_ordinal: n("paragraphOrdinal"),
            sheet: s("sheet"),
            cell_range: s("cellRange"),
        }
    }

    pub fn place(&self) -> Place<'_> {
        let line_range = match self.line_range.as_deref() {
            Some([a, b, ..]) => Some([*a as u32, *b as u32]),
            _ => None,
        };
        Place {
            kind: self.resource_kind.as_deref(),
            page: self.page.map(|p| p as u32),
            first_line: self.line_range.as_deref().and_then(|r| r.first()).map(|l| *l as u32),
            line_range,
            section: self.section_path.as_ref().and_then(|p| p.last()).map(String::as_str),
            section_path: self.section_path.as_deref().unwrap_or(&[]),
            para_id: self.para_id_start.as_deref(),
            fingerprint: self.text_fingerprint.as_deref(),
            ordinal: self.paragraph_ordinal.map(|o| o as u32),
            sheet: self.sheet.as_deref(),
            cell_range: self.cell_range.as_deref(),
        }
    }
}

/// The parts of a locator that name a place: what citations print and what the viewer URL
/// carries as hints, from a stored [`Locator`] or a caller's [`LocatorRef`].
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    /// The resource kind as given (`None`: the caller did not say).
    pub kind: Option<&'a str>,
    pub page: Option<u32>,
    pub first_line: Option<u32>,
    pub line_range: Option<[u32; 2]>,
    /// The innermost section title.
    pub section: Option<&'a str>,
    pub section_path: &'a [String],
    pub para_id: Option<&'a str>,
    pub fingerprint: Option<&'a str>,
    pub ordinal: Option<u32>,
    /// Spreadsheets: the sheet's name.
    pub sheet: Option<&'a str>,
    /// Spreadsheets and CSV: `A5:C5`, `C7`.
    pub cell_range: Option<&'a str>,
}

/// One part of a place as a person reads it ("Page 3 · A › B · Lines 4–6"), for the search
/// page and the CLI to render in their own words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacePart<'a> {
    Page(u32),
    /// Non-empty section titles, outermost first.
    Sections(Vec<&'a str>),
    Lines(u32, u32),
    Line(u32),
    Paragraph(u32),
    /// Spreadsheets: the cells, with their sheet as a formula names it (`'Forecast 2027'!A5:C5`).
    Cells(String),
    /// Slides: the slide number (in place of a page).
    Slide(u32),
}

impl<'a> Place<'a> {
    /// Page, section path, then lines — or, without lines, the paragraph ordinal.
    pub fn parts(&self) -> Vec<PlacePart<'a>> {
        let mut parts = Vec::new();
        if let Some(p) = self.page {
            parts.push(if self.kind == Some("slides") { PlacePart::Slide(p) } else { PlacePart::Page(p) });
        }
        if let Some(cells) = self.cells_label() {
            // A sheet is its section: the cells name it already.
            parts.push(PlacePart::Cells(cells));
            if let Some([a, b]) = self.line_range {
                parts.push(if a == b { PlacePart::Line(a) } else { PlacePart::Lines(a, b) });
            }
            return parts;
        }
        let names: Vec<&'a str> = self.section_path.iter().map(String::as_str).filter(|s| !s.is_empty()).collect();
        if !names.is_empty() {
            parts.push(PlacePart::Sections(names));
        }
        match (self.line_range, self.first_line) {
            (Some([a, b]), _) if a != b => parts.push(PlacePart::Lines(a, b)),
            (Some([a, _]), _) | (None, Some(a)) => parts.push(PlacePart::Line(a)),
            (None, None) => {
                if let Some(o) = self.ordinal {
                    parts.push(PlacePart::Paragraph(o));
                }
            }
        }
        parts
    }
}

impl Place<'_> {
    /// The short place of a citation: `p.3`, `§Heading`, `L3–4` (or `L3`), `¶7`.
    pub fn citation_label(&self) -> Option<String> {
        if let Some(c) = self.cells_label() {
            return Some(c);
        }
        if let Some(p) = self.page {
            return Some(if self.kind == Some("slides") { format!("slide {p}") } else { format!("p.{p}") });
        }
        if let Some(h) = self.section {
            return Some(format!("§{h}"));
        }
        if let Some([a, b]) = self.line_range {
            return Some(if a == b { format!("L{a}") } else { format!("L{a}–{b}") });
        }
        if let Some(a) = self.first_line {
            return Some(format!("L{a}"));
        }
        self.ordinal.map(|o| format!("¶{o}"))
    }
}

impl Place<'_> {
    /// Spreadsheets and CSV: `'Forecast 2027'!A5:C5`, `Sheet1!C7`, `A12:D12` (no sheet).
    pub fn cells_label(&self) -> Option<String> {
        let range = self.cell_range?;
        Some(cells::citation(self.sheet, range))
    }
}

/// The text the search index sees for a block: its section path, then its own text, so a
/// paragraph is also found by the heading it sits under.
pub fn index_text(section_path: &[String], text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 64);
    for title in section_path {
        if !text.starts_with(title.as_str()) {
            s.push_str(title);
            s.push('\n');
        }
    }
    s.push_str(text);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored() -> serde_json::Value {
        json!({
            "schema": LOCATOR_SCHEMA, "kbId": Uuid::nil(), "sourceId": Uuid::nil(), "resourcePath": "team/a.pdf",
            "resourceKind": "pdf", "blockId": "p3_b2", "page": 3, "bbox": [10.5, 20.0, 100.25, 40.0],
            "pageSize": [595.0, 842.0], "sectionPath": ["A", "B"], "lineRange": null, "charRange": [5, 17],
            "paraIdStart": null, "paraIdEnd": null, "paragraphOrdinal": null, "textFingerprint": "ab12",
            "sourceHash": "sha256:00", "quality": "exact", "sheet": null, "sheetHidden": null, "cellRange": null,
            "slide": null, "attachment": null
        })
    }

    #[test]
    fn a_stored_locator_round_trips_to_the_same_json() {
        let mut v = stored();
        // Alphabetical, like jsonb and a `json!` value without serde_json's `preserve_order`.
        v.sort_all_objects();
        let loc: Locator = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_string(&loc).unwrap(), serde_json::to_string(&v).unwrap());
        assert_eq!(loc.place().citation_label().as_deref(), Some("p.3"));
        // Rows stored before the spreadsheet, slide and attachment fields existed read the same
        // (absent = null).
        let mut old = stored();
        for k in ["sheet", "sheetHidden", "cellRange", "slide", "attachment"] {
            old.as_object_mut().unwrap().remove(k);
        }
        assert_eq!(serde_json::from_value::<Locator>(old).unwrap(), loc);
    }

    #[test]
    fn a_spreadsheet_locator_cites_its_sheet_and_cells() {
        let mut v = stored();
        v["resourceKind"] = json!("spreadsheet");
        v["page"] = json!(null);
        v["sheet"] = json!("Forecast 2027");
        v["cellRange"] = json!("A5:C5");
        v["sectionPath"] = json!(["Forecast 2027"]);
        let loc: Locator = serde_json::from_value(v).unwrap();
        assert_eq!(loc.place().citation_label().as_deref(), Some("'Forecast 2027'!A5:C5"));
        assert_eq!(loc.place().parts(), vec![PlacePart::Cells("'Forecast 2027'!A5:C5".into())]);
        let r = LocatorRef::from_value(&json!({"sheet": "预算", "cellRange": "B2", "lineRange": [4, 4]}));
        assert_eq!(r.place().citation_label().as_deref(), Some("预算!B2"));
        assert_eq!(r.place().parts(), vec![PlacePart::Cells("预算!B2".into()), PlacePart::Line(4)]);
    }

    #[test]
    fn a_callers_partial_locator_is_read_leniently() {
        let r = LocatorRef::from_value(&json!({"sourceId": "s", "page": "x", "lineRange": [4, 6], "extra": 1}));
        assert_eq!(r.source_id.as_deref(), Some("s"));
        assert_eq!(r.page, None);
        assert_eq!(r.place().citation_label().as_deref(), Some("L4–6"));
        assert_eq!(r.place().first_line, Some(4));
    }

    #[test]
    fn kinds_parse_and_print() {
        for k in SourceKind::ALL {
            assert_eq!(k.as_str().parse::<SourceKind>().unwrap(), k);
        }
        assert_eq!(SourceKind::of_extension("JPEG"), Some(SourceKind::Image));
        assert_eq!(SourceKind::of_extension("XLSM"), Some(SourceKind::Spreadsheet));
        assert_eq!(SourceKind::of_extension("tsv"), Some(SourceKind::Csv));
        assert!("exe".parse::<SourceKind>().is_err());
    }
}

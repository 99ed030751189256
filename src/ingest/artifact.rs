//! The canonical parse artifact: extracted text plus the source map
//! (`mnote.resource_source_map.v1`, seed 000 §4.2, SPEC §3a "Locators").
//!
//! Every parse provider produces a [`ParsedArtifact`]; the indexer turns it into evidence
//! rows. Parsing the same bytes twice must give an identical artifact (block ids, locators).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const SOURCE_MAP_SCHEMA: &str = "mnote.resource_source_map.v1";

/// Output of a [`super::ParseProvider`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParsedArtifact {
    /// `sha256:<hex>` of the original bytes.
    pub source_hash: String,
    pub provider: String,
    pub provider_version: String,
    /// The extracted text; every block's `charRange` indexes into it, in Unicode scalar values.
    pub text: String,
    pub source_map: SourceMap,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceMap {
    /// Always [`SOURCE_MAP_SCHEMA`].
    pub schema: String,
    pub provider: String,
    /// Version of the provider (parser + engine) that produced this map.
    pub model_version: String,
    pub source_hash: String,
    /// `markdown|pdf|docx|image|text`
    pub resource_kind: String,
    /// Paged kinds (PDF, image): number of pages. `None` for flowing kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_count: Option<u32>,
    /// Paged kinds: per-page size and blocks (in reading order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pages: Vec<Page>,
    /// Flowing kinds (Markdown, DOCX, text): blocks in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<Block>,
    /// Heading/outline tree, flattened in document order; `path` includes the section itself.
    #[serde(default)]
    pub sections: Vec<Section>,
    /// Deterministic references found while parsing (links, wikilinks, image refs, @mentions).
    #[serde(default)]
    pub references: Vec<Reference>,
    /// The parse stopped at a limit and left the rest of the file out (the source says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncated>,
}

/// What a parse left out at a limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Truncated {
    /// `row_cap`: a spreadsheet's rows beyond the per-file row limit.
    pub reason: TruncatedReason,
    /// The limit that was reached (rows).
    pub limit: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TruncatedReason {
    RowCap,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SourceMapPage")]
pub struct Page {
    /// 1-based.
    pub page: u32,
    /// Page size in the locator unit: PDF points (after rotation), image pixels.
    pub width: f64,
    pub height: f64,
    /// Page rotation in degrees that was applied to the coordinates (PDF `/Rotate`).
    #[serde(default)]
    pub rotation: i32,
    /// True when this page's text came from OCR.
    #[serde(default)]
    pub ocr: bool,
    pub blocks: Vec<Block>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "SourceMapBlockType")]
pub enum BlockType {
    Heading,
    Paragraph,
    ListItem,
    Table,
    TableRow,
    Code,
    Quote,
    OcrLine,
}

pub use crate::evidence::Quality;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SourceMapBlock")]
pub struct Block {
    /// Deterministic from position: `b{n}` (flowing kinds) or `p{page}_b{n}` (paged kinds).
    pub id: String,
    #[serde(rename = "type")]
    pub block_type: BlockType,
    pub text: String,
    /// `[start, end)` into `ParsedArtifact::text`, in Unicode scalar values.
    pub char_range: [u32; 2],
    /// Id of the innermost section containing the block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_id: Option<String>,
    /// Paged kinds: 1-based page and `[x0, y0, x1, y1]` with a top-left origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bbox: Option<[f64; 4]>,
    /// Markdown/text: `[first, last]` 1-based inclusive source lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_range: Option<[u32; 2]>,
    /// DOCX: `w14:paraId` of the first/last paragraph (only Word writes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub para_id_start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub para_id_end: Option<String>,
    /// DOCX: 1-based index of the (first) paragraph among the body's paragraphs. HTML: 1-based
    /// index of the block's element among all elements in document order (XPath `(//*)[n]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paragraph_ordinal: Option<u32>,
    /// Spreadsheets: the sheet's name (CSV: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sheet: Option<String>,
    /// Spreadsheets: the sheet is hidden (its rows are indexed all the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sheet_hidden: Option<bool>,
    /// Spreadsheets and CSV: the cells of the block in A1 notation (`A5:C5`, `C7`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_range: Option<String>,
    /// Slides: the slide, shape and paragraph (or table row) of the block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slide: Option<crate::evidence::slides::SlidePlace>,
    /// E-mail: the attachment the block comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<crate::evidence::attachment::AttachmentPlace>,
    /// [`fingerprint`] of the block text.
    pub text_fingerprint: String,
    pub quality: Quality,
    /// OCR: mean word confidence 0–100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
}

impl Block {
    /// A paragraph of flowing text with no place yet: id, range, section and fingerprint are
    /// the caller's to fill, every locator field `None` (a new locator field is added here).
    pub fn flowing(text: impl Into<String>) -> Block {
        Block {
            id: String::new(),
            block_type: BlockType::Paragraph,
            text: text.into(),
            char_range: [0, 0],
            section_id: None,
            page: None,
            bbox: None,
            line_range: None,
            para_id_start: None,
            para_id_end: None,
            paragraph_ordinal: None,
            sheet: None,
            sheet_hidden: None,
            cell_range: None,
            slide: None,
            attachment: None,
            text_fingerprint: String::new(),
            quality: Quality::Exact,
            confidence: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SourceMapSection")]
pub struct Section {
    /// `sec_{n}`, deterministic from position.
    pub id: String,
    pub title: String,
    /// Titles from the outermost section to this one.
    pub path: Vec<String>,
    /// 1 = top level.
    pub level: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_start: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_end: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_range: Option<[u32; 2]>,
    pub block_ids: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "SourceMapReferenceKind")]
pub enum ReferenceKind {
    /// `[text](target)` to another document or URL.
    Link,
    /// `[[Target]]` / `[[Target|label]]`.
    Wikilink,
    /// `![alt](image.png)` and embedded images.
    Image,
    /// `@Entity` mention.
    Mention,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SourceMapReference")]
pub struct Reference {
    pub kind: ReferenceKind,
    /// The block the reference appears in (every edge must point at a locatable block).
    pub source_block_id: String,
    /// Raw target: link destination, wikilink target, image path, or entity name.
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// The heading stack every provider builds `sections` with: a heading closes the open sections
/// of its level or deeper and opens a child of the one left on top; a block belongs to the
/// innermost open section.
#[derive(Debug, Default)]
pub struct SectionTree {
    pub sections: Vec<Section>,
    /// Indices into `sections`, outermost first: the current heading path.
    open: Vec<usize>,
}

impl SectionTree {
    /// Open a section for a heading (closing deeper or equal ones first, each passed to
    /// `on_close`) and return it so the caller can fill in pages or lines.
    pub fn open(&mut self, title: String, level: u8, mut on_close: impl FnMut(&mut Section)) -> &mut Section {
        self.close(level, &mut on_close);
        let parent = self.open.last().map(|&p| &self.sections[p]);
        let mut path = parent.map(|p| p.path.clone()).unwrap_or_default();
        path.push(title.clone());
        let section = Section {
            id: format!("sec_{}", self.sections.len() + 1),
            title,
            path,
            level,
            parent_id: parent.map(|p| p.id.clone()),
            page_start: None,
            page_end: None,
            line_range: None,
            block_ids: Vec::new(),
        };
        self.sections.push(section);
        self.open.push(self.sections.len() - 1);
        self.sections.last_mut().expect("just pushed")
    }

    /// Close the open sections of `level` or deeper (every one for 0).
    pub fn close(&mut self, level: u8, mut on_close: impl FnMut(&mut Section)) {
        while let Some(&top) = self.open.last() {
            if self.sections[top].level < level {
                break;
            }
            on_close(&mut self.sections[top]);
            self.open.pop();
        }
    }

    /// Record `block_id` in the innermost open section and return that section's id.
    pub fn add_block(&mut self, block_id: &str) -> Option<String> {
        let &s = self.open.last()?;
        self.sections[s].block_ids.push(block_id.to_string());
        Some(self.sections[s].id.clone())
    }

    /// Visit every open section (e.g. to extend page ranges over a whole subtree).
    pub fn for_each_open(&mut self, mut f: impl FnMut(&mut Section)) {
        for &i in &self.open {
            f(&mut self.sections[i]);
        }
    }
}

/// Stable hash of normalised text (NFKC-free: lowercase, whitespace collapsed), 16 hex chars.
/// Used to re-find a DOCX paragraph when paraIds are missing or changed.
pub fn fingerprint(text: &str) -> String {
    let normalised: String = text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    let digest = Sha256::digest(normalised.as_bytes());
    hex::encode(&digest[..8])
}

/// `sha256:<hex>` of bytes.
pub fn source_hash(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Builds `text` and char ranges as blocks are appended (for providers whose extracted text
/// is the concatenation of their blocks, e.g. PDF, DOCX, OCR).
#[derive(Default, Debug)]
pub struct TextBuilder {
    text: String,
    chars: u32,
}

impl TextBuilder {
    /// Append `s` (preceded by a blank line unless it is the first) and return its char range.
    pub fn push_block(&mut self, s: &str) -> [u32; 2] {
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
            self.chars += 2;
        }
        let start = self.chars;
        self.text.push_str(s);
        self.chars += s.chars().count() as u32;
        [start, self.chars]
    }

    pub fn finish(self) -> String {
        self.text
    }
}

/// The slice of `text` covered by a char range (Unicode scalar values).
pub fn char_slice(text: &str, range: [u32; 2]) -> String {
    text.chars().skip(range[0] as usize).take((range[1] - range[0]) as usize).collect()
}

impl ParsedArtifact {
    /// The artifact of a paged kind (PDF, image, MinerU's PDF or image result): blocks on
    /// their pages, in reading order; `page_count` is the number of pages.
    pub fn paged(
        provider: &str,
        version: String,
        source_hash: String,
        kind: &str,
        text: String,
        pages: Vec<Page>,
        sections: Vec<Section>,
    ) -> Self {
        ParsedArtifact {
            source_hash: source_hash.clone(),
            provider: provider.to_string(),
            provider_version: version.clone(),
            text,
            source_map: SourceMap {
                schema: SOURCE_MAP_SCHEMA.to_string(),
                provider: provider.to_string(),
                model_version: version,
                source_hash,
                resource_kind: kind.to_string(),
                page_count: Some(pages.len() as u32),
                pages,
                blocks: Vec::new(),
                sections,
                references: Vec::new(),
                truncated: None,
            },
        }
    }

    /// All blocks in document order (flowing blocks, then pages in order).
    pub fn all_blocks(&self) -> impl Iterator<Item = &Block> {
        self.source_map.blocks.iter().chain(self.source_map.pages.iter().flat_map(|p| p.blocks.iter()))
    }

    /// Check the invariants every provider must keep: unique ids, char ranges that cut out
    /// exactly the block text, references pointing at existing blocks, section block ids that exist.
    pub fn validate(&self) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        // Byte offset of every char boundary, built once: slicing per block stays O(block).
        let offsets: Vec<usize> = self.text.char_indices().map(|(i, _)| i).chain([self.text.len()]).collect();
        for b in self.all_blocks() {
            if !seen.insert(b.id.as_str()) {
                return Err(format!("duplicate block id {}", b.id));
            }
            let [start, end] = b.char_range.map(|c| c as usize);
            let slice = match (offsets.get(start), offsets.get(end)) {
                (Some(&s), Some(&e)) if s <= e => &self.text[s..e],
                _ => return Err(format!("block {}: charRange {:?} is outside the text", b.id, b.char_range)),
            };
            if slice != b.text {
                return Err(format!("block {}: charRange {:?} gives {:?}, text is {:?}", b.id, b.char_range, slice, b.text));
            }
        }
        for r in &self.source_map.references {
            if !seen.contains(r.source_block_id.as_str()) {
                return Err(format!("reference to unknown block {}", r.source_block_id));
            }
        }
        for s in &self.source_map.sections {
            if let Some(id) = s.block_ids.iter().find(|id| !seen.contains(id.as_str())) {
                return Err(format!("section {} lists unknown block {id}", s.id));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_ignores_case_and_spacing() {
        assert_eq!(fingerprint("Hello   World\n"), fingerprint("hello world"));
        assert_ne!(fingerprint("hello world"), fingerprint("hello word"));
        assert_eq!(fingerprint("线程作用域").len(), 16);
    }

    #[test]
    fn text_builder_ranges_are_in_chars() {
        let mut t = TextBuilder::default();
        let a = t.push_block("线程作用域");
        let b = t.push_block("scope");
        let text = t.finish();
        assert_eq!(a, [0, 5]);
        assert_eq!(b, [7, 12]);
        assert_eq!(char_slice(&text, b), "scope");
    }
}

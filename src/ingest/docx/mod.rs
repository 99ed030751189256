//! DOCX provider: `word/document.xml` → one block per body paragraph and per table row, with
//! `w14:paraId`, paragraph ordinal and text fingerprint as locators (SPEC §4, seed 004 §2).
//!
//! Rules a viewer can reproduce:
//! - `paragraphOrdinal` = 1-based position of the block's (first) paragraph among ALL `w:p`
//!   elements of `word/document.xml` in document order, i.e. XPath `(//w:p)[n]`: empty
//!   paragraphs, table-cell paragraphs and paragraphs inside text boxes / `mc:Fallback` are
//!   counted even though the latter two are not extracted.
//! - Whitespace-only paragraphs give no block; paragraph text is trimmed.
//! - A table row (`w:tr` of a top-level table) is one block: cells joined by " | ", a cell's
//!   non-empty paragraphs by "\n"; a nested table is flattened into its cell, one line per row.
//!   Its `paraIdStart/End` are those of the first/last paragraph in the row (nested included).
//! - Text: `w:t`, `w:tab`/`w:ptab` → "\t", `w:br`/`w:cr` → "\n", `w:noBreakHyphen` → "-".
//!   Insertions and field results are kept; deletions (`w:del`, `w:moveFrom`) and field
//!   instructions are dropped. Headers, footers, footnotes, comments, text boxes and equations
//!   (`m:oMath`) are not extracted.
//! - Headings: paragraph `w:outlineLvl`, else the style (`Title` = 1, `Heading N` = N, by id or
//!   name, else the style chain's outline level), else [`heuristic_level`] for report titles in
//!   Normal (or Normal-derived) style; headings only shape `sections`, every block stays `exact`.
//!   Paragraphs with `w:numPr` (numId ≠ 0) that are not headings are `list_item`s.
//! - Parts other than `word/document.xml` (styles, relationships) are optional: if missing or
//!   unreadable they are ignored. Only external `w:hyperlink`s become references.

mod document;
mod headings;
mod styles;
#[cfg(test)]
mod tests;
mod xml;

use std::collections::HashMap;
use std::io::Cursor;

use super::artifact::{
    self, Block, BlockType, ParsedArtifact, Reference, ReferenceKind, SOURCE_MAP_SCHEMA, SectionTree, SourceMap, TextBuilder,
};
use super::{ParseError, ParseInput, ParseProvider};
use document::{RawBlock, parse_document};
use headings::{body_font_size, heading_level};
use styles::{Styles, parse_rels, parse_styles};
use xml::{malformed, read_entry};

const NS_W: &str = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
const NS_W14: &str = "http://schemas.microsoft.com/office/word/2010/wordml";
const NS_R: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";
const NS_MC: &str = "http://schemas.openxmlformats.org/markup-compatibility/2006";
const VERSION: &str = "mnote-docx/1";
const MAX_DOCUMENT_XML: u64 = 64 << 20;
const MAX_PART_XML: u64 = 16 << 20;
/// Password-protected OOXML files are OLE compound files wrapping the encrypted package.
const OLE_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

pub struct DocxProvider;

impl ParseProvider for DocxProvider {
    fn provider_id(&self) -> &'static str {
        "docx"
    }
    fn provider_version(&self) -> String {
        VERSION.to_string()
    }
    fn can_parse(&self, kind: &str) -> bool {
        kind == "docx"
    }
    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
        if let Some(e) = super::slides::legacy::refused(input.file_name) {
            return Err(e);
        }
        let bytes = input.bytes;
        if bytes.starts_with(&OLE_MAGIC) {
            let msg = "OLE compound file: a password-protected DOCX (or a legacy Word 97-2003 file)";
            return Err(ParseError::new("docx_encrypted", msg));
        }
        let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| malformed(format!("not a zip archive: {e}")))?;
        let document = read_entry(&mut zip, "word/document.xml", MAX_DOCUMENT_XML)?
            .ok_or_else(|| malformed("word/document.xml is missing"))?;
        let optional = |zip: &mut zip::ZipArchive<_>, name| read_entry(zip, name, MAX_PART_XML).ok().flatten();
        let styles = optional(&mut zip, "word/styles.xml").and_then(|x| parse_styles(&x).ok()).unwrap_or_default();
        let rels = optional(&mut zip, "word/_rels/document.xml.rels").and_then(|x| parse_rels(&x).ok()).unwrap_or_default();
        let raw = parse_document(&document, &styles)?;
        Ok(assemble(bytes, raw, &styles, &rels))
    }
}

fn assemble(bytes: &[u8], raw: Vec<RawBlock>, styles: &Styles, rels: &HashMap<String, String>) -> ParsedArtifact {
    let body_size = body_font_size(&raw);
    // In a document that is mostly bold, bold says nothing about headings.
    let (bold, total) = raw.iter().flat_map(|b| &b.runs).fold((0, 0), |(b, t), r| (b + if r.0 { r.2 } else { 0 }, t + r.2));
    let bold_is_signal = bold * 2 < total;
    let mut tb = TextBuilder::default();
    let (mut blocks, mut tree, mut references) = (Vec::new(), SectionTree::default(), Vec::new());
    for (i, rb) in raw.into_iter().enumerate() {
        let id = format!("b{}", i + 1);
        let level = heading_level(&rb, styles, body_size, bold_is_signal);
        if let Some(level) = level {
            let title = rb.text.split_whitespace().collect::<Vec<_>>().join(" ");
            tree.open(title, level, |_| {});
        }
        let section_id = tree.add_block(&id);
        for (rid, label) in &rb.links {
            if let Some(url) = rels.get(rid) {
                let label = (!label.is_empty()).then(|| label.clone());
                references.push(Reference { kind: ReferenceKind::Link, source_block_id: id.clone(), target: url.clone(), label });
            }
        }
        let block_type = match (rb.is_row, level, rb.numbered) {
            (true, ..) => BlockType::TableRow,
            (_, Some(_), _) => BlockType::Heading,
            (_, _, true) => BlockType::ListItem,
            _ => BlockType::Paragraph,
        };
        blocks.push(Block {
            id,
            block_type,
            char_range: tb.push_block(&rb.text),
            section_id,
            para_id_start: rb.para_ids.0,
            para_id_end: rb.para_ids.1,
            paragraph_ordinal: (rb.ordinal > 0).then_some(rb.ordinal),
            text_fingerprint: artifact::fingerprint(&rb.text),
            ..Block::flowing(rb.text)
        });
    }
    let source_hash = artifact::source_hash(bytes);
    ParsedArtifact {
        source_hash: source_hash.clone(),
        provider: "docx".into(),
        provider_version: VERSION.into(),
        text: tb.finish(),
        source_map: SourceMap {
            schema: SOURCE_MAP_SCHEMA.into(),
            provider: "docx".into(),
            model_version: VERSION.into(),
            source_hash,
            resource_kind: "docx".into(),
            page_count: None,
            pages: Vec::new(),
            blocks,
            sections: tree.sections,
            references,
            truncated: None,
        },
    }
}

//! HTML provider: saved web pages and wiki exports (`.html`, `.htm`, `.xhtml`) → the page's
//! main content as blocks, each located by its heading path and its element's index.
//!
//! Rules a viewer or client can reproduce:
//! - The encoding: a byte order mark, else the page's own `<meta charset>` / `http-equiv`
//!   declaration or XML declaration, else UTF-8 when the bytes are valid UTF-8, else a guess
//!   from the bytes ([`charset`]).
//! - The page is parsed as a browser parses it (html5ever); XHTML is read as HTML. Nothing
//!   is fetched or run: the text comes from the markup alone.
//! - Which elements are content and which make blocks: [`content`]'s rules.
//! - `paragraphOrdinal` of a block is the 1-based index of its element among ALL elements of
//!   the document in document order (XPath `(//*)[n]`); `sectionPath` is the path of the
//!   headings (`h1`–`h6`) it sits under. When the content has no `<h1>`, the page's `<title>`
//!   is its first heading block (located at the `<title>` element).
//! - Only absolute `http(s)` links become references.

mod charset;
mod content;
#[cfg(test)]
mod tests;

use super::artifact::{
    self, Block, BlockType, ParsedArtifact, Reference, ReferenceKind, SOURCE_MAP_SCHEMA, SectionTree, SourceMap, TextBuilder,
};
use super::{ParseError, ParseInput, ParseProvider};
pub use content::{RawBlock, RawKind};

const VERSION: &str = "mnote-html/1";
/// Blocks one page may give; past it the page is refused (a generated page, not a document).
const MAX_BLOCKS: usize = 500_000;

pub struct HtmlProvider;

impl ParseProvider for HtmlProvider {
    fn provider_id(&self) -> &'static str {
        "html"
    }
    fn provider_version(&self) -> String {
        VERSION.to_string()
    }
    fn can_parse(&self, kind: &str) -> bool {
        kind == "html"
    }
    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
        Ok(assemble(input.bytes, parse_blocks(input.bytes)?))
    }
}

/// The page's blocks in document order (the title first when it stands in for an `<h1>`).
pub fn parse_blocks(bytes: &[u8]) -> Result<Vec<RawBlock>, ParseError> {
    let (text, _) = charset::decode(bytes);
    if text.contains('\0') {
        return Err(ParseError::new("html_malformed", "the file holds NUL characters: not an HTML page"));
    }
    let blocks = parse_str_blocks(&text);
    if blocks.len() > MAX_BLOCKS {
        return Err(ParseError::new("html_too_large", format!("the page gives more than {MAX_BLOCKS} blocks")));
    }
    Ok(blocks)
}

/// The blocks of a page already decoded (an HTML mail body: the mail's charset decided).
pub fn parse_str_blocks(text: &str) -> Vec<RawBlock> {
    let doc = scraper::Html::parse_document(text);
    let walk = content::walk(&doc);
    let mut blocks = Vec::with_capacity(walk.blocks.len() + 1);
    if let Some((title, element)) = walk.title.filter(|(t, _)| !t.is_empty() && !walk.has_h1) {
        blocks.push(RawBlock { kind: RawKind::Heading(1), text: title, element, links: Vec::new() });
    }
    blocks.extend(walk.blocks);
    blocks
}

/// The source-map type of a raw block, and its heading level when it is one.
pub fn block_type(kind: RawKind) -> (BlockType, Option<u8>) {
    match kind {
        RawKind::Heading(l) => (BlockType::Heading, Some(l)),
        RawKind::Paragraph => (BlockType::Paragraph, None),
        RawKind::ListItem => (BlockType::ListItem, None),
        RawKind::Quote => (BlockType::Quote, None),
        RawKind::Code => (BlockType::Code, None),
        RawKind::Row => (BlockType::TableRow, None),
    }
}

fn assemble(bytes: &[u8], raw: Vec<RawBlock>) -> ParsedArtifact {
    let mut tb = TextBuilder::default();
    let (mut blocks, mut tree, mut references) = (Vec::new(), SectionTree::default(), Vec::new());
    for (i, rb) in raw.into_iter().enumerate() {
        let id = format!("b{}", i + 1);
        if let RawKind::Heading(level) = rb.kind {
            tree.open(rb.text.split_whitespace().collect::<Vec<_>>().join(" "), level, |_| {});
        }
        let section_id = tree.add_block(&id);
        for (href, label) in rb.links {
            let label = (!label.is_empty()).then_some(label);
            references.push(Reference { kind: ReferenceKind::Link, source_block_id: id.clone(), target: href, label });
        }
        let (block_type, _) = block_type(rb.kind);
        blocks.push(Block {
            id,
            block_type,
            char_range: tb.push_block(&rb.text),
            section_id,
            paragraph_ordinal: (rb.element > 0).then_some(rb.element),
            text_fingerprint: artifact::fingerprint(&rb.text),
            ..Block::flowing(rb.text)
        });
    }
    let source_hash = artifact::source_hash(bytes);
    ParsedArtifact {
        source_hash: source_hash.clone(),
        provider: "html".into(),
        provider_version: VERSION.into(),
        text: tb.finish(),
        source_map: SourceMap {
            schema: SOURCE_MAP_SCHEMA.into(),
            provider: "html".into(),
            model_version: VERSION.into(),
            source_hash,
            resource_kind: "html".into(),
            page_count: None,
            pages: Vec::new(),
            blocks,
            sections: tree.sections,
            references,
            truncated: None,
        },
    }
}

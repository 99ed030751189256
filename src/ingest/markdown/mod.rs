//! Markdown (and plain text) parse provider.
//!
//! The artifact text is the file exactly as stored (UTF-8 BOM removed, CRLF kept, U+0000
//! replaced by U+FFFD), so every
//! block is a verbatim slice of the source and `charRange`/`lineRange` point into the file itself.
//!
//! Block rules (one block per):
//! - **Heading / paragraph / list item**: the span of the inline content, so `# ` markers,
//!   heading attributes and list bullets are outside the block (a task box `[ ]` stays in).
//! - **List item**: covers the item's own content up to its first nested list; the nested items
//!   are blocks of their own. Content of the item *after* a nested list becomes ordinary blocks.
//! - **Table** (whole table) and **code block** (with its fences): the whole construct.
//! - **Block quote**: each paragraph inside is a `Quote` block (lists/code/tables keep their type).
//! - **HTML block**: a `Paragraph` with the raw markup (its text is evidence), except a block
//!   that is just an HTML comment, which is skipped.
//! - YAML front matter (`---` … `---`/`...` on the first line only) and thematic breaks are skipped.
//! - Headings inside containers (quotes, items, footnotes) are ordinary content, not sections.
//!
//! `kind == "text"` skips Markdown entirely: each run of non-blank lines is a `Paragraph` block
//! and only `@mentions` are extracted, so a `.txt` file never loses `<…>` lines or `*` characters.

use std::collections::HashSet;
use std::ops::Range;

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};

use super::artifact::{self, Block, BlockType, ParsedArtifact, Reference, ReferenceKind, Section, SectionTree, SourceMap};
use super::{ParseError, ParseInput, ParseProvider};

const PROVIDER_ID: &str = "markdown";
const PROVIDER_VERSION: &str = "mnote-markdown/1 pulldown-cmark/0.13";
const BOM: &[u8] = b"\xEF\xBB\xBF";

pub struct MarkdownProvider;

impl ParseProvider for MarkdownProvider {
    fn provider_id(&self) -> &'static str {
        PROVIDER_ID
    }

    fn provider_version(&self) -> String {
        PROVIDER_VERSION.to_string()
    }

    fn can_parse(&self, kind: &str) -> bool {
        matches!(kind, "markdown" | "text")
    }

    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
        let body = input.bytes.strip_prefix(BOM).unwrap_or(input.bytes);
        let text = std::str::from_utf8(body).map_err(|e| {
            let at = e.valid_up_to() + (input.bytes.len() - body.len());
            ParseError::new(
                "text_encoding_invalid",
                format!("{} is not valid UTF-8 (invalid byte sequence at byte {at})", input.file_name),
            )
        })?;
        // U+0000 becomes U+FFFD, as CommonMark requires (and Postgres text cannot hold it):
        // one char for one, so char ranges and lines still point into the file.
        let replaced;
        let text = if text.contains('\0') {
            replaced = text.replace('\0', "\u{FFFD}");
            replaced.as_str()
        } else {
            text
        };
        let mut out = Output::new(text);
        if input.kind == "text" {
            parse_plain_text(&mut out);
        } else {
            MarkdownWalker::new(&mut out).run();
        }
        out.close_sections_until(0, out.lines.last_line());
        let source_hash = artifact::source_hash(input.bytes);
        Ok(ParsedArtifact {
            source_hash: source_hash.clone(),
            provider: PROVIDER_ID.to_string(),
            provider_version: PROVIDER_VERSION.to_string(),
            text: text.to_string(),
            source_map: SourceMap {
                schema: artifact::SOURCE_MAP_SCHEMA.to_string(),
                provider: PROVIDER_ID.to_string(),
                model_version: PROVIDER_VERSION.to_string(),
                source_hash,
                resource_kind: input.kind.to_string(),
                page_count: None,
                pages: Vec::new(),
                blocks: out.blocks,
                sections: out.sections.sections,
                references: out.references,
                truncated: None,
            },
        })
    }
}

/// Byte offset → 1-based line and char offset. Line breaks are `\n`, `\r\n` and a lone `\r`,
/// as in CommonMark, so line numbers agree with how the parser split the lines.
struct LineIndex<'t> {
    text: &'t str,
    starts: Vec<usize>,
    char_starts: Vec<u32>,
}

impl<'t> LineIndex<'t> {
    fn new(text: &'t str) -> Self {
        let (mut starts, mut char_starts) = (vec![0], vec![0]);
        for (n, (i, c)) in text.char_indices().enumerate() {
            if c == '\n' || (c == '\r' && text.as_bytes().get(i + 1) != Some(&b'\n')) {
                starts.push(i + 1);
                char_starts.push(n as u32 + 1);
            }
        }
        LineIndex { text, starts, char_starts }
    }

    fn line_of(&self, byte: usize) -> u32 {
        self.starts.partition_point(|&s| s <= byte) as u32
    }

    /// `byte` must be a char boundary (callers check with `str::get`).
    fn char_of(&self, byte: usize) -> u32 {
        let line = self.line_of(byte) as usize - 1;
        let start = self.starts[line];
        self.char_starts[line] + self.text[start..byte].chars().count() as u32
    }

    /// Last line holding any text (a final line break does not start a new line).
    fn last_line(&self) -> u32 {
        self.line_of(self.text.len().saturating_sub(1))
    }
}

struct PendingRef {
    kind: ReferenceKind,
    target: String,
    label: Option<String>,
}

/// Collects blocks, sections and references in document order.
struct Output<'t> {
    text: &'t str,
    lines: LineIndex<'t>,
    blocks: Vec<Block>,
    sections: SectionTree,
    references: Vec<Reference>,
    seen_refs: HashSet<(u8, String, String)>,
}

impl<'t> Output<'t> {
    fn new(text: &'t str) -> Self {
        Output {
            text,
            lines: LineIndex::new(text),
            blocks: Vec::new(),
            sections: SectionTree::default(),
            references: Vec::new(),
            seen_refs: HashSet::new(),
        }
    }

    /// Append a block over `span` (trimmed; code keeps its leading indentation). Empty spans
    /// and spans off char boundaries (never produced by the parser) are dropped, not panicked on.
    fn emit(&mut self, block_type: BlockType, span: Range<usize>, refs: Vec<PendingRef>) {
        let Some(raw) = self.text.get(span.clone()) else { return };
        let trimmed_end = raw.trim_end();
        let trimmed = if block_type == BlockType::Code { trimmed_end } else { trimmed_end.trim_start() };
        if trimmed.is_empty() {
            return;
        }
        let start = span.start + (trimmed_end.len() - trimmed.len());
        let end = start + trimmed.len();
        let id = format!("b{}", self.blocks.len() + 1);
        let section_id = self.sections.add_block(&id);
        for r in refs {
            if self.seen_refs.insert((r.kind as u8, id.clone(), r.target.clone())) {
                self.references.push(Reference { kind: r.kind, source_block_id: id.clone(), target: r.target, label: r.label });
            }
        }
        self.blocks.push(Block {
            id,
            block_type,
            char_range: [self.lines.char_of(start), self.lines.char_of(end)],
            section_id,
            line_range: Some([self.lines.line_of(start), self.lines.line_of(end - 1)]),
            text_fingerprint: artifact::fingerprint(trimmed),
            ..Block::flowing(trimmed)
        });
    }

    /// Open the section of a top-level heading starting at byte `start`, closing the open
    /// sections of the same or a deeper level on the line before it.
    fn open_section(&mut self, level: u8, title: String, start: usize) {
        let line = self.lines.line_of(start);
        let section = self.sections.open(title, level, |s| end_lines(s, line.saturating_sub(1)));
        section.line_range = Some([line, line]);
    }

    /// Close open sections whose level is >= `level` (all of them for 0), ending at `last_line`.
    fn close_sections_until(&mut self, level: u8, last_line: u32) {
        self.sections.close(level, |s| end_lines(s, last_line));
    }
}

/// A closing section's line range ends at `last_line` (never before its heading line).
fn end_lines(section: &mut Section, last_line: u32) {
    if let Some(range) = section.line_range.as_mut() {
        range[1] = last_line.max(range[0]);
    }
}

/// Plain text: every run of non-blank lines is a paragraph; only mentions are references.
fn parse_plain_text(out: &mut Output<'_>) {
    let text = out.text;
    let mut para: Option<Range<usize>> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n').chain(std::iter::once("")) {
        if line.trim().is_empty() {
            if let Some(span) = para.take() {
                out.emit(BlockType::Paragraph, span.clone(), mentions(&text[span]));
            }
        } else {
            para.get_or_insert(offset..offset).end = offset + line.len();
        }
        offset += line.len();
    }
}

/// Byte length of YAML front matter at the very start (`---` line, at least one non-blank
/// line, closing `---` or `...`). Done by hand because pulldown-cmark's metadata option also
/// accepts such blocks mid-document, which would swallow `---` / text / `---` prose.
fn front_matter_len(text: &str) -> usize {
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {
            let mut len = first.len();
            for (i, line) in lines.enumerate() {
                let t = line.trim_end();
                if i == 0 && (t.is_empty() || t == "---") {
                    return 0; // a thematic break, not front matter
                }
                len += line.len();
                if t == "---" || t == "..." {
                    return len;
                }
            }
            0
        }
        _ => 0,
    }
}

#[derive(Clone, Copy, PartialEq, Default)]
enum LeafKind {
    #[default]
    Paragraph,
    Heading(u8),
    Code,
    Table,
    Html,
}

/// A leaf block being read: its events are inline content until its end tag.
#[derive(Default)]
struct Leaf {
    kind: LeafKind,
    /// False for inline content without a paragraph tag (tight list items).
    explicit: bool,
    tag_range: Range<usize>,
    /// Union of the inline events' ranges.
    content: Option<Range<usize>>,
    /// Rendered text scanned for mentions. Code spans and inline HTML become U+FFFC, neither a
    /// name character nor a word boundary, so nothing in or right after code is a mention.
    plain: String,
    /// Headings: the rendered title (code spans included).
    title: String,
    refs: Vec<PendingRef>,
    /// Open links/images, collecting their label text.
    captures: Vec<PendingRef>,
}

impl Leaf {
    fn new(kind: LeafKind, explicit: bool, tag_range: Range<usize>) -> Self {
        Leaf { kind, explicit, tag_range, ..Default::default() }
    }

    fn is_prose(&self) -> bool {
        matches!(self.kind, LeafKind::Paragraph | LeafKind::Heading(_) | LeafKind::Table)
    }

    fn push_text(&mut self, s: &str, masked: bool) {
        if self.is_prose() {
            self.plain.push_str(if masked { "\u{FFFC}" } else { s });
        }
        if matches!(self.kind, LeafKind::Heading(_)) {
            self.title.push_str(s);
        }
        for label in self.captures.iter_mut().filter_map(|c| c.label.as_mut()) {
            label.push_str(s);
        }
    }

    fn inline(&mut self, event: Event<'_>, range: Range<usize>) {
        let content = self.content.get_or_insert(range.clone());
        *content = content.start.min(range.start)..content.end.max(range.end);
        match event {
            Event::Text(t) => self.push_text(&t, false),
            Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => self.push_text(&t, true),
            Event::InlineHtml(_) => self.push_text("", true),
            Event::SoftBreak | Event::HardBreak | Event::Start(Tag::TableCell) => self.push_text(" ", false),
            Event::Start(Tag::Link { link_type, dest_url, .. }) => {
                // `[[Target]]` has no label of its own; its text is the target.
                let (kind, label) = match link_type {
                    LinkType::WikiLink { has_pothole: false } => (ReferenceKind::Wikilink, None),
                    LinkType::WikiLink { .. } => (ReferenceKind::Wikilink, Some(String::new())),
                    _ => (ReferenceKind::Link, Some(String::new())),
                };
                self.captures.push(PendingRef { kind, target: dest_url.to_string(), label });
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                let label = Some(String::new());
                self.captures.push(PendingRef { kind: ReferenceKind::Image, target: dest_url.to_string(), label });
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if let Some(mut r) = self.captures.pop() {
                    r.label = r.label.map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).filter(|l| !l.is_empty());
                    if !r.target.is_empty() {
                        self.refs.push(r);
                    }
                }
            }
            _ => {}
        }
    }
}

enum Container {
    Item(Item),
    Quote,
    Other,
}

/// A list item's own content: everything before its first nested list (`closed` after that).
#[derive(Default)]
struct Item {
    own: Option<Range<usize>>,
    refs: Vec<PendingRef>,
    closed: bool,
}

struct MarkdownWalker<'o, 't> {
    out: &'o mut Output<'t>,
    containers: Vec<Container>,
    leaf: Option<Leaf>,
}

impl<'o, 't> MarkdownWalker<'o, 't> {
    fn new(out: &'o mut Output<'t>) -> Self {
        MarkdownWalker { out, containers: Vec::new(), leaf: None }
    }

    fn run(mut self) {
        let text = self.out.text;
        let base = front_matter_len(text);
        let options = Options::ENABLE_TABLES
            | Options::ENABLE_STRIKETHROUGH
            | Options::ENABLE_TASKLISTS
            | Options::ENABLE_FOOTNOTES
            | Options::ENABLE_HEADING_ATTRIBUTES
            | Options::ENABLE_WIKILINKS;
        for (event, range) in Parser::new_ext(&text[base..], options).into_offset_iter() {
            self.event(event, range.start + base..range.end + base);
        }
        self.finish_leaf();
        while !self.containers.is_empty() {
            self.pop_container();
        }
    }

    fn event(&mut self, event: Event<'_>, range: Range<usize>) {
        if let Some(leaf) = self.leaf.as_mut().filter(|l| l.explicit) {
            let ends_leaf = matches!(
                event,
                Event::End(TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::CodeBlock | TagEnd::HtmlBlock | TagEnd::Table)
            );
            if ends_leaf {
                self.finish_leaf();
            } else {
                leaf.inline(event, range);
            }
            return;
        }
        let leaf_kind = match &event {
            Event::Start(Tag::Paragraph) => Some(LeafKind::Paragraph),
            Event::Start(Tag::Heading { level, .. }) => Some(LeafKind::Heading(*level as u8)),
            Event::Start(Tag::CodeBlock(_)) => Some(LeafKind::Code),
            Event::Start(Tag::Table(_)) => Some(LeafKind::Table),
            Event::Start(Tag::HtmlBlock) => Some(LeafKind::Html),
            _ => None,
        };
        if let Some(kind) = leaf_kind {
            self.finish_leaf();
            self.leaf = Some(Leaf::new(kind, true, range));
            return;
        }
        match event {
            Event::Start(Tag::Item) => {
                self.finish_leaf();
                self.containers.push(Container::Item(Item::default()));
            }
            Event::Start(Tag::List(_)) => {
                self.finish_leaf();
                self.close_item_content();
                self.containers.push(Container::Other);
            }
            Event::Start(Tag::BlockQuote(_)) => {
                self.finish_leaf();
                self.containers.push(Container::Quote);
            }
            Event::Start(tag) if !is_inline_tag(&tag) => {
                self.finish_leaf();
                self.containers.push(Container::Other);
            }
            Event::End(end) if !is_inline_end(end) => {
                self.finish_leaf();
                self.pop_container();
            }
            Event::Rule => self.finish_leaf(),
            // Inline content outside a leaf tag (tight list items): an implicit paragraph.
            inline => self.leaf.get_or_insert_with(|| Leaf::new(LeafKind::Paragraph, false, range.clone())).inline(inline, range),
        }
    }

    /// The innermost list item, if its own content is still being read.
    fn open_item(&mut self) -> Option<&mut Item> {
        let innermost = self.containers.iter_mut().rev().find_map(|c| match c {
            Container::Item(item) => Some(item),
            _ => None,
        });
        innermost.filter(|item| !item.closed)
    }

    /// A nested list starts: the enclosing item's own block is complete; emit it now so block
    /// ids stay in document order (outer item before its nested items).
    fn close_item_content(&mut self) {
        if let Some(item) = self.open_item() {
            item.closed = true;
            let (own, refs) = (item.own.take(), std::mem::take(&mut item.refs));
            if let Some(span) = own {
                self.out.emit(BlockType::ListItem, span, refs);
            }
        }
    }

    fn pop_container(&mut self) {
        if let Some(Container::Item(Item { own: Some(span), refs, closed: false })) = self.containers.pop() {
            self.out.emit(BlockType::ListItem, span, refs);
        }
    }

    fn finish_leaf(&mut self) {
        let Some(mut leaf) = self.leaf.take() else { return };
        let span = match leaf.kind {
            LeafKind::Paragraph | LeafKind::Heading(_) => leaf.content.clone(),
            _ => Some(leaf.tag_range.clone()),
        };
        if leaf.is_prose() {
            leaf.refs.extend(mentions(&leaf.plain));
        }
        let top_level = self.containers.is_empty();
        if let LeafKind::Heading(level) = leaf.kind
            && top_level
        {
            let title = leaf.title.split_whitespace().collect::<Vec<_>>().join(" ");
            self.out.open_section(level, title, leaf.tag_range.start);
        }
        let Some(span) = span else { return };
        if leaf.kind == LeafKind::Html && self.out.text.get(span.clone()).is_some_and(is_html_comment) {
            return;
        }
        if let Some(item) = self.open_item() {
            let own = item.own.get_or_insert(span.clone());
            *own = own.start.min(span.start)..own.end.max(span.end);
            item.refs.append(&mut leaf.refs);
            return;
        }
        let in_quote = self.containers.iter().any(|c| matches!(c, Container::Quote));
        let block_type = match leaf.kind {
            LeafKind::Heading(_) if top_level => BlockType::Heading,
            LeafKind::Code => BlockType::Code,
            LeafKind::Table => BlockType::Table,
            _ if in_quote => BlockType::Quote,
            _ => BlockType::Paragraph,
        };
        self.out.emit(block_type, span, leaf.refs);
    }
}

fn is_inline_tag(tag: &Tag<'_>) -> bool {
    matches!(
        tag,
        Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough
            | Tag::Superscript
            | Tag::Subscript
            | Tag::Link { .. }
            | Tag::Image { .. }
    )
}

fn is_inline_end(end: TagEnd) -> bool {
    matches!(
        end,
        TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Link
            | TagEnd::Image
    )
}

fn is_html_comment(s: &str) -> bool {
    let s = s.trim();
    s.starts_with("<!--") && s.ends_with("-->")
}

/// `@Name` mentions in rendered text. The `@` must open a word (start, whitespace, CJK text
/// or punctuation, an opening bracket/quote), so `a@b.com` and `site.com/@user` don't match;
/// `@host.com` and `@scope/pkg` (followed by `.`/`/` and more name) are not mentions either.
fn mentions(text: &str) -> Vec<PendingRef> {
    let chars: Vec<char> = text.chars().collect();
    let is_name = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '@' || (i > 0 && !opens_mention(chars[i - 1])) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < chars.len() && is_name(chars[j]) {
            j += 1;
        }
        let mut end = j;
        while end > i + 1 && chars[end - 1] == '-' {
            end -= 1;
        }
        let continues = matches!(chars.get(j), Some('.' | '/' | '@')) && chars.get(j + 1).is_some_and(|c| c.is_alphanumeric());
        if end > i + 1 && chars[i + 1] != '-' && !continues {
            let target: String = chars[i + 1..end].iter().collect();
            found.push(PendingRef { kind: ReferenceKind::Mention, target, label: None });
        }
        i = j;
    }
    found
}

fn opens_mention(c: char) -> bool {
    c.is_whitespace()
        || matches!(c, '(' | '[' | '{' | '"' | '\'' | '\u{2018}' | '\u{201C}')
        || matches!(c, '\u{3000}'..='\u{303F}' | '\u{FF01}'..='\u{FF0F}' | '\u{FF1A}'..='\u{FF20}' | '\u{FF3B}'..='\u{FF40}' | '\u{FF5B}'..='\u{FF65}')
        || matches!(c, '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{3040}'..='\u{30FF}' | '\u{AC00}'..='\u{D7AF}')
}

#[cfg(test)]
mod tests;

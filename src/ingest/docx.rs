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

use std::collections::{BTreeMap, HashMap};
use std::io::{Cursor, Read};

use quick_xml::XmlVersion;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;
use zip::result::ZipError;

use super::artifact::{
    self, Block, BlockType, ParsedArtifact, Quality, Reference, ReferenceKind, SOURCE_MAP_SCHEMA, SectionTree, SourceMap,
    TextBuilder,
};
use super::{ParseError, ParseInput, ParseProvider};

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
        let bytes = input.bytes;
        if bytes.starts_with(&OLE_MAGIC) {
            let msg = "OLE compound file: a password-protected DOCX (or a legacy Word 97-2003 file)";
            return Err(ParseError::new("docx_encrypted", msg));
        }
        let mut zip =
            zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| malformed(format!("not a zip archive: {e}")))?;
        let document = read_entry(&mut zip, "word/document.xml", MAX_DOCUMENT_XML)?
            .ok_or_else(|| malformed("word/document.xml is missing"))?;
        let optional = |zip: &mut zip::ZipArchive<_>, name| read_entry(zip, name, MAX_PART_XML).ok().flatten();
        let styles = optional(&mut zip, "word/styles.xml").and_then(|x| parse_styles(&x).ok()).unwrap_or_default();
        let rels =
            optional(&mut zip, "word/_rels/document.xml.rels").and_then(|x| parse_rels(&x).ok()).unwrap_or_default();
        let raw = parse_document(&document, &styles)?;
        Ok(assemble(bytes, raw, &styles, &rels))
    }
}

fn malformed(msg: impl Into<String>) -> ParseError {
    ParseError::new("docx_malformed", msg)
}

/// Reads a zip entry as UTF-8, refusing entries over `cap` both by declared size and by
/// actual decompressed size (the declared size of a zip bomb may lie).
fn read_entry<R: Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    name: &str,
    cap: u64,
) -> Result<Option<String>, ParseError> {
    let file = match zip.by_name(name) {
        Ok(f) => f,
        Err(ZipError::FileNotFound) => return Ok(None),
        Err(ZipError::InvalidPassword) => {
            return Err(ParseError::new("docx_encrypted", format!("{name} is encrypted")));
        }
        Err(ZipError::UnsupportedArchive(m)) if m == ZipError::PASSWORD_REQUIRED => {
            return Err(ParseError::new("docx_encrypted", format!("{name} is encrypted")));
        }
        Err(e) => return Err(malformed(format!("{name}: {e}"))),
    };
    if file.size() > cap {
        return Err(malformed(format!("{name} declares {} bytes uncompressed (limit {cap})", file.size())));
    }
    let mut buf = Vec::new();
    file.take(cap + 1).read_to_end(&mut buf).map_err(|e| malformed(format!("{name}: {e}")))?;
    if buf.len() as u64 > cap {
        return Err(malformed(format!("{name} is larger than {cap} bytes uncompressed")));
    }
    let text = String::from_utf8(buf).map_err(|_| malformed(format!("{name} is not UTF-8")))?;
    Ok(Some(text.strip_prefix('\u{feff}').map(str::to_owned).unwrap_or(text)))
}

fn is_ns(res: &ResolveResult<'_>, uri: &str) -> bool {
    matches!(res, ResolveResult::Bound(ns) if ns.0 == uri)
}

/// Value of the attribute `local` in namespace `ns` (`None` = unprefixed).
fn attr(r: &NsReader<&[u8]>, e: &BytesStart<'_>, ns: Option<&str>, local: &str) -> Option<String> {
    e.attributes().filter_map(Result::ok).find_map(|a| {
        let (res, name) = r.resolver().resolve_attribute(a.key);
        let ns_ok = match ns {
            Some(uri) => is_ns(&res, uri),
            None => matches!(res, ResolveResult::Unbound),
        };
        if !ns_ok || name.as_ref() != local {
            return None;
        }
        a.normalized_value(XmlVersion::Implicit1_0).ok().map(|v| v.into_owned())
    })
}

/// OOXML on/off values: a bare `<w:b/>` is on.
fn on_off(val: Option<String>) -> bool {
    !matches!(val.as_deref(), Some("0" | "false" | "off" | "none"))
}

// ---------------------------------------------------------------------------------------------
// styles.xml and relationships

#[derive(Default, Debug)]
struct Style {
    name: String,
    based_on: Option<String>,
    outline: Option<u8>,
    bold: Option<bool>,
    size: Option<u32>,
}

#[derive(Default, Debug)]
struct Styles {
    by_id: HashMap<String, Style>,
    default_para: Option<String>,
    /// `w:docDefaults` run size in half-points.
    default_size: Option<u32>,
}

impl Styles {
    /// First value found along the `basedOn` chain (bounded: hostile files may contain cycles).
    fn inherit<T>(&self, id: Option<&str>, f: impl Fn(&Style) -> Option<T>) -> Option<T> {
        let mut id = id.or(self.default_para.as_deref());
        for _ in 0..16 {
            let style = self.by_id.get(id?)?;
            if let Some(v) = f(style) {
                return Some(v);
            }
            id = style.based_on.as_deref();
        }
        None
    }

    fn heading_level(&self, id: &str) -> Option<u8> {
        let name = self.by_id.get(id).map(|s| s.name.as_str());
        [Some(id), name].into_iter().flatten().find_map(level_from_style_name).or_else(|| {
            // Outline level 9 means "body text" and stops the chain like any other value.
            self.inherit(Some(id), |s| s.outline).filter(|&v| v <= 8).map(|v| v + 1)
        })
    }

    /// The heuristic only applies to body text: Normal, or a custom style derived from it
    /// (Chinese templates often use one, e.g. "正文段"), but never TOC entries, captions etc.
    fn is_body_style(&self, id: Option<&str>) -> bool {
        let Some(mut id) = id else { return true };
        let name = |id: &str| self.by_id.get(id).map_or(String::new(), |s| s.name.to_lowercase());
        if ["toc", "caption", "header", "footer", "index", "table of"].iter().any(|p| name(id).starts_with(p)) {
            return false;
        }
        for _ in 0..16 {
            if self.default_para.as_deref() == Some(id) || id.eq_ignore_ascii_case("normal") || name(id) == "normal" {
                return true;
            }
            match self.by_id.get(id).and_then(|s| s.based_on.as_deref()) {
                Some(parent) => id = parent,
                None => return false,
            }
        }
        false
    }
}

/// `Title` → 1, `Heading N` / `heading N` / `HeadingN` / `标题 N` → N.
fn level_from_style_name(name: &str) -> Option<u8> {
    let key: String = name.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_lowercase();
    if key == "title" {
        return Some(1);
    }
    let n = key.strip_prefix("heading").or_else(|| key.strip_prefix("标题"))?;
    n.parse::<u8>().ok().filter(|n| (1..=9).contains(n))
}

fn parse_styles(xml: &str) -> Result<Styles, quick_xml::Error> {
    let mut r = NsReader::from_str(xml);
    let mut out = Styles::default();
    let mut stack: Vec<String> = Vec::new();
    // Id and fields of the paragraph style being read (`None` inside other style types).
    let (mut cur, mut style): (Option<String>, Style) = (None, Style::default());
    let under = |stack: &[String], a: &str, b: &str| {
        stack.len() >= 2 && stack[stack.len() - 2] == a && stack[stack.len() - 1] == b
    };
    loop {
        let (res, ev) = r.read_resolved_event()?;
        let w = is_ns(&res, NS_W);
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let name = if w { e.local_name().as_ref().to_owned() } else { String::new() };
                let val = || attr(&r, e, Some(NS_W), "val");
                match name.as_str() {
                    "style" if attr(&r, e, Some(NS_W), "type").as_deref() == Some("paragraph") => {
                        let id = attr(&r, e, Some(NS_W), "styleId").unwrap_or_default();
                        if attr(&r, e, Some(NS_W), "default").is_some_and(|v| on_off(Some(v))) {
                            out.default_para = Some(id.clone());
                        }
                        (cur, style) = (Some(id), Style::default());
                    }
                    "name" if stack.last().is_some_and(|s| s == "style") => style.name = val().unwrap_or_default(),
                    "basedOn" if stack.last().is_some_and(|s| s == "style") => style.based_on = val(),
                    "outlineLvl" if under(&stack, "style", "pPr") => style.outline = val().and_then(|v| v.parse().ok()),
                    "b" if under(&stack, "style", "rPr") => style.bold = Some(on_off(val())),
                    "sz" if under(&stack, "style", "rPr") => style.size = val().and_then(|v| v.parse().ok()),
                    "sz" if under(&stack, "rPrDefault", "rPr") => out.default_size = val().and_then(|v| v.parse().ok()),
                    _ => {}
                }
                let ends_style = match ev {
                    Event::Start(_) => {
                        stack.push(name);
                        false
                    }
                    _ => name == "style",
                };
                if ends_style && let Some(id) = cur.take() {
                    out.by_id.insert(id, std::mem::take(&mut style));
                }
            }
            Event::End(_) => {
                if stack.pop().as_deref() == Some("style")
                    && let Some(id) = cur.take()
                {
                    out.by_id.insert(id, std::mem::take(&mut style));
                }
            }
            Event::Eof => return Ok(out),
            _ => {}
        }
    }
}

/// External hyperlink targets by relationship id.
fn parse_rels(xml: &str) -> Result<HashMap<String, String>, quick_xml::Error> {
    let mut r = NsReader::from_str(xml);
    let mut out = HashMap::new();
    loop {
        match r.read_event()? {
            Event::Start(e) | Event::Empty(e) if e.local_name().as_ref() == "Relationship" => {
                let get = |k| attr(&r, &e, None, k);
                let is_link = get("Type").is_some_and(|t| t.ends_with("/hyperlink"))
                    && get("TargetMode").as_deref() == Some("External");
                if let (true, Some(id), Some(target)) = (is_link, get("Id"), get("Target")) {
                    out.insert(id, target);
                }
            }
            Event::Eof => return Ok(out),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// document.xml

/// A body paragraph or top-level table row, before heading classification.
#[derive(Default, Debug)]
struct RawBlock {
    is_row: bool,
    text: String,
    para_ids: (Option<String>, Option<String>),
    /// 0 = not yet known (a row before its first paragraph).
    ordinal: u32,
    style: Option<String>,
    outline: Option<u8>,
    numbered: bool,
    /// (bold, size in half-points, visible chars) per run with visible text, styles resolved.
    runs: Vec<(bool, u32, usize)>,
    /// (relationship id, label) of hyperlinks.
    links: Vec<(String, String)>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Tag {
    P,
    PPr,
    NumPr,
    R,
    RPr,
    T,
    Hyperlink,
    Tbl,
    Tr,
    Tc,
    /// Root of a subtree whose text is not extracted (deletions, text boxes, mc:Fallback).
    Skip,
    Other,
}

#[derive(Default)]
struct Table {
    /// Finished cells of the current row.
    cells: Vec<String>,
    /// Non-empty paragraphs of the current cell.
    cell: Vec<String>,
}

#[derive(Default)]
struct DocParser {
    out: Vec<RawBlock>,
    stack: Vec<Tag>,
    skipping: usize,
    ordinal: u32,
    seen_body: bool,
    para: Option<RawBlock>,
    /// Explicit bold, explicit size and start (byte offset in the paragraph text) of the open run.
    run: Option<(Option<bool>, Option<u32>, usize)>,
    links: Vec<(Option<String>, usize)>,
    tables: Vec<Table>,
    /// Locators of the current row of the outermost table.
    row: RawBlock,
}

fn parse_document(xml: &str, styles: &Styles) -> Result<Vec<RawBlock>, ParseError> {
    let mut r = NsReader::from_str(xml);
    let mut p = DocParser::default();
    let xml_err = |e: quick_xml::Error| malformed(format!("word/document.xml: {e}"));
    loop {
        let (res, ev) = r.read_resolved_event().map_err(xml_err)?;
        let ns = [NS_W, NS_MC].into_iter().find(|uri| is_ns(&res, uri));
        match ev {
            Event::Start(e) => p.open(&r, ns, &e),
            Event::Empty(e) => {
                p.open(&r, ns, &e);
                p.close(styles);
            }
            Event::End(_) => p.close(styles),
            Event::Text(t) => p.text(&t.xml10_content()),
            Event::CData(t) => p.text(&t),
            Event::GeneralRef(g) => match g.resolve_char_ref() {
                Ok(Some(c)) => p.text(c.encode_utf8(&mut [0; 4])),
                _ => p.text(resolve_predefined_entity(&g).unwrap_or("")),
            },
            Event::Eof => break,
            _ => {}
        }
    }
    if !p.stack.is_empty() || !p.seen_body {
        return Err(malformed("word/document.xml: truncated or not a WordprocessingML document"));
    }
    Ok(p.out)
}

impl DocParser {
    fn open(&mut self, r: &NsReader<&[u8]>, ns: Option<&str>, e: &BytesStart<'_>) {
        let local = e.local_name();
        let name = local.as_ref();
        let w = ns == Some(NS_W);
        if w && name == "p" {
            self.ordinal = self.ordinal.saturating_add(1);
        }
        let skip =
            (w && matches!(name, "del" | "moveFrom" | "txbxContent")) || (ns == Some(NS_MC) && name == "Fallback");
        if self.skipping > 0 || skip {
            self.skipping += 1;
            self.stack.push(Tag::Skip);
            return;
        }
        let parent = self.stack.last().copied();
        let val = || attr(r, e, Some(NS_W), "val");
        let tag = match (w, name) {
            (false, _) => Tag::Other,
            (_, "body") => {
                self.seen_body = true;
                Tag::Other
            }
            (_, "p") if self.para.is_none() => {
                // Word writes 8 hex digits; anything else is not a usable anchor.
                let id = attr(r, e, Some(NS_W14), "paraId")
                    .filter(|v| (1..=16).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_hexdigit()));
                self.para = Some(RawBlock { ordinal: self.ordinal, para_ids: (id.clone(), id), ..Default::default() });
                Tag::P
            }
            (_, "pPr") if parent == Some(Tag::P) => Tag::PPr,
            (_, "numPr") if parent == Some(Tag::PPr) => Tag::NumPr,
            (_, "r") if self.para.is_some() => {
                self.run = self.para.as_ref().map(|p| (None, None, p.text.len()));
                Tag::R
            }
            (_, "rPr") if parent == Some(Tag::R) => Tag::RPr,
            (_, "t") if parent == Some(Tag::R) => Tag::T,
            (_, "hyperlink") if self.para.is_some() => {
                let start = self.para.as_ref().map_or(0, |p| p.text.len());
                self.links.push((attr(r, e, Some(NS_R), "id"), start));
                Tag::Hyperlink
            }
            (_, "tbl") => {
                self.tables.push(Table::default());
                Tag::Tbl
            }
            (_, "tr") if !self.tables.is_empty() => {
                if self.tables.len() == 1 {
                    self.row = RawBlock { is_row: true, ..Default::default() };
                }
                if let Some(t) = self.tables.last_mut() {
                    *t = Table::default();
                }
                Tag::Tr
            }
            (_, "tc") if !self.tables.is_empty() => {
                if let Some(t) = self.tables.last_mut() {
                    t.cell.clear();
                }
                Tag::Tc
            }
            _ => {
                let (para, run) = (self.para.as_mut(), self.run.as_mut());
                match (name, parent, para, run) {
                    ("pStyle", Some(Tag::PPr), Some(p), _) => p.style = val(),
                    ("outlineLvl", Some(Tag::PPr), Some(p), _) => p.outline = val().and_then(|v| v.parse().ok()),
                    ("numId", Some(Tag::NumPr), Some(p), _) => p.numbered = val().is_some_and(|v| v != "0"),
                    ("b", Some(Tag::RPr), _, Some(run)) => run.0 = Some(on_off(val())),
                    ("sz", Some(Tag::RPr), _, Some(run)) => run.1 = val().and_then(|v| v.parse().ok()),
                    ("tab" | "ptab", Some(Tag::R), Some(p), _) => p.text.push('\t'),
                    ("br" | "cr", Some(Tag::R), Some(p), _) => p.text.push('\n'),
                    ("noBreakHyphen", Some(Tag::R), Some(p), _) => p.text.push('-'),
                    _ => {}
                }
                Tag::Other
            }
        };
        self.stack.push(tag);
    }

    fn text(&mut self, s: &str) {
        if self.skipping == 0 && self.stack.last() == Some(&Tag::T) {
            self.para.iter_mut().for_each(|p| p.text.push_str(s));
        }
    }

    fn close(&mut self, styles: &Styles) {
        let Some(tag) = self.stack.pop() else { return };
        match tag {
            Tag::Skip => self.skipping -= 1,
            Tag::R => {
                if let (Some((bold, size, start)), Some(p)) = (self.run.take(), self.para.as_mut()) {
                    let visible = p.text.get(start..).unwrap_or("").chars().filter(|c| !c.is_whitespace()).count();
                    if visible > 0 {
                        let style = p.style.as_deref();
                        let bold = bold.or_else(|| styles.inherit(style, |s| s.bold)).unwrap_or(false);
                        let size = size.or_else(|| styles.inherit(style, |s| s.size)).or(styles.default_size);
                        p.runs.push((bold, size.unwrap_or(20), visible));
                    }
                }
            }
            Tag::Hyperlink => {
                if let (Some((Some(rid), start)), Some(p)) = (self.links.pop(), self.para.as_mut()) {
                    let label = p.text.get(start..).unwrap_or("").trim().to_string();
                    p.links.push((rid, label));
                }
            }
            Tag::P => self.finish_paragraph(),
            Tag::Tc => {
                if let Some(t) = self.tables.last_mut() {
                    let cell = std::mem::take(&mut t.cell).join("\n");
                    t.cells.push(cell);
                }
            }
            Tag::Tr => self.finish_row(),
            Tag::Tbl => drop(self.tables.pop()),
            _ => {}
        }
    }

    fn finish_paragraph(&mut self) {
        let Some(mut p) = self.para.take() else { return };
        self.run = None;
        self.links.clear();
        let text = p.text.trim();
        if let Some(table) = self.tables.last_mut() {
            if self.row.ordinal == 0 {
                self.row.ordinal = p.ordinal;
                self.row.para_ids.0 = p.para_ids.0.clone();
            }
            self.row.para_ids.1 = p.para_ids.1.clone();
            self.row.links.append(&mut p.links);
            if !text.is_empty() {
                table.cell.push(text.to_string());
            }
        } else if !text.is_empty() {
            p.text = text.to_string();
            self.out.push(p);
        }
    }

    fn finish_row(&mut self) {
        let depth = self.tables.len();
        let Some(table) = self.tables.last_mut() else { return };
        if !table.cell.is_empty() {
            // Paragraphs directly in `w:tr` (invalid, but keep their text).
            let cell = std::mem::take(&mut table.cell).join("\n");
            table.cells.push(cell);
        }
        let cells = std::mem::take(&mut table.cells);
        if cells.iter().all(String::is_empty) {
            return;
        }
        let text = cells.join(" | ");
        if depth > 1 {
            self.tables[depth - 2].cell.push(text);
        } else {
            let mut row = std::mem::take(&mut self.row);
            row.text = text;
            self.out.push(row);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// headings and assembly

/// Body text size: the size carrying the most visible characters (smallest on ties).
fn body_font_size(raw: &[RawBlock]) -> u32 {
    let mut weight: BTreeMap<u32, usize> = BTreeMap::new();
    for run in raw.iter().flat_map(|b| &b.runs) {
        *weight.entry(run.1).or_default() += run.2;
    }
    weight.into_iter().fold((20, 0), |best, (size, n)| if n > best.1 { (size, n) } else { best }).0
}

fn heading_level(b: &RawBlock, styles: &Styles, body_size: u32, bold_is_signal: bool) -> Option<u8> {
    match b.outline {
        Some(v) if v <= 8 => return Some(v + 1),
        Some(_) => return None,
        None => {}
    }
    if let Some(level) = b.style.as_deref().and_then(|s| styles.heading_level(s)) {
        return Some(level);
    }
    if b.is_row || b.numbered || !styles.is_body_style(b.style.as_deref()) {
        return None;
    }
    let all = |f: fn(&(bool, u32, usize), u32) -> bool| !b.runs.is_empty() && b.runs.iter().all(|r| f(r, body_size));
    let emphasised = (bold_is_signal && all(|r, _| r.0)) || all(|r, body| r.1 > body);
    heuristic_level(&b.text, emphasised)
}

/// Report titles written in Normal style. Conservative: at most 40 chars on one line, no
/// sentence punctuation, at least two chars with a letter after any numbering prefix, and
/// either a Chinese numbering prefix (第X章 → 1, 一、→ 2, （一）→ 3) or emphasis (entirely bold,
/// or larger than body text). Arabic prefixes (`1.` → 2, `1.1` → 3, …) count only together with
/// emphasis, since plain numbered sentences are common in body text. Emphasis alone → 2.
fn heuristic_level(text: &str, emphasised: bool) -> Option<u8> {
    let text = text.trim();
    if text.chars().count() > 40 || text.contains('\n') {
        return None;
    }
    let (pattern, title) = match chinese_prefix(text) {
        Some((level, rest)) => (Some((level, true)), rest),
        None => match arabic_prefix(text) {
            Some((level, rest)) => (Some((level, false)), rest),
            None => (None, text),
        },
    };
    let title = title.trim();
    if title.chars().count() < 2 || !title.chars().any(char::is_alphabetic) {
        return None;
    }
    if title.chars().any(|c| "。；;：:！!？?，,".contains(c)) || title.ends_with('.') {
        return None;
    }
    match pattern {
        Some((level, true)) => Some(level),
        Some((level, false)) if emphasised => Some(level),
        None if emphasised => Some(2),
        _ => None,
    }
}

fn prefix_len(s: &str, f: impl Fn(char) -> bool) -> usize {
    s.chars().take_while(|&c| f(c)).map(char::len_utf8).sum()
}

fn chinese_prefix(s: &str) -> Option<(u8, &str)> {
    let zh = |c: char| "一二三四五六七八九十百零〇两".contains(c);
    if let Some(rest) = s.strip_prefix('第') {
        let n = prefix_len(rest, |c| zh(c) || c.is_ascii_digit());
        return rest[n..].strip_prefix('章').filter(|_| n > 0).map(|t| (1, t));
    }
    let n = prefix_len(s, zh);
    if n > 0 {
        return s[n..].strip_prefix('、').map(|t| (2, t));
    }
    let rest = s.strip_prefix('（').or_else(|| s.strip_prefix('('))?;
    let n = prefix_len(rest, zh);
    let t = rest[n..].strip_prefix('）').or_else(|| rest[n..].strip_prefix(')'))?;
    (n > 0).then_some((3, t))
}

/// `1.` / `1、` → 2, `1.1` / `1.1.` → 3, one more level per group (numbers of ≤ 3 digits).
fn arabic_prefix(s: &str) -> Option<(u8, &str)> {
    let mut groups = 0u8;
    let mut rest = s;
    loop {
        let n = prefix_len(rest, |c| c.is_ascii_digit());
        if n == 0 || n > 3 || groups >= 8 {
            break;
        }
        groups += 1;
        rest = &rest[n..];
        match rest.chars().next() {
            Some(c @ ('.' | '．')) => rest = &rest[c.len_utf8()..],
            Some('、') if groups == 1 => return Some((2, &rest['、'.len_utf8()..])),
            Some(c) if c.is_whitespace() && groups > 1 => return Some((groups + 1, rest)),
            _ => return None,
        }
    }
    (groups > 0).then_some((groups + 1, rest))
}

fn assemble(bytes: &[u8], raw: Vec<RawBlock>, styles: &Styles, rels: &HashMap<String, String>) -> ParsedArtifact {
    let body_size = body_font_size(&raw);
    // In a document that is mostly bold, bold says nothing about headings.
    let (bold, total) =
        raw.iter().flat_map(|b| &b.runs).fold((0, 0), |(b, t), r| (b + if r.0 { r.2 } else { 0 }, t + r.2));
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
                references.push(Reference {
                    kind: ReferenceKind::Link,
                    source_block_id: id.clone(),
                    target: url.clone(),
                    label,
                });
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
            page: None,
            bbox: None,
            line_range: None,
            para_id_start: rb.para_ids.0,
            para_id_end: rb.para_ids.1,
            paragraph_ordinal: (rb.ordinal > 0).then_some(rb.ordinal),
            text_fingerprint: artifact::fingerprint(&rb.text),
            quality: Quality::Exact,
            confidence: None,
            text: rb.text,
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
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use zip::write::SimpleFileOptions;

    const STYLES: &str = r#"<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">
<w:docDefaults><w:rPrDefault><w:rPr><w:sz w:val="24"/></w:rPr></w:rPrDefault></w:docDefaults>
<w:style w:type="paragraph" w:default="1" w:styleId="a"><w:name w:val="Normal"/></w:style>
<w:style w:type="paragraph" w:styleId="1"><w:name w:val="heading 1"/><w:basedOn w:val="a"/><w:rPr><w:b/></w:rPr></w:style>
<w:style w:type="paragraph" w:styleId="2"><w:name w:val="heading 2"/><w:basedOn w:val="a"/></w:style>
<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style></w:styles>"#;
    const RELS: &str = r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink" Target="https://example.com/docs" TargetMode="External"/></Relationships>"#;

    fn zip_of(files: &[(&str, &str)]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, body) in files {
            w.start_file(*name, SimpleFileOptions::default()).unwrap();
            w.write_all(body.as_bytes()).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn docx(body: &str, styles: Option<&str>) -> Vec<u8> {
        let document = format!(
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{NS_W}" xmlns:w14="{NS_W14}" xmlns:r="{NS_R}" xmlns:mc="{NS_MC}"><w:body>{body}<w:sectPr/></w:body></w:document>"#
        );
        let mut files = vec![
            ("[Content_Types].xml", "<Types/>"),
            ("word/document.xml", document.as_str()),
            ("word/_rels/document.xml.rels", RELS),
        ];
        files.extend(styles.map(|s| ("word/styles.xml", s)));
        zip_of(&files)
    }

    fn parse(bytes: &[u8]) -> Result<ParsedArtifact, ParseError> {
        DocxProvider.parse(&ParseInput { bytes, file_name: "t.docx", kind: "docx" })
    }

    fn para(id: &str, inner: &str) -> String {
        format!(r#"<w:p w14:paraId="{id}">{inner}</w:p>"#)
    }

    fn run(text: &str) -> String {
        format!("<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r>")
    }

    fn word_like_body() -> String {
        let style = |s: &str| format!(r#"<w:pPr><w:pStyle w:val="{s}"/></w:pPr>"#);
        let cell = |ps: &[String]| format!("<w:tc>{}</w:tc>", ps.concat());
        [
            para("10000001", &(style("Title") + &run("Rust 并发指南"))),
            para("10000002", ""),
            para("10000003", &(style("1") + &run("Threads"))),
            para("10000004", &run("使用线程作用域可以借用栈上的数据。")),
            para("10000005", &(style("2") + &run("Scoped threads"))),
            para("10000006", "<w:r><w:t>Line one</w:t><w:br/><w:t>line two</w:t><w:tab/><w:t>tabbed</w:t></w:r>"),
            para(
                "10000007",
                &(run("Keep ")
                    + r#"<w:del w:id="1" w:author="a"><w:r><w:delText>removed </w:delText><w:br/></w:r></w:del><w:ins w:id="2" w:author="a">"#
                    + &run("added")
                    + r#"</w:ins><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGE </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r>"#
                    + &run(" 7")
                    + r#"<w:r><w:fldChar w:fldCharType="end"/></w:r>"#),
            ),
            para("10000008", r#"<w:r><w:rPr><w:b/></w:rPr><w:t>第一章 总则</w:t></w:r>"#),
            para("10000009", &(r#"<w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="3"/></w:numPr></w:pPr>"#.to_string() + &run("first item &amp; more"))),
            format!(
                "<w:tbl><w:tr>{}{}</w:tr><w:tr>{}{}</w:tr></w:tbl>",
                cell(&[para("1000000A", &run("Name"))]),
                cell(&[para("1000000B", &run("Value"))]),
                cell(&[para("1000000C", &run("a")), para("1000000D", &run("b"))]),
                cell(&[para("1000000E", &format!(r#"<w:hyperlink r:id="rId9">{}</w:hyperlink>"#, run("docs")))]),
            ),
            para("1000000F", &run("一、适用范围")),
            format!("<w:p>{}</w:p>", run("1. Install the crate")),
        ]
        .concat()
    }

    #[test]
    fn word_document_blocks_locators_and_sections() {
        let bytes = docx(&word_like_body(), Some(STYLES));
        let a = parse(&bytes).unwrap();
        a.validate().unwrap();
        assert_eq!(a, parse(&bytes).unwrap(), "deterministic");
        assert_eq!(a.source_map.resource_kind, "docx");
        assert_eq!(a.source_hash, artifact::source_hash(&bytes));
        use BlockType::*;
        // (text, type, paraIdStart..paraIdEnd, paragraphOrdinal, section)
        let expect = [
            ("Rust 并发指南", Heading, "10000001..10000001", 1, "sec_1"),
            ("Threads", Heading, "10000003..10000003", 3, "sec_2"),
            ("使用线程作用域可以借用栈上的数据。", Paragraph, "10000004..10000004", 4, "sec_2"),
            ("Scoped threads", Heading, "10000005..10000005", 5, "sec_3"),
            ("Line one\nline two\ttabbed", Paragraph, "10000006..10000006", 6, "sec_3"),
            ("Keep added 7", Paragraph, "10000007..10000007", 7, "sec_3"),
            ("第一章 总则", Heading, "10000008..10000008", 8, "sec_4"),
            ("first item & more", ListItem, "10000009..10000009", 9, "sec_4"),
            ("Name | Value", TableRow, "1000000A..1000000B", 10, "sec_4"),
            ("a\nb | docs", TableRow, "1000000C..1000000E", 12, "sec_4"),
            ("一、适用范围", Heading, "1000000F..1000000F", 15, "sec_5"),
            ("1. Install the crate", Paragraph, "..", 16, "sec_5"),
        ];
        assert_eq!(a.source_map.blocks.len(), expect.len());
        for (i, (b, e)) in a.source_map.blocks.iter().zip(expect).enumerate() {
            let ids =
                format!("{}..{}", b.para_id_start.as_deref().unwrap_or(""), b.para_id_end.as_deref().unwrap_or(""));
            assert_eq!(
                (b.id.clone(), b.text.as_str(), b.block_type, ids.as_str()),
                (format!("b{}", i + 1), e.0, e.1, e.2)
            );
            assert_eq!((b.paragraph_ordinal, b.section_id.as_deref()), (Some(e.3), Some(e.4)), "{}", b.text);
            assert_eq!((b.text_fingerprint.clone(), b.quality), (artifact::fingerprint(e.0), Quality::Exact));
        }
        let secs: Vec<_> = a
            .source_map
            .sections
            .iter()
            .map(|s| (s.title.as_str(), s.level, s.parent_id.as_deref(), s.path.join(" / "), s.block_ids.join(",")))
            .collect();
        assert_eq!(
            secs,
            [
                ("Rust 并发指南", 1, None, "Rust 并发指南".into(), "b1".into()),
                ("Threads", 1, None, "Threads".into(), "b2,b3".into()),
                ("Scoped threads", 2, Some("sec_2"), "Threads / Scoped threads".into(), "b4,b5,b6".into()),
                ("第一章 总则", 1, None, "第一章 总则".into(), "b7,b8,b9,b10".into()),
                ("一、适用范围", 2, Some("sec_4"), "第一章 总则 / 一、适用范围".into(), "b11,b12".into()),
            ]
        );
        let r = &a.source_map.references;
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].kind, r[0].source_block_id.as_str(), r[0].target.as_str()),
            (ReferenceKind::Link, "b10", "https://example.com/docs")
        );
        assert_eq!(r[0].label.as_deref(), Some("docs"));
    }

    #[test]
    fn without_styles_xml_ids_still_resolve_and_text_boxes_are_counted_not_extracted() {
        let textbox = r#"<w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><w:txbxContent><w:p><w:r><w:t>box</w:t></w:r></w:p></w:txbxContent></w:drawing></mc:Choice><mc:Fallback><w:pict><w:txbxContent><w:p><w:r><w:t>box</w:t></w:r></w:p></w:txbxContent></w:pict></mc:Fallback></mc:AlternateContent></w:r>"#;
        let body = format!(
            r#"<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr>{}</w:p><w:p>{}{textbox}</w:p><w:p>{}</w:p><w:sdt><w:sdtContent><w:p><w:pPr><w:outlineLvl w:val="2"/></w:pPr>{}</w:p></w:sdtContent></w:sdt>"#,
            run("Intro"),
            run("Text"),
            run("After"),
            run("Deep")
        );
        let a = parse(&docx(&body, None)).unwrap();
        a.validate().unwrap();
        let got: Vec<_> =
            a.source_map.blocks.iter().map(|b| (b.text.as_str(), b.block_type, b.paragraph_ordinal)).collect();
        use BlockType::*;
        assert_eq!(
            got,
            [
                ("Intro", Heading, Some(1)),
                ("Text", Paragraph, Some(2)),
                ("After", Paragraph, Some(5)),
                ("Deep", Heading, Some(6))
            ]
        );
        assert_eq!(a.source_map.sections[1].level, 3);
        assert_eq!(a.source_map.sections[1].parent_id.as_deref(), Some("sec_1"));
    }

    #[test]
    fn larger_font_marks_a_title_but_bold_in_a_bold_document_does_not() {
        let big = r#"<w:p><w:r><w:rPr><w:sz w:val="36"/></w:rPr><w:t>研究背景</w:t></w:r></w:p>"#;
        let body = format!(
            "{big}<w:p>{}</w:p><w:p>{}</w:p>",
            run("正文内容比较长，用来确定正文字号。"),
            run("Short plain line")
        );
        let a = parse(&docx(&body, Some(STYLES))).unwrap();
        let types: Vec<_> = a.source_map.blocks.iter().map(|b| b.block_type).collect();
        assert_eq!(types, [BlockType::Heading, BlockType::Paragraph, BlockType::Paragraph]);
        assert_eq!(a.source_map.sections[0].level, 2);

        let bold = |t: &str| format!(r#"<w:p><w:r><w:rPr><w:b/></w:rPr><w:t>{t}</w:t></w:r></w:p>"#);
        let a = parse(&docx(&(bold("Everything bold") + &bold("Also bold here")), Some(STYLES))).unwrap();
        assert!(a.source_map.sections.is_empty());
    }

    #[test]
    fn heuristic_levels() {
        let cases = [
            ("第一章 总则", false, Some(1)),
            ("第12章 附录", false, Some(1)),
            ("一、适用范围", false, Some(2)),
            ("（一）基本原则", false, Some(3)),
            ("(二) 工作目标", false, Some(3)),
            ("1. Install the crate", false, None),
            ("1. Install", true, Some(2)),
            ("1、总体要求", true, Some(2)),
            ("1.1 背景", true, Some(3)),
            ("2.3.1 Details", true, Some(4)),
            ("研究背景", true, Some(2)),
            ("研究背景", false, None),
            ("一、本办法适用于全国。", false, None),
            ("注：", true, None),
            ("3.5%", true, None),
            ("1.5倍增长", true, Some(2)),
            ("一、", false, None),
            ("第一节 概述", false, None),
            ("这是一个非常非常长的段落，它虽然是粗体，但显然不是标题，因为它超过了四十个字符的限制呢", true, None),
        ];
        for (text, emphasised, want) in cases {
            assert_eq!(heuristic_level(text, emphasised), want, "{text}");
        }
        assert_eq!(level_from_style_name("heading 3"), Some(3));
        assert_eq!(level_from_style_name("Heading10"), None);
    }

    #[test]
    fn hostile_inputs_fail_with_codes() {
        let code = |b: &[u8]| parse(b).unwrap_err().code;
        let good = docx(&word_like_body(), Some(STYLES));
        assert_eq!(code(&good[..good.len() / 2]), "docx_malformed");
        let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        assert_eq!(code(&noise), "docx_malformed");
        assert_eq!(code(b""), "docx_malformed");
        let mut ole = OLE_MAGIC.to_vec();
        ole.extend_from_slice(&[0; 512]);
        assert_eq!(code(&ole), "docx_encrypted");
        assert_eq!(code(&zip_of(&[("word/other.xml", "<x/>")])), "docx_malformed");
        assert_eq!(code(&zip_of(&[("word/document.xml", "<w:document><w:body>")])), "docx_malformed");
        let truncated_xml = docx("<w:p><w:r><w:t>x</w:t></w:r>", None);
        assert_eq!(code(&truncated_xml), "docx_malformed");
        // Broken optional parts are ignored.
        assert!(parse(&docx(&para("1", &run("ok")), Some("<w:styles><oops"))).is_ok());
    }

    #[test]
    fn mangled_documents_never_panic() {
        let xml = format!(
            r#"<w:document xmlns:w="{NS_W}" xmlns:w14="{NS_W14}" xmlns:r="{NS_R}" xmlns:mc="{NS_MC}"><w:body>{}</w:body></w:document>"#,
            word_like_body()
        );
        let cuts = xml.char_indices().map(|(i, _)| i).step_by(7);
        for doc in
            cuts.map(|i| xml[..i].to_string()).chain([xml.replace("</w:tc>", ""), xml.replace("<w:tr>", "<w:p>")])
        {
            let _ = parse(&zip_of(&[("word/document.xml", &doc), ("word/styles.xml", &doc)]));
        }
        let good = docx(&word_like_body(), Some(STYLES));
        for i in (0..good.len()).step_by(13) {
            let mut bad = good.clone();
            bad[i] ^= 0x5A;
            let _ = parse(&bad);
        }
    }

    /// Rewrites the declared uncompressed size of every entry (local and central headers).
    fn patch_sizes(mut zip: Vec<u8>, size: u32) -> Vec<u8> {
        for i in 0..zip.len().saturating_sub(30) {
            let at = match &zip[i..i + 4] {
                b"PK\x03\x04" => i + 22,
                b"PK\x01\x02" => i + 24,
                _ => continue,
            };
            zip[at..at + 4].copy_from_slice(&size.to_le_bytes());
        }
        zip
    }

    #[test]
    fn oversized_entries_are_refused() {
        let bomb = patch_sizes(zip_of(&[("word/document.xml", "<w:document/>")]), 0x7FFF_FFFF);
        let err = parse(&bomb).unwrap_err();
        assert_eq!(err.code, "docx_malformed");
        assert!(err.message.contains("declares"), "{}", err.message);
        // An entry that under-declares its size is cut off by the read cap.
        let body = "x".repeat(100);
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        w.start_file("a.txt", SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored)).unwrap();
        w.write_all(body.as_bytes()).unwrap();
        let lying = patch_sizes(w.finish().unwrap().into_inner(), 5);
        let mut archive = zip::ZipArchive::new(Cursor::new(lying.as_slice())).unwrap();
        let err = read_entry(&mut archive, "a.txt", 10).unwrap_err();
        assert!(err.message.contains("larger than"), "{}", err.message);
    }

    fn shared(name: &str) -> ParsedArtifact {
        let path = format!("{}/../shared/testdata/docs/docx/{name}", env!("CARGO_MANIFEST_DIR"));
        let a = parse(&std::fs::read(path).unwrap()).unwrap();
        a.validate().unwrap();
        a
    }

    #[test]
    fn shared_test_files() {
        let zen = shared("d2p_zen_of_python.docx");
        let texts: Vec<_> = zen.source_map.blocks.iter().map(|b| b.text.as_str()).collect();
        assert!(texts.contains(&"Beautiful is better than ugly."));
        assert!(texts.contains(&"Namespaces are one honking great idea -- let's do more of those!"));
        assert!(!zen.text.contains("PAGEREF"), "field instructions are dropped");
        assert!(zen.source_map.blocks.iter().all(|b| b.para_id_start.is_none()));

        let tables = shared("un_docx-tables.docx");
        let rows: Vec<_> = tables
            .source_map
            .blocks
            .iter()
            .filter(|b| b.block_type == BlockType::TableRow)
            .map(|b| b.text.as_str())
            .collect();
        assert!(rows.contains(&"Header Col 1 | Header Col 2"), "{rows:?}");
        assert!(rows.contains(&"a | >b< | c"), "entities decoded: {rows:?}");
        assert!(rows.contains(&"d | e | f\ng&t | h | i"), "nested table flattened into its cell: {rows:?}");
        let link = &tables.source_map.references[0];
        assert_eq!((link.target.as_str(), link.label.as_deref()), ("https://tabul.com/", Some("A link example")));

        let pydocx = shared("pydocx_test.docx");
        assert_eq!(pydocx.source_map.sections[0].title, "python-docx was here!");
        assert_eq!(pydocx.source_map.blocks[1].paragraph_ordinal, Some(2));

        let lo = shared("d2p_libreoffice_conversion.docx");
        // Style id "2" is named "Heading 2" in styles.xml; the heuristic would reject the "。".
        assert!(lo.source_map.sections.iter().any(|s| s.title == "特此声明。" && s.level == 2));
        assert!(lo.source_map.blocks.iter().any(|b| b.block_type == BlockType::TableRow));
    }
}

//! `word/document.xml` → raw blocks: body paragraphs and table rows with their locators and runs.

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::NsReader;

use super::styles::Styles;
use super::xml::{attr, is_ns, malformed, on_off};
use super::{NS_MC, NS_R, NS_W, NS_W14};
use crate::ingest::ParseError;

/// A body paragraph or top-level table row, before heading classification.
#[derive(Default, Debug)]
pub(super) struct RawBlock {
    pub(super) is_row: bool,
    pub(super) text: String,
    pub(super) para_ids: (Option<String>, Option<String>),
    /// 0 = not yet known (a row before its first paragraph).
    pub(super) ordinal: u32,
    pub(super) style: Option<String>,
    pub(super) outline: Option<u8>,
    pub(super) numbered: bool,
    /// (bold, size in half-points, visible chars) per run with visible text, styles resolved.
    pub(super) runs: Vec<(bool, u32, usize)>,
    /// (relationship id, label) of hyperlinks.
    pub(super) links: Vec<(String, String)>,
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

pub(super) fn parse_document(xml: &str, styles: &Styles) -> Result<Vec<RawBlock>, ParseError> {
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
        let skip = (w && matches!(name, "del" | "moveFrom" | "txbxContent")) || (ns == Some(NS_MC) && name == "Fallback");
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

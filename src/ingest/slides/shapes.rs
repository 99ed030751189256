//! One slide (or notes slide) part as shapes: each shape's id, name, type, box in slide EMU
//! (group transforms applied), its paragraphs, table rows or picture.
//!
//! - `p:sp` with `p:txBody`: paragraphs (`a:p`) counted from 1 in the shape, empty ones
//!   included; `a:t` text, `a:br` → "\n", `a:tab` → "\t".
//! - `p:graphicFrame` holding `a:tbl`: rows (`a:tr`), cells (`a:tc`) joined by " | ".
//! - `p:pic`: the picture's relationship id (`a:blip/@r:embed`) for OCR.
//! - `p:grpSp`: its `a:xfrm` (`off`, `ext`, `chOff`, `chExt`) maps its children into the
//!   parent's space; boxes are mapped through every enclosing group.
//! - `mc:Fallback` is skipped (the `mc:Choice` content is read).
//! - A placeholder without its own `a:xfrm` takes the box of the layout's (then master's)
//!   placeholder of the same `idx` (else `type`), see [`Placeholders`].

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use super::package::{attr, local, next};
use crate::evidence::slides::{ShapeType, Turn};
use crate::ingest::ParseError;

/// What a shape holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Paragraph texts in order (empty ones kept: the index is the locator).
    Paragraphs(Vec<String>),
    /// Table rows, each its cells' texts.
    Rows(Vec<Vec<String>>),
    /// A picture's relationship id.
    Picture(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub id: u32,
    pub name: String,
    pub shape_type: ShapeType,
    /// Placeholder `type` and `idx` (`p:nvPr/p:ph`), if it is one.
    pub ph: Option<(Option<String>, Option<String>)>,
    /// `[x, y, w, h]` in slide EMU.
    pub bbox: Option<[i64; 4]>,
    /// Its own rotation and flips (`a:xfrm` `rot`, `flipH`, `flipV`), when turned.
    pub turn: Option<Turn>,
    pub content: Content,
}

/// A group's mapping of its child space into its parent's.
#[derive(Clone, Copy, Debug, Default)]
struct Xfrm {
    off: [i64; 2],
    ext: [i64; 2],
    ch_off: [i64; 2],
    ch_ext: [i64; 2],
}

impl Xfrm {
    fn map(&self, b: [i64; 4]) -> [i64; 4] {
        let sx = if self.ch_ext[0] > 0 { self.ext[0] as f64 / self.ch_ext[0] as f64 } else { 1.0 };
        let sy = if self.ch_ext[1] > 0 { self.ext[1] as f64 / self.ch_ext[1] as f64 } else { 1.0 };
        let x = self.off[0] as f64 + (b[0] - self.ch_off[0]) as f64 * sx;
        let y = self.off[1] as f64 + (b[1] - self.ch_off[1]) as f64 * sy;
        [x.round() as i64, y.round() as i64, (b[2] as f64 * sx).round() as i64, (b[3] as f64 * sy).round() as i64]
    }
}

/// The shape being read.
#[derive(Default)]
struct Open {
    id: u32,
    name: String,
    ph: Option<(Option<String>, Option<String>)>,
    xfrm: Xfrm,
    has_xfrm: bool,
    turn: Option<Turn>,
    paras: Vec<String>,
    rows: Vec<Vec<String>>,
    blip: Option<String>,
    kind: u8,
}

const SP: u8 = 1;
const FRAME: u8 = 2;
const PIC: u8 = 3;

/// Reads a slide part's shapes in document order (at most `max_shapes`).
pub fn read_shapes(xml: &str, part: &str, max_shapes: usize) -> Result<Vec<Shape>, ParseError> {
    let mut r = Reader::from_str(xml);
    let mut groups: Vec<(Xfrm, bool)> = Vec::new();
    let mut shape: Option<Open> = None;
    let (mut out, mut skip, mut in_t, mut count) = (Vec::new(), 0usize, false, 0usize);
    loop {
        let ev = next(&mut r, part)?;
        if skip > 0 {
            match ev {
                Event::Start(_) => skip += 1,
                Event::End(_) => skip -= 1,
                Event::Eof => break,
                _ => {}
            }
            continue;
        }
        match ev {
            Event::Start(e) => {
                let name = local(&e);
                if name == b"Fallback" {
                    skip = 1;
                    continue;
                }
                start(&name, &e, &mut groups, &mut shape, &mut count, max_shapes, part)?;
                in_t = name == b"t";
            }
            Event::Empty(e) => {
                let name = local(&e);
                empty(&name, &e, &mut groups, &mut shape);
            }
            Event::Text(t) if in_t => push_text(&mut shape, &t.xml10_content()),
            Event::CData(t) if in_t => push_text(&mut shape, &t),
            Event::GeneralRef(g) if in_t => {
                let s = match g.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => resolve_predefined_entity(&g).unwrap_or("").to_string(),
                };
                push_text(&mut shape, &s);
            }
            Event::End(e) => {
                in_t = false;
                let name = e.local_name().as_ref().as_bytes().to_vec();
                end(&name, &mut groups, &mut shape, &mut out);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

fn start(
    name: &[u8],
    e: &BytesStart<'_>,
    groups: &mut Vec<(Xfrm, bool)>,
    shape: &mut Option<Open>,
    count: &mut usize,
    max: usize,
    part: &str,
) -> Result<(), ParseError> {
    let kind = match name {
        b"sp" => SP,
        b"graphicFrame" => FRAME,
        b"pic" => PIC,
        b"grpSp" if shape.is_none() => {
            groups.push((Xfrm::default(), false));
            return Ok(());
        }
        _ => 0,
    };
    if kind != 0 && shape.is_none() {
        *count += 1;
        if *count > max {
            return Err(ParseError::new("slides_too_large", format!("{part} has more than {max} shapes")));
        }
        *shape = Some(Open { kind, ..Open::default() });
        return Ok(());
    }
    if let Some(s) = shape.as_mut() {
        match name {
            b"p" if s.rows.is_empty() && s.kind != FRAME => s.paras.push(String::new()),
            b"tr" => s.rows.push(Vec::new()),
            b"tc" => s.rows.last_mut().into_iter().for_each(|r| r.push(String::new())),
            b"p" => {
                // A paragraph in a table cell: lines of the cell.
                if let Some(c) = s.rows.last_mut().and_then(|r| r.last_mut()).filter(|c| !c.is_empty()) {
                    c.push('\n');
                }
            }
            _ => empty(name, e, groups, shape),
        }
    } else {
        empty(name, e, groups, shape);
    }
    Ok(())
}

fn num(e: &BytesStart<'_>, k: &str) -> i64 {
    attr(e, k).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn empty(name: &[u8], e: &BytesStart<'_>, groups: &mut [(Xfrm, bool)], shape: &mut Option<Open>) {
    let target: Option<(&mut Xfrm, &mut bool)> = match shape.as_mut() {
        Some(s) => Some((&mut s.xfrm, &mut s.has_xfrm)),
        None => groups.last_mut().map(|(x, h)| (x, h)),
    };
    match name {
        b"off" | b"ext" | b"chOff" | b"chExt" => {
            let Some((x, has)) = target else { return };
            let (a, b) = if name == b"off" || name == b"chOff" { ("x", "y") } else { ("cx", "cy") };
            let v = [num(e, a), num(e, b)];
            match name {
                b"off" => x.off = v,
                b"ext" => x.ext = v,
                b"chOff" => x.ch_off = v,
                _ => x.ch_ext = v,
            }
            *has = true;
        }
        _ => {}
    }
    let Some(s) = shape.as_mut() else { return };
    match name {
        // The shape's own frame (a table's `p:xfrm`, a shape's or picture's `a:xfrm`).
        b"xfrm" if s.turn.is_none() => s.turn = turn_of(e),
        b"cNvPr" => {
            s.id = attr(e, "id").and_then(|v| v.parse().ok()).unwrap_or(0);
            s.name = attr(e, "name").unwrap_or_default();
        }
        b"ph" => s.ph = Some((attr(e, "type"), attr(e, "idx"))),
        b"blip" => s.blip = super::package::rel_attr(e, "embed"),
        b"br" => push_text(shape, "\n"),
        b"tab" => push_text(shape, "\t"),
        _ => {}
    }
}

/// `rot` (60000ths of a degree, clockwise) and `flipH`/`flipV` of an `xfrm`; `None` unturned.
fn turn_of(e: &BytesStart<'_>) -> Option<Turn> {
    let flag = |k| attr(e, k).is_some_and(|v| v == "1" || v == "true");
    let degrees = (num(e, "rot") as f64 / 60_000.0) % 360.0;
    let t = Turn { degrees, flip_h: flag("flipH"), flip_v: flag("flipV") };
    (t != Turn::default()).then_some(t)
}

fn push_text(shape: &mut Option<Open>, t: &str) {
    let Some(s) = shape.as_mut() else { return };
    if let Some(cell) = s.rows.last_mut().and_then(|r| r.last_mut()) {
        cell.push_str(t);
    } else if let Some(p) = s.paras.last_mut() {
        p.push_str(t);
    }
}

fn end(name: &[u8], groups: &mut Vec<(Xfrm, bool)>, shape: &mut Option<Open>, out: &mut Vec<Shape>) {
    let closes = match (name, shape.as_ref().map(|s| s.kind)) {
        (b"sp", Some(SP)) | (b"graphicFrame", Some(FRAME)) | (b"pic", Some(PIC)) => true,
        (b"grpSp", None) => {
            groups.pop();
            return;
        }
        _ => false,
    };
    if !closes {
        return;
    }
    let Some(s) = shape.take() else { return };
    let mut bbox = s.has_xfrm.then_some([s.xfrm.off[0], s.xfrm.off[1], s.xfrm.ext[0], s.xfrm.ext[1]]);
    for (g, has) in groups.iter().rev() {
        if *has {
            bbox = bbox.map(|b| g.map(b));
        }
    }
    let is_title = matches!(s.ph.as_ref().and_then(|p| p.0.as_deref()), Some("title" | "ctrTitle"));
    let (shape_type, content) = match s.kind {
        PIC => match s.blip {
            Some(b) => (ShapeType::Picture, Content::Picture(b)),
            None => return,
        },
        FRAME if !s.rows.is_empty() => (ShapeType::Table, Content::Rows(s.rows)),
        _ if s.paras.iter().all(|p| p.trim().is_empty()) && s.ph.is_none() => return,
        _ if is_title => (ShapeType::Title, Content::Paragraphs(s.paras)),
        _ if s.ph.is_some() => (ShapeType::Placeholder, Content::Paragraphs(s.paras)),
        _ => (ShapeType::Text, Content::Paragraphs(s.paras)),
    };
    out.push(Shape { id: s.id, name: s.name, shape_type, ph: s.ph, bbox, turn: s.turn, content });
}

/// The placeholders of a layout or master: where a slide's placeholder without a box sits.
#[derive(Default)]
pub struct Placeholders {
    boxes: Vec<(Option<String>, Option<String>, [i64; 4])>,
}

impl Placeholders {
    pub fn of(shapes: &[Shape]) -> Placeholders {
        let boxes = shapes.iter().filter_map(|s| Some((s.ph.clone()?.0, s.ph.clone()?.1, s.bbox?))).collect();
        Placeholders { boxes }
    }

    /// By `idx`, else by `type` (`ctrTitle` and `title` alike; no type = body).
    pub fn find(&self, ty: Option<&str>, idx: Option<&str>) -> Option<[i64; 4]> {
        let norm = |t: Option<&str>| match t {
            Some("ctrTitle") | Some("title") => "title".to_string(),
            Some("subTitle") | Some("body") | Some("obj") | None => "body".to_string(),
            Some(o) => o.to_string(),
        };
        if let Some(i) = idx
            && let Some(b) = self.boxes.iter().find(|b| b.1.as_deref() == Some(i))
        {
            return Some(b.2);
        }
        self.boxes.iter().find(|b| norm(b.0.as_deref()) == norm(ty)).map(|b| b.2)
    }
}

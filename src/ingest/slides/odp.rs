//! ODP (OpenDocument presentation) on the same locator as PPTX: `content.xml`'s `draw:page`s
//! in order, each frame or shape (`svg:x`/`svg:y`/`svg:width`/`svg:height`, converted to EMU)
//! a shape numbered from 1 on its page, its `text:p`/`text:h` paragraphs counted from 1,
//! `table:table-row`s as rows, `draw:image` as a picture, `presentation:class="title"` the
//! slide's title, and the `presentation:notes` frame the notes. The slide size is the first
//! landscape page layout of `styles.xml` (else 28 × 15.75 cm). Children of a `draw:g` group
//! carry page coordinates already (ODF groups have no transform of their own).

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use super::assemble::{Item, SlideData, shape_items};
use super::package::{self, Deck, Zip, attr, local, next};
use super::shapes::{Content, Shape};
use super::{MAX_SHAPES, MAX_SLIDES};
use crate::evidence::slides::ShapeType;
use crate::ingest::ParseError;

/// `2.5cm`, `10mm`, `1in`, `72pt` → EMU.
pub fn emu(len: &str) -> Option<i64> {
    let len = len.trim();
    let split = len.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = len.split_at(split);
    let n: f64 = n.parse().ok()?;
    let per = match unit {
        "cm" => 360_000.0,
        "mm" => 36_000.0,
        "in" => 914_400.0,
        "pt" => 12_700.0,
        "pc" => 152_400.0,
        _ => return None,
    };
    Some((n * per).round() as i64)
}

/// The slide size from `styles.xml`.
fn slide_size(styles: Option<&str>) -> [i64; 2] {
    let default = [10_080_000, 5_670_000];
    let Some(xml) = styles else { return default };
    let mut r = Reader::from_str(xml);
    let mut first = None;
    while let Ok(ev) = r.read_event() {
        match ev {
            Event::Start(e) | Event::Empty(e) if local(&e) == b"page-layout-properties" => {
                let (w, h) = (attr(&e, "page-width").and_then(|v| emu(&v)), attr(&e, "page-height").and_then(|v| emu(&v)));
                if let (Some(w), Some(h)) = (w, h) {
                    if w >= h {
                        return [w, h];
                    }
                    first.get_or_insert([w, h]);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    first.unwrap_or(default)
}

/// The shape being read on a page.
struct Open {
    depth: usize,
    shape: Shape,
    paras: Vec<String>,
    rows: Vec<Vec<String>>,
    image: Option<String>,
    notes: bool,
}

struct Page {
    shapes: Vec<(Shape, bool)>,
    count: usize,
}

pub fn read(zip: &mut Zip<'_>) -> Result<(Deck, Vec<SlideData>), ParseError> {
    let content = package::read_xml(zip, "content.xml")?.ok_or_else(|| package::malformed("content.xml is missing"))?;
    let styles = package::read_xml(zip, "styles.xml")?;
    let size = slide_size(styles.as_deref());
    let pages = read_pages(&content)?;
    let deck = Deck { slides: (1..=pages.len()).map(|n| format!("content.xml#page{n}")).collect(), size };
    let mut out = Vec::with_capacity(pages.len());
    let rels = std::collections::HashMap::new();
    for (i, page) in pages.into_iter().enumerate() {
        let n = i as u32 + 1;
        let mut items: Vec<Item> = Vec::new();
        let mut title = None;
        for (s, notes) in &page.shapes {
            if s.shape_type == ShapeType::Title
                && title.is_none()
                && let Content::Paragraphs(ps) = &s.content
            {
                let t = ps.iter().map(|p| p.split_whitespace().collect::<Vec<_>>().join(" ")).collect::<Vec<_>>().join(" ");
                title = Some(t.trim().to_string()).filter(|t| !t.is_empty());
            }
            let start = items.len();
            shape_items(zip, &rels, s, n, size, false, &mut items)?;
            if *notes {
                for it in &mut items[start..] {
                    it.place.notes = true;
                    it.place.shape_type = ShapeType::Notes;
                    it.place.shape_box = None;
                }
            }
        }
        out.push(SlideData { title, items });
    }
    Ok((deck, out))
}

fn read_pages(xml: &str) -> Result<Vec<Page>, ParseError> {
    let mut r = Reader::from_str(xml);
    let (mut pages, mut depth, mut notes_depth): (Vec<Page>, usize, Option<usize>) = (Vec::new(), 0, None);
    let mut open: Option<Open> = None;
    let mut in_text = false;
    loop {
        let ev = next(&mut r, "content.xml")?;
        match ev {
            Event::Start(e) => {
                depth += 1;
                start(&e, depth, &mut pages, &mut open, &mut notes_depth, false)?;
                in_text = matches!(local(&e).as_slice(), b"p" | b"h" | b"span" | b"a");
            }
            Event::Empty(e) => {
                start(&e, depth + 1, &mut pages, &mut open, &mut notes_depth, true)?;
                if let Some(o) = open.as_mut() {
                    match local(&e).as_slice() {
                        b"s" => push(o, &" ".repeat(attr(&e, "c").and_then(|c| c.parse().ok()).unwrap_or(1).min(100))),
                        b"tab" => push(o, "\t"),
                        b"line-break" => push(o, "\n"),
                        _ => {}
                    }
                }
                end_shape(depth + 1, &mut pages, &mut open);
            }
            Event::Text(t) if in_text => {
                if let Some(o) = open.as_mut() {
                    push(o, &t.xml10_content());
                }
            }
            Event::GeneralRef(g) if in_text => {
                if let Some(o) = open.as_mut() {
                    let s = match g.resolve_char_ref() {
                        Ok(Some(c)) => c.to_string(),
                        _ => resolve_predefined_entity(&g).unwrap_or("").to_string(),
                    };
                    push(o, &s);
                }
            }
            Event::End(_) => {
                end_shape(depth, &mut pages, &mut open);
                if notes_depth == Some(depth) {
                    notes_depth = None;
                }
                depth -= 1;
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(pages)
}

fn push(o: &mut Open, t: &str) {
    if let Some(cell) = o.rows.last_mut().and_then(|r| r.last_mut()) {
        cell.push_str(t);
    } else if let Some(p) = o.paras.last_mut() {
        p.push_str(t);
    }
}

fn start(
    e: &BytesStart<'_>,
    depth: usize,
    pages: &mut Vec<Page>,
    open: &mut Option<Open>,
    notes_depth: &mut Option<usize>,
    empty: bool,
) -> Result<(), ParseError> {
    let name = local(e);
    match name.as_slice() {
        b"page" if open.is_none() => {
            if pages.len() >= MAX_SLIDES {
                return Err(ParseError::new("slides_too_large", format!("more than {MAX_SLIDES} slides in the deck")));
            }
            pages.push(Page { shapes: Vec::new(), count: 0 });
            return Ok(());
        }
        b"notes" if !empty => *notes_depth = Some(depth),
        b"frame" | b"custom-shape" | b"rect" | b"ellipse" | b"polygon" | b"path" | b"line" | b"connector" if open.is_none() => {
            let Some(page) = pages.last_mut() else { return Ok(()) };
            page.count += 1;
            if page.count > MAX_SHAPES {
                return Err(ParseError::new("slides_too_large", format!("a slide has more than {MAX_SHAPES} shapes")));
            }
            let n = |k| attr(e, k).and_then(|v| emu(&v));
            let bbox = match (n("x"), n("y"), n("width"), n("height")) {
                (Some(x), Some(y), Some(w), Some(h)) => Some([x, y, w, h]),
                _ => None,
            };
            let shape_type = match attr(e, "class").as_deref() {
                Some("title") => ShapeType::Title,
                Some(_) => ShapeType::Placeholder,
                None => ShapeType::Text,
            };
            let shape = Shape {
                id: page.count as u32,
                name: attr(e, "name").unwrap_or_default(),
                shape_type,
                ph: None,
                bbox,
                turn: None,
                content: Content::Paragraphs(Vec::new()),
            };
            *open = Some(Open { depth, shape, paras: Vec::new(), rows: Vec::new(), image: None, notes: notes_depth.is_some() });
        }
        _ => {}
    }
    if let Some(o) = open.as_mut() {
        match name.as_slice() {
            b"p" | b"h" if o.rows.is_empty() => o.paras.push(String::new()),
            b"p" | b"h" => {
                if let Some(c) = o.rows.last_mut().and_then(|r| r.last_mut()).filter(|c| !c.is_empty()) {
                    c.push('\n');
                }
            }
            b"table-row" => o.rows.push(Vec::new()),
            b"table-cell" => o.rows.last_mut().into_iter().for_each(|r| r.push(String::new())),
            b"image" => o.image = attr(e, "href"),
            _ => {}
        }
    }
    Ok(())
}

fn end_shape(depth: usize, pages: &mut [Page], open: &mut Option<Open>) {
    if open.as_ref().is_none_or(|o| o.depth != depth) {
        return;
    }
    let Some(mut o) = open.take() else { return };
    let Some(page) = pages.last_mut() else { return };
    o.shape.content = if !o.rows.is_empty() {
        o.shape.shape_type = ShapeType::Table;
        Content::Rows(o.rows)
    } else if o.paras.iter().all(|p| p.trim().is_empty()) {
        match o.image {
            Some(href) => {
                o.shape.shape_type = ShapeType::Picture;
                Content::Picture(href)
            }
            None => return,
        }
    } else {
        Content::Paragraphs(o.paras)
    };
    page.shapes.push((o.shape, o.notes));
}

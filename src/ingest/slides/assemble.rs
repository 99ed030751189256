//! Slides read from the package and laid out as a paged source map (a slide is a page).

use super::package::{self, Deck, Zip};
use super::shapes::{Content, Placeholders, Shape, read_shapes};
use super::{MAX_SHAPES, ParseError};
use crate::evidence::slides::{EMU_PER_POINT, ShapeType, SlidePlace};
use crate::ingest::artifact::{
    self, Block, BlockType, Page, ParsedArtifact, Quality, SOURCE_MAP_SCHEMA, SectionTree, SourceMap, TextBuilder,
};
use crate::ingest::ocr;

/// One block's worth of a slide before ids are given.
pub struct Item {
    pub text: String,
    pub block_type: BlockType,
    pub place: SlidePlace,
    pub quality: Quality,
    pub confidence: Option<f32>,
}

pub struct SlideData {
    pub title: Option<String>,
    pub items: Vec<Item>,
}

pub fn read_slides(zip: &mut Zip<'_>, deck: &Deck, ocr_on: bool) -> Result<Vec<SlideData>, ParseError> {
    let ocr_on = ocr_on && ocr::tesseract_available().is_ok();
    let mut out = Vec::with_capacity(deck.slides.len());
    for (i, part) in deck.slides.iter().enumerate() {
        let n = i as u32 + 1;
        let xml = package::read_xml(zip, part)?.ok_or_else(|| package::malformed(format!("{part} is missing")))?;
        let mut shapes = read_shapes(&xml, part, MAX_SHAPES)?;
        let rels = package::rels_of(zip, part)?;
        if shapes.iter().any(|s| s.bbox.is_none() && s.ph.is_some()) {
            fill_placeholder_boxes(zip, &rels, &mut shapes)?;
        }
        let mut items = Vec::new();
        let mut title = None;
        for s in &shapes {
            if s.shape_type == ShapeType::Title
                && let Content::Paragraphs(ps) = &s.content
            {
                let t = ps.iter().map(|p| p.split_whitespace().collect::<Vec<_>>().join(" ")).filter(|p| !p.is_empty());
                let t = t.collect::<Vec<_>>().join(" ");
                if title.is_none() && !t.is_empty() {
                    title = Some(t);
                }
            }
            shape_items(zip, &rels, s, n, deck.size, ocr_on, &mut items)?;
        }
        if let Some(notes) = rels.values().find(|r| r.kind == "notesSlide") {
            notes_items(zip, &notes.target, n, deck.size, &mut items)?;
        }
        out.push(SlideData { title, items });
    }
    Ok(out)
}

/// Placeholders without their own box take the layout's, then the master's.
fn fill_placeholder_boxes(
    zip: &mut Zip<'_>,
    rels: &std::collections::HashMap<String, package::Rel>,
    shapes: &mut [Shape],
) -> Result<(), ParseError> {
    let Some(layout) = rels.values().find(|r| r.kind == "slideLayout").map(|r| r.target.clone()) else { return Ok(()) };
    let layout_shapes = match package::read_xml(zip, &layout)? {
        Some(x) => read_shapes(&x, &layout, MAX_SHAPES)?,
        None => Vec::new(),
    };
    let master = package::rels_of(zip, &layout)?.into_values().find(|r| r.kind == "slideMaster").map(|r| r.target);
    let master_shapes = match master {
        Some(m) => match package::read_xml(zip, &m)? {
            Some(x) => read_shapes(&x, &m, MAX_SHAPES)?,
            None => Vec::new(),
        },
        None => Vec::new(),
    };
    let (l, m) = (Placeholders::of(&layout_shapes), Placeholders::of(&master_shapes));
    for s in shapes.iter_mut().filter(|s| s.bbox.is_none()) {
        if let Some((ty, idx)) = s.ph.clone() {
            s.bbox = l.find(ty.as_deref(), idx.as_deref()).or_else(|| m.find(ty.as_deref(), None));
        }
    }
    Ok(())
}

fn place(s: &Shape, slide: u32, size: [i64; 2]) -> SlidePlace {
    SlidePlace {
        slide,
        shape_id: s.id,
        shape_name: s.name.clone(),
        shape_type: s.shape_type,
        shape_box: s.bbox,
        slide_size: size,
        paragraph: None,
        table_row: None,
        notes: false,
        turn: s.turn,
    }
}

fn item(text: String, block_type: BlockType, place: SlidePlace) -> Item {
    Item { text, block_type, place, quality: Quality::Exact, confidence: None }
}

pub(super) fn shape_items(
    zip: &mut Zip<'_>,
    rels: &std::collections::HashMap<String, package::Rel>,
    s: &Shape,
    slide: u32,
    size: [i64; 2],
    ocr_on: bool,
    out: &mut Vec<Item>,
) -> Result<(), ParseError> {
    match &s.content {
        Content::Paragraphs(ps) => {
            let ty = if s.shape_type == ShapeType::Title { BlockType::Heading } else { BlockType::Paragraph };
            for (i, p) in ps.iter().enumerate() {
                let text = p.trim();
                if !text.is_empty() {
                    let place = SlidePlace { paragraph: Some(i as u32 + 1), ..place(s, slide, size) };
                    out.push(item(text.to_string(), ty, place));
                }
            }
        }
        Content::Rows(rows) => table_items(rows, s, slide, size, out),
        Content::Picture(rid) if ocr_on => {
            let Some(media) = rels.get(rid).filter(|r| r.kind == "image") else { return Ok(()) };
            let Ok(Some(bytes)) = package::read_bytes(zip, &media.target, package::MAX_MEDIA) else { return Ok(()) };
            let Ok(img) = ::image::load_from_memory(&bytes) else { return Ok(()) };
            let Ok(page) = ocr::ocr_image(&img, None) else { return Ok(()) };
            let paras = page.paragraphs();
            let text = paras.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n");
            if text.trim().is_empty() {
                return Ok(());
            }
            let conf = paras.iter().map(|p| p.confidence).sum::<f32>() / paras.len().max(1) as f32;
            out.push(Item {
                text: text.trim().to_string(),
                block_type: BlockType::OcrLine,
                place: place(s, slide, size),
                quality: ocr::quality_for(conf),
                confidence: Some(conf),
            });
        }
        Content::Picture(_) => {}
    }
    Ok(())
}

/// Table rows: the first row names the columns of the others (as a sheet's header does).
fn table_items(rows: &[Vec<String>], s: &Shape, slide: u32, size: [i64; 2], out: &mut Vec<Item>) {
    let one_line = |c: &str| c.split_whitespace().collect::<Vec<_>>().join(" ");
    let header: Vec<String> = rows.first().map(|r| r.iter().map(|c| one_line(c)).collect()).unwrap_or_default();
    let has_header = rows.len() > 1 && header.iter().all(|h| !h.is_empty());
    for (i, row) in rows.iter().enumerate() {
        let parts: Vec<String> = row
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.trim().is_empty())
            .map(|(j, c)| match (has_header && i > 0, header.get(j)) {
                (true, Some(h)) => format!("{h}: {}", c.trim()),
                _ => c.trim().to_string(),
            })
            .collect();
        if parts.is_empty() {
            continue;
        }
        let place = SlidePlace { table_row: Some(i as u32 + 1), ..place(s, slide, size) };
        out.push(item(parts.join(" | "), BlockType::TableRow, place));
    }
}

/// The notes slide's body placeholder, paragraph by paragraph, marked `notes`.
fn notes_items(zip: &mut Zip<'_>, part: &str, slide: u32, size: [i64; 2], out: &mut Vec<Item>) -> Result<(), ParseError> {
    let Some(xml) = package::read_xml(zip, part)? else { return Ok(()) };
    for s in read_shapes(&xml, part, MAX_SHAPES)? {
        let body = matches!(s.ph.as_ref().map(|p| p.0.as_deref()), Some(Some("body")));
        let Content::Paragraphs(ps) = &s.content else { continue };
        if !body {
            continue;
        }
        for (i, p) in ps.iter().enumerate().filter(|(_, p)| !p.trim().is_empty()) {
            let place = SlidePlace {
                shape_type: ShapeType::Notes,
                shape_box: None,
                paragraph: Some(i as u32 + 1),
                notes: true,
                turn: None,
                ..place(&s, slide, size)
            };
            out.push(item(p.trim().to_string(), BlockType::Paragraph, place));
        }
    }
    Ok(())
}

fn points(b: [i64; 4]) -> [f64; 4] {
    let p = |v: i64| (v as f64 / EMU_PER_POINT * 100.0).round() / 100.0;
    [p(b[0]), p(b[1]), p(b[0] + b[2]), p(b[1] + b[3])]
}

pub fn artifact(bytes: &[u8], version: &str, deck: &Deck, slides: Vec<SlideData>) -> ParsedArtifact {
    let (mut tb, mut tree, mut pages) = (TextBuilder::default(), SectionTree::default(), Vec::new());
    let size_pt = |v: i64| (v as f64 / EMU_PER_POINT * 100.0).round() / 100.0;
    for (i, sd) in slides.into_iter().enumerate() {
        let n = i as u32 + 1;
        match &sd.title {
            Some(t) => {
                let s = tree.open(t.clone(), 1, |_| {});
                s.page_start = Some(n);
                s.page_end = Some(n);
            }
            None => tree.close(0, |_| {}),
        }
        let mut blocks = Vec::new();
        for it in sd.items {
            let id = format!("p{n}_b{}", blocks.len() + 1);
            let section_id = tree.add_block(&id);
            blocks.push(Block {
                id,
                block_type: it.block_type,
                char_range: tb.push_block(&it.text),
                section_id,
                page: Some(n),
                bbox: it.place.shape_box.map(points),
                line_range: None,
                para_id_start: None,
                para_id_end: None,
                paragraph_ordinal: it.place.paragraph,
                sheet: None,
                sheet_hidden: None,
                cell_range: None,
                slide: Some(it.place),
                attachment: None,
                text_fingerprint: artifact::fingerprint(&it.text),
                quality: it.quality,
                confidence: it.confidence,
                text: it.text,
            });
        }
        let (width, height) = (size_pt(deck.size[0]), size_pt(deck.size[1]));
        pages.push(Page { page: n, width, height, rotation: 0, ocr: false, blocks });
    }
    let source_hash = artifact::source_hash(bytes);
    ParsedArtifact {
        source_hash: source_hash.clone(),
        provider: "slides".into(),
        provider_version: version.into(),
        text: tb.finish(),
        source_map: SourceMap {
            schema: SOURCE_MAP_SCHEMA.into(),
            provider: "slides".into(),
            model_version: version.into(),
            source_hash,
            resource_kind: "slides".into(),
            page_count: Some(pages.len() as u32),
            pages,
            blocks: Vec::new(),
            sections: tree.sections,
            references: Vec::new(),
            truncated: None,
        },
    }
}

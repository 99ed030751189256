//! PDF parse provider: pdfium text layer with layout analysis, Tesseract for scanned pages.
//!
//! Per page:
//! 1. **Glyphs**: every pdfium char with its loose box, mapped from pdfium's *unrotated* user
//!    space into the *displayed* page (`/Rotate` and the crop box applied), points, top-left
//!    origin. pdfium's own whitespace (real or generated) is kept only as a word-break hint.
//! 2. **Direction groups**: glyphs are grouped by their displayed writing direction (0/90/180/
//!    270°) and each group is laid out in its own frame where the text runs left to right, so a
//!    sideways table or a page whose content is drawn rotated reads like any other.
//! 3. **Words** (runs of glyphs without whitespace or a jump) → **recursive XY-cut**: a region
//!    is split at the widest empty vertical strip (a column gutter, backed by several lines on
//!    both sides) or the widest empty horizontal strip; horizontal strips are weighted down so
//!    a chance alignment of line gaps across columns never beats a real gutter, while a header
//!    spanning all columns blocks the vertical cut until it has been cut off. Leaves are lines
//!    in reading order, column by column.
//! 4. **Paragraphs** (= blocks): consecutive lines merge while they stay in the same column, at
//!    the paragraph's line pitch, at the same font size and boldness, without a first-line
//!    indent, a bullet, or a short sentence-final previous line.
//! 5. **Quality**: the block text is compared with what pdfium extracts inside the block's box
//!    (`FPDFText_GetBoundedText`, whitespace ignored): same characters → `exact`.
//!
//! Pages with almost no text layer but images are rendered (300 DPI, capped) and OCR'd; their
//! blocks are Tesseract paragraphs with boxes scaled back to points.
//!
//! Sections come from the outline when it has destinations, else from font sizes (short
//! paragraphs clearly larger than the page's body text; level by size rank).

mod engine;
mod geometry;
mod layout;
mod ocr_pages;
mod probe;
mod quality;
mod sections;
#[cfg(test)]
mod tests;
mod words;

use pdfium_render::prelude::*;

use super::artifact::{self, Block, BlockType, Page, ParsedArtifact, Quality, TextBuilder};
use super::ocr;
use super::{ParseError, ParseInput, ParseProvider};
use engine::{Engine, engine};
use geometry::{Geom, Rect};
use layout::layout;
use ocr_pages::{OCR_MIN_CHARS, has_images, ocr_page};
use quality::{PageChar, text_quality};
use sections::{heading_levels, read_outline, sections_from_headings, sections_from_outline};
use words::{Glyph, extract_chars, weighted_median};

pub use engine::{PDFIUM_BUILD_ENV, PDFIUM_LIB_ENV, child_env};
pub use probe::probe_pages;

const PROVIDER_ID: &str = "pdfium";
const PROVIDER_VERSION: &str = "mnote-pdf/1 pdfium-render/0.9.5";

pub struct PdfProvider;

impl ParseProvider for PdfProvider {
    fn provider_id(&self) -> &'static str {
        PROVIDER_ID
    }

    fn provider_version(&self) -> String {
        match engine() {
            Ok(e) => format!("{PROVIDER_VERSION} {}", e.build),
            Err(_) => format!("{PROVIDER_VERSION} pdfium (unavailable)"),
        }
    }

    fn can_parse(&self, kind: &str) -> bool {
        kind == "pdf"
    }

    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
        let engine = engine()?;
        // Layout code indexes vectors built from untrusted geometry; a bug there must fail
        // this document, not take the worker down with it.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parse_pdf(engine, input))).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(ParseError::new("pdf_malformed", format!("{}: the PDF parser failed: {what}", input.file_name)))
        })
    }
}

// ---- the document -------------------------------------------------------------------------

/// What section detection needs to know about a block besides the block itself.
struct BlockInfo {
    /// Font size (upright text-layer blocks only: OCR and sideways text are never headings).
    size: Option<f64>,
    lines: usize,
    /// Body text size to compare it with (see [`assign_body_sizes`]).
    body: f64,
}

/// A block before it gets its id and char range.
struct Draft {
    text: String,
    bbox: Rect,
    quality: Quality,
    confidence: Option<f32>,
    info: BlockInfo,
}

fn load_error(e: PdfiumError, name: &str) -> ParseError {
    match e {
        PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::PasswordError | PdfiumInternalError::SecurityError) => {
            ParseError::new("pdf_encrypted", format!("{name} is password-protected"))
        }
        other => ParseError::new("pdf_malformed", format!("{name} is not a readable PDF: {other:?}")),
    }
}

fn rotation_degrees(page: &PdfPage) -> i32 {
    match page.rotation() {
        Ok(PdfPageRenderRotation::Degrees90) => 90,
        Ok(PdfPageRenderRotation::Degrees180) => 180,
        Ok(PdfPageRenderRotation::Degrees270) => 270,
        _ => 0,
    }
}

fn page_geom(page: &PdfPage) -> Geom {
    let rotation = rotation_degrees(page);
    let crop = page.boundaries().bounding().or_else(|_| page.boundaries().media()).map(|b| {
        [b.bounds.left().value as f64, b.bounds.bottom().value as f64, b.bounds.right().value as f64, b.bounds.top().value as f64]
    });
    match crop {
        Ok(c) if c[2] > c[0] && c[3] > c[1] => Geom::new(c, rotation),
        // No usable box: pdfium's displayed size with the origin at 0,0.
        _ => {
            let (w, h) = (page.width().value as f64, page.height().value as f64);
            let (uw, uh) = if rotation % 180 == 0 { (w, h) } else { (h, w) };
            Geom::new([0.0, 0.0, uw, uh], rotation)
        }
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Text-layer paragraphs of a page, with the (size, chars) samples of its prose paragraphs
/// for estimating the body text size.
fn text_drafts(text: &PdfPageText, chars: Option<&[PageChar]>, geom: &Geom, glyphs: Vec<Glyph>) -> (Vec<Draft>, Vec<(f64, f64)>) {
    let paras = layout(glyphs, geom);
    let samples = paras
        .iter()
        .filter(|p| p.upright && p.lines >= 3 && p.fill >= 0.8)
        .map(|p| (p.size, p.text.chars().count() as f64))
        .collect();
    let drafts = paras
        .into_iter()
        .map(|p| Draft {
            quality: text_quality(text, chars, geom, p.bbox, &p.text, p.size),
            bbox: p.bbox,
            confidence: None,
            info: BlockInfo { size: p.upright.then_some(p.size), lines: p.lines, body: 0.0 },
            text: p.text,
        })
        .collect();
    (drafts, samples)
}

fn ocr_drafts(page: &PdfPage, geom: &Geom) -> Result<Vec<Draft>, ParseError> {
    Ok(ocr_page(page, geom)?
        .into_iter()
        .map(|p| Draft {
            quality: ocr::quality_for(p.confidence),
            bbox: p.bbox,
            confidence: Some((p.confidence * 10.0).round() / 10.0),
            info: BlockInfo { size: None, lines: p.lines.len(), body: 0.0 },
            text: p.text,
        })
        .collect())
}

/// Body text size per block: the font size of most text in prose paragraphs (several full
/// lines; not titles, lists or diagram labels), the larger of the page's and the document's
/// so a page full of footnotes keeps its body text out of the headings; pages with little
/// prose use the document's.
fn assign_body_sizes(pages: &[Page], infos: &mut [BlockInfo], samples: &[Vec<(f64, f64)>]) {
    let mut doc: Vec<(f64, f64)> = samples.iter().flatten().copied().collect();
    if doc.is_empty() {
        let blocks = pages.iter().flat_map(|p| &p.blocks).zip(infos.iter());
        doc = blocks.filter_map(|(b, i)| Some((i.size?, b.text.chars().count() as f64))).collect();
    }
    let doc_body = weighted_median(doc);
    for (info, page) in infos.iter_mut().zip(block_pages(pages)) {
        let page_samples = &samples[page];
        let chars: f64 = page_samples.iter().map(|s| s.1).sum();
        info.body = if chars < 200.0 { doc_body } else { weighted_median(page_samples.clone()).max(doc_body) };
    }
}

fn parse_pdf(engine: &Engine, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
    let doc = engine.pdfium.load_pdf_from_byte_slice(input.bytes, None).map_err(|e| load_error(e, input.file_name))?;
    let page_count = doc.pages().len().max(0);
    if page_count == 0 {
        return Err(ParseError::new("pdf_malformed", format!("{} has no pages", input.file_name)));
    }
    let max_pages = super::parse_env::max_pages();
    if page_count as u64 > max_pages {
        return Err(ParseError::new(
            "too_many_pages",
            format!("{} has {page_count} pages; the limit is {max_pages} (MNOTE_PARSE_MAX_PAGES)", input.file_name),
        ));
    }
    let mut text_out = TextBuilder::default();
    let mut pages: Vec<Page> = Vec::new();
    let mut infos: Vec<BlockInfo> = Vec::new();
    let mut geoms: Vec<Geom> = Vec::new();
    let mut body_samples: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut used_ocr = false;

    // Page by page: only the current page (and its rendering, for OCR) is held in memory.
    for index in 0..page_count {
        let number = index as u32 + 1;
        let page = doc
            .pages()
            .get(index)
            .map_err(|e| ParseError::new("pdf_malformed", format!("page {number} cannot be loaded: {e:?}")))?;
        let geom = page_geom(&page);
        geoms.push(geom);
        let text = page.text().map_err(|e| ParseError::new("pdf_malformed", format!("page {number}: no text layer: {e:?}")))?;
        let (glyphs, chars) = extract_chars(&text, &geom, true);
        let ocr_here = glyphs.len() < OCR_MIN_CHARS && has_images(&page);
        let drafts = if ocr_here {
            ocr::tesseract_available()?;
            used_ocr = true;
            body_samples.push(Vec::new());
            ocr_drafts(&page, &geom)?
        } else {
            let (drafts, samples) = text_drafts(&text, chars.as_deref(), &geom, glyphs);
            body_samples.push(samples);
            drafts
        };
        let mut blocks = Vec::with_capacity(drafts.len());
        for d in drafts {
            blocks.push(Block {
                id: format!("p{number}_b{}", blocks.len() + 1),
                char_range: text_out.push_block(&d.text),
                text_fingerprint: artifact::fingerprint(&d.text),
                page: Some(number),
                bbox: Some(d.bbox.map(round2)),
                quality: d.quality,
                confidence: d.confidence,
                ..Block::flowing(d.text)
            });
            infos.push(d.info);
        }
        pages.push(Page {
            page: number,
            width: round2(geom.width),
            height: round2(geom.height),
            rotation: geom.rotation,
            ocr: ocr_here,
            blocks,
        });
        super::parse_env::report_pages(number, page_count as u32);
    }

    assign_body_sizes(&pages, &mut infos, &body_samples);
    let headings = heading_levels(&pages, &infos);
    for (block, level) in pages.iter_mut().flat_map(|p| p.blocks.iter_mut()).zip(&headings) {
        if level.is_some() {
            block.block_type = BlockType::Heading;
        }
    }
    let outline = read_outline(&doc, &geoms);
    let sections = if outline.iter().any(|e| e.page.is_some()) {
        sections_from_outline(&mut pages, &outline)
    } else {
        sections_from_headings(&mut pages, &headings)
    };

    let mut version = format!("{PROVIDER_VERSION} {}", engine.build);
    if used_ocr {
        let tess = ocr::tesseract_version()?;
        version.push_str(&format!(" + {tess} {}", ocr::DEFAULT_LANGS));
    }
    Ok(ParsedArtifact::paged(PROVIDER_ID, version, artifact::source_hash(input.bytes), "pdf", text_out.finish(), pages, sections))
}

/// The 0-based page index of every block, in document order.
fn block_pages(pages: &[Page]) -> impl Iterator<Item = usize> + '_ {
    pages.iter().enumerate().flat_map(|(i, p)| std::iter::repeat_n(i, p.blocks.len()))
}

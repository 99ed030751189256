//! Routing probe for external providers: page sizes and scanned pages, without parsing.

use super::engine::engine;
use super::ocr_pages::{OCR_MIN_CHARS, has_images};
use super::words::extract_glyphs;
use super::{load_error, page_geom, round2};
use crate::ingest::{ParseError, mineru, parse_env};

/// Displayed size, rotation and "would be OCR'd" of every page, without parsing text or
/// rendering anything: routing decides with it whether a PDF is scanned (MinerU), and the
/// MinerU provider converts its page-relative boxes to points with these sizes.
pub fn probe_pages(bytes: &[u8], file_name: &str) -> Result<Vec<mineru::ProbePage>, ParseError> {
    let engine = engine()?;
    let doc = engine.pdfium.load_pdf_from_byte_slice(bytes, None).map_err(|e| load_error(e, file_name))?;
    let page_count = doc.pages().len().max(0);
    if page_count as u64 > parse_env::max_pages() {
        return Err(ParseError::new("too_many_pages", format!("{file_name} has {page_count} pages (MNOTE_PARSE_MAX_PAGES)")));
    }
    let mut out = Vec::with_capacity(page_count as usize);
    for index in 0..page_count {
        let page = doc
            .pages()
            .get(index)
            .map_err(|e| ParseError::new("pdf_malformed", format!("page {} cannot be loaded: {e:?}", index + 1)))?;
        let geom = page_geom(&page);
        let glyphs = page.text().map(|t| extract_glyphs(&t, &geom).len()).unwrap_or(0);
        out.push(mineru::ProbePage {
            width: round2(geom.width),
            height: round2(geom.height),
            rotation: geom.rotation,
            needs_ocr: glyphs < OCR_MIN_CHARS && has_images(&page),
        });
    }
    Ok(out)
}

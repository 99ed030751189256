//! Pages without a usable text layer: detecting them, rendering and OCR'ing them.

use pdfium_render::prelude::*;

use super::geometry::Geom;
use super::words::median;
use crate::ingest::{ParseError, ocr};

/// A page with fewer non-space text-layer characters than this, and images, is OCR'd.
pub(super) const OCR_MIN_CHARS: usize = 20;
const OCR_DPI: f64 = 300.0;
/// Longest side of a rendered page: 5000 px is A4/Letter at 300 DPI with room to spare; larger
/// pages (posters, a 30-inch test page) are rendered at a lower DPI instead.
const OCR_MAX_SIDE_PX: f64 = 5000.0;
/// OCR line height (px) above which a page is OCR'd again at a lower resolution, the height
/// aimed for then, and the lowest resolution used.
const OCR_MAX_LINE_PX: f64 = 120.0;
const OCR_TARGET_LINE_PX: f64 = 50.0;
const OCR_MIN_DPI: f64 = 36.0;

/// Images anywhere on the page, including inside form XObjects (a few levels deep).
pub(super) fn has_images(page: &PdfPage) -> bool {
    fn walk(obj: &PdfPageObject, depth: u8) -> bool {
        match obj {
            PdfPageObject::Image(_) => true,
            PdfPageObject::XObjectForm(form) if depth < 4 => {
                (0..form.len()).any(|i| form.get(i).is_ok_and(|o| walk(&o, depth + 1)))
            }
            _ => false,
        }
    }
    page.objects().iter().any(|o| walk(&o, 0))
}

/// Render the page and OCR it; paragraphs with boxes in display points.
///
/// Tesseract reads lines about 30–60 px tall best. When the first pass finds much taller
/// lines (a poster, a scan of large type), the page is rendered again so they come out at
/// [`OCR_TARGET_LINE_PX`] and the better-read pass wins.
pub(super) fn ocr_page(page: &PdfPage, geom: &Geom) -> Result<Vec<ocr::OcrParagraph>, ParseError> {
    let longest = geom.width.max(geom.height).max(1.0);
    let dpi = OCR_DPI.min(OCR_MAX_SIDE_PX * 72.0 / longest);
    let first = ocr_at(page, geom, dpi)?;
    let line_px = median(first.lines.iter().map(|l| l.bbox[3] - l.bbox[1]).collect()) * dpi / 72.0;
    if line_px <= OCR_MAX_LINE_PX {
        return Ok(first.paragraphs());
    }
    let second = ocr_at(page, geom, (dpi * OCR_TARGET_LINE_PX / line_px).max(OCR_MIN_DPI))?;
    let score = |p: &ocr::OcrPage| p.lines.iter().map(|l| l.confidence as f64 * l.text.chars().count() as f64).sum::<f64>();
    Ok(if score(&second) > score(&first) { second } else { first }.paragraphs())
}

/// One render + OCR pass; line and word boxes come back in display points.
fn ocr_at(page: &PdfPage, geom: &Geom, dpi: f64) -> Result<ocr::OcrPage, ParseError> {
    let px_w = ((geom.width * dpi / 72.0).round() as i32).max(1);
    let px_h = ((geom.height * dpi / 72.0).round() as i32).max(1);
    let config = PdfRenderConfig::new().set_target_size(px_w, px_h).render_form_data(true).render_annotations(true);
    let image = page
        .render_with_config(&config)
        .and_then(|bitmap| bitmap.as_image())
        .map_err(|e| ParseError::new("pdf_malformed", format!("rendering the page for OCR failed: {e:?}")))?;
    let (img_w, img_h) = (image.width().max(1) as f64, image.height().max(1) as f64);
    let result = ocr::ocr_image(&image, Some(dpi.round() as u32));
    drop(image);
    let (sx, sy) = (geom.width / img_w, geom.height / img_h);
    let to_points = |b: [f64; 4]| geom.clamp([b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy]);
    let mut result = result?;
    for line in &mut result.lines {
        line.bbox = to_points(line.bbox);
        for word in &mut line.words {
            word.bbox = to_points(word.bbox);
        }
    }
    Ok(result)
}

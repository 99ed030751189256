//! Slides (`slides`: PPTX, and ODP through [`odp`] on the same locator) as located evidence: every block names its slide, its shape (id,
//! name, type and box in slide EMU) and its paragraph in the shape or its table row; speaker
//! notes are blocks of their slide marked `notes`.
//!
//! Rules a viewer can reproduce:
//! - slide order and size from `ppt/presentation.xml` (`p:sldIdLst` through its rels,
//!   `p:sldSz`); slide `n` is page `n` of the source map, its size in points (EMU ÷ 12700),
//!   each block's `bbox` its shape's box in points;
//! - shapes in document order ([`shapes`]); one block per non-empty paragraph (its 1-based
//!   index among the shape's `a:p`), one per table row (the first row's cells name the
//!   columns of the others: `Owner: finance | Amount: 7`), one per picture whose OCR found
//!   text (when Tesseract is installed), located at the picture's box;
//! - the title placeholder's text is the slide's section title (an untitled slide has none);
//! - the notes slide's body placeholder gives the `notes` blocks (no box);
//! - the container is checked before it is inflated (`container_too_large`,
//!   `container_ratio_exceeded`), a DTD in any part is refused (`xml_dtd_refused`), more than
//!   [`MAX_SLIDES`] slides or [`MAX_SHAPES`] shapes on a slide is `slides_too_large`, an
//!   OLE file (password-protected) `encrypted`, anything unreadable `slides_malformed`.

mod assemble;
pub mod legacy;
mod odp;
pub mod package;
pub mod render;
pub mod shapes;
#[cfg(test)]
mod tests;

use std::io::Cursor;

use super::sheet::container::{self, Caps, OLE_MAGIC};
use super::{ParseError, ParseInput, ParseProvider, artifact::ParsedArtifact};

const VERSION: &str = "mnote-slides/1";
/// Slides a deck may have.
pub const MAX_SLIDES: usize = 5_000;
/// Shapes a slide (or its notes) may have.
pub const MAX_SHAPES: usize = 10_000;

pub struct SlidesProvider;

impl ParseProvider for SlidesProvider {
    fn provider_id(&self) -> &'static str {
        "slides"
    }
    fn provider_version(&self) -> String {
        VERSION.to_string()
    }
    fn can_parse(&self, kind: &str) -> bool {
        kind == "slides"
    }
    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
        if let Some(e) = legacy::refused(input.file_name) {
            return Err(e);
        }
        parse_pptx(input.bytes, true)
    }
}

/// Parse a PPTX; `ocr`: read the pictures' text (when Tesseract is installed).
pub fn parse_pptx(bytes: &[u8], ocr: bool) -> Result<ParsedArtifact, ParseError> {
    if bytes.starts_with(&OLE_MAGIC) {
        let msg = "OLE compound file: a password-protected PPTX (or a legacy PowerPoint 97-2003 file)";
        return Err(ParseError::new("encrypted", msg));
    }
    container::check_zip(bytes, &Caps::default()).map_err(|e| match e.code {
        "malformed_spreadsheet" => package::malformed(e.message),
        _ => e,
    })?;
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| package::malformed(format!("not a zip archive: {e}")))?;
    let is_odp = zip.by_name("ppt/presentation.xml").is_err() && zip.by_name("content.xml").is_ok();
    let (deck, slides) = if is_odp {
        odp::read(&mut zip)?
    } else {
        let deck = package::deck(&mut zip, MAX_SLIDES)?;
        let slides = assemble::read_slides(&mut zip, &deck, ocr)?;
        (deck, slides)
    };
    Ok(assemble::artifact(bytes, VERSION, &deck, slides))
}

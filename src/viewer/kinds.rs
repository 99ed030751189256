//! How each kind of document is shown: one [`KindView`] per way of showing (page images,
//! flowing blocks, a sheet grid), chosen by [`for_kind`]. The `view` handler does what every
//! kind shares (access, the citation, notices, find) and hands the body to the kind's view.

use super::parts::{Flow, KindView};
use super::{paged::Paged, sheet::Grid, slides::Slides};
use crate::evidence::SourceKind;

/// The view of a kind.
pub fn for_kind(kind: SourceKind) -> &'static dyn KindView {
    match kind {
        SourceKind::Pdf | SourceKind::Image => &Paged,
        SourceKind::Spreadsheet | SourceKind::Csv => &Grid,
        SourceKind::Markdown | SourceKind::Docx | SourceKind::Text | SourceKind::Html | SourceKind::Email => &Flow,
        SourceKind::Slides => &Slides,
    }
}

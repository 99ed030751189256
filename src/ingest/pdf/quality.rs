//! Block quality: the block's text compared with what pdfium finds inside its box.

use pdfium_render::prelude::*;

use super::geometry::{Geom, Rect};
use crate::ingest::artifact::Quality;

/// One char of pdfium's text page as `FPDFText_GetBoundedText` sees it, kept so the quality
/// check ([`text_quality`]) can select the chars under a block without asking pdfium again.
#[derive(Clone, Copy, Debug)]
pub(super) struct PageChar {
    /// `FPDFText_GetUnicode`.
    pub(super) unicode: u32,
    /// `FPDFText_GetCharBox` (pdfium's `m_CharBox`, user space) as pdfium stores it (`f32`),
    /// normalised like `CFX_FloatRect::Normalize`: `[left, bottom, right, top]`.
    pub(super) bbox: [f32; 4],
}

/// Every char of a page ([`PageChar`]), in pdfium's order; `None` when a box could not be read
/// (the quality check then asks pdfium).
pub(super) type PageChars = Option<Vec<PageChar>>;

/// `exact` when pdfium finds the same characters inside the block's box (whitespace ignored,
/// order ignored: the block is in reading order, pdfium in content-stream order).
///
/// "What pdfium finds" is `FPDFText_GetBoundedText`. With the page's chars at hand
/// ([`PageChar`]) it is computed here instead, the same way (see [`bounded_chars`]), which saves
/// a scan of the whole page inside pdfium and a UTF-16 round trip per block.
pub(super) fn text_quality(
    text: &PdfPageText,
    chars: Option<&[PageChar]>,
    geom: &Geom,
    bbox: Rect,
    block_text: &str,
    size: f64,
) -> Quality {
    // Shrink a little so the neighbours' boxes that merely touch this one are not included.
    let inset = (0.1 * size).min(0.5);
    let r = [bbox[0] + inset, bbox[1] + inset, bbox[2] - inset, bbox[3] - inset];
    if r[0] >= r[2] || r[1] >= r[3] {
        return Quality::Approximate;
    }
    let (l, b, rt, t) = geom.rect_to_user(r);
    let rect = PdfRect::new_from_values(b as f32, l as f32, t as f32, rt as f32);
    let query = [rect.left().value, rect.bottom().value, rect.right().value, rect.top().value];
    let mut u = match chars.and_then(|c| bounded_chars(c, query)) {
        Some(u) => u,
        None => text.inside_rect(rect).chars().filter_map(quality_char).collect(),
    };
    let mut a: Vec<char> = block_text.chars().filter_map(quality_char).collect();
    if a == u {
        return Quality::Exact;
    }
    a.sort_unstable();
    u.sort_unstable();
    if a == u { Quality::Exact } else { Quality::Approximate }
}

/// A char as the quality check compares it: whitespace dropped, pdfium's line-end hyphen
/// (U+0002) read as `-`.
pub(super) fn quality_char(c: char) -> Option<char> {
    (!c.is_whitespace()).then_some(if c == '\u{2}' { '-' } else { c })
}

/// What `FPDFText_GetBoundedText(rect)` returns, as [`quality_char`]s, from the page's chars:
/// pdfium (`CPDF_TextPage::GetTextByRect`) takes, in page order, every char whose tight box
/// overlaps `rect` with a positive area (`CFX_FloatRect::Intersect`, then `IsEmpty`, in
/// `f32`), skips code point 0, and adds only whitespace of its own (spaces, `\r\n`).
///
/// `None` when a selected char lies outside the Basic Multilingual Plane or is a surrogate:
/// pdfium sizes its UTF-16 copy in code points, so such text comes back cut short or
/// undecodable, and only pdfium itself says exactly how.
pub(super) fn bounded_chars(chars: &[PageChar], query: [f32; 4]) -> Option<Vec<char>> {
    // `std::max` / `std::min` as pdfium calls them (the query rect first).
    let max = |a: f32, b: f32| if a < b { b } else { a };
    let min = |a: f32, b: f32| if b < a { b } else { a };
    let mut out = Vec::new();
    for c in chars {
        let (l, b) = (max(query[0], c.bbox[0]), max(query[1], c.bbox[1]));
        let (r, t) = (min(query[2], c.bbox[2]), min(query[3], c.bbox[3]));
        // `Intersect` resets a negative intersection to zeros, which `IsEmpty` rejects like this.
        if l >= r || b >= t || c.unicode == 0 {
            continue;
        }
        let ch = char::from_u32(c.unicode).filter(|_| c.unicode <= 0xFFFF)?;
        out.extend(quality_char(ch));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_chars_follow_pdfium_rect_rules() {
        let c = |unicode: u32, bbox: [f32; 4]| PageChar { unicode, bbox };
        let chars = [
            c('a' as u32, [0.0, 0.0, 10.0, 10.0]),
            c('b' as u32, [10.0, 0.0, 20.0, 10.0]), // touches the query's right edge only
            c(' ' as u32, [2.0, 2.0, 4.0, 4.0]),
            c(0, [2.0, 2.0, 4.0, 4.0]),
            c(2, [5.0, 5.0, 6.0, 6.0]),
            c('c' as u32, [5.0, 5.0, 5.0, 6.0]), // no width
        ];
        assert_eq!(bounded_chars(&chars, [1.0, 1.0, 10.0, 10.0]), Some(vec!['a', '-']));
        let wide = [c(0x2_0000, [0.0, 0.0, 10.0, 10.0])];
        assert_eq!(bounded_chars(&wide, [1.0, 1.0, 9.0, 9.0]), None, "outside the BMP: ask pdfium");
        assert_eq!(bounded_chars(&wide, [20.0, 20.0, 30.0, 30.0]), Some(vec![]));
    }
}

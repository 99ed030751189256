//! What helps a reader find their way in the viewer besides the highlight: the outline (from
//! the artifact's section tree), find in document (the artifact's block text), and the
//! selectable text layer laid over a page image (each block's text in its box, transparent,
//! so the browser's selection and copy give the cited sentence).

use crate::ingest::artifact::{Block, ParsedArtifact};

use super::escape;

/// The smallest document that gets an outline: this many sections, or this many pages.
const OUTLINE_MIN_SECTIONS: usize = 3;
const OUTLINE_MIN_PAGES: u32 = 4;
/// At most this many find results are listed.
pub const FIND_LIMIT: usize = 50;

/// One outline entry.
#[derive(Debug, Clone, PartialEq)]
pub struct OutlineItem {
    pub title: String,
    /// 1 = top level (indentation).
    pub level: u8,
    /// The page a paged document opens at for this section.
    pub page: Option<u32>,
    /// The section's first block (a flowing document jumps to it).
    pub block_id: Option<String>,
}

/// The outline of a long document: its sections in order, or nothing for a short one.
pub fn outline(art: &ParsedArtifact, page_count: u32) -> Vec<OutlineItem> {
    let sections = &art.source_map.sections;
    let long = sections.len() >= OUTLINE_MIN_SECTIONS || (page_count >= OUTLINE_MIN_PAGES && sections.len() >= 2);
    if !long {
        return Vec::new();
    }
    sections
        .iter()
        .filter(|s| !s.title.trim().is_empty())
        .map(|s| OutlineItem {
            title: s.title.trim().chars().take(120).collect(),
            level: s.level.clamp(1, 6),
            page: s.page_start,
            block_id: s.block_ids.first().cloned(),
        })
        .collect()
}

/// One block that contains the searched text.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub block_id: String,
    pub page: Option<u32>,
    /// Escaped snippet with the match in `<mark>`.
    pub snippet_html: String,
}

/// Blocks whose text contains `needle` (case-insensitive), in document order, at most
/// [`FIND_LIMIT`]; and the total count.
pub fn find(art: &ParsedArtifact, needle: &str) -> (Vec<Found>, usize) {
    let needle = needle.trim();
    if needle.is_empty() {
        return (Vec::new(), 0);
    }
    let lower_needle = needle.to_lowercase();
    let mut out = Vec::new();
    let mut total = 0;
    for b in ordered_blocks(art) {
        let Some(html) = snippet(&b.text, &lower_needle) else { continue };
        total += 1;
        if out.len() < FIND_LIMIT {
            out.push(Found { block_id: b.id.clone(), page: b.page, snippet_html: html });
        }
    }
    (out, total)
}

fn ordered_blocks(art: &ParsedArtifact) -> Vec<&Block> {
    let mut blocks: Vec<&Block> = art.all_blocks().collect();
    blocks.sort_by_key(|b| (b.page.unwrap_or(0), b.char_range[0]));
    blocks
}

/// Up to ~60 characters either side of the first match, escaped, the match marked.
fn snippet(text: &str, lower_needle: &str) -> Option<String> {
    // Match on a char-by-char lowercase copy so positions map back to `text` by char index.
    let chars: Vec<char> = text.chars().collect();
    let lower: Vec<String> = chars.iter().map(|c| c.to_lowercase().collect()).collect();
    let needle: Vec<char> = lower_needle.chars().collect();
    let joined: Vec<char> = lower.iter().flat_map(|s| s.chars()).collect();
    if joined.len() != chars.len() {
        // A char whose lowercase is longer (rare): fall back to a plain contains, no position.
        return text.to_lowercase().contains(lower_needle).then(|| escape(&chars.iter().take(140).collect::<String>()));
    }
    let start = joined.windows(needle.len()).position(|w| w == needle.as_slice())?;
    let end = start + needle.len();
    let from = start.saturating_sub(60);
    let to = (end + 60).min(chars.len());
    let s = |a: usize, b: usize| chars[a..b].iter().collect::<String>();
    Some(format!(
        "{}{}<mark>{}</mark>{}{}",
        if from > 0 { "…" } else { "" },
        escape(&s(from, start)),
        escape(&s(start, end)),
        escape(&s(end, to)),
        if to < chars.len() { "…" } else { "" }
    ))
}

/// One block's text over the page image.
#[derive(Debug, Clone, PartialEq)]
pub struct TextSpan {
    pub block_id: String,
    pub text: String,
    /// Position (percent of the page) and font size (percent of the page width, `cqw`).
    pub style: String,
    /// A find match on this page.
    pub found: bool,
}

/// Width of a character in ems, roughly: CJK and full-width forms are square, Latin about half.
fn char_em(c: char) -> f64 {
    match c as u32 {
        0x1100..=0x115F | 0x2E80..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF | 0xFE30..=0xFE4F | 0xFF00..=0xFF60 => 1.0,
        _ if c.is_whitespace() => 0.28,
        _ if c.is_ascii_uppercase() => 0.62,
        _ => 0.5,
    }
}

/// The font size (in page units) at which `text` wrapped at line height 1.2 fills a `w`×`h` box.
pub fn fit_font_size(text: &str, w: f64, h: f64) -> f64 {
    let ems: f64 = text.chars().map(char_em).sum::<f64>().max(0.5);
    let (w, h) = (w.max(1.0), h.max(1.0));
    // lines = h / (1.2 f); ems * f / lines <= w  =>  f = sqrt(w h / (1.2 ems))
    let f = (w * h / (1.2 * ems)).sqrt();
    f.min(h / 1.2).max(1.0)
}

/// The text layer of one page: every block with a box and text, in reading order.
pub fn text_layer(blocks: &[Block], page_w: f64, page_h: f64, found: &[String]) -> Vec<TextSpan> {
    blocks
        .iter()
        .filter(|b| !b.text.trim().is_empty())
        .filter_map(|b| {
            let bb = b.bbox?;
            let f = fit_font_size(&b.text, bb[2] - bb[0], bb[3] - bb[1]);
            let size = f / page_w.max(1e-6) * 100.0;
            Some(TextSpan {
                block_id: b.id.clone(),
                text: b.text.clone(),
                style: format!("{};font-size:{size:.4}cqw", super::percent_style(bb, page_w, page_h)),
                found: found.iter().any(|id| id == &b.id),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_mark_the_match_case_insensitively_and_escape() {
        let s = snippet("The <Thread> scope ends here", "thread").unwrap();
        assert_eq!(s, "The &lt;<mark>Thread</mark>&gt; scope ends here");
        assert_eq!(snippet("线程作用域的基本用法", "作用域").unwrap(), "线程<mark>作用域</mark>的基本用法");
        assert!(snippet("nothing", "zzz").is_none());
        let long = format!("{}needle{}", "a".repeat(100), "b".repeat(100));
        let s = snippet(&long, "needle").unwrap();
        assert!(s.starts_with('…') && s.ends_with('…') && s.contains("<mark>needle</mark>"));
    }

    #[test]
    fn font_size_fills_the_box() {
        // One line of 10 Latin chars (5 em) in a 50×12 box: about 10 units, not taller than the box.
        let f = fit_font_size("abcdefghij", 50.0, 12.0);
        assert!((8.0..=10.1).contains(&f), "{f}");
        // Two CJK lines of 5 chars in a 50×24 box: about 10.
        let f = fit_font_size("一二三四五六七八九十", 50.0, 24.0);
        assert!((8.0..=10.1).contains(&f), "{f}");
    }
}

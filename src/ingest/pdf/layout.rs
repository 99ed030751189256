//! Lines and paragraphs: XY-cut leaves → lines → paragraphs (`TextPara`) of one page.

use super::geometry::{Dir, Geom, Rect, from_frame, overlap, to_frame, union};
use super::words::{Glyph, Space, Word, build_words, em, median, xy_cut};
use crate::ingest::ocr;

#[derive(Clone, Debug)]
struct Line {
    text: String,
    bbox: Rect,
    size: f64,
    /// Median bottom of its words' loose boxes: a baseline proxy that one larger glyph does not
    /// move.
    base: f64,
    /// Smallest and largest word font size (small-caps labels sit in body lines).
    sizes: (f64, f64),
    /// Every word is bold (a run-in heading line).
    bold: bool,
}

/// A leaf of the XY-cut → its lines (a leaf is normally one line; overlapping lines are split
/// by core overlap), words left to right.
fn leaf_lines(words: &[Word], leaf: &[usize]) -> Vec<Line> {
    let mut idx = leaf.to_vec();
    idx.sort_by(|&a, &b| words[a].core().0.total_cmp(&words[b].core().0));
    let mut clusters: Vec<(f64, Vec<usize>)> = Vec::new();
    for i in idx {
        let (y0, y1) = words[i].core();
        match clusters.last_mut() {
            Some((end, members)) if y0 <= *end => {
                *end = end.max(y1);
                members.push(i);
            }
            _ => clusters.push((y1, vec![i])),
        }
    }
    clusters
        .into_iter()
        .map(|(_, mut members)| {
            members.sort_by(|&a, &b| words[a].bbox[0].total_cmp(&words[b].bbox[0]));
            // Minimal bidi for a left-to-right line: runs of right-to-left words read from
            // the right.
            let mut start = 0;
            while start < members.len() {
                let mut end = start;
                while end < members.len() && words[members[end]].is_rtl() {
                    end += 1;
                }
                members[start..end].reverse();
                start = end + 1;
            }
            let mut text = String::new();
            let mut bbox = words[members[0]].bbox;
            let mut prev: Option<&Word> = None;
            let mut sizes = Vec::new();
            for &i in &members {
                let w = &words[i];
                if let Some(p) = prev
                    && word_space(p, w)
                {
                    text.push(' ');
                }
                text.push_str(&w.text);
                bbox = union(bbox, w.bbox);
                sizes.extend(std::iter::repeat_n(w.size, w.text.chars().count()));
                prev = Some(w);
            }
            let base = median(members.iter().map(|&i| words[i].bbox[3]).collect());
            let word_sizes = members.iter().map(|&i| words[i].size);
            let range = (word_sizes.clone().fold(f64::INFINITY, f64::min), word_sizes.fold(0.0, f64::max));
            let bold = members.iter().all(|&i| words[i].bold || !words[i].text.chars().any(char::is_alphanumeric));
            Line { text, bbox, size: median(sizes), base, sizes: range, bold }
        })
        .collect()
}

/// A space between two words of a line: CJK never gets one unless the PDF has a space char;
/// other scripts get one for any whitespace or a visible gap.
fn word_space(prev: &Word, next: &Word) -> bool {
    if !ocr::needs_space(prev.last(), next.first()) {
        return next.space_before == Space::Hard;
    }
    let gap = (next.bbox[0] - prev.bbox[2]).max(prev.bbox[0] - next.bbox[2]);
    next.space_before != Space::None || gap > 0.2 * prev.size.min(next.size)
}

/// Join the lines of a paragraph. A line ending in a hyphen, dash or slash right after a letter
/// (`large-`, `FAA–2020–`, `https://`) continues without a space, so words and URLs stay whole
/// and the text still has every character the page shows.
fn join_lines(lines: &[Line]) -> String {
    let mut text = String::new();
    for line in lines {
        let mut tail = text.chars().rev();
        let (last, before) = (tail.next(), tail.next());
        let glued = matches!(last, Some('-' | '‐' | '–' | '/')) && before.is_some_and(|c| c.is_alphanumeric() || c == '/');
        if glued {
            text.push_str(&line.text);
        } else {
            ocr::push_joined(&mut text, &line.text);
        }
    }
    text
}

/// Bullet glyphs, including U+F0B7, the Symbol-font bullet Word documents carry.
fn starts_with_bullet(text: &str) -> bool {
    matches!(text.chars().next(), Some('•' | '●' | '▪' | '◦' | '■' | '□' | '➢' | '►' | '○' | '✓' | '\u{F0B7}'))
}

/// `1.`, `2)`, `(a)`, `a.`, `iv)` or a bullet: a list item whose continuation lines may hang.
fn starts_with_list_marker(text: &str) -> bool {
    if starts_with_bullet(text) {
        return true;
    }
    let first = text.split_whitespace().next().unwrap_or("");
    let inner = first.trim_start_matches('(').trim_end_matches(['.', ')']);
    first.len() > inner.len()
        && !inner.is_empty()
        && inner.len() <= 3
        && (inner.chars().all(|c| c.is_ascii_digit()) || inner.chars().all(|c| c.is_ascii_lowercase()))
}

fn ends_sentence(text: &str) -> bool {
    matches!(text.chars().next_back(), Some('.' | ':' | '?' | '!' | ';' | '。' | '：' | '？' | '！' | '；'))
}

struct ParaBuild {
    lines: Vec<Line>,
    bbox: Rect,
    size: f64,
    /// Left edge continuation lines are compared with (indent detection).
    ref_x0: f64,
    /// Baseline distance of the first two lines.
    pitch: Option<f64>,
    list_item: bool,
}

impl ParaBuild {
    fn new(line: Line) -> Self {
        ParaBuild {
            bbox: line.bbox,
            size: line.size,
            ref_x0: line.bbox[0],
            pitch: None,
            list_item: starts_with_list_marker(&line.text),
            lines: vec![line],
        }
    }

    fn accepts(&self, line: &Line, typical_pitch: Option<f64>) -> bool {
        let Some(last) = self.lines.last() else { return false };
        let size = self.size.max(line.size);
        // Same font size, or at least one size in common (`DATES: The FAA…` mixes small caps
        // and body text).
        let shares_size = line.sizes.0 <= last.sizes.1 * 1.05 && last.sizes.0 <= line.sizes.1 * 1.05;
        if size / self.size.min(line.size).max(0.1) > 1.15 && !shares_size {
            return false;
        }
        let dy = line.base - last.base;
        // Generated PDFs keep the line pitch of a paragraph exact; a few tenths of a point
        // more already separate paragraphs (the Federal Register adds 1.3 pt).
        let limit = match self.pitch {
            Some(p) => p * 1.08 + 0.2,
            None => (1.5 * size).max(typical_pitch.map_or(0.0, |p| p * 1.15)),
        };
        if dy < 0.5 * size || dy > limit || line.bold != last.bold {
            return false;
        }
        let width = |r: &Rect| r[2] - r[0];
        let shared = overlap(line.bbox[0], line.bbox[2], self.bbox[0], self.bbox[2]);
        if shared < 0.5 * width(&line.bbox).min(width(&self.bbox)) {
            return false;
        }
        if starts_with_bullet(&line.text) {
            return false;
        }
        let hanging = self.lines.len() == 1 && self.list_item;
        if line.bbox[0] > self.ref_x0 + em::INDENT * size && !hanging {
            return false;
        }
        let short = last.bbox[2] < self.bbox[2] - (0.25 * width(&self.bbox)).max(2.0 * size);
        !(self.lines.len() >= 2 && short && ends_sentence(&last.text))
    }

    fn push(&mut self, line: Line) {
        if let Some(last) = self.lines.last() {
            self.pitch.get_or_insert(line.base - last.base);
        }
        self.ref_x0 = if self.lines.len() == 1 && self.list_item { line.bbox[0] } else { self.ref_x0.min(line.bbox[0]) };
        self.bbox = union(self.bbox, line.bbox);
        self.lines.push(line);
    }
}

/// Most common baseline distance between consecutive lines of the same column, for judging
/// the first gap of a paragraph (double-spaced documents).
fn typical_pitch(lines: &[Line]) -> Option<f64> {
    let pitches: Vec<f64> = lines
        .windows(2)
        .filter_map(|w| {
            let (a, b) = (&w[0], &w[1]);
            let dy = b.base - a.base;
            let size = a.size.max(b.size);
            let same_column = overlap(a.bbox[0], a.bbox[2], b.bbox[0], b.bbox[2]) > 0.0;
            (same_column && (a.size - b.size).abs() < 0.1 * size && dy > 0.8 * size && dy < 3.0 * size).then_some(dy)
        })
        .collect();
    (!pitches.is_empty()).then(|| median(pitches))
}

/// A paragraph of the text layer, ready to become a block.
#[derive(Clone, Debug)]
pub(super) struct TextPara {
    pub(super) text: String,
    /// Display coordinates.
    pub(super) bbox: Rect,
    pub(super) size: f64,
    pub(super) lines: usize,
    /// Mean width of the lines but the last, as a share of the paragraph's width: prose is
    /// close to 1, lists and diagram labels are ragged.
    pub(super) fill: f64,
    pub(super) upright: bool,
}

/// Lay out one page's glyphs into paragraphs in reading order.
pub(super) fn layout(glyphs: Vec<Glyph>, geom: &Geom) -> Vec<TextPara> {
    let mut groups: Vec<(Dir, Vec<Glyph>)> = Vec::new();
    for dir in 0..4u8 {
        let mut g: Vec<Glyph> = glyphs.iter().filter(|g| g.dir == dir).cloned().collect();
        if g.is_empty() {
            continue;
        }
        for glyph in &mut g {
            glyph.bbox = to_frame(dir, glyph.bbox, geom.width, geom.height);
        }
        groups.push((dir, g));
    }
    // Main text direction first, then sideways text (axis labels, margin notes).
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));

    let mut out = Vec::new();
    for (dir, group) in groups {
        let words = build_words(&group);
        let lines: Vec<Line> = xy_cut(&words).iter().flat_map(|leaf| leaf_lines(&words, leaf)).collect();
        let pitch = typical_pitch(&lines);
        let mut paras: Vec<ParaBuild> = Vec::new();
        for line in lines {
            match paras.last_mut() {
                Some(p) if p.accepts(&line, pitch) => p.push(line),
                _ => paras.push(ParaBuild::new(line)),
            }
        }
        for p in paras {
            let text = join_lines(&p.lines);
            if text.trim().is_empty() {
                continue;
            }
            let sizes: Vec<f64> = p.lines.iter().map(|l| l.size).collect();
            let width = (p.bbox[2] - p.bbox[0]).max(0.1);
            let body_lines = p.lines.split_last().map_or(&[][..], |(_, rest)| rest);
            let fill = if body_lines.is_empty() {
                0.0
            } else {
                body_lines.iter().map(|l| (l.bbox[2] - l.bbox[0]) / width).sum::<f64>() / body_lines.len() as f64
            };
            out.push(TextPara {
                text,
                bbox: geom.clamp(from_frame(dir, p.bbox, geom.width, geom.height)),
                size: median(sizes),
                lines: p.lines.len(),
                fill,
                upright: dir == 0,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::pdf::words::tests::word;

    #[test]
    fn words_and_lines_are_joined_by_script() {
        let cjk = [word("线程", [0.0, 0.0, 20.0, 10.0], Space::Soft), word("作用域", [21.0, 0.0, 50.0, 10.0], Space::None)];
        assert!(!word_space(&cjk[0], &cjk[1]));
        assert!(word_space(&cjk[0], &word("x", [21.0, 0.0, 30.0, 10.0], Space::Soft)));
        let lines = |texts: &[&str]| -> Vec<Line> {
            texts
                .iter()
                .map(|t| Line { text: t.to_string(), bbox: [0.0; 4], size: 10.0, base: 0.0, sizes: (10.0, 10.0), bold: false })
                .collect()
        };
        assert_eq!(join_lines(&lines(&["a large-", "scale set"])), "a large-scale set");
        assert_eq!(
            join_lines(&lines(&["Docket FAA–2020–", "0686; see https://", "www.x.gov"])),
            "Docket FAA–2020–0686; see https://www.x.gov"
        );
        assert_eq!(join_lines(&lines(&["线程作用域", "允许借用"])), "线程作用域允许借用");
        assert_eq!(join_lines(&lines(&["ends –", "here"])), "ends – here");
        assert!(
            starts_with_list_marker("1. First") && starts_with_list_marker("(a) item") && !starts_with_list_marker("2020. The")
        );
    }
}

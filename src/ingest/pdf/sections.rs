//! Sections: from the outline when it has destinations, else from heading font sizes.

use std::collections::HashMap;

use pdfium_render::prelude::*;

use super::BlockInfo;
use super::geometry::Geom;
use crate::ingest::artifact::{Block, BlockType, Page, Section, SectionTree};

/// Heading level (1 = largest) of every block, `None` for body text: short text-layer
/// paragraphs at least 20 % larger than the body text, not running headers or footers
/// ([`furniture`]); levels rank the distinct heading sizes (half-point steps) of the whole
/// document.
pub(super) fn heading_levels(pages: &[Page], infos: &[BlockInfo]) -> Vec<Option<u8>> {
    let furniture = furniture(pages);
    let mut is_furniture = furniture.iter();
    let blocks = pages.iter().flat_map(|p| p.blocks.iter());
    let candidate: Vec<Option<i64>> = blocks
        .zip(infos)
        .map(|(b, info)| {
            let running = is_furniture.next().copied().unwrap_or(false);
            let size = info.size?;
            let chars = b.text.chars().count();
            let is_heading = info.body > 0.0
                && !running
                && size >= 1.2 * info.body
                && info.lines <= 3
                && chars <= 200
                && b.text.chars().any(char::is_alphabetic);
            is_heading.then(|| (size * 2.0).round() as i64)
        })
        .collect();
    let mut sizes: Vec<i64> = candidate.iter().flatten().copied().collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    candidate.iter().map(|c| c.and_then(|s| sizes.iter().position(|&x| x == s)).map(|rank| (rank + 1).min(6) as u8)).collect()
}

/// Running headers and footers (page numbers aside), per block in document order: text that
/// repeats on three or more pages anywhere, or on two or more pages in the top or bottom tenth
/// of the page (a short document's running header is still no section, nor a breadcrumb).
pub(super) fn furniture(pages: &[Page]) -> Vec<bool> {
    let key = |t: &str| -> String { normalised(t).chars().filter(|c| !c.is_ascii_digit()).collect() };
    let in_margin = |p: &Page, b: &Block| {
        b.bbox.is_some_and(|[_, y0, _, y1]| p.height > 0.0 && (y1 <= 0.1 * p.height || y0 >= 0.9 * p.height))
    };
    let mut seen_on: HashMap<String, Vec<u32>> = HashMap::new();
    let mut margin_on: HashMap<String, Vec<u32>> = HashMap::new();
    for p in pages {
        for b in &p.blocks {
            let k = key(&b.text);
            let on = seen_on.entry(k.clone()).or_default();
            if on.last() != Some(&p.page) {
                on.push(p.page);
            }
            if in_margin(p, b) {
                let on = margin_on.entry(k).or_default();
                if on.last() != Some(&p.page) {
                    on.push(p.page);
                }
            }
        }
    }
    pages
        .iter()
        .flat_map(|p| p.blocks.iter().map(move |b| (p, b)))
        .map(|(p, b)| {
            let k = key(&b.text);
            !k.is_empty()
                && (seen_on.get(&k).is_some_and(|on| on.len() >= 3)
                    || in_margin(p, b) && margin_on.get(&k).is_some_and(|on| on.len() >= 2))
        })
        .collect()
}

/// Sections opened by heading blocks; every block belongs to the innermost open section.
pub(super) fn sections_from_headings(pages: &mut [Page], levels: &[Option<u8>]) -> Vec<Section> {
    let mut tree = SectionTree::default();
    let blocks = pages.iter_mut().flat_map(|p| p.blocks.iter_mut());
    for (block, level) in blocks.zip(levels) {
        let page = block.page;
        if let Some(level) = *level {
            let title = block.text.split_whitespace().collect::<Vec<_>>().join(" ");
            let section = tree.open(title, level, |_| {});
            section.page_start = page;
            section.page_end = page;
        }
        block.section_id = tree.add_block(&block.id);
        // The page range covers the whole subtree.
        tree.for_each_open(|s| s.page_end = s.page_end.max(page));
    }
    tree.sections
}

#[derive(Clone, Debug)]
pub(super) struct OutlineEntry {
    title: String,
    level: u8,
    parent: Option<usize>,
    /// 0-based destination page.
    pub(super) page: Option<usize>,
    /// Destination top in display coordinates, when the destination has one.
    y: Option<f64>,
}

/// The outline tree flattened depth-first. Bounded, because outlines can be cyclic.
pub(super) fn read_outline(doc: &PdfDocument, geoms: &[Geom]) -> Vec<OutlineEntry> {
    const MAX_ENTRIES: usize = 10_000;
    const MAX_DEPTH: u8 = 16;
    let mut out = Vec::new();
    // (bookmark, level, parent)
    let mut stack: Vec<(PdfBookmark, u8, Option<usize>)> = Vec::new();
    if let Some(root) = doc.bookmarks().root() {
        stack.push((root, 1, None));
    }
    // A `/Next` or `/First` pointing back at an earlier item would repeat it (and everything
    // after it) up to MAX_ENTRIES times: each bookmark is read once.
    let mut seen: std::collections::HashSet<PdfBookmark> = std::collections::HashSet::new();
    while let Some((bookmark, level, parent)) = stack.pop() {
        if out.len() >= MAX_ENTRIES {
            break;
        }
        if !seen.insert(bookmark.clone()) {
            continue;
        }
        // Siblings after this one, children first (depth-first order).
        if let Some(next) = bookmark.next_sibling() {
            stack.push((next, level, parent));
        }
        let title = bookmark.title().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
        if title.is_empty() {
            continue;
        }
        // pdfium falls back to a GoTo action's destination by itself.
        let dest = bookmark.destination();
        let page =
            dest.as_ref().and_then(|d| d.page_index().ok()).and_then(|p| usize::try_from(p).ok()).filter(|&p| p < geoms.len());
        // The destination's top is a user-space y: a vertical position on the displayed page
        // only when the page is not turned sideways.
        let y = page.filter(|&p| geoms[p].rotation % 180 == 0).and_then(|p| {
            let top = match dest.and_then(|d| d.view_settings().ok())? {
                PdfDestinationViewSettings::SpecificCoordinatesAndZoom(_, Some(y), _)
                | PdfDestinationViewSettings::FitPageHorizontallyToWindow(Some(y))
                | PdfDestinationViewSettings::FitBoundsHorizontallyToWindow(Some(y)) => y.value as f64,
                _ => return None,
            };
            Some(geoms[p].to_display(geoms[p].left, top).1)
        });
        let index = out.len();
        out.push(OutlineEntry { title, level, parent, page, y });
        if level < MAX_DEPTH
            && let Some(child) = bookmark.first_child()
        {
            stack.push((child, level + 1, Some(index)));
        }
    }
    out
}

fn normalised(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).flat_map(char::to_lowercase).collect()
}

/// Sections from the outline. Each entry starts at the block on its destination page whose
/// text starts with its title, else the first block at or below the destination's top, else
/// the page's first block; a block belongs to the entry that started last before it.
pub(super) fn sections_from_outline(pages: &mut [Page], outline: &[OutlineEntry]) -> Vec<Section> {
    let flat: Vec<&Block> = pages.iter().flat_map(|p| &p.blocks).collect();
    // Global index of each page's first block (blocks are in page order), plus the end.
    let mut page_first: Vec<usize> = Vec::with_capacity(pages.len() + 1);
    let mut n = 0;
    for p in pages.iter() {
        page_first.push(n);
        n += p.blocks.len();
    }
    page_first.push(n);
    let starts: Vec<Option<usize>> = outline
        .iter()
        .map(|e| {
            let page = e.page?;
            let on_page = page_first[page]..page_first[page + 1];
            let title = normalised(&e.title);
            let by_title = on_page.clone().find(|&g| {
                let text = normalised(&flat[g].text);
                !title.is_empty() && (text.starts_with(&title) || (text.chars().count() >= 4 && title.starts_with(&text)))
            });
            let top = |g: usize| flat[g].bbox.map_or(f64::MAX, |r| r[1]);
            let by_y =
                e.y.and_then(|y| on_page.clone().filter(|&g| top(g) >= y - 2.0).min_by(|&a, &b| top(a).total_cmp(&top(b))));
            // A destination page without blocks (a figure) starts at the next block.
            Some(by_title.or(by_y).unwrap_or(on_page.start))
        })
        .collect();

    let mut sections: Vec<Section> = Vec::with_capacity(outline.len());
    for (i, e) in outline.iter().enumerate() {
        let parent = e.parent.map(|p| &sections[p]);
        let mut path: Vec<String> = parent.map(|p: &Section| p.path.clone()).unwrap_or_default();
        path.push(e.title.clone());
        let page = e.page.map(|p| p as u32 + 1);
        sections.push(Section {
            id: format!("sec_{}", i + 1),
            title: e.title.clone(),
            path,
            level: e.level,
            parent_id: parent.map(|p| p.id.clone()),
            page_start: page,
            page_end: page,
            line_range: None,
            block_ids: Vec::new(),
        });
    }
    // Innermost section per block: the latest start at or before it; on a tie the later
    // outline entry (a child starting with its parent).
    let mut by_start: Vec<(usize, usize)> = starts.iter().enumerate().filter_map(|(s, st)| st.map(|st| (st, s))).collect();
    by_start.sort_unstable();
    let titled: std::collections::HashSet<usize> = by_start
        .iter()
        .filter(|&&(g, s)| g < flat.len() && normalised(&flat[g].text).starts_with(&normalised(&outline[s].title)))
        .map(|&(g, _)| g)
        .collect();
    drop(flat);
    let (mut next, mut current, mut g) = (0, None, 0);
    for page in pages.iter_mut() {
        for block in &mut page.blocks {
            while next < by_start.len() && by_start[next].0 <= g {
                current = Some(by_start[next].1);
                next += 1;
            }
            if titled.contains(&g) {
                block.block_type = BlockType::Heading;
            }
            if let Some(s) = current {
                block.section_id = Some(sections[s].id.clone());
                sections[s].block_ids.push(block.id.clone());
                let mut up = Some(s);
                while let Some(c) = up {
                    sections[c].page_end = sections[c].page_end.max(Some(page.page));
                    up = outline[c].parent;
                }
            }
            g += 1;
        }
    }
    sections
}

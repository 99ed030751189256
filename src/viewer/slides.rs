//! Slides in the viewer: the slide drawn as an image (the deck converted to PDF by
//! LibreOffice, its page rendered by pdfium) with the cited shape's box over it, or — without
//! LibreOffice — the slide's text laid out where its shapes sit, the cited shape highlighted
//! and a notice saying so; the speaker notes under the slide and a strip of every slide.

use std::collections::HashSet;

use futures_util::future::BoxFuture;

use super::parts::{FoundLink, KindView, OutlineLink, SlideBox, SlidePara, SlideTab, SlidesView, ViewBody, ViewInput};
use super::{Target, aids};
use crate::error::AppResult;
use crate::ingest::artifact::{Block, Page};
use crate::ingest::slides::render;

pub struct Slides;

impl KindView for Slides {
    fn render<'a>(&'a self, i: ViewInput<'a>) -> BoxFuture<'a, AppResult<ViewBody>> {
        Box::pin(async move { Ok(slides_body(&i)) })
    }
}

fn slides_body(i: &ViewInput<'_>) -> ViewBody {
    let pages = &i.art.source_map.pages;
    let count = pages.len().max(1) as u32;
    let wanted = i.hints.page.or(i.target.and_then(|t| t.page)).unwrap_or(1).clamp(1, count);
    let page = pages.iter().find(|p| p.page == wanted);
    let mut body = ViewBody::default();
    if i.target.and_then(|t| t.page).is_some_and(|tp| tp != wanted) {
        body.cited_url = i.carry.evidence.as_ref().map(|_| format!("{}#hl", i.carry.url(None, None)));
    }
    let target = i.target.filter(|t| t.page == Some(wanted));
    let found: HashSet<&str> = i.found.iter().map(|f| f.block_id.as_str()).collect();
    let hash = i.source.indexed_hash.clone().unwrap_or_else(|| i.source.sha256.clone());
    let v = hash.trim_start_matches("sha256:").get(..12).unwrap_or("0").to_string();
    let rendered = i.state.config.soffice.is_some() && i.file.is_some() && page.is_some();
    let (w, h) = page.map(|p| (p.width, p.height)).unwrap_or((720.0, 405.0));
    let (boxes, loose) = page.map(|p| shape_boxes(p, target, &found)).unwrap_or_default();
    let notes = page.map(|p| notes_of(p, target, &found)).unwrap_or_default();
    body.doc_hl = i.target.is_some_and(|t| t.block_id.is_none());
    body.slides = Some(SlidesView {
        slide: wanted,
        slide_count: count,
        label: i.ctx.t("viewer.slide_of").replace("{n}", &wanted.to_string()).replace("{total}", &count.to_string()),
        img_src: rendered.then(|| format!("/sources/{}/pages/{wanted}.png?scale={}&v={v}", i.source.id, render::SCALE)),
        aspect: format!("{} / {}", super::num(w), super::num(h)),
        boxes,
        loose,
        notes,
        prev_url: (wanted > 1).then(|| i.carry.url(Some(wanted - 1), None)),
        next_url: (wanted < count).then(|| i.carry.url(Some(wanted + 1), None)),
        strip: strip(i, count, wanted, rendered.then_some(v.as_str())),
    });
    body.outline = aids::outline(i.art, count)
        .into_iter()
        .filter_map(|o| Some(OutlineLink { title: o.title, level: o.level, href: i.carry.url(Some(o.page?), None) }))
        .collect();
    body.found = i
        .found
        .iter()
        .map(|f| FoundLink {
            snippet_html: f.snippet_html.clone(),
            page: f.page,
            href: format!("{}#b-{}", i.carry.url(f.page, Some(i.find)), f.block_id),
        })
        .collect();
    body
}

/// Every slide as a link, titled by its title placeholder, drawn small when the deck is drawn
/// (`version`: the cache-busting part of the page image's address).
fn strip(i: &ViewInput<'_>, count: u32, current: u32, version: Option<&str>) -> Vec<SlideTab> {
    let sections = &i.art.source_map.sections;
    (1..=count)
        .map(|n| SlideTab {
            number: n,
            title: sections.iter().find(|s| s.page_start == Some(n)).map(|s| s.title.clone()).unwrap_or_default(),
            href: i.carry.url(Some(n), None),
            current: n == current,
            thumb_src: version.map(|v| format!("/sources/{}/pages/{n}.png?scale={}&v={v}", i.source.id, render::THUMB_SCALE)),
        })
        .collect()
}

fn hl_class(b: &Block, target: Option<&Target>) -> Option<&'static str> {
    let t = target?;
    (t.block_id.as_deref() == Some(b.id.as_str())).then_some(if t.exact { "hl" } else { "hl hl-approx" })
}

/// The slide's shapes (not its notes) as boxes, their blocks in order; blocks without a box
/// are listed apart.
fn shape_boxes(p: &Page, target: Option<&Target>, found: &HashSet<&str>) -> (Vec<SlideBox>, Vec<SlidePara>) {
    let (mut boxes, mut loose) = (Vec::<SlideBox>::new(), Vec::new());
    for b in &p.blocks {
        let Some(place) = b.slide.as_ref().filter(|s| !s.notes) else { continue };
        let hl = hl_class(b, target);
        let Some(bb) = b.bbox else {
            loose.push(para(b, hl, found));
            continue;
        };
        let para = para(b, hl, found);
        match boxes.last_mut().filter(|x| x.shape_id == place.shape_id) {
            Some(x) => x.paras.push(para),
            None => boxes.push(SlideBox {
                shape_id: place.shape_id,
                shape_type: place.shape_type.as_str(),
                style: match place.turn.and_then(|t| t.css()) {
                    Some(t) => format!("{};transform:{t}", super::percent_style(bb, p.width, p.height)),
                    None => super::percent_style(bb, p.width, p.height),
                },
                bbox: bb.iter().map(|v| super::num(*v)).collect::<Vec<_>>().join(","),
                hl: None,
                paras: vec![para],
            }),
        }
    }
    for x in boxes.iter_mut() {
        x.hl = x.paras.iter().find_map(|p| p.hl);
    }
    (boxes, loose)
}

fn para(b: &Block, hl: Option<&'static str>, found: &HashSet<&str>) -> SlidePara {
    SlidePara { block_id: b.id.clone(), text: b.text.clone(), hl, found: found.contains(b.id.as_str()) }
}

/// The speaker notes of the slide.
fn notes_of(p: &Page, target: Option<&Target>, found: &HashSet<&str>) -> Vec<SlidePara> {
    p.blocks.iter().filter(|b| b.slide.as_ref().is_some_and(|s| s.notes)).map(|b| para(b, hl_class(b, target), found)).collect()
}

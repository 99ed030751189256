//! PDF pages and images in the viewer: the page image (rendered by pdfium, or the original
//! image) with the cited block's box drawn over it, the other pages one link away.

use futures_util::future::BoxFuture;

use super::parts::{Carry, FoundLink, HlBox, KindView, OutlineLink, PagedView, ViewBody, ViewInput};
use super::{Hints, Target, aids, render};
use crate::{
    error::AppResult,
    evidence::SourceKind,
    ingest::artifact::{Block, Page as ArtPage, ParsedArtifact},
    sources::Source,
    state::AppState,
    web::PageCtx,
};

/// Image types every browser shows inline; others (TIFF) are converted to PNG.
pub(super) fn browser_image(mime: &str) -> bool {
    matches!(mime, "image/png" | "image/jpeg" | "image/gif" | "image/webp" | "image/bmp")
}

pub(super) fn mime_of(s: &Source) -> String {
    mime_guess::from_path(s.file_name()).first_raw().unwrap_or("application/octet-stream").to_string()
}

/// PDF pages and images: the page image with the cited box.
pub struct Paged;

impl KindView for Paged {
    fn render<'a>(&'a self, i: ViewInput<'a>) -> BoxFuture<'a, AppResult<ViewBody>> {
        Box::pin(async move {
            let found_ids: Vec<String> = i.found.iter().map(|f| f.block_id.clone()).collect();
            let pv = paged_view(i.state, i.source, i.art, i.target, i.hints, i.file.is_some(), i.carry, &found_ids, i.ctx);
            let mut body = ViewBody::default();
            if i.target.and_then(|t| t.page).is_some_and(|tp| tp != pv.page) {
                body.cited_url = i.carry.evidence.as_ref().map(|_| format!("{}#hl", i.carry.url(None, None)));
            }
            body.outline = aids::outline(i.art, pv.page_count)
                .into_iter()
                .filter_map(|o| {
                    let page = o.page?;
                    Some(OutlineLink { title: o.title, level: o.level, href: i.carry.url(Some(page), None) })
                })
                .collect();
            body.found = i
                .found
                .into_iter()
                .map(|f| {
                    let href = match f.page {
                        Some(n) if n == pv.page && pv.img_src.is_some() => format!("#t-{}", f.block_id),
                        Some(n) => format!("{}#t-{}", i.carry.url(Some(n), Some(i.find)), f.block_id),
                        None => i.carry.url(None, Some(i.find)),
                    };
                    FoundLink { snippet_html: f.snippet_html, page: f.page, href }
                })
                .collect();
            body.paged = Some(pv);
            Ok(body)
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn paged_view(
    state: &AppState,
    source: &Source,
    art: &ParsedArtifact,
    target: Option<&Target>,
    hints: &Hints,
    file_ok: bool,
    carry: &Carry,
    found: &[String],
    ctx: &PageCtx,
) -> PagedView {
    let pages = &art.source_map.pages;
    let count = pages.len().max(art.source_map.page_count.unwrap_or(0) as usize).max(1) as u32;
    let wanted = hints.page.or(target.and_then(|t| t.page)).unwrap_or(1).clamp(1, count);
    let ap: Option<&ArtPage> = pages.iter().find(|p| p.page == wanted);
    let (w, h) = ap.map(|p| (p.width, p.height)).unwrap_or((612.0, 792.0));
    let scale = render::DEFAULT_SCALE;
    let hash = source.indexed_hash.clone().unwrap_or_else(|| source.sha256.clone());
    let v = hash.trim_start_matches("sha256:").get(..12).unwrap_or("0").to_string();
    let id = source.id;
    let (px_w, px_h, img_src) = if source.kind == SourceKind::Image {
        let (pw, ph) = (w.round().max(1.0) as u32, h.round().max(1.0) as u32);
        let src = if browser_image(&mime_of(source)) {
            format!("/sources/{id}/download?inline=1&v={v}")
        } else {
            format!("/sources/{id}/pages/1.png?v={v}")
        };
        (pw, ph, src)
    } else {
        let (pw, ph) = render::pixel_size(w, h, scale);
        (pw, ph, format!("/sources/{id}/pages/{wanted}.png?scale={scale}&v={v}"))
    };
    let cached =
        render::cache_path(&state.config.data_dir, &hash, wanted, if source.kind == SourceKind::Image { 1.0 } else { scale })
            .is_file();
    let img_src = (file_ok || cached).then_some(img_src);
    let block = target.and_then(|t| t.block_id.as_deref()).and_then(|b| ap.and_then(|p| p.blocks.iter().find(|x| x.id == b)));
    let hl = block.and_then(|b| b.bbox).map(|bb| HlBox {
        bbox: bb.iter().map(|v| super::num(*v)).collect::<Vec<_>>().join(","),
        size: format!("{},{}", super::num(w), super::num(h)),
        style: super::percent_style(bb, w, h),
        class: if target.is_some_and(|t| t.exact) { "hl-box" } else { "hl-box hl-approx" },
    });
    // The later blocks of a spanning citation on this page.
    let span = super::span_ids(art, target);
    let more_hl: Vec<HlBox> = ap
        .map(|p| {
            p.blocks
                .iter()
                .filter(|b| span.contains(&b.id))
                .filter_map(|b| b.bbox)
                .map(|bb| HlBox {
                    bbox: bb.iter().map(|v| super::num(*v)).collect::<Vec<_>>().join(","),
                    size: format!("{},{}", super::num(w), super::num(h)),
                    style: super::percent_style(bb, w, h),
                    class: if target.is_some_and(|t| t.exact) { "hl-box hl-span" } else { "hl-box hl-approx hl-span" },
                })
                .collect()
        })
        .unwrap_or_default();
    let frame_hl = hl.is_none()
        && more_hl.is_empty()
        && target.is_some_and(|t| t.page == Some(wanted) || (t.block_id.is_none() && t.page.is_none()));
    let text = if img_src.is_none() {
        let blocks: Vec<&Block> = ap.map(|p| p.blocks.iter().collect()).unwrap_or_default();
        super::flow_blocks(art, &blocks, "pdf", target)
    } else {
        Vec::new()
    };
    let text_layer = match (ap, img_src.is_some()) {
        (Some(p), true) => aids::text_layer(&p.blocks, w, h, found),
        _ => Vec::new(),
    };
    PagedView {
        page: wanted,
        page_count: count,
        page_label: ctx.t("viewer.page_of").replace("{n}", &wanted.to_string()).replace("{total}", &count.to_string()),
        img_src,
        px_w,
        px_h,
        size: format!("{},{}", super::num(w), super::num(h)),
        hl,
        more_hl,
        frame_hl,
        prev_url: (wanted > 1).then(|| carry.url(Some(wanted - 1), None)),
        next_url: (wanted < count).then(|| carry.url(Some(wanted + 1), None)),
        text,
        text_layer,
    }
}

//! What the viewer page is made of, shared by the handler and the kinds' views: the links
//! every viewer link keeps ([`Carry`]), what a kind's view gets ([`ViewInput`]) and gives
//! ([`ViewBody`]: page image, flowing blocks or sheet grid, outline, find results), the
//! [`KindView`] trait, and the flowing view DOCX, Markdown, text, web pages and e-mail use.

use askama::Template;
use futures_util::future::BoxFuture;
use uuid::Uuid;

use super::{FlowBlock, Hints, Target, aids};
use crate::{
    error::AppResult,
    evidence::origin::OpenedFrom,
    ingest::artifact::{Block, ParsedArtifact},
    sources::Source,
    state::AppState,
    web::PageCtx,
};

/// What every link inside the viewer keeps: the citation and the way back to the results.
pub struct Carry {
    pub id: Uuid,
    pub evidence: Option<String>,
    pub through: Option<String>,
    pub back: Option<String>,
    pub from: Option<OpenedFrom>,
}

impl Carry {
    pub fn url(&self, page: Option<u32>, find: Option<&str>) -> String {
        let mut q: Vec<(&str, String)> = Vec::new();
        if let Some(e) = &self.evidence {
            q.push(("evidence", e.clone()));
        }
        if let Some(t) = &self.through {
            q.push(("through", t.clone()));
        }
        if let Some(p) = page {
            q.push(("page", p.to_string()));
        }
        if let Some(f) = find.filter(|f| !f.is_empty()) {
            q.push(("find", f.to_string()));
        }
        if let Some(b) = &self.back {
            q.push(("back", b.clone()));
        }
        if let Some(f) = self.from {
            q.push(("from", f.param()));
        }
        let query = serde_urlencoded::to_string(&q).unwrap_or_default();
        if query.is_empty() { format!("/sources/{}/view", self.id) } else { format!("/sources/{}/view?{query}", self.id) }
    }
}

pub struct HlBox {
    pub bbox: String,
    pub size: String,
    pub style: String,
    pub class: &'static str,
}

pub struct PagedView {
    pub page: u32,
    pub page_count: u32,
    pub page_label: String,
    pub img_src: Option<String>,
    pub px_w: u32,
    pub px_h: u32,
    pub size: String,
    pub hl: Option<HlBox>,
    /// The later blocks of a citation spanning several blocks, on this page.
    pub more_hl: Vec<HlBox>,
    /// No box to draw (page-only fallback): the frame itself is the `#hl` target.
    pub frame_hl: bool,
    pub prev_url: Option<String>,
    pub next_url: Option<String>,
    /// The file is gone and no rendering is cached: the page's text instead.
    pub text: Vec<FlowBlock>,
    /// The page's words as selectable (transparent) text over the image.
    pub text_layer: Vec<aids::TextSpan>,
}

/// An outline entry with its link.
pub struct OutlineLink {
    pub title: String,
    pub level: u8,
    pub href: String,
}

/// A find result with its link.
pub struct FoundLink {
    pub snippet_html: String,
    pub page: Option<u32>,
    pub href: String,
}

pub struct SheetTab {
    pub name: String,
    pub href: String,
    pub current: bool,
    pub hidden: bool,
}

pub struct CellView {
    pub text: String,
    /// `hl` (the cited cells), `hl-approx`, `hl-span` (a spanning citation's later cells).
    pub class: &'static str,
    /// The first cited cell is the page's `#hl`.
    pub anchor: bool,
    /// A merged region's top-left cell names its range; covered cells are `covered`.
    pub merged: Option<String>,
    pub covered: bool,
    /// Long or multi-line text wraps; other values stay on one line (the grid scrolls sideways).
    pub wrap: bool,
}

pub struct RowView {
    /// 1-based, as the sheet numbers it.
    pub number: u32,
    pub cells: Vec<CellView>,
}

#[derive(Template)]
#[template(path = "viewer/_grid_rows.html")]
pub struct RowsFragment {
    pub rows: Vec<RowView>,
}

pub struct GridView {
    pub tabs: Vec<SheetTab>,
    pub columns: Vec<String>,
    pub header: Option<RowView>,
    pub rows: RowsFragment,
    /// The next window as HTML rows (for the script) and as a page (without it).
    pub more_url: Option<String>,
    pub more_href: Option<String>,
    pub prev_href: Option<String>,
    pub first_row: u32,
    pub last_row: u32,
    pub total_rows: u32,
    /// The original is gone or changed: the rows as indexed, as text.
    pub fallback: bool,
}

impl GridView {
    pub fn fallback() -> GridView {
        GridView {
            tabs: Vec::new(),
            columns: Vec::new(),
            header: None,
            rows: RowsFragment { rows: Vec::new() },
            more_url: None,
            more_href: None,
            prev_href: None,
            first_row: 0,
            last_row: 0,
            total_rows: 0,
            fallback: true,
        }
    }
}

/// Slides: a strip entry.
pub struct SlideTab {
    pub number: u32,
    pub title: String,
    pub href: String,
    pub current: bool,
    /// The slide drawn small (when the deck is drawn at all), loaded as the strip scrolls.
    pub thumb_src: Option<String>,
}

/// A paragraph (or table row) of a shape, or of the notes.
pub struct SlidePara {
    pub block_id: String,
    pub text: String,
    /// `hl` / `hl hl-approx` when cited (then also the element id).
    pub hl: Option<&'static str>,
    pub found: bool,
}

impl SlidePara {
    pub fn element_id(&self) -> String {
        if self.hl.is_some() { "hl-para".into() } else { format!("b-{}", self.block_id) }
    }
}

/// A shape on the slide: its box (as percentages of the slide) and its paragraphs.
pub struct SlideBox {
    pub shape_id: u32,
    pub shape_type: &'static str,
    pub style: String,
    /// `x0,y0,x1,y1` in points.
    pub bbox: String,
    /// The cited shape (the page's `#hl`).
    pub hl: Option<&'static str>,
    pub paras: Vec<SlidePara>,
}

pub struct SlidesView {
    pub slide: u32,
    pub slide_count: u32,
    pub label: String,
    /// The slide rendered by LibreOffice + pdfium (`None`: the text layout instead).
    pub img_src: Option<String>,
    /// CSS `aspect-ratio` of the slide.
    pub aspect: String,
    pub boxes: Vec<SlideBox>,
    /// Blocks of the slide without a box.
    pub loose: Vec<SlidePara>,
    pub notes: Vec<SlidePara>,
    pub prev_url: Option<String>,
    pub next_url: Option<String>,
    pub strip: Vec<SlideTab>,
}

/// What a kind's view gets: the source, its artifact, the located citation and the request.
pub struct ViewInput<'a> {
    pub state: &'a AppState,
    pub source: &'a Source,
    pub art: &'a ParsedArtifact,
    pub target: Option<&'a Target>,
    pub hints: &'a Hints,
    /// The original, opened (`None`: it is gone).
    pub file: Option<std::fs::File>,
    pub carry: &'a Carry,
    /// The find's results and its text.
    pub found: Vec<aids::Found>,
    pub find: &'a str,
    pub ctx: &'a PageCtx,
}

/// The body of the viewer page a kind's view fills in (the rest is the handler's).
#[derive(Default)]
pub struct ViewBody {
    pub paged: Option<PagedView>,
    pub flow: Vec<FlowBlock>,
    pub grid: Option<GridView>,
    pub slides: Option<SlidesView>,
    /// A citation whose block cannot be found: the document itself is the `#hl` target.
    pub doc_hl: bool,
    pub outline: Vec<OutlineLink>,
    pub found: Vec<FoundLink>,
    /// The cited place lies elsewhere (another page or sheet): the link back to it.
    pub cited_url: Option<String>,
}

pub trait KindView: Send + Sync {
    fn render<'a>(&'a self, input: ViewInput<'a>) -> BoxFuture<'a, AppResult<ViewBody>>;
}

/// Markdown, text, DOCX, web pages and e-mail: the blocks in document order, the cited one
/// highlighted.
pub struct Flow;

impl KindView for Flow {
    fn render<'a>(&'a self, i: ViewInput<'a>) -> BoxFuture<'a, AppResult<ViewBody>> {
        Box::pin(async move { Ok(flow_body(&i, i.source.kind.as_str())) })
    }
}

/// The flowing view of an artifact's blocks (also a sheet's rows when its original is gone).
pub fn flow_body(i: &ViewInput<'_>, kind: &str) -> ViewBody {
    let blocks: Vec<&Block> = i.art.all_blocks().collect();
    let mut body = ViewBody { flow: super::flow_blocks(i.art, &blocks, kind, i.target), ..ViewBody::default() };
    let found_ids: Vec<&str> = i.found.iter().map(|f| f.block_id.as_str()).collect();
    for b in body.flow.iter_mut() {
        if found_ids.contains(&b.block_id.as_str()) {
            b.found = true;
        }
    }
    let target_block = i.target.and_then(|t| t.block_id.clone());
    let anchor = |b: &str| if target_block.as_deref() == Some(b) { "#hl".to_string() } else { format!("#b-{b}") };
    body.doc_hl = i.target.is_some_and(|t| t.block_id.is_none());
    body.outline = aids::outline(i.art, 0)
        .into_iter()
        .filter_map(|o| {
            let b = o.block_id?;
            Some(OutlineLink { title: o.title, level: o.level, href: anchor(&b) })
        })
        .collect();
    body.found = i
        .found
        .iter()
        .map(|f| FoundLink { href: anchor(&f.block_id), snippet_html: f.snippet_html.clone(), page: None })
        .collect();
    body
}

//! How each kind of document is shown: one [`KindView`] per way of showing (page images,
//! flowing blocks, a sheet grid), chosen by [`for_kind`]. The `view` handler does what every
//! kind shares (access, the citation, notices, find) and hands the body to the kind's view.

use futures_util::future::BoxFuture;

use super::handlers::{Carry, FoundLink, OutlineLink, PagedView};
use super::{FlowBlock, Hints, Target, aids, sheet::GridView};
use crate::{
    error::AppResult,
    evidence::SourceKind,
    ingest::artifact::{Block, ParsedArtifact},
    sources::Source,
    state::AppState,
    web::PageCtx,
};

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

/// The view of a kind.
pub fn for_kind(kind: SourceKind) -> &'static dyn KindView {
    match kind {
        SourceKind::Pdf | SourceKind::Image => &Paged,
        SourceKind::Spreadsheet | SourceKind::Csv => &super::sheet::Grid,
        SourceKind::Markdown | SourceKind::Docx | SourceKind::Text | SourceKind::Html | SourceKind::Email => &Flow,
    }
}

/// PDF pages and images: the page image with the cited box.
pub struct Paged;

impl KindView for Paged {
    fn render<'a>(&'a self, i: ViewInput<'a>) -> BoxFuture<'a, AppResult<ViewBody>> {
        Box::pin(async move {
            let found_ids: Vec<String> = i.found.iter().map(|f| f.block_id.clone()).collect();
            let pv = super::handlers::paged_view(
                i.state,
                i.source,
                i.art,
                i.target,
                i.hints,
                i.file.is_some(),
                i.carry,
                &found_ids,
                i.ctx,
            );
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

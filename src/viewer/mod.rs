//! The citation viewer (`GET /sources/{id}/view`): the original document with the cited
//! evidence highlighted, rendered on the server (no JavaScript needed), plus the original
//! bytes (`/download`) and PDF page images (`/pages/{n}.png`, see [`render`]).
//!
//! Visibility is the caller's RLS view of `source` (other tenant, private KB → 404) plus the
//! search core's rule that a source under a revoked grant is never served.

pub mod aids;
mod attachments;
pub mod handlers;
pub mod kinds;
pub mod markdown;
pub mod paged;
pub mod parts;
pub mod render;
pub mod sheet;
pub mod slides;

use std::{fs::File, path::PathBuf};

use uuid::Uuid;

use crate::db::TenantTx;

use crate::{
    config::Config,
    error::{AppError, AppResult},
    grants::paths,
    ingest::artifact::{Block, BlockType, ParsedArtifact, Quality},
    sources::{self, Source},
};

/// The viewer page, the original bytes and page images.
/// Browser routes, also followed by API clients from citations (those keep JSON errors).
/// The source map of a source's indexed version (what the viewer locates citations with).
pub fn api_router() -> axum::Router<crate::state::AppState> {
    axum::Router::new().route("/api/sources/{id}/source-map.json", axum::routing::get(handlers::source_map))
}

/// The OpenAPI description of [`api_router`]'s route.
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    d.op("get", "/api/sources/{id}/source-map.json")
        .summary("The indexed version's source map (`mnote.resource_source_map.v1`)")
        .ok::<crate::ingest::artifact::SourceMap>(200);
}

pub fn page_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::get;
    axum::Router::new()
        .route("/sources/{id}/view", get(handlers::view))
        .route("/sources/{id}/download", get(handlers::download))
        .route("/sources/{id}/attachments/{part}", get(attachments::attachment))
        .route("/sources/{id}/pages/{page}", get(handlers::page_png))
        .route("/sources/{id}/sheet-rows", get(sheet::rows))
}

/// A source the caller may see (RLS) whose grant, if any, is still active; else 404.
pub async fn visible_source(conn: &mut crate::db::TenantTx, id: Uuid) -> AppResult<Source> {
    sources::queries::readable(conn, id).await?.ok_or(AppError::NotFound)
}

/// The original bytes of a source, opened: the upload blob, or the file under its grant's
/// root opened with [`paths::open_beneath`] (so a symlink swapped in after registration can
/// never lead outside the root). `None` when it is gone. Callers serve, render or hash only
/// this descriptor, never the path again.
pub async fn original_file(tx: &mut TenantTx, cfg: &Config, s: &Source) -> AppResult<Option<File>> {
    let tenant = tx.tenant_id();
    match s.grant_id {
        None => {
            let p = sources::upload_blob_path(&cfg.uploads_dir(), &s.sha256);
            Ok(File::open(&p).ok().filter(|f| f.metadata().is_ok_and(|m| m.is_file())))
        }
        Some(g) => {
            let root: Option<String> = sqlx::query_scalar!(
                "select root_path from dir_grant where tenant_id = $2 and id = $1 and revoked_at is null",
                g,
                tenant,
            )
            .fetch_optional(&mut **tx)
            .await?;
            let Some(root) = root else { return Ok(None) };
            let root = PathBuf::from(root);
            // The grant's root must still be one of the tenant's roots (operator-controlled).
            crate::grants::roots::check(tx, cfg, &root).await?;
            let rel = s.resource_path.clone();
            let allow = cfg.allow_hard_links;
            let opened = tokio::task::spawn_blocking(move || paths::open_beneath(&root, &rel, allow))
                .await
                .map_err(|e| AppError::Internal(e.into()))?;
            match opened {
                Ok(f) => Ok(Some(f)),
                Err(paths::OpenError::Missing) => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// The `id`'s evidence row of this source: its block id.
pub async fn evidence_block_key(tx: &mut TenantTx, source_id: Uuid, evidence: Uuid) -> sqlx::Result<Option<String>> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(
        "select block_key from evidence_block where tenant_id = $3 and id = $1 and source_id = $2",
        evidence,
        source_id,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

/// What the URL asks for besides the evidence id (the bare-locator fallback).
#[derive(Debug, Clone, Default)]
pub struct Hints {
    pub page: Option<u32>,
    pub line: Option<u32>,
    pub para: Option<String>,
    pub fingerprint: Option<String>,
    pub ordinal: Option<u32>,
    /// Spreadsheets: the cited sheet and cells (A1 notation).
    pub sheet: Option<String>,
    pub cells: Option<String>,
    /// Spreadsheets: the sheet tab and the first row (1-based) to show (navigation).
    pub tab: Option<String>,
    pub row: Option<u32>,
}

impl Hints {
    /// Nothing but (maybe) a page: page navigation, not a citation.
    pub fn is_navigation(&self) -> bool {
        self.line.is_none() && self.para.is_none() && self.fingerprint.is_none() && self.ordinal.is_none() && self.cells.is_none()
    }
}

/// The block the viewer highlights and how sure it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub block_id: Option<String>,
    /// Page to show (paged kinds).
    pub page: Option<u32>,
    /// False: say "approximate location" and draw a tentative highlight.
    pub exact: bool,
    /// A citation spanning several blocks (`through=`): the span's last block.
    pub through: Option<String>,
}

/// The blocks a spanning citation highlights after its first, in document order: from the
/// target's block through `target.through` (at most [`MAX_SPAN`]); empty for a single block.
pub fn span_ids(art: &ParsedArtifact, target: Option<&Target>) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    let Some((first, last)) = target.and_then(|t| Some((t.block_id.as_deref()?, t.through.as_deref()?))) else {
        return out;
    };
    let ids: Vec<&str> = art.all_blocks().map(|b| b.id.as_str()).collect();
    let (Some(a), Some(z)) = (ids.iter().position(|b| *b == first), ids.iter().position(|b| *b == last)) else {
        return out;
    };
    if z > a {
        out.extend(ids[a + 1..=z.min(a + MAX_SPAN)].iter().map(|b| b.to_string()));
    }
    out
}

/// Blocks one citation highlights at most.
pub const MAX_SPAN: usize = 2000;

/// Locate the cited place in `art`. `block` is the evidence row's block when the evidence id
/// still exists; `missing` says an evidence id was given but is gone (re-indexed file).
pub fn locate(art: &ParsedArtifact, block: Option<&str>, missing: bool, hints: &Hints) -> Option<Target> {
    if let Some(id) = block
        && let Some(b) = art.all_blocks().find(|b| b.id == id)
    {
        return Some(Target { block_id: Some(b.id.clone()), page: b.page, exact: b.quality == Quality::Exact, through: None });
    }
    if hints.is_navigation() && !missing {
        return None;
    }
    let blocks: Vec<&Block> = art.all_blocks().collect();
    let found = |b: &Block, exact: bool| Target {
        block_id: Some(b.id.clone()),
        page: b.page,
        exact: exact && !missing && b.quality == Quality::Exact,
        through: None,
    };
    // DOCX: paraId → text fingerprint → paragraph ordinal.
    if let Some(p) = hints.para.as_deref().filter(|p| !p.is_empty())
        && let Some(b) = blocks.iter().find(|b| b.para_id_start.as_deref() == Some(p) || b.para_id_end.as_deref() == Some(p))
    {
        let same_text = hints.fingerprint.as_deref().is_none_or(|f| f == b.text_fingerprint);
        return Some(found(b, same_text));
    }
    if let Some(f) = hints.fingerprint.as_deref().filter(|f| !f.is_empty())
        && let Some(b) = blocks.iter().find(|b| b.text_fingerprint == f)
    {
        return Some(found(b, true));
    }
    if let Some(o) = hints.ordinal {
        let best = blocks.iter().filter(|b| b.paragraph_ordinal.is_some_and(|x| x <= o)).max_by_key(|b| b.paragraph_ordinal);
        if let Some(b) = best.or_else(|| blocks.first()) {
            return Some(found(b, false));
        }
    }
    // Spreadsheets: the block of the same sheet whose cells hold the cited cell's row.
    if let Some((first, _)) = hints.cells.as_deref().and_then(crate::evidence::cells::parse_range) {
        let row_of = |b: &Block| b.cell_range.as_deref().and_then(crate::evidence::cells::parse_range);
        let b = blocks
            .iter()
            .filter(|b| b.sheet == hints.sheet && b.cell_range.is_some())
            .find(|b| row_of(b).is_some_and(|(a, z)| a.0 <= first.0 && first.0 <= z.0));
        if let Some(b) = b {
            return Some(found(b, false));
        }
    }
    // Markdown/text: the block holding the line, else the next one after it.
    if let Some(l) = hints.line {
        let b = blocks
            .iter()
            .find(|b| b.line_range.is_some_and(|r| r[0] <= l && l <= r[1]))
            .or_else(|| blocks.iter().find(|b| b.line_range.is_some_and(|r| r[0] >= l)));
        if let Some(b) = b {
            return Some(found(b, false));
        }
    }
    // Paged kinds: the page only.
    if let Some(p) = hints.page {
        return Some(Target { block_id: None, page: Some(p), exact: false, through: None });
    }
    Some(Target { block_id: None, page: None, exact: false, through: None })
}

/// Escape text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// One block of a flowing document as the template shows it.
#[derive(Debug, Clone)]
pub struct FlowBlock {
    /// `h2`…`h6`, `p`, `li`, `tr`, `div`.
    pub tag: &'static str,
    pub block_id: String,
    /// `hl` when cited (then also the element id), `hl-approx` for a tentative highlight.
    pub hl: Option<&'static str>,
    /// A later block of a citation spanning several blocks (highlighted too, no id).
    pub span: bool,
    pub block_type: &'static str,
    pub para_id: Option<String>,
    pub ordinal: Option<u32>,
    pub first_line: Option<u32>,
    pub lines: Option<String>,
    /// Line anchors (`id="L12"`) placed at the start of the element.
    pub anchors: Vec<u32>,
    /// Rendered, escaped HTML of the content.
    pub html: String,
    /// Start a `<ul>` / `<table>` before this block; close it after.
    pub open: Option<&'static str>,
    pub close: Option<&'static str>,
    /// Contains the text of the viewer's find.
    pub found: bool,
    /// An e-mail attachment's heading: the attachment's part (`a2`, `a2_a1`) to download it by.
    pub attachment: Option<String>,
}

impl FlowBlock {
    pub fn element_id(&self) -> String {
        if self.hl.is_some() { "hl".into() } else { format!("b-{}", self.block_id) }
    }

    /// Markup opening this block's group (`<ul>`, `<table>`), if it starts one.
    pub fn open_html(&self) -> &'static str {
        match self.open {
            Some("ul") => "<ul>",
            Some("table") => "<table class=\"doc-table\"><tbody>",
            _ => "",
        }
    }

    pub fn close_html(&self) -> &'static str {
        match self.close {
            Some("ul") => "</ul>",
            Some("table") => "</tbody></table>",
            _ => "",
        }
    }
}

fn type_name(t: BlockType) -> &'static str {
    match t {
        BlockType::Heading => "heading",
        BlockType::Paragraph => "paragraph",
        BlockType::ListItem => "list_item",
        BlockType::Table => "table",
        BlockType::TableRow => "table_row",
        BlockType::Code => "code",
        BlockType::Quote => "quote",
        BlockType::OcrLine => "ocr_line",
    }
}

/// A table row's cells as `<td>`s. Rows that carry their column names (`City: Beijing`, as
/// web pages' rows do under a header row) show the bare values under that header row.
fn row_cells<'a>(text: &'a str, header: &mut Option<Vec<&'a str>>) -> String {
    let cells: Vec<&str> = text.split(" | ").collect();
    let shown: Vec<&str> = match header.as_ref() {
        None => {
            *header = Some(cells.clone());
            cells
        }
        Some(names) => cells
            .iter()
            .map(|c| names.iter().find_map(|n| c.strip_prefix(n).and_then(|r| r.strip_prefix(": "))).unwrap_or(c))
            .collect(),
    };
    shown.iter().map(|c| format!("<td>{}</td>", escape(c))).collect()
}

/// Heading level of each heading block: the level of the section it opens.
fn heading_levels(art: &ParsedArtifact) -> std::collections::HashMap<&str, u8> {
    let mut m = std::collections::HashMap::new();
    for s in &art.source_map.sections {
        if let Some(first) = s.block_ids.first() {
            m.entry(first.as_str()).or_insert(s.level);
        }
    }
    m
}

/// The blocks of a flowing document (DOCX, Markdown, text) or of one page's text (a PDF or
/// image whose file is gone), ready for the template. `target` gets `id="hl"`.
pub fn flow_blocks(art: &ParsedArtifact, blocks: &[&Block], kind: &str, target: Option<&Target>) -> Vec<FlowBlock> {
    let levels = heading_levels(art);
    let span = span_ids(art, target);
    let mut out: Vec<FlowBlock> = Vec::with_capacity(blocks.len());
    let mut last_line = 0u32;
    // The first row of a run of table rows: its cells name the columns the later rows carry.
    let mut header: Option<Vec<&str>> = None;
    for b in blocks {
        if b.block_type != BlockType::TableRow {
            header = None;
        }
        let hl =
            target.filter(|t| t.block_id.as_deref() == Some(b.id.as_str())).map(|t| if t.exact { "hl" } else { "hl-approx" });
        let (tag, html) = match (kind, b.block_type) {
            ("text", _) => ("p", escape(&b.text)),
            // A message's lines (its header block, a quoted reply) stay lines; an attachment's
            // heading (`a{n}_h`) is marked as one.
            ("email", BlockType::Heading) if is_attachment_heading(&b.id) => {
                (heading_tag(levels.get(b.id.as_str()).copied()), format!("{PAPERCLIP} {}", escape(&b.text)))
            }
            ("email", BlockType::Heading) => (heading_tag(levels.get(b.id.as_str()).copied()), escape(&b.text)),
            ("email", BlockType::Quote) => ("blockquote", escape(&b.text).replace('\n', "<br>")),
            ("email", _) => ("p", escape(&b.text).replace('\n', "<br>")),
            ("markdown", BlockType::Heading) => (heading_tag(levels.get(b.id.as_str()).copied()), markdown::inline_html(&b.text)),
            ("markdown", BlockType::ListItem) => ("li", markdown::inline_html(&b.text)),
            ("markdown", _) => ("div", markdown::block_html(&b.text)),
            (_, BlockType::Heading) => (heading_tag(levels.get(b.id.as_str()).copied()), escape(&b.text)),
            (_, BlockType::ListItem) => ("li", escape(&b.text)),
            ("html", BlockType::TableRow) => ("tr", row_cells(&b.text, &mut header)),
            (_, BlockType::TableRow) => ("tr", b.text.split(" | ").map(|c| format!("<td>{}</td>", escape(c))).collect()),
            (_, BlockType::Code) => ("pre", escape(&b.text)),
            (_, BlockType::Quote) => ("blockquote", escape(&b.text)),
            _ => ("p", escape(&b.text)),
        };
        let anchors = match b.line_range {
            Some([a, z]) => {
                let from = if last_line == 0 { 1 } else { last_line + 1 };
                let from = from.min(a);
                last_line = last_line.max(z);
                (from..=z).collect()
            }
            None => Vec::new(),
        };
        out.push(FlowBlock {
            tag,
            block_id: b.id.clone(),
            hl,
            span: span.contains(&b.id),
            block_type: type_name(b.block_type),
            para_id: b.para_id_start.clone(),
            ordinal: b.paragraph_ordinal,
            first_line: b.line_range.map(|r| r[0]),
            lines: b.line_range.map(|r| if r[0] == r[1] { r[0].to_string() } else { format!("{}-{}", r[0], r[1]) }),
            anchors,
            html,
            open: None,
            close: None,
            found: false,
            attachment: (kind == "email" && is_attachment_heading(&b.id))
                .then(|| b.id.trim_end_matches('h').trim_end_matches('_').to_string()),
        });
    }
    // Group runs of list items into <ul> and table rows into <table>.
    let group = |tag: &str| match tag {
        "li" => Some("ul"),
        "tr" => Some("table"),
        _ => None,
    };
    for i in 0..out.len() {
        let g = group(out[i].tag);
        let prev = i.checked_sub(1).and_then(|p| group(out[p].tag));
        let next = out.get(i + 1).and_then(|n| group(n.tag));
        if g.is_some() && prev != g {
            out[i].open = g;
        }
        if g.is_some() && next != g {
            out[i].close = g;
        }
    }
    out
}

/// A paperclip drawn inline (no icon font needed), before an e-mail attachment's name.
const PAPERCLIP: &str = "<svg class=\"clip\" viewBox=\"0 0 24 24\" width=\"16\" height=\"16\" aria-hidden=\"true\"><path d=\"M21.44 11.05l-9.19 9.19a6 6 0 0 1-8.49-8.49l9.19-9.19a4 4 0 0 1 5.66 5.66l-9.2 9.19a2 2 0 0 1-2.83-2.83l8.49-8.48\" fill=\"none\" stroke=\"currentColor\" stroke-width=\"2\" stroke-linecap=\"round\"/></svg>";

/// An e-mail attachment's heading block: `a1_h`, `a2_a1_h` (see `ingest::email`).
fn is_attachment_heading(id: &str) -> bool {
    id.strip_suffix('h').is_some_and(|p| {
        p.split_terminator('_')
            .all(|seg| seg.strip_prefix('a').is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit())))
            && !p.is_empty()
    })
}

fn heading_tag(level: Option<u8>) -> &'static str {
    // The page title is the h1: document levels start at h2.
    match level.unwrap_or(1) {
        0 | 1 => "h2",
        2 => "h3",
        3 => "h4",
        4 => "h5",
        _ => "h6",
    }
}

/// `left/top/width/height` in percent of the page for a bbox.
pub fn percent_style(bbox: [f64; 4], w: f64, h: f64) -> String {
    let (w, h) = (w.max(1e-6), h.max(1e-6));
    let c = |v: f64| v.clamp(0.0, 100.0);
    let left = c(bbox[0] / w * 100.0);
    let top = c(bbox[1] / h * 100.0);
    let width = c((bbox[2] - bbox[0]) / w * 100.0).min(100.0 - left);
    let height = c((bbox[3] - bbox[1]) / h * 100.0).min(100.0 - top);
    format!("left:{left:.4}%;top:{top:.4}%;width:{width:.4}%;height:{height:.4}%")
}

/// Compact number for data attributes (`72`, `80.83`).
pub fn num(v: f64) -> String {
    let s = format!("{:.2}", v);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" { "0".into() } else { s.to_string() }
}

/// `attachment; filename="ascii"; filename*=UTF-8''percent-encoded` (RFC 6266 / 5987).
pub fn content_disposition(disposition: &str, name: &str) -> String {
    let ascii: String =
        name.chars().map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' { c } else { '_' }).collect();
    let mut enc = String::new();
    for b in name.as_bytes() {
        let c = *b as char;
        if c.is_ascii_alphanumeric() || "!#$&+-.^_`|~".contains(c) {
            enc.push(c);
        } else {
            enc.push_str(&format!("%{b:02X}"));
        }
    }
    format!("{disposition}; filename=\"{ascii}\"; filename*=UTF-8''{enc}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_attachment_headings_of_a_message_are_marked() {
        assert!(is_attachment_heading("a1_h") && is_attachment_heading("a2_a10_h"));
        assert!(!is_attachment_heading("b1") && !is_attachment_heading("h") && !is_attachment_heading("a1_b2h"));
        assert!(!is_attachment_heading("a_h") && !is_attachment_heading("ax_h"));
    }
    use crate::ingest::artifact::{SourceMap, fingerprint};

    fn block(id: &str, text: &str) -> Block {
        Block { id: id.into(), text_fingerprint: fingerprint(text), ..Block::flowing(text) }
    }

    fn art(blocks: Vec<Block>) -> ParsedArtifact {
        ParsedArtifact {
            source_hash: "sha256:0".into(),
            provider: "t".into(),
            provider_version: "t".into(),
            text: String::new(),
            source_map: SourceMap {
                schema: String::new(),
                provider: String::new(),
                model_version: String::new(),
                source_hash: String::new(),
                resource_kind: "docx".into(),
                page_count: None,
                pages: vec![],
                blocks,
                sections: vec![],
                references: vec![],
                truncated: None,
            },
        }
    }

    #[test]
    fn docx_locating_order_is_para_id_then_fingerprint_then_ordinal() {
        let mut a = block("b1", "first");
        a.para_id_start = Some("AA".into());
        a.paragraph_ordinal = Some(1);
        let mut b = block("b2", "second");
        b.para_id_start = Some("BB".into());
        b.paragraph_ordinal = Some(3);
        let art = art(vec![a, b]);
        let h = |para: Option<&str>, fp: Option<String>, ord: Option<u32>| Hints {
            para: para.map(String::from),
            fingerprint: fp,
            ordinal: ord,
            ..Default::default()
        };
        let t = locate(&art, None, false, &h(Some("BB"), Some(fingerprint("second")), None)).unwrap();
        assert_eq!((t.block_id.as_deref(), t.exact), (Some("b2"), true));
        // paraId found but the text changed: approximate.
        let t = locate(&art, None, false, &h(Some("BB"), Some(fingerprint("edited")), None)).unwrap();
        assert_eq!((t.block_id.as_deref(), t.exact), (Some("b2"), false));
        // No paraId: the fingerprint.
        let t = locate(&art, None, false, &h(Some("ZZ"), Some(fingerprint("FIRST ")), None)).unwrap();
        assert_eq!((t.block_id.as_deref(), t.exact), (Some("b1"), true));
        // Only the ordinal: the nearest paragraph at or before it, approximate.
        let t = locate(&art, None, false, &h(None, None, Some(5))).unwrap();
        assert_eq!((t.block_id.as_deref(), t.exact), (Some("b2"), false));
        // A gone evidence id is never exact.
        let t = locate(&art, None, true, &h(None, Some(fingerprint("first")), None)).unwrap();
        assert_eq!((t.block_id.as_deref(), t.exact), (Some("b1"), false));
        assert_eq!(locate(&art, None, false, &Hints::default()), None);
    }

    #[test]
    fn percent_boxes_and_dispositions() {
        assert_eq!(
            percent_style([61.2, 79.2, 122.4, 158.4], 612.0, 792.0),
            "left:10.0000%;top:10.0000%;width:10.0000%;height:10.0000%"
        );
        assert_eq!(num(80.830), "80.83");
        assert_eq!(num(72.0), "72");
        assert_eq!(
            content_disposition("attachment", "报告 \"v1\".docx"),
            "attachment; filename=\"__ _v1_.docx\"; filename*=UTF-8''%E6%8A%A5%E5%91%8A%20%22v1%22.docx"
        );
    }

    #[test]
    fn flow_blocks_escape_and_group() {
        let mut rows = vec![block("b1", "<b>Title</b>"), block("b2", "a | b"), block("b3", "c | d"), block("b4", "end")];
        rows[0].block_type = BlockType::Heading;
        rows[1].block_type = BlockType::TableRow;
        rows[2].block_type = BlockType::TableRow;
        let a = art(rows);
        let refs: Vec<&Block> = a.all_blocks().collect();
        let t = Target { block_id: Some("b3".into()), page: None, exact: true, through: None };
        let v = flow_blocks(&a, &refs, "docx", Some(&t));
        assert_eq!(v[0].html, "&lt;b&gt;Title&lt;/b&gt;");
        assert_eq!((v[1].open, v[1].close, v[2].open, v[2].close), (Some("table"), None, None, Some("table")));
        assert_eq!(v[2].html, "<td>c</td><td>d</td>");
        assert_eq!(v[2].element_id(), "hl");
        assert_eq!(v[1].element_id(), "b-b2");
        assert!(v.iter().all(|b| !b.span), "one block cited: nothing else highlighted");
        // A citation spanning b2 through b4: the first is `#hl`, the others are highlighted too.
        let t = Target { block_id: Some("b2".into()), page: None, exact: true, through: Some("b4".into()) };
        let v = flow_blocks(&a, &refs, "docx", Some(&t));
        assert_eq!(
            v.iter().map(|b| (b.element_id(), b.span)).collect::<Vec<_>>(),
            [("b-b1".to_string(), false), ("hl".to_string(), false), ("b-b3".to_string(), true), ("b-b4".to_string(), true)]
        );
        // A span that ends before it starts, or names an unknown block, highlights the first only.
        let t = Target { through: Some("b1".into()), ..t };
        assert!(span_ids(&a, Some(&t)).is_empty());
        let t = Target { through: Some("nope".into()), ..t };
        assert!(span_ids(&a, Some(&t)).is_empty());
    }
}

//! `GET /sources/{id}/view`, `/download` and `/pages/{n}.png`. Same authentication as the API
//! (session cookie or bearer token); invisible sources are 404.

use askama::Template;
use axum::{
    body::Body,
    extract::{Path, Query, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use uuid::Uuid;

use super::parts::{Carry, FoundLink, OutlineLink, PagedView};
use super::{FlowBlock, Hints, aids, kinds, paged::mime_of, parts, render};
use crate::{
    auth::{Auth, Via},
    error::{AppError, AppResult},
    evidence::{SourceKind, SourceStatus, origin::OpenedFrom},
    ingest::index,
    sources::Source,
    state::AppState,
    web::{Page, PageCtx, render as render_page, safe_next},
};

#[derive(Debug, Default, Deserialize)]
pub struct ViewParams {
    #[serde(default)]
    evidence: Option<String>,
    #[serde(default)]
    page: Option<String>,
    #[serde(default)]
    line: Option<String>,
    #[serde(default)]
    para: Option<String>,
    #[serde(default)]
    fp: Option<String>,
    #[serde(default)]
    ordinal: Option<String>,
    /// Spreadsheets: the cited sheet and cells (`cells=A5:C5`), the sheet tab and first row shown.
    #[serde(default)]
    sheet: Option<String>,
    #[serde(default)]
    cells: Option<String>,
    #[serde(default)]
    tab: Option<String>,
    #[serde(default)]
    row: Option<String>,
    /// A citation spanning several blocks: the evidence id of its last block.
    #[serde(default)]
    through: Option<String>,
    /// Find in document.
    #[serde(default)]
    find: Option<String>,
    /// Where the breadcrumb returns to (the search results the viewer was opened from).
    #[serde(default)]
    back: Option<String>,
    /// Opened from an assistant answer (`ai:<run id>`, [`OpenedFrom`]); anything else is ignored.
    #[serde(default)]
    from: Option<String>,
}

fn num_param(v: &Option<String>) -> Option<u32> {
    v.as_deref().and_then(|s| s.trim().parse::<u32>().ok()).filter(|n| *n >= 1)
}

/// A search-results URL (path and query only) to return to: the `back` parameter, else the
/// `Referer` when it is this site's `/search`. Anything else is `None`.
fn back_target(param: Option<&str>, headers: &HeaderMap) -> Option<String> {
    let ok =
        |p: &str| (p == "/search" || p.starts_with("/search?")).then(|| safe_next(Some(p))).filter(|p| p.starts_with("/search"));
    if let Some(p) = param.filter(|p| !p.is_empty()) {
        return ok(p);
    }
    let referer = headers.get(header::REFERER)?.to_str().ok()?;
    let u = reqwest::Url::parse(referer).ok()?;
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok())?;
    let same = u.host_str().is_some_and(|h| match u.port() {
        Some(p) => format!("{h}:{p}") == host,
        None => h == host,
    });
    if !same || u.path() != "/search" {
        return None;
    }
    ok(&match u.query() {
        Some(q) => format!("/search?{q}"),
        None => "/search".into(),
    })
}

#[derive(Template)]
#[template(path = "viewer/view.html")]
struct ViewerPage {
    ctx: PageCtx,
    title: String,
    path: String,
    kind: String,
    kind_label: String,
    approx: bool,
    stale: Option<String>,
    not_indexed: bool,
    /// The citation link names a passage this document does not have (`not_found`).
    citation_missing: bool,
    download_url: String,
    /// `/sources/{id}/attachments`: an e-mail's attachments are downloaded under it.
    attachments_url: String,
    cited_url: Option<String>,
    /// The breadcrumb: the search results the viewer was opened from, else `/search`.
    back_url: String,
    from_results: bool,
    /// Opened from an assistant answer: the answer's page (the breadcrumb says "Assistant").
    answer_url: Option<String>,
    /// Hidden fields the page-jump and find forms keep.
    keep: Vec<(&'static str, String)>,
    paged: Option<PagedView>,
    flow: Vec<FlowBlock>,
    grid: Option<parts::GridView>,
    slides: Option<parts::SlidesView>,
    /// A citation whose block cannot be found: the document itself is the `#hl` target.
    doc_hl: bool,
    outline: Vec<OutlineLink>,
    find: String,
    found: Vec<FoundLink>,
    found_total: usize,
    /// The assistant panel.
    ai: crate::web::ai_panel::AiPanel,
}

/// `GET /sources/{id}/view?evidence=&page=&line=` (also `para=`, `fp=`, `ordinal=` for DOCX;
/// `find=` searches the document, `back=` is the results page the breadcrumb returns to).
pub async fn view(
    State(state): State<AppState>,
    page: Page,
    Path(id): Path<Uuid>,
    Query(p): Query<ViewParams>,
    headers: HeaderMap,
) -> AppResult<Response> {
    let ctx = page.ctx;
    let mut tx = page.auth.read_tx(&state).await?;
    let source = super::visible_source(&mut tx, id).await?;
    let evidence = p.evidence.as_deref().map(str::trim).filter(|e| !e.is_empty());
    let block_key = match evidence.and_then(|e| Uuid::parse_str(e).ok()) {
        Some(e) => super::evidence_block_key(&mut tx, id, e).await?,
        None => None,
    };
    let missing = evidence.is_some() && block_key.is_none();
    // The last block of a spanning citation (same document; ignored when it is not one).
    let through = p.through.as_deref().map(str::trim).and_then(|t| Uuid::parse_str(t).ok());
    let through_key = match (through, &block_key) {
        (Some(t), Some(_)) => super::evidence_block_key(&mut tx, id, t).await?,
        _ => None,
    };
    let art = index::load_artifact(&mut tx, id).await?;
    let file = super::original_file(&mut tx, &state.config, &source).await?;
    tx.commit().await?;

    let hints = Hints {
        page: num_param(&p.page),
        line: num_param(&p.line),
        para: p.para.clone(),
        fingerprint: p.fp.clone(),
        ordinal: num_param(&p.ordinal),
        sheet: p.sheet.clone().filter(|s| !s.is_empty()),
        cells: p.cells.clone().filter(|c| crate::evidence::cells::parse_range(c).is_some()),
        tab: p.tab.clone().filter(|s| !s.is_empty()),
        row: num_param(&p.row),
    };
    // An evidence id this document does not have, and nothing else to locate it by: the
    // citation is wrong, not approximate.
    let citation_missing = missing && hints.is_navigation();
    if citation_missing && page.auth.via == Via::Token {
        return Err(AppError::NotFound);
    }
    let stale = if source.status == SourceStatus::Stale || file.is_none() {
        let code = source.error_code.clone().unwrap_or_else(|| "file_missing".into());
        Some(ctx.t("viewer.stale").replace(
            "{reason}",
            &ctx.tk("viewer.stale_reason", if code == "grant_revoked" { "grant_revoked" } else { "file_missing" }),
        ))
    } else {
        None
    };
    let back = back_target(p.back.as_deref(), &headers);
    let from = p.from.as_deref().and_then(OpenedFrom::parse);
    let carry = Carry {
        id,
        evidence: evidence.filter(|_| !citation_missing).map(String::from),
        through: through_key.as_ref().and(through).map(|t| t.to_string()),
        back: back.clone(),
        from,
    };
    let find = p.find.as_deref().map(str::trim).unwrap_or("").chars().take(200).collect::<String>();
    let mut keep: Vec<(&'static str, String)> = Vec::new();
    if let Some(e) = &carry.evidence {
        keep.push(("evidence", e.clone()));
    }
    if let Some(t) = &carry.through {
        keep.push(("through", t.clone()));
    }
    if let Some(b) = &back {
        keep.push(("back", b.clone()));
    }
    if let Some(f) = from {
        keep.push(("from", f.param()));
    }
    let mut view = ViewerPage {
        title: source.file_name().to_string(),
        path: source.resource_path.clone(),
        kind: source.kind.to_string(),
        kind_label: ctx.tk("kind", source.kind.as_str()),
        approx: false,
        stale,
        not_indexed: false,
        citation_missing,
        download_url: format!("/sources/{id}/download"),
        attachments_url: format!("/sources/{id}/attachments"),
        cited_url: None,
        from_results: back.is_some(),
        answer_url: from.map(OpenedFrom::back_url),
        back_url: back.clone().unwrap_or_else(|| "/search".into()),
        keep,
        paged: None,
        flow: Vec::new(),
        grid: None,
        slides: None,
        doc_hl: false,
        outline: Vec::new(),
        find: find.clone(),
        found: Vec::new(),
        found_total: 0,
        ai: crate::web::ai_panel::AiPanel::for_source(ctx.lang, id),
        ctx,
    };
    let status = if citation_missing { StatusCode::NOT_FOUND } else { StatusCode::OK };
    let with_status = |r: AppResult<Response>| {
        r.map(|mut r| {
            *r.status_mut() = status;
            r
        })
    };
    let Some(art) = art else {
        view.not_indexed = true;
        return with_status(render_page(view));
    };
    let target = if citation_missing { None } else { super::locate(&art, block_key.as_deref(), missing, &hints) };
    // The indexed version differs from the file now registered: positions may have moved.
    let changed = source.indexed_hash.as_deref().is_some_and(|h| h != source.sha256);
    view.approx = target.as_ref().is_some_and(|t| !t.exact) || (changed && target.is_some());
    let target = target.map(|mut t| {
        if changed {
            t.exact = false;
        }
        if block_key.is_some() && t.block_id == block_key {
            t.through = through_key.clone();
        }
        t
    });
    let (found, found_total) = aids::find(&art, &find);
    view.found_total = found_total;
    let input = parts::ViewInput {
        state: &state,
        source: &source,
        art: &art,
        target: target.as_ref(),
        hints: &hints,
        file,
        carry: &carry,
        found,
        find: &find,
        ctx: &view.ctx,
    };
    let body = kinds::for_kind(source.kind).render(input).await?;
    view.paged = body.paged;
    view.flow = body.flow;
    view.grid = body.grid;
    view.slides = body.slides;
    view.doc_hl = body.doc_hl;
    view.outline = body.outline;
    view.found = body.found;
    view.cited_url = body.cited_url;
    with_status(render_page(view))
}

/// A `410 Gone` with code `file_missing` (JSON for API clients, an error page for browsers).
pub(super) fn file_missing(s: &Source) -> AppError {
    AppError::FileMissing(format!("the original file of {} is no longer available", s.resource_path))
}

#[derive(Debug, Default, Deserialize)]
pub struct DownloadParams {
    #[serde(default)]
    inline: Option<String>,
}

/// `GET /sources/{id}/download`: the original bytes, streamed from the descriptor
/// [`super::original_file`] opened (never re-opened by name, see
/// [`crate::grants::paths::open_beneath`]), with `Content-Length`, `Content-Type` and a
/// single `Range: bytes=…` (206, or 416 when unsatisfiable); `?inline=1` shows an image inline
/// (other kinds are always attachments).
pub async fn download(
    State(state): State<AppState>,
    auth: Auth,
    ip: crate::auth::ClientIp,
    Path(id): Path<Uuid>,
    Query(p): Query<DownloadParams>,
    req: Request,
) -> AppResult<Response> {
    let mut tx = auth.read_tx(&state).await?;
    let source = super::visible_source(&mut tx, id).await?;
    let file = super::original_file(&mut tx, &state.config, &source).await?;
    tx.commit().await?;
    let Some(file) = file else { return Err(file_missing(&source)) };
    let len = file.metadata().map_err(|e| AppError::Internal(e.into()))?.len();
    let mime = mime_of(&source);
    let inline = p.inline.as_deref().is_some_and(|v| v == "1" || v == "true") && source.kind == SourceKind::Image;
    let range = req.headers().get(header::RANGE).and_then(|v| v.to_str().ok()).map(|v| byte_range(v, len));
    // A download of the original (not an image shown inline, not a later piece of a range).
    if !inline && range.as_ref().is_none_or(|r| r.is_some_and(|(a, _)| a == 0)) {
        let mut tx = auth.tx(&state).await?;
        let target = format!("source:{id} {}", source.file_name());
        auth.audit(&mut tx, &ip, crate::audit::Action::SourceDownload, target, "").await?;
        tx.commit().await?;
    }
    let (status, start, count) = match range {
        Some(Some((a, b))) => (StatusCode::PARTIAL_CONTENT, a, b - a + 1),
        Some(None) => {
            let mut r = StatusCode::RANGE_NOT_SATISFIABLE.into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return Ok(r);
        }
        None => (StatusCode::OK, 0, len),
    };
    let mut file = tokio::fs::File::from_std(file);
    if start > 0 {
        use tokio::io::AsyncSeekExt;
        file.seek(std::io::SeekFrom::Start(start)).await.map_err(|e| AppError::Internal(e.into()))?;
    }
    let body = Body::from_stream(chunks(file, count));
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_str(&mime).unwrap_or(HeaderValue::from_static("application/octet-stream")));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if status == StatusCode::PARTIAL_CONTENT
        && let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{}/{len}", start + count - 1))
    {
        h.insert(header::CONTENT_RANGE, v);
    }
    let disposition = super::content_disposition(if inline { "inline" } else { "attachment" }, source.file_name());
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("default-src 'none'; sandbox"));
    Ok(resp)
}

/// One `bytes=` range of a `len`-byte body: `Some((first, last))` inclusive, `None` when
/// unsatisfiable. Several ranges are not supported (treated as unsatisfiable).
fn byte_range(v: &str, len: u64) -> Option<(u64, u64)> {
    let spec = v.trim().strip_prefix("bytes=")?.trim();
    if spec.contains(',') || len == 0 {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    let (first, last) = if a.is_empty() {
        let n: u64 = b.parse().ok()?;
        if n == 0 {
            return None;
        }
        (len.saturating_sub(n), len - 1)
    } else {
        let first: u64 = a.parse().ok()?;
        let last = if b.is_empty() { len - 1 } else { b.parse::<u64>().ok()?.min(len - 1) };
        (first, last)
    };
    (first <= last && first < len).then_some((first, last))
}

/// `count` bytes of `file` from its current offset, in 64 KiB chunks (fewer if it shrank).
/// `ReaderStream` is fused: polled again after its end (the compression layer does) it
/// answers `None` again instead of panicking like a bare `stream::unfold`.
fn chunks(file: tokio::fs::File, count: u64) -> tokio_util::io::ReaderStream<tokio::io::Take<tokio::fs::File>> {
    use tokio::io::AsyncReadExt;
    tokio_util::io::ReaderStream::with_capacity(file.take(count), 64 * 1024)
}

#[derive(Debug, Default, Deserialize)]
pub struct PngParams {
    #[serde(default)]
    scale: Option<f64>,
}

/// `GET /sources/{id}/pages/{n}.png?scale=S`: one page rendered by pdfium (or an image the
/// browser cannot show as PNG), cached by (sha256, page, scale), with `ETag`/`304`.
pub async fn page_png(
    State(state): State<AppState>,
    auth: Auth,
    Path((id, name)): Path<(Uuid, String)>,
    Query(p): Query<PngParams>,
    headers: HeaderMap,
) -> AppResult<Response> {
    let n: u32 = name.strip_suffix(".png").and_then(|s| s.parse().ok()).filter(|n| *n >= 1).ok_or(AppError::NotFound)?;
    let mut tx = auth.read_tx(&state).await?;
    let source = super::visible_source(&mut tx, id).await?;
    if !source.kind.is_paged() && source.kind != SourceKind::Slides {
        return Err(AppError::NotFound);
    }
    let size = sqlx::query!(
        "select (a.source_map->'pages'->($2::int - 1)->>'width')::float8 as width,
                (a.source_map->'pages'->($2::int - 1)->>'height')::float8 as height
         from source_artifact a join source s on s.tenant_id = a.tenant_id and s.id = a.source_id
         where a.tenant_id = $3 and a.source_id = $1 and a.source_hash = s.indexed_hash",
        id,
        n as i32,
        auth.tenant_id,
    )
    .fetch_optional(&mut *tx)
    .await?
    .map(|r| (r.width, r.height));
    let file = super::original_file(&mut tx, &state.config, &source).await?;
    tx.commit().await?;
    let (w, h) = match size {
        Some((Some(w), Some(h))) => (w, h),
        _ => return Err(AppError::NotFound), // no such page (or not indexed yet)
    };
    let (scale, px) = if source.kind == SourceKind::Image {
        if n != 1 {
            return Err(AppError::NotFound);
        }
        (1.0, (w.round() as u32, h.round() as u32))
    } else {
        let s = render::normalise_scale(p.scale);
        (s, render::pixel_size(w, h, s))
    };
    let hash = source.indexed_hash.clone().unwrap_or_else(|| source.sha256.clone());
    let path = render::cache_path(&state.config.data_dir, &hash, n, scale);
    let etag = format!("\"{}-p{n}-s{}\"", hash.trim_start_matches("sha256:").get(..16).unwrap_or("0"), (scale * 100.0) as u32);
    let cache_headers = |mut r: Response, hit: &'static str| {
        let h = r.headers_mut();
        h.insert(header::ETAG, HeaderValue::from_str(&etag).expect("ascii etag"));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=86400"));
        h.insert("x-mnote-cache", HeaderValue::from_static(hit));
        r
    };
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut hit = "hit";
    if !path.is_file() {
        // Rendering needs the very bytes that were indexed (the boxes belong to them).
        let file = match file {
            Some(f) if source.indexed_hash.as_deref().is_none_or(|h| h == source.sha256) => f,
            _ => return Err(file_missing(&source)),
        };
        let (kind, file) = match source.kind {
            SourceKind::Slides => ("pdf", slides_pdf(&state, file, &hash).await?),
            k => (k.as_str(), file),
        };
        render::render_supervised(&state.config.parser_exe, kind, file, n, px, &path).await.map_err(|e| {
            tracing::warn!(source.id = %id, page = n, "page render failed: {e}");
            AppError::Internal(anyhow::anyhow!("{e}"))
        })?;
        hit = "miss";
    }
    if matches {
        return Ok(cache_headers(StatusCode::NOT_MODIFIED.into_response(), hit));
    }
    let bytes = tokio::fs::read(&path).await.map_err(|e| AppError::Internal(e.into()))?;
    Ok(cache_headers(([(header::CONTENT_TYPE, "image/png")], bytes).into_response(), hit))
}

/// A deck's PDF (LibreOffice, once per version), opened; without LibreOffice there is no
/// slide image (`404`: the viewer shows the text layout instead).
async fn slides_pdf(state: &AppState, file: std::fs::File, hash: &str) -> AppResult<std::fs::File> {
    let soffice = state.config.soffice.as_deref().ok_or(AppError::NotFound)?;
    let pdf = crate::ingest::slides::render::pdf_of(&state.config, soffice, file, hash).await.map_err(|e| {
        tracing::warn!("slides conversion failed: {e}");
        AppError::Internal(anyhow::anyhow!("{e}"))
    })?;
    std::fs::File::open(pdf).map_err(|e| AppError::Internal(e.into()))
}

/// `GET /api/sources/{id}/source-map.json`: the stored artifact's source map (the indexed version).
pub async fn source_map(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Response> {
    let mut tx = auth.tx(&state).await?;
    super::visible_source(&mut tx, id).await?;
    let art = crate::ingest::index::load_artifact(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(axum::Json(art.source_map).into_response())
}

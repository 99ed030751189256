//! Spreadsheets and CSV in the viewer: the sheet as a grid read from the original file (the
//! same reader and limits as the parse, after checking the file is the indexed version), with
//! sheet tabs, a frozen header row, the cited cells highlighted, and a window of rows around
//! them: further windows come from `GET /sources/{id}/sheet-rows` (HTML rows, same access rules)
//! or, without JavaScript, from the "more rows" link. No formula is evaluated, no script runs.

use std::sync::{Arc, Mutex, OnceLock};

use askama::Template;
use axum::{
    extract::{Path, Query, State},
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use futures_util::future::BoxFuture;
use serde::Deserialize;
use uuid::Uuid;

use super::parts::{
    CellView, FoundLink, GridView, KindView, OutlineLink, RowView, RowsFragment, SheetTab, ViewBody, ViewInput, flow_body,
};
use crate::{
    auth::Auth,
    error::{AppError, AppResult},
    evidence::cells::{col_letters, parse_range},
    ingest::sheet::{
        self,
        grid::{Merge, SheetGrid, Workbook},
    },
    state::AppState,
};

/// Rows in one window of the grid.
pub const WINDOW: u32 = 100;
/// Rows shown above the cited one.
const CONTEXT_ABOVE: u32 = 10;
/// Columns shown at most.
const MAX_COLUMNS: u32 = 200;

/// Values longer than this wrap in the grid.
const WRAP_AFTER: usize = 40;

/// The grid view.
pub struct Grid;

impl KindView for Grid {
    fn render<'a>(&'a self, i: ViewInput<'a>) -> BoxFuture<'a, AppResult<ViewBody>> {
        Box::pin(async move {
            let wb = match i.file.as_ref() {
                Some(f) => load(f, i.source, &i.state.config).await?,
                None => None,
            };
            let Some(wb) = wb else {
                let mut body = flow_body(&i, "text");
                body.grid = Some(GridView::fallback());
                return Ok(body);
            };
            Ok(ViewBody {
                grid: Some(grid_view(&i, &wb)),
                outline: sheet_outline(&i),
                found: found_cells(&i),
                ..ViewBody::default()
            })
        })
    }
}

/// Recently read originals by content hash (a grid's windows read the same workbook again).
type Cached = Mutex<Vec<(String, Arc<Workbook>)>>;

fn cache() -> &'static Cached {
    static CACHE: OnceLock<Cached> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Vec::new()))
}
const CACHED: usize = 4;

/// The original's cells when it is the indexed version (`None`: changed or unreadable now).
/// The file is read and hashed on every call; only the parse is cached, by that hash.
async fn load(
    file: &std::fs::File,
    source: &crate::sources::Source,
    cfg: &crate::config::Config,
) -> AppResult<Option<Arc<Workbook>>> {
    let (max_bytes, max_rows) = (cfg.parse_max_bytes, cfg.parse_max_rows);
    let Some(indexed) = source.indexed_hash.clone() else { return Ok(None) };
    let file = file.try_clone().map_err(|e| AppError::Internal(e.into()))?;
    let (kind, name) = (source.kind.as_str().to_string(), source.file_name().to_string());
    let read = tokio::task::spawn_blocking(move || -> Option<Arc<Workbook>> {
        use std::io::Read;
        let mut bytes = Vec::new();
        file.take(max_bytes + 1).read_to_end(&mut bytes).ok()?;
        if bytes.len() as u64 > max_bytes || crate::ingest::artifact::source_hash(&bytes) != indexed {
            return None;
        }
        if let Some(wb) = cache().lock().ok().and_then(|c| c.iter().find(|(h, _)| *h == indexed).map(|(_, w)| w.clone())) {
            return Some(wb);
        }
        let wb = Arc::new(sheet::read_original(&kind, &bytes, &name, max_rows).ok()?);
        if let Ok(mut c) = cache().lock() {
            c.retain(|(k, _)| *k != indexed);
            c.push((indexed, wb.clone()));
            if c.len() > CACHED {
                c.remove(0);
            }
        }
        Some(wb)
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))?;
    Ok(read)
}

/// The cells a citation names: `(sheet, first, last, class)`.
struct Cited {
    sheet: Option<String>,
    ranges: Vec<CitedRange>,
}

fn cited(i: &ViewInput<'_>) -> Cited {
    let block = i.target.and_then(|t| t.block_id.as_deref()).and_then(|b| i.art.all_blocks().find(|x| x.id == b));
    let exact = i.target.is_some_and(|t| t.exact);
    let mut ranges = Vec::new();
    let sheet = match block {
        Some(b) => {
            if let Some((a, z)) = b.cell_range.as_deref().and_then(parse_range) {
                ranges.push((a, z, if exact { "hl" } else { "hl-approx" }));
            }
            let span = super::span_ids(i.art, i.target);
            for s in i.art.all_blocks().filter(|x| span.contains(&x.id) && x.sheet == b.sheet) {
                if let Some((a, z)) = s.cell_range.as_deref().and_then(parse_range) {
                    ranges.push((a, z, "hl-span"));
                }
            }
            b.sheet.clone()
        }
        None => {
            if let Some((a, z)) = i.hints.cells.as_deref().and_then(parse_range) {
                ranges.push((a, z, "hl-approx"));
            }
            i.hints.sheet.clone()
        }
    };
    Cited { sheet, ranges }
}

/// The viewer at a sheet tab and a first row (1-based), keeping the citation.
fn grid_link(base: &str, tab: Option<&str>, row: Option<u32>) -> String {
    let mut q: Vec<(&str, String)> = Vec::new();
    if let Some(t) = tab {
        q.push(("tab", t.to_string()));
    }
    if let Some(r) = row {
        q.push(("row", r.to_string()));
    }
    let sep = if base.contains('?') { '&' } else { '?' };
    if q.is_empty() { base.to_string() } else { format!("{base}{sep}{}", serde_urlencoded::to_string(&q).unwrap_or_default()) }
}

/// The outline of a workbook: its sheets, each opening its tab.
fn sheet_outline(i: &ViewInput<'_>) -> Vec<OutlineLink> {
    let base = i.carry.url(None, None);
    let sections = &i.art.source_map.sections;
    sections
        .iter()
        .map(|s| OutlineLink { title: s.title.clone(), level: 1, href: grid_link(&base, Some(&s.title), None) })
        .collect()
}

/// The find's results as links to their rows (the window starting at the row, `#r<row>`).
fn found_cells(i: &ViewInput<'_>) -> Vec<FoundLink> {
    let base = i.carry.url(None, Some(i.find));
    let wanted: std::collections::HashSet<&str> = i.found.iter().map(|f| f.block_id.as_str()).collect();
    let blocks: std::collections::HashMap<&str, &crate::ingest::artifact::Block> =
        i.art.all_blocks().filter(|b| wanted.contains(b.id.as_str())).map(|b| (b.id.as_str(), b)).collect();
    i.found
        .iter()
        .map(|f| {
            let block = blocks.get(f.block_id.as_str());
            let row = block.and_then(|b| b.cell_range.as_deref()).and_then(parse_range).map(|(a, _)| a.0 + 1);
            let href = match row {
                Some(r) => format!("{}#r{r}", grid_link(&base, block.and_then(|b| b.sheet.as_deref()), Some(r))),
                None => base.clone(),
            };
            FoundLink { snippet_html: f.snippet_html.clone(), page: None, href }
        })
        .collect()
}

fn grid_view(i: &ViewInput<'_>, wb: &Workbook) -> GridView {
    let cited = cited(i);
    let current = i
        .hints
        .tab
        .as_deref()
        .and_then(|t| wb.sheets.iter().position(|s| s.name.as_deref() == Some(t)))
        .or_else(|| cited.sheet.as_deref().and_then(|c| wb.sheets.iter().position(|s| s.name.as_deref() == Some(c))))
        .unwrap_or(0);
    let base = i.carry.url(None, None);
    let link = |tab: Option<&str>, row: Option<u32>| grid_link(&base, tab, row);
    let tabs = wb
        .sheets
        .iter()
        .enumerate()
        .filter_map(|(n, s)| {
            let name = s.name.clone()?;
            Some(SheetTab { href: link(Some(&name), None), current: n == current, hidden: s.hidden, name })
        })
        .collect();
    let Some(sheet) = wb.sheets.get(current) else { return GridView::fallback() };
    let on_sheet = cited.sheet == sheet.name;
    let ranges: Vec<_> = if on_sheet { cited.ranges } else { Vec::new() };
    let header = sheet::blocks::header_row(sheet);
    let total = sheet.rows.last().map(|r| r.row + 1).unwrap_or(0);
    let first = match (i.hints.row, ranges.first()) {
        (Some(r), _) => r.saturating_sub(1),
        (None, Some((a, _, _))) => a.0.saturating_sub(CONTEXT_ABOVE),
        (None, None) => 0,
    }
    .min(total.saturating_sub(1));
    let last = (first + WINDOW).min(total);
    let width = sheet.width().clamp(1, MAX_COLUMNS);
    let rows = window(sheet, first, last, width, header, &ranges, true);
    let tab = sheet.name.as_deref();
    let more = (last < total).then_some(last);
    let mut sheet_q: Vec<(&str, String)> = vec![("from", last.to_string())];
    if let Some(t) = tab {
        sheet_q.push(("sheet", t.to_string()));
    }
    if let Some(((a, b), (c, d), _)) = ranges.first() {
        sheet_q.push(("cells", format!("{}{}:{}{}", col_letters(*b), a + 1, col_letters(*d), c + 1)));
    }
    GridView {
        tabs,
        columns: (0..width).map(col_letters).collect(),
        header: header.map(|h| row_view(sheet, h, width, &[], &merges_in(sheet, h, h + 1), false)),
        rows: RowsFragment { rows },
        more_url: more.map(|_| {
            format!("/sources/{}/sheet-rows?{}", i.source.id, serde_urlencoded::to_string(&sheet_q).unwrap_or_default())
        }),
        more_href: more.map(|m| link(tab, Some(m + 1))),
        prev_href: (first > 0).then(|| link(tab, Some(first.saturating_sub(WINDOW) + 1))),
        first_row: first + 1,
        last_row: last,
        total_rows: total,
        fallback: false,
    }
}

/// Cited cells: inclusive corners and the highlight class.
type CitedRange = ((u32, u32), (u32, u32), &'static str);
type Ranges = [CitedRange];

/// Rows `first..last` (0-based, empty rows included; the header row is left to the `thead`).
fn window(
    sheet: &SheetGrid,
    first: u32,
    last: u32,
    width: u32,
    header: Option<u32>,
    ranges: &Ranges,
    anchor: bool,
) -> Vec<RowView> {
    let mut anchored = !anchor;
    let merges = merges_in(sheet, first, last);
    (first..last)
        .filter(|r| Some(*r) != header)
        .map(|r| {
            let mut v = row_view(sheet, r, width, ranges, &merges, !anchored);
            if v.cells.iter().any(|c| c.anchor) {
                anchored = true;
            }
            v.number = r + 1;
            v
        })
        .collect()
}

/// Merged regions shown on a window (at most this many are marked).
const WINDOW_MERGES: usize = 1_000;

/// The merged regions over rows `first..last`.
fn merges_in(sheet: &SheetGrid, first: u32, last: u32) -> Vec<Merge> {
    sheet.merges.iter().filter(|((a, _), (y, _))| *a < last && *y >= first).map(|(a, z)| (*a, *z)).take(WINDOW_MERGES).collect()
}

fn row_view(sheet: &SheetGrid, r: u32, width: u32, ranges: &Ranges, merges: &[Merge], may_anchor: bool) -> RowView {
    let grid_row = sheet.rows.binary_search_by_key(&r, |x| x.row).ok().map(|i| &sheet.rows[i]);
    let mut anchored = !may_anchor;
    let cells = (0..width)
        .map(|c| {
            let text = grid_row.and_then(|g| g.cells.iter().find(|x| x.col == c)).map(|x| x.text.clone()).unwrap_or_default();
            let class = ranges
                .iter()
                .find(|((a, b), (y, z), _)| (*a..=*y).contains(&r) && (*b..=*z).contains(&c))
                .map(|x| x.2)
                .unwrap_or("");
            let anchor = !anchored && (class == "hl" || class == "hl-approx");
            anchored |= anchor;
            let merged = sheet.merge_at(r, c).map(|(a, z)| crate::evidence::cells::range_ref(a, z));
            let covered =
                merged.is_none() && merges.iter().any(|((a, b), (y, z))| (*a..=*y).contains(&r) && (*b..=*z).contains(&c));
            let wrap = text.contains('\n') || text.chars().count() > WRAP_AFTER;
            CellView { text, class, anchor, merged, covered, wrap }
        })
        .collect();
    RowView { number: r + 1, cells }
}

#[derive(Debug, Default, Deserialize)]
pub struct RowsParams {
    #[serde(default)]
    sheet: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    cells: Option<String>,
}

/// `GET /sources/{id}/sheet-rows?sheet=&from=&cells=`: the next window of a sheet as HTML
/// table rows (`X-Mnote-Next-Row`: where the one after starts, absent at the end).
pub async fn rows(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(p): Query<RowsParams>,
) -> AppResult<Response> {
    let from: u32 = match p.from.as_deref() {
        Some(f) => f.trim().parse().map_err(|_| AppError::invalid("from", "a row number"))?,
        None => 0,
    };
    let mut tx = auth.read_tx(&state).await?;
    let source = super::visible_source(&mut tx, id).await?;
    let file = super::original_file(&mut tx, &state.config, &source).await?;
    tx.commit().await?;
    if !matches!(source.kind.as_str(), "spreadsheet" | "csv") {
        return Err(AppError::NotFound);
    }
    let Some(file) = file else { return Err(AppError::NotFound) };
    let Some(wb) = load(&file, &source, &state.config).await? else { return Err(AppError::NotFound) };
    let sheet = match p.sheet.as_deref() {
        Some(name) => wb.sheets.iter().find(|s| s.name.as_deref() == Some(name)).ok_or(AppError::NotFound)?,
        None => wb.sheets.first().ok_or(AppError::NotFound)?,
    };
    let ranges: Vec<_> = p.cells.as_deref().and_then(parse_range).map(|(a, z)| vec![(a, z, "hl")]).unwrap_or_default();
    let total = sheet.rows.last().map(|r| r.row + 1).unwrap_or(0);
    let last = from.saturating_add(WINDOW).min(total);
    let width = sheet.width().clamp(1, MAX_COLUMNS);
    let fragment =
        RowsFragment { rows: window(sheet, from.min(total), last, width, sheet::blocks::header_row(sheet), &ranges, false) };
    let html = fragment.render().map_err(|e| AppError::Internal(e.into()))?;
    let mut resp = ([(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"))], html).into_response();
    if last < total {
        resp.headers_mut().insert("x-mnote-next-row", HeaderValue::from(last));
    }
    Ok(resp)
}

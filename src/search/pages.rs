//! The search page (`GET /search?q=&mode=&kb=&kind=&page=&source=`): a plain GET form over
//! the same search core as `POST /api/evidence/search`, rendered on the server (works without
//! JavaScript). Results come grouped by document (its best passages, "n more in this
//! document" linking to `source=` with all of them), with the true total and pages.

use askama::Template;
use axum::{
    extract::{Query, State},
    http::StatusCode,
    response::Response,
};
use std::collections::HashMap;

use serde::Deserialize;
use uuid::Uuid;

use super::query::{self, GroupBy, Hit, Mode, SearchError, SearchRequest, SearchResponse};
use crate::{
    error::AppResult,
    evidence::{Locator, PlacePart, Quality, SourceKind},
    kbs,
    state::AppState,
    web::{Page, PageCtx, render},
};

/// Documents per page.
const PAGE_DOCS: usize = 10;
/// Passages shown per document.
const PER_DOC: usize = 3;
/// Passages per page when one document's matches are listed (`source=`).
const PAGE_PASSAGES: usize = 20;
const MODES: [&str; 4] = ["hybrid", "lexical", "vector", "graph"];

#[derive(Debug, Default, Deserialize)]
pub struct SearchParams {
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    kb: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    /// 1-based page number.
    #[serde(default)]
    page: Option<String>,
    /// One document's matches only.
    #[serde(default)]
    source: Option<String>,
}

/// A `<select>` option: value, label, selected, and a one-line explanation (modes).
pub struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
    pub help: String,
}

/// One passage as the page shows it (the score stays in the API: its scale differs per mode).
pub struct HitView {
    /// The quote cut at the highlights: (text, highlighted).
    pub segments: Vec<(String, bool)>,
    /// "Page 3", "A › B", "Lines 4–6" in the UI language: (text, may wrap).
    pub locator: Vec<(String, bool)>,
    /// Quality when it is not `exact`.
    pub quality: Option<String>,
    pub ocr: bool,
    pub stale: bool,
    pub url: String,
    pub citation: String,
}

/// One document with its best passages.
pub struct GroupView {
    pub title: String,
    pub path: String,
    pub kind: String,
    pub kb: String,
    /// "2026-11-30", the file's modification date.
    pub date: String,
    pub url: String,
    pub hits: Vec<HitView>,
    /// "3 more in this document" and where they are listed.
    pub more: Option<(String, String)>,
}

/// A link to another page of results.
pub struct PageLink {
    pub label: String,
    pub url: String,
    pub rel: &'static str,
}

pub struct Outcome {
    pub groups: Vec<GroupView>,
    pub summary: String,
    /// "Page 2 of 5" when there is more than one.
    pub page_of: Option<String>,
    pub pages: Vec<PageLink>,
    /// `source=`: the document whose matches are listed, and the link back to all results.
    pub within: Option<(String, String)>,
    pub degraded: bool,
    pub vector_off: bool,
}

#[derive(Template)]
#[template(path = "search/search.html")]
struct SearchPage {
    ctx: PageCtx,
    q: String,
    modes: Vec<Choice>,
    kbs: Vec<Choice>,
    kinds: Vec<Choice>,
    /// The selected mode's one-line explanation.
    mode_help: String,
    source: String,
    error: Option<String>,
    outcome: Option<Outcome>,
}

/// Cut `quote` into plain and highlighted runs. `ranges` are `[start, end)` code-point
/// offsets; overlapping, unsorted or out-of-range ones are tolerated.
pub fn segments(quote: &str, ranges: &[[usize; 2]]) -> Vec<(String, bool)> {
    let chars: Vec<char> = quote.chars().collect();
    let n = chars.len();
    let mut rs: Vec<(usize, usize)> = ranges.iter().map(|r| (r[0].min(n), r[1].min(n))).filter(|(s, e)| s < e).collect();
    rs.sort();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in rs {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let hide = markup_mask(&chars);
    let piece = |a: usize, b: usize| -> String { (a..b).filter(|i| !hide[*i]).map(|i| chars[i]).collect() };
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut push = |text: String, marked: bool| {
        if !text.is_empty() {
            out.push((text, marked));
        }
    };
    let mut at = 0;
    for (s, e) in merged {
        if s > at {
            push(piece(at, s), false);
        }
        push(piece(s, e), true);
        at = e;
    }
    if at < n {
        push(piece(at, n), false);
    }
    out
}

/// The characters of a quote that are Markdown code markup, not text: a fence (three or more
/// backticks or tildes, with its language word and line end) and inline-code backticks. A
/// quote shows the code, never the fences around it.
fn markup_mask(chars: &[char]) -> Vec<bool> {
    let n = chars.len();
    let mut hide = vec![false; n];
    let mut i = 0;
    while i < n {
        let c = chars[i];
        if c != '`' && c != '~' {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < n && chars[j] == c {
            j += 1;
        }
        let end = if j - i >= 3 {
            // A fence: its info string (one word, e.g. `rust`) and the line end go too.
            let mut k = j;
            while k < n && chars[k] != '\n' {
                k += 1;
            }
            let info_is_word = chars[j..k].iter().all(|c| c.is_alphanumeric() || "-_+.#".contains(*c));
            if info_is_word { (k + 1).min(n) } else { j }
        } else if c == '`' {
            j
        } else {
            i // one or two tildes are text
        };
        for h in hide.iter_mut().take(end).skip(i) {
            *h = true;
        }
        i = end.max(i + 1);
    }
    hide
}

/// The parts of "Page 3 · Heading › Sub · Lines 4–6 · Paragraph 7" from a locator, in the UI
/// language, each with whether it may wrap (only the section path does).
pub fn locator_parts(ctx: &PageCtx, loc: &Locator) -> Vec<(String, bool)> {
    let hidden = (loc.sheet_hidden == Some(true)).then(|| (ctx.t("search.loc_hidden_sheet"), false));
    loc.place()
        .parts()
        .into_iter()
        .map(|part| match part {
            PlacePart::Page(p) => (ctx.t("search.loc_page").replace("{n}", &p.to_string()), false),
            PlacePart::Slide(p) => (ctx.t("search.loc_slide").replace("{n}", &p.to_string()), false),
            PlacePart::Sections(names) => (names.join(" › "), true),
            PlacePart::Lines(a, b) => {
                (ctx.t("search.loc_lines").replace("{a}", &a.to_string()).replace("{b}", &b.to_string()), false)
            }
            PlacePart::Line(a) => (ctx.t("search.loc_line").replace("{n}", &a.to_string()), false),
            PlacePart::Paragraph(o) => (ctx.t("search.loc_paragraph").replace("{n}", &o.to_string()), false),
            PlacePart::Cells(c) => (c, false),
        })
        .chain(hidden)
        .collect()
}

fn hit_view(ctx: &PageCtx, hit: &Hit) -> HitView {
    let h = &hit.api;
    let quality = (h.source.quality != Quality::Exact).then(|| ctx.tk("search.quality", h.source.quality.as_str()));
    HitView {
        segments: segments(&h.quote, &h.highlights),
        locator: locator_parts(ctx, &h.source),
        quality,
        ocr: hit.is_ocr,
        stale: h.stale,
        url: h.open_action.url.clone(),
        citation: h.citation_markdown.clone(),
    }
}

/// The search page's URL with these parameters (empty ones left out).
fn page_url(params: &[(&str, &str)]) -> String {
    let kept: Vec<(&str, &str)> = params.iter().copied().filter(|(_, v)| !v.is_empty()).collect();
    format!("/search?{}", serde_urlencoded::to_string(kept).unwrap_or_default())
}

/// What the page's links keep: the query and its filters.
struct Current<'a> {
    q: &'a str,
    mode: &'a str,
    kb: &'a str,
    kind: &'a str,
    source: &'a str,
}

impl Current<'_> {
    fn url(&self, source: &str, page: usize) -> String {
        let page = if page > 1 { page.to_string() } else { String::new() };
        page_url(&[("q", self.q), ("mode", self.mode), ("kb", self.kb), ("kind", self.kind), ("source", source), ("page", &page)])
    }
}

fn outcome(ctx: &PageCtx, cur: &Current, kb_names: &HashMap<Uuid, String>, page_no: usize, resp: SearchResponse<Hit>) -> Outcome {
    let degraded = resp.degraded;
    let vector_off = !degraded && resp.fusion.as_ref().is_some_and(|f| f.vector_weight == 0.0);
    let paging = resp.paging.clone();
    let (total, lower, docs, next) = match &paging {
        Some(p) => (p.total, p.total_is_lower_bound, p.total_documents, p.next_offset),
        None => (resp.results.len(), false, None, None),
    };
    let docs = docs.unwrap_or_else(|| {
        let mut ids: Vec<Uuid> = resp.results.iter().map(|h| h.source_id).collect();
        ids.sort();
        ids.dedup();
        ids.len()
    });
    let key = if lower { "search.total_at_least" } else { "search.total" };
    let summary = ctx
        .t(key)
        .replace("{n}", &ctx.count(total, "passage"))
        .replace("{d}", &ctx.count(docs, "document"))
        .replace("{ms}", &format!("{:.0}", resp.took_ms.max(1.0)));
    let date = |h: &Hit| h.modified_at.map(|d| d.format("%Y-%m-%d").to_string()).unwrap_or_default();
    let view = |h: &Hit, hits: Vec<HitView>, more: Option<(String, String)>| GroupView {
        title: h.source_title.clone(),
        path: h.resource_path.clone(),
        kind: ctx.tk("kind", h.kind.as_str()),
        kb: kb_names.get(&h.source.kb_id).cloned().unwrap_or_default(),
        date: date(h),
        url: h.open_action.url.clone(),
        hits,
        more,
    };
    let mut groups = Vec::new();
    let mut within = None;
    let per_page = if cur.source.is_empty() { PAGE_DOCS } else { PAGE_PASSAGES };
    let units = if cur.source.is_empty() { docs } else { total };
    match paging.as_ref().and_then(|p| p.groups.as_ref()) {
        Some(gs) => {
            for g in gs {
                let hits = &resp.results[g.result_range[0]..g.result_range[1]];
                let Some(first) = hits.first() else { continue };
                let rest = g.total - hits.len();
                let more = (rest > 0).then(|| {
                    (ctx.t("search.more_in_doc").replace("{n}", &rest.to_string()), cur.url(&g.source_id.to_string(), 1))
                });
                groups.push(view(first, hits.iter().map(|h| hit_view(ctx, h)).collect(), more));
            }
        }
        None => {
            if let Some(first) = resp.results.first() {
                within = Some((ctx.t("search.within").replace("{title}", &first.source_title), cur.url("", 1)));
                groups.push(view(first, resp.results.iter().map(|h| hit_view(ctx, h)).collect(), None));
            }
        }
    }
    let page_count = units.div_ceil(per_page).max(1);
    let page_of = (page_count > 1)
        .then(|| ctx.t("search.page_of").replace("{n}", &page_no.to_string()).replace("{total}", &page_count.to_string()));
    let mut pages = Vec::new();
    if page_no > 1 {
        pages.push(PageLink { label: ctx.t("search.prev_page"), url: cur.url(cur.source, page_no - 1), rel: "prev" });
    }
    if next.is_some() {
        pages.push(PageLink { label: ctx.t("search.next_page"), url: cur.url(cur.source, page_no + 1), rel: "next" });
    }
    Outcome { groups, summary, page_of, pages, within, degraded, vector_off }
}

/// `GET /search`
pub async fn search_page(
    State(state): State<AppState>,
    session: tower_sessions::Session,
    page: Page,
    Query(p): Query<SearchParams>,
) -> AppResult<Response> {
    let ctx = page.ctx;
    let q = p.q.unwrap_or_default();
    let mode_s = p.mode.filter(|m| !m.is_empty()).unwrap_or_else(|| "hybrid".into());
    let kb_s = p.kb.unwrap_or_default();
    let kind_s = p.kind.unwrap_or_default();
    let source_s = p.source.unwrap_or_default();

    let mut error = None;
    let mode = Mode::parse(&mode_s);
    if mode.is_none() {
        error = Some(ctx.t("search.bad_mode"));
    }
    let kb_id = if kb_s.is_empty() {
        None
    } else {
        match kb_s.parse::<Uuid>() {
            Ok(id) => Some(id),
            Err(_) => {
                error = Some(ctx.t("search.bad_kb"));
                None
            }
        }
    };
    let source_id = if source_s.is_empty() {
        None
    } else {
        match source_s.parse::<Uuid>() {
            Ok(id) => Some(id),
            Err(_) => {
                error = Some(ctx.t("search.bad_source"));
                None
            }
        }
    };
    let page_no = match p.page.as_deref().filter(|s| !s.is_empty()).map(str::parse::<usize>) {
        None => 1,
        Some(Ok(n)) if (1..=500).contains(&n) => n,
        Some(_) => {
            error = Some(ctx.t("search.bad_page"));
            1
        }
    };

    let mut tx = page.auth.read_tx(&state).await?;
    let kbs = kbs::queries::list_readable(&mut tx, page.auth.user_id, page.auth.role.is_admin()).await?;
    tx.commit().await?;
    let kb_names: HashMap<Uuid, String> = kbs.iter().map(|k| (k.id, k.name.clone())).collect();
    let mut outcome_v = None;
    if error.is_none() && !q.trim().is_empty() {
        crate::web::onboarding::mark_searched(&session).await?;
        let mut req = SearchRequest::new(q.clone(), mode.unwrap_or_default());
        req.kb_ids = kb_id.map(|id| vec![id]);
        req.kinds = (!kind_s.is_empty()).then(|| vec![kind_s.clone()]);
        match source_id {
            Some(id) => {
                req.source_ids = Some(vec![id]);
                req.top_k = Some(PAGE_PASSAGES);
                req.offset = Some((page_no - 1) * PAGE_PASSAGES);
            }
            None => {
                req.group_by = Some(GroupBy::Document);
                req.per_group = Some(PER_DOC);
                req.top_k = Some(PAGE_DOCS);
                req.offset = Some((page_no - 1) * PAGE_DOCS);
            }
        }
        let cur = Current { q: &q, mode: &mode_s, kb: &kb_s, kind: &kind_s, source: &source_s };
        match query::search_retrying(|| page.auth.read_tx(&state), &state.search_engine(), &req).await {
            Ok(resp) => outcome_v = Some(outcome(&ctx, &cur, &kb_names, page_no, resp)),
            Err(SearchError::Invalid(m)) => error = Some(m),
            Err(e) => return Err(e.into()),
        }
    }

    let modes: Vec<Choice> = MODES
        .iter()
        .map(|m| Choice {
            value: m.to_string(),
            label: ctx.tk("search.mode", m),
            selected: *m == mode_s,
            help: ctx.tk("search.mode_help", m),
        })
        .collect();
    let mode_help = modes.iter().find(|m| m.selected).map(|m| m.help.clone()).unwrap_or_default();
    let kb_choices = kbs
        .iter()
        .map(|k| Choice {
            value: k.id.to_string(),
            label: k.name.clone(),
            selected: k.id.to_string() == kb_s,
            help: String::new(),
        })
        .collect();
    let kinds = SourceKind::ALL
        .iter()
        .map(|k| Choice {
            value: k.to_string(),
            label: ctx.tk("kind", k.as_str()),
            selected: k.as_str() == kind_s,
            help: String::new(),
        })
        .collect();
    let status = if error.is_some() { StatusCode::UNPROCESSABLE_ENTITY } else { StatusCode::OK };
    let source = if error.is_none() { source_s } else { String::new() };
    let mut resp = render(SearchPage { ctx, q, modes, kbs: kb_choices, kinds, mode_help, source, error, outcome: outcome_v })?;
    *resp.status_mut() = status;
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(q: &str, r: &[[usize; 2]]) -> String {
        segments(q, r).into_iter().map(|(t, m)| if m { format!("[{t}]") } else { t }).collect()
    }

    #[test]
    fn quotes_show_code_without_its_fences_and_backticks() {
        assert_eq!(marked("```rust\nlet x = 1;\n```", &[[16, 17]]), "let x = [1];\n");
        assert_eq!(marked("Call `borrow()` first.", &[[6, 12]]), "Call [borrow]() first.");
        assert_eq!(marked("~~~\ncode\n~~~ and ~ok~", &[]), "code\n and ~ok~");
        assert_eq!(marked("``", &[[0, 2]]), "");
        assert_eq!(marked("a ``` b", &[]), "a  b");
    }

    #[test]
    fn segments_follow_code_points_and_tolerate_odd_ranges() {
        assert_eq!(marked("使用线程作用域可以", &[[2, 7]]), "使用[线程作用域]可以");
        assert_eq!(marked("abc def", &[[4, 7], [0, 1]]), "[a]bc [def]");
        assert_eq!(marked("abcdef", &[[1, 3], [2, 4]]), "a[bcd]ef");
        assert_eq!(marked("abc", &[[2, 99], [5, 6], [1, 1]]), "ab[c]");
        assert_eq!(marked("", &[[0, 1]]), "");
        assert_eq!(marked("<b>", &[]), "<b>");
    }
}

//! The search page (`GET /search?q=&mode=&kb=&kind=`): a plain GET form over the same search
//! core as `POST /api/evidence/search`, rendered on the server (works without JavaScript).

use askama::Template;
use axum::{
    extract::{Query, State},
    http::StatusCode,
    response::Response,
};
use serde::Deserialize;
use uuid::Uuid;

use super::query::{self, Hit, Mode, SearchError, SearchRequest, SearchResponse};
use crate::{
    error::AppResult,
    evidence::{Locator, PlacePart, Quality, SourceKind},
    kbs,
    state::AppState,
    web::{Page, PageCtx, render},
};

/// Results per page.
const PAGE_TOP_K: usize = 20;
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
}

/// A `<select>` option: value, label, selected.
pub struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

/// One result as the page shows it.
pub struct HitView {
    pub title: String,
    pub path: String,
    pub kind: String,
    /// The quote cut at the highlights: (text, highlighted).
    pub segments: Vec<(String, bool)>,
    /// "Page 3", "A › B", "Lines 4–6" in the UI language: (text, may wrap).
    pub locator: Vec<(String, bool)>,
    /// Quality when it is not `exact`.
    pub quality: Option<String>,
    pub ocr: bool,
    pub stale: bool,
    pub score: String,
    pub url: String,
    pub citation: String,
}

pub struct Outcome {
    pub hits: Vec<HitView>,
    pub summary: String,
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
    let mut out = Vec::new();
    let mut at = 0;
    for (s, e) in merged {
        if s > at {
            out.push((chars[at..s].iter().collect(), false));
        }
        out.push((chars[s..e].iter().collect(), true));
        at = e;
    }
    if at < n {
        out.push((chars[at..].iter().collect(), false));
    }
    out
}

/// The parts of "Page 3 · Heading › Sub · Lines 4–6 · Paragraph 7" from a locator, in the UI
/// language, each with whether it may wrap (only the section path does).
pub fn locator_parts(ctx: &PageCtx, loc: &Locator) -> Vec<(String, bool)> {
    loc.place()
        .parts()
        .into_iter()
        .map(|part| match part {
            PlacePart::Page(p) => (ctx.t("search.loc_page").replace("{n}", &p.to_string()), false),
            PlacePart::Sections(names) => (names.join(" › "), true),
            PlacePart::Lines(a, b) => {
                (ctx.t("search.loc_lines").replace("{a}", &a.to_string()).replace("{b}", &b.to_string()), false)
            }
            PlacePart::Line(a) => (ctx.t("search.loc_line").replace("{n}", &a.to_string()), false),
            PlacePart::Paragraph(o) => (ctx.t("search.loc_paragraph").replace("{n}", &o.to_string()), false),
        })
        .collect()
}

fn score_text(s: f64) -> String {
    if s.abs() >= 10.0 {
        format!("{s:.1}")
    } else if s.abs() >= 0.1 {
        format!("{s:.3}")
    } else {
        format!("{s:.4}")
    }
}

fn hit_view(ctx: &PageCtx, hit: Hit) -> HitView {
    let (h, ocr, kind, path) = (hit.api, hit.is_ocr, hit.kind, hit.resource_path);
    let quality = (h.source.quality != Quality::Exact).then(|| ctx.tk("search.quality", h.source.quality.as_str()));
    HitView {
        segments: segments(&h.quote, &h.highlights),
        locator: locator_parts(ctx, &h.source),
        quality,
        ocr,
        stale: h.stale,
        score: score_text(h.score),
        url: h.open_action.url,
        citation: h.citation_markdown,
        title: h.source_title,
        kind: ctx.tk("kind", kind.as_str()),
        path,
    }
}

fn outcome(ctx: &PageCtx, resp: SearchResponse<Hit>) -> Outcome {
    let degraded = resp.degraded;
    let vector_off = !degraded && resp.fusion.as_ref().is_some_and(|f| f.vector_weight == 0.0);
    let summary = ctx
        .t("search.summary")
        .replace("{n}", &resp.results.len().to_string())
        .replace("{ms}", &format!("{:.0}", resp.took_ms.max(1.0)));
    let hits = resp.results.into_iter().map(|h| hit_view(ctx, h)).collect();
    Outcome { hits, summary, degraded, vector_off }
}

/// `GET /search`
pub async fn search_page(State(state): State<AppState>, page: Page, Query(p): Query<SearchParams>) -> AppResult<Response> {
    let ctx = page.ctx;
    let q = p.q.unwrap_or_default();
    let mode_s = p.mode.filter(|m| !m.is_empty()).unwrap_or_else(|| "hybrid".into());
    let kb_s = p.kb.unwrap_or_default();
    let kind_s = p.kind.unwrap_or_default();

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

    let mut tx = page.auth.tx(&state).await?;
    let kbs = kbs::queries::list(&mut tx, page.auth.user_id, page.auth.role.is_admin()).await?;
    tx.commit().await?;
    let mut outcome_v = None;
    if error.is_none() && !q.trim().is_empty() {
        let mut req = SearchRequest::new(q.clone(), mode.unwrap_or_default());
        req.top_k = Some(PAGE_TOP_K);
        req.kb_ids = kb_id.map(|id| vec![id]);
        req.kinds = (!kind_s.is_empty()).then(|| vec![kind_s.clone()]);
        match query::search_retrying(|| page.auth.tx(&state), &state.search_engine(), &req).await {
            Ok(resp) => outcome_v = Some(outcome(&ctx, resp)),
            Err(SearchError::Invalid(m)) => error = Some(m),
            Err(e) => return Err(e.into()),
        }
    }

    let modes =
        MODES.iter().map(|m| Choice { value: m.to_string(), label: ctx.tk("search.mode", m), selected: *m == mode_s }).collect();
    let kb_choices = kbs
        .iter()
        .map(|k| Choice { value: k.id.to_string(), label: k.name.clone(), selected: k.id.to_string() == kb_s })
        .collect();
    let kinds = SourceKind::ALL
        .iter()
        .map(|k| Choice { value: k.to_string(), label: ctx.tk("kind", k.as_str()), selected: k.as_str() == kind_s })
        .collect();
    let status = if error.is_some() { StatusCode::UNPROCESSABLE_ENTITY } else { StatusCode::OK };
    let mut resp = render(SearchPage { ctx, q, modes, kbs: kb_choices, kinds, error, outcome: outcome_v })?;
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
    fn segments_follow_code_points_and_tolerate_odd_ranges() {
        assert_eq!(marked("使用线程作用域可以", &[[2, 7]]), "使用[线程作用域]可以");
        assert_eq!(marked("abc def", &[[4, 7], [0, 1]]), "[a]bc [def]");
        assert_eq!(marked("abcdef", &[[1, 3], [2, 4]]), "a[bcd]ef");
        assert_eq!(marked("abc", &[[2, 99], [5, 6], [1, 1]]), "ab[c]");
        assert_eq!(marked("", &[[0, 1]]), "");
        assert_eq!(marked("<b>", &[]), "<b>");
    }
}

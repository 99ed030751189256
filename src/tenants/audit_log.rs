//! Reading the team's audit log (admins): `GET /api/audit` (a page of rows as JSON, or every
//! matching row as CSV with `format=csv`), the page `/admin/audit` with its filters and
//! paging, and `/admin/audit/export` (CSV or JSON). The table and its SQL are `audit`'s.

use askama::Template;
use axum::{
    Json,
    extract::{Query, State},
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use chrono::NaiveDate;
use serde::Deserialize;

use crate::{
    audit::{
        self, Action,
        queries::{AuditEvent, AuditPage, Filter},
    },
    auth::Auth,
    error::{AppError, AppResult},
    state::AppState,
    web::{Page, PageCtx, render},
};

/// Rows per page (API default and the page).
pub const PAGE_SIZE: i64 = 50;
/// At most this many rows per API page.
pub const MAX_PAGE: i64 = 500;
/// At most this many rows in one export (newest first); narrow the filters for more.
pub const EXPORT_MAX: i64 = 50_000;

/// The filters of `GET /api/audit`, the page and the exports; an empty value is no filter.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct AuditQuery {
    /// One action, e.g. `sign_in`, `kb.create` (the `action` values of the rows).
    #[serde(default)]
    pub action: Option<String>,
    /// The actor's e-mail or a part of it (case-insensitive).
    #[serde(default)]
    pub person: Option<String>,
    /// First day (UTC, `YYYY-MM-DD`), inclusive.
    #[serde(default)]
    pub from: Option<String>,
    /// Last day (UTC, `YYYY-MM-DD`), inclusive.
    #[serde(default)]
    pub to: Option<String>,
    /// The `nextBefore` of the previous page.
    #[serde(default)]
    pub before: Option<i64>,
    /// Rows per page, 1–500 (default 50).
    #[serde(default)]
    pub limit: Option<i64>,
    /// `json` (default: one page) or `csv` (every matching row, up to 50 000).
    #[serde(default)]
    pub format: Option<String>,
}

fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

fn day(field: &str, v: &Option<String>) -> AppResult<Option<NaiveDate>> {
    given(v)
        .map(|s| NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|_| AppError::invalid(field, "a date as YYYY-MM-DD")))
        .transpose()
}

impl AuditQuery {
    /// The typed filter; a value that does not parse is `invalid_input` naming it.
    pub fn filter(&self) -> AppResult<Filter> {
        let action = given(&self.action).map(str::parse::<Action>).transpose()?;
        let person = given(&self.person).map(str::to_string);
        if person.as_ref().is_some_and(|p| p.chars().count() > 200) {
            return Err(AppError::invalid("person", "at most 200 characters"));
        }
        let (from, to) = (day("from", &self.from)?, day("to", &self.to)?);
        if let (Some(f), Some(t)) = (from, to)
            && f > t
        {
            return Err(AppError::invalid("to", "on or after from"));
        }
        Ok(Filter { action, person, from, to, before: self.before })
    }

    fn limit(&self) -> AppResult<i64> {
        match self.limit {
            None => Ok(PAGE_SIZE),
            Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
            Some(_) => Err(AppError::invalid("limit", "1–500")),
        }
    }

    fn format(&self) -> AppResult<Format> {
        match given(&self.format) {
            None | Some("json") => Ok(Format::Json),
            Some("csv") => Ok(Format::Csv),
            Some(_) => Err(AppError::invalid("format", "json or csv")),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Csv,
}

async fn page_of(state: &AppState, auth: &Auth, f: &Filter, limit: i64) -> AppResult<AuditPage> {
    auth.require_admin()?;
    let mut tx = auth.tx(state).await?;
    let page = audit::queries::list(&mut tx, f, limit).await?;
    tx.commit().await?;
    Ok(page)
}

/// Every matching row (newest first, at most [`EXPORT_MAX`]), ignoring `before`.
async fn all_of(state: &AppState, auth: &Auth, f: &Filter) -> AppResult<Vec<AuditEvent>> {
    let f = Filter { before: None, ..f.clone() };
    Ok(page_of(state, auth, &f, EXPORT_MAX).await?.items)
}

fn csv_response(rows: &[AuditEvent]) -> Response {
    let mut r = audit::export::csv(rows).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8"));
    h.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment; filename=\"audit.csv\""));
    r
}

/// `GET /api/audit` (admins): a page of the team's audit rows, newest first (`nextBefore`
/// pages on), or with `format=csv` every matching row as CSV.
pub async fn api_list(State(state): State<AppState>, auth: Auth, Query(q): Query<AuditQuery>) -> AppResult<Response> {
    let f = q.filter()?;
    match q.format()? {
        Format::Csv => Ok(csv_response(&all_of(&state, &auth, &f).await?)),
        Format::Json => Ok(Json(page_of(&state, &auth, &f, q.limit()?).await?).into_response()),
    }
}

/// `GET /admin/audit/export?format=csv|json&…filters`: the page's export buttons.
pub async fn export(State(state): State<AppState>, page: Page, Query(q): Query<AuditQuery>) -> AppResult<Response> {
    let f = q.filter()?;
    let rows = all_of(&state, &page.auth, &f).await?;
    if q.format()? == Format::Csv {
        return Ok(csv_response(&rows));
    }
    let mut r = Json(crate::error::Items { items: rows }).into_response();
    r.headers_mut().insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment; filename=\"audit.json\""));
    Ok(r)
}

#[derive(Template)]
#[template(path = "admin/audit.html")]
struct AuditLogPage {
    ctx: PageCtx,
    rows: Vec<AuditEvent>,
    actions: &'static [Action],
    q: AuditQuery,
    /// The filters as a query string (for the export links and the next page).
    filters: String,
    next: Option<String>,
    error: Option<String>,
}

impl AuditLogPage {
    fn selected(&self, a: &Action) -> bool {
        given(&self.q.action) == Some(a.as_str())
    }

    fn value<'a>(&self, v: &'a Option<String>) -> &'a str {
        v.as_deref().unwrap_or("")
    }
}

/// The filters as `action=…&person=…&from=…&to=…` (only those given).
fn query_string(q: &AuditQuery) -> String {
    let pairs = [("action", &q.action), ("person", &q.person), ("from", &q.from), ("to", &q.to)];
    let parts: Vec<String> =
        pairs.iter().filter_map(|(k, v)| given(v).map(|v| format!("{k}={}", crate::web::urlencode(v)))).collect();
    parts.join("&")
}

/// `GET /admin/audit`: filters (action, person, date range), a page of rows, the link to the
/// next (older) page and the CSV / JSON exports of what the filters select.
pub async fn audit_page(State(state): State<AppState>, page: Page, Query(q): Query<AuditQuery>) -> AppResult<Response> {
    page.auth.require_admin()?;
    let filters = query_string(&q);
    let (rows, next, error, status) = match q.filter() {
        Ok(f) => {
            let p = page_of(&state, &page.auth, &f, PAGE_SIZE).await?;
            let sep = if filters.is_empty() { "" } else { "&" };
            let next = p.next_before.map(|b| format!("/admin/audit?{filters}{sep}before={b}"));
            (p.items, next, None, None)
        }
        Err(e) => (Vec::new(), None, Some(crate::web::form_error(page.ctx.lang, &e)), Some(e.status())),
    };
    let mut r = render(AuditLogPage { ctx: page.ctx, rows, actions: Action::ALL, q, filters, next, error })?;
    if let Some(s) = status {
        *r.status_mut() = s;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_or_are_refused() {
        let q = AuditQuery { action: Some("kb.create".into()), from: Some("2026-12-01".into()), ..Default::default() };
        let f = q.filter().unwrap();
        assert_eq!(f.action, Some(Action::KbCreate));
        assert_eq!(f.from, NaiveDate::from_ymd_opt(2026, 12, 1));
        assert!(AuditQuery { action: Some("nope".into()), ..Default::default() }.filter().is_err());
        assert!(AuditQuery { from: Some("12/01/2026".into()), ..Default::default() }.filter().is_err());
        let backwards = AuditQuery { from: Some("2026-12-02".into()), to: Some("2026-12-01".into()), ..Default::default() };
        assert!(backwards.filter().is_err());
        assert!(AuditQuery { limit: Some(0), ..Default::default() }.limit().is_err());
        assert!(AuditQuery { format: Some("xml".into()), ..Default::default() }.format().is_err());
        let blank = AuditQuery { action: Some(" ".into()), person: Some(String::new()), ..Default::default() };
        assert!(blank.filter().unwrap().action.is_none());
    }

    #[test]
    fn the_query_string_keeps_given_filters() {
        let q = AuditQuery { action: Some("kb.create".into()), person: Some("a b".into()), ..Default::default() };
        assert_eq!(query_string(&q), "action=kb.create&person=a+b");
    }
}

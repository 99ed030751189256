//! Ranked ids → located results: filters re-checked, quotes, highlights, citations.

use std::{collections::HashMap, time::Instant};

use sqlx::{PgConnection, Row, types::Json};
use uuid::Uuid;

use super::*;

/// Turn ranked ids into results (re-checking the filters: graph neighbours come from edges).
pub(super) async fn hydrate(
    conn: &mut PgConnection,
    engine: &Engine,
    f: &Filters,
    t: &QueryTerms,
    ranked: Ranked,
) -> sqlx::Result<Vec<Hit>> {
    let n = ranked.ids.len();
    hydrate_first(conn, engine, f, t, ranked, n).await
}

/// [`hydrate`], stopping after `keep` results (quotes are only built for those).
pub(super) async fn hydrate_first(
    conn: &mut PgConnection,
    engine: &Engine,
    f: &Filters,
    t: &QueryTerms,
    ranked: Ranked,
    keep: usize,
) -> sqlx::Result<Vec<Hit>> {
    let ids: Vec<Uuid> = ranked.ids.iter().map(|x| x.0).collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut b = Binds::new();
    let filter = f.block_sql(&mut b);
    let sql = format!(
        "select b.id, b.text, b.locator, b.is_ocr, s.status, s.kind, s.resource_path, s.id as source_id,
                coalesce(s.mtime, s.updated_at) as modified_at
         from evidence_block b, source s where b.id = any({}::uuid[]) and {}",
        b.push(&ids),
        filter.sql
    );
    let fetched = Instant::now();
    let rows = b.query(&sql)?.fetch_all(&mut *conn).await?;
    stages::record(Stage::HydrationSql, fetched);
    let quoted = Instant::now();
    let mut by_id: HashMap<Uuid, sqlx::postgres::PgRow> = rows.into_iter().map(|r| (r.get("id"), r)).collect();
    let mut graph = ranked.graph;
    let mut out = Vec::with_capacity(keep.min(ranked.ids.len()));
    for (id, score) in ranked.ids {
        if out.len() >= keep {
            break;
        }
        let Some(row) = by_id.remove(&id) else { continue };
        let text: String = row.get("text");
        let locator: Json<Locator> = row.get("locator");
        let status: String = row.get("status");
        let resource_path: String = row.get("resource_path");
        let (quote, highlights) = quote_with_highlights(&text, &t.terms);
        let action = open::open_action(&locator.0, id, engine.public_url.as_deref());
        let title = open::source_title(&resource_path);
        let kind = locator.0.resource_kind;
        let api = SearchHit {
            evidence_id: id,
            quote,
            highlights,
            score: (score * 1e6).round() / 1e6,
            citation_markdown: open::citation_markdown(&title, &locator.0.place(), &action.url),
            source: locator.0,
            open_action: action,
            source_title: title,
            stale: status == SourceStatus::Stale.as_str(),
            graph: graph.remove(&id),
        };
        out.push(Hit {
            api,
            source_id: row.get("source_id"),
            is_ocr: row.get("is_ocr"),
            kind,
            resource_path,
            modified_at: row.get("modified_at"),
        });
    }
    stages::record(Stage::Quotes, quoted);
    Ok(out)
}

/// At most [`QUOTE_CHARS`] of the block, starting a little before the first match, with the
/// matched terms as code-point ranges of the quote.
pub fn quote_with_highlights(text: &str, terms: &[String]) -> (String, Vec<[usize; 2]>) {
    let ranges = analyze::highlight_ranges(text, terms);
    let total = text.chars().count();
    let first = ranges.first().map(|r| text[..r.0].chars().count()).unwrap_or(0);
    let start_char = if total <= QUOTE_CHARS { 0 } else { first.saturating_sub(60).min(total - QUOTE_CHARS) };
    let start_byte = text.char_indices().nth(start_char).map(|(i, _)| i).unwrap_or(0);
    let end_byte = text[start_byte..].char_indices().nth(QUOTE_CHARS).map(|(i, _)| start_byte + i).unwrap_or(text.len());
    let mut quote = String::new();
    if start_byte > 0 {
        quote.push('…');
    }
    let offset = quote.chars().count();
    quote.push_str(&text[start_byte..end_byte]);
    let mut highlights = Vec::new();
    for (s, e) in ranges {
        if s < start_byte || e > end_byte {
            continue;
        }
        let cs = offset + text[start_byte..s].chars().count();
        let ce = cs + text[s..e].chars().count();
        highlights.push([cs, ce]);
    }
    if end_byte < text.len() {
        quote.push('…');
    }
    (quote, highlights)
}

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
    // tenant filter: block_sql
    let sql = format!(
        "select b.id, b.text, b.locator, b.is_ocr, s.status, s.kind, s.resource_path, s.id as source_id,
                coalesce(s.mtime, s.updated_at) as modified_at
         from evidence_block b, readable_source s where b.id = any({}::uuid[]) and {}",
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
    let terms: Vec<String> = t.terms.iter().map(|x| comparable(x)).filter(|x| !x.is_empty()).collect();
    let placed: Vec<Option<Placed>> = ranked.ids.iter().map(|(id, _)| by_id.get(id).map(|r| placed_of(r, &terms))).collect();
    let order = settle(&placed);
    for (id, score) in order.into_iter().map(|i| ranked.ids[i]) {
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

/// What [`settle`] looks at: a hit's source, section path, whether its text is only its
/// section's heading, and its comparable text.
#[derive(Debug, Clone, Default)]
struct Placed {
    source: Uuid,
    path: Vec<String>,
    heading: bool,
    text: String,
    /// Its own text holds a query term (not only its section path).
    matches: bool,
}

/// Letters and digits, lower case: text as compared for headings and repeats.
fn comparable(s: &str) -> String {
    s.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

fn placed_of(row: &sqlx::postgres::PgRow, terms: &[String]) -> Placed {
    let text: String = row.get("text");
    let locator: Json<Locator> = row.get("locator");
    let text = comparable(&text);
    let heading = locator.0.section_path.last().is_some_and(|h| !text.is_empty() && comparable(h) == text);
    let matches = terms.iter().any(|t| text.contains(t.as_str()));
    Placed { source: locator.0.source_id, path: locator.0.section_path, heading, text, matches }
}

/// The hits' order after the ranking (issue 26): a block that is only its section's heading
/// gives its place to the first later hit of the same source inside that section whose own
/// text uses the query's words, and follows it (a body found only through its path stays
/// behind the heading that matched) (a heading never outranks its body; the document keeps its place), and a block whose
/// text repeats an earlier hit's goes to the end. Indices into `placed`; `None`: a row the
/// filters removed, left where it is.
fn settle(placed: &[Option<Placed>]) -> Vec<usize> {
    let n = placed.len();
    let mut used = vec![false; n];
    let mut seen = std::collections::HashSet::new();
    let (mut out, mut repeats) = (Vec::with_capacity(n), Vec::new());
    let mut put = |k: usize, out: &mut Vec<usize>| match &placed[k] {
        Some(p) if !p.text.is_empty() && !seen.insert(p.text.clone()) => repeats.push(k),
        _ => out.push(k),
    };
    for i in 0..n {
        if used[i] {
            continue;
        }
        used[i] = true;
        if let Some(h) = placed[i].as_ref().filter(|p| p.heading) {
            let body = (i + 1..n).find(|&j| {
                !used[j]
                    && placed[j]
                        .as_ref()
                        .is_some_and(|b| !b.heading && b.matches && b.source == h.source && b.path.starts_with(&h.path))
            });
            if let Some(j) = body {
                used[j] = true;
                put(j, &mut out);
            }
        }
        put(i, &mut out);
    }
    out.extend(repeats);
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(source: u128, path: &[&str], heading: bool, text: &str) -> Option<Placed> {
        Some(Placed {
            source: Uuid::from_u128(source),
            path: path.iter().map(|s| s.to_string()).collect(),
            heading,
            text: comparable(text),
            matches: true,
        })
    }

    #[test]
    fn headings_follow_their_body_and_repeats_go_last() {
        let placed = vec![
            p(1, &["Scoped threads"], true, "Scoped threads"),
            p(2, &["Other"], false, "Channels send messages."),
            p(1, &["Scoped threads"], false, "Scoped threads borrow data."),
            p(3, &[], false, "Channels send messages!"),
            None,
            p(4, &["Lonely"], true, "Lonely"),
        ];
        // The body takes its heading's place, the heading follows; the repeat of hit 1 (same
        // letters) goes last; a heading without its body among the hits stays; a filtered-out
        // row stays where it is.
        assert_eq!(settle(&placed), vec![2, 0, 1, 4, 5, 3]);
        // A body in another section or another source is not this heading's.
        let placed = vec![p(1, &["A"], true, "A"), p(1, &["B"], false, "b text"), p(2, &["A"], false, "a text")];
        assert_eq!(settle(&placed), vec![0, 1, 2]);
        // Nested sections are inside: "A > A.1" is under "A".
        let placed = vec![p(1, &["A"], true, "A"), p(1, &["A", "A.1"], false, "deep text")];
        assert_eq!(settle(&placed), vec![1, 0]);
    }
}

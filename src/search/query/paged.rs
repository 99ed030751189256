//! Pages of results (`offset`, `groupBy: "document"`): the best [`PAGE_DEPTH`] blocks are
//! ranked by the ordinary path of the mode, counted and grouped by document, and the page is
//! cut from them. So every page of one query comes from one ranking, the count says what the
//! filters let through, and documents are ordered by their best block.

use std::collections::HashMap;

use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::*;

/// Blocks ranked for paging. Beyond them the total is a lower bound (exact for lexical, which
/// counts its matches in SQL).
pub const PAGE_DEPTH: usize = 200;
const DEFAULT_PER_GROUP: usize = 3;
pub const MAX_PER_GROUP: usize = 20;
const MAX_OFFSET: usize = 10_000;

pub(super) async fn paged(
    conn: &mut PgConnection,
    tenant: uuid::Uuid,
    engine: &Engine,
    req: &SearchRequest,
    page_size: usize,
) -> Result<SearchResponse<Hit>, SearchError> {
    let offset = req.offset.unwrap_or(0);
    if offset > MAX_OFFSET {
        return Err(SearchError::Invalid(format!("offset must be at most {MAX_OFFSET}")));
    }
    let per_group = req.per_group.unwrap_or(DEFAULT_PER_GROUP);
    if per_group == 0 || per_group > MAX_PER_GROUP {
        return Err(SearchError::Invalid(format!("perGroup must be between 1 and {MAX_PER_GROUP}")));
    }
    let mut resp = run_in(conn, tenant, engine, req, PAGE_DEPTH).await?;
    let hits = std::mem::take(&mut resp.results);
    let mut total = hits.len();
    let mut lower_bound = total >= PAGE_DEPTH;
    // Lexical ranked its matches: count them all (the GIN index answers the same question).
    if lower_bound && resp.mode == Mode::Lexical.as_str() {
        total = total.max(lexical_count(conn, &Filters::of(req, tenant), &analyze::query_terms(req.query.trim())).await?);
        lower_bound = false;
    }
    let (results, groups, total_documents, next_offset) = match req.group_by {
        Some(GroupBy::Document) => {
            let g = group(hits, offset, page_size, per_group);
            (g.results, Some(g.groups), Some(g.documents), g.next_offset)
        }
        None => {
            let next = (offset + page_size < hits.len()).then_some(offset + page_size);
            (hits.into_iter().skip(offset).take(page_size).collect(), None, None, next)
        }
    };
    resp.results = results;
    resp.paging = Some(Paging {
        total,
        total_is_lower_bound: lower_bound,
        total_documents,
        offset,
        next_offset,
        depth: PAGE_DEPTH,
        groups,
    });
    Ok(resp)
}

struct Grouped {
    results: Vec<Hit>,
    groups: Vec<SearchGroup>,
    documents: usize,
    next_offset: Option<usize>,
}

/// Ranked hits → the documents `offset..offset + page_size` (ordered by their best hit), each
/// with its best `per_group` hits.
fn group(hits: Vec<Hit>, offset: usize, page_size: usize, per_group: usize) -> Grouped {
    let mut order: Vec<Uuid> = Vec::new();
    let mut by_source: HashMap<Uuid, Vec<Hit>> = HashMap::new();
    for h in hits {
        by_source
            .entry(h.source_id)
            .or_insert_with(|| {
                order.push(h.source_id);
                Vec::new()
            })
            .push(h);
    }
    let documents = order.len();
    let end = (offset + page_size).min(documents);
    let mut results = Vec::new();
    let mut groups = Vec::new();
    for id in order.get(offset.min(documents)..end).unwrap_or_default() {
        let hs = by_source.remove(id).unwrap_or_default();
        let Some(first) = hs.first() else { continue };
        let start = results.len();
        groups.push(SearchGroup {
            source_id: *id,
            kb_id: first.source.kb_id,
            source_title: first.source_title.clone(),
            resource_path: first.resource_path.clone(),
            resource_kind: first.kind,
            modified_at: first.modified_at,
            total: hs.len(),
            result_range: [start, start + hs.len().min(per_group)],
        });
        results.extend(hs.into_iter().take(per_group));
    }
    Grouped { results, groups, documents, next_offset: (end < documents).then_some(end) }
}

/// Blocks holding any query term among those the filters allow.
async fn lexical_count(conn: &mut PgConnection, f: &Filters, t: &QueryTerms) -> sqlx::Result<usize> {
    if t.is_empty() {
        return Ok(0);
    }
    let mut b = Binds::new();
    let filter = f.block_sql(&mut b);
    // tenant filter: block_sql
    let sql = format!(
        "select count(*) from evidence_block b, readable_source s where b.lex @@ {}::tsquery and {}",
        b.push(t.tsquery()),
        filter.sql
    );
    let n: i64 = b.query(&sql)?.fetch_one(&mut *conn).await?.get(0);
    Ok(n as usize)
}

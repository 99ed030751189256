//! Vector (HNSW) and hybrid (reciprocal-rank fusion in one statement) ranking.

use std::collections::HashMap;

use pgvector::Vector;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::*;

/// CJK letters (Han, kana, Hangul) as a regular-expression class: the rule of
/// [`crate::search::embed::has_cjk`], in SQL.
const CJK_CLASS: &str = "[\u{3400}-\u{4DBF}\u{4E00}-\u{9FFF}\u{F900}-\u{FAFF}\u{20000}-\u{2FA1F}\u{3040}-\u{30FF}\u{31F0}-\u{31FF}\u{1100}-\u{11FF}\u{3130}-\u{318F}\u{AC00}-\u{D7AF}]";

/// The query side of a vector search: its vector and whether its text has CJK letters
/// (blocks of the other script class are cross-language candidates).
pub(super) struct QueryVector {
    pub v: Vec<f32>,
    pub cjk: bool,
}

/// The vector CTE (`vec(id, dist, other)`): the `limit` blocks nearest to the query among
/// those `filter` allows, without those farther than the model's similarity floor (noise, not
/// matches: a nonsense query has nearest neighbours too). `other`: the block's script class
/// differs from the query's (an English query and a Chinese block, or the reverse); such a
/// block is held to the model's cross-language floor, lower than its same-language one. The
/// floor applies after the nearest `limit` are found, so the index scan stays bounded when
/// nothing passes it.
pub(super) fn vector_cte(b: &mut Binds, filter: &BlockFilter, space: &Space, q: QueryVector, limit: i64) -> String {
    let (v, l) = (b.push(Vector::from(q.v)), b.push(limit));
    let (cjk_class, query_cjk) = (b.push(CJK_CLASS), b.push(q.cjk));
    let vt = space.vector_type();
    let BlockFilter { kb_ids: kb, tenant, sql: filter } = filter;
    let floor = match (space.max_distance(q.cjk), space.cross_max_distance()) {
        (Some(same), Some(cross)) => {
            format!("where c.dist <= case when c.other then {} else {} end", b.push(cross), b.push(same))
        }
        (Some(d), None) | (None, Some(d)) => format!("where c.dist <= {}", b.push(d)),
        (None, None) => String::new(),
    };
    // tenant filter: block_sql
    format!(
        "vec as materialized (select c.id, c.dist, c.other from (
            select n.id, n.dist, ((t.text ~ {cjk_class}::text) <> {query_cjk}::bool) as other from (
                select e.block_id as id, (e.embedding::{vt} <=> {v}::{vt}) as dist
                from evidence_embedding e
                where e.tenant_id = {tenant}::uuid and e.model = {model} and ({kb}::uuid[] is null or e.kb_id = any({kb}::uuid[]))
                  and exists (select 1 from evidence_block b, readable_source s
                              where b.tenant_id = e.tenant_id and b.id = e.block_id and {filter})
                order by e.embedding::{vt} <=> {v}::{vt} limit {l}) n
            join evidence_block t on t.tenant_id = {tenant}::uuid and t.id = n.id) c {floor})",
        model = space.model_literal()
    )
}

pub(super) async fn set_hnsw(conn: &mut PgConnection, ef: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "select set_config('hnsw.iterative_scan', 'relaxed_order', true) as iterative_scan,
                set_config('hnsw.ef_search', $1, true) as ef_search",
        ef.clamp(40, 1000).to_string(),
    )
    .fetch_one(conn)
    .await?;
    Ok(())
}

pub(super) async fn vector_only(
    conn: &mut PgConnection,
    f: &Filters,
    space: &Space,
    q: QueryVector,
    limit: i64,
) -> sqlx::Result<Ranked> {
    set_hnsw(conn, limit * 2).await?;
    let mut b = Binds::new();
    let filter = f.block_sql(&mut b);
    let sql =
        format!("with {} select id, 1 - dist as score from vec order by dist", vector_cte(&mut b, &filter, space, q, limit));
    let rows = b.query(&sql)?.fetch_all(&mut *conn).await?;
    Ok(Ranked { ids: rows.iter().map(|r| (r.get("id"), r.get("score"))).collect(), graph: HashMap::new() })
}

/// Hybrid's lexical list from the mirror (twice as deep: the filters of [`hybrid`] may drop
/// some); `None` when the mirror is not current, and [`hybrid`] ranks in SQL. Needs no query
/// vector, so `query::run` computes it while the query is being embedded.
pub(super) async fn mirror_candidates(
    conn: &mut PgConnection,
    engine: &Engine,
    f: &Filters,
    t: &QueryTerms,
    depth: i64,
) -> sqlx::Result<Option<Vec<(Uuid, f64)>>> {
    if t.is_empty() {
        return Ok(None);
    }
    Ok(mem_ranker(conn, engine, f).await?.map(|m| m.rank(t, depth as usize * 2)))
}

/// Lexical and vector candidates fused by RRF in one statement. `mirrored`: the lexical list
/// from [`mirror_candidates`] (`None`: ranked here in SQL).
///
/// A cross-language block (`vec.other`) ranks low or not at all in the lexical list because
/// lexical search cannot match across languages, not because the words disagree: its lexical
/// rank is never worse than its vector rank (`least`; Postgres ignores a null), so a semantic
/// hit in the other language keeps its place among same-language blocks that match both ways
/// (keyword noise would otherwise bury it: a block ranked 1st on one side only scores less
/// than one ranked 5th on both), and a shared name or number can still lift it.
#[allow(clippy::too_many_arguments)]
pub(super) async fn hybrid(
    conn: &mut PgConnection,
    f: &Filters,
    t: &QueryTerms,
    mirrored: Option<Vec<(Uuid, f64)>>,
    space: &Space,
    q: QueryVector,
    fusion: &Fusion,
    depth: i64,
    limit: i64,
) -> sqlx::Result<Ranked> {
    set_hnsw(conn, depth).await?;
    let mut b = Binds::new();
    let filter = f.block_sql(&mut b);
    let lex = match mirrored {
        Some(m) => {
            let (ids, scores): (Vec<Uuid>, Vec<f64>) = m.into_iter().unzip();
            let (ids, scores, limit) = (b.push(ids), b.push(scores), b.push(depth));
            // tenant filter: block_sql
            format!(
                "lexical as (select l.id, l.score from unnest({ids}::uuid[], {scores}::float8[]) l(id, score), evidence_block b, readable_source s
                             where b.id = l.id and {} order by l.score desc, l.id limit {limit})",
                filter.sql
            )
        }
        None => lexical_cte(&mut b, &filter, t, depth),
    };
    let vec = vector_cte(&mut b, &filter, space, q, depth);
    // One round trip: both candidate lists, ranked, fused.
    let sql = format!(
        "with {lex}, {vec},
        lr as (select id, row_number() over (order by score desc, id) as r from lexical),
        vr as (select id, other, row_number() over (order by dist, id) as r from vec)
        select coalesce(lr.id, vr.id) as id,
               coalesce({wv:?}::float8 / ({k:?}::float8 + vr.r), 0)
               + coalesce({wl:?}::float8 / ({k:?}::float8 + case when vr.other then least(lr.r, vr.r) else lr.r end), 0) as score
        from lr full outer join vr on lr.id = vr.id
        order by score desc, id limit {last}",
        wl = fusion.lexical_weight,
        wv = fusion.vector_weight,
        k = fusion.rrf_k,
        last = b.push(limit),
    );
    let rows = b.query(&sql)?.fetch_all(&mut *conn).await?;
    Ok(Ranked { ids: rows.iter().map(|r| (r.get("id"), r.get("score"))).collect(), graph: HashMap::new() })
}

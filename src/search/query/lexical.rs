//! Lexical ranking: BM25 from the in-memory mirror when it is current, else in SQL.

use std::collections::{HashMap, HashSet};

use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::*;

/// The lexical CTEs (`lexical(id, score)`): BM25 in SQL over the blocks `filter` allows, at
/// most `limit` candidates.
pub(super) fn lexical_cte(b: &mut Binds, filter: &BlockFilter, t: &QueryTerms, limit: i64) -> String {
    let (terms, counts, tsquery, limit) = (b.push(&t.terms), b.push(&t.counts), b.push(t.tsquery()), b.push(limit));
    let BlockFilter { kb_ids: kb, tenant, sql: filter } = filter;
    // tenant filter: block_sql
    format!(
        "q(term, qtf) as (select * from unnest({terms}::text[], {counts}::int4[])),
        st as (select term, sum(df)::float8 as df from evidence_term_stat
               where tenant_id = {tenant}::uuid and term = any({terms}::text[]) and ({kb}::uuid[] is null or kb_id = any({kb}::uuid[])) group by term),
        kbs as (select kb_id, blocks, greatest(total_len::float8 / greatest(blocks, 1), 1) as avgdl
                from evidence_kb_stat where tenant_id = {tenant}::uuid and ({kb}::uuid[] is null or kb_id = any({kb}::uuid[]))),
        n as (select greatest(coalesce(sum(blocks), 0), 1)::float8 as n from kbs),
        w as (select q.term, q.qtf * ln(1 + (n.n - least(st.df, n.n) + 0.5) / (least(st.df, n.n) + 0.5)) as idf
              from q join st using (term) cross join n),
        -- Each candidate's tsvector reduced to the query's lexemes (setweight marks them, ts_filter
        -- keeps them), so only those are unnested: their position counts are the term frequencies.
        cand as (select b.id, b.kb_id, b.lex_len, ts_filter(setweight(b.lex, 'A', {terms}::text[]), '{{a}}') as q
                 from evidence_block b, readable_source s
                 where b.lex @@ {tsquery}::tsquery and {filter}),
        lexical as (select c.id,
                        sum(w.idf * cardinality(u.positions) * {k1p}
                            / (cardinality(u.positions) + {k1} * ({one_b} + {bm25_b} * c.lex_len / kbs.avgdl))) as score
                    from cand c join kbs using (kb_id) cross join lateral unnest(c.q) u join w on w.term = u.lexeme
                    group by c.id order by score desc, c.id limit {limit})",
        k1p = BM25_K1 + 1.0,
        k1 = BM25_K1,
        one_b = 1.0 - BM25_B,
        bm25_b = BM25_B,
    )
}

/// The mirror knows KBs, OCR and (when asked) the allowed sources; stale sources and revoked
/// grants are checked against the database, so ask for a few more than needed and more again
/// when the check removed too many.
pub(super) fn first_want(limit: usize) -> usize {
    limit + limit.div_ceil(2).max(5)
}

/// Lexical results: ranked by the mirror and hydrated (which applies every filter) in one
/// step, or ranked in SQL.
pub(super) async fn lexical_hits(
    conn: &mut PgConnection,
    engine: &Engine,
    f: &Filters,
    t: &QueryTerms,
    top_k: usize,
) -> sqlx::Result<Vec<Hit>> {
    if !t.is_empty()
        && let Some(mem) = mem_ranker(conn, engine, f).await?
    {
        let mut want = first_want(top_k);
        loop {
            let cand = mem.rank(t, want);
            let exhausted = cand.len() < want;
            let hits = hydrate_first(conn, engine, f, t, Ranked { ids: cand, graph: HashMap::new() }, top_k).await?;
            if hits.len() >= top_k || exhausted {
                return Ok(hits);
            }
            want *= 4;
        }
    }
    let ranked = lexical_ranked(conn, engine, f, t, top_k).await?;
    hydrate(conn, engine, f, t, ranked).await
}

/// The best `limit` blocks by BM25 among those the filters allow: from the in-memory mirrors
/// when they are current, else in SQL.
pub(super) async fn lexical_ranked(
    conn: &mut PgConnection,
    engine: &Engine,
    f: &Filters,
    t: &QueryTerms,
    limit: usize,
) -> sqlx::Result<Ranked> {
    if t.is_empty() {
        return Ok(Ranked { ids: Vec::new(), graph: HashMap::new() });
    }
    let Some(mem) = mem_ranker(conn, engine, f).await? else {
        return lexical_sql(conn, f, t, limit as i64).await;
    };
    let mut want = first_want(limit);
    loop {
        let cand = mem.rank(t, want);
        let ids: Vec<Uuid> = cand.iter().map(|c| c.0).collect();
        let mut b = Binds::new();
        let filter = f.block_sql(&mut b);
        // tenant filter: block_sql
        let sql = format!(
            "select b.id from evidence_block b, readable_source s where b.id = any({}::uuid[]) and {}",
            b.push(&ids),
            filter.sql
        );
        let rows = b.query(&sql)?.fetch_all(&mut *conn).await?;
        let ok: HashSet<Uuid> = rows.iter().map(|r| r.get(0)).collect();
        let mut kept: Vec<(Uuid, f64)> = cand.iter().copied().filter(|c| ok.contains(&c.0)).collect();
        if kept.len() >= limit || cand.len() < want {
            kept.truncate(limit);
            return Ok(Ranked { ids: kept, graph: HashMap::new() });
        }
        want *= 4;
    }
}

/// The current mirrors of the KBs this query searches, with the request's filters, or `None`
/// (no mirror configured, or one is not current yet).
pub(super) struct MemRanker {
    indexes: Vec<Arc<memindex::KbIndex>>,
    include_ocr: bool,
    sources: Option<HashSet<Uuid>>,
}

impl MemRanker {
    pub(super) fn rank(&self, t: &QueryTerms, limit: usize) -> Vec<(Uuid, f64)> {
        let started = std::time::Instant::now();
        let filter = RankFilter { include_ocr: self.include_ocr, sources: self.sources.as_ref() };
        let ranked = memindex::rank(&self.indexes, t, &filter, limit);
        stages::record(Stage::Ranking, started);
        ranked
    }
}

pub(super) async fn mem_ranker(conn: &mut PgConnection, engine: &Engine, f: &Filters) -> sqlx::Result<Option<MemRanker>> {
    let Some(mem) = &engine.mem else { return Ok(None) };
    let started = std::time::Instant::now();
    // Read in the caller's transaction: RLS decides which KBs (and so which mirrors) count.
    let versions = memindex::visible_versions(conn, f.tenant, f.kb_ids.as_deref()).await?;
    let indexes = match mem.snapshot(&versions) {
        Some(i) => i,
        None if engine.build_inline => {
            if let Err(e) = mem.warm(&versions).await {
                tracing::warn!(error = %e, "lexical mirror not built; ranking in SQL");
                return Ok(None);
            }
            match mem.snapshot(&versions) {
                Some(i) => i,
                None => return Ok(None),
            }
        }
        None => return Ok(None),
    };
    let sources = if f.kinds.is_some() || f.path_prefix.is_some() || f.source_ids.is_some() {
        let mut b = Binds::new();
        let kb = b.push(&f.kb_ids);
        // tenant filter: source_sql
        let sql = format!(
            "select s.id from readable_source s where ({kb}::uuid[] is null or s.kb_id = any({kb}::uuid[])) and {}",
            f.source_sql(&mut b)
        );
        let rows = b.query(&sql)?.fetch_all(&mut *conn).await?;
        Some(rows.iter().map(|r| r.get(0)).collect())
    } else {
        None
    };
    stages::record(Stage::MirrorLookup, started);
    Ok(Some(MemRanker { indexes, include_ocr: f.include_ocr, sources }))
}

pub(super) async fn lexical_sql(conn: &mut PgConnection, f: &Filters, t: &QueryTerms, limit: i64) -> sqlx::Result<Ranked> {
    let mut b = Binds::new();
    let filter = f.block_sql(&mut b);
    let sql = format!("with {} select id, score from lexical order by score desc, id", lexical_cte(&mut b, &filter, t, limit));
    let rows = b.query(&sql)?.fetch_all(&mut *conn).await?;
    Ok(Ranked { ids: rows.iter().map(|r| (r.get("id"), r.get("score"))).collect(), graph: HashMap::new() })
}

//! The search core behind the API, the search page, `mnote search` and `mnote eval`: one code
//! path for every caller. It runs inside the caller's [`TenantTx`], so row-level security,
//! KB visibility and grants apply to every candidate.
//!
//! * lexical: BM25 over the analysed terms ([`super::analyze`]): idf over the searched KBs,
//!   length normalised by each block's own KB, from per-KB statistics kept by a trigger.
//!   Ranked by the in-memory mirror ([`super::memindex`]) when it is current, else in SQL with
//!   candidates from the GIN index (`lex @@ 'a' | 'b'`); both give the same ranking.
//! * vector: HNSW over the configured model's vectors (iterative scan, so filters do not
//!   starve the result).
//! * hybrid: reciprocal-rank fusion of both candidate lists in the same SQL statement.
//! * graph: lexical hits expanded along evidence edges (≤ 2 hops, score halves per hop).

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Instant,
};

use pgvector::Vector;
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, Row, types::Json};
use uuid::Uuid;

use crate::evidence::{Locator, SourceKind, SourceStatus};

use super::{
    analyze::{self, QueryTerms},
    embed::{EmbedKind, Embedder},
    memindex::{self, MemIndex, RankFilter},
    open::{self, OpenAction},
    vector_health::{self, VectorHealth},
    vectors::Space,
};

pub const MAX_TOP_K: usize = 100;
const DEFAULT_TOP_K: usize = 10;
// BM25 parameters (Robertson/Lucene defaults), shared with the in-memory mirror.
use memindex::{BM25_B, BM25_K1};
/// Reciprocal-rank fusion constant: small values favour agreement at the top of both lists.
pub const DEFAULT_RRF_K: f64 = 20.0;
/// Above this share of CJK letters, an English-only embedder has nothing to add to a query.
const CJK_QUERY_RATIO: f64 = 0.3;
const GRAPH_SEEDS: usize = 20;
const GRAPH_DECAY: f64 = 0.5;
const GRAPH_MAX_NEIGHBOURS: i64 = 200;
const QUOTE_CHARS: usize = 400;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Lexical,
    Vector,
    #[default]
    Hybrid,
    Graph,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Lexical => "lexical",
            Mode::Vector => "vector",
            Mode::Hybrid => "hybrid",
            Mode::Graph => "graph",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "lexical" => Some(Mode::Lexical),
            "vector" => Some(Mode::Vector),
            "hybrid" => Some(Mode::Hybrid),
            "graph" => Some(Mode::Graph),
            _ => None,
        }
    }
}

/// `POST /api/evidence/search` body.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchRequest {
    pub query: String,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub top_k: Option<usize>,
    #[serde(default)]
    pub kb_ids: Option<Vec<Uuid>>,
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Match text that exists only in OCR output (default true).
    #[serde(default)]
    pub include_ocr: Option<bool>,
    /// Also return evidence of stale sources, flagged `stale: true` (default false).
    #[serde(default)]
    pub include_stale: Option<bool>,
}

impl SearchRequest {
    pub fn new(query: impl Into<String>, mode: Mode) -> Self {
        SearchRequest {
            query: query.into(),
            mode,
            top_k: None,
            kb_ids: None,
            kinds: None,
            path_prefix: None,
            include_ocr: None,
            include_stale: None,
        }
    }
}

/// What the search needs besides the request.
#[derive(Clone)]
pub struct Engine {
    pub embedder: Option<Arc<dyn Embedder>>,
    pub public_url: Option<String>,
    pub rrf_k: f64,
    /// In-memory BM25 mirrors ([`memindex`]); `None` ranks lexically in SQL only.
    pub mem: Option<Arc<MemIndex>>,
    /// Build a missing mirror before answering instead of in the background (evaluation,
    /// tests): every query then takes the in-memory path.
    pub build_inline: bool,
    /// While unhealthy, vector and hybrid run lexical (`vector_backend_unavailable`); a
    /// vector statement whose backend dies marks it so. `None`: not tracked (CLI, eval).
    pub vector_health: Option<Arc<VectorHealth>>,
}

impl Engine {
    pub fn new(embedder: Option<Arc<dyn Embedder>>, public_url: Option<String>) -> Self {
        Engine { embedder, public_url, rrf_k: DEFAULT_RRF_K, mem: None, build_inline: false, vector_health: None }
    }

    pub fn with_vector_health(mut self, health: Arc<VectorHealth>) -> Self {
        self.vector_health = Some(health);
        self
    }

    /// A vector statement failed: a dead backend is recorded and becomes
    /// [`SearchError::VectorBackend`]; anything else stays a database error.
    fn vector_error(&self, e: sqlx::Error) -> SearchError {
        if vector_health::is_backend_failure(&e) {
            if let Some(h) = &self.vector_health {
                h.record_failure(&e);
            }
            return SearchError::VectorBackend(e);
        }
        SearchError::Db(e)
    }

    fn vector_side_healthy(&self) -> bool {
        self.vector_health.as_ref().is_none_or(|h| h.is_healthy())
    }

    pub fn with_mem(mut self, mem: Arc<MemIndex>, build_inline: bool) -> Self {
        self.mem = Some(mem);
        self.build_inline = build_inline;
        self
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fusion {
    pub rrf_k: f64,
    pub lexical_weight: f64,
    pub vector_weight: f64,
    /// Why the vector side was left out, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphStep {
    pub hop: u32,
    pub edge_kind: String,
    pub from_evidence_id: Uuid,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    pub evidence_id: Uuid,
    pub quote: String,
    /// `[start, end)` ranges of `quote`, in Unicode code points.
    pub highlights: Vec<[usize; 2]>,
    pub score: f64,
    pub source: Locator,
    pub open_action: OpenAction,
    pub citation_markdown: String,
    pub source_title: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphStep>,
    /// Internal: used to group hits by document (eval, `/api/search/documents`).
    #[serde(skip)]
    pub source_id: Uuid,
    #[serde(skip)]
    pub is_ocr: bool,
    #[serde(skip)]
    pub kind: SourceKind,
    #[serde(skip)]
    pub resource_path: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResponse {
    pub ok: bool,
    pub schema: &'static str,
    pub mode: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fusion: Option<Fusion>,
    pub took_ms: f64,
    pub results: Vec<Hit>,
}

/// A request the search refuses, with a stable code.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    /// The backend running the vector statement died (recorded in the engine's
    /// [`VectorHealth`]); the transaction is lost. Run the search again in a new one: it then
    /// answers lexically, `degraded` (see [`search_retrying`]).
    #[error("vector backend unavailable: {0}")]
    VectorBackend(sqlx::Error),
}

/// The filters every mode applies, bound as `$F..$F+5` (see [`FILTER_SQL`]).
#[derive(Debug, Clone)]
struct Filters {
    kb_ids: Option<Vec<Uuid>>,
    kinds: Option<Vec<String>>,
    path_prefix: Option<String>,
    include_ocr: bool,
    include_stale: bool,
}

/// The conditions on `s` (a source) among the filters: kinds `$2`, path prefix `$3`, include
/// stale `$5`. A source under a revoked grant is never served, whatever its status says.
macro_rules! source_filter_sql {
    () => {
        "($2::text[] is null or s.kind = any($2::text[]))
    and ($3::text is null or starts_with(s.resource_path, $3::text))
    and ($5::bool or s.status <> 'stale')
    and (s.grant_id is null or exists (select 1 from dir_grant g
         where g.tenant_id = s.tenant_id and g.id = s.grant_id and g.revoked_at is null))"
    };
}

/// Conditions on `b` (evidence_block) and `s` (its source), with the filter parameters at
/// `$1..$5`: KB ids, kinds, path prefix, include OCR, include stale.
const FILTER_SQL: &str = concat!(
    "s.tenant_id = b.tenant_id and s.id = b.source_id
    and ($1::uuid[] is null or b.kb_id = any($1::uuid[]))
    and ($4::bool or not b.is_ocr)
    and ",
    source_filter_sql!()
);

fn bind_filters<'q>(
    q: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    f: &'q Filters,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    q.bind(&f.kb_ids).bind(&f.kinds).bind(&f.path_prefix).bind(f.include_ocr).bind(f.include_stale)
}

/// The lexical CTEs (`lexical(id, score)`), parameters `$6` terms, `$7` counts, `$8` tsquery,
/// `$9` candidate limit.
fn lexical_cte() -> String {
    format!(
        "q(term, qtf) as (select * from unnest($6::text[], $7::int4[])),
        st as (select term, sum(df)::float8 as df from evidence_term_stat
               where term = any($6::text[]) and ($1::uuid[] is null or kb_id = any($1::uuid[])) group by term),
        kbs as (select kb_id, blocks, greatest(total_len::float8 / greatest(blocks, 1), 1) as avgdl
                from evidence_kb_stat where ($1::uuid[] is null or kb_id = any($1::uuid[]))),
        n as (select greatest(coalesce(sum(blocks), 0), 1)::float8 as n from kbs),
        w as (select q.term, q.qtf * ln(1 + (n.n - least(st.df, n.n) + 0.5) / (least(st.df, n.n) + 0.5)) as idf
              from q join st using (term) cross join n),
        -- Each candidate's tsvector reduced to the query's lexemes (setweight marks them, ts_filter
        -- keeps them), so only those are unnested: their position counts are the term frequencies.
        cand as (select b.id, b.kb_id, b.lex_len, ts_filter(setweight(b.lex, 'A', $6::text[]), '{{a}}') as q
                 from evidence_block b, source s
                 where b.lex @@ $8::tsquery and {FILTER_SQL}),
        lexical as (select c.id,
                        sum(w.idf * cardinality(u.positions) * {k1p}
                            / (cardinality(u.positions) + {k1} * ({one_b} + {b} * c.lex_len / kbs.avgdl))) as score
                    from cand c join kbs using (kb_id) cross join lateral unnest(c.q) u join w on w.term = u.lexeme
                    group by c.id order by score desc, c.id limit $9)",
        k1p = BM25_K1 + 1.0,
        k1 = BM25_K1,
        one_b = 1.0 - BM25_B,
        b = BM25_B,
    )
}

/// The vector CTE (`vec(id, dist)`), parameters `$<v>` query vector, `$<v+1>` candidate limit.
fn vector_cte(space: &Space, v: usize) -> String {
    let l = v + 1;
    let vt = space.vector_type();
    format!(
        "vec as materialized (select e.block_id as id, (e.embedding::{vt} <=> ${v}::{vt}) as dist
                from evidence_embedding e
                where e.model = {model} and ($1::uuid[] is null or e.kb_id = any($1::uuid[]))
                  and exists (select 1 from evidence_block b, source s
                              where b.tenant_id = e.tenant_id and b.id = e.block_id and {FILTER_SQL})
                order by e.embedding::{vt} <=> ${v}::{vt} limit ${l})",
        model = space.model_literal()
    )
}

/// Scored ids of one mode, best first.
struct Ranked {
    ids: Vec<(Uuid, f64)>,
    graph: HashMap<Uuid, GraphStep>,
}

pub async fn search(conn: &mut PgConnection, engine: &Engine, req: &SearchRequest) -> Result<SearchResponse, SearchError> {
    let started = Instant::now();
    let top_k = req.top_k.unwrap_or(DEFAULT_TOP_K);
    if top_k == 0 || top_k > MAX_TOP_K {
        return Err(SearchError::Invalid(format!("topK must be between 1 and {MAX_TOP_K}")));
    }
    let mut resp = run(conn, engine, req, top_k).await?;
    resp.took_ms = (started.elapsed().as_secs_f64() * 1000.0 * 100.0).round() / 100.0;
    Ok(resp)
}

/// [`search`] in a transaction opened by `begin`, once more in a new one when the vector
/// side's backend died under the first attempt (that attempt marked the vector side
/// unhealthy, so the second answers lexically with `degraded: true`).
pub async fn search_retrying<F, Fut>(begin: F, engine: &Engine, req: &SearchRequest) -> Result<SearchResponse, SearchError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = sqlx::Result<crate::db::TenantTx>>,
{
    let mut retried = false;
    loop {
        let mut tx = begin().await?;
        match search(&mut tx, engine, req).await {
            Err(SearchError::VectorBackend(e)) if !retried => {
                tracing::warn!("search: the vector statement's backend died ({e}); answering lexically");
                retried = true;
            }
            Err(e) => return Err(e),
            Ok(resp) => {
                tx.commit().await?;
                return Ok(resp);
            }
        }
    }
}

/// [`search`] without the API's `topK` cap (the evaluation ranks deeper).
pub async fn run(
    conn: &mut PgConnection,
    engine: &Engine,
    req: &SearchRequest,
    top_k: usize,
) -> Result<SearchResponse, SearchError> {
    let query = req.query.trim();
    if query.is_empty() {
        return Err(SearchError::Invalid("query must not be empty".into()));
    }
    if query.chars().count() > 2000 {
        return Err(SearchError::Invalid("query is longer than 2000 characters".into()));
    }
    if let Some(kinds) = &req.kinds
        && let Some(k) = kinds.iter().find(|k| k.parse::<SourceKind>().is_err())
    {
        return Err(SearchError::Invalid(format!("unknown kind {k:?}")));
    }
    let filters = Filters {
        kb_ids: req.kb_ids.clone(),
        kinds: req.kinds.clone(),
        path_prefix: req.path_prefix.clone().filter(|p| !p.is_empty()),
        include_ocr: req.include_ocr.unwrap_or(true),
        include_stale: req.include_stale.unwrap_or(false),
    };
    let terms = analyze::query_terms(query);
    let mut resp = SearchResponse {
        ok: true,
        schema: "mnote.evidence_search_response.v1",
        mode: req.mode.as_str(),
        degraded: false,
        degraded_reason: None,
        fusion: None,
        took_ms: 0.0,
        results: Vec::new(),
    };

    // Vector and hybrid need a query vector; without one they run lexical and say so.
    let mut qvec = None;
    if matches!(req.mode, Mode::Vector | Mode::Hybrid) {
        match &engine.embedder {
            Some(_) if !engine.vector_side_healthy() => {
                resp.degraded = true;
                resp.degraded_reason = Some(vector_health::CODE.into());
            }
            None => {
                resp.degraded = true;
                resp.degraded_reason = Some("embedder_unavailable".into());
            }
            Some(e) => match e.embed(&[query.to_string()], EmbedKind::Query).await {
                Ok(mut v) if v.len() == 1 => qvec = Some((Space::of(e.as_ref()), e.multilingual(), v.remove(0))),
                Ok(_) | Err(_) => {
                    resp.degraded = true;
                    resp.degraded_reason = Some("embedder_unavailable".into());
                }
            },
        }
    }
    // Candidates per side for fusion. With RRF k = 20, a block ranked below 4·topK in both
    // lists scores less than one ranked topK in either, so deeper lists rarely change the top.
    let depth = (top_k * 4).max(40) as i64;
    let ranked = match (req.mode, qvec) {
        (Mode::Vector, Some((space, _, v))) => {
            vector_only(conn, &filters, &space, v, top_k as i64).await.map_err(|e| engine.vector_error(e))?
        }
        (Mode::Hybrid, Some((space, multilingual, v))) => {
            // An English-only model puts every Chinese query near the same few vectors:
            // fusing them in would only push good lexical hits down.
            let skip_vector = !multilingual && terms.cjk_ratio > CJK_QUERY_RATIO;
            resp.fusion = Some(Fusion {
                rrf_k: engine.rrf_k,
                lexical_weight: 1.0,
                vector_weight: if skip_vector { 0.0 } else { 1.0 },
                note: skip_vector.then_some("query_language_not_covered_by_embedder"),
            });
            if skip_vector {
                resp.results = lexical_hits(conn, engine, &filters, &terms, top_k).await?;
                return Ok(resp);
            }
            let fusion = resp.fusion.as_ref().expect("set above");
            hybrid(conn, engine, &filters, &terms, &space, v, fusion, depth, top_k as i64)
                .await
                .map_err(|e| engine.vector_error(e))?
        }
        (Mode::Graph, _) => graph(conn, engine, &filters, &terms, top_k).await?,
        _ => {
            resp.results = lexical_hits(conn, engine, &filters, &terms, top_k).await?;
            return Ok(resp);
        }
    };
    resp.results = hydrate(conn, engine, &filters, &terms, ranked).await?;
    Ok(resp)
}

/// The mirror knows KBs, OCR and (when asked) the allowed sources; stale sources and revoked
/// grants are checked against the database, so ask for a few more than needed and more again
/// when the check removed too many.
fn first_want(limit: usize) -> usize {
    limit + limit.div_ceil(2).max(5)
}

/// Lexical results: ranked by the mirror and hydrated (which applies every filter) in one
/// step, or ranked in SQL.
async fn lexical_hits(
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
async fn lexical_ranked(
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
        let sql = format!("select b.id from evidence_block b, source s where b.id = any($6::uuid[]) and {FILTER_SQL}");
        let rows = bind_filters(sqlx::query(&sql), f).bind(&ids).fetch_all(&mut *conn).await?;
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
struct MemRanker {
    indexes: Vec<Arc<memindex::KbIndex>>,
    include_ocr: bool,
    sources: Option<HashSet<Uuid>>,
}

impl MemRanker {
    fn rank(&self, t: &QueryTerms, limit: usize) -> Vec<(Uuid, f64)> {
        let filter = RankFilter { include_ocr: self.include_ocr, sources: self.sources.as_ref() };
        memindex::rank(&self.indexes, t, &filter, limit)
    }
}

async fn mem_ranker(conn: &mut PgConnection, engine: &Engine, f: &Filters) -> sqlx::Result<Option<MemRanker>> {
    let Some(mem) = &engine.mem else { return Ok(None) };
    // Read in the caller's transaction: RLS decides which KBs (and so which mirrors) count.
    let versions = memindex::visible_versions(conn, f.kb_ids.as_deref()).await?;
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
    let sources = if f.kinds.is_some() || f.path_prefix.is_some() {
        let sql = concat!(
            "select s.id from source s where ($1::uuid[] is null or s.kb_id = any($1::uuid[])) and ($4::bool or true) and ",
            source_filter_sql!()
        );
        let rows = bind_filters(sqlx::query(sql), f).fetch_all(&mut *conn).await?;
        Some(rows.iter().map(|r| r.get(0)).collect())
    } else {
        None
    };
    Ok(Some(MemRanker { indexes, include_ocr: f.include_ocr, sources }))
}

async fn lexical_sql(conn: &mut PgConnection, f: &Filters, t: &QueryTerms, limit: i64) -> sqlx::Result<Ranked> {
    let sql = format!("with {} select id, score from lexical order by score desc, id", lexical_cte());
    let rows = bind_filters(sqlx::query(&sql), f)
        .bind(&t.terms)
        .bind(&t.counts)
        .bind(t.tsquery())
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
    Ok(Ranked { ids: rows.iter().map(|r| (r.get("id"), r.get("score"))).collect(), graph: HashMap::new() })
}

async fn set_hnsw(conn: &mut PgConnection, ef: i64) -> sqlx::Result<()> {
    sqlx::query("select set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $1, true)")
        .bind(ef.clamp(40, 1000).to_string())
        .execute(conn)
        .await?;
    Ok(())
}

async fn vector_only(conn: &mut PgConnection, f: &Filters, space: &Space, v: Vec<f32>, limit: i64) -> sqlx::Result<Ranked> {
    set_hnsw(conn, limit * 2).await?;
    let sql = format!("with {} select id, 1 - dist as score from vec order by dist", vector_cte(space, 6));
    let rows = bind_filters(sqlx::query(&sql), f).bind(Vector::from(v)).bind(limit).fetch_all(&mut *conn).await?;
    Ok(Ranked { ids: rows.iter().map(|r| (r.get("id"), r.get("score"))).collect(), graph: HashMap::new() })
}

#[allow(clippy::too_many_arguments)]
async fn hybrid(
    conn: &mut PgConnection,
    engine: &Engine,
    f: &Filters,
    t: &QueryTerms,
    space: &Space,
    v: Vec<f32>,
    fusion: &Fusion,
    depth: i64,
    limit: i64,
) -> sqlx::Result<Ranked> {
    // The lexical list comes ranked from the mirror (twice as deep, the filters below may drop
    // some) or is ranked here in SQL.
    let mem = if t.is_empty() { None } else { mem_ranker(conn, engine, f).await? };
    set_hnsw(conn, depth).await?;
    let (lex, v_at) = match &mem {
        Some(_) => (
            format!(
                "lexical as (select l.id, l.score from unnest($6::uuid[], $7::float8[]) l(id, score), evidence_block b, source s
                             where b.id = l.id and {FILTER_SQL} order by l.score desc, l.id limit $8)"
            ),
            9,
        ),
        None => (lexical_cte(), 10),
    };
    // One round trip: both candidate lists, ranked, fused.
    let sql = format!(
        "with {lex}, {vec},
        lr as (select id, row_number() over (order by score desc, id) as r from lexical),
        vr as (select id, row_number() over (order by dist, id) as r from vec)
        select coalesce(lr.id, vr.id) as id,
               coalesce({wl:?}::float8 / ({k:?}::float8 + lr.r), 0) + coalesce({wv:?}::float8 / ({k:?}::float8 + vr.r), 0) as score
        from lr full outer join vr on lr.id = vr.id
        order by score desc, id limit ${last}",
        vec = vector_cte(space, v_at),
        wl = fusion.lexical_weight,
        wv = fusion.vector_weight,
        k = fusion.rrf_k,
        last = v_at + 2,
    );
    let q = bind_filters(sqlx::query(&sql), f);
    let q = match &mem {
        Some(m) => {
            let cand = m.rank(t, depth as usize * 2);
            let (ids, scores): (Vec<Uuid>, Vec<f64>) = cand.into_iter().unzip();
            q.bind(ids).bind(scores).bind(depth)
        }
        None => q.bind(&t.terms).bind(&t.counts).bind(t.tsquery()).bind(depth),
    };
    let rows = q.bind(Vector::from(v)).bind(depth).bind(limit).fetch_all(&mut *conn).await?;
    Ok(Ranked { ids: rows.iter().map(|r| (r.get("id"), r.get("score"))).collect(), graph: HashMap::new() })
}

/// Lexical seeds, then up to two hops along edges: blocks of the same section, blocks that
/// mention the same `@entity`, the opening blocks of a linked document and blocks linking to
/// the seed's document. Each hop halves the score.
async fn graph(conn: &mut PgConnection, engine: &Engine, f: &Filters, t: &QueryTerms, top_k: usize) -> sqlx::Result<Ranked> {
    let seeds = lexical_ranked(conn, engine, f, t, GRAPH_SEEDS.max(top_k)).await?;
    let mut best: HashMap<Uuid, f64> = seeds.ids.iter().copied().collect();
    let mut steps: HashMap<Uuid, GraphStep> = HashMap::new();
    let mut frontier: Vec<(Uuid, f64)> = seeds.ids.clone();
    for hop in 1..=2u32 {
        if frontier.is_empty() {
            break;
        }
        let ids: Vec<Uuid> = frontier.iter().map(|x| x.0).collect();
        let score_of: HashMap<Uuid, f64> = frontier.iter().copied().collect();
        let rows: Vec<(Uuid, Uuid, String)> = sqlx::query_as(
            "with seed as (select unnest($1::uuid[]) as id),
             hits as (
               -- same section
               select e2.source_block_id as id, e1.source_block_id as via, 'section_contains_block' as kind
               from evidence_edge e1 join evidence_edge e2
                 on e2.tenant_id = e1.tenant_id and e2.source_id = e1.source_id
                and e2.kind = 'section_contains_block' and e2.target_section_key = e1.target_section_key
               where e1.kind = 'section_contains_block' and e1.source_block_id in (select id from seed)
               union all
               -- same entity
               select e2.source_block_id, e1.source_block_id, 'block_mentions_entity'
               from evidence_edge e1 join evidence_edge e2
                 on e2.tenant_id = e1.tenant_id and e2.kind = 'block_mentions_entity'
                and lower(e2.target_text) = lower(e1.target_text)
               where e1.kind = 'block_mentions_entity' and e1.source_block_id in (select id from seed)
               union all
               -- a link from the seed to another document: that document's first blocks
               select b.id, e1.source_block_id, 'markdown_links_to'
               from evidence_edge e1
               join source s on s.tenant_id = e1.tenant_id
                and lower(regexp_replace(s.resource_path, '^.*/|\\.[^./]*$', '', 'g'))
                    = lower(regexp_replace(regexp_replace(e1.target_text, '#.*$', ''), '^.*/|\\.[^./]*$', '', 'g'))
               join evidence_block b on b.tenant_id = s.tenant_id and b.source_id = s.id and b.ordinal < 3
               where e1.kind = 'markdown_links_to' and e1.source_block_id in (select id from seed)
               union all
               -- a link to the seed's document from another one: the linking block
               select e1.source_block_id, sb.id, 'markdown_links_to'
               from evidence_block sb
               join source s on s.tenant_id = sb.tenant_id and s.id = sb.source_id
               join evidence_edge e1 on e1.tenant_id = s.tenant_id and e1.kind = 'markdown_links_to'
                and lower(regexp_replace(s.resource_path, '^.*/|\\.[^./]*$', '', 'g'))
                    = lower(regexp_replace(regexp_replace(e1.target_text, '#.*$', ''), '^.*/|\\.[^./]*$', '', 'g'))
               where sb.id in (select id from seed) and sb.ordinal = 0
             )
             select distinct on (id) id, via, kind from hits where id <> via and id not in (select id from seed)
             order by id limit $2",
        )
        .bind(&ids)
        .bind(GRAPH_MAX_NEIGHBOURS)
        .fetch_all(&mut *conn)
        .await?;
        let mut next = Vec::new();
        for (id, via, kind) in rows {
            let s = score_of.get(&via).copied().unwrap_or(0.0) * GRAPH_DECAY;
            if best.get(&id).is_none_or(|&old| s > old) {
                best.insert(id, s);
                steps.insert(id, GraphStep { hop, edge_kind: kind, from_evidence_id: via });
                next.push((id, s));
            }
        }
        frontier = next;
    }
    let mut ids: Vec<(Uuid, f64)> = best.into_iter().collect();
    ids.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Hydration drops what the filters exclude, so keep a margin.
    ids.truncate(top_k * 3);
    Ok(Ranked { ids, graph: steps })
}

/// Turn ranked ids into results (re-checking the filters: graph neighbours come from edges).
async fn hydrate(
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
async fn hydrate_first(
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
    let sql = format!(
        "select b.id, b.text, b.locator, b.is_ocr, s.status, s.kind, s.resource_path, s.id as source_id
         from evidence_block b, source s where b.id = any($6::uuid[]) and {FILTER_SQL}"
    );
    let rows = bind_filters(sqlx::query(&sql), f).bind(&ids).fetch_all(&mut *conn).await?;
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
        out.push(Hit {
            evidence_id: id,
            quote,
            highlights,
            score: (score * 1e6).round() / 1e6,
            citation_markdown: open::citation_markdown(&title, &locator.0.place(), &action.url),
            kind: locator.0.resource_kind,
            source: locator.0,
            open_action: action,
            source_title: title,
            stale: status == SourceStatus::Stale.as_str(),
            graph: graph.remove(&id),
            source_id: row.get("source_id"),
            is_ocr: row.get("is_ocr"),
            resource_path,
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_bounded_and_highlights_point_at_the_terms() {
        let terms = analyze::query_terms("线程作用域").terms;
        let (q, h) = quote_with_highlights("使用线程作用域可以借用栈上的数据", &terms);
        let chars: Vec<char> = q.chars().collect();
        let hl: Vec<String> = h.iter().map(|r| chars[r[0]..r[1]].iter().collect()).collect();
        assert_eq!(hl, ["线程作用域"]);

        let long = format!("{} borrowing here {}", "lorem ".repeat(200), "ipsum ".repeat(200));
        let (q, h) = quote_with_highlights(&long, &analyze::query_terms("borrow").terms);
        assert!(q.chars().count() <= QUOTE_CHARS + 2);
        assert!(q.starts_with('…') && q.ends_with('…'));
        let chars: Vec<char> = q.chars().collect();
        assert_eq!(chars[h[0][0]..h[0][1]].iter().collect::<String>(), "borrowing");
    }

    #[test]
    fn modes_parse() {
        for m in ["lexical", "vector", "hybrid", "graph"] {
            assert_eq!(Mode::parse(m).unwrap().as_str(), m);
        }
        assert!(Mode::parse("fuzzy").is_none());
    }
}

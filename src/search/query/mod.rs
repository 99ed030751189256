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
//!
//! Files: `mod.rs` (request, response, engine, the filters every mode applies, `run`),
//! `lexical.rs`, `vector.rs` (vector and hybrid), `graph.rs`, `hydrate.rs` (ranked ids →
//! located results with quotes).

use std::{collections::HashMap, sync::Arc, time::Instant};

use sqlx::PgConnection;

use crate::db::TenantTx;
use uuid::Uuid;

pub use crate::evidence::tools::{
    Fusion, GraphStep, GroupBy, Mode, Paging, SearchGroup, SearchHit, SearchRequest, SearchResponse,
};
use crate::evidence::{Locator, SourceKind, SourceStatus};

use super::{
    analyze::{self, QueryTerms},
    embed::{EmbedKind, Embedder, has_cjk},
    memindex::{self, MemIndex, RankFilter},
    open,
    vector_health::{self, VectorHealth},
    vectors::Space,
};

use binds::Binds;
use graph::graph;
pub use hydrate::quote_with_highlights;
use hydrate::{hydrate, hydrate_first};
use lexical::{lexical_cte, lexical_hits, lexical_ranked, mem_ranker};
use stages::Stage;
use vector::{QueryVector, hybrid, vector_only};

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

/// A result as the search core returns it: the API's [`SearchHit`] (also reached through
/// `Deref`) and what callers group and label by (eval, `/api/search/documents`, the page).
#[derive(Debug, Clone)]
pub struct Hit {
    pub api: SearchHit,
    pub source_id: Uuid,
    pub is_ocr: bool,
    pub kind: SourceKind,
    pub resource_path: String,
    /// The file's modification time when known, else when the source last changed.
    pub modified_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl std::ops::Deref for Hit {
    type Target = SearchHit;
    fn deref(&self) -> &SearchHit {
        &self.api
    }
}

impl From<Hit> for SearchHit {
    fn from(h: Hit) -> SearchHit {
        h.api
    }
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

/// The filters every mode applies; [`Filters::block_sql`] and [`Filters::source_sql`] bind
/// them into a statement.
#[derive(Debug, Clone)]
struct Filters {
    /// The transaction's tenant, bound into every statement as `s.tenant_id = $n` (and
    /// `b.tenant_id`): the planner then uses the tenant-prefixed indexes; RLS stays the net.
    tenant: Uuid,
    kb_ids: Option<Vec<Uuid>>,
    source_ids: Option<Vec<Uuid>>,
    kinds: Option<Vec<String>>,
    path_prefix: Option<String>,
    include_ocr: bool,
    include_stale: bool,
}

/// The filters bound into one statement over `b` (evidence_block) and `s` (its source).
struct BlockFilter {
    /// The KB-ids placeholder (`uuid[]`, null for every KB), for statistics the SQL also reads.
    kb_ids: String,
    /// The tenant placeholder (`uuid`), for the other tenant tables the SQL reads.
    tenant: String,
    /// The conditions on `b` and `s`.
    sql: String,
}

impl Filters {
    fn of(req: &SearchRequest, tenant: Uuid) -> Filters {
        Filters {
            tenant,
            kb_ids: req.kb_ids.clone(),
            source_ids: req.source_ids.clone(),
            kinds: req.kinds.clone(),
            path_prefix: req.path_prefix.clone().filter(|p| !p.is_empty()),
            include_ocr: req.include_ocr.unwrap_or(true),
            include_stale: req.include_stale.unwrap_or(false),
        }
    }

    /// Conditions on `s`, a row of `readable_source` (a source not under a revoked grant: every
    /// query of the core selects its sources from that view, never from `source`): source ids,
    /// kinds, path prefix, include stale.
    fn source_sql(&self, b: &mut Binds) -> String {
        let (kinds, prefix, stale) = (b.push(&self.kinds), b.push(&self.path_prefix), b.push(self.include_stale));
        let (ids, tenant) = (b.push(&self.source_ids), b.push(self.tenant));
        format!(
            "s.tenant_id = {tenant}::uuid
    and ({ids}::uuid[] is null or s.id = any({ids}::uuid[]))
    and ({kinds}::text[] is null or s.kind = any({kinds}::text[]))
    and ({prefix}::text is null or starts_with(s.resource_path, {prefix}::text))
    and ({stale}::bool or s.status <> 'stale')"
        )
    }

    /// Conditions on `b` (evidence_block) and `s` (its source): KB ids, include OCR and
    /// [`Filters::source_sql`].
    fn block_sql(&self, b: &mut Binds) -> BlockFilter {
        let (kb_ids, ocr, tenant) = (b.push(&self.kb_ids), b.push(self.include_ocr), b.push(self.tenant));
        let sql = format!(
            "b.tenant_id = {tenant}::uuid and s.tenant_id = b.tenant_id and s.id = b.source_id
    and ({kb_ids}::uuid[] is null or b.kb_id = any({kb_ids}::uuid[]))
    and ({ocr}::bool or not b.is_ocr)
    and {}",
            self.source_sql(b)
        );
        BlockFilter { kb_ids, tenant, sql }
    }
}

/// Scored ids of one mode, best first.
pub(super) struct Ranked {
    ids: Vec<(Uuid, f64)>,
    graph: HashMap<Uuid, GraphStep>,
}

pub async fn search(tx: &mut TenantTx, engine: &Engine, req: &SearchRequest) -> Result<SearchResponse<Hit>, SearchError> {
    let tenant = tx.tenant().unwrap_or_default();
    let started = Instant::now();
    let top_k = req.top_k.unwrap_or(DEFAULT_TOP_K);
    if top_k == 0 || top_k > MAX_TOP_K {
        return Err(SearchError::Invalid(format!("topK must be between 1 and {MAX_TOP_K}")));
    }
    let mut resp = if req.is_paged() {
        paged::paged(tx, tenant, engine, req, top_k).await?
    } else {
        run_in(tx, tenant, engine, req, top_k).await?
    };
    resp.took_ms = (started.elapsed().as_secs_f64() * 1000.0 * 100.0).round() / 100.0;
    Ok(resp)
}

/// [`search`] in a transaction opened by `begin`, once more in a new one when the vector
/// side's backend died under the first attempt (that attempt marked the vector side
/// unhealthy, so the second answers lexically with `degraded: true`).
pub async fn search_retrying<F, Fut>(begin: F, engine: &Engine, req: &SearchRequest) -> Result<SearchResponse<Hit>, SearchError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = sqlx::Result<crate::db::TenantTx>>,
{
    let (mut retried, mut moved) = (false, false);
    loop {
        let mut tx = begin().await?;
        let result = search(&mut tx, engine, req).await;
        // The read replica went away under the search: once more, on the primary.
        if result.is_err() && !moved && crate::db::read::standby_lost(&mut tx).await {
            moved = true;
            continue;
        }
        match result {
            Err(SearchError::VectorBackend(e)) if !retried => {
                tracing::warn!("search: the vector statement's backend died ({e}); answering lexically");
                retried = true;
            }
            Err(e) => return Err(e),
            Ok(resp) => {
                crate::db::read::finish(tx).await?;
                return Ok(resp);
            }
        }
    }
}

/// [`search`] without the API's `topK` cap (the evaluation ranks deeper).
pub async fn run(
    tx: &mut TenantTx,
    engine: &Engine,
    req: &SearchRequest,
    top_k: usize,
) -> Result<SearchResponse<Hit>, SearchError> {
    // A transaction without a tenant (never one of a search) matches nothing: the nil id.
    let tenant = tx.tenant().unwrap_or_default();
    run_in(tx, tenant, engine, req, top_k).await
}

async fn run_in(
    conn: &mut PgConnection,
    tenant: Uuid,
    engine: &Engine,
    req: &SearchRequest,
    top_k: usize,
) -> Result<SearchResponse<Hit>, SearchError> {
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
    let filters = Filters::of(req, tenant);
    let analysed = Instant::now();
    let terms = analyze::query_terms(query);
    stages::record(Stage::Analysis, analysed);
    let mut resp = SearchResponse {
        ok: true,
        schema: "mnote.evidence_search_response.v1",
        mode: req.mode.as_str(),
        degraded: false,
        degraded_reason: None,
        fusion: None,
        took_ms: 0.0,
        results: Vec::new(),
        paging: None,
    };

    // Candidates per side for fusion. With RRF k = 20, a block ranked below 4·topK in both
    // lists scores less than one ranked topK in either, so deeper lists rarely change the top.
    let depth = (top_k * 4).max(40) as i64;
    // Vector and hybrid need a query vector; without one they run lexical and say so. Hybrid
    // ranks its lexical list in the mirror while the query is embedded (the model runs on the
    // blocking pool, so the two overlap on two cores).
    let (qvec, mirrored) = if req.mode == Mode::Hybrid {
        let (q, m) = tokio::join!(query_vector(engine, query), vector::mirror_candidates(conn, engine, &filters, &terms, depth));
        (q, m?)
    } else if req.mode == Mode::Vector {
        (query_vector(engine, query).await, None)
    } else {
        (Ok(None), None)
    };
    let qvec = qvec.unwrap_or_else(|reason| {
        resp.degraded = true;
        resp.degraded_reason = Some(reason.into());
        None
    });
    let ranked = match (req.mode, qvec) {
        (Mode::Vector, Some((space, _, v))) => {
            vector_only(conn, &filters, &space, QueryVector { v, cjk: has_cjk(query) }, top_k as i64)
                .await
                .map_err(|e| engine.vector_error(e))?
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
            let q = QueryVector { v, cjk: has_cjk(query) };
            hybrid(conn, &filters, &terms, mirrored, &space, q, fusion, depth, top_k as i64)
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
    // Graph ranks a margin beyond `top_k` (hydration may drop some): never answer more.
    resp.results.truncate(top_k);
    Ok(resp)
}

/// The query's vector from the model its text routes to, with that model's space and whether
/// it is multilingual. `Err`: the degraded reason (no embedder, the vector side backing off, or
/// the embedder failed); vector and hybrid then run lexical.
async fn query_vector(engine: &Engine, query: &str) -> Result<Option<(Space, bool, Vec<f32>)>, &'static str> {
    let e = match &engine.embedder {
        None => return Err("embedder_unavailable"),
        Some(_) if !engine.vector_side_healthy() => return Err(vector_health::CODE),
        Some(e) => crate::search::embed::routed(e, query),
    };
    match e.embed(&[query.to_string()], EmbedKind::Query).await {
        Ok(mut v) if v.len() == 1 => Ok(Some((Space::of(e.as_ref()), e.multilingual(), v.remove(0)))),
        Ok(_) | Err(_) => Err("embedder_unavailable"),
    }
}

mod binds;
mod graph;
mod hydrate;
mod lexical;
mod paged;
pub mod stages;
mod vector;

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
}

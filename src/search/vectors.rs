//! Vectors: which (model, dimension) a deployment uses, its HNSW index, and the embedding
//! backlog the ingest workers drain.
//!
//! `evidence_embedding.embedding` is an untyped `vector`; each (model, dimension) gets a
//! partial HNSW expression index `((embedding::vector(D)))` `where model = '<id>'`, created
//! by `mnote migrate` (the app role cannot create indexes). Queries cast to the same
//! dimension and filter on the same model literal, so the planner uses that index and never
//! compares vectors of two spaces. Changing the model leaves the old rows alone (unused),
//! the backlog fills the new model's rows block by block, and `mnote migrate` drops the
//! rows and indexes of models no longer configured.
//!
//! The default configuration writes one space (multilingual-e5-small for every block and
//! query: Chinese and English meet). A language router writes two spaces (MiniLM for English, e5 for CJK text): each block is
//! embedded once, by the model its text routes to ([`crate::search::embed::routed`]), and a
//! block counts as embedded when it has a vector of any of the router's models.

use std::sync::Arc;

use anyhow::Context;
use pgvector::Vector;
use sqlx::{PgConnection, PgPool, types::Json};
use uuid::Uuid;

use super::{
    embed::{EmbedKind, Embedder},
    vector_health::{VectorHealth, is_backend_failure, is_backend_failure_any},
};
use crate::db::{Scope, TenantTx};

/// Blocks embedded per backlog step (one forward pass of sorted, similar-length texts).
pub const BACKLOG_BATCH: i64 = 64;
/// Characters of a block passed to the embedder. Longer texts are embedded in 256-token
/// windows (up to `onnx::MAX_WINDOWS` of them), so this only bounds pathological blocks.
const MAX_EMBED_CHARS: usize = 8000;

/// The vector space in SQL: literals for the model and the dimension, so the planner can
/// match the partial index (bind parameters would hide them).
#[derive(Clone, Debug, PartialEq)]
pub struct Space {
    pub model: String,
    pub dim: usize,
    /// Cosine below which a nearest neighbour is noise (the model's calibrated floor);
    /// vector candidates under it are dropped.
    pub min_similarity: Option<f64>,
    /// The floor for a block in the other script class than the query
    /// ([`Embedder::cross_min_similarity`]).
    pub cross_min_similarity: Option<f64>,
    /// The same-script floor for a query without CJK letters
    /// ([`Embedder::non_cjk_min_similarity`]).
    pub non_cjk_min_similarity: Option<f64>,
}

impl Space {
    /// The space of one model (route a router first: [`crate::search::embed::routed`]).
    pub fn of(e: &dyn Embedder) -> Self {
        Space {
            model: e.model_id().to_string(),
            dim: e.dimension(),
            min_similarity: e.min_similarity(),
            cross_min_similarity: e.cross_min_similarity(),
            non_cjk_min_similarity: e.non_cjk_min_similarity(),
        }
    }

    pub fn new(model: impl Into<String>, dim: usize) -> Self {
        Space { model: model.into(), dim, min_similarity: None, cross_min_similarity: None, non_cjk_min_similarity: None }
    }

    /// Every space `e` writes (one per model of a router), for indexes and the backlog.
    pub fn all_of(e: &dyn Embedder) -> Vec<Self> {
        e.spaces().into_iter().map(|(m, d)| Space::new(m, d)).collect()
    }

    /// The largest cosine distance a vector candidate in the query's own script class may
    /// have (`query_cjk`: the query has CJK letters; `None`: no floor).
    pub fn max_distance(&self, query_cjk: bool) -> Option<f64> {
        let floor = if query_cjk { self.min_similarity } else { self.non_cjk_min_similarity.or(self.min_similarity) };
        floor.map(|s| 1.0 - s)
    }

    /// [`Space::max_distance`] for a block in the other script class than the query.
    pub fn cross_max_distance(&self) -> Option<f64> {
        self.cross_min_similarity.or(self.min_similarity).map(|s| 1.0 - s)
    }

    /// `'model'` as a SQL string literal.
    pub fn model_literal(&self) -> String {
        format!("'{}'", self.model.replace('\'', "''"))
    }

    /// `vector(384)`
    pub fn vector_type(&self) -> String {
        format!("vector({})", self.dim)
    }

    pub fn index_name(&self) -> String {
        let slug: String =
            self.model.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
        let hash = &format!("{:x}", fnv1a(&self.model))[..8];
        let mut name = format!("evidence_embedding_hnsw_{}_{}_{hash}", self.dim, slug);
        name.truncate(63);
        name
    }
}

/// The spaces a configuration will produce, without loading a model (for `mnote migrate`).
pub fn spaces_of_config(cfg: &super::embed::EmbedConfig) -> Vec<Space> {
    super::embed::spaces_of_config(cfg).into_iter().map(|(m, d)| Space::new(m, d)).collect()
}

/// A small stable hash for index names (FNV-1a; not security relevant).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

/// Create the HNSW index of `space` if missing, and drop the vectors and indexes of other
/// models (a model change re-embeds; old vectors are never mixed in). Runs as the owner.
pub async fn ensure_index(owner: &PgPool, space: &Space) -> anyhow::Result<()> {
    ensure_indexes(owner, std::slice::from_ref(space)).await
}

/// [`ensure_index`] for every space of a configuration (a router has two).
pub async fn ensure_indexes(owner: &PgPool, spaces: &[Space]) -> anyhow::Result<()> {
    let mut names = Vec::new();
    for space in spaces {
        let name = space.index_name();
        let ddl = format!(
            "create index if not exists {name} on evidence_embedding using hnsw (((embedding::{vt})) vector_cosine_ops)
             where model = {model}",
            vt = space.vector_type(),
            model = space.model_literal()
        );
        // dynamic SQL: DDL whose index name, vector type and model literal come from the configuration
        sqlx::query(&ddl).execute(owner).await.with_context(|| ddl.clone())?;
        names.push(name);
    }
    let stale: Vec<String> = sqlx::query_scalar!(
        r#"select indexname::text as "indexname!" from pg_indexes
         where tablename = 'evidence_embedding' and indexname like 'evidence_embedding_hnsw_%' and indexname <> all($1)"#,
        &names,
    )
    .fetch_all(owner)
    .await?;
    for idx in stale {
        // dynamic SQL: DDL naming an index found at run time
        sqlx::query(&format!("drop index if exists \"{}\"", idx.replace('"', "\"\""))).execute(owner).await?;
    }
    // RLS is forced even for the owner, so old vectors are deleted tenant by tenant.
    let models: Vec<String> = spaces.iter().map(|s| s.model.clone()).collect();
    let dims: Vec<i32> = spaces.iter().map(|s| s.dim as i32).collect();
    let tenants: Vec<Uuid> = sqlx::query_scalar!("select id from tenant").fetch_all(owner).await?;
    for t in tenants {
        let mut tx = TenantTx::begin(owner, t, Scope::System).await?;
        sqlx::query!(
            "delete from evidence_embedding e
             where e.tenant_id = $3 and not exists (select 1 from unnest($1::text[], $2::int4[]) s(model, dim)
                               where s.model = e.model and s.dim = vector_dims(e.embedding))",
            &models,
            &dims,
            t,
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    Ok(())
}

/// Whether the index of `space` exists (the server warns at startup when it does not).
pub async fn index_exists(pool: &PgPool, space: &Space) -> sqlx::Result<bool> {
    sqlx::query_scalar!(r#"select exists (select 1 from pg_indexes where indexname = $1) as "exists!""#, space.index_name())
        .fetch_one(pool)
        .await
}

/// Blocks of the tenant that still lack a vector of `space` (for progress and the eval).
pub async fn pending_count(tx: &mut TenantTx, space: &Space) -> sqlx::Result<i64> {
    pending_count_any(tx, std::slice::from_ref(space)).await
}

/// Blocks of the tenant that have a vector of none of `spaces` (a router's backlog). A block
/// without lexical terms (a fragment: `ingest::fragment`, or no word at all) is never
/// embedded: it is not evidence on its own.
pub async fn pending_count_any(tx: &mut TenantTx, spaces: &[Space]) -> sqlx::Result<i64> {
    let models: Vec<String> = spaces.iter().map(|s| s.model.clone()).collect();
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(
        r#"select count(*) as "n!" from evidence_block b
         where b.tenant_id = $2 and b.lex_len > 0 and not exists (select 1 from evidence_embedding e
                           where e.tenant_id = b.tenant_id and e.block_id = b.id and e.model = any($1))"#,
        &models,
        tenant,
    )
    .fetch_one(&mut **tx)
    .await
}

/// Embed up to [`BACKLOG_BATCH`] blocks of `tenant` that lack a vector of the embedder's
/// model. Returns how many were embedded (0 = nothing to do). Concurrent workers take
/// different blocks (`skip locked`); the row locks are held only while writing.
pub async fn embed_backlog_step(pool: &PgPool, embedder: &Arc<dyn Embedder>, tenant: Uuid) -> anyhow::Result<usize> {
    let models: Vec<String> = embedder.spaces().into_iter().map(|(m, _)| m).collect();
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    // Stale vectors first: the blocks they leave without a vector are embedded below.
    let checked = refresh_legacy_cut(&mut tx, embedder, &models).await?;
    let rows: Vec<BlockText> = sqlx::query!(
        r#"select b.id, b.source_id, b.kb_id, b.text,
               coalesce(b.locator->'sectionPath', '[]') as "path!: Json<Vec<String>>" from evidence_block b
         where b.tenant_id = $3 and b.lex_len > 0 and not exists (select 1 from evidence_embedding e
                           where e.tenant_id = b.tenant_id and e.block_id = b.id and e.model = any($1))
         order by b.source_id, b.ordinal
         limit $2
         for update of b skip locked"#,
        &models,
        BACKLOG_BATCH,
        tenant,
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|r| (r.id, r.source_id, r.kb_id, r.text, r.path))
    .collect();
    let n = embed_rows(&mut tx, embedder, tenant, &rows).await?;
    tx.commit().await?;
    Ok(n + checked)
}

/// Vectors of the tenant checked per backlog step by [`refresh_legacy_cut`] (tokenising only).
const LEGACY_CHECK_BATCH: i64 = 512;

/// Check up to [`LEGACY_CHECK_BATCH`] vectors marked `legacy_cut` (written before long texts
/// were embedded in windows): a stale one ([`Embedder::legacy_vector_is_stale`]) is deleted,
/// so its block is back in the backlog and gets a vector of its whole text; the others are
/// unmarked. Returns how many were checked (0 = none left).
pub async fn refresh_legacy_cut(tx: &mut TenantTx, embedder: &Arc<dyn Embedder>, models: &[String]) -> anyhow::Result<usize> {
    /// A block's [`BlockText`] and the model of its marked vector.
    type Marked = (Uuid, Uuid, Uuid, String, Json<Vec<String>>, String);
    let tenant = tx.tenant_id();
    let rows: Vec<Marked> = sqlx::query!(
        r#"select b.id, b.source_id, b.kb_id, b.text,
               coalesce(b.locator->'sectionPath', '[]') as "path!: Json<Vec<String>>", e.model
         from evidence_embedding e join evidence_block b on b.tenant_id = e.tenant_id and b.id = e.block_id
         where e.tenant_id = $3 and e.legacy_cut and e.model = any($1)
         limit $2
         for update of e skip locked"#,
        models,
        LEGACY_CHECK_BATCH,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?
    .into_iter()
    .map(|r| (r.id, r.source_id, r.kb_id, r.text, r.path, r.model))
    .collect();
    if rows.is_empty() {
        return Ok(0);
    }
    let n = rows.len();
    // Tokenising a few hundred blocks is CPU work: off the async workers.
    let e = Arc::clone(embedder);
    let (stale, kept): (Vec<_>, Vec<_>) = tokio::task::spawn_blocking(move || {
        rows.into_iter()
            .map(|(id, source, kb, text, path, model)| {
                let text = embed_text(&(id, source, kb, text, path));
                let by = super::embed::routed(&e, &text);
                // A block now routed to another model keeps its vector (searched in its space).
                let stale = by.model_id() == model && by.legacy_vector_is_stale(&text);
                (stale, (id, model))
            })
            .partition(|(stale, _)| *stale)
    })
    .await
    .context("checking vectors written before windows")?;
    let unzip = |v: Vec<(bool, (Uuid, String))>| -> (Vec<Uuid>, Vec<String>) { v.into_iter().map(|(_, r)| r).unzip() };
    let (ids, ms) = unzip(stale);
    sqlx::query!(
        "delete from evidence_embedding e using unnest($1::uuid[], $2::text[]) r(id, model)
         where e.tenant_id = $3 and e.block_id = r.id and e.model = r.model",
        &ids,
        &ms,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    let (ids, ms) = unzip(kept);
    sqlx::query!(
        "update evidence_embedding e set legacy_cut = false from unnest($1::uuid[], $2::text[]) r(id, model)
         where e.tenant_id = $3 and e.block_id = r.id and e.model = r.model",
        &ids,
        &ms,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    Ok(n)
}

/// (id, source, KB, text, section path) of a block to embed.
pub type BlockText = (Uuid, Uuid, Uuid, String, Json<Vec<String>>);

/// What is embedded for a block: its section titles give a paragraph its context (the same
/// text the lexical index sees), capped in length.
pub fn embed_text(r: &BlockText) -> String {
    truncate_chars(&crate::evidence::index_text(&r.4, &r.3), MAX_EMBED_CHARS)
}

/// Embed these blocks and store their vectors (in the caller's transaction); each block with
/// the model its text routes to.
pub async fn embed_rows(
    conn: &mut PgConnection,
    embedder: &Arc<dyn Embedder>,
    tenant: Uuid,
    rows: &[BlockText],
) -> anyhow::Result<usize> {
    for (model, group) in route_rows(embedder, rows) {
        let space = Space::of(model.as_ref());
        let texts: Vec<String> = group.iter().map(|r| embed_text(r)).collect();
        let vectors = model.embed(&texts, EmbedKind::Passage).await?;
        anyhow::ensure!(
            vectors.len() == group.len(),
            "the embedder returned {} vectors for {} texts",
            vectors.len(),
            group.len()
        );
        let blocks: Vec<(Uuid, Uuid, Uuid)> = group.iter().map(|r| (r.0, r.1, r.2)).collect();
        store_vectors(conn, tenant, &space, &blocks, vectors.into_iter().map(Vector::from).collect()).await?;
    }
    Ok(rows.len())
}

/// `rows` grouped by the model that embeds them (one group unless `embedder` routes).
pub fn route_rows<'r>(embedder: &Arc<dyn Embedder>, rows: &'r [BlockText]) -> Vec<(Arc<dyn Embedder>, Vec<&'r BlockText>)> {
    let mut groups: Vec<(Arc<dyn Embedder>, Vec<&BlockText>)> = Vec::new();
    for r in rows {
        let model = super::embed::routed(embedder, &embed_text(r));
        match groups.iter_mut().find(|(m, _)| m.model_id() == model.model_id()) {
            Some((_, g)) => g.push(r),
            None => groups.push((model, vec![r])),
        }
    }
    groups
}

/// Store one vector of `space` per (block, source, KB) (an existing one is kept).
pub async fn store_vectors(
    conn: &mut PgConnection,
    tenant: Uuid,
    space: &Space,
    blocks: &[(Uuid, Uuid, Uuid)],
    vectors: Vec<Vector>,
) -> sqlx::Result<()> {
    let ids: Vec<Uuid> = blocks.iter().map(|b| b.0).collect();
    let sources: Vec<Uuid> = blocks.iter().map(|b| b.1).collect();
    let kbs: Vec<Uuid> = blocks.iter().map(|b| b.2).collect();
    sqlx::query!(
        "insert into evidence_embedding (tenant_id, block_id, model, source_id, kb_id, embedding)
         select $1, r.id, $2, r.source_id, r.kb_id, r.v
         from unnest($3::uuid[], $4::uuid[], $5::uuid[], $6::vector[]) as r(id, source_id, kb_id, v)
         on conflict (tenant_id, block_id, model) do nothing",
        tenant,
        &space.model,
        &ids,
        &sources,
        &kbs,
        // pgvector's type: the macros have no mapping for `vector[]`.
        &vectors as _,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Set when new blocks were written, so idle workers look for unembedded blocks now rather
/// than at their next periodic check (the check is an anti-join over all blocks).
pub static BACKLOG_HINT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

pub fn hint_backlog() {
    BACKLOG_HINT.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Seconds between backlog checks of an idle worker without a hint (blocks written by
/// another process, an embedder that was down).
const BACKLOG_CHECK_SECS: u64 = 60;

/// One idle-worker step: when hinted (or at the periodic check), embed one batch per tenant.
/// `Ok(true)` = something was embedded, call again. While the vector side is unhealthy the
/// step waits for its retry time instead (see [`guarded_round`]).
pub async fn idle_step(pool: &PgPool, embedder: &Arc<dyn Embedder>, health: &VectorHealth) -> anyhow::Result<bool> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST_CHECK: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let hinted = BACKLOG_HINT.swap(false, Ordering::Relaxed);
    if !hinted && now.saturating_sub(LAST_CHECK.load(Ordering::Relaxed)) < BACKLOG_CHECK_SECS {
        return Ok(false);
    }
    let n = match guarded_round(pool, embedder, health).await? {
        Some(n) => n,
        None => {
            // Backing off: come back at the retry time, not at the next periodic check.
            BACKLOG_HINT.store(true, Ordering::Relaxed);
            return Ok(false);
        }
    };
    LAST_CHECK.store(now, Ordering::Relaxed);
    if n > 0 {
        // Keep going while there is work; other workers see the hint too.
        hint_backlog();
    }
    Ok(n > 0)
}

/// [`embed_backlog_round`] unless the vector side is backing off (`Ok(None)`: not tried).
/// While unhealthy, a due attempt first runs [`probe`]; a failure that means the backend
/// died is recorded in `health` (backoff), and a round that succeeds heals it. Other errors
/// (the embedder, a bad row) are returned as they are.
pub async fn guarded_round(pool: &PgPool, embedder: &Arc<dyn Embedder>, health: &VectorHealth) -> anyhow::Result<Option<usize>> {
    if !health.try_begin() {
        return Ok(None);
    }
    let space = Space::new(embedder.model_id(), embedder.dimension());
    if !health.is_healthy()
        && let Err(e) = probe(pool, &space).await
    {
        if is_backend_failure(&e) {
            health.record_failure(&e);
            return Ok(None);
        }
        return Err(e.into());
    }
    match embed_backlog_round(pool, embedder).await {
        Ok(n) => {
            health.record_success();
            Ok(Some(n))
        }
        Err(e) if is_backend_failure_any(&e) => {
            health.record_failure(&format!("{e:#}"));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A distance over two vectors of the space's dimension: the code path a pgvector build
/// that does not suit the CPU dies on, without touching any table.
pub async fn probe(pool: &PgPool, space: &Space) -> sqlx::Result<()> {
    let vt = space.vector_type();
    let sql = format!(
        "select (array_fill(1::real, array[{d}])::{vt}) <=> (select array_agg(j::real) from generate_series(1, {d}) j)::{vt}",
        d = space.dim
    );
    // dynamic SQL: the dimension is part of the type in the statement
    let _: f64 = sqlx::query_scalar(&sql).fetch_one(pool).await?;
    Ok(())
}

/// Drain the backlog of every tenant (round-robin, one step each). Returns blocks embedded.
pub async fn embed_backlog_round(pool: &PgPool, embedder: &Arc<dyn Embedder>) -> anyhow::Result<usize> {
    let tenants: Vec<Uuid> = sqlx::query_scalar!("select id from tenant order by id").fetch_all(pool).await?;
    let mut n = 0;
    for t in tenants {
        n += embed_backlog_step(pool, embedder, t).await?;
    }
    Ok(n)
}

fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

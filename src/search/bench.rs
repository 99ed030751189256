//! `mnote bench search`: search latency under concurrent load through the HTTP API, against
//! the same queries run in-process without HTTP (the API overhead) in the same run.
//!
//! The collection (BEIR corpus) is ingested into a KB of the tenant, then topped up with
//! generated Markdown (paragraphs recombined from the corpus' own sentences) until the tenant
//! holds `--blocks` blocks. Blocks without a vector get a synthetic one (random, not a real
//! embedding: embedding 100k blocks on these CPUs takes hours), so the numbers measure the
//! index and the SQL, not retrieval quality.

use std::{
    net::SocketAddr,
    path::Path,
    sync::Arc,
    time::Instant,
};

use anyhow::Context;
use uuid::Uuid;

use super::{
    eval::{self, Doc, Q},
    query::{self, Mode, SearchRequest},
    vectors::Space,
};
use crate::{
    cli::{act_as, app_pool},
    db::{Scope, TenantTx},
};

pub struct BenchArgs<'a> {
    pub tenant: &'a str,
    pub kb: &'a str,
    pub corpus: &'a Path,
    pub queries: &'a Path,
    pub blocks: usize,
    pub clients: usize,
    pub requests: usize,
    pub modes: &'a str,
}

/// A tiny deterministic generator (the fill must be the same every run).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}

const FILL_PARAGRAPHS_PER_DOC: usize = 1000;

fn fill_docs(corpus: &[Doc], blocks: usize) -> Vec<Doc> {
    let sentences: Vec<&str> = corpus
        .iter()
        .flat_map(|d| d.text.split(". "))
        .map(str::trim)
        .filter(|s| s.len() > 20)
        .collect();
    if sentences.is_empty() {
        return Vec::new();
    }
    let mut rng = Lcg(42);
    let docs = blocks.div_ceil(FILL_PARAGRAPHS_PER_DOC);
    (0..docs)
        .map(|i| {
            let paragraphs: Vec<String> = (0..FILL_PARAGRAPHS_PER_DOC)
                .map(|_| (0..3).map(|_| sentences[rng.next() % sentences.len()]).collect::<Vec<_>>().join(". ") + ".")
                .collect();
            Doc { id: format!("fill-{i:04}"), title: format!("Generated notes {i}"), text: paragraphs.join("\n\n") }
        })
        .collect()
}

async fn count_blocks(pool: &sqlx::PgPool, tenant: Uuid) -> anyhow::Result<i64> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let n: i64 = sqlx::query_scalar("select coalesce(sum(blocks), 0)::int8 from evidence_kb_stat").fetch_one(&mut *tx).await?;
    tx.commit().await?;
    Ok(n)
}

/// Random vectors for blocks lacking one of `space` (in batches, with progress).
async fn synthetic_vectors(pool: &sqlx::PgPool, tenant: Uuid, space: &Space) -> anyhow::Result<i64> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let pending = super::vectors::pending_count(&mut tx, space).await?;
    tx.commit().await?;
    if pending == 0 {
        return Ok(0);
    }
    let b = eval::bar(pending as u64, "vectors");
    let mut total = 0;
    loop {
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        let n = sqlx::query(
            "insert into evidence_embedding (tenant_id, block_id, model, source_id, kb_id, embedding)
             select b.tenant_id, b.id, $1, b.source_id, b.kb_id,
                    (select array_agg(random() - 0.5) from generate_series(1, $2) where b.id is not null)::vector
             from evidence_block b
             where not exists (select 1 from evidence_embedding e where e.tenant_id = b.tenant_id and e.block_id = b.id and e.model = $1)
             limit 2000",
        )
        .bind(&space.model)
        .bind(space.dim as i32)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if n == 0 {
            break;
        }
        total += n as i64;
        b.inc(n);
    }
    b.finish();
    Ok(total)
}

pub async fn search_command(a: BenchArgs<'_>) -> anyhow::Result<()> {
    let modes: Vec<Mode> = a
        .modes
        .split(',')
        .map(|m| Mode::parse(m.trim()).with_context(|| format!("unknown mode {m:?}")))
        .collect::<anyhow::Result<_>>()?;
    let corpus: Vec<Doc> = eval::read_jsonl(a.corpus)?;
    let queries: Vec<Q> = eval::read_jsonl(a.queries)?;
    anyhow::ensure!(!queries.is_empty(), "no queries in {}", a.queries.display());
    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, a.tenant, None).await?;
    let kb = eval::kb_or_create(&pool, &actor, a.kb, "search benchmark").await?;
    eval::ingest(&pool, &cfg, &actor, kb, &corpus).await?;
    let have = count_blocks(&pool, actor.tenant_id).await? as usize;
    if have < a.blocks {
        let fill = fill_docs(&corpus, a.blocks - have);
        eprintln!("adding {} generated documents to reach {} blocks", fill.len(), a.blocks);
        eval::ingest(&pool, &cfg, &actor, kb, &fill).await?;
    }
    let blocks = count_blocks(&pool, actor.tenant_id).await?;
    let embedder = crate::startup::load_embedder(&pool).await;
    if let Some(e) = &embedder {
        let n = synthetic_vectors(&pool, actor.tenant_id, &Space::of(e.as_ref())).await?;
        if n > 0 {
            eprintln!("{n} synthetic vectors written");
        }
    }
    // The server, in this process, on an ephemeral port, with a pool sized for the clients;
    // a token for the acting member.
    let pool = crate::db::connect(&cfg.database_url, (a.clients + 4) as u32).await?;
    let state = crate::startup::AppState::new(pool.clone(), cfg.clone()).with_embedder(embedder.clone());
    let engine = state.search_engine();
    let app = crate::startup::build_router(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await;
    });
    let token = {
        let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
        let (_, plain) = crate::auth::tokens::create(&mut tx, actor.tenant_id, actor.user_id, "bench search").await?;
        tx.commit().await?;
        plain
    };
    let http = reqwest::Client::builder().pool_max_idle_per_host(a.clients).build()?;
    let url = format!("http://{addr}/api/evidence/search");
    let texts: Arc<Vec<String>> = Arc::new(queries.iter().map(|q| q.text.clone()).collect());

    println!("blocks: {blocks} · clients: {} · requests per mode: {} · queries: {}", a.clients, a.requests, texts.len());
    for mode in modes {
        // Warm-up: caches, the model, the plan.
        for t in texts.iter().take(10) {
            http.post(&url).bearer_auth(&token).json(&serde_json::json!({"query": t, "mode": mode.as_str()})).send().await?;
        }
        // In process, one at a time: the search core without HTTP (the "raw" time).
        let mut raw = Vec::new();
        for t in texts.iter().take(a.requests.min(200)) {
            let req = SearchRequest::new(t.clone(), mode);
            let started = Instant::now();
            let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
            query::search(&mut tx, &engine, &req).await.map_err(|e| anyhow::anyhow!("{e}"))?;
            tx.commit().await?;
            raw.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        raw.sort_by(|x, y| x.total_cmp(y));
        // Through HTTP with `clients` concurrent clients.
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let started = Instant::now();
        let tasks: Vec<_> = (0..a.clients)
            .map(|_| {
                let (http, url, token, texts, next) = (http.clone(), url.clone(), token.clone(), texts.clone(), next.clone());
                let requests = a.requests;
                tokio::spawn(async move {
                    let mut lat = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= requests {
                            break;
                        }
                        let t = &texts[i % texts.len()];
                        let s = Instant::now();
                        let r = http.post(&url).bearer_auth(&token).json(&serde_json::json!({"query": t, "mode": mode.as_str()})).send().await?;
                        anyhow::ensure!(r.status().is_success(), "HTTP {}", r.status());
                        r.bytes().await?;
                        lat.push(s.elapsed().as_secs_f64() * 1000.0);
                    }
                    anyhow::Ok(lat)
                })
            })
            .collect();
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await??);
        }
        let wall = started.elapsed();
        lat.sort_by(|x, y| x.total_cmp(y));
        let p = |v: &[f64], q| eval::percentile(v, q);
        println!(
            "{m}: http p50/p95/p99 ms {:.1} / {:.1} / {:.1} · {:.1} req/s · in-process p50/p95 ms {:.1} / {:.1} · overhead p50 ratio {:.2}",
            p(&lat, 50.0),
            p(&lat, 95.0),
            p(&lat, 99.0),
            lat.len() as f64 / wall.as_secs_f64(),
            p(&raw, 50.0),
            p(&raw, 95.0),
            p(&lat, 50.0) / p(&raw, 50.0).max(1e-9),
            m = mode.as_str()
        );
        println!("{}_p95_ms: {:.1}", mode.as_str(), p(&lat, 95.0));
    }
    if let Some(rss) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l.trim_start_matches("VmHWM:").trim().to_string()))
    {
        println!("peak RSS of this process (server + load generator): {rss}");
    }
    server.abort();
    Ok(())
}

//! `mnote bench search`: search latency under concurrent load through the HTTP API, against
//! the same queries run in-process without HTTP (the API overhead) in the same run.
//!
//! The collection (BEIR corpus) is ingested into a KB of the tenant, then topped up with
//! generated Markdown (paragraphs recombined from the corpus' own sentences) until the tenant
//! holds `--blocks` blocks. Blocks without a vector get a synthetic one (random, not a real
//! embedding: embedding 100k blocks on these CPUs takes hours), so the numbers measure the
//! index and the SQL, not retrieval quality.

use std::{net::SocketAddr, path::Path, sync::Arc, time::Instant};

use uuid::Uuid;

use pgvector::Vector;

use super::{
    bench_lexical::{self, staged_in_process},
    embed::Embedder,
    eval::{self, Doc, Q},
    query::Mode,
    vectors::BlockText,
    vectors::Space,
};
use crate::{
    context::{act_as, app_pool},
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
    /// Queries run in-process with SQL ranking (no mirror) per mode, as the baseline.
    pub sql_baseline: usize,
    /// Open-loop arrival rates (req/s) for the vector modes, each for `open_loop_secs`, with
    /// fresh query vectors; empty: closed loop only.
    pub rates: Vec<f64>,
    pub open_loop_secs: f64,
    /// Judgements (BEIR qrels) for nDCG@10 of the lexical search on the benchmark's corpus.
    pub qrels: Option<&'a Path>,
    /// Also index the same blocks in tantivy and compare (feature `bench-tantivy`).
    pub tantivy: bool,
    /// The whole application router (the server's `build_router`), served on an ephemeral port;
    /// passed in by the CLI because features do not depend on `startup`.
    pub app: fn(crate::state::AppState) -> axum::Router,
    /// `ingest::corpus::load_boxed`, passed in by the CLI.
    pub load: eval::LoadCorpus,
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
    let sentences: Vec<&str> = corpus.iter().flat_map(|d| d.text.split(". ")).map(str::trim).filter(|s| s.len() > 20).collect();
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

/// Up to `limit` blocks of the tenant to embed, in a fixed pseudo-random order.
async fn sample_blocks(tx: &mut TenantTx, tenant: Uuid, limit: i64) -> sqlx::Result<Vec<BlockText>> {
    let rows = sqlx::query!(
        r#"select id, source_id, kb_id, text, coalesce(locator->'sectionPath', '[]') as "path!: sqlx::types::Json<Vec<String>>"
         from evidence_block where tenant_id = $2 order by md5(id::text) limit $1"#,
        limit,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.source_id, r.kb_id, r.text, r.path)).collect())
}

async fn count_blocks(pool: &sqlx::PgPool, tenant: Uuid) -> anyhow::Result<i64> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let n: i64 = sqlx::query_scalar!(
        r#"select coalesce(sum(blocks), 0)::int8 as "n!" from evidence_kb_stat where tenant_id = $1"#,
        tenant
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(n)
}

/// Blocks embedded for real with the configured model before the rest are filled.
const REAL_SEEDS: i64 = 1024;
/// Per-dimension noise added to a seed vector (unit length, 384 dimensions: cosine ≈ 0.9).
const SEED_NOISE: f64 = 0.02;

/// Vectors for blocks lacking one of the embedder's space: when the tenant has none yet,
/// [`REAL_SEEDS`] blocks picked at random are embedded for real; every other block gets a
/// random one of the existing vectors plus Gaussian noise, renormalised. Embedding 100k blocks
/// on these CPUs takes hours; perturbed real vectors keep the neighbourhood structure HNSW
/// sees on real data (uniform random vectors are a needlessly hard worst case).
///
/// With a language router the perturbed copies go to the English model's space (the
/// benchmark collection is SciFact, English; the seeds are embedded as the workers would).
async fn synthetic_vectors(pool: &sqlx::PgPool, tenant: Uuid, embedder: &Arc<dyn Embedder>) -> anyhow::Result<(i64, i64)> {
    let space = Space::of(super::embed::routed(embedder, "").as_ref());
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let pending = super::vectors::pending_count_any(&mut tx, &Space::all_of(embedder.as_ref())).await?;
    let have: i64 = sqlx::query_scalar!(
        r#"select count(*) as "n!" from evidence_embedding where tenant_id = $2 and model = $1"#,
        &space.model,
        tenant,
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    if pending == 0 {
        return Ok((0, 0));
    }
    let mut real = 0;
    if have == 0 {
        let b = crate::platform::progress::bar(REAL_SEEDS as u64, "real vectors (seeds)");
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        let rows = sample_blocks(&mut tx, tenant, REAL_SEEDS).await?;
        for chunk in rows.chunks(32) {
            real += super::vectors::embed_rows(&mut tx, embedder, tenant, chunk).await? as i64;
            b.inc(chunk.len() as u64);
        }
        tx.commit().await?;
        b.finish();
    }
    let seeds: Vec<Vec<f32>> = {
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        // dynamic SQL: the vector type (its dimension) of the space is part of the statement
        let v: Vec<Vector> = sqlx::query_scalar(&format!(
            "select embedding::{} from evidence_embedding where tenant_id = $2 and model = $1 order by block_id limit 4096",
            space.vector_type()
        ))
        .bind(&space.model)
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        v.into_iter().map(|v| v.to_vec()).collect()
    };
    anyhow::ensure!(!seeds.is_empty(), "no seed vectors");
    let b = crate::platform::progress::bar((pending - real).max(0) as u64, "perturbed vectors");
    let mut pick = Lcg(11);
    let mut rng = Lcg(7);
    let mut gauss = move || {
        // Box–Muller from two uniforms in (0, 1].
        let u1 = (rng.next() as f64 + 1.0) / (1u64 << 31) as f64;
        let u2 = (rng.next() as f64 + 1.0) / (1u64 << 31) as f64;
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    };
    let mut filled = 0;
    loop {
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        let rows: Vec<(Uuid, Uuid, Uuid)> = sqlx::query!(
            "select b.id, b.source_id, b.kb_id from evidence_block b
             where b.tenant_id = $2
               and not exists (select 1 from evidence_embedding e where e.tenant_id = b.tenant_id and e.block_id = b.id and e.model = any($1))
             limit 2000",
            &embedder.spaces().into_iter().map(|(m, _)| m).collect::<Vec<_>>(),
            tenant,
        )
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|r| (r.id, r.source_id, r.kb_id))
        .collect();
        if rows.is_empty() {
            break;
        }
        let vecs: Vec<Vector> = rows
            .iter()
            .map(|_| {
                let seed = &seeds[pick.next() % seeds.len()];
                let mut v: Vec<f64> = seed.iter().map(|&x| x as f64 + SEED_NOISE * gauss()).collect();
                let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
                v.iter_mut().for_each(|x| *x /= norm);
                Vector::from(v.into_iter().map(|x| x as f32).collect::<Vec<f32>>())
            })
            .collect();
        super::vectors::store_vectors(&mut tx, tenant, &space, &rows, vecs).await?;
        tx.commit().await?;
        filled += rows.len() as i64;
        b.inc(rows.len() as u64);
    }
    b.finish();
    Ok((real, filled))
}

pub async fn search_command(a: BenchArgs<'_>) -> anyhow::Result<()> {
    let modes = eval::parse_modes(a.modes)?;
    let corpus: Vec<Doc> = eval::read_jsonl(a.corpus)?;
    let queries: Vec<Q> = eval::read_jsonl(a.queries)?;
    anyhow::ensure!(!queries.is_empty(), "no queries in {}", a.queries.display());
    let qrels = a.qrels.map(eval::read_qrels).transpose()?;
    anyhow::ensure!(
        !a.tantivy || cfg!(feature = "bench-tantivy"),
        "--tantivy needs a build with the bench-tantivy feature (cargo build --release --features bench-tantivy)"
    );
    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, a.tenant, None).await?;
    let kb = eval::kb_or_create(&pool, &actor, a.kb, "search benchmark").await?;
    (a.load)(&pool, &cfg, &actor, kb, &eval::as_markdown(&corpus)).await?;
    let have = count_blocks(&pool, actor.tenant_id).await? as usize;
    if have < a.blocks {
        let fill = fill_docs(&corpus, a.blocks - have);
        eprintln!("adding {} generated documents to reach {} blocks", fill.len(), a.blocks);
        (a.load)(&pool, &cfg, &actor, kb, &eval::as_markdown(&fill)).await?;
    }
    let blocks = count_blocks(&pool, actor.tenant_id).await?;
    let embedder = crate::state::load_embedder(&pool).await;
    if let Some(e) = &embedder {
        let (real, filled) = synthetic_vectors(&pool, actor.tenant_id, e).await?;
        if real + filled > 0 {
            eprintln!("vectors written: {real} real (seeds), {filled} perturbed copies of seeds");
        }
        // The query embedding alone, one at a time (part of every vector and hybrid search).
        let mut t = Vec::new();
        for q in queries.iter().take(50) {
            let s = Instant::now();
            e.embed(std::slice::from_ref(&q.text), super::embed::EmbedKind::Query).await?;
            t.push(s.elapsed().as_secs_f64() * 1000.0);
        }
        t.sort_by(|x, y| x.total_cmp(y));
        println!(
            "query embedding ({}): p50/p95 ms {:.1} / {:.1}",
            e.model_id(),
            eval::percentile(&t, 50.0),
            eval::percentile(&t, 95.0)
        );
    }
    // The server, in this process, on an ephemeral port, with a pool sized for the clients;
    // a token for the acting member.
    let pool = crate::db::connect(&cfg.database_url, (a.clients + 4) as u32).await?;
    let state = crate::state::AppState::new(pool.clone(), cfg.clone()).with_embedder(embedder.clone());
    let engine = state.search_engine();
    // The in-memory lexical mirror, built before measuring (a server builds it on first use).
    let versions = {
        let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
        let v = super::memindex::visible_versions(&mut tx, actor.tenant_id, None).await?;
        tx.commit().await?;
        v
    };
    let t0 = Instant::now();
    state.lexical_mirror.warm(&versions).await?;
    let mirror_build_secs = t0.elapsed().as_secs_f64();
    let built: Vec<_> = versions.iter().filter_map(|v| state.lexical_mirror.get(v.kb_id)).collect();
    println!(
        "lexical mirror: {} KBs, {} blocks, {} postings, ~{:.0} MiB, built in {:.2} s",
        built.len(),
        built.iter().map(|i| i.version.blocks).sum::<i64>(),
        built.iter().map(|i| i.postings()).sum::<usize>(),
        built.iter().map(|i| i.heap_bytes()).sum::<usize>() as f64 / (1 << 20) as f64,
        t0.elapsed().as_secs_f64()
    );
    let sql_engine = crate::search::query::Engine::new(engine.embedder.clone(), engine.public_url.clone());
    let app = (a.app)(state);
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

    println!("blocks: {blocks} · clients: {} · queries: {}", a.clients, texts.len());
    // The last 200 queries run in-process (and warm up); the HTTP passes use the others, so a
    // query's vector is never cached before its first HTTP request.
    let tail = texts.len().saturating_sub(200).max(texts.len() / 2);
    let http_texts: Arc<Vec<String>> = Arc::new(texts[..tail.min(a.requests.max(1))].to_vec());
    let local_texts = &texts[tail..];
    println!("HTTP: {} distinct queries per pass, then the same again (repeated: cached query vectors)", http_texts.len());
    for mode in modes {
        // Warm-up: the model, the plans, the connections.
        for t in local_texts.iter().take(10) {
            http.post(&url).bearer_auth(&token).json(&serde_json::json!({"query": t, "mode": mode.as_str()})).send().await?;
        }
        // In process, one at a time: the search core without HTTP (the "raw" time), and the
        // same core ranking lexically in SQL (no mirror) on a few queries: the baseline.
        let (raw, stage_rows) = staged_in_process(&pool, &actor, &engine, local_texts, mode).await?;
        let (sql, _) =
            staged_in_process(&pool, &actor, &sql_engine, &local_texts[..a.sql_baseline.min(local_texts.len())], mode).await?;
        let p = |v: &[f64], q| eval::percentile(v, q);
        let m = mode.as_str();
        println!("{m}: in-process p50/p95 ms {:.2} / {:.2}", p(&raw, 50.0), p(&raw, 95.0));
        if mode == Mode::Lexical {
            bench_lexical::print_stages(m, &raw, &stage_rows);
            let ndcg10 = match &qrels {
                Some(qrels) => {
                    let (ndcg, n) = bench_lexical::lexical_quality(&pool, &actor, &engine, kb, &queries, qrels).await?;
                    println!("lexical nDCG@10 on this corpus ({blocks} blocks), {n} judged queries: {ndcg:.4}");
                    Some(ndcg)
                }
                None => None,
            };
            if a.tantivy {
                let ours = bench_lexical::Ours {
                    totals: &raw,
                    ranking: bench_lexical::ranking_times(&stage_rows),
                    mirror_build_secs,
                    texts: local_texts,
                    queries: &queries,
                    qrels: qrels.as_ref(),
                    ndcg10,
                };
                #[cfg(feature = "bench-tantivy")]
                super::bench_tantivy::side_by_side(&pool, actor.tenant_id, kb, &ours).await?;
                #[cfg(not(feature = "bench-tantivy"))]
                let _ = ours;
            }
        }
        if !sql.is_empty() {
            println!(
                "{m}: in-process with SQL ranking (no mirror), {} queries: p50/p95 ms {:.1} / {:.1} · mirror speed-up p50 {:.0}×",
                sql.len(),
                p(&sql, 50.0),
                p(&sql, 95.0),
                p(&sql, 50.0) / p(&raw, 50.0).max(1e-9),
            );
        }
        // Through HTTP with `clients` concurrent clients: each query once, then again.
        for pass in ["distinct", "repeated"] {
            let (lat, wall) = http_pass(&http, &url, &token, &http_texts, mode, a.clients).await?;
            println!(
                "{m} ({pass}): http p50/p95/p99 ms {:.1} / {:.1} / {:.1} · {:.1} req/s · http/in-process p50 ratio {:.2}",
                p(&lat, 50.0),
                p(&lat, 95.0),
                p(&lat, 99.0),
                lat.len() as f64 / wall,
                p(&lat, 50.0) / p(&raw, 50.0).max(1e-9),
            );
            let suffix = if pass == "distinct" { "" } else { "_repeated" };
            println!("{m}_p95_ms{suffix}: {:.1}", p(&lat, 95.0));
        }
        // Open loop: requests arrive at a fixed rate whether or not earlier ones are done,
        // and each latency counts from its scheduled start (no coordinated omission). Every
        // request is a query text not seen before (so its vector is computed, not cached).
        if matches!(mode, Mode::Vector | Mode::Hybrid) {
            for (k, &rate) in a.rates.iter().enumerate() {
                let n = (rate * a.open_loop_secs).ceil() as usize;
                let fresh: Vec<String> = (0..n).map(|i| fresh_query(&texts, i, k + 1)).collect();
                let (lat, wall) = open_loop(&http, &url, &token, fresh, mode, rate).await?;
                println!(
                    "{m} (open loop {rate} req/s, fresh vectors): p50/p95/p99 ms {:.1} / {:.1} / {:.1} · {} requests in {:.1} s",
                    p(&lat, 50.0),
                    p(&lat, 95.0),
                    p(&lat, 99.0),
                    lat.len(),
                    wall
                );
                println!("{m}_open_{rate}_p95_ms: {:.1}", p(&lat, 95.0));
            }
        }
    }
    if let Some(rss) = peak_rss() {
        println!("peak RSS of this process (server + load generator): {rss}");
    }
    server.abort();
    Ok(())
}

/// Query `i` of open-loop pass `pass`: a benchmark query made textually new (a variant mark
/// the analyser drops), so neither the query-vector cache nor an earlier pass has seen it.
fn fresh_query(texts: &[String], i: usize, pass: usize) -> String {
    let t = &texts[i % texts.len()];
    let round = pass * 1000 + i / texts.len();
    format!("{t} {}", "?".repeat(round % 7 + 1)) + &" ".repeat(round / 7 + 1)
}

/// `texts` sent at `rate` per second (each on its own task at its scheduled time). Latencies
/// (sorted, ms, from the scheduled start) and the wall time (s).
async fn open_loop(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    texts: Vec<String>,
    mode: Mode,
    rate: f64,
) -> anyhow::Result<(Vec<f64>, f64)> {
    let started = tokio::time::Instant::now();
    let tasks: Vec<_> = texts
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let (http, url, token) = (http.clone(), url.to_string(), token.to_string());
            let at = started + std::time::Duration::from_secs_f64(i as f64 / rate);
            tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                let r = http
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&serde_json::json!({"query": t, "mode": mode.as_str()}))
                    .send()
                    .await?;
                anyhow::ensure!(r.status().is_success(), "HTTP {}", r.status());
                r.bytes().await?;
                anyhow::Ok(at.elapsed().as_secs_f64() * 1000.0)
            })
        })
        .collect();
    let mut lat = Vec::with_capacity(tasks.len());
    for t in tasks {
        lat.push(t.await??);
    }
    let wall = started.elapsed().as_secs_f64();
    lat.sort_by(|x, y| x.total_cmp(y));
    Ok((lat, wall))
}

/// Every text once through `POST /api/evidence/search`, by `clients` concurrent clients.
/// Latencies (sorted, ms) and the wall time (s).
async fn http_pass(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    texts: &Arc<Vec<String>>,
    mode: Mode,
    clients: usize,
) -> anyhow::Result<(Vec<f64>, f64)> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (http, url, token, texts, next) = (http.clone(), url.to_string(), token.to_string(), texts.clone(), next.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(t) = texts.get(i) else { break };
                    let s = Instant::now();
                    let r = http
                        .post(&url)
                        .bearer_auth(&token)
                        .json(&serde_json::json!({"query": t, "mode": mode.as_str()}))
                        .send()
                        .await?;
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
    let wall = started.elapsed().as_secs_f64();
    lat.sort_by(|x, y| x.total_cmp(y));
    Ok((lat, wall))
}

/// `mnote bench embed`: passage-embedding throughput of the local models on `limit` blocks of
/// a tenant (a random sample), split into English and CJK blocks, with the text and the batch
/// size the workers use, and the machine's fp32 bound (two sgemm kernels: matrixmultiply and ONNX Runtime's), so the
/// throughput reads as a share of what the cores can do. Nothing is written.
pub async fn embed_command(tenant: &str, limit: i64) -> anyhow::Result<()> {
    use super::embed::{E5_SMALL, EmbedConfig, MINILM, OnnxEmbedder, has_cjk};
    let (_cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, tenant, None).await?;
    let EmbedConfig::Local(lc) = EmbedConfig::from_env()? else {
        anyhow::bail!("`mnote bench embed` measures the local models (MNOTE_EMBEDDER=local)");
    };
    let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::System).await?;
    let rows = sample_blocks(&mut tx, actor.tenant_id, limit).await?;
    tx.commit().await?;
    anyhow::ensure!(!rows.is_empty(), "tenant {tenant} has no blocks");
    let texts: Vec<String> = rows.iter().map(super::vectors::embed_text).collect();
    let (zh, en): (Vec<String>, Vec<String>) = texts.into_iter().partition(|t| has_cjk(t));
    println!("{} blocks sampled: {} English, {} with CJK text; {} passage threads", rows.len(), en.len(), zh.len(), lc.threads);
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').take(3).collect::<Vec<_>>().join(" ");
    println!("load average at the start: {}", load());

    // The bound: what these cores sustain on fp32 multiply-adds (two sgemm kernels; the
    // better one counts).
    let rust = tokio::task::spawn_blocking(move || rust_sgemm_gflops(lc.threads)).await?;
    let graph = lc.ort_library.parent().and_then(|p| p.parent()).map(|m| m.join("bench/sgemm-1024.onnx")).unwrap_or_default();
    let (lib, threads) = (lc.ort_library.clone(), lc.threads);
    let sgemm = tokio::task::spawn_blocking(move || super::embed::onnx::sgemm_gflops(&lib, &graph, threads, 20)).await??;
    let bound = rust.max(sgemm);
    println!(
        "fp32 bound ({} threads): sgemm 512³ per thread (matrixmultiply) {rust:.1} GFLOP/s · ONNX Runtime sgemm 2048×1024×1024 {sgemm:.1} GFLOP/s",
        lc.threads
    );
    println!("sgemm_bound_gflops: {bound:.1}");

    let minilm = OnnxEmbedder::load(&MINILM, &lc.minilm_dir, &lc.ort_library, lc.threads)?;
    let e5 = OnnxEmbedder::load(&E5_SMALL, &lc.e5_dir, &lc.ort_library, lc.threads)?;
    let report = |tag: &str, what: &str, texts: &[String], r: &Run| {
        let chars: usize = texts.iter().map(|t| t.chars().count()).sum();
        println!(
            "{what}: {} blocks ({:.0} characters, {:.0} tokens on average) in {:.1} s = {:.2} blocks/s · {:.1} useful GFLOP/s = {:.0} % of the sgemm bound",
            texts.len(),
            chars as f64 / texts.len() as f64,
            r.tokens as f64 / texts.len() as f64,
            r.secs,
            texts.len() as f64 / r.secs,
            r.flops / r.secs / 1e9,
            100.0 * r.flops / r.secs / 1e9 / bound,
        );
        println!("embedding_blocks_per_s_{tag}: {:.2}", texts.len() as f64 / r.secs);
        println!("share_of_bound_{tag}: {:.2}", r.flops / r.secs / 1e9 / bound);
    };
    if !en.is_empty() {
        let ort = time_embed(&minilm, &en, |t| windows_of(&minilm, t, 6)).await?;
        report("en_ort", "all-MiniLM-L6-v2, ONNX Runtime", &en, &ort);
        let sample = &en[..en.len().min(200)];
        let r = time_embed(&e5, sample, |t| windows_of(&e5, t, 12)).await?;
        report("en_e5", "multilingual-e5-small on English blocks (the all-e5 option)", sample, &r);
    }
    if !zh.is_empty() {
        let r = time_embed(&e5, &zh, |t| windows_of(&e5, t, 12)).await?;
        report("zh_e5", "multilingual-e5-small, ONNX Runtime, CJK blocks", &zh, &r);
    }
    println!("load average at the end: {}", load());
    if let Some(rss) = peak_rss() {
        println!("peak RSS: {rss}");
    }
    Ok(())
}

/// One timed pass: seconds, tokens and useful FLOPs (padding not counted).
struct Run {
    secs: f64,
    tokens: usize,
    flops: f64,
}

/// Forward-pass FLOPs of one BERT window of `len` tokens (hidden 384, FFN 1536, `layers`):
/// the four projections and the FFN (2 × multiply-adds per weight per token) plus attention
/// (QKᵀ and PV: 2 × 2 × len × hidden per token).
fn bert_flops(len: usize, layers: usize) -> f64 {
    let (h, ff) = (384.0, 1536.0);
    let per_token = 2.0 * (4.0 * h * h + 2.0 * h * ff) + 4.0 * len as f64 * h;
    layers as f64 * len as f64 * per_token
}

/// (tokens, FLOPs) of each window `m` embeds `text` in.
fn windows_of(m: &super::embed::OnnxEmbedder, text: &str, layers: usize) -> Vec<(usize, f64)> {
    m.windows(text, super::embed::EmbedKind::Passage)
        .unwrap_or_default()
        .iter()
        .map(|w| (w.len(), bert_flops(w.len(), layers)))
        .collect()
}

/// Embed `texts` in the workers' batches (after a warm-up) and count the work.
async fn time_embed<E, W, I>(e: &E, texts: &[String], work: W) -> anyhow::Result<Run>
where
    E: Embedder,
    W: Fn(&str) -> I,
    I: IntoIterator<Item = (usize, f64)>,
{
    let (mut tokens, mut flops) = (0, 0.0);
    for t in texts {
        for (n, f) in work(t) {
            tokens += n;
            flops += f;
        }
    }
    e.embed(&texts[..texts.len().min(8)], super::embed::EmbedKind::Passage).await?; // warm up
    let b = crate::platform::progress::bar(texts.len() as u64, "embedding");
    let started = Instant::now();
    for batch in texts.chunks(super::vectors::BACKLOG_BATCH as usize) {
        e.embed(batch, super::embed::EmbedKind::Passage).await?;
        b.inc(batch.len() as u64);
    }
    b.finish();
    Ok(Run { secs: started.elapsed().as_secs_f64(), tokens, flops })
}

/// Sustained fp32 multiply-add rate of `threads` cores: one 512 × 512 × 512 sgemm per
/// thread and round (ndarray → matrixmultiply, compiled optimised, FMA kernels picked at run
/// time), repeated for about a second. GFLOP/s.
fn rust_sgemm_gflops(threads: usize) -> f64 {
    use ndarray::{Array2, linalg::general_mat_mul};
    const N: usize = 512;
    const ROUNDS: usize = 24;
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let a = Array2::<f32>::from_shape_fn((N, N), |(i, j)| ((i * 31 + j * 17) % 100) as f32 / 100.0);
                let b = Array2::<f32>::from_shape_fn((N, N), |(i, j)| ((i * 13 + j * 7) % 100) as f32 / 100.0);
                let mut c = Array2::<f32>::zeros((N, N));
                for _ in 0..ROUNDS {
                    general_mat_mul(1.0, &a, &b, 0.0, &mut c);
                }
                std::hint::black_box(c);
            });
        }
    });
    let flops = 2.0 * (N * N * N) as f64 * ROUNDS as f64 * threads.max(1) as f64;
    flops / started.elapsed().as_secs_f64() / 1e9
}

/// This process's peak resident memory (`VmHWM`), as the kernel prints it.
fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).map(|v| v.trim().to_string())
}

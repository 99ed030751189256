//! `mnote bench rag` (docs/BENCHMARKS.md): against a running LightRAG, on the test documents
//! uploaded into a throwaway KB of `--tenant` (deleted afterwards, with its LightRAG docs):
//!
//! - **sync throughput**: our sync (send + LightRAG's processing) in documents/s, against
//!   LightRAG ingesting the same payloads sent to it directly, in the same run;
//! - **mapping accuracy**: share of LightRAG chunks of our documents mapped `exact` to the
//!   block that really holds the chunk's text (found independently, block by block);
//! - **proxy overhead**: `/api/knowledge-rag/query` minus a direct `/query/data` for the same
//!   request, p50/p95, alternating the two.

use std::{path::Path, time::Instant};

use anyhow::Context as _;
use uuid::Uuid;

use super::{
    client::{LightRag, QueryMode, QueryRequest, doc_id_of},
    mapping::MatchQuality,
};
use crate::{
    context::{act_as, app_pool},
    db::{Scope, TenantTx},
    platform::SecretString,
    state::AppState,
};

pub struct BenchArgs<'a> {
    pub tenant: &'a str,
    pub url: &'a str,
    pub key_file: Option<&'a Path>,
    pub docs: &'a Path,
    pub queries: usize,
    pub rounds: usize,
    /// The server's router (`startup::build_router`), served in-process.
    pub app: fn(AppState) -> axum::Router,
}

const KINDS: &[&str] = &["md", "docx", "pdf", "jpg", "jpeg", "png"];

fn files(dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut out: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .filter(|p| p.extension().and_then(|e| e.to_str()).is_some_and(|e| KINDS.contains(&e.to_ascii_lowercase().as_str())))
        .collect();
    out.sort();
    anyhow::ensure!(!out.is_empty(), "no documents under {}", dir.display());
    Ok(out)
}

/// The request of every bench query: retrieval only, ten chunks with their texts.
fn naive(q: &str) -> QueryRequest {
    QueryRequest {
        query: q.to_string(),
        mode: QueryMode::Naive,
        top_k: Some(10),
        chunk_top_k: Some(10),
        include_references: true,
        include_chunk_content: true,
    }
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn significant(t: &str) -> String {
    t.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// Wait until LightRAG has processed (or failed) every document id.
async fn wait_processed(lr: &LightRag, ids: &[String]) -> anyhow::Result<usize> {
    for _ in 0..2400 {
        let docs = lr.all_documents().await?;
        let done: Vec<_> =
            docs.iter().filter(|d| ids.contains(&d.id) && matches!(d.status.as_str(), "processed" | "failed")).collect();
        if done.len() == ids.len() {
            return Ok(done.iter().filter(|d| d.status == "processed").count());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    anyhow::bail!("LightRAG did not finish within 4 minutes")
}

async fn wait_gone(lr: &LightRag, ids: &[String]) -> anyhow::Result<()> {
    for _ in 0..600 {
        if !lr.all_documents().await?.iter().any(|d| ids.contains(&d.id)) {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    anyhow::bail!("LightRAG did not delete the benchmark documents within 2 minutes")
}

pub async fn run(a: BenchArgs<'_>) -> anyhow::Result<()> {
    let (mut cfg, pool) = app_pool().await?;
    // The key: --lightrag-key-file, else `./dev lightrag`'s in the data dir, else none.
    let key_file =
        a.key_file.map(Path::to_path_buf).or_else(|| Some(cfg.data_dir.join("lightrag/api.key")).filter(|f| f.exists()));
    let key = match &key_file {
        Some(f) => Some(std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?.trim().to_string()),
        None => None,
    };
    cfg.rag.allowed_urls = vec![a.url.to_string()];
    if cfg.rag.secret_key.is_none() {
        cfg.rag.secret_key = Some(crate::platform::crypto::MasterKey::generate());
    }
    let actor = act_as(&pool, a.tenant, None).await?;
    let lr = LightRag::new(a.url, key.clone().map(SecretString::new), cfg.rag.timeout)?;
    let h = lr.health().await.context("LightRAG is not reachable (./dev lightrag start)")?;
    println!("LightRAG {} at {}", h.core_version.unwrap_or_default(), a.url);

    // The server in-process, and an API token of the tenant's owner.
    let state = AppState::new(pool.clone(), cfg.clone());
    let (base, auth, token_id) = crate::context::serve_in_process(state, a.app, &actor, "bench rag").await?;
    let http = crate::platform::http::Client::builder().build()?.reqwest().clone();

    let ctx =
        Ctx { a: &a, cfg: &cfg, pool: &pool, actor: &actor, lr: &lr, http: &http, base: &base, auth: &auth, key: key.as_deref() };
    let result = bench(&ctx).await;
    let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
    crate::auth::tokens::revoke(&mut tx, actor.user_id, token_id).await?;
    tx.commit().await?;
    result
}

/// What every step of the bench uses.
struct Ctx<'a> {
    a: &'a BenchArgs<'a>,
    cfg: &'a crate::config::Config,
    pool: &'a sqlx::PgPool,
    actor: &'a crate::auth::Auth,
    lr: &'a LightRag,
    http: &'a reqwest::Client,
    base: &'a str,
    auth: &'a str,
    key: Option<&'a str>,
}

/// A throwaway KB, measured, then deleted with its LightRAG documents.
async fn bench(c: &Ctx<'_>) -> anyhow::Result<()> {
    let files = files(c.a.docs)?;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let kb: serde_json::Value = c
        .http
        .post(format!("{}/api/kbs", c.base))
        .header("authorization", c.auth)
        .json(&serde_json::json!({"name": format!("rag-bench-{stamp}"), "visibility": "private"}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let kb_id: Uuid = kb["id"].as_str().context("kb id")?.parse()?;
    let r = measure(c, &files, kb_id).await;
    let _ = c.http.delete(format!("{}/api/kbs/{kb_id}", c.base)).header("authorization", c.auth).send().await;
    let _ = super::sync::pass_tenant(c.pool, c.cfg, c.actor.tenant_id, None).await;
    r
}

async fn measure(c: &Ctx<'_>, files: &[std::path::PathBuf], kb_id: Uuid) -> anyhow::Result<()> {
    let Ctx { a, cfg, pool, actor, lr, http, base, auth, key } = *c;
    // Upload and index (not timed: that is `bench ingest`).
    for f in files {
        let bytes = std::fs::read(f)?;
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let form = reqwest::multipart::Form::new().part("file", reqwest::multipart::Part::bytes(bytes).file_name(name));
        http.post(format!("{base}/api/kbs/{kb_id}/uploads"))
            .header("authorization", auth)
            .multipart(form)
            .send()
            .await?
            .error_for_status()?;
    }
    let mut cursor = 0;
    crate::ingest::pipeline::drain(pool, cfg, "bench-rag", std::time::Duration::from_secs(900), &mut cursor, |_| {}).await?;
    let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::System).await?;
    let wanted = super::docs::wanted(&mut tx, kb_id).await?;
    tx.commit().await?;
    println!("{} of {} documents indexed", wanted.len(), files.len());

    // Baseline: the same payloads straight into LightRAG (files it parses, our text otherwise).
    let mut direct_ids = Vec::new();
    let t = Instant::now();
    for w in &wanted {
        let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::System).await?;
        let text = super::docs::artifact_text(&mut tx, w.id, &w.indexed_hash).await?;
        let source = crate::sources::queries::get(&mut tx, w.id).await?.context("source")?;
        let mut file =
            crate::ingest::pipeline::open_source(&mut tx, cfg, &source).await?.map_err(|e| anyhow::anyhow!("{}", e.1))?;
        let scanned = super::docs::has_ocr(&mut tx, w.id, &w.indexed_hash).await?;
        tx.commit().await?;
        let name = format!("bench-direct-{stamp}-{}", w.resource_path.rsplit('/').next().unwrap_or("x"), stamp = kb_id.simple());
        let is_text = matches!(w.kind.0, crate::evidence::SourceKind::Image) || scanned;
        if is_text {
            lr.insert_text(&name, text.as_deref().unwrap_or(" ")).await?;
        } else {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes)?;
            lr.upload(&name, bytes).await?;
        }
        direct_ids.push(doc_id_of(&name));
    }
    let direct_ok = wait_processed(lr, &direct_ids).await?;
    let direct_secs = t.elapsed().as_secs_f64();
    lr.delete_documents(&direct_ids).await?;
    wait_gone(lr, &direct_ids).await?;

    // Ours: bind, then sync until settled.
    let body = serde_json::json!({"url": a.url, "apiKey": key});
    http.put(format!("{base}/api/kbs/{kb_id}/knowledge-rag"))
        .header("authorization", auth)
        .json(&body)
        .send()
        .await?
        .error_for_status()?;
    let t = Instant::now();
    for _ in 0..4800 {
        let r = super::sync::pass_tenant(pool, cfg, actor.tenant_id, Some(kb_id)).await?;
        if r.sent == 0 && r.pending == 0 && r.deleted == 0 && r.errors.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let sync_secs = t.elapsed().as_secs_f64();
    let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::System).await?;
    let processed = sqlx::query_scalar!(
        r#"select count(*) as "n!" from rag_doc d join rag_binding b on b.tenant_id = d.tenant_id and b.id = d.binding_id
         where d.tenant_id = $2 and b.kb_id = $1 and b.active and d.status = 'processed'"#,
        kb_id,
        actor.tenant_id,
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    let n = wanted.len() as f64;
    println!(
        "sync: {processed}/{} processed in {sync_secs:.2} s = {:.2} docs/s · LightRAG direct: {direct_ok}/{} in {direct_secs:.2} s = {:.2} docs/s · ratio {:.2}",
        wanted.len(),
        n / sync_secs,
        direct_ids.len(),
        n / direct_secs,
        direct_secs / sync_secs
    );

    // Queries: the opening words of blocks spread over the documents.
    let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::System).await?;
    let blocks: Vec<(Uuid, Uuid, String)> = sqlx::query!(
        "select e.id, e.source_id, e.text from evidence_block e
         join source s on s.tenant_id = e.tenant_id and s.id = e.source_id and s.indexed_hash = e.source_hash
         where e.tenant_id = $2 and s.kb_id = $1 and length(e.text) >= 60 order by e.source_id, e.ordinal",
        kb_id,
        actor.tenant_id,
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|r| (r.id, r.source_id, r.text))
    .collect();
    tx.commit().await?;
    anyhow::ensure!(!blocks.is_empty(), "no text blocks to query");
    let step = (blocks.len() / a.queries.max(1)).max(1);
    let queries: Vec<String> = blocks
        .iter()
        .step_by(step)
        .take(a.queries)
        .map(|(_, _, t)| {
            if t.chars().any(|c| c as u32 >= 0x3400) {
                t.chars().take(24).collect()
            } else {
                t.split_whitespace().take(12).collect::<Vec<_>>().join(" ")
            }
        })
        .collect();

    // Mapping accuracy over every chunk of our documents LightRAG returns.
    let cache = super::blocks::BlockCache::new(64);
    let (mut total, mut exact_right) = (0usize, 0usize);
    let mut by_quality = std::collections::BTreeMap::<&'static str, usize>::new();
    for q in &queries {
        let req = naive(q);
        let data = lr.query_data(&req).await?;
        for c in &data.chunks {
            let Some(source) = super::docs::source_of_file_path(&c.file_path) else { continue };
            let mine: Vec<&(Uuid, Uuid, String)> = blocks.iter().filter(|b| b.1 == source).collect();
            if mine.is_empty() && !wanted.iter().any(|w| w.id == source) {
                continue;
            }
            let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
            let r =
                super::query::cite(&mut tx, &cache, None, &[kb_id], &c.file_path, std::slice::from_ref(&c.content), q).await?;
            tx.commit().await?;
            let Some(r) = r else { continue };
            total += 1;
            let label = match r.match_quality {
                MatchQuality::Exact => "exact",
                MatchQuality::Fuzzy => "fuzzy",
                MatchQuality::FileOnly => "file_only",
                MatchQuality::Unmatched => "unmatched",
            };
            *by_quality.entry(label).or_default() += 1;
            // The block that really holds the chunk's start, found independently of the
            // aligner: the first block where the chunk's opening (80 significant characters)
            // starts (looking on across the following blocks).
            let head: String = significant(&c.content).chars().take(80).collect();
            let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::System).await?;
            let all: Vec<(Uuid, String)> = sqlx::query!(
                "select e.id, e.text from evidence_block e
                 join source s on s.tenant_id = e.tenant_id and s.id = e.source_id and s.indexed_hash = e.source_hash
                 where e.tenant_id = $2 and e.source_id = $1 order by e.ordinal",
                source,
                actor.tenant_id,
            )
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|r| (r.id, r.text))
            .collect();
            tx.commit().await?;
            let norm: Vec<String> = all.iter().map(|(_, t)| significant(t)).collect();
            let truth = (0..all.len())
                .find(|&i| {
                    let mut window = String::new();
                    for n in &norm[i..] {
                        window.push_str(n);
                        if window.len() >= norm[i].len() + head.len() {
                            break;
                        }
                    }
                    window.find(&head).is_some_and(|at| at < norm[i].len())
                })
                .map(|i| &all[i]);
            if r.match_quality == MatchQuality::Exact && truth.is_some_and(|(id, _)| Some(*id) == r.evidence_id) {
                exact_right += 1;
            } else {
                // RUST_LOG=mnote::rag::bench=debug shows each miss.
                let chosen = all.iter().find(|(id, _)| Some(*id) == r.evidence_id).map(|x| x.1.as_str()).unwrap_or("-");
                tracing::debug!(
                    quality = ?r.match_quality,
                    source = %r.source_path,
                    chunk = %c.content.chars().take(80).collect::<String>(),
                    ours = %chosen.chars().take(80).collect::<String>(),
                    truth = ?truth.map(|t| t.1.chars().take(80).collect::<String>()),
                    "mapping miss"
                );
            }
        }
    }
    println!(
        "mapping: {exact_right}/{total} chunks mapped exact to the block holding their text = {:.1} % ({by_quality:?})",
        100.0 * exact_right as f64 / total.max(1) as f64
    );

    // Proxy overhead, alternating direct and proxied calls of the same request.
    let (mut direct, mut proxied, mut refs, mut own) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..a.rounds {
        for q in &queries {
            let req = naive(q);
            let t = Instant::now();
            lr.query_data(&req).await?;
            direct.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            let r: serde_json::Value = http
                .post(format!("{base}/api/knowledge-rag/query"))
                .header("authorization", auth)
                .json(&serde_json::json!({"kbIds": [kb_id], "query": q, "mode": "naive", "topK": 10}))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            proxied.push(t.elapsed().as_secs_f64() * 1000.0);
            refs.push(r["references"].as_array().map_or(0, Vec::len) as f64);
            let t = &r["timings"];
            own.push(t["totalMs"].as_f64().unwrap_or(f64::NAN) - t["providerMs"].as_f64().unwrap_or(f64::NAN));
        }
    }
    let overhead: Vec<f64> = proxied.iter().zip(&direct).map(|(p, d)| p - d).collect();
    println!(
        "proxy: {} queries × {} rounds, {:.1} mapped references on average · direct /query/data p50 {:.1} ms p95 {:.1} ms · \
         /api/knowledge-rag/query p50 {:.1} ms p95 {:.1} ms · overhead p50 {:.1} ms p95 {:.1} ms · \
         the proxy's own work (server-side, all but waiting for LightRAG) p50 {:.2} ms p95 {:.2} ms",
        queries.len(),
        a.rounds,
        refs.iter().sum::<f64>() / refs.len().max(1) as f64,
        pct(direct.clone(), 0.5),
        pct(direct, 0.95),
        pct(proxied.clone(), 0.5),
        pct(proxied, 0.95),
        pct(overhead.clone(), 0.5),
        pct(overhead, 0.95),
        pct(own.clone(), 0.5),
        pct(own, 0.95)
    );
    Ok(())
}

//! `mnote eval`: retrieval quality on a BEIR-format collection, through the same search code
//! path as the API. Each corpus document becomes one Markdown upload (`# title` + text, named
//! `<_id>.md`) of the KB; documents are ranked by their best block.

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use futures_util::future::BoxFuture;
use serde::Deserialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::{
    embed::Embedder,
    query::{self, Engine, Mode, SearchRequest},
    vectors::{self, Space},
};
use crate::{
    auth::Auth,
    config::Config,
    context::{act_as, app_pool},
    db::{Scope, TenantTx},
    kbs,
    platform::progress::bar,
};

/// Blocks ranked per query before grouping by document (Recall@100 needs ≥ 100 documents).
const EVAL_DEPTH: usize = 300;

#[derive(Deserialize)]
pub(crate) struct Doc {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub text: String,
}

#[derive(Deserialize)]
pub(crate) struct Q {
    #[serde(rename = "_id")]
    pub id: String,
    pub text: String,
}

pub(crate) fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<Vec<T>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{}:{}", path.display(), i + 1)))
        .collect()
}

/// `query-id \t corpus-id \t score` with a header line; scores ≤ 0 are not relevant.
pub(crate) fn read_qrels(path: &Path) -> anyhow::Result<HashMap<String, HashMap<String, f64>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out: HashMap<String, HashMap<String, f64>> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 3 || (i == 0 && f[2].parse::<f64>().is_err()) {
            continue;
        }
        let score: f64 = f[2].trim().parse().with_context(|| format!("{}:{}: bad score", path.display(), i + 1))?;
        if score > 0.0 {
            out.entry(f[0].to_string()).or_default().insert(f[1].to_string(), score);
        }
    }
    Ok(out)
}

fn markdown_of(d: &Doc) -> String {
    let title = d.title.trim();
    if title.is_empty() { format!("{}\n", d.text.trim()) } else { format!("# {title}\n\n{}\n", d.text.trim()) }
}

/// The KB named `name` visible to `actor`, created (private, owned by them) when missing.
pub(crate) async fn kb_or_create(pool: &PgPool, actor: &Auth, name: &str, description: &str) -> anyhow::Result<Uuid> {
    let mut tx = actor.tx_pool(pool).await?;
    let id = match kbs::queries::get_by_name(&mut tx, actor.user_id, actor.role.is_admin(), name).await? {
        Some(k) => k.id,
        None => kbs::queries::insert(&mut tx, actor.tenant_id, name, description, "private", actor.user_id).await?,
    };
    tx.commit().await?;
    Ok(id)
}

/// Loads a collection into a KB: each `(file stem, Markdown)` uploaded as `uploads/<stem>.md`
/// unless already there, then parsed. `ingest::corpus::load_boxed`, handed in by `cli` (the
/// search side names no ingest code).
pub type LoadCorpus =
    for<'a> fn(&'a PgPool, &'a Config, &'a Auth, Uuid, &'a [(String, String)]) -> BoxFuture<'a, anyhow::Result<()>>;

/// The collection as [`LoadCorpus`] takes it: `# title` + text per document.
pub(crate) fn as_markdown(docs: &[Doc]) -> Vec<(String, String)> {
    docs.iter().map(|d| (d.id.clone(), markdown_of(d))).collect()
}

/// Embed every block of the tenant lacking a vector of the embedder's model.
pub(crate) async fn embed_all(pool: &PgPool, tenant: Uuid, embedder: &Arc<dyn Embedder>) -> anyhow::Result<(usize, Duration)> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let pending = vectors::pending_count_any(&mut tx, &Space::all_of(embedder.as_ref())).await?;
    tx.commit().await?;
    let started = Instant::now();
    if pending == 0 {
        return Ok((0, started.elapsed()));
    }
    let b = bar(pending as u64, "embed");
    let mut n = 0;
    // Until no block of the tenant lacks a vector: another process (a running server's
    // workers) may hold part of the backlog, and a figure must not depend on that race; when it
    // does not drain in [`EMBED_WAIT`], the evaluation refuses instead of ranking without them.
    let deadline = Instant::now() + EMBED_WAIT;
    loop {
        let k = vectors::embed_backlog_step(pool, embedder, tenant).await?;
        n += k;
        b.inc(k as u64);
        if k > 0 {
            continue;
        }
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        let left = vectors::pending_count_any(&mut tx, &Space::all_of(embedder.as_ref())).await?;
        tx.commit().await?;
        if left == 0 {
            break;
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "{left} blocks of the tenant still have no vector after {} s: the figures would be incomplete",
                EMBED_WAIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    b.finish();
    Ok((n, started.elapsed()))
}

/// How long an evaluation waits for blocks another process is embedding.
const EMBED_WAIT: Duration = Duration::from_secs(600);

#[derive(Default, Debug, Clone)]
pub struct Metrics {
    pub ndcg10: f64,
    pub recall100: f64,
    pub mrr10: f64,
    pub latencies_ms: Vec<f64>,
    pub queries: usize,
}

/// nDCG@10 (graded gains, log2 discount), Recall@100 and MRR@10 of one ranking.
pub fn score_ranking(ranked: &[String], rel: &HashMap<String, f64>) -> (f64, f64, f64) {
    let dcg: f64 =
        ranked.iter().take(10).enumerate().map(|(i, d)| rel.get(d).copied().unwrap_or(0.0) / ((i + 2) as f64).log2()).sum();
    let mut ideal: Vec<f64> = rel.values().copied().collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal.iter().take(10).enumerate().map(|(i, g)| g / ((i + 2) as f64).log2()).sum();
    let ndcg = if idcg > 0.0 { dcg / idcg } else { 0.0 };
    let found = ranked.iter().take(100).filter(|d| rel.contains_key(*d)).count();
    let recall = if rel.is_empty() { 0.0 } else { found as f64 / rel.len() as f64 };
    let mrr = ranked.iter().take(10).position(|d| rel.contains_key(d)).map(|i| 1.0 / (i + 1) as f64).unwrap_or(0.0);
    (ndcg, recall, mrr)
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn run_queries(
    pool: &PgPool,
    actor: &Auth,
    engine: &Engine,
    kb: Uuid,
    mode: Mode,
    queries: &[Q],
    qrels: &HashMap<String, HashMap<String, f64>>,
) -> anyhow::Result<Metrics> {
    let mut m = Metrics::default();
    let b = bar(queries.len() as u64, mode.as_str());
    let (mut ndcg, mut recall, mut mrr) = (0.0, 0.0, 0.0);
    for q in queries {
        let Some(rel) = qrels.get(&q.id) else { continue };
        let mut req = SearchRequest::new(q.text.clone(), mode);
        req.kb_ids = Some(vec![kb]);
        let started = Instant::now();
        let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
        let resp = query::run(&mut tx, engine, &req, EVAL_DEPTH).await.map_err(|e| anyhow::anyhow!("{q:?}: {e}", q = q.id))?;
        tx.commit().await?;
        m.latencies_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        let mut ranked: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for h in &resp.results {
            if seen.insert(h.source_id) {
                let id = h.resource_path.trim_start_matches("uploads/").trim_end_matches(".md").to_string();
                ranked.push(id);
            }
        }
        let (n, r, rr) = score_ranking(&ranked, rel);
        ndcg += n;
        recall += r;
        mrr += rr;
        m.queries += 1;
        b.inc(1);
        b.set_message(format!("nDCG@10 {:.4}", ndcg / m.queries as f64));
    }
    b.finish();
    if m.queries > 0 {
        m.ndcg10 = ndcg / m.queries as f64;
        m.recall100 = recall / m.queries as f64;
        m.mrr10 = mrr / m.queries as f64;
    }
    m.latencies_ms.sort_by(|a, b| a.total_cmp(b));
    Ok(m)
}

pub struct EvalArgs<'a> {
    pub tenant: &'a str,
    pub as_email: Option<&'a str>,
    pub kb: &'a str,
    pub corpus: &'a Path,
    pub queries: &'a Path,
    pub qrels: &'a Path,
    pub modes: &'a str,
    pub rrf_k: Option<f64>,
    pub limit_queries: Option<usize>,
    pub lexical_sql: bool,
    pub load: LoadCorpus,
}

/// `lexical,vector,hybrid` → modes.
pub fn parse_modes(list: &str) -> anyhow::Result<Vec<Mode>> {
    list.split(',')
        .map(|m| Mode::parse(m.trim()).with_context(|| format!("unknown mode {m:?} (lexical, vector, hybrid, graph)")))
        .collect()
}

pub async fn eval_command(a: EvalArgs<'_>) -> anyhow::Result<()> {
    let modes = parse_modes(a.modes)?;
    let docs: Vec<Doc> = read_jsonl(a.corpus)?;
    let mut queries: Vec<Q> = read_jsonl(a.queries)?;
    let qrels = read_qrels(a.qrels)?;
    queries.retain(|q| qrels.contains_key(&q.id));
    if let Some(n) = a.limit_queries {
        queries.truncate(n);
    }
    anyhow::ensure!(!queries.is_empty(), "no query of {} has relevance judgements in {}", a.queries.display(), a.qrels.display());

    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, a.tenant, a.as_email).await?;
    let kb = kb_or_create(&pool, &actor, a.kb, "evaluation collection").await?;
    eprintln!("{} documents, {} judged queries, KB {:?}", docs.len(), queries.len(), a.kb);
    let t0 = Instant::now();
    (a.load)(&pool, &cfg, &actor, kb, &as_markdown(&docs)).await?;
    eprintln!("ingest ready in {:.1} s", t0.elapsed().as_secs_f64());

    let needs_vectors = modes.iter().any(|m| matches!(m, Mode::Vector | Mode::Hybrid));
    let embedder = if needs_vectors { crate::state::load_embedder(&pool).await } else { None };
    if let Some(e) = &embedder {
        let (n, took) = embed_all(&pool, actor.tenant_id, e).await?;
        if n > 0 {
            println!(
                "embedded: {n} blocks in {:.1} s ({:.1} blocks/s, model {})",
                took.as_secs_f64(),
                n as f64 / took.as_secs_f64(),
                e.model_id()
            );
        }
    } else if needs_vectors {
        eprintln!("note: no embedder available; vector and hybrid run degraded (lexical)");
    }
    if let (Some(e), true) = (&embedder, modes.contains(&Mode::Vector)) {
        calibrate(&pool, &actor, e, kb, &queries, &qrels).await?;
    }
    let mut engine = Engine::new(embedder, None);
    if !a.lexical_sql {
        engine = engine.with_mem(super::memindex::MemIndex::new(pool.clone()), true);
    }
    if let Some(k) = a.rrf_k {
        engine.rrf_k = k;
    }
    let single = modes.len() == 1;
    for mode in modes {
        let m = run_queries(&pool, &actor, &engine, kb, mode, &queries, &qrels).await?;
        let l = &m.latencies_ms;
        let tag = if single { String::new() } else { format!("[{}]", mode.as_str()) };
        println!("mode {} · {} queries · rrf_k {}", mode.as_str(), m.queries, engine.rrf_k);
        println!(
            "latency{tag} ms p50/p95/p99: {:.1} / {:.1} / {:.1}",
            percentile(l, 50.0),
            percentile(l, 95.0),
            percentile(l, 99.0)
        );
        println!("nDCG@10{tag}: {:.4}", m.ndcg10);
        println!("Recall@100{tag}: {:.4}", m.recall100);
        println!("MRR@10{tag}: {:.4}", m.mrr10);
    }
    Ok(())
}

/// Queries sampled for the similarity-floor calibration.
const CALIBRATION_QUERIES: usize = 300;

/// What a similarity floor has to separate, per model: the cosine of each judged query's best
/// relevant block among its 50 nearest (matches the floor must keep) against the top-1 cosine
/// of nonsense queries in the same script (noise it must drop), per model and query script.
/// Printed, not applied: the floors live in `embed::onnx` (`ModelSpec::min_similarity`,
/// `non_cjk_min_similarity`, `cross_min_similarity`) and `docs/BENCHMARKS.md` records the
/// runs they come from.
async fn calibrate(
    pool: &PgPool,
    actor: &Auth,
    embedder: &Arc<dyn Embedder>,
    kb: Uuid,
    queries: &[Q],
    qrels: &HashMap<String, HashMap<String, f64>>,
) -> anyhow::Result<()> {
    use super::embed::{EmbedKind, routed};
    async fn nearest(
        pool: &PgPool,
        actor: &Auth,
        kb: Uuid,
        e: &Arc<dyn Embedder>,
        text: &str,
    ) -> anyhow::Result<(String, Vec<(f64, String)>)> {
        let model = routed(e, text);
        let v = model.embed(&[text.to_string()], EmbedKind::Query).await?.remove(0);
        let space = Space::of(model.as_ref());
        let vt = space.vector_type();
        let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
        sqlx::query!("select set_config('hnsw.ef_search', '100', true)").fetch_one(&mut *tx).await?;
        // dynamic SQL: the space's vector type (its dimension) and model literal are part of the statement
        let rows: Vec<(f64, String)> = sqlx::query_as(&format!(
            "select 1 - (e.embedding::{vt} <=> $1::{vt}), s.resource_path
             from evidence_embedding e join source s on s.tenant_id = e.tenant_id and s.id = e.source_id
             where e.tenant_id = $3 and e.model = {m} and e.kb_id = $2
             order by e.embedding::{vt} <=> $1::{vt} limit 50",
            m = space.model_literal()
        ))
        .bind(pgvector::Vector::from(v))
        .bind(kb)
        .bind(actor.tenant_id)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let rows =
            rows.into_iter().map(|(s, p)| (s, p.trim_start_matches("uploads/").trim_end_matches(".md").to_string())).collect();
        // Keyed by the query's script class too: a multilingual model's cross-language
        // matches (an English query over Chinese blocks) have their own floor.
        let script = if super::embed::has_cjk(text) { "CJK query" } else { "non-CJK query" };
        Ok((format!("{}, {script}", space.model), rows))
    }
    let mut relevant: HashMap<String, Vec<f64>> = HashMap::new();
    let mut noise: HashMap<String, Vec<f64>> = HashMap::new();
    let b = bar(queries.len().min(CALIBRATION_QUERIES) as u64 * 2, "calibrate");
    for (i, q) in queries.iter().take(CALIBRATION_QUERIES).enumerate() {
        let Some(rel) = qrels.get(&q.id) else { continue };
        let (model, rows) = nearest(pool, actor, kb, embedder, &q.text).await?;
        if let Some((s, _)) = rows.iter().find(|(_, d)| rel.contains_key(d)) {
            relevant.entry(model).or_default().push(*s);
        }
        // A nonsense query of the same script and length class: letters or Han characters
        // drawn from a fixed generator.
        let nonsense = nonsense_like(&q.text, i);
        let (model, rows) = nearest(pool, actor, kb, embedder, &nonsense).await?;
        if let Some((s, _)) = rows.first() {
            noise.entry(model).or_default().push(*s);
        }
        b.inc(2);
    }
    b.finish();
    for (model, mut rel) in relevant {
        rel.sort_by(|a, b| a.total_cmp(b));
        let mut n = noise.remove(&model).unwrap_or_default();
        n.sort_by(|a, b| a.total_cmp(b));
        let max_noise = n.last().copied().unwrap_or(f64::NAN);
        let kept = rel.iter().filter(|&&s| s > max_noise).count();
        println!(
            "similarity floor calibration ({model}): relevant best p1/p5/p50 {:.3} / {:.3} / {:.3} ({} queries) · \
             nonsense top-1 p50/p95/max {:.3} / {:.3} / {:.3} ({} queries) · above the nonsense max: {:.1} % of relevant",
            percentile(&rel, 1.0),
            percentile(&rel, 5.0),
            percentile(&rel, 50.0),
            rel.len(),
            percentile(&n, 50.0),
            percentile(&n, 95.0),
            max_noise,
            n.len(),
            100.0 * kept as f64 / rel.len().max(1) as f64
        );
    }
    Ok(())
}

/// A deterministic nonsense string shaped like `text`: as many Han characters (for a CJK
/// text) or as many letter groups (otherwise), from a fixed generator.
fn nonsense_like(text: &str, seed: usize) -> String {
    let mut x = (seed as u64).wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) as u32
    };
    if super::embed::has_cjk(text) {
        let n = text.chars().filter(|c| super::embed::has_cjk(&c.to_string())).count().clamp(3, 12);
        (0..n).filter_map(|_| char::from_u32(0x4E00 + next() % 0x5000)).collect()
    } else {
        let words = text.split_whitespace().count().clamp(1, 8);
        (0..words)
            .map(|_| (0..3 + next() % 6).map(|_| char::from(b'a' + (next() % 26) as u8)).collect::<String>())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_follow_their_definitions() {
        let rel: HashMap<String, f64> = [("a".to_string(), 1.0), ("b".to_string(), 1.0)].into();
        let ranked: Vec<String> = ["x", "a", "y", "b"].iter().map(|s| s.to_string()).collect();
        let (ndcg, recall, mrr) = score_ranking(&ranked, &rel);
        let dcg = 1.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let idcg = 1.0 + 1.0 / 3f64.log2();
        assert!((ndcg - dcg / idcg).abs() < 1e-12);
        assert_eq!(recall, 1.0);
        assert_eq!(mrr, 0.5);
        assert_eq!(score_ranking(&[], &rel), (0.0, 0.0, 0.0));
        let perfect: Vec<String> = vec!["a".into(), "b".into()];
        assert!((score_ranking(&perfect, &rel).0 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn qrels_skip_the_header_and_irrelevant_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.tsv");
        std::fs::write(&p, "query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\t0\n2\td3\t2\n").unwrap();
        let q = read_qrels(&p).unwrap();
        assert_eq!(q["1"].len(), 1);
        assert_eq!(q["2"]["d3"], 2.0);
    }

    #[test]
    fn documents_become_markdown_with_their_title_as_heading() {
        let d = Doc { id: "7".into(), title: "T".into(), text: "body".into() };
        assert_eq!(markdown_of(&d), "# T\n\nbody\n");
        let d = Doc { id: "8".into(), title: "".into(), text: "正文".into() };
        assert_eq!(markdown_of(&d), "正文\n");
    }
}

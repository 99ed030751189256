//! `mnote bench search`, lexical side: where an in-process lexical search spends its time,
//! stage by stage (the regression guard of docs/BENCHMARKS.md); quality on the benchmark's
//! own corpus when qrels are given; and, built with the `bench-tantivy` feature, the same
//! blocks and queries in an in-process tantivy index (BM25, English stemming) beside ours.

use std::{
    collections::{HashMap, HashSet},
    time::Instant,
};

use uuid::Uuid;

use super::{
    eval::{self, Q},
    query::{
        self, Mode, SearchHit, SearchRequest,
        stages::{self, STAGES},
    },
};
use crate::{
    auth::Auth,
    db::{Scope, TenantTx},
};

/// Blocks ranked per query before grouping by document, as `mnote eval` does.
pub(super) const QUALITY_DEPTH: usize = 300;

/// The columns of the stage table: the core's stages between the transaction's begin and
/// commit, what the core spent outside them ("other"), and the JSON the API would send.
const COLUMNS: usize = STAGES.len() + 4;

fn column_names() -> Vec<&'static str> {
    let mut v = vec!["begin"];
    v.extend(STAGES.iter().map(|s| s.name()));
    v.extend(["commit", "other", "JSON (API body)"]);
    v
}

/// Each text through `query::search` in process, one at a time, with the time of each stage.
/// Latencies (begin to commit, sorted, ms) and one row of stage times (ms) per query.
pub(super) async fn staged_in_process(
    pool: &sqlx::PgPool,
    actor: &Auth,
    engine: &query::Engine,
    texts: &[String],
    mode: Mode,
) -> anyhow::Result<(Vec<f64>, Vec<[f64; COLUMNS]>)> {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let mut totals = Vec::with_capacity(texts.len());
    let mut rows = Vec::with_capacity(texts.len());
    for t in texts {
        let req = SearchRequest::new(t.clone(), mode);
        let before = stages::totals();
        let started = Instant::now();
        let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
        let begun = started.elapsed();
        let resp = query::search(&mut tx, engine, &req).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let committing = Instant::now();
        tx.commit().await?;
        let commit = committing.elapsed();
        let total = started.elapsed();
        let after = stages::totals();
        let json = Instant::now();
        let body = serde_json::to_vec(&resp.map_results(SearchHit::from))?;
        std::hint::black_box(body);
        let json = json.elapsed();

        let mut row = [0.0; COLUMNS];
        row[0] = ms(begun);
        for (i, (a, b)) in after.iter().zip(&before).enumerate() {
            row[1 + i] = a.saturating_sub(*b) as f64 / 1e6;
        }
        row[STAGES.len() + 1] = ms(commit);
        let inside: f64 = row[..STAGES.len() + 2].iter().sum();
        row[STAGES.len() + 2] = (ms(total) - inside).max(0.0);
        row[STAGES.len() + 3] = ms(json);
        totals.push(ms(total));
        rows.push(row);
    }
    totals.sort_by(|x, y| x.total_cmp(y));
    Ok((totals, rows))
}

/// The stage table: p50 and mean per stage, each stage's share of the mean total, and one
/// machine-readable line of p50s (µs) to set beside the last good one in docs/BENCHMARKS.md.
pub(super) fn print_stages(mode: &str, totals: &[f64], rows: &[[f64; COLUMNS]]) {
    if rows.is_empty() {
        return;
    }
    let names = column_names();
    let mean_total = totals.iter().sum::<f64>() / totals.len() as f64;
    println!("{mode}: stages of {} in-process searches, one at a time (ms; begin..commit = the in-process time):", rows.len());
    println!("  {:<16} {:>7} {:>7} {:>7} {:>6}", "stage", "p50", "p95", "mean", "share");
    let mut line = Vec::new();
    for (c, name) in names.iter().enumerate() {
        let mut v: Vec<f64> = rows.iter().map(|r| r[c]).collect();
        v.sort_by(|x, y| x.total_cmp(y));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let share = if c + 1 == COLUMNS { String::new() } else { format!("{:.0} %", 100.0 * mean / mean_total.max(1e-9)) };
        println!(
            "  {:<16} {:>7.3} {:>7.3} {:>7.3} {:>6}",
            name,
            eval::percentile(&v, 50.0),
            eval::percentile(&v, 95.0),
            mean,
            share
        );
        line.push(format!("{}={:.0}", name.split(' ').next().unwrap_or(name), eval::percentile(&v, 50.0) * 1000.0));
    }
    println!(
        "  {:<16} {:>7.3} {:>7.3} {:>7.3}",
        "begin..commit",
        eval::percentile(totals, 50.0),
        eval::percentile(totals, 95.0),
        mean_total
    );
    println!("{mode}_stage_p50_us: {}", line.join(" "));
}

/// nDCG@10 of the lexical search over every query with judgements, documents ranked by their
/// best block (as `mnote eval`), on whatever the benchmark tenant holds. Also the
/// per-query document rankings, for the side by side.
pub(super) async fn lexical_quality(
    pool: &sqlx::PgPool,
    actor: &Auth,
    engine: &query::Engine,
    kb: Uuid,
    queries: &[Q],
    qrels: &HashMap<String, HashMap<String, f64>>,
) -> anyhow::Result<(f64, usize)> {
    let (mut sum, mut n) = (0.0, 0);
    let b = crate::platform::progress::bar(queries.iter().filter(|q| qrels.contains_key(&q.id)).count() as u64, "quality");
    for q in queries {
        let Some(rel) = qrels.get(&q.id) else { continue };
        let mut req = SearchRequest::new(q.text.clone(), Mode::Lexical);
        req.kb_ids = Some(vec![kb]);
        let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
        let resp = query::run(&mut tx, engine, &req, QUALITY_DEPTH).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        tx.commit().await?;
        let mut seen = HashSet::new();
        let ranked: Vec<String> =
            resp.results.iter().filter(|h| seen.insert(h.source_id)).map(|h| doc_id(&h.resource_path)).collect();
        sum += eval::score_ranking(&ranked, rel).0;
        n += 1;
        b.inc(1);
    }
    b.finish();
    Ok((if n == 0 { 0.0 } else { sum / n as f64 }, n))
}

/// The corpus id of an evaluation upload (`uploads/<id>.md`).
pub(super) fn doc_id(resource_path: &str) -> String {
    resource_path.trim_start_matches("uploads/").trim_end_matches(".md").to_string()
}

/// A block as the tantivy comparison indexes it.
#[cfg_attr(not(feature = "bench-tantivy"), allow(dead_code))]
pub(super) struct KbBlock {
    pub block_type: String,
    pub text: String,
    pub path: sqlx::types::Json<Vec<String>>,
    pub resource_path: String,
}

/// The KB's blocks in id order, streamed (the tantivy comparison indexes them). Here rather
/// than beside that comparison so the statement is compiled, and so kept in `.sqlx/`, in every
/// build, not only in those with the `bench-tantivy` feature.
#[cfg_attr(not(feature = "bench-tantivy"), allow(dead_code))]
pub(super) fn kb_blocks(
    conn: &mut sqlx::PgConnection,
    tenant: Uuid,
    kb: Uuid,
) -> futures_util::stream::BoxStream<'_, sqlx::Result<KbBlock>> {
    sqlx::query_as!(
        KbBlock,
        r#"select b.block_type, b.text, coalesce(b.locator->'sectionPath', '[]') as "path!: _", s.resource_path
         from evidence_block b join source s on s.tenant_id = b.tenant_id and s.id = b.source_id
         where b.tenant_id = $2 and b.kb_id = $1 order by b.id"#,
        kb,
        tenant,
    )
    .fetch(conn)
}

/// Our side's figures the tantivy comparison prints its ratios against.
#[cfg_attr(not(feature = "bench-tantivy"), allow(dead_code))]
pub(super) struct Ours<'a> {
    /// In-process lexical searches (begin..commit), sorted, ms.
    pub totals: &'a [f64],
    /// Ranking stage alone per query, sorted, ms.
    pub ranking: Vec<f64>,
    pub mirror_build_secs: f64,
    /// The texts timed (the same ones go through tantivy).
    pub texts: &'a [String],
    pub queries: &'a [Q],
    pub qrels: Option<&'a HashMap<String, HashMap<String, f64>>>,
    pub ndcg10: Option<f64>,
}

/// The ranking stage's times (ms, sorted) out of the stage rows.
pub(super) fn ranking_times(rows: &[[f64; COLUMNS]]) -> Vec<f64> {
    let c = 1 + STAGES.iter().position(|s| *s == stages::Stage::Ranking).unwrap_or(0);
    let mut v: Vec<f64> = rows.iter().map(|r| r[c]).collect();
    v.sort_by(|x, y| x.total_cmp(y));
    v
}

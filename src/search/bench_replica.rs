//! `mnote bench search --read-replica`: the same search load through HTTP against two servers
//! in this process, one reading from the primary only and one with `MNOTE_READ_DATABASE_URL`
//! (the hot standby), alternated in one run; then the standby's replay lag sampled while
//! documents are ingested (docs/BENCHMARKS.md).

use std::{
    net::SocketAddr,
    path::Path,
    sync::{Arc, atomic::AtomicUsize, atomic::Ordering},
    time::{Duration, Instant},
};

use super::{
    eval::{self, Doc, Q},
    query::Mode,
};
use crate::{
    context::{act_as, app_pool},
    db::{Scope, TenantTx, read::parse_lsn},
};

pub struct ReplicaArgs<'a> {
    pub tenant: &'a str,
    pub kb: &'a str,
    pub corpus: &'a Path,
    pub queries: &'a Path,
    pub clients: usize,
    pub requests: usize,
    pub modes: &'a str,
    pub app: fn(crate::state::AppState) -> axum::Router,
    /// `ingest::corpus::load_boxed`, passed in by the CLI.
    pub load: eval::LoadCorpus,
}

pub async fn run(a: ReplicaArgs<'_>) -> anyhow::Result<()> {
    let modes = eval::parse_modes(a.modes)?;
    let queries: Vec<Q> = eval::read_jsonl(a.queries)?;
    anyhow::ensure!(!queries.is_empty(), "no queries in {}", a.queries.display());
    let (cfg, pool) = app_pool().await?;
    let standby_url = cfg
        .read_database_url
        .clone()
        .ok_or_else(|| anyhow::anyhow!("--read-replica needs MNOTE_READ_DATABASE_URL (the standby)"))?;
    let actor = act_as(&pool, a.tenant, None).await?;
    let embedder = crate::state::load_embedder(&pool).await;
    let pool = crate::db::connect(&cfg.database_url, (2 * a.clients + 6) as u32).await?;
    let mut primary_cfg = cfg.clone();
    primary_cfg.read_database_url = None;
    let primary = crate::state::AppState::new(pool.clone(), primary_cfg).with_embedder(embedder.clone());
    let replica = crate::state::AppState::new(pool.clone(), cfg.clone()).with_embedder(embedder.clone());
    // Both servers share one lexical mirror warm-up cost: each builds its own before measuring.
    let versions = {
        let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
        let v = super::memindex::visible_versions(&mut tx, actor.tenant_id, None).await?;
        tx.commit().await?;
        v
    };
    anyhow::ensure!(
        !versions.is_empty(),
        "tenant {} has no indexed blocks: run `mnote bench search` without --read-replica first",
        a.tenant
    );
    primary.lexical_mirror.warm(&versions).await?;
    replica.lexical_mirror.warm(&versions).await?;
    let wait = Instant::now();
    while !replica.reads.report().serving {
        anyhow::ensure!(
            wait.elapsed() < Duration::from_secs(30),
            "the standby does not serve reads: {:?}",
            replica.reads.report()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let token = {
        let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
        let (_, plain) = crate::auth::tokens::create(&mut tx, actor.tenant_id, actor.user_id, "bench read replica").await?;
        tx.commit().await?;
        plain
    };
    let metrics = replica.metrics.clone();
    let urls = [("primary only", serve(a.app, primary).await?), ("primary + standby", serve(a.app, replica).await?)];
    let http = reqwest::Client::builder().pool_max_idle_per_host(a.clients).build()?;
    let texts: Arc<Vec<String>> = Arc::new(queries.iter().take(a.requests.max(1)).map(|q| q.text.clone()).collect());
    println!("read replica: {} · clients: {} · queries per pass: {}", redact(&standby_url), a.clients, texts.len());
    for mode in modes {
        let m = mode.as_str();
        for (_, url) in &urls {
            pass(&http, url, &token, &texts[..texts.len().min(20)], mode, a.clients).await?;
        }
        // Alternated twice, so drift of the shared machine hits both alike.
        let mut all: [(Vec<f64>, f64); 2] = Default::default();
        for _round in 0..2 {
            for (i, (_, url)) in urls.iter().enumerate() {
                let (lat, wall) = pass(&http, url, &token, &texts, mode, a.clients).await?;
                all[i].0.extend(lat);
                all[i].1 += wall;
            }
        }
        for (i, (name, _)) in urls.iter().enumerate() {
            let (lat, wall) = &mut all[i];
            lat.sort_by(|x, y| x.total_cmp(y));
            println!(
                "{m} ({name}): {:.1} req/s · http p50/p95 ms {:.1} / {:.1}",
                lat.len() as f64 / *wall,
                eval::percentile(&lat[..], 50.0),
                eval::percentile(&lat[..], 95.0)
            );
        }
    }
    let rendered = metrics.render();
    for l in rendered.lines().filter(|l| l.starts_with("db_reads_total{")) {
        println!("{l}");
    }
    lag_during_ingest(&cfg, &pool, &standby_url, &actor, a.kb, a.corpus, a.load).await
}

/// Serve `state` on an ephemeral loopback port; the search URL.
async fn serve(app: fn(crate::state::AppState) -> axum::Router, state: crate::state::AppState) -> anyhow::Result<String> {
    let router = app(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>()).await;
    });
    Ok(format!("http://{addr}/api/evidence/search"))
}

/// Closed loop: `clients` concurrent clients run every text once. Latencies (ms) and wall time (s).
async fn pass(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    texts: &[String],
    mode: Mode,
    clients: usize,
) -> anyhow::Result<(Vec<f64>, f64)> {
    let texts: Arc<Vec<String>> = Arc::new(texts.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (http, url, token, texts, next) = (http.clone(), url.to_string(), token.to_string(), texts.clone(), next.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                while let Some(t) = texts.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let s = Instant::now();
                    let body = serde_json::json!({"query": t, "mode": mode.as_str()});
                    let r = http.post(&url).bearer_auth(&token).json(&body).send().await?;
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
    Ok((lat, started.elapsed().as_secs_f64()))
}

/// Ingest up to 300 corpus documents again (under new names, into the KB `<kb> replica lag`)
/// while sampling every 100 ms how far the standby's replay is behind the primary: in bytes,
/// and in time (how long ago the primary had written the first position not yet replayed).
async fn lag_during_ingest(
    cfg: &crate::config::Config,
    pool: &sqlx::PgPool,
    standby_url: &str,
    actor: &crate::auth::Auth,
    kb: &str,
    corpus: &Path,
    load: eval::LoadCorpus,
) -> anyhow::Result<()> {
    let corpus: Vec<Doc> = eval::read_jsonl(corpus)?;
    let run = uuid::Uuid::new_v4().simple().to_string();
    let docs: Vec<Doc> = corpus
        .iter()
        .take(300)
        .enumerate()
        .map(|(i, d)| Doc { id: format!("lag-{}-{i}", &run[..8]), title: d.title.clone(), text: d.text.clone() })
        .collect();
    let kb = eval::kb_or_create(pool, actor, &format!("{kb} replica lag"), "read replica lag benchmark").await?;
    let standby = crate::db::connect(standby_url, 1).await?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (pool, stop) = (pool.clone(), stop.clone());
        tokio::spawn(async move {
            let mut written: std::collections::VecDeque<(Instant, u64)> = Default::default();
            let (mut bytes, mut ms) = (Vec::new(), Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let p: String =
                    sqlx::query_scalar!(r#"select pg_current_wal_insert_lsn()::text as "lsn!""#).fetch_one(&pool).await?;
                // Null only on a server that is not a standby.
                let s: Option<String> =
                    sqlx::query_scalar!("select pg_last_wal_replay_lsn()::text as lsn").fetch_one(&standby).await?;
                let s = s.ok_or_else(|| anyhow::anyhow!("the standby is not in recovery"))?;
                let (p, s) = (parse_lsn(&p).unwrap_or(0), parse_lsn(&s).unwrap_or(0));
                written.push_back((Instant::now(), p));
                while written.front().is_some_and(|(_, l)| *l <= s) {
                    written.pop_front();
                }
                bytes.push(p.saturating_sub(s) as f64);
                ms.push(written.front().map(|(t, _)| t.elapsed().as_secs_f64() * 1000.0).unwrap_or(0.0));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            anyhow::Ok((bytes, ms))
        })
    };
    let started = Instant::now();
    (load)(pool, cfg, actor, kb, &eval::as_markdown(&docs)).await?;
    let took = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let (mut bytes, mut ms) = sampler.await??;
    bytes.sort_by(|x, y| x.total_cmp(y));
    ms.sort_by(|x, y| x.total_cmp(y));
    let p = eval::percentile;
    println!(
        "replay lag during an ingest of {} documents ({took:.1} s, {} samples): p50/p95/max {:.0} / {:.0} / {:.0} ms · {:.0} / {:.0} / {:.0} KiB",
        docs.len(),
        ms.len(),
        p(&ms, 50.0),
        p(&ms, 95.0),
        ms.last().copied().unwrap_or(0.0),
        p(&bytes, 50.0) / 1024.0,
        p(&bytes, 95.0) / 1024.0,
        bytes.last().copied().unwrap_or(0.0) / 1024.0
    );
    Ok(())
}

fn redact(url: &str) -> String {
    url.rsplit_once('@').map(|(_, host)| host.to_string()).unwrap_or_else(|| url.to_string())
}

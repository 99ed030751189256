//! `mnote bench runs`: the run journal measured against baselines in the same run —
//! append throughput (a row per delta vs coalesced vs batched), SSE fan-out (N concurrent
//! clients on one run vs one client: delivery latency from append to client), resume latency
//! after a reconnect (`Last-Event-ID`), and the built-in agent's answer time over a KB vs a
//! plain evidence search of the same question. Throwaway runs of the tenant's owner are
//! deleted afterwards. Figures go to docs/BENCHMARKS.md.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::StreamExt;
use serde_json::{Value, json}; // JSON edge: the benchmark reads the HTTP API as a client does
use uuid::Uuid;

use super::{
    event::{ContextRefs, Event, EventSource},
    receipt::Receipt,
    sink::EventSink,
    store::{self, Created, NewRun},
};
use crate::{
    ai::{AgentId, Provider, RunPreferencesSnapshot},
    auth::Auth,
    context::{act_as, app_pool},
    db::{Scope, TenantTx},
    state::AppState,
};

pub struct BenchArgs<'a> {
    pub tenant: &'a str,
    /// SSE clients on one run.
    pub clients: usize,
    /// Events appended while they listen.
    pub events: usize,
    /// Deltas for the append throughput.
    pub deltas: usize,
    /// Questions for the built-in agent (default: a few about the demo documents).
    pub questions: Vec<String>,
    pub app: fn(AppState) -> axum::Router,
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

async fn bench_run(pool: &sqlx::PgPool, actor: &Auth, label: &str) -> anyhow::Result<Uuid> {
    let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
    let request = format!("bench-{label}-{}", Uuid::new_v4().simple());
    let created = store::create(
        &mut tx,
        &NewRun {
            tenant_id: actor.tenant_id,
            actor_id: actor.user_id,
            request_id: &request,
            session_id: "bench",
            agent_id: AgentId::Hermes,
            provider: Provider::Builtin,
            provider_note: Some("bench"),
            prompt: label,
            context_refs: &ContextRefs::default(),
            target_snapshot_hash: "bench",
            capability_snapshot_hash: "bench",
            preferences: &RunPreferencesSnapshot::empty(),
            parent_run_id: None,
            resume_request_id: None,
            lease_owner: "bench",
        },
    )
    .await?;
    tx.commit().await?;
    match created {
        Created::New(r) => Ok(r.id),
        _ => anyhow::bail!("bench run not created"),
    }
}

async fn finish(pool: &sqlx::PgPool, actor: &Auth, run: Uuid) -> anyhow::Result<()> {
    let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::System).await?;
    let receipt = Receipt::empty();
    store::finish(&mut tx, actor.tenant_id, run, store::Ending::Completed { answer: "", receipt: &receipt }).await?;
    tx.commit().await?;
    Ok(())
}

async fn rows_of(pool: &sqlx::PgPool, actor: &Auth, run: Uuid) -> anyhow::Result<i64> {
    let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::System).await?;
    let n = sqlx::query_scalar!(
        r#"select count(*) as "n!" from ai_run_event where tenant_id = $2 and run_id = $1"#,
        run,
        actor.tenant_id,
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(n)
}

/// Append throughput: one row (and transaction) per delta, coalesced deltas, batches of 100.
async fn appends(pool: &sqlx::PgPool, actor: &Auth, deltas: usize) -> anyhow::Result<()> {
    println!("\n## Journal appends ({deltas} deltas of ~4 characters)");
    let raw_n = deltas.min(2000);
    let run = bench_run(pool, actor, "raw").await?;
    let sink = EventSink::db_with(pool.clone(), actor.tenant_id, run, EventSource::Agent(AgentId::Hermes), Duration::ZERO);
    let t = Instant::now();
    for i in 0..raw_n {
        sink.delta(&format!("t{i:03} ")).await?;
    }
    let raw = raw_n as f64 / t.elapsed().as_secs_f64();
    println!("raw (a row per delta):     {raw:>9.0} events/s ({raw_n} rows)");

    // A model streaming 1,000 tokens/s for two seconds: how many rows the 75 ms window writes.
    let paced = 2000;
    let run = bench_run(pool, actor, "coalesced").await?;
    let sink = EventSink::db(pool.clone(), actor.tenant_id, run, EventSource::Agent(AgentId::Hermes));
    let t = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    for i in 0..paced {
        tick.tick().await;
        sink.delta(&format!("t{i:03} ")).await?;
    }
    sink.flush().await?;
    let secs = t.elapsed().as_secs_f64();
    let rows = rows_of(pool, actor, run).await? - 1;
    println!(
        "coalesced, paced at 1/ms:  {paced} deltas over {secs:.2} s → {rows} rows ({:.0} deltas per row)",
        paced as f64 / rows as f64
    );
    // The same window taking deltas as fast as they come (its capacity).
    let run = bench_run(pool, actor, "coalesced-max").await?;
    let sink = EventSink::db(pool.clone(), actor.tenant_id, run, EventSource::Agent(AgentId::Hermes));
    let t = Instant::now();
    for i in 0..deltas {
        sink.delta(&format!("t{i:03} ")).await?;
    }
    sink.flush().await?;
    let coalesced = deltas as f64 / t.elapsed().as_secs_f64();
    println!("coalesced, unpaced:        {coalesced:>9.0} deltas/s");

    let run = bench_run(pool, actor, "batched").await?;
    let t = Instant::now();
    let mut n = 0;
    while n < deltas {
        let batch: Vec<_> = (0..100)
            .map(|i| (EventSource::Agent(AgentId::Hermes), Event::MessageDelta { text: format!("t{} ", n + i) }))
            .collect();
        let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::System).await?;
        store::append(&mut tx, actor.tenant_id, run, &batch).await?;
        tx.commit().await?;
        n += 100;
    }
    let batched = n as f64 / t.elapsed().as_secs_f64();
    println!("batched (100 per append):  {batched:>9.0} events/s");
    println!("rows per delta, coalesced / raw: {:.3} (raw: 1)", rows as f64 / paced as f64);
    Ok(())
}

/// One SSE client: every `message.delta` it receives carries the microsecond it was appended
/// at; the client records now − then.
async fn sse_client(
    http: reqwest::Client,
    url: String,
    auth: String,
    epoch: Instant,
    ready: tokio::sync::mpsc::Sender<()>,
) -> anyhow::Result<Vec<f64>> {
    let resp = http.get(&url).header("authorization", auth).header("accept", "text/event-stream").send().await?;
    anyhow::ensure!(resp.status().is_success(), "SSE: HTTP {}", resp.status());
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let mut lat = Vec::new();
    let mut announced = false;
    while let Some(chunk) = body.next().await {
        buf.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data:")) else { continue };
            let e: Value = serde_json::from_str(data.trim())?; // JSON edge: an SSE data line
            if !announced {
                announced = true;
                let _ = ready.send(()).await;
            }
            if e["kind"] == "message.delta"
                && let Some(sent) = e["payload"]["text"].as_str().and_then(|t| t.trim().parse::<u64>().ok())
            {
                lat.push((epoch.elapsed().as_micros() as f64 - sent as f64) / 1000.0);
            }
            if e["kind"] == "run.completed" {
                return Ok(lat);
            }
        }
    }
    Ok(lat)
}

/// `clients` SSE clients on one run while `events` deltas are appended 20 ms apart.
async fn fan_out(
    pool: &sqlx::PgPool,
    actor: &Auth,
    base: &str,
    auth: &str,
    clients: usize,
    events: usize,
) -> anyhow::Result<(f64, f64, f64)> {
    let run = bench_run(pool, actor, "fanout").await?;
    let epoch = Instant::now();
    let url = format!("{base}/api/page-ai/runs/{run}/events");
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(clients.max(1));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        // A client each: its own connection, as browsers have.
        let http = crate::platform::http::Client::builder().build()?.reqwest().clone();
        tasks.push(tokio::spawn(sse_client(http, url.clone(), auth.to_string(), epoch, ready_tx.clone())));
    }
    drop(ready_tx);
    for _ in 0..clients {
        ready_rx.recv().await.context("an SSE client failed to connect")?;
    }
    let bar = indicatif::ProgressBar::new(events as u64);
    for _ in 0..events {
        let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::System).await?;
        let sent = epoch.elapsed().as_micros().to_string();
        store::append(
            &mut tx,
            actor.tenant_id,
            run,
            &[(EventSource::Agent(AgentId::Hermes), Event::MessageDelta { text: sent })],
        )
        .await?;
        tx.commit().await?;
        bar.inc(1);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bar.finish_and_clear();
    finish(pool, actor, run).await?;
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    anyhow::ensure!(all.len() == clients * events, "{} of {} deliveries arrived", all.len(), clients * events);
    Ok((pct(all.clone(), 0.5), pct(all.clone(), 0.95), pct(all, 1.0)))
}

/// Reconnect with `Last-Event-ID` into a finished 1,000-event run: time to the first event.
async fn resume(pool: &sqlx::PgPool, actor: &Auth, base: &str, auth: &str, http: &reqwest::Client) -> anyhow::Result<Vec<f64>> {
    let run = bench_run(pool, actor, "resume").await?;
    for chunk in 0..10 {
        let batch: Vec<_> = (0..100)
            .map(|i| (EventSource::Agent(AgentId::Hermes), Event::MessageDelta { text: format!("{} ", chunk * 100 + i) }))
            .collect();
        let mut tx = TenantTx::begin(pool, actor.tenant_id, Scope::System).await?;
        store::append(&mut tx, actor.tenant_id, run, &batch).await?;
        tx.commit().await?;
    }
    finish(pool, actor, run).await?;
    let url = format!("{base}/api/page-ai/runs/{run}/events");
    let mut lat = Vec::new();
    for i in 0..200u64 {
        let last = (i * 37) % 990 + 1;
        let t = Instant::now();
        let resp = http
            .get(&url)
            .header("authorization", auth)
            .header("accept", "text/event-stream")
            .header("last-event-id", last.to_string())
            .send()
            .await?;
        let mut body = resp.bytes_stream();
        let mut buf = String::new();
        'read: while let Some(c) = body.next().await {
            buf.push_str(&String::from_utf8_lossy(&c?));
            for block in buf.split("\n\n") {
                if let Some(id) = block.lines().find_map(|l| l.strip_prefix("id:")) {
                    anyhow::ensure!(id.trim().parse::<u64>()? == last + 1, "resumed at {id}, not {}", last + 1);
                    break 'read;
                }
            }
        }
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(lat)
}

/// Built-in agent runs over the tenant's KBs vs a plain evidence search of the same question.
async fn builtin(base: &str, auth: &str, http: &reqwest::Client, questions: &[String]) -> anyhow::Result<()> {
    println!("\n## Built-in agent over the tenant's knowledge bases ({} questions)", questions.len());
    let (mut agent, mut search) = (Vec::new(), Vec::new());
    for q in questions {
        let t = Instant::now();
        let r = http
            .post(format!("{base}/api/evidence/search"))
            .header("authorization", auth)
            .json(&json!({"query": q, "mode": "hybrid"}))
            .send()
            .await?;
        anyhow::ensure!(r.status().is_success(), "search: HTTP {}", r.status());
        let _: Value = r.json().await?; // JSON edge: an HTTP answer
        search.push(t.elapsed().as_secs_f64() * 1000.0);

        let t = Instant::now();
        let body = json!({"requestId": format!("bench-agent-{}", Uuid::new_v4().simple()), "sessionId": "bench",
                          "agentId": "hermes", "prompt": q});
        let r = http.post(format!("{base}/api/page-ai/runs")).header("authorization", auth).json(&body).send().await?;
        anyhow::ensure!(r.status().is_success(), "create run: HTTP {}", r.status());
        let run: Value = r.json().await?; // JSON edge: an HTTP answer
        anyhow::ensure!(run["provider"] == "builtin", "hermes is configured in this tenant; the bench measures builtin");
        let id = run["hostRunId"].as_str().unwrap_or_default().to_string();
        let resp = http
            .get(format!("{base}/api/page-ai/runs/{id}/events"))
            .header("authorization", auth)
            .header("accept", "text/event-stream")
            .send()
            .await?;
        let mut body = resp.bytes_stream();
        let mut buf = String::new();
        let mut ended = None;
        while ended.is_none()
            && let Some(c) = body.next().await
        {
            buf.push_str(&String::from_utf8_lossy(&c?));
            for kind in ["run.completed", "run.failed", "run.cancelled"] {
                if buf.contains(&format!("event: {kind}")) {
                    ended = Some(kind);
                }
            }
        }
        anyhow::ensure!(ended == Some("run.completed"), "run {id} ended with {ended:?}");
        agent.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (a50, a95, s50, s95) = (pct(agent.clone(), 0.5), pct(agent, 0.95), pct(search.clone(), 0.5), pct(search, 0.95));
    println!("evidence search (baseline): p50 {s50:.1} ms, p95 {s95:.1} ms");
    println!("built-in agent (to run.completed): p50 {a50:.1} ms, p95 {a95:.1} ms ({:.1}× a search at p50)", a50 / s50);
    Ok(())
}

pub async fn run(a: BenchArgs<'_>) -> anyhow::Result<()> {
    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, a.tenant, None).await?;
    let state = AppState::new(pool.clone(), cfg.clone());
    let state = state.with_embedder(crate::state::load_embedder(&pool).await);
    let (base, auth, token_id) = crate::context::serve_in_process(state, a.app, &actor, "bench runs").await?;
    let http = crate::platform::http::Client::builder().build()?.reqwest().clone();

    let result = async {
        appends(&pool, &actor, a.deltas).await?;
        println!("\n## SSE fan-out ({} events appended 20 ms apart; latency append → client)", a.events);
        let (b50, b95, bmax) = fan_out(&pool, &actor, &base, &auth, 1, a.events).await?;
        println!("1 client (baseline):  p50 {b50:.1} ms, p95 {b95:.1} ms, max {bmax:.1} ms");
        let (p50, p95, max) = fan_out(&pool, &actor, &base, &auth, a.clients, a.events).await?;
        println!(
            "{} clients:          p50 {p50:.1} ms, p95 {p95:.1} ms, max {max:.1} ms ({:.1}× the baseline p95)",
            a.clients,
            p95 / b95
        );
        println!("\n## Resume after reconnect (Last-Event-ID into a finished 1,000-event run; to the first event)");
        let lat = resume(&pool, &actor, &base, &auth, &http).await?;
        println!("200 reconnects: p50 {:.1} ms, p95 {:.1} ms", pct(lat.clone(), 0.5), pct(lat, 0.95));
        builtin(&base, &auth, &http, &a.questions).await?;
        anyhow::Ok(())
    }
    .await;
    let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
    sqlx::query!(
        "delete from ai_run where tenant_id = $2 and actor_id = $1 and (request_id like 'bench-%')",
        actor.user_id,
        actor.tenant_id,
    )
    .execute(&mut *tx)
    .await?;
    crate::auth::tokens::revoke(&mut tx, actor.user_id, token_id).await?;
    tx.commit().await?;
    result
}

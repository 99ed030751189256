//! `mnote bench mcp` (docs/BENCHMARKS.md): the overhead of `/mcp`. The same questions as
//! `evidence_search` through MCP (JSON-RPC `tools/call`, stateless JSON) and as
//! `POST /api/evidence/search` (hybrid, top 8 both), against the server in this process, by
//! `clients` concurrent clients, each alternating the two; p50/p95 of each and their ratio.
//! Before measuring, each question is asked both ways once and the evidence ids compared.

use std::{sync::Arc, time::Instant};

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::{
    context::{act_as, app_pool, serve_in_process},
    db::{Scope, TenantTx},
    state::AppState,
};

pub struct BenchArgs<'a> {
    pub tenant: &'a str,
    pub clients: usize,
    pub rounds: usize,
    pub questions: Vec<String>,
    /// The server's router (`startup::build_router`), served in-process.
    pub app: fn(AppState) -> axum::Router,
}

const TOP_K: usize = 8;

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

struct Endpoints {
    http: reqwest::Client,
    base: String,
    auth: String,
    protocol: String,
}

impl Endpoints {
    /// `POST /api/evidence/search`: the evidence ids.
    async fn api(&self, q: &str) -> anyhow::Result<Vec<String>> {
        let r = self
            .http
            .post(format!("{}/api/evidence/search", self.base))
            .header("authorization", &self.auth)
            .json(&json!({"query": q, "mode": "hybrid", "topK": TOP_K}))
            .send()
            .await?;
        anyhow::ensure!(r.status().is_success(), "API search: HTTP {}", r.status());
        let v: Value = r.json().await?;
        Ok(ids(&v["results"]))
    }

    async fn rpc(&self, body: Value) -> anyhow::Result<Value> {
        let mut req = self
            .http
            .post(format!("{}/mcp", self.base))
            .header("authorization", &self.auth)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if !self.protocol.is_empty() {
            req = req.header("mcp-protocol-version", &self.protocol);
        }
        let r = req.send().await?;
        anyhow::ensure!(r.status().is_success(), "MCP: HTTP {}: {}", r.status(), r.text().await.unwrap_or_default());
        Ok(r.json().await?)
    }

    /// `tools/call evidence_search`: the evidence ids.
    async fn mcp(&self, q: &str) -> anyhow::Result<Vec<String>> {
        let v = self
            .rpc(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "evidence_search", "arguments": {"query": q, "topK": TOP_K}}}))
            .await?;
        let result = &v["result"];
        anyhow::ensure!(result["isError"] != json!(true) && v.get("error").is_none(), "MCP tool error: {v}");
        Ok(ids(&result["structuredContent"]["results"]))
    }
}

fn ids(results: &Value) -> Vec<String> {
    results
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["evidenceId"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

pub async fn run(a: BenchArgs<'_>) -> anyhow::Result<()> {
    anyhow::ensure!(!a.questions.is_empty(), "no questions");
    let (mut cfg, pool) = app_pool().await?;
    // The benchmark measures latency, not the per-token limit.
    cfg.mcp_rate_limit_per_minute = 0;
    let actor = act_as(&pool, a.tenant, None).await?;
    let embedder = crate::state::load_embedder(&pool).await;
    let pool = crate::db::connect(&cfg.database_url, (a.clients + 4) as u32).await?;
    let state = AppState::new(pool.clone(), cfg).with_embedder(embedder.clone());
    let (base, auth, token_id) = serve_in_process(state, a.app, &actor, "bench mcp").await?;
    let http = reqwest::Client::builder().pool_max_idle_per_host(a.clients).build()?;
    let mut ep = Endpoints { http, base, auth, protocol: String::new() };
    let init = ep
        .rpc(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mnote-bench", "version": "1"}}}))
        .await
        .context("initialize")?;
    ep.protocol = init["result"]["protocolVersion"].as_str().unwrap_or_default().to_string();
    println!(
        "server: {} · protocol {} · embedder: {} · clients: {} · questions: {} · rounds: {}",
        ep.base,
        ep.protocol,
        embedder.as_ref().map(|e| e.model_id().to_string()).unwrap_or_else(|| "none (lexical)".into()),
        a.clients,
        a.questions.len(),
        a.rounds
    );
    // Warm-up and the same-results check: every question both ways.
    let mut same = 0;
    for q in &a.questions {
        let (x, y) = (ep.api(q).await?, ep.mcp(q).await?);
        if x == y {
            same += 1;
        } else {
            eprintln!("different results for {q:?}: API {x:?} vs MCP {y:?}");
        }
        anyhow::ensure!(!x.is_empty(), "no results for {q:?}: is the demo indexed?");
    }
    println!("same evidence ids through MCP and the API: {same}/{}", a.questions.len());

    let ep = Arc::new(ep);
    let questions = Arc::new(a.questions.clone());
    let started = Instant::now();
    let tasks: Vec<_> = (0..a.clients)
        .map(|c| {
            let (ep, questions, rounds) = (ep.clone(), questions.clone(), a.rounds);
            tokio::spawn(async move {
                let (mut api, mut mcp) = (Vec::new(), Vec::new());
                for r in 0..rounds {
                    for (i, q) in questions.iter().enumerate() {
                        // Alternate which goes first, so neither always meets a warmer cache.
                        let mcp_first = (c + r + i) % 2 == 0;
                        for first in [true, false] {
                            let s = Instant::now();
                            if first == mcp_first {
                                ep.mcp(q).await?;
                                mcp.push(s.elapsed().as_secs_f64() * 1000.0);
                            } else {
                                ep.api(q).await?;
                                api.push(s.elapsed().as_secs_f64() * 1000.0);
                            }
                        }
                    }
                }
                anyhow::Ok((api, mcp))
            })
        })
        .collect();
    let (mut api, mut mcp) = (Vec::new(), Vec::new());
    for t in tasks {
        let (x, y) = t.await??;
        api.extend(x);
        mcp.extend(y);
    }
    let wall = started.elapsed().as_secs_f64();
    println!("requests: {} API + {} MCP in {wall:.1} s", api.len(), mcp.len());
    println!("api  POST /api/evidence/search: p50/p95 ms {:.1} / {:.1}", pct(&api, 0.5), pct(&api, 0.95));
    println!("mcp  tools/call evidence_search: p50/p95 ms {:.1} / {:.1}", pct(&mcp, 0.5), pct(&mcp, 0.95));
    println!(
        "mcp/api ratio: p50 {:.2}× · p95 {:.2}× (target ≤ 1.2×)",
        pct(&mcp, 0.5) / pct(&api, 0.5).max(1e-9),
        pct(&mcp, 0.95) / pct(&api, 0.95).max(1e-9)
    );
    let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
    crate::auth::tokens::revoke(&mut tx, actor.user_id, token_id).await?;
    tx.commit().await?;
    Ok(())
}

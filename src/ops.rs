//! Operations endpoints: liveness, readiness, Prometheus metrics, and the request metrics
//! middleware.

use std::time::Instant;

use axum::{
    Json,
    extract::{MatchedPath, Request, State},
    http::StatusCode,
    middleware::Next,
    response::{IntoResponse, Response},
};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::{db, state::AppState};

/// `/healthz`, `/readyz`, `/metrics`.
/// Probes and metrics (JSON/plain-text errors, never pages).
pub fn api_router() -> axum::Router<AppState> {
    use axum::routing::get;
    axum::Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz)).route("/metrics", get(metrics_endpoint))
}

/// The process-wide recorder (see `platform::metrics`).
pub fn metrics_handle() -> PrometheusHandle {
    crate::platform::metrics::handle()
}

pub async fn track(req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let method = req.method().to_string();
    let start = Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    let labels = [("method", method), ("route", route), ("status", status)];
    metrics::counter!("http_requests_total", &labels).increment(1);
    metrics::histogram!("http_request_duration_seconds", &labels[..2]).record(start.elapsed().as_secs_f64());
    resp
}

pub async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: 200 while the database answers and is migrated, else 503. The body tells
/// the parts apart: `{"status": "ready" | "degraded" | "unavailable", "database": …,
/// "vector": …}`. An unhealthy vector side (`vector.code = "vector_backend_unavailable"`)
/// leaves the service ready but degraded: lexical search, the viewer and ingest keep working.
/// So does a configured read replica that serves no reads (`readReplica.status` `down` or
/// `lagging`: reads go to the primary). `acpSandbox` says how ACP agents are confined.
///
/// It answers within [`READY_DB_BUDGET`] in every state: a database that does not answer in
/// that time (no connection to be had: the pool would wait out its 5-s acquire timeout, or a
/// statement that hangs) is `unreachable`, as a refused one is. A probe with a short timeout
/// of its own sees a 503, not silence.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let (code, database) = match tokio::time::timeout(READY_DB_BUDGET, db::is_migrated(&state.pool)).await {
        Ok(Ok(true)) => (StatusCode::OK, "ok"),
        Ok(Ok(false)) => (StatusCode::SERVICE_UNAVAILABLE, "not_migrated"),
        Ok(Err(e)) => {
            tracing::warn!("readiness check failed: {e:#}");
            (StatusCode::SERVICE_UNAVAILABLE, "unreachable")
        }
        Err(_) => {
            tracing::warn!("readiness check failed: the database did not answer within {READY_DB_BUDGET:?}");
            (StatusCode::SERVICE_UNAVAILABLE, "unreachable")
        }
    };
    let vector = vector_report(&state);
    // A configured read replica that serves no reads (down, lagging, promoted) leaves the
    // service ready: its reads go to the primary.
    let read_replica = state.reads.report();
    let replica_ok = read_replica.serving || read_replica.status == "off";
    let status = match (code, vector.code, replica_ok) {
        (StatusCode::OK, None, true) => "ready",
        (StatusCode::OK, _, _) => "degraded",
        _ => "unavailable",
    };
    let acp_sandbox = acp_sandbox_report(&state.config);
    (code, Json(Readiness { status, database, vector, read_replica, acp_sandbox })).into_response()
}

/// How an ACP agent's file access is confined here (it never makes the service unready: a
/// run that cannot be confined fails on its own, `agent_sandbox_unavailable`).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AcpSandboxReport {
    /// `landlock`, `mount_namespace`, `unavailable` (ACP runs fail), `off` (the operator
    /// opted out: MNOTE_ACP_SANDBOX=off), `not_configured` (no ACP command).
    confinement: &'static str,
    /// The kernel's Landlock ABI (whether or not it is used).
    landlock_abi: Option<i32>,
}

fn acp_sandbox_report(cfg: &crate::config::Config) -> AcpSandboxReport {
    let confinement = match cfg.agents.acp_command {
        None => "not_configured",
        Some(_) => cfg.agents.acp_confinement().0,
    };
    AcpSandboxReport { confinement, landlock_abi: crate::platform::supervise::confine::landlock_abi() }
}

/// How long `/readyz` waits for the database (connection and statement together): under the
/// 1 s a load balancer's probe typically allows.
pub const READY_DB_BUDGET: std::time::Duration = std::time::Duration::from_millis(800);

/// The body of `/readyz`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Readiness {
    status: &'static str,
    database: &'static str,
    vector: crate::search::vector_health::Report,
    read_replica: db::read::Report,
    acp_sandbox: AcpSandboxReport,
}

/// The vector side as `/readyz` and `/metrics` show it (`off` without an embedder).
fn vector_report(state: &AppState) -> crate::search::vector_health::Report {
    let mut r = state.vector_health.report();
    if state.embedder.is_none() && r.code.is_none() {
        r.status = "off";
    }
    r
}

/// Job queue depth: open ingest jobs, counted tenant by tenant (RLS allows no cross-tenant
/// count, by design).
async fn queue_depth(state: &AppState) -> anyhow::Result<i64> {
    let tenants = sqlx::query_scalar!("select id from tenant").fetch_all(&state.pool).await?;
    let mut total = 0;
    for t in tenants {
        let mut tx = db::TenantTx::begin(&state.pool, t, db::Scope::System).await?;
        let n = sqlx::query_scalar!(
            r#"select count(*) as "n!" from ingest_job where tenant_id = $1 and status in ('queued', 'running')"#,
            t
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        total += n;
    }
    Ok(total)
}

/// Who may read `/metrics`: with `MNOTE_METRICS_TOKEN`, a request bearing it; without, a
/// request from this machine that no proxy relayed (the figures are the operator's, not a
/// team's).
fn metrics_allowed(cfg: &crate::config::Config, req: &axum::extract::Request) -> bool {
    let headers = req.headers();
    match &cfg.metrics_token {
        Some(token) => crate::auth::bearer_token(headers)
            .is_some_and(|g| crate::platform::secret::constant_time_eq(g.trim().as_bytes(), token.expose().as_bytes())),
        None => {
            let peer = req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
            peer.is_some_and(|ip| ip.is_loopback())
                && !headers.contains_key("x-forwarded-for")
                && !headers.contains_key("forwarded")
        }
    }
}

/// The queue depth, counted at most every 15 s (a scrape must not walk every tenant each time).
async fn queue_depth_cached(state: &AppState) -> anyhow::Result<i64> {
    static LAST: std::sync::Mutex<Option<(Instant, i64)>> = std::sync::Mutex::new(None);
    if let Some((at, n)) = *LAST.lock().expect("queue depth cache")
        && at.elapsed() < std::time::Duration::from_secs(15)
    {
        return Ok(n);
    }
    let n = queue_depth(state).await?;
    *LAST.lock().expect("queue depth cache") = Some((Instant::now(), n));
    Ok(n)
}

pub async fn metrics_endpoint(State(state): State<AppState>, req: axum::extract::Request) -> Response {
    if !metrics_allowed(&state.config, &req) {
        return crate::error::AppError::Unauthorized.into_response();
    }
    metrics::gauge!("db_pool_connections").set(state.pool.size() as f64);
    metrics::gauge!("db_pool_idle_connections").set(state.pool.num_idle() as f64);
    let vector = vector_report(&state);
    metrics::gauge!("vector_backend_healthy").set(if vector.code.is_none() { 1.0 } else { 0.0 });
    metrics::gauge!("vector_backend_consecutive_failures").set(vector.failures as f64);
    let rr = state.reads.report();
    metrics::gauge!("read_replica_configured").set(if rr.status == "off" { 0.0 } else { 1.0 });
    metrics::gauge!("read_replica_serving").set(if rr.serving { 1.0 } else { 0.0 });
    metrics::gauge!("read_replica_lag_seconds").set(rr.lag_ms.map(|ms| ms as f64 / 1000.0).unwrap_or(-1.0));
    match queue_depth_cached(&state).await {
        Ok(n) => metrics::gauge!("ingest_queue_depth").set(n as f64),
        Err(e) => tracing::warn!("queue depth: {e:#}"),
    }
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render()).into_response()
}

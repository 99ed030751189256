//! Health, readiness and metrics.

use reqwest::StatusCode;

use crate::helpers::*;

#[tokio::test]
async fn health_readiness_and_metrics() {
    let app = spawn_app().await;
    let c = app.client();
    assert_eq!(c.get("/healthz").await.status(), StatusCode::OK);
    let r = c.get("/readyz").await;
    assert_eq!(r.status(), StatusCode::OK);
    c.get("/login").await;
    let body = c.get("/metrics").await.text().await.unwrap();
    assert!(body.contains("http_requests_total"), "{body}");
    assert!(body.contains("route=\"/login\""), "{body}");
    assert!(body.contains("http_request_duration_seconds"), "{body}");
    assert!(body.contains("db_pool_connections"), "{body}");
    assert!(body.contains("ingest_queue_depth"), "{body}");
}

#[tokio::test]
async fn readiness_fails_when_the_database_is_gone() {
    let app = spawn_app().await;
    // Sabotage: close the server's pool (as if Postgres went away).
    app.pool.close().await;
    let r = app.client().get("/readyz").await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let (st, e) = app.client().get_json("/api/kbs").await;
    // No session, no token: still a clean JSON error, never a panic.
    assert!(st == StatusCode::UNAUTHORIZED || st == StatusCode::SERVICE_UNAVAILABLE, "{st} {e}");
}

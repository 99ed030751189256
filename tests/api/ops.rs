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
    assert!(body.contains("vector_backend_healthy"), "{body}");
    let (st, r) = c.get_json("/readyz").await;
    assert_eq!(st, StatusCode::OK);
    // No embedder in this app: the vector side is off, the service ready.
    assert_eq!(
        (r["status"].as_str(), r["database"].as_str(), r["vector"]["status"].as_str()),
        (Some("ready"), Some("ok"), Some("off")),
        "{r}"
    );
}

/// A database that applied the foundation migration before it stopped creating pg_trgm
/// migrates again instead of failing on the changed checksum.
#[tokio::test]
async fn a_database_migrated_with_the_old_foundation_text_migrates_again() {
    let app = spawn_app().await;
    let old = "8e2617822d6b11c86cc0e07793045289b28eca7cece02ebd5edb4fe1d82e33980cbe4f4814b45d97c9b4f7173cb328e4";
    let old: Vec<u8> = (0..old.len()).step_by(2).map(|i| u8::from_str_radix(&old[i..i + 2], 16).unwrap()).collect();
    sqlx::query("update _sqlx_migrations set checksum = $1 where version = 20261129000001")
        .bind(&old)
        .execute(&app.owner_pool)
        .await
        .unwrap();
    // On its own connection: sqlx keeps its migration lock after a failed run, so that
    // session must end before anything else migrates.
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&role_url(OWNER_ROLE, &app.db_name)).await.unwrap();
    assert!(mnote::db::MIGRATOR.run(&mut conn).await.is_err(), "sqlx refuses the changed text by itself");
    sqlx::Connection::close(conn).await.ok();
    mnote::db::migrate(&app.owner_pool, Some(APP_ROLE)).await.expect("migrate accepts the rewritten foundation");
    let now: Vec<u8> = sqlx::query_scalar("select checksum from _sqlx_migrations where version = 20261129000001")
        .fetch_one(&app.owner_pool)
        .await
        .unwrap();
    let expected = mnote::db::MIGRATOR.iter().find(|m| m.version == 20261129000001).unwrap().checksum.to_vec();
    assert_eq!(now, expected);
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

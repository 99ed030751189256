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

/// A TCP proxy in front of the test Postgres that can be cut: then it closes every connection
/// it relayed and, while `refuse` is false, accepts new ones and never answers (a network
/// partition), else refuses them (the server is gone).
struct PgProxy {
    url: String,
    cut: tokio::sync::watch::Sender<bool>,
    listener: tokio::task::JoinHandle<()>,
}

impl PgProxy {
    async fn start(target_url: &str) -> PgProxy {
        let mut url = reqwest::Url::parse(target_url).unwrap();
        let target = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        url.set_host(Some("127.0.0.1")).unwrap();
        url.set_port(Some(listener.local_addr().unwrap().port())).unwrap();
        let (cut, cut_rx) = tokio::sync::watch::channel(false);
        let listener = tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let (mut client, _) = listener.accept().await.unwrap();
                if *cut_rx.borrow() {
                    held.push(client); // accepted, never answered
                    continue;
                }
                let target = target.clone();
                let mut cut_rx = cut_rx.clone();
                tokio::spawn(async move {
                    let mut server = tokio::net::TcpStream::connect(&target).await.unwrap();
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut_rx.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        PgProxy { url: url.to_string(), cut, listener }
    }

    fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Stop listening: new connections are refused.
    fn refuse(&self) {
        self.listener.abort();
    }
}

/// Issue 39 item 5: `/readyz` answers within 1 s in every state. A second server on the test
/// database reaches Postgres through a proxy, with the production pool (`db::connect`: a 5-s
/// acquire timeout). Once the proxy is cut, the old `/readyz` waited out that timeout (≥ 5 s)
/// while Postgres did not answer; now it answers 503 within its 0.8-s budget. The bound
/// asserted (2 s) is generous for a loaded test machine and still well under the 5 s the
/// old code took, so it tells the two apart without betting on fine timing.
#[tokio::test]
async fn readiness_answers_503_within_a_second_while_postgres_does_not_answer() {
    let app = spawn_app().await;
    let proxy = PgProxy::start(&role_url(APP_ROLE, &app.db_name)).await;
    let pool = mnote::db::connect(&proxy.url, 4).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = mnote::startup::build_router(mnote::state::AppState::new(pool, app.config.clone()));
    tokio::spawn(async move {
        axum::serve(listener, router.into_make_service_with_connect_info::<std::net::SocketAddr>()).await.unwrap();
    });
    let c = Client::new(&base);
    let (st, r) = c.get_json("/readyz").await;
    assert_eq!((st, r["database"].as_str()), (StatusCode::OK, Some("ok")), "{r}");

    let timed = |c: Client| async move {
        let start = std::time::Instant::now();
        let (st, r) = c.get_json("/readyz").await;
        (st, r, start.elapsed())
    };
    // Postgres does not answer (connections accepted, nothing comes back).
    proxy.cut();
    let (st, r, took) = timed(c.clone()).await;
    assert_eq!((st, r["database"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unreachable")), "{r}");
    assert!(took < std::time::Duration::from_secs(2), "/readyz took {took:?} while Postgres did not answer");
    // Postgres is gone (connections refused: the pool retries until its acquire timeout).
    proxy.refuse();
    let (st, r, took) = timed(c.clone()).await;
    assert_eq!((st, r["status"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{r}");
    assert!(took < std::time::Duration::from_secs(2), "/readyz took {took:?} while Postgres refused connections");
}

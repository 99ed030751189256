//! The whole application: every feature's router merged, the middleware in order, and
//! `serve`. Nothing but `cli` depends on this module.

use std::{net::SocketAddr, time::Duration};

use axum::{
    Router,
    middleware::{from_fn, from_fn_with_state},
    response::IntoResponse,
    routing::any,
};
use tower_http::{compression::CompressionLayer, trace::TraceLayer};
use tower_sessions::{Expiry, SessionManagerLayer, cookie::SameSite, session_store::ExpiredDeletion};
use tower_sessions_sqlx_store::PostgresStore;

use crate::{
    agents, auth,
    config::Config,
    db,
    error::AppError,
    grants, home, journal, kbs, mcp, ops, rag, runs, search, signin, sources,
    state::{self, AppState},
    tenants, viewer, web,
};

async fn not_found() -> AppError {
    AppError::NotFound
}

pub fn build_router(state: AppState) -> Router {
    let cfg = &state.config;
    let sessions = SessionManagerLayer::new(PostgresStore::new(state.pool.clone()))
        .with_name(crate::web::SESSION_COOKIE)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(cfg.cookie_secure)
        .with_expiry(Expiry::OnInactivity(tower_sessions::cookie::time::Duration::seconds(cfg.session_idle.as_secs() as i64)));
    // JSON everywhere: `/api`, the probes and metrics.
    let api = Router::new()
        .merge(auth::api_router())
        .merge(tenants::api_router())
        .merge(grants::api_router())
        .merge(kbs::api_router())
        .merge(sources::api_router(cfg))
        .merge(search::api_router())
        .merge(rag::api_router())
        .merge(journal::api_router())
        .merge(runs::api_router())
        .merge(agents::api::api_router())
        .merge(ops::api_router())
        .merge(viewer::api_router())
        .route("/api/openapi.json", axum::routing::get(openapi_json))
        .route("/api/{*rest}", any(not_found))
        .layer(from_fn(crate::error::json_rejections))
        .layer(from_fn_with_state(state.clone(), auth::csrf::guard));
    // Browser routes (and the fallback): errors become pages, CSRF failures included.
    let pages = Router::new()
        .merge(signin::page_router())
        .merge(tenants::page_router())
        .merge(grants::page_router())
        .merge(kbs::page_router())
        .merge(sources::page_router(cfg))
        .merge(home::page_router())
        .merge(search::page_router())
        .merge(rag::page_router())
        .merge(runs::page_router())
        .merge(agents::pages::page_router())
        .merge(viewer::page_router())
        .merge(web::page_router())
        .fallback(not_found)
        .layer(from_fn_with_state(state.clone(), auth::csrf::guard))
        .layer(from_fn_with_state(state.clone(), web::html_errors));
    // `/mcp`: bearer tokens only, JSON errors: outside the session, CSRF and HTML-error layers.
    let mcp = mcp::router(&state);
    api.merge(pages)
        .layer(sessions)
        .merge(mcp)
        .layer(from_fn(web::security_headers))
        .layer(from_fn(ops::track))
        .layer(TraceLayer::new_for_http())
        .layer(CompressionLayer::new().compress_when(compressible()))
        .with_state(state)
}

/// The OpenAPI 3.1 document of every `/api` route, from each feature's `api_doc` beside its
/// `api_router` (`docs/openapi.json` holds a copy; a test keeps the two equal).
pub fn openapi() -> serde_json::Value {
    let mut d = crate::openapi::ApiDoc::new();
    d.op("get", "/api/openapi.json").summary("This document (OpenAPI 3.1)").public().content(
        200,
        "application/json",
        serde_json::json!({"type": "object"}),
        "the OpenAPI document",
    );
    auth::api_doc(&mut d);
    tenants::api_doc(&mut d);
    grants::api_doc(&mut d);
    kbs::api_doc(&mut d);
    sources::api_doc(&mut d);
    search::api_doc(&mut d);
    rag::api_doc(&mut d);
    journal::api_doc(&mut d);
    runs::api_doc(&mut d);
    agents::api::api_doc(&mut d);
    viewer::api_doc(&mut d);
    d.finish()
}

/// `GET /api/openapi.json`: public, like any API description (it holds no data).
async fn openapi_json() -> axum::response::Response {
    static DOC: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let body = DOC.get_or_init(|| openapi_text(&openapi()));
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body.as_str()).into_response()
}

/// The document as `docs/openapi.json` holds it: pretty-printed, with a final newline.
pub fn openapi_text(doc: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(doc).expect("a JSON value serializes");
    s.push('\n');
    s
}

/// What the compression layer compresses: tower-http's default (not images, not gRPC, not
/// `text/event-stream`, not under 32 bytes, never a `Range` answer) minus formats that are
/// already compressed (PDF, the zip-based Office formats, archives): compressing them again
/// costs CPU and gains nothing.
fn compressible() -> impl tower_http::compression::Predicate {
    use tower_http::compression::predicate::{DefaultPredicate, NotForContentType, Predicate};
    DefaultPredicate::new()
        .and(NotForContentType::const_new("application/pdf"))
        .and(NotForContentType::const_new("application/vnd.openxmlformats-officedocument."))
        .and(NotForContentType::const_new("application/zip"))
        .and(NotForContentType::const_new("application/gzip"))
}

/// Connect, check the role and the schema, and build the state.
pub async fn prepare(config: Config) -> anyhow::Result<AppState> {
    let pool = db::connect(&config.database_url, config.db_max_connections).await?;
    db::refuse_citus(&pool).await?;
    db::ensure_app_role_is_confined(&pool).await?;
    if !db::is_migrated(&pool).await.unwrap_or(false) {
        anyhow::bail!("the database is not migrated; run `mnote migrate` first");
    }
    std::fs::create_dir_all(config.uploads_dir())?;
    let embedder = state::load_embedder(&pool).await;
    Ok(AppState::new(pool, config).with_embedder(embedder))
}

pub async fn serve(state: AppState) -> anyhow::Result<()> {
    let store = PostgresStore::new(state.pool.clone());
    let cleanup = tokio::spawn(async move {
        let _ = store.continuously_delete_expired(Duration::from_secs(600)).await;
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let workers = crate::ingest::pipeline::spawn_workers(
        state.pool.clone(),
        state.config.clone(),
        state.config.ingest_workers,
        state.embedder.clone(),
        state.vector_health.clone(),
        stop_rx.clone(),
    );
    let rag_sync = tokio::spawn(crate::rag::sync::run(
        state.pool.clone(),
        state.config.clone(),
        state.source_events.subscribe(),
        stop_rx.clone(),
    ));
    let reconciler = tokio::spawn(crate::journal::reconcile::run(state.pool.clone(), stop_rx.clone()));
    let watcher = crate::ingest::watch::spawn(state.pool.clone(), state.config.clone(), stop_rx);
    let listener = tokio::net::TcpListener::bind(state.config.bind).await?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    // The address really bound (a port 0 becomes the chosen port): what `/mcp` accepts as
    // Host and builds citation URLs from when MNOTE_PUBLIC_URL is unset.
    let mut state = state;
    if state.config.bind != listener.local_addr()? {
        let mut cfg = (*state.config).clone();
        cfg.bind = listener.local_addr()?;
        state.config = std::sync::Arc::new(cfg);
    }
    let (pool, instance, grace) = (state.pool.clone(), state.instance_id.clone(), state.config.shutdown_grace);
    let app = build_router(state);
    // On SIGTERM the server stops accepting and waits for open requests, but event streams
    // (a run's, the KB page's) never finish on their own: after the grace they are closed
    // (their clients resume on another replica) so the process stops and hands its runs over.
    let (signalled_tx, mut signalled) = tokio::sync::watch::channel(false);
    let server =
        axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).with_graceful_shutdown(async move {
            shutdown_signal().await;
            let _ = signalled_tx.send(true);
        });
    let drained = async move {
        let _ = signalled.wait_for(|s| *s).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        r = server => r?,
        _ = drained => tracing::warn!(grace_secs = grace.as_secs(), "connections still open after the shutdown grace: closed"),
    }
    cleanup.abort();
    let _ = stop_tx.send(true);
    for w in workers {
        let _ = w.await;
    }
    let _ = watcher.await;
    let _ = rag_sync.await;
    let _ = reconciler.await;
    match crate::journal::reconcile::release(&pool, &instance).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(runs = n, "live runs handed over as interrupted"),
        Err(e) => tracing::warn!("could not release this process's runs: {e}"),
    }
    tracing::info!("server stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// `docs/openapi.json` is the document the server serves; `MNOTE_UPDATE_OPENAPI=1`
    /// rewrites it.
    #[test]
    fn the_checked_in_openapi_document_is_the_served_one() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json");
        let now = super::openapi_text(&super::openapi());
        if std::env::var_os("MNOTE_UPDATE_OPENAPI").is_some() {
            std::fs::write(&path, &now).unwrap();
        }
        let file = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            file == now,
            "docs/openapi.json differs from the document the routes describe; regenerate it with \
             `MNOTE_UPDATE_OPENAPI=1 ./dev test --lib openapi` and review the diff"
        );
    }

    /// `(METHOD, path)` of every `.route("/api/…", get(…).post(…))` in `src/`.
    fn routed() -> BTreeSet<(String, String)> {
        let route = regex::Regex::new(r#"\.route\(\s*"(/api/[^"]*)""#).unwrap();
        let method = regex::Regex::new(r"\b(get|post|put|patch|delete)\(").unwrap();
        let mut out = BTreeSet::new();
        let mut stack = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                if p.extension().is_none_or(|x| x != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                for m in route.captures_iter(&text) {
                    let path = m[1].to_string();
                    let line_start = text[..m.get(0).unwrap().start()].rfind('\n').map_or(0, |i| i + 1);
                    if path.contains("{*") || text[line_start..].trim_start().starts_with("//") {
                        continue;
                    }
                    // The route's arguments: up to the parenthesis that closes `.route(`.
                    let start = m.get(0).unwrap().end();
                    let (mut depth, mut end) = (1, start);
                    for (i, c) in text[start..].char_indices() {
                        depth += i32::from(c == '(') - i32::from(c == ')');
                        if depth == 0 {
                            end = start + i;
                            break;
                        }
                    }
                    let methods: Vec<_> = method.captures_iter(&text[start..end]).map(|c| c[1].to_uppercase()).collect();
                    assert!(!methods.is_empty(), "no method found for {path} in {}", p.display());
                    for m in methods {
                        out.insert((m, path.clone()));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_api_route_is_in_the_openapi_document_and_nothing_else() {
        let routed = routed();
        assert!(routed.len() > 50, "the route scan found only {} routes", routed.len());
        let doc = super::openapi();
        let documented: BTreeSet<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(p, ops)| ops.as_object().unwrap().keys().map(move |m| (m.to_uppercase(), p.clone())))
            .collect();
        let missing: Vec<_> = routed.difference(&documented).collect();
        let extra: Vec<_> = documented.difference(&routed).collect();
        assert!(missing.is_empty(), "routed but not in the OpenAPI document (add them to the feature's api_doc): {missing:?}");
        assert!(extra.is_empty(), "in the OpenAPI document but not routed: {extra:?}");
    }
}

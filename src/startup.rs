//! Application state, the router, and `serve`.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Router,
    extract::DefaultBodyLimit,
    http::header,
    middleware::from_fn,
    response::IntoResponse,
    routing::{delete, get, post},
};
use metrics_exporter_prometheus::PrometheusHandle;
use sqlx::PgPool;
use tower_http::{compression::CompressionLayer, trace::TraceLayer};
use tower_sessions::{Expiry, SessionManagerLayer, cookie::SameSite, session_store::ExpiredDeletion};
use tower_sessions_sqlx_store::PostgresStore;

use crate::{auth, config::Config, db, error::AppError, grants, kbs, ops, sources, tenants, web};

#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub config: Arc<Config>,
    pub metrics: PrometheusHandle,
    /// Source-change notifications (`<tenant>:<kb>`) relayed from Postgres `LISTEN mnote_source`.
    pub source_events: tokio::sync::broadcast::Sender<String>,
    /// The configured embedder; `None` runs vector and hybrid search degraded (lexical).
    pub embedder: Option<Arc<dyn crate::search::embed::Embedder>>,
    /// In-memory BM25 mirrors of the KBs searched by this process (rebuilt when a KB changes).
    pub lexical_mirror: Arc<crate::search::memindex::MemIndex>,
    /// Whether vector statements currently work (shared by searches and the embedding backlog).
    pub vector_health: Arc<crate::search::vector_health::VectorHealth>,
}

impl AppState {
    /// Build the state and start relaying Postgres notifications to `source_events`.
    pub fn new(pool: PgPool, config: Config) -> Self {
        let (tx, _) = tokio::sync::broadcast::channel(256);
        tokio::spawn(crate::sources::events::relay(pool.clone(), tx.clone()));
        let lexical_mirror = crate::search::memindex::MemIndex::new(pool.clone());
        let vector_health = Arc::new(crate::search::vector_health::VectorHealth::new(config.vector_retry_min, config.vector_retry_max));
        AppState {
            pool,
            config: Arc::new(config),
            metrics: ops::metrics_handle(),
            source_events: tx,
            embedder: None,
            lexical_mirror,
            vector_health,
        }
    }

    /// Searches use `embedder` through a cache of recent query vectors.
    pub fn with_embedder(mut self, embedder: Option<Arc<dyn crate::search::embed::Embedder>>) -> Self {
        self.embedder = embedder.map(crate::search::embed_cache::CachedQueries::wrap);
        self
    }

    pub fn search_engine(&self) -> crate::search::query::Engine {
        use crate::config::LexicalMirror;
        let engine = crate::search::query::Engine::new(self.embedder.clone(), self.config.public_url.clone())
            .with_vector_health(self.vector_health.clone());
        match self.config.lexical_mirror {
            LexicalMirror::Off => engine,
            LexicalMirror::Background => engine.with_mem(self.lexical_mirror.clone(), false),
            LexicalMirror::Inline => engine.with_mem(self.lexical_mirror.clone(), true),
        }
    }
}

const APP_CSS: &str = include_str!("../static/app.css");
const KB_LIVE_JS: &str = include_str!("../static/kb-live.js");

async fn app_css() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "public, max-age=3600")], APP_CSS)
}

async fn kb_live_js() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8"), (header::CACHE_CONTROL, "public, max-age=3600")], KB_LIVE_JS)
}

async fn not_found() -> AppError {
    AppError::NotFound
}

fn api_routes(upload_limit: usize) -> Router<AppState> {
    use auth::handlers as a;
    use grants::handlers as g;
    use kbs::handlers as k;
    use sources::handlers as s;
    use tenants::handlers as t;
    Router::new()
        .route("/api/session", get(a::session_info))
        .route("/api/tokens", get(a::list_tokens).post(a::create_token))
        .route("/api/tokens/{id}", delete(a::revoke_token))
        .route("/api/members", get(t::list_members).post(t::add_member))
        .route("/api/members/{id}", axum::routing::patch(t::update_member).delete(t::delete_member))
        .route("/api/tenant/settings", get(t::get_settings).patch(t::patch_settings))
        .route("/api/grants", get(g::list_grants).post(g::create_grant))
        .route("/api/grants/{id}", get(g::get_grant).delete(g::revoke_grant))
        .route("/api/kbs", get(k::list_kbs).post(k::create_kb))
        .route("/api/kbs/{id}", get(k::get_kb).patch(k::patch_kb).delete(k::delete_kb))
        .route("/api/kbs/{id}/members", get(k::list_kb_members))
        .route("/api/kbs/{id}/members/{user}", axum::routing::put(k::put_kb_member).delete(k::delete_kb_member))
        .route("/api/kbs/{id}/sources", get(s::list_sources).post(s::register_source))
        .route(
            "/api/kbs/{id}/uploads",
            post(s::upload_sources).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route("/api/sources/{id}", get(s::get_source).delete(s::delete_source))
        .route("/api/sources/{id}/source-map.json", get(s::source_map))
        .route("/api/evidence/search", post(crate::search::handlers::search))
        .route("/api/evidence/read", post(crate::search::handlers::read))
        .route("/api/evidence/open", post(crate::search::handlers::open))
        .route("/api/search/documents", get(crate::search::handlers::documents))
        .route("/api/{*rest}", axum::routing::any(not_found))
}

fn page_routes(upload_limit: usize) -> Router<AppState> {
    use auth::handlers as a;
    use grants::handlers as g;
    use kbs::handlers as k;
    use sources::handlers as s;
    use tenants::handlers as t;
    Router::new()
        .route("/", get(k::dashboard))
        .route("/search", get(crate::search::pages::search_page))
        .route("/login", get(a::login_page).post(a::login))
        .route("/logout", post(a::logout))
        .route("/setup", get(t::setup_page).post(t::setup))
        .route("/tenants", get(a::tenants_page))
        .route("/tenants/switch", post(a::switch_tenant))
        .route("/language", post(a::set_language))
        .route("/kbs", post(k::create_form))
        .route("/kbs/{id}", get(k::kb_page))
        .route("/kbs/{id}/events", get(crate::sources::events::kb_events))
        .route("/kbs/{id}/edit", post(k::update_form))
        .route("/kbs/{id}/delete", post(k::delete_form))
        .route("/kbs/{id}/members", post(k::member_form))
        .route("/kbs/{id}/members/{user}/remove", post(k::member_remove_form))
        .route("/kbs/{id}/sources", post(s::register_form))
        .route("/kbs/{id}/uploads", post(s::upload_form).layer(DefaultBodyLimit::max(upload_limit)))
        .route("/sources/{id}/delete", post(s::delete_form))
        .route("/sources/{id}/view", get(crate::viewer::handlers::view))
        .route("/sources/{id}/download", get(crate::viewer::handlers::download))
        .route("/sources/{id}/pages/{page}", get(crate::viewer::handlers::page_png))
        .route("/admin/members", get(t::members_page).post(t::members_add))
        .route("/admin/members/{id}/role", post(t::members_role))
        .route("/admin/members/{id}/remove", post(t::members_remove))
        .route("/admin/settings", get(t::settings_page).post(t::settings_save))
        .route("/admin/grants", get(g::grants_page).post(g::grants_add))
        .route("/admin/grants/{id}/revoke", post(g::grants_revoke))
        .route("/settings/tokens", get(a::tokens_page).post(a::tokens_create_form))
        .route("/settings/tokens/{id}/revoke", post(a::tokens_revoke_form))
}

pub fn build_router(state: AppState) -> Router {
    let cfg = &state.config;
    let sessions = SessionManagerLayer::new(PostgresStore::new(state.pool.clone()))
        .with_name("mnote_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(cfg.cookie_secure)
        .with_expiry(Expiry::OnInactivity(tower_sessions::cookie::time::Duration::seconds(
            cfg.session_idle.as_secs() as i64,
        )));
    // Multipart overhead on top of the file itself; the exact limit is enforced while streaming.
    let upload_limit = (cfg.upload_max_bytes as usize).saturating_add(1024 * 1024);
    Router::new()
        .merge(page_routes(upload_limit))
        .merge(api_routes(upload_limit))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics_endpoint))
        .route("/static/app.css", get(app_css))
        .route("/static/kb-live.js", get(kb_live_js))
        .route("/static/search.js", get(crate::search::pages::search_js))
        .route("/static/viewer.js", get(crate::viewer::handlers::viewer_js))
        .fallback(not_found)
        .layer(from_fn(auth::csrf::guard))
        .layer(from_fn(web::html_errors))
        .layer(sessions)
        .layer(from_fn(ops::track))
        .layer(TraceLayer::new_for_http())
        .layer(CompressionLayer::new())
        .with_state(state)
}

/// Connect, check the role and the schema, and build the state.
pub async fn prepare(config: Config) -> anyhow::Result<AppState> {
    let pool = db::connect(&config.database_url, config.db_max_connections).await?;
    db::ensure_app_role_is_confined(&pool).await?;
    if !db::is_migrated(&pool).await.unwrap_or(false) {
        anyhow::bail!("the database is not migrated; run `mnote migrate` first");
    }
    std::fs::create_dir_all(config.uploads_dir())?;
    let embedder = load_embedder(&pool).await;
    Ok(AppState::new(pool, config).with_embedder(embedder))
}

/// The configured embedder, or `None` (search runs degraded) when it is turned off or cannot
/// be loaded; a missing HNSW index is reported (`mnote migrate` creates it).
pub async fn load_embedder(pool: &PgPool) -> Option<Arc<dyn crate::search::embed::Embedder>> {
    use crate::search::{embed, vectors};
    let cfg = match embed::EmbedConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("embedder configuration: {e:#}; vector search is off");
            return None;
        }
    };
    match embed::from_config(&cfg) {
        Ok(Some(e)) => {
            let space = vectors::Space::of(e.as_ref());
            if !vectors::index_exists(pool, &space).await.unwrap_or(false) {
                tracing::warn!(model = %space.model, dim = space.dim, "no HNSW index for the embedder's model; run `mnote migrate`");
            }
            tracing::info!(model = %space.model, dim = space.dim, "embedder ready");
            Some(e)
        }
        Ok(None) => {
            tracing::info!("no embedder configured (MNOTE_EMBEDDER=none): vector and hybrid search run lexical");
            None
        }
        Err(e) => {
            tracing::warn!("{e}; vector and hybrid search run lexical (degraded)");
            None
        }
    }
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
    let watcher = crate::ingest::watch::spawn(state.pool.clone(), state.config.clone(), stop_rx);
    let listener = tokio::net::TcpListener::bind(state.config.bind).await?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    let app = build_router(state);
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    cleanup.abort();
    let _ = stop_tx.send(true);
    for w in workers {
        let _ = w.await;
    }
    let _ = watcher.await;
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

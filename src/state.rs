//! The application state every handler gets (`State<AppState>`), and the configured embedder
//! it is built with. This module depends on the services it holds (`db`, `config`, search
//! internals), never on a feature's handlers or routes.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use sqlx::PgPool;

use crate::config::Config;

#[derive(Clone)]
pub struct AppState {
    /// The primary: every write, the journal, `LISTEN`/`NOTIFY`, read-your-own-write reads.
    pub pool: PgPool,
    /// Read-only work: the standby of `MNOTE_READ_DATABASE_URL` while it is healthy and fresh,
    /// else the primary (`db::read`).
    pub reads: Arc<crate::db::read::Reads>,
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
    /// Evidence blocks of recently cited source versions (knowledge-RAG reference mapping).
    pub rag_blocks: Arc<crate::rag::blocks::BlockCache>,
    /// Run journal wake-ups (`<tenant>:<run>:<seq>`, `<tenant>:<run>:cancel`) relayed from
    /// Postgres `LISTEN mnote_run`: one listener per process, shared by every SSE client.
    pub run_events: tokio::sync::broadcast::Sender<String>,
    /// Live run events fanned out to this process's SSE clients (one reader per run).
    pub run_hub: Arc<crate::journal::hub::RunHub>,
    /// This process, as the owner of the run leases it holds.
    pub instance_id: Arc<str>,
    /// Runs this process executes at once.
    pub run_slots: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    /// Build the state and start relaying Postgres notifications to `source_events`.
    pub fn new(pool: PgPool, config: Config) -> Self {
        let (tx, _) = tokio::sync::broadcast::channel(256);
        tokio::spawn(crate::db::notify::relay(pool.clone(), "mnote_source", tx.clone()));
        let (run_events, _) = tokio::sync::broadcast::channel(4096);
        tokio::spawn(crate::db::notify::relay(pool.clone(), "mnote_run", run_events.clone()));
        let lexical_mirror = crate::search::memindex::MemIndex::new(pool.clone());
        let vector_health =
            Arc::new(crate::search::vector_health::VectorHealth::new(config.vector_retry_min, config.vector_retry_max));
        let run_hub = Arc::new(crate::journal::hub::RunHub::new(pool.clone(), run_events.clone()));
        let run_slots = Arc::new(tokio::sync::Semaphore::new(config.agents.max_concurrent_runs));
        let reads = match &config.read_database_url {
            None => crate::db::read::Reads::primary_only(pool.clone()),
            Some(url) => crate::db::read::Reads::with_standby(pool.clone(), url, config.db_max_connections, config.read_max_lag)
                .unwrap_or_else(|e| {
                    tracing::error!("{e:#}; every read goes to the primary");
                    crate::db::read::Reads::primary_only(pool.clone())
                }),
        };
        AppState {
            pool,
            reads,
            config: Arc::new(config),
            metrics: crate::platform::metrics::handle(),
            source_events: tx,
            embedder: None,
            lexical_mirror,
            vector_health,
            rag_blocks: Arc::new(crate::rag::blocks::BlockCache::new(256)),
            run_hub,
            run_events,
            instance_id: format!("{}:{}", std::process::id(), uuid::Uuid::new_v4().simple()).into(),
            run_slots,
        }
    }

    /// Searches use `embedder` through a cache of recent query vectors.
    pub fn with_embedder(mut self, embedder: Option<Arc<dyn crate::search::embed::Embedder>>) -> Self {
        self.embedder = embedder.map(crate::search::embed::CachedQueries::wrap);
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
            // A language router has two models, each with its own index.
            for space in vectors::Space::all_of(e.as_ref()) {
                if !vectors::index_exists(pool, &space).await.unwrap_or(false) {
                    tracing::warn!(model = %space.model, dim = space.dim, "no HNSW index for the embedder's model; run `mnote migrate`");
                }
                tracing::info!(model = %space.model, dim = space.dim, "embedder ready");
            }
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

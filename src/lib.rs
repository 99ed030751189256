//! MNote Evidence Server: a multi-tenant service that turns a team's documents into
//! searchable evidence with exact citations. See `docs/ARCHITECTURE.md` for the module map.

rust_i18n::i18n!("locales", fallback = "en");

pub mod agents; // agent runtimes (builtin, openai, acp), the tool registry, the run executor, citation checks
pub mod ai; // the run's closed lists on the ground floor: AgentId, Provider, Capability
pub mod audit; // the append-only audit log: audit_event, record, list, purge, exports
pub mod auth; // passwords, sessions, CSRF, login rate limit, API tokens, the `Auth` extractor
pub mod cli; // the `mnote` command line (clap definitions, dispatch, one file per command group)
pub mod config; // Config::from_env
pub mod context; // app_pool, act_as: what CLI and batch commands (index, eval, bench) run with
pub mod db; // pools, migrations, role checks, tenant-scoped transactions
pub mod error; // AppError: JSON for /api, an HTML page for the browser
pub mod evidence; // the locator, source kinds and statuses, citation places
pub mod grants; // directory grants and path confinement
pub mod home; // the dashboard and its getting-started checklist (reads the features' facts)
pub mod ingest; // parse providers, the canonical artifact, the job queue and workers, indexing
pub mod journal; // the run journal: ai_run + ai_run_event, the run read API, SSE, the lease reconciler
pub mod kbs; // knowledge bases and their members
pub mod mcp; // the MCP endpoint (/mcp, streamable HTTP, bearer tokens): the registry tools for external agents
pub mod openapi; // the OpenAPI 3.1 document of /api, built from the handlers' types (GET /api/openapi.json)
pub mod ops; // /healthz, /readyz, /metrics
pub mod platform; // child-process supervisor, outbound HTTP client, SecretString, secrets at rest
pub mod rag; // knowledge RAG: LightRAG client, bindings, sync, reference → evidence mapping
pub mod runs; // a run's home: runs::start, POST /api/page-ai/runs, the assistant pages (/ai), conversations
pub mod search; // evidence search (lexical, vector, hybrid, graph), embedders, the evidence tools
pub mod signin; // the sign-in, team chooser, language, API tokens and password pages (above `web`)
pub mod sources; // registered files and uploads
pub mod startup; // merges the features' routers, middleware order, serve
pub mod state; // AppState (+ load_embedder): what every handler gets
pub mod tenants; // tenants, members, bootstrap and /setup
pub mod viewer; // the citation viewer: /sources/{id}/view, page images, downloads
pub mod web; // layout, i18n, pages, static assets (/static/*)

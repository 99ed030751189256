//! MNote Evidence Server: a multi-tenant service that turns a team's documents into
//! searchable evidence with exact citations. See `docs/ARCHITECTURE.md` for the module map.

rust_i18n::i18n!("locales", fallback = "en");

pub mod auth; // passwords, sessions, CSRF, login rate limit, API tokens, the `Auth` extractor
pub mod cli; // the `mnote` command line
pub mod config; // Config::from_env
pub mod db; // pools, migrations, role checks, tenant-scoped transactions
pub mod error; // AppError: JSON for /api, an HTML page for the browser
pub mod grants; // directory grants and path confinement
pub mod ingest; // parse providers and the canonical artifact
pub mod kbs; // knowledge bases and their members
pub mod ops; // /healthz, /readyz, /metrics
pub mod search; // evidence search: embedders (query modes come with the search issue)
pub mod sources; // registered files and uploads
pub mod startup; // AppState, router, serve
pub mod tenants; // tenants, members, bootstrap and /setup
pub mod viewer; // the citation viewer: /sources/{id}/view, page images, downloads
pub mod web; // layout, i18n, pages, static files

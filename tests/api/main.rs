//! Integration tests: the real HTTP server against a real Postgres (one throwaway database
//! per test), connecting as the confined app role. Run with `./dev test`.

mod helpers;

mod accounts;
mod cli;
mod grants;
mod ingest;
mod isolation;
mod kbs_sources;
mod ops;
mod pages;

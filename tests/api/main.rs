//! Integration tests: the real HTTP server against a real Postgres (one throwaway database
//! per test), connecting as the confined app role. Run with `./dev test`.

#[path = "../common/files.rs"]
mod files;
mod helpers;

mod account_takeover;
mod accounts;
mod assistant;
mod cli;
mod clients;
mod cluster;
mod cluster_harness;
mod conversations;
mod deploy_image;
mod descriptors;
mod downloads;
mod fixtures;
mod grants;
mod hardening;
mod hostile;
mod ingest;
mod ingest_status;
mod invitations;
mod isolation;
mod kbs_sources;
mod knowledge_rag;
mod lightrag;
mod llm_connect;
mod login_limits;
mod malformed_json;
mod mcp;
mod mcp_clients;
mod mineru;
mod openapi;
mod ops;
mod pages;
mod preferences;
mod private_kbs;
mod rag_status;
mod read_replica;
mod run_scope;
mod runs_acp;
mod runs_acp_sandbox;
mod runs_builtin;
mod runs_journal;
mod runs_openai;
mod search;
mod search_page;
mod security;
mod session_expiry;
mod soft_delete;
mod standby;
mod symlink_race;
mod tenant_roots;
mod vectors;
mod viewer;

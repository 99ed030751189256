//! The MCP endpoint: `POST /mcp` (and `GET`, answered 405 in this stateless mode), an MCP
//! server over the streamable HTTP transport (rmcp), for external agents (Claude Desktop,
//! Cursor, any MCP client).
//!
//! - `http.rs`: the `/mcp` route outside the session, CSRF and HTML-error layers; bearer
//!   tokens only (the API tokens of `auth::tokens`, checked by the same `Auth` extractor);
//!   every error of the HTTP layer is our JSON error body.
//! - `caller.rs`: who calls (the member, the rate-limit key, the citation base, a run token's
//!   run), put into the request by the guard of `http.rs`.
//! - `server.rs`: the rmcp `ServerHandler`: tools, resources, the per-token rate limit.
//! - `tools.rs`: every registry tool (`agents::tools`: one definition each, with its MCP name,
//!   description and Markdown rendering; one execution path through a detached `ToolBox`)
//!   and `list_knowledge_bases`.
//! - `resources.rs`: each visible KB as a resource listing its sources.
//! - `run_token.rs`: an ACP run's own token (minted per run, live while the run is): the run's
//!   tool offer, every call journaled into the run.
//! - `limits.rs`: the per-token rate limit.
//! - `bench.rs`: `mnote bench mcp`.

pub mod bench;
mod caller;
mod http;
mod limits;
mod resources;
pub mod run_token;
mod server;
pub mod tools;

pub use http::router;

//! Evidence search (SPEC §5): text analysis, BM25 + vector + hybrid + graph queries, the
//! evidence tools and their API.
pub mod analyze;
pub mod bench;
pub mod embed;
pub mod embed_cache;
pub mod eval;
pub mod handlers;
pub mod memindex;
pub mod open;
pub mod pages;
pub mod query;
pub mod vectors;
pub mod vector_health;

//! Markdown provider (placeholder module: implemented in the ingestion work).

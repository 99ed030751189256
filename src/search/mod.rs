//! Evidence search (SPEC §5): embeddings for the vector index; query modes come later.

pub mod embed;

//! Text embeddings for vector and hybrid search (SPEC §5 "Vector").
//!
//! Two [`Embedder`]s: [`LocalMiniLm`] (all-MiniLM-L6-v2 on candle, offline, the default;
//! [`local`]) and [`OpenAiEmbedder`] (any OpenAI-compatible `/v1/embeddings` endpoint;
//! [`openai`]). [`from_config`] builds the configured one; `None` means "no embedder", and
//! search then falls back to lexical with `degraded: true, degradedReason:
//! "embedder_unavailable"`. [`CachedQueries`] ([`cache`]) keeps recent query vectors in front
//! of either.
//!
//! # Why `embed` returns a boxed future
//!
//! Callers (ingest workers, the search handler) are async and hold an `Arc<dyn Embedder>`, so
//! the trait must stay object safe; `async fn` in traits is not. A `BoxFuture` gives one call
//! shape for both backends: the HTTP embedder is natively async, and the local model moves its
//! CPU-bound forward pass onto tokio's blocking pool itself, so no caller can stall a runtime
//! worker by forgetting `spawn_blocking`. Sync code (tests, tools) can use
//! [`LocalMiniLm::embed_blocking`].
//!
//! # Vector spaces
//!
//! A vector space is identified by `(model_id, dimension)`; vectors of different spaces are never
//! compared. The dimension is not a schema constant but whatever the configured embedder reports
//! (384 for MiniLM, 1536 for text-embedding-3-small, ...): `evidence_embedding.embedding` is an
//! untyped `vector`, one row per block and model, with a partial HNSW expression index per
//! model. [`crate::search::vectors`] creates that index and drops other models' vectors and
//! indexes, so a model change re-embeds rather than mixing spaces.

pub mod cache;
pub mod local;
pub mod openai;

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use futures_util::future::BoxFuture;

pub use cache::CachedQueries;
pub use local::{LocalMiniLm, MINILM_DIMENSION, MINILM_MODEL_ID};
pub use openai::{ApiKey, OpenAiConfig, OpenAiEmbedder};
use openai::{HTTP_BATCH, HTTP_DEFAULT_TIMEOUT, embeddings_url};

use crate::platform::SecretString;

// ---- the trait -------------------------------------------------------------------------------

/// Whether a text is a search query or an indexed passage. Asymmetric models (e5, bge) embed the
/// two differently; MiniLM ignores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedKind {
    Query,
    Passage,
}

/// An embedding failure with a stable code, reported on the source or as `degradedReason`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct EmbedError {
    pub code: &'static str,
    pub message: String,
}

impl EmbedError {
    /// Not configured, not provisioned, or not reachable: worth retrying later.
    pub const UNAVAILABLE: &'static str = "embedder_unavailable";
    /// The embedder answered but the answer is unusable (rejected key, bad request, bad JSON).
    pub const FAILED: &'static str = "embedder_failed";
    /// The vectors do not have the configured dimension: a configuration error.
    pub const DIMENSION_MISMATCH: &'static str = "embedder_dimension_mismatch";

    pub fn unavailable(message: impl Into<String>) -> Self {
        EmbedError { code: Self::UNAVAILABLE, message: message.into() }
    }
    pub fn failed(message: impl Into<String>) -> Self {
        EmbedError { code: Self::FAILED, message: message.into() }
    }
    pub fn dimension_mismatch(message: impl Into<String>) -> Self {
        EmbedError { code: Self::DIMENSION_MISMATCH, message: message.into() }
    }
}

/// Turns texts into unit-length vectors of one vector space.
pub trait Embedder: Send + Sync + fmt::Debug {
    /// Identifies the vector space together with [`dimension`](Self::dimension); stored with
    /// every vector.
    fn model_id(&self) -> &str;
    fn dimension(&self) -> usize;
    /// Whether the model handles languages other than English well. An English-only model
    /// is left out of hybrid fusion for queries in other scripts (e.g. Chinese).
    fn multilingual(&self) -> bool {
        true
    }
    /// One L2-normalised vector per text, in input order. Batching happens inside, so callers
    /// may pass any number of texts. Needs a tokio runtime.
    fn embed<'a>(&'a self, texts: &'a [String], kind: EmbedKind) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;
}

/// Scale `v` to unit length, so every stored vector supports inner product as cosine. A zero
/// vector stays zero rather than becoming NaN (pgvector rejects NaN).
pub(crate) fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

// ---- configuration ---------------------------------------------------------------------------

/// Which embedder the deployment uses.
#[derive(Clone, Debug)]
pub enum EmbedConfig {
    /// No vectors: vector and hybrid search fall back to lexical.
    None,
    Local {
        model_dir: PathBuf,
    },
    OpenAi(OpenAiConfig),
}

/// Where `./dev provision` puts the model.
pub fn default_model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".local/models/all-MiniLM-L6-v2")
}

/// Native dimensions of OpenAI's own models, so `MNOTE_EMBED_DIM` can be left out for them.
fn known_dimension(model: &str) -> Option<usize> {
    match model {
        "text-embedding-3-small" | "text-embedding-ada-002" => Some(1536),
        "text-embedding-3-large" => Some(3072),
        _ => None,
    }
}

impl EmbedConfig {
    /// Parse the embedder settings from `get` (the environment: [`EmbedConfig::from_env`] in
    /// `config.rs`; tests pass a map):
    ///
    /// * `MNOTE_EMBEDDER` = `local` (default) | `openai` | `none`
    /// * `MNOTE_EMBED_MODEL_DIR`: the all-MiniLM-L6-v2 directory (default
    ///   `<checkout>/.local/models/all-MiniLM-L6-v2`, provisioned by `./dev`)
    /// * `MNOTE_EMBED_URL`, `MNOTE_EMBED_MODEL`: the endpoint base (`…/v1`) and model (openai)
    /// * `MNOTE_EMBED_DIM`: the model's vector dimension; required unless the model is one of
    ///   OpenAI's own
    /// * `MNOTE_EMBED_API_KEY`: optional bearer token, sent to that endpoint only
    /// * `MNOTE_EMBED_SEND_DIMENSIONS`: send `"dimensions"` (default: only for
    ///   text-embedding-3-* with an explicit `MNOTE_EMBED_DIM`)
    /// * `MNOTE_EMBED_QUERY_PREFIX`, `MNOTE_EMBED_PASSAGE_PREFIX`: default `query: ` /
    ///   `passage: ` for e5 models, else empty; set to an empty value to turn off
    /// * `MNOTE_EMBED_TIMEOUT_SECS` (default 60), `MNOTE_EMBED_BATCH` (default 32)
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        use anyhow::{Context, bail};
        let var = |name: &str| get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let number = |name: &str| -> anyhow::Result<Option<usize>> {
            match var(name) {
                None => Ok(None),
                Some(v) => match v.parse::<usize>() {
                    Ok(n) if n > 0 => Ok(Some(n)),
                    _ => bail!("{name}={v:?}: expected a positive whole number"),
                },
            }
        };

        let kind = var("MNOTE_EMBEDDER").unwrap_or_else(|| "local".into()).to_ascii_lowercase();
        match kind.as_str() {
            "none" => Ok(EmbedConfig::None),
            "local" => Ok(EmbedConfig::Local {
                model_dir: var("MNOTE_EMBED_MODEL_DIR").map(PathBuf::from).unwrap_or_else(default_model_dir),
            }),
            "openai" => {
                let base_url = var("MNOTE_EMBED_URL")
                    .context("MNOTE_EMBEDDER=openai needs MNOTE_EMBED_URL (e.g. https://api.openai.com/v1)")?;
                embeddings_url(&base_url).map_err(anyhow::Error::msg)?;
                let model = var("MNOTE_EMBED_MODEL").context("MNOTE_EMBEDDER=openai needs MNOTE_EMBED_MODEL")?;
                let explicit_dim = number("MNOTE_EMBED_DIM")?;
                let Some(dimension) = explicit_dim.or_else(|| known_dimension(&model)) else {
                    bail!("MNOTE_EMBED_DIM is required for model {model:?} (its vector dimension)");
                };
                let send_dimensions = match var("MNOTE_EMBED_SEND_DIMENSIONS") {
                    None => explicit_dim.is_some() && model.starts_with("text-embedding-3"),
                    Some(v) => match v.to_ascii_lowercase().as_str() {
                        "1" | "true" | "yes" | "on" => true,
                        "0" | "false" | "no" | "off" => false,
                        _ => bail!("MNOTE_EMBED_SEND_DIMENSIONS={v:?}: expected true or false"),
                    },
                };
                // e5 was trained with these markers; without them retrieval quality drops.
                // (The -instruct variants want a task instruction instead: set the prefixes.)
                let lower = model.to_ascii_lowercase();
                let e5 = lower.contains("e5-") && !lower.contains("instruct");
                let prefix = |name: &str, e5_default: &str| {
                    get(name).unwrap_or_else(|| if e5 { e5_default.into() } else { String::new() })
                };
                Ok(EmbedConfig::OpenAi(OpenAiConfig {
                    base_url,
                    dimension,
                    send_dimensions,
                    api_key: var("MNOTE_EMBED_API_KEY").map(SecretString::new),
                    query_prefix: prefix("MNOTE_EMBED_QUERY_PREFIX", "query: "),
                    passage_prefix: prefix("MNOTE_EMBED_PASSAGE_PREFIX", "passage: "),
                    timeout: number("MNOTE_EMBED_TIMEOUT_SECS")?.map_or(HTTP_DEFAULT_TIMEOUT, |s| Duration::from_secs(s as u64)),
                    batch_size: number("MNOTE_EMBED_BATCH")?.unwrap_or(HTTP_BATCH),
                    model,
                }))
            }
            other => bail!("MNOTE_EMBEDDER={other:?}: expected local, openai or none"),
        }
    }
}

/// Build the configured embedder. `Ok(None)` when embeddings are turned off; a local model that
/// is not provisioned is `embedder_unavailable` (the caller decides whether to run degraded).
/// Loading the local model reads ~90 MB, so call this at startup, not per request.
pub fn from_config(cfg: &EmbedConfig) -> Result<Option<Arc<dyn Embedder>>, EmbedError> {
    Ok(match cfg {
        EmbedConfig::None => None,
        EmbedConfig::Local { model_dir } => Some(Arc::new(LocalMiniLm::load(model_dir)?)),
        EmbedConfig::OpenAi(c) => Some(Arc::new(OpenAiEmbedder::new(c.clone())?)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const KEY: &str = "sk-test-0123456789abcdef";

    // ---- configuration ----

    fn config_from(vars: &[(&str, &str)]) -> anyhow::Result<EmbedConfig> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        EmbedConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn config_defaults_to_the_local_model() {
        match config_from(&[]).unwrap() {
            EmbedConfig::Local { model_dir } => assert_eq!(model_dir, default_model_dir()),
            other => panic!("{other:?}"),
        }
        match config_from(&[("MNOTE_EMBED_MODEL_DIR", "/models/minilm")]).unwrap() {
            EmbedConfig::Local { model_dir } => assert_eq!(model_dir, Path::new("/models/minilm")),
            other => panic!("{other:?}"),
        }
        let none = config_from(&[("MNOTE_EMBEDDER", "none")]).unwrap();
        assert!(from_config(&none).unwrap().is_none());
        assert!(config_from(&[("MNOTE_EMBEDDER", "bert")]).is_err());
        let missing = EmbedConfig::Local { model_dir: "/nonexistent".into() };
        assert_eq!(from_config(&missing).unwrap_err().code, EmbedError::UNAVAILABLE);
    }

    #[test]
    fn config_for_an_openai_compatible_endpoint() {
        let cfg = config_from(&[
            ("MNOTE_EMBEDDER", "openai"),
            ("MNOTE_EMBED_URL", "http://gpu-box:8080/v1/"),
            ("MNOTE_EMBED_MODEL", "intfloat/multilingual-e5-small"),
            ("MNOTE_EMBED_DIM", "384"),
            ("MNOTE_EMBED_API_KEY", KEY),
        ])
        .unwrap();
        let EmbedConfig::OpenAi(c) = &cfg else { panic!("{cfg:?}") };
        assert_eq!((c.dimension, c.send_dimensions), (384, false));
        assert_eq!((c.query_prefix.as_str(), c.passage_prefix.as_str()), ("query: ", "passage: "));
        assert!(!format!("{cfg:?}").contains(KEY));
        let e = from_config(&cfg).unwrap().unwrap();
        assert_eq!(e.model_id(), "openai:intfloat/multilingual-e5-small");
        assert!(format!("{e:?}").contains("http://gpu-box:8080/v1/embeddings"));

        // OpenAI's own models know their dimension; asking for fewer sends "dimensions".
        let openai = |extra: &[(&'static str, &'static str)]| {
            let mut vars = vec![
                ("MNOTE_EMBEDDER", "openai"),
                ("MNOTE_EMBED_URL", "https://api.openai.com/v1"),
                ("MNOTE_EMBED_MODEL", "text-embedding-3-large"),
            ];
            vars.extend_from_slice(extra);
            match config_from(&vars).unwrap() {
                EmbedConfig::OpenAi(c) => (c.dimension, c.send_dimensions, c.query_prefix),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(openai(&[]), (3072, false, String::new()));
        assert_eq!(openai(&[("MNOTE_EMBED_DIM", "1024")]), (1024, true, String::new()));

        let no_dim = config_from(&[
            ("MNOTE_EMBEDDER", "openai"),
            ("MNOTE_EMBED_URL", "http://localhost:11434/v1"),
            ("MNOTE_EMBED_MODEL", "bge-m3"),
        ]);
        assert!(no_dim.unwrap_err().to_string().contains("MNOTE_EMBED_DIM"));
        let no_url = config_from(&[("MNOTE_EMBEDDER", "openai"), ("MNOTE_EMBED_MODEL", "m")]);
        assert!(no_url.unwrap_err().to_string().contains("MNOTE_EMBED_URL"));
    }
}

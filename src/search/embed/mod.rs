//! Text embeddings for vector and hybrid search (SPEC §5 "Vector").
//!
//! The local embedders run on ONNX Runtime ([`onnx`]): multilingual-e5-small for every block
//! and query (the default, offline: one space in which Chinese and English meet), or
//! all-MiniLM-L6-v2 for English beside e5 for text with Chinese, Japanese or Korean, behind a
//! [`LanguageRouter`] ([`route`]) that picks the model per text (`MNOTE_EMBED_ROUTING=language`);
//! [`OpenAiEmbedder`] calls any OpenAI-compatible `/v1/embeddings` endpoint ([`openai`]).
//! [`from_config`] builds the configured one; `None` means "no embedder", and
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
pub mod onnx;
pub mod openai;
pub mod route;

use std::{fmt, path::PathBuf, sync::Arc, time::Duration};

use futures_util::future::BoxFuture;

pub use cache::CachedQueries;
pub use onnx::{E5_SMALL, LocalMiniLm, MINILM, ModelSpec, OnnxEmbedder};
pub use openai::{ApiKey, OpenAiConfig, OpenAiEmbedder};
use openai::{HTTP_BATCH, HTTP_DEFAULT_TIMEOUT, embeddings_url};
pub use route::{LanguageRouter, has_cjk};

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
    /// may pass any number of texts. Needs a tokio runtime. A router embeds only texts that
    /// all take the same route ([`routed`] first).
    fn embed<'a>(&'a self, texts: &'a [String], kind: EmbedKind) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;
    /// Cosine below which a nearest neighbour is noise, not a match (calibrated per model);
    /// `None`: no floor known (remote models).
    fn min_similarity(&self) -> Option<f64> {
        None
    }
    /// The floor for a block whose script class ([`has_cjk`]) differs from the query's
    /// (cross-language matches of a multilingual model score lower); default: the same floor.
    fn cross_min_similarity(&self) -> Option<f64> {
        self.min_similarity()
    }
    /// The same-script floor for a query without CJK letters; default: the same floor.
    fn non_cjk_min_similarity(&self) -> Option<f64> {
        self.min_similarity()
    }
    /// The model that embeds `text`: a router picks one of its models; `None` = this one.
    fn route(&self, _text: &str) -> Option<Arc<dyn Embedder>> {
        None
    }
    /// Whether a vector of `text` that this model wrote before long texts were embedded in
    /// windows (stored with `legacy_cut`) differs from the one it writes now: true for a
    /// model that used to cut texts and a text longer than one window. The embedding backlog
    /// re-embeds such vectors ([`crate::search::vectors::refresh_legacy_cut`]).
    fn legacy_vector_is_stale(&self, _text: &str) -> bool {
        false
    }
    /// Every vector space (model, dimension) this embedder writes: one, or one per model of a
    /// router.
    fn spaces(&self) -> Vec<(String, usize)> {
        vec![(self.model_id().to_string(), self.dimension())]
    }
}

/// The model of `e` that embeds `text` (`e` itself unless it is a router).
pub fn routed(e: &Arc<dyn Embedder>, text: &str) -> Arc<dyn Embedder> {
    e.route(text).unwrap_or_else(|| Arc::clone(e))
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
    Local(LocalConfig),
    OpenAi(OpenAiConfig),
}

/// Which local models embed what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// Text with CJK letters → multilingual-e5-small, the rest → all-MiniLM-L6-v2: two spaces
    /// that never meet (an English query does not reach Chinese blocks on the vector side).
    Language,
    /// Everything → multilingual-e5-small (default): one cross-lingual space, chosen by
    /// measurement (`docs/BENCHMARKS.md`, "One vector space across languages"); English
    /// blocks cost more CPU than with MiniLM.
    E5,
    /// Everything → all-MiniLM-L6-v2 (English only: CJK queries skip the vector side).
    MiniLm,
}

/// The local (ONNX Runtime) embedders' files and threads.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    /// all-MiniLM-L6-v2 (ONNX) directory.
    pub minilm_dir: PathBuf,
    /// multilingual-e5-small (ONNX) directory.
    pub e5_dir: PathBuf,
    /// `libonnxruntime.so` (from the PyPI wheel onnxruntime).
    pub ort_library: PathBuf,
    pub routing: Routing,
    /// Intra-op threads for passage batches (queries run on their own single-threaded sessions).
    pub threads: usize,
}

impl LocalConfig {
    /// The provisioned layout (`./dev provision`), e5 for everything, one thread per core.
    pub fn provisioned() -> Self {
        LocalConfig {
            minilm_dir: default_model_dir(),
            e5_dir: onnx::default_models_dir().join(E5_SMALL.dir),
            ort_library: onnx::default_ort_library(),
            routing: Routing::E5,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// Where `./dev provision` puts all-MiniLM-L6-v2 (ONNX).
pub fn default_model_dir() -> PathBuf {
    onnx::default_models_dir().join(MINILM.dir)
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
    /// The embedder's settings from the environment (`MNOTE_EMBEDDER`, `MNOTE_EMBED_*`; the
    /// list is at [`from_lookup`](Self::from_lookup)). Read on their own, not into the server's
    /// `Config`: `mnote migrate`, the CLI's search and the benchmarks load the embedder without
    /// the server's configuration.
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Parse the embedder settings from `get` (the environment: [`EmbedConfig::from_env`] in
    /// above; tests pass a map):
    ///
    /// * `MNOTE_EMBEDDER` = `local` (default) | `openai` | `none`
    /// * `MNOTE_EMBED_MODEL_DIR`: the all-MiniLM-L6-v2 ONNX directory (default
    ///   `<checkout>/.local/models/all-MiniLM-L6-v2-onnx-fused`, provisioned by `./dev`)
    /// * `MNOTE_EMBED_E5_DIR`: the multilingual-e5-small ONNX directory (default
    ///   `<checkout>/.local/models/multilingual-e5-small-onnx-fused`)
    /// * `MNOTE_ORT_LIB`: `libonnxruntime.so` (default
    ///   `<checkout>/.local/models/onnxruntime-1.32.0/libonnxruntime.so.1.32.0`)
    /// * `MNOTE_EMBED_ROUTING` = `e5` (default: one cross-language space) | `language` (CJK →
    ///   e5, the rest → MiniLM: two spaces) | `minilm`
    /// * `MNOTE_EMBED_THREADS`: intra-op threads for passage batches (default: the cores)
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
            "local" => {
                let d = LocalConfig::provisioned();
                let routing = match var("MNOTE_EMBED_ROUTING").map(|v| v.to_ascii_lowercase()).as_deref() {
                    Some("language") => Routing::Language,
                    None | Some("e5") => Routing::E5,
                    Some("minilm") => Routing::MiniLm,
                    Some(other) => bail!("MNOTE_EMBED_ROUTING={other:?}: expected language, e5 or minilm"),
                };
                Ok(EmbedConfig::Local(LocalConfig {
                    minilm_dir: var("MNOTE_EMBED_MODEL_DIR").map(PathBuf::from).unwrap_or(d.minilm_dir),
                    e5_dir: var("MNOTE_EMBED_E5_DIR").map(PathBuf::from).unwrap_or(d.e5_dir),
                    ort_library: var("MNOTE_ORT_LIB").map(PathBuf::from).unwrap_or(d.ort_library),
                    routing,
                    threads: number("MNOTE_EMBED_THREADS")?.unwrap_or(d.threads),
                }))
            }
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
/// Loading the local models reads ~300 MB, so call this at startup, not per request.
pub fn from_config(cfg: &EmbedConfig) -> Result<Option<Arc<dyn Embedder>>, EmbedError> {
    Ok(match cfg {
        EmbedConfig::None => None,
        EmbedConfig::Local(c) => Some(load_local(c)?),
        EmbedConfig::OpenAi(c) => Some(Arc::new(OpenAiEmbedder::new(c.clone())?)),
    })
}

/// The local models of `c`: one model, or the language router over both.
pub fn load_local(c: &LocalConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    let minilm = || OnnxEmbedder::load(&MINILM, &c.minilm_dir, &c.ort_library, c.threads);
    let e5 = || OnnxEmbedder::load(&E5_SMALL, &c.e5_dir, &c.ort_library, c.threads);
    Ok(match c.routing {
        Routing::MiniLm => Arc::new(minilm()?),
        Routing::E5 => Arc::new(e5()?),
        Routing::Language => Arc::new(LanguageRouter::new(Arc::new(minilm()?), Arc::new(e5()?))),
    })
}

/// The vector spaces a configuration writes, without loading a model (for `mnote migrate`).
pub fn spaces_of_config(cfg: &EmbedConfig) -> Vec<(String, usize)> {
    let space = |s: &ModelSpec| (s.id.to_string(), s.dim);
    match cfg {
        EmbedConfig::None => Vec::new(),
        EmbedConfig::Local(c) => match c.routing {
            Routing::MiniLm => vec![space(&MINILM)],
            Routing::E5 => vec![space(&E5_SMALL)],
            Routing::Language => vec![space(&MINILM), space(&E5_SMALL)],
        },
        EmbedConfig::OpenAi(c) => vec![(c.model.clone(), c.dimension)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{collections::HashMap, path::Path};

    const KEY: &str = "sk-test-0123456789abcdef";

    // ---- configuration ----

    fn config_from(vars: &[(&str, &str)]) -> anyhow::Result<EmbedConfig> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        EmbedConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn config_defaults_to_the_local_model() {
        match config_from(&[]).unwrap() {
            EmbedConfig::Local(c) => {
                assert_eq!(c.minilm_dir, default_model_dir());
                assert_eq!(c.routing, Routing::E5);
                assert!(c.threads >= 1);
            }
            other => panic!("{other:?}"),
        }
        let vars = [
            ("MNOTE_EMBED_MODEL_DIR", "/models/minilm"),
            ("MNOTE_EMBED_E5_DIR", "/models/e5"),
            ("MNOTE_ORT_LIB", "/opt/ort.so"),
            ("MNOTE_EMBED_ROUTING", "Language"),
            ("MNOTE_EMBED_THREADS", "3"),
        ];
        match config_from(&vars).unwrap() {
            EmbedConfig::Local(c) => {
                assert_eq!((c.minilm_dir.as_path(), c.e5_dir.as_path()), (Path::new("/models/minilm"), Path::new("/models/e5")));
                assert_eq!((c.ort_library.as_path(), c.routing, c.threads), (Path::new("/opt/ort.so"), Routing::Language, 3));
                assert_eq!(spaces_of_config(&EmbedConfig::Local(c)).len(), 2, "two spaces");
            }
            other => panic!("{other:?}"),
        }
        // The default writes one space: e5's (a deployment that routed by language drops
        // MiniLM's vectors at `mnote migrate` and re-embeds its English blocks).
        let default = config_from(&[]).unwrap();
        assert_eq!(spaces_of_config(&default), vec![(E5_SMALL.id.to_string(), 384)]);
        assert!(config_from(&[("MNOTE_EMBED_ROUTING", "fastest")]).unwrap_err().to_string().contains("MNOTE_EMBED_ROUTING"));
        assert!(config_from(&[("MNOTE_EMBED_THREADS", "0")]).is_err());
        let none = config_from(&[("MNOTE_EMBEDDER", "none")]).unwrap();
        assert!(from_config(&none).unwrap().is_none());
        assert!(spaces_of_config(&none).is_empty());
        assert!(config_from(&[("MNOTE_EMBEDDER", "bert")]).is_err());
        let missing = EmbedConfig::Local(LocalConfig { e5_dir: "/nonexistent".into(), ..LocalConfig::provisioned() });
        let err = from_config(&missing).unwrap_err();
        assert_eq!(err.code, EmbedError::UNAVAILABLE);
        assert!(err.message.contains("/nonexistent") && err.message.contains("./dev provision"), "{}", err.message);
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

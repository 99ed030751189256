//! An OpenAI-compatible `/v1/embeddings` endpoint as an [`Embedder`], over the platform
//! HTTP client ([`crate::platform::http`]).

use std::{fmt, time::Duration};

use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::{EmbedError, EmbedKind, Embedder, normalize};
use crate::platform::{
    SecretString,
    http::{self, HttpError, HttpErrorKind},
};

/// The largest embeddings response read: this much plus [`MAX_BODY_PER_INPUT`] per input
/// (4,096 dimensions as JSON numbers take about 100 KB).
const MAX_BODY_BASE: usize = 1 << 20;
const MAX_BODY_PER_INPUT: usize = 256 << 10;

/// Default texts per HTTP request. Hosted APIs take far more, but self-hosted servers (e.g.
/// text-embeddings-inference) default to 32 per request.
pub(super) const HTTP_BATCH: usize = 32;
const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub(super) const HTTP_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// An API key: only ever written into the `Authorization` header; `Debug` hides it.
pub type ApiKey = SecretString;

/// Settings for [`OpenAiEmbedder`] (see [`super::EmbedConfig::from_lookup`] for the variables).
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
    client: http::Client,
}

impl OpenAiEmbedder {
    pub fn new(cfg: OpenAiConfig) -> Result<Self, EmbedError> {
        let endpoint = embeddings_url(&cfg.base_url).map_err(EmbedError::unavailable)?;
        if cfg.dimension == 0 || cfg.batch_size == 0 || cfg.model.trim().is_empty() {
            return Err(EmbedError::unavailable("the embedding endpoint needs a model, a dimension > 0 and a batch size > 0"));
        }
        let client = http::Client::builder()
            .connect_timeout(HTTP_CONNECT_TIMEOUT)
            .timeout(cfg.timeout)
            .build()
            .map_err(|e| EmbedError::unavailable(format!("cannot build the HTTP client: {e}")))?;
        let shown = http::display_url(&endpoint);
        Ok(OpenAiEmbedder { model_id: format!("openai:{}", cfg.model), cfg, endpoint, shown, client })
    }

    async fn embed_all(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
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
            req = req.bearer_auth(key.expose());
        }
        let resp = self.client.send(req).await.map_err(|e| self.transport_error(e))?;
        let status = resp.status();
        // A batch's vectors as JSON: a few KB per input; far more is not an embedding answer.
        let limit = MAX_BODY_BASE + input.len() * MAX_BODY_PER_INPUT;
        let bytes = crate::platform::http::read_limited(resp, limit).await.map_err(|e| match e.kind {
            HttpErrorKind::BadResponse => EmbedError::failed(format!("{} answered too much: {}", self.shown, e.message)),
            _ => self.transport_error(e),
        })?;
        if !status.is_success() {
            return Err(self.status_error(status, &bytes));
        }

        let parsed: EmbeddingsResponse = serde_json::from_slice(&bytes)
            .map_err(|e| EmbedError::failed(format!("unexpected response from {}: {e}", self.shown)))?;
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
                return Err(EmbedError::failed(format!("{} returned duplicate or out-of-range embedding indices", self.shown)));
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
                return Err(EmbedError::failed(format!("{} returned a non-finite value", self.shown)));
            }
            normalize(&mut v);
            out.push(v);
        }
        Ok(out)
    }

    /// The platform client's message has no URL: we print our own sanitised one.
    fn transport_error(&self, e: HttpError) -> EmbedError {
        if e.kind == HttpErrorKind::Timeout {
            return EmbedError::unavailable(format!("{} did not answer within {} s", self.shown, self.cfg.timeout.as_secs()));
        }
        EmbedError::unavailable(format!("cannot reach {}: {}", self.shown, e.message))
    }

    fn status_error(&self, status: reqwest::StatusCode, body: &[u8]) -> EmbedError {
        let code = status.as_u16();
        let kind = HttpErrorKind::of_status(status);
        if kind == HttpErrorKind::Unauthorized {
            // OpenAI's 401 message quotes part of the key; report only the status.
            return EmbedError::failed(format!(
                "{} rejected the credentials (HTTP {code}); check MNOTE_EMBED_API_KEY",
                self.shown
            ));
        }
        let detail = upstream_message(body);
        let msg = format!("{} answered HTTP {code}: {detail}", self.shown);
        // Throttling and server trouble pass; a rejected request will be rejected again.
        if kind == HttpErrorKind::Unavailable { EmbedError::unavailable(msg) } else { EmbedError::failed(msg) }
    }

    /// Last line of defence: whatever a server echoes back, the key never leaves in an error.
    fn scrub(&self, mut e: EmbedError) -> EmbedError {
        if let Some(key) = &self.cfg.api_key {
            e.message = key.scrub(&e.message);
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

    fn embed<'a>(&'a self, texts: &'a [String], kind: EmbedKind) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
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
pub(super) fn embeddings_url(base: &str) -> Result<reqwest::Url, String> {
    let base = base.trim().trim_end_matches('/');
    let full = if base.ends_with("/embeddings") { base.to_string() } else { format!("{base}/embeddings") };
    let url = reqwest::Url::parse(&full).map_err(|e| format!("MNOTE_EMBED_URL is not a valid URL ({e})"))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

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
        let app = axum::Router::new().route("/v1/embeddings", axum::routing::post(mock_embeddings)).with_state(mock);
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
        let sizes: Vec<usize> = mock.requests.lock().unwrap().iter().map(|r| r["input"].as_array().unwrap().len()).collect();
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

        let mock = Mock { dim: 4, fail: Some((503, serde_json::json!({"error": "model is loading"}))), ..Default::default() };
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
        let e = OpenAiEmbedder::new(openai_config(format!("http://127.0.0.1:{port}/v1"), 4)).unwrap();
        let err = e.embed(&items(1), EmbedKind::Query).await.unwrap_err();
        assert_eq!(err.code, EmbedError::UNAVAILABLE, "{err}");
        assert!(err.message.contains(&format!("127.0.0.1:{port}")), "{}", err.message);
        assert!(!err.message.contains(KEY));
    }
}

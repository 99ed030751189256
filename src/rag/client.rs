//! An HTTP client for one LightRAG server (lightrag-hku 1.5.x; each method names the route it calls):
//! typed requests and lenient typed responses, the timeout and bounded retries of the crate's
//! one outbound client, and errors with stable codes. It knows nothing of our handlers,
//! tables or tenants; nothing else in the crate builds a LightRAG URL.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::platform::{
    SecretString,
    http::{Client, HttpError, HttpErrorKind},
};

/// Why a LightRAG call failed, as the stable codes responses and source states carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RagErrorKind {
    /// Not reachable, or failing (5xx, 429): `knowledge_rag_unavailable`.
    Unavailable,
    /// No answer within `MNOTE_RAG_TIMEOUT_SECS`: `knowledge_rag_timeout`.
    Timeout,
    /// The API key was refused (401/403): `knowledge_rag_unauthorized`.
    Unauthorized,
    /// An answer we cannot use (malformed JSON, an unexpected shape, another 4xx):
    /// `knowledge_rag_bad_response`.
    BadResponse,
    /// LightRAG already holds a document under that name (409): `knowledge_rag_conflict`.
    Conflict,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RagError {
    pub kind: RagErrorKind,
    /// Without URL query, userinfo or the API key.
    pub message: String,
}

impl RagError {
    pub fn code(&self) -> &'static str {
        match self.kind {
            RagErrorKind::Unavailable => "knowledge_rag_unavailable",
            RagErrorKind::Timeout => "knowledge_rag_timeout",
            RagErrorKind::Unauthorized => "knowledge_rag_unauthorized",
            RagErrorKind::BadResponse => "knowledge_rag_bad_response",
            RagErrorKind::Conflict => "knowledge_rag_conflict",
        }
    }

    pub fn is_transient(&self) -> bool {
        matches!(self.kind, RagErrorKind::Unavailable | RagErrorKind::Timeout)
    }

    fn bad(message: impl Into<String>) -> Self {
        RagError { kind: RagErrorKind::BadResponse, message: message.into() }
    }

    fn of_http(e: HttpError) -> Self {
        let kind = match e.kind {
            HttpErrorKind::Unavailable => RagErrorKind::Unavailable,
            HttpErrorKind::Timeout => RagErrorKind::Timeout,
            HttpErrorKind::Unauthorized => RagErrorKind::Unauthorized,
            HttpErrorKind::BadResponse => RagErrorKind::BadResponse,
        };
        RagError { kind, message: format!("LightRAG: {}", e.message) }
    }
}

/// `mix` (graph + vector), `hybrid`, `local`, `global` or `naive` (vector only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QueryMode {
    #[default]
    Mix,
    Hybrid,
    Local,
    Global,
    Naive,
}

impl QueryMode {
    pub const ALL: [QueryMode; 5] = [QueryMode::Mix, QueryMode::Hybrid, QueryMode::Local, QueryMode::Global, QueryMode::Naive];

    pub fn as_str(self) -> &'static str {
        match self {
            QueryMode::Mix => "mix",
            QueryMode::Hybrid => "hybrid",
            QueryMode::Local => "local",
            QueryMode::Global => "global",
            QueryMode::Naive => "naive",
        }
    }
}

impl std::str::FromStr for QueryMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        QueryMode::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| format!("unknown mode {s:?}"))
    }
}

/// The body of `/query` and `/query/data` (only the fields we use).
#[derive(Debug, Clone, Serialize)]
pub struct QueryRequest {
    pub query: String,
    pub mode: QueryMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_top_k: Option<u32>,
    pub include_references: bool,
    pub include_chunk_content: bool,
}

/// `GET /health` (unauthenticated fields only).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct Health {
    pub status: String,
    pub core_version: Option<String>,
    pub api_version: Option<String>,
    pub pipeline_busy: Option<bool>,
}

/// `/documents/text` and `/documents/upload`.
#[derive(Debug, Clone, Deserialize)]
pub struct InsertResponse {
    pub status: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub track_id: String,
}

/// A document's status record (`DocStatusResponse`).
#[derive(Debug, Clone, Deserialize)]
pub struct DocStatus {
    pub id: String,
    #[serde(default)]
    pub content_summary: String,
    #[serde(default)]
    pub content_length: Option<u64>,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub track_id: Option<String>,
    #[serde(default)]
    pub chunks_count: Option<u64>,
    #[serde(default)]
    pub error_msg: Option<String>,
    #[serde(default)]
    pub file_path: String,
    /// LightRAG's own notes on the record; a duplicate says so here.
    #[serde(default)]
    pub metadata: Option<DocMetadata>,
}

/// The part of a document record's `metadata` we read: LightRAG (1.5+) records content it
/// already holds under another name as a separate failed record `dup-<md5>` with
/// `{"is_duplicate": true, "original_doc_id": …}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct DocMetadata {
    #[serde(default)]
    pub is_duplicate: bool,
    #[serde(default)]
    pub original_doc_id: Option<String>,
}

impl DocStatus {
    /// The original document's id when this record is LightRAG's note that the content was
    /// already held under another name.
    pub fn duplicate_of(&self) -> Option<&str> {
        let m = self.metadata.as_ref().filter(|m| m.is_duplicate)?;
        Some(m.original_doc_id.as_deref().unwrap_or(""))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct TrackStatus {
    #[serde(default)]
    pub documents: Vec<DocStatus>,
}

#[derive(Debug, Clone, Deserialize)]
struct DocsPage {
    #[serde(default)]
    documents: Vec<DocStatus>,
    pagination: Pagination,
}

#[derive(Debug, Clone, Deserialize)]
struct Pagination {
    #[serde(default)]
    has_next: bool,
}

/// A reference of `/query`: the file and, when asked, the chunk texts behind it.
#[derive(Debug, Clone, Deserialize)]
pub struct Reference {
    #[serde(default, deserialize_with = "lenient_string")]
    pub reference_id: String,
    #[serde(default)]
    pub file_path: String,
    #[serde(default)]
    pub content: Option<Vec<String>>,
}

/// `/query` (one JSON answer).
#[derive(Debug, Clone, Deserialize)]
pub struct Answer {
    #[serde(default)]
    pub response: String,
    #[serde(default)]
    pub references: Option<Vec<Reference>>,
    #[serde(default)]
    pub llm_generated: Option<bool>,
}

/// A chunk of `/query/data`.
#[derive(Debug, Clone, Deserialize)]
pub struct Chunk {
    #[serde(default, deserialize_with = "lenient_string")]
    pub reference_id: String,
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub file_path: String,
    #[serde(default)]
    pub chunk_id: Option<String>,
}

/// `/query/data`: retrieval only. Entities and relations are kept only as counts and
/// keywords: query bookkeeping, never evidence.
#[derive(Debug, Clone, Default)]
pub struct Retrieval {
    pub chunks: Vec<Chunk>,
    pub references: Vec<Reference>,
    pub entity_count: usize,
    pub relation_count: usize,
    pub keywords_high: Vec<String>,
    pub keywords_low: Vec<String>,
    /// `status: failure, failure_reason: no_results` (HTTP 200): nothing matched.
    pub no_results: bool,
}

#[derive(Deserialize)]
struct RetrievalWire {
    #[serde(default)]
    status: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    data: RetrievalData,
    #[serde(default)]
    metadata: RetrievalMeta,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RetrievalData {
    entities: Vec<serde::de::IgnoredAny>,
    relationships: Vec<serde::de::IgnoredAny>,
    chunks: Vec<Chunk>,
    references: Vec<Reference>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RetrievalMeta {
    keywords: Keywords,
    failure_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Keywords {
    high_level: Vec<String>,
    low_level: Vec<String>,
}

/// `reference_id` is a string upstream; accept a number too.
fn lenient_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => s,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// A LightRAG document id: `doc-` + md5 of the stored file name (`file_path`, the basename).
pub fn doc_id_of(file_source: &str) -> String {
    use md5::Digest as _;
    let name = file_source.rsplit('/').next().unwrap_or(file_source);
    format!("doc-{}", hex::encode(md5::Md5::digest(name.as_bytes())))
}

/// The outbound client for a timeout and retry count, built once per process (connection
/// pools are shared by every LightRAG endpoint; a client per request would pay its set-up
/// every query).
fn shared_http(timeout: Duration, retries: u32) -> Result<Client, RagError> {
    type Clients = Vec<((Duration, u32), Client)>;
    static CLIENTS: std::sync::OnceLock<std::sync::Mutex<Clients>> = std::sync::OnceLock::new();
    let mut clients = CLIENTS.get_or_init(Default::default).lock().expect("LightRAG clients");
    if let Some((_, c)) = clients.iter().find(|(k, _)| *k == (timeout, retries)) {
        return Ok(c.clone());
    }
    let c = Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .timeout(timeout)
        .retries(retries, Duration::from_millis(200))
        .build()
        .map_err(RagError::of_http)?;
    clients.push(((timeout, retries), c.clone()));
    Ok(c)
}

/// A health probe waits at most this long, once (status pages and "Test connection" answer
/// promptly while an endpoint is down).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// One LightRAG server.
#[derive(Clone, Debug)]
pub struct LightRag {
    base: reqwest::Url,
    key: Option<SecretString>,
    http: Client,
    /// The largest response body read (`MNOTE_RAG_MAX_BODY_BYTES`).
    max_body: usize,
}

/// The largest LightRAG response read unless [`LightRag::with_max_body`] says otherwise.
pub const DEFAULT_MAX_BODY: usize = 16 * 1024 * 1024;

impl LightRag {
    /// A client for `base_url` (`http(s)://host:port[/prefix]`), each request limited to
    /// `timeout`, transient failures retried twice with backoff.
    pub fn new(base_url: &str, key: Option<SecretString>, timeout: Duration) -> Result<Self, RagError> {
        let mut base = reqwest::Url::parse(base_url).map_err(|e| RagError::bad(format!("LightRAG URL: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(RagError::bad("LightRAG URL must be http(s)://host[:port][/path]"));
        }
        if !base.path().ends_with('/') {
            let p = format!("{}/", base.path());
            base.set_path(&p);
        }
        base.set_query(None);
        base.set_fragment(None);
        Ok(LightRag {
            base,
            key: key.filter(|k| !k.expose().is_empty()),
            http: shared_http(timeout, 2)?,
            max_body: DEFAULT_MAX_BODY,
        })
    }

    /// Refuse response bodies over `bytes` (`knowledge_rag_bad_response`).
    pub fn with_max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// The same endpoint for a quick probe: `PROBE_TIMEOUT` (or less), no retries.
    pub fn probe(&self, timeout: Duration) -> Result<Self, RagError> {
        Ok(LightRag { http: shared_http(timeout.min(PROBE_TIMEOUT), 0)?, ..self.clone() })
    }

    fn url(&self, path: &str) -> reqwest::Url {
        self.base.join(path).expect("a relative API path")
    }

    fn auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.key {
            Some(k) => req.header("X-API-Key", k.expose()),
            None => req,
        }
    }

    fn scrub(&self, e: RagError) -> RagError {
        match &self.key {
            Some(k) => RagError { message: k.scrub(&e.message), ..e },
            None => e,
        }
    }

    /// Send, then decode a success body as `T`; 409 is `Conflict`, other failures classified.
    async fn call<T: serde::de::DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T, RagError> {
        let result = async {
            let resp = self.http.send(self.auth(req)).await.map_err(RagError::of_http)?;
            let status = resp.status();
            let body = crate::platform::http::read_limited(resp, self.max_body).await.map_err(RagError::of_http)?;
            if !status.is_success() {
                let detail = error_detail(&body);
                if status.as_u16() == 409 {
                    return Err(RagError { kind: RagErrorKind::Conflict, message: format!("LightRAG: {detail}") });
                }
                let e = RagError::of_http(HttpError::status(status));
                return Err(RagError { message: format!("{}: {detail}", e.message), ..e });
            }
            serde_json::from_slice(&body).map_err(|e| RagError::bad(format!("LightRAG answered malformed JSON: {e}")))
        }
        .await;
        result.map_err(|e| self.scrub(e))
    }

    pub async fn health(&self) -> Result<Health, RagError> {
        let h: Health = self.call(self.http.get(self.url("health"))).await?;
        if h.status.is_empty() && h.core_version.is_none() {
            return Err(RagError::bad("LightRAG /health answered without status or version"));
        }
        Ok(h)
    }

    /// Whether the key is accepted (`/auth/verify` checks credentials on every call).
    pub async fn verify_key(&self) -> Result<(), RagError> {
        let _: serde_json::Value = self.call(self.http.get(self.url("auth/verify"))).await?;
        Ok(())
    }

    pub async fn insert_text(&self, file_source: &str, text: &str) -> Result<InsertResponse, RagError> {
        let body = serde_json::json!({ "text": text, "file_source": file_source });
        self.inserted(self.call(self.http.post(self.url("documents/text")).json(&body)).await?)
    }

    pub async fn upload(&self, file_name: &str, bytes: Vec<u8>) -> Result<InsertResponse, RagError> {
        let part = reqwest::multipart::Part::bytes(bytes).file_name(file_name.to_string());
        let form = reqwest::multipart::Form::new().part("file", part);
        // A multipart body is not cloneable: sent once (the sync retries the whole step).
        self.inserted(self.call(self.http.post(self.url("documents/upload")).multipart(form)).await?)
    }

    fn inserted(&self, r: InsertResponse) -> Result<InsertResponse, RagError> {
        match r.status.as_str() {
            "success" | "partial_success" if !r.track_id.is_empty() => Ok(r),
            _ => Err(RagError::bad(format!("LightRAG refused the document: {} {}", r.status, r.message))),
        }
    }

    pub async fn track_status(&self, track_id: &str) -> Result<TrackStatus, RagError> {
        let mut url = self.url("documents/track_status/");
        url.path_segments_mut().expect("http URL").pop_if_empty().push(track_id);
        self.call(self.http.get(url)).await
    }

    /// Every document the server holds (`/documents/paginated`, 200 per page).
    pub async fn all_documents(&self) -> Result<Vec<DocStatus>, RagError> {
        Ok(self.documents(10_000).await?.0)
    }

    /// The documents the server holds, at most `max_pages` pages of 200 (`/documents/paginated`,
    /// whose `page_size` is 10..=200): the documents, and whether that was all of them.
    pub async fn documents(&self, max_pages: usize) -> Result<(Vec<DocStatus>, bool), RagError> {
        let mut out = Vec::new();
        for page in 1..=max_pages {
            let body = serde_json::json!({ "page": page, "page_size": 200, "sort_field": "id", "sort_direction": "asc" });
            let p: DocsPage = self.call(self.http.post(self.url("documents/paginated")).json(&body)).await?;
            let more = p.pagination.has_next && !p.documents.is_empty();
            out.extend(p.documents);
            if !more {
                return Ok((out, true));
            }
        }
        Ok((out, false))
    }

    /// Start deleting documents (LightRAG deletes in the background; `busy` when another
    /// deletion runs, which the caller retries later).
    pub async fn delete_documents(&self, doc_ids: &[String]) -> Result<(), RagError> {
        #[derive(Deserialize)]
        struct Deleted {
            status: String,
            #[serde(default)]
            message: String,
        }
        let body = serde_json::json!({ "doc_ids": doc_ids, "delete_file": true, "delete_llm_cache": false });
        // One deletion at a time upstream: `busy` while another runs (≈ 1 s each).
        for attempt in 0..40u32 {
            let r: Deleted = self.call(self.http.delete(self.url("documents/delete_document")).json(&body)).await?;
            match r.status.as_str() {
                "deletion_started" | "success" => return Ok(()),
                "busy" => tokio::time::sleep(Duration::from_millis(100 + 50 * u64::from(attempt.min(8)))).await,
                _ => return Err(RagError::bad(format!("LightRAG did not delete: {} {}", r.status, r.message))),
            }
        }
        Err(RagError { kind: RagErrorKind::Unavailable, message: "LightRAG stayed busy deleting; retried later".into() })
    }

    /// `/query`: an answer with references (and their chunk texts when asked).
    pub async fn query(&self, q: &QueryRequest) -> Result<Answer, RagError> {
        self.call(self.http.post(self.url("query")).json(q)).await
    }

    /// `/query/stream`: the answer as LightRAG writes it, one NDJSON line at a time
    /// ([`QueryStream::next`]); a failure before the first line is an error here.
    pub async fn query_stream(&self, q: &QueryRequest) -> Result<QueryStream, RagError> {
        #[derive(Serialize)]
        struct Streamed<'a> {
            #[serde(flatten)]
            q: &'a QueryRequest,
            stream: bool,
        }
        let req = self.http.post(self.url("query/stream")).json(&Streamed { q, stream: true });
        let resp = self.http.send(self.auth(req)).await.map_err(|e| self.scrub(RagError::of_http(e)))?;
        let status = resp.status();
        if !status.is_success() {
            let body = crate::platform::http::read_limited(resp, 64 * 1024).await.unwrap_or_default();
            let e = RagError::of_http(HttpError::status(status));
            return Err(self.scrub(RagError { message: format!("{}: {}", e.message, error_detail(&body)), ..e }));
        }
        use futures_util::StreamExt;
        Ok(QueryStream {
            body: resp.bytes_stream().map(|r| r.map(|b| b.to_vec())).boxed(),
            buf: Vec::new(),
            read: 0,
            max_body: self.max_body,
            key: self.key.clone(),
            done: false,
        })
    }

    /// `/query/data`: retrieval without an answer.
    pub async fn query_data(&self, q: &QueryRequest) -> Result<Retrieval, RagError> {
        let w: RetrievalWire = self.call(self.http.post(self.url("query/data")).json(q)).await?;
        let no_results = w.metadata.failure_reason.as_deref() == Some("no_results");
        if w.status != "success" && !no_results {
            return Err(self.scrub(RagError::bad(format!("LightRAG query failed: {} {}", w.status, w.message))));
        }
        Ok(Retrieval {
            entity_count: w.data.entities.len(),
            relation_count: w.data.relationships.len(),
            chunks: w.data.chunks,
            references: w.data.references,
            keywords_high: w.metadata.keywords.high_level,
            keywords_low: w.metadata.keywords.low_level,
            no_results,
        })
    }
}

/// One line of `/query/stream`: the references (first), a piece of the answer, or an error.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamLine {
    #[serde(default)]
    pub references: Option<Vec<Reference>>,
    #[serde(default)]
    pub response: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

/// A `/query/stream` response being read (bounded by the client's body limit).
pub struct QueryStream {
    body: futures_util::stream::BoxStream<'static, Result<Vec<u8>, reqwest::Error>>,
    buf: Vec<u8>,
    read: usize,
    max_body: usize,
    key: Option<SecretString>,
    done: bool,
}

impl QueryStream {
    fn scrub(&self, e: RagError) -> RagError {
        match &self.key {
            Some(k) => RagError { message: k.scrub(&e.message), ..e },
            None => e,
        }
    }

    /// The next line (`None` at the end); blank lines are skipped, an `{"error": …}` line is
    /// an error.
    pub async fn next(&mut self) -> Option<Result<StreamLine, RagError>> {
        use futures_util::StreamExt;
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                if let Some(r) = self.parse(&line) {
                    return Some(r);
                }
                continue;
            }
            if self.done {
                let rest = std::mem::take(&mut self.buf);
                return self.parse(&rest);
            }
            match self.body.next().await {
                Some(Ok(bytes)) => {
                    self.read += bytes.len();
                    if self.read > self.max_body {
                        self.done = true;
                        self.buf.clear();
                        return Some(Err(RagError::bad("LightRAG's streamed answer is larger than allowed")));
                    }
                    self.buf.extend_from_slice(&bytes);
                }
                Some(Err(e)) => {
                    self.done = true;
                    self.buf.clear();
                    return Some(Err(self.scrub(RagError::of_http(HttpError::transport(e)))));
                }
                None => self.done = true,
            }
        }
    }

    fn parse(&self, line: &[u8]) -> Option<Result<StreamLine, RagError>> {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        Some(match serde_json::from_str::<StreamLine>(text) {
            Ok(StreamLine { error: Some(e), .. }) => {
                Err(self.scrub(RagError::bad(format!("LightRAG: {}", e.chars().take(300).collect::<String>()))))
            }
            Ok(l) => Ok(l),
            Err(e) => Err(RagError::bad(format!("LightRAG streamed malformed JSON: {e}"))),
        })
    }
}

/// FastAPI's `detail` (a string, or a validation list) or `message`, shortened.
fn error_detail(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
    let text = match v.get("detail").or_else(|| v.get("message")) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::from_utf8_lossy(body).into_owned(),
    };
    text.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_ids_are_md5_of_the_stored_basename() {
        // Observed on lightrag 1.5.7: md5("mnote-abc-handbook.md") is that upload's id.
        assert_eq!(doc_id_of("mnote-abc-handbook.md"), "doc-e45bb0c913e649f193f3188329c9f70e");
        assert_eq!(doc_id_of("dir/mnote-abc-handbook.md"), doc_id_of("mnote-abc-handbook.md"));
    }

    #[test]
    fn retrieval_parses_the_observed_shapes() {
        let ok = r#"{"status":"success","message":"ok","data":{"entities":[{"entity_name":"A"}],"relationships":[],
            "chunks":[{"reference_id":"1","content":"text","file_path":"a.md","chunk_id":"doc-x-chunk-000"}],
            "references":[{"reference_id":1,"file_path":"a.md"}]},
            "metadata":{"query_mode":"mix","keywords":{"high_level":["k"],"low_level":[]}}}"#;
        let w: RetrievalWire = serde_json::from_str(ok).unwrap();
        assert_eq!((w.data.entities.len(), w.data.chunks[0].chunk_id.as_deref()), (1, Some("doc-x-chunk-000")));
        assert_eq!(w.data.references[0].reference_id, "1");
        let none = r#"{"status":"failure","message":"No relevant document chunks found.","data":{},
            "metadata":{"failure_reason":"no_results"}}"#;
        let w: RetrievalWire = serde_json::from_str(none).unwrap();
        assert_eq!(w.metadata.failure_reason.as_deref(), Some("no_results"));
        assert!(w.data.chunks.is_empty());
    }

    #[test]
    fn codes_are_stable() {
        let e = |kind| RagError { kind, message: String::new() }.code();
        assert_eq!(e(RagErrorKind::Unavailable), "knowledge_rag_unavailable");
        assert_eq!(e(RagErrorKind::Timeout), "knowledge_rag_timeout");
        assert_eq!(e(RagErrorKind::BadResponse), "knowledge_rag_bad_response");
        assert_eq!(error_detail(br#"{"detail":"API Key required"}"#), "API Key required");
        assert_eq!(error_detail(b"<html>"), "<html>");
    }

    #[test]
    fn base_urls_are_normalised_and_checked() {
        let c = LightRag::new("http://127.0.0.1:9621/rag?x=1", None, Duration::from_secs(1)).unwrap();
        assert_eq!(c.url("query").as_str(), "http://127.0.0.1:9621/rag/query");
        assert!(LightRag::new("file:///etc/passwd", None, Duration::from_secs(1)).is_err());
        let mut t = c.url("documents/track_status/");
        t.path_segments_mut().unwrap().pop_if_empty().push("insert_1/../x");
        assert_eq!(t.as_str(), "http://127.0.0.1:9621/rag/documents/track_status/insert_1%2F..%2Fx");
    }
}

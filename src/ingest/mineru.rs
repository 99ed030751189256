//! MinerU parse provider: mineru.net "Precision Extract API v4", used for scanned PDFs and
//! images of tenants whose admin enabled external parsing upload (off by default).
//!
//! The API (https://mineru.net/apiManage/docs, "批量文件解析 / 文件批量上传解析" and
//! "批量获取任务结果"), for local files:
//! 1. `POST {base}/api/v4/file-urls/batch` with `Authorization: Bearer <token>` and
//!    `{"files": [{"name", "data_id", "is_ocr"}], "language", "enable_table", "enable_formula",
//!    "model_version"}` → `{"code": 0, "msg": "ok", "data": {"batch_id", "file_urls": [...]}}`;
//!    failures are `code != 0` (`-60005` too large, ...) or, from the gateway,
//!    `{"success": false, "msgCode": "A0202", "msg": ...}` (A0202 bad token, A0211 expired).
//! 2. `PUT` the raw bytes to the pre-signed `file_urls[i]`: no `Authorization`, no
//!    `Content-Type` ("上传文件时，无须设置 Content-Type 请求头"). MinerU submits the parse
//!    task by itself once the upload is complete.
//! 3. `GET {base}/api/v4/extract-results/batch/{batch_id}` (Bearer) until the file's entry in
//!    `data.extract_result[]` has `state` `done` (with `full_zip_url`) or `failed` (with
//!    `err_msg`); the other states are `waiting-file`, `pending`, `running`, `converting`.
//! 4. Download `full_zip_url` (a CDN URL: the token is never sent there) and read
//!    `<name>_content_list.json`: blocks in reading order, each with `type`
//!    (`text|image|table|equation`, VLM also `list|code|header|footer|…`), `page_idx`
//!    (0-based) and `bbox` `[x0, y0, x1, y1]`, top-left origin, **mapped to 0–1000 of the
//!    page** (MinerU docs, reference/output_files.md "Content List"); `text_level` ≥ 1 marks a
//!    heading.
//!
//! Boxes become our locators with the page sizes of the local probe (pdfium: PDF points
//! after `/Rotate`; images: pixels), so `bbox = v / 1000 × size`. `layout.json`'s
//! `pdf_info[].page_size` is the fallback for a page the probe does not know. Every block is
//! `approximate`: nothing local checks that MinerU's text is what lies under its box.
//!
//! The HTTP work runs in the worker task (it is network-bound, not CPU); the token stays in
//! this process and never appears in an error message, a log line or the artifact.

use std::{
    io::Read,
    path::Path,
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    ParseError,
    artifact::{self, Block, BlockType, Page, ParsedArtifact, Quality, SectionTree, SourceMap, TextBuilder},
};
use crate::config::{Config, SecretString};

pub const PROVIDER_ID: &str = "mineru";
pub const PROVIDER_VERSION: &str = "mnote-mineru/1";
/// Model MinerU runs (`pipeline` honours `is_ocr` and `language`).
const MODEL_VERSION: &str = "pipeline";
/// PaddleOCR language `ch`: Simplified Chinese and English.
const LANGUAGE: &str = "ch";
/// MinerU's own limits for one file (API docs: 200 MB, 600 pages).
const MAX_UPLOAD_BYTES: u64 = 200 * 1024 * 1024;
const MAX_PAGES: usize = 600;
/// Result archives and the JSON read from them are bounded (decompression bombs).
const MAX_ZIP_BYTES: u64 = 1024 * 1024 * 1024;
const MAX_JSON_BYTES: u64 = 256 * 1024 * 1024;
/// Longest upstream message kept in an error.
const MAX_MESSAGE_CHARS: usize = 300;

// ---- probe (runs in the parser child) -------------------------------------------------------

/// One page as the local probe sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbePage {
    /// Displayed size: PDF points after `/Rotate`, or image pixels.
    pub width: f64,
    pub height: f64,
    #[serde(default)]
    pub rotation: i32,
    /// Little or no text layer but images: the local parser would OCR it.
    pub needs_ocr: bool,
}

/// What routing needs to know about a PDF or image before choosing a provider.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    pub kind: String,
    /// Images: `png|jpeg|webp|tiff|bmp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    pub pages: Vec<ProbePage>,
}

impl Probe {
    /// Whether MinerU parses this file when the tenant allows external upload: a PDF with at
    /// least one scanned page (no text layer, only images), or a PNG/JPEG image (the image
    /// formats MinerU accepts; WebP, TIFF and BMP stay with local OCR).
    pub fn goes_to_mineru(&self) -> bool {
        match self.kind.as_str() {
            "pdf" => self.pages.iter().any(|p| p.needs_ocr),
            "image" => matches!(self.format.as_deref(), Some("png" | "jpeg")),
            _ => false,
        }
    }

    fn extension(&self) -> &'static str {
        match (self.kind.as_str(), self.format.as_deref()) {
            ("image", Some("png")) => "png",
            ("image", _) => "jpg",
            _ => "pdf",
        }
    }
}

/// The probe, in the (supervised) parser child: page sizes from pdfium, or the image header.
pub fn probe_in_process(path: &Path, kind: &str) -> Result<Probe, ParseError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match kind {
        "pdf" => {
            let bytes =
                std::fs::read(path).map_err(|e| ParseError::new("file_unreadable", format!("{}: {e}", path.display())))?;
            Ok(Probe { kind: kind.into(), format: None, pages: super::pdf::probe_pages(&bytes, &name)? })
        }
        "image" => {
            let unreadable = |e: &dyn std::fmt::Display| ParseError::new("image_unreadable", format!("{name} is not a readable image: {e}"));
            let reader = ::image::ImageReader::open(path)
                .map_err(|e| ParseError::new("file_unreadable", format!("{}: {e}", path.display())))?
                .with_guessed_format()
                .map_err(|e| unreadable(&e))?;
            let format = reader.format().ok_or_else(|| unreadable(&"unknown image format"))?;
            let (w, h) = reader.into_dimensions().map_err(|e| unreadable(&e))?;
            if w == 0 || h == 0 {
                return Err(unreadable(&"empty image"));
            }
            let format = format.extensions_str().first().copied().unwrap_or("image");
            let format = if format == "jpg" { "jpeg" } else { format };
            Ok(Probe {
                kind: kind.into(),
                format: Some(format.to_string()),
                pages: vec![ProbePage { width: w as f64, height: h as f64, rotation: 0, needs_ocr: true }],
            })
        }
        other => Err(ParseError::new("unsupported_kind", format!("no probe for {other} files"))),
    }
}

// ---- the HTTP flow (runs in the worker task) ------------------------------------------------

/// Parse `path` with MinerU. Network and server trouble is `mineru_unavailable` (retried
/// with backoff), a result that does not arrive in time `mineru_timeout` (retried), a
/// refused token `mineru_unauthorized`, everything else MinerU rejects `mineru_failed`.
pub async fn parse_file(cfg: &Config, token: &SecretString, path: &Path, probe: &Probe) -> Result<ParsedArtifact, ParseError> {
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| ParseError::new("file_unreadable", format!("{}: {e}", path.display())))?;
    if bytes.len() as u64 > MAX_UPLOAD_BYTES {
        return Err(ParseError::new(
            "mineru_failed",
            format!("{} bytes is above MinerU's upload limit of {MAX_UPLOAD_BYTES} bytes", bytes.len()),
        ));
    }
    if probe.pages.len() > MAX_PAGES {
        return Err(ParseError::new(
            "mineru_failed",
            format!("{} pages is above MinerU's limit of {MAX_PAGES} pages per file", probe.pages.len()),
        ));
    }
    let source_hash = artifact::source_hash(&bytes);
    let api = Api::new(cfg, token)?;
    let deadline = cfg.mineru_timeout;
    let run = async {
        let data_id = format!("mnote-{}", &source_hash["sha256:".len()..][..40]);
        let name = format!("{data_id}.{}", probe.extension());
        let (batch_id, upload_url) = api.submit(&name, &data_id).await?;
        api.upload(&upload_url, bytes).await?;
        let zip_url = api.wait(&batch_id, &name, &data_id).await?;
        api.download(&zip_url).await
    };
    let zip = match tokio::time::timeout(deadline, run).await {
        Ok(r) => r.map_err(|e| scrub(e, token))?,
        Err(_) => {
            return Err(ParseError::new("mineru_timeout", format!("MinerU gave no result within {}s", deadline.as_secs())));
        }
    };
    let probe = probe.clone();
    let art = tokio::task::spawn_blocking(move || {
        let result = read_result_zip(&zip)?;
        let version = match &result.engine_version {
            Some(v) => format!("{PROVIDER_VERSION} (MinerU API v4, {MODEL_VERSION}, {v})"),
            None => format!("{PROVIDER_VERSION} (MinerU API v4, {MODEL_VERSION})"),
        };
        let frames = frames_for(&probe, &result)?;
        content_list_to_artifact(&result.content_list, &frames, &probe.kind, source_hash, version)
    })
    .await
    .map_err(|e| ParseError::new("mineru_failed", format!("reading the MinerU result failed: {e}")))?
    .map_err(|e| scrub(e, token))?;
    art.validate().map_err(|e| ParseError::new("artifact_invalid", e))?;
    Ok(art)
}

/// Remove the token from a message, should an upstream server ever echo it.
fn scrub(mut e: ParseError, token: &SecretString) -> ParseError {
    let t = token.expose();
    if !t.is_empty() && e.message.contains(t) {
        e.message = e.message.replace(t, "[redacted]");
    }
    e
}

fn short(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() <= MAX_MESSAGE_CHARS {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(MAX_MESSAGE_CHARS).collect::<String>())
    }
}

struct Api<'a> {
    http: reqwest::Client,
    base: &'a str,
    token: &'a SecretString,
    poll: Duration,
}

/// The JSON envelope of every API answer: `{code, msg, data}`, or the gateway's
/// `{success: false, msgCode, msg}`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    msg: Option<String>,
    #[serde(default)]
    msg_code: Option<String>,
    #[serde(default)]
    success: Option<bool>,
    #[serde(default)]
    data: Option<Value>,
}

fn unavailable(what: &str, e: reqwest::Error) -> ParseError {
    // `without_url`: pre-signed URLs carry signatures; the API URL is not worth printing.
    ParseError::new("mineru_unavailable", format!("MinerU {what}: {}", e.without_url()))
}

/// Map a non-success answer to a code. Transient: HTTP 429/5xx, `-10001` (service error),
/// `-60001` (upload URL not generated), `-60007` (model service unavailable), `-60009`
/// (queue full), `-60020/-60021/-60022`. Refused token: HTTP 401/403, `A0202`, `A0211`.
fn api_error(what: &str, status: reqwest::StatusCode, env: &Envelope) -> ParseError {
    let code = env.msg_code.clone().or_else(|| env.code.as_ref().map(|c| c.to_string().trim_matches('"').to_string()));
    let msg = short(env.msg.as_deref().unwrap_or(""));
    let detail = match &code {
        Some(c) => format!("MinerU {what} failed (HTTP {}, code {c}): {msg}", status.as_u16()),
        None => format!("MinerU {what} failed (HTTP {}): {msg}", status.as_u16()),
    };
    let c = code.as_deref().unwrap_or("");
    if matches!(c, "A0202" | "A0211") || status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return ParseError::new("mineru_unauthorized", format!("{detail} (check MNOTE_MINERU_TOKEN)"));
    }
    let transient_code = matches!(c, "-10001" | "-60001" | "-60007" | "-60009" | "-60020" | "-60021" | "-60022");
    if transient_code || status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        return ParseError::new("mineru_unavailable", detail);
    }
    ParseError::new("mineru_failed", detail)
}

impl<'a> Api<'a> {
    fn new(cfg: &'a Config, token: &'a SecretString) -> Result<Self, ParseError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| ParseError::new("mineru_unavailable", format!("HTTP client: {}", e.without_url())))?;
        Ok(Api { http, base: cfg.mineru_url.trim_end_matches('/'), token, poll: cfg.mineru_poll_interval })
    }

    /// A call to the API (Bearer token); returns `data` of a `code == 0` answer.
    async fn call(&self, what: &str, req: reqwest::RequestBuilder) -> Result<Value, ParseError> {
        let resp = req.bearer_auth(self.token.expose()).send().await.map_err(|e| unavailable(what, e))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| unavailable(what, e))?;
        let env: Envelope = serde_json::from_slice(&body).unwrap_or_default();
        let ok_code = env.code.as_ref().is_some_and(|c| c.as_i64() == Some(0));
        if status.is_success() && ok_code && env.success != Some(false) {
            return env.data.ok_or_else(|| ParseError::new("mineru_failed", format!("MinerU {what}: the answer has no data")));
        }
        if status.is_success() && env.code.is_none() && env.msg_code.is_none() {
            return Err(ParseError::new("mineru_unavailable", format!("MinerU {what}: the answer is not MinerU JSON")));
        }
        Err(api_error(what, status, &env))
    }

    /// Ask for an upload URL for one file: `(batch_id, upload_url)`.
    async fn submit(&self, name: &str, data_id: &str) -> Result<(String, String), ParseError> {
        let body = json!({
            "files": [{ "name": name, "data_id": data_id, "is_ocr": true }],
            "language": LANGUAGE,
            "enable_table": true,
            "enable_formula": true,
            "model_version": MODEL_VERSION,
        });
        let url = format!("{}/api/v4/file-urls/batch", self.base);
        let data = self.call("upload request", self.http.post(url).json(&body)).await?;
        let batch = data["batch_id"].as_str().filter(|b| !b.is_empty());
        let upload = data["file_urls"].as_array().and_then(|u| u.first()).and_then(Value::as_str);
        match (batch, upload) {
            (Some(b), Some(u)) => Ok((b.to_string(), u.to_string())),
            _ => Err(ParseError::new("mineru_failed", "MinerU upload request: no batch_id or upload URL in the answer")),
        }
    }

    /// PUT the bytes to the pre-signed URL: no token, no Content-Type.
    async fn upload(&self, url: &str, bytes: Vec<u8>) -> Result<(), ParseError> {
        let resp = self.http.put(url).body(bytes).send().await.map_err(|e| unavailable("upload", e))?;
        let status = resp.status();
        if status.is_success() {
            Ok(())
        } else if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            Err(ParseError::new("mineru_unavailable", format!("MinerU upload failed (HTTP {})", status.as_u16())))
        } else {
            Err(ParseError::new("mineru_failed", format!("MinerU refused the upload (HTTP {})", status.as_u16())))
        }
    }

    /// Poll the batch until this file is `done` (its `full_zip_url`) or `failed`.
    async fn wait(&self, batch_id: &str, name: &str, data_id: &str) -> Result<String, ParseError> {
        let url = format!("{}/api/v4/extract-results/batch/{batch_id}", self.base);
        let started = Instant::now();
        loop {
            let data = self.call("result query", self.http.get(&url)).await?;
            let results = data["extract_result"].as_array().cloned().unwrap_or_default();
            let mine = results
                .iter()
                .find(|r| r["data_id"].as_str() == Some(data_id) || r["file_name"].as_str() == Some(name))
                .or(if results.len() == 1 { results.first() } else { None });
            if let Some(r) = mine {
                match r["state"].as_str().unwrap_or("") {
                    "done" => {
                        return r["full_zip_url"]
                            .as_str()
                            .filter(|u| !u.is_empty())
                            .map(str::to_string)
                            .ok_or_else(|| ParseError::new("mineru_failed", "MinerU finished without a result archive"));
                    }
                    "failed" => {
                        let why = short(r["err_msg"].as_str().unwrap_or("no reason given"));
                        return Err(ParseError::new("mineru_failed", format!("MinerU could not parse the file: {why}")));
                    }
                    // waiting-file, pending, running, converting (and anything newer): wait.
                    state => tracing::debug!(batch = batch_id, state, elapsed = ?started.elapsed(), "MinerU batch not done yet"),
                }
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// Download the result archive (a CDN URL: no token), bounded in size.
    async fn download(&self, url: &str) -> Result<Vec<u8>, ParseError> {
        let mut resp = self.http.get(url).send().await.map_err(|e| unavailable("result download", e))?;
        let status = resp.status();
        if !status.is_success() {
            let code = if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                "mineru_unavailable"
            } else {
                "mineru_failed"
            };
            return Err(ParseError::new(code, format!("MinerU result download failed (HTTP {})", status.as_u16())));
        }
        let too_big = || ParseError::new("mineru_failed", format!("the MinerU result archive is larger than {MAX_ZIP_BYTES} bytes"));
        if resp.content_length().is_some_and(|n| n > MAX_ZIP_BYTES) {
            return Err(too_big());
        }
        let mut out = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| unavailable("result download", e))? {
            if (out.len() + chunk.len()) as u64 > MAX_ZIP_BYTES {
                return Err(too_big());
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }
}

// ---- the result archive ---------------------------------------------------------------------

/// What the provider reads from the result zip.
#[derive(Debug, Default)]
pub struct ResultFiles {
    pub content_list: Vec<Value>,
    /// `layout.json` `pdf_info[].page_size` (`[width, height]`, PDF points), when present.
    pub layout_page_sizes: Vec<Option<[f64; 2]>>,
    /// `layout.json` `_version_name` as `mineru 2.6.4`.
    pub engine_version: Option<String>,
}

fn bad_result(msg: impl Into<String>) -> ParseError {
    ParseError::new("mineru_failed", format!("unusable MinerU result: {}", msg.into()))
}

fn read_entry(zip: &mut zip::ZipArchive<std::io::Cursor<&[u8]>>, index: usize) -> Result<Vec<u8>, ParseError> {
    let entry = zip.by_index(index).map_err(|e| bad_result(e.to_string()))?;
    if entry.size() > MAX_JSON_BYTES {
        return Err(bad_result(format!("a file of {} bytes is larger than {MAX_JSON_BYTES} bytes", entry.size())));
    }
    let mut out = Vec::new();
    entry.take(MAX_JSON_BYTES + 1).read_to_end(&mut out).map_err(|e| bad_result(e.to_string()))?;
    if out.len() as u64 > MAX_JSON_BYTES {
        return Err(bad_result("a JSON file inflates beyond the limit"));
    }
    Ok(out)
}

/// Find `*_content_list.json` (and `layout.json`) in the archive.
pub fn read_result_zip(bytes: &[u8]) -> Result<ResultFiles, ParseError> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| bad_result(format!("not a zip archive: {e}")))?;
    let names: Vec<String> = zip.file_names().filter_map(|n| n.ok().map(|n| n.into_owned())).collect();
    let base = |n: &str| n.rsplit('/').next().unwrap_or(n).to_string();
    let pick = |want: &dyn Fn(&str) -> bool| {
        let mut hits: Vec<&String> = names.iter().filter(|n| want(&base(n))).collect();
        hits.sort_by_key(|n| (n.matches('/').count(), n.len()));
        hits.first().map(|n| (*n).clone())
    };
    let content = pick(&|n| n.ends_with("_content_list.json"))
        .or_else(|| pick(&|n| n == "content_list.json"))
        .ok_or_else(|| bad_result("no *_content_list.json in the archive"))?;
    let index = zip.index_for_name(&content).ok_or_else(|| bad_result("content list vanished"))?;
    let raw = read_entry(&mut zip, index)?;
    let content_list: Vec<Value> =
        serde_json::from_slice(&raw).map_err(|e| bad_result(format!("{content} is not a JSON array: {e}")))?;
    let mut layout_page_sizes = Vec::new();
    let mut engine_version = None;
    if let Some(layout) = pick(&|n| n == "layout.json" || n.ends_with("_middle.json")) {
        if let Some(i) = zip.index_for_name(&layout) {
            if let Ok(v) = serde_json::from_slice::<Value>(&read_entry(&mut zip, i)?) {
                let tag = |k: &str| {
                    v[k].as_str()
                        .map(|s| s.chars().filter(|c| c.is_ascii_alphanumeric() || ".-_".contains(*c)).take(40).collect::<String>())
                        .filter(|s| !s.is_empty())
                };
                engine_version = tag("_version_name").map(|v| format!("mineru {v}"));
                layout_page_sizes = v["pdf_info"]
                    .as_array()
                    .map(|pages| {
                        pages
                            .iter()
                            .map(|p| match (p["page_size"][0].as_f64(), p["page_size"][1].as_f64()) {
                                (Some(w), Some(h)) if w > 0.0 && h > 0.0 && w.is_finite() && h.is_finite() => Some([w, h]),
                                _ => None,
                            })
                            .collect()
                    })
                    .unwrap_or_default();
            }
        }
    }
    Ok(ResultFiles { content_list, layout_page_sizes, engine_version })
}

// ---- content list → artifact ----------------------------------------------------------------

/// Size of one page in the locator unit (PDF points or image pixels).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame {
    pub width: f64,
    pub height: f64,
    pub rotation: i32,
}

/// Page frames: the probe's, extended with `layout.json` page sizes for pages the probe
/// does not know (PDFs only: an image is one page of its pixel size).
fn frames_for(probe: &Probe, result: &ResultFiles) -> Result<Vec<Frame>, ParseError> {
    let mut frames: Vec<Frame> = probe.pages.iter().map(|p| Frame { width: p.width, height: p.height, rotation: p.rotation }).collect();
    if probe.kind == "pdf" {
        for size in result.layout_page_sizes.iter().skip(frames.len()) {
            match size {
                Some([w, h]) => frames.push(Frame { width: *w, height: *h, rotation: 0 }),
                None => break,
            }
        }
    }
    Ok(frames)
}

fn page_idx(e: &Value) -> Option<usize> {
    e["page_idx"].as_u64().map(|p| p as usize)
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.trim().to_string()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).map(|s| s.trim().to_string()).collect(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect()
}

/// Plain text of an HTML table: cells separated by ` | `, rows by newlines, entities decoded.
pub fn html_table_text(html: &str) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut cell: Option<String> = None;
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        if let Some(c) = cell.as_mut() {
            c.push_str(&rest[..lt]);
        }
        let Some(gt) = rest[lt..].find('>') else { break };
        let tag = rest[lt + 1..lt + gt].trim().to_ascii_lowercase();
        let name: String = tag.trim_start_matches('/').chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        let closing = tag.starts_with('/');
        match (name.as_str(), closing) {
            ("tr", false) => rows.push(Vec::new()),
            ("td" | "th", false) => cell = Some(String::new()),
            ("td" | "th", true) => {
                if let Some(c) = cell.take() {
                    if rows.is_empty() {
                        rows.push(Vec::new());
                    }
                    let text = decode_entities(&c).split_whitespace().collect::<Vec<_>>().join(" ");
                    rows.last_mut().expect("a row").push(text);
                }
            }
            ("br", _) => {
                if let Some(c) = cell.as_mut() {
                    c.push(' ');
                }
            }
            _ => {}
        }
        rest = &rest[lt + gt + 1..];
    }
    if rows.is_empty() {
        // Not a table: strip nothing clever, keep the text.
        return decode_entities(html).trim().to_string();
    }
    rows.iter().filter(|r| r.iter().any(|c| !c.is_empty())).map(|r| r.join(" | ")).collect::<Vec<_>>().join("\n")
}

fn decode_entities(s: &str) -> String {
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// Block type, text and heading level of one content-list entry; `None` for entries that are
/// not evidence (page headers/footers/numbers, images without captions, empty text).
fn entry_content(e: &Value) -> Option<(BlockType, String, Option<u8>)> {
    let kind = e["type"].as_str().unwrap_or("");
    let text = || strings(&e["text"]).join("\n");
    let (block_type, body, level) = match kind {
        "header" | "footer" | "page_number" => return None,
        "text" | "title" => {
            let level = e["text_level"].as_u64().filter(|l| *l >= 1).or((kind == "title").then_some(1));
            let level = level.map(|l| l.min(6) as u8);
            (if level.is_some() { BlockType::Heading } else { BlockType::Paragraph }, text(), level)
        }
        "table" => {
            let mut parts = strings(&e["table_caption"]);
            if let Some(body) = e["table_body"].as_str() {
                parts.push(html_table_text(body));
            }
            parts.extend(strings(&e["table_footnote"]));
            (BlockType::Table, parts.into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>().join("\n"), None)
        }
        "image" | "chart" => {
            let mut parts = strings(&e["image_caption"]);
            parts.extend(strings(&e["image_footnote"]));
            (BlockType::Paragraph, parts.join("\n"), None)
        }
        "list" => (BlockType::ListItem, strings(&e["list_items"]).join("\n"), None),
        "code" => {
            let mut parts = strings(&e["code_caption"]);
            parts.extend(strings(&e["code_body"]));
            (BlockType::Code, parts.join("\n"), None)
        }
        // equation (LaTeX), ref_text, aside_text, page_footnote, phonetic, …
        _ => (BlockType::Paragraph, text(), None),
    };
    let body = body.trim().to_string();
    (!body.is_empty()).then_some((block_type, body, level))
}

/// `[x0, y0, x1, y1]` in 0–1000 of the page → the page's unit, top-left origin.
pub fn scale_bbox(raw: &Value, frame: &Frame) -> Option<[f64; 4]> {
    let v: Vec<f64> = raw.as_array()?.iter().filter_map(Value::as_f64).collect();
    if v.len() != 4 || v.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let sx = |x: f64| (x.clamp(0.0, 1000.0) * frame.width / 1000.0 * 100.0).round() / 100.0;
    let sy = |y: f64| (y.clamp(0.0, 1000.0) * frame.height / 1000.0 * 100.0).round() / 100.0;
    let (x0, x1) = (sx(v[0].min(v[2])), sx(v[0].max(v[2])));
    let (y0, y1) = (sy(v[1].min(v[3])), sy(v[1].max(v[3])));
    (x1 > x0 && y1 > y0).then_some([x0, y0, x1, y1])
}

/// Turn MinerU's content list into our artifact: one block per entry (in reading order,
/// grouped by page), headings (`text_level`) open sections, boxes scaled to `frames`.
pub fn content_list_to_artifact(
    content_list: &[Value],
    frames: &[Frame],
    kind: &str,
    source_hash: String,
    version: String,
) -> Result<ParsedArtifact, ParseError> {
    if frames.is_empty() {
        return Err(bad_result("the document has no pages"));
    }
    let mut entries: Vec<(usize, &Value)> = content_list.iter().filter_map(|e| page_idx(e).map(|p| (p, e))).collect();
    // Reading order within a page is kept; a stray entry of an earlier page moves back to it.
    entries.sort_by_key(|(p, _)| *p);
    if let Some((p, _)) = entries.iter().find(|(p, _)| *p >= frames.len()) {
        return Err(bad_result(format!("an entry is on page {} of a {}-page document", p + 1, frames.len())));
    }
    let mut pages: Vec<Page> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| Page { page: i as u32 + 1, width: f.width, height: f.height, rotation: f.rotation, ocr: true, blocks: Vec::new() })
        .collect();
    let mut text = TextBuilder::default();
    let mut tree = SectionTree::default();
    for (p, e) in entries {
        let Some((block_type, body, level)) = entry_content(e) else { continue };
        let number = p as u32 + 1;
        let page = &mut pages[p];
        let id = format!("p{number}_b{}", page.blocks.len() + 1);
        if let Some(level) = level {
            let title = body.split_whitespace().collect::<Vec<_>>().join(" ");
            let section = tree.open(title, level, |_| {});
            section.page_start = Some(number);
            section.page_end = Some(number);
        }
        let section_id = tree.add_block(&id);
        tree.for_each_open(|s| s.page_end = s.page_end.max(Some(number)));
        let bbox = scale_bbox(&e["bbox"], &frames[p]);
        page.blocks.push(Block {
            id,
            block_type,
            char_range: text.push_block(&body),
            text_fingerprint: artifact::fingerprint(&body),
            text: body,
            section_id,
            page: Some(number),
            quality: if bbox.is_some() { Quality::Approximate } else { Quality::PageOnly },
            bbox,
            line_range: None,
            para_id_start: None,
            para_id_end: None,
            paragraph_ordinal: None,
            confidence: None,
        });
    }
    Ok(ParsedArtifact {
        source_hash: source_hash.clone(),
        provider: PROVIDER_ID.to_string(),
        provider_version: version.clone(),
        text: text.finish(),
        source_map: SourceMap {
            schema: artifact::SOURCE_MAP_SCHEMA.to_string(),
            provider: PROVIDER_ID.to_string(),
            model_version: version,
            source_hash,
            resource_kind: kind.to_string(),
            page_count: Some(pages.len() as u32),
            pages,
            blocks: Vec::new(),
            sections: tree.sections,
            references: Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A4: Frame = Frame { width: 595.0, height: 842.0, rotation: 0 };

    fn convert(list: Value, frames: &[Frame], kind: &str) -> ParsedArtifact {
        let list: Vec<Value> = serde_json::from_value(list).unwrap();
        let a = content_list_to_artifact(&list, frames, kind, "sha256:00".into(), "v".into()).unwrap();
        a.validate().unwrap();
        a
    }

    #[test]
    fn entries_become_blocks_with_point_boxes_and_sections() {
        let a = convert(
            json!([
                {"type": "text", "text": "第一章 总则 ", "text_level": 1, "bbox": [100, 50, 900, 80], "page_idx": 0},
                {"type": "text", "text": "线程作用域可以借用栈上的数据。 ", "bbox": [100, 100, 900, 200], "page_idx": 0},
                {"type": "header", "text": "Journal 2025", "bbox": [0, 0, 1000, 20], "page_idx": 0},
                {"type": "text", "text": "1.1 Scope", "text_level": 2, "bbox": [100, 50, 500, 70], "page_idx": 1},
                {"type": "equation", "text": "$$\nE = mc^2\n$$", "text_format": "latex", "bbox": [300, 300, 700, 350], "page_idx": 1},
                {"type": "table", "table_caption": ["Table 1 Results"], "table_footnote": [],
                 "table_body": "<html><body><table><tr><td>Site</td><td>P &amp; T</td></tr><tr><td>Pine</td><td>5</td></tr></table></body></html>",
                 "bbox": [100, 400, 900, 600], "page_idx": 1},
                {"type": "image", "img_path": "images/x.jpg", "image_caption": [], "image_footnote": [], "bbox": [0, 0, 10, 10], "page_idx": 1},
                {"type": "text", "text": "   ", "bbox": [1, 1, 2, 2], "page_idx": 1}
            ]),
            &[A4, Frame { width: 842.0, height: 595.0, rotation: 90 }],
            "pdf",
        );
        assert_eq!(a.provider, "mineru");
        assert_eq!(a.source_map.page_count, Some(2));
        let p1 = &a.source_map.pages[0];
        assert_eq!((p1.page, p1.width, p1.height, p1.ocr), (1, 595.0, 842.0, true));
        let ids: Vec<&str> = a.all_blocks().map(|b| b.id.as_str()).collect();
        assert_eq!(ids, ["p1_b1", "p1_b2", "p2_b1", "p2_b2", "p2_b3"]);

        let h = &p1.blocks[0];
        assert_eq!((h.block_type, h.text.as_str()), (BlockType::Heading, "第一章 总则"));
        // 0–1000 of an A4 page → points: x 100 → 59.5, y 50 → 42.1.
        assert_eq!(h.bbox, Some([59.5, 42.1, 535.5, 67.36]));
        assert_eq!(h.quality, Quality::Approximate);
        let body = &p1.blocks[1];
        assert_eq!(body.block_type, BlockType::Paragraph);
        assert_eq!(body.bbox, Some([59.5, 84.2, 535.5, 168.4]));
        assert_eq!(body.section_id.as_deref(), Some("sec_1"));

        // Page 2 is landscape (rotated): the box scales with the displayed size.
        let p2 = &a.source_map.pages[1];
        assert_eq!((p2.width, p2.height, p2.rotation), (842.0, 595.0, 90));
        assert_eq!(p2.blocks[0].bbox, Some([84.2, 29.75, 421.0, 41.65]));
        assert_eq!(p2.blocks[1].text, "$$\nE = mc^2\n$$");
        let table = &p2.blocks[2];
        assert_eq!(table.block_type, BlockType::Table);
        assert_eq!(table.text, "Table 1 Results\nSite | P & T\nPine | 5");

        let s = &a.source_map.sections;
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].title.as_str(), s[0].level, s[0].page_start, s[0].page_end), ("第一章 总则", 1, Some(1), Some(2)));
        assert_eq!(s[1].path, vec!["第一章 总则".to_string(), "1.1 Scope".to_string()]);
        assert_eq!(s[1].parent_id.as_deref(), Some("sec_1"));
        assert_eq!(s[1].block_ids, vec!["p2_b1", "p2_b2", "p2_b3"]);
        assert!(a.text.contains("线程作用域可以借用栈上的数据。"));
        assert!(!a.text.contains("Journal 2025"), "page headers are not evidence");
    }

    #[test]
    fn image_boxes_are_pixels_and_bad_boxes_are_page_only() {
        let a = convert(
            json!([
                {"type": "text", "text": "Yuyuan Rd.", "bbox": [359, 516, 648, 634], "page_idx": 0},
                {"type": "text", "text": "no box", "page_idx": 0},
                {"type": "text", "text": "flat box", "bbox": [10, 10, 10, 50], "page_idx": 0},
                {"type": "text", "text": "no page"}
            ]),
            &[Frame { width: 640.0, height: 339.0, rotation: 0 }],
            "image",
        );
        let b = &a.source_map.pages[0].blocks;
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].bbox, Some([229.76, 174.92, 414.72, 214.93]));
        assert_eq!((b[1].bbox, b[1].quality), (None, Quality::PageOnly));
        assert_eq!((b[2].bbox, b[2].quality), (None, Quality::PageOnly));
        assert_eq!(a.source_map.resource_kind, "image");
    }

    #[test]
    fn entries_beyond_the_document_are_refused() {
        let list = vec![json!({"type": "text", "text": "x", "bbox": [0, 0, 1, 1], "page_idx": 3})];
        let e = content_list_to_artifact(&list, &[A4], "pdf", "sha256:00".into(), "v".into()).unwrap_err();
        assert_eq!(e.code, "mineru_failed");
    }

    #[test]
    fn vlm_lists_and_code_are_kept() {
        let a = convert(
            json!([
                {"type": "list", "sub_type": "text", "list_items": ["H.1 Introduction", "H.2 Example"], "bbox": [174, 155, 818, 333], "page_idx": 0},
                {"type": "code", "sub_type": "algorithm", "code_caption": ["Algorithm 1"], "code_body": "1: return x", "bbox": [510, 87, 881, 740], "page_idx": 0},
                {"type": "page_number", "text": "3", "bbox": [490, 950, 510, 960], "page_idx": 0}
            ]),
            &[A4],
            "pdf",
        );
        let b = &a.source_map.pages[0].blocks;
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].block_type, b[0].text.as_str()), (BlockType::ListItem, "H.1 Introduction\nH.2 Example"));
        assert_eq!((b[1].block_type, b[1].text.as_str()), (BlockType::Code, "Algorithm 1\n1: return x"));
    }

    fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        let mut w = zip::ZipWriter::new(&mut out);
        for (name, data) in files {
            w.start_file(*name, zip::write::SimpleFileOptions::default()).unwrap();
            std::io::Write::write_all(&mut w, data).unwrap();
        }
        w.finish().unwrap();
        out.into_inner()
    }

    #[test]
    fn the_result_zip_yields_the_content_list_and_layout_page_sizes() {
        let list = json!([{"type": "text", "text": "hello", "bbox": [0, 0, 500, 500], "page_idx": 1}]).to_string();
        let layout = json!({"pdf_info": [{"page_idx": 0, "page_size": [612.0, 792.0]}, {"page_idx": 1, "page_size": [595.0, 842.0]}],
                            "_backend": "pipeline"})
        .to_string();
        let bytes = zip_of(&[
            ("full.md", b"hello"),
            ("abc_content_list_v2.json", b"{}"),
            ("abc_content_list.json", list.as_bytes()),
            ("layout.json", layout.as_bytes()),
        ]);
        let r = read_result_zip(&bytes).unwrap();
        assert_eq!(r.content_list.len(), 1);
        assert_eq!(r.layout_page_sizes, vec![Some([612.0, 792.0]), Some([595.0, 842.0])]);
        assert_eq!(r.engine_version, None);
        // The probe knew one page; layout.json supplies the second.
        let probe = Probe {
            kind: "pdf".into(),
            format: None,
            pages: vec![ProbePage { width: 612.0, height: 792.0, rotation: 0, needs_ocr: true }],
        };
        let frames = frames_for(&probe, &r).unwrap();
        assert_eq!(frames.len(), 2);
        let a = content_list_to_artifact(&r.content_list, &frames, "pdf", "sha256:00".into(), "v".into()).unwrap();
        assert_eq!(a.source_map.pages[1].blocks[0].bbox, Some([0.0, 0.0, 297.5, 421.0]));

        assert_eq!(read_result_zip(b"not a zip").unwrap_err().code, "mineru_failed");
        assert_eq!(read_result_zip(&zip_of(&[("full.md", b"x")])).unwrap_err().code, "mineru_failed");
    }

    #[test]
    fn routing_takes_scans_and_png_jpeg_only() {
        let page = |needs_ocr| ProbePage { width: 1.0, height: 1.0, rotation: 0, needs_ocr };
        let pdf = |pages| Probe { kind: "pdf".into(), format: None, pages };
        assert!(!pdf(vec![page(false), page(false)]).goes_to_mineru());
        assert!(pdf(vec![page(false), page(true)]).goes_to_mineru());
        let img = |f: &str| Probe { kind: "image".into(), format: Some(f.into()), pages: vec![page(true)] };
        assert!(img("png").goes_to_mineru() && img("jpeg").goes_to_mineru());
        assert!(!img("webp").goes_to_mineru() && !img("tiff").goes_to_mineru());
        assert_eq!(img("jpeg").extension(), "jpg");
    }

    #[test]
    fn errors_never_carry_the_token() {
        let t = SecretString::new("sk-secret-123");
        let e = scrub(ParseError::new("mineru_failed", "bad token sk-secret-123 given"), &t);
        assert_eq!(e.message, "bad token [redacted] given");
        let env = Envelope { msg_code: Some("A0202".into()), msg: Some("user authenticate failed".into()), success: Some(false), ..Default::default() };
        assert_eq!(api_error("x", reqwest::StatusCode::OK, &env).code, "mineru_unauthorized");
        let env = Envelope { code: Some(json!(-60009)), msg: Some("queue full".into()), ..Default::default() };
        assert_eq!(api_error("x", reqwest::StatusCode::OK, &env).code, "mineru_unavailable");
        let env = Envelope { code: Some(json!(-60005)), msg: Some("too large".into()), ..Default::default() };
        let e = api_error("x", reqwest::StatusCode::OK, &env);
        assert_eq!((e.code, e.message.contains("-60005")), ("mineru_failed", true));
        assert_eq!(api_error("x", reqwest::StatusCode::BAD_GATEWAY, &Envelope::default()).code, "mineru_unavailable");
    }
}

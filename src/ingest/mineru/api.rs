//! The mineru.net API client: upload request, upload, polling, result download, error codes.

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use super::{LANGUAGE, MAX_MESSAGE_CHARS, MAX_ZIP_BYTES, MODEL_VERSION};
use crate::config::{Config, SecretString};
use crate::ingest::ParseError;
use crate::platform::http::{self, HttpError, HttpErrorKind};

/// Remove the token from a message, should an upstream server ever echo it.
pub(super) fn scrub(mut e: ParseError, token: &SecretString) -> ParseError {
    e.message = token.scrub(&e.message);
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

pub(super) struct Api<'a> {
    http: http::Client,
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

/// A transport failure. Its message has no URL: pre-signed URLs carry signatures, and the API
/// URL is not worth printing. (A slow answer is `mineru_unavailable` too: `mineru_timeout` is
/// the deadline of the whole parse.)
fn unavailable(what: &str, e: HttpError) -> ParseError {
    ParseError::new("mineru_unavailable", format!("MinerU {what}: {e}"))
}

/// The code of a non-success status without a MinerU error body.
fn status_code(status: reqwest::StatusCode) -> &'static str {
    match HttpErrorKind::of_status(status) {
        HttpErrorKind::Unavailable | HttpErrorKind::Timeout => "mineru_unavailable",
        HttpErrorKind::Unauthorized | HttpErrorKind::BadResponse => "mineru_failed",
    }
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
    let kind = HttpErrorKind::of_status(status);
    if matches!(c, "A0202" | "A0211") || kind == HttpErrorKind::Unauthorized {
        return ParseError::new("mineru_unauthorized", format!("{detail} (check MNOTE_MINERU_TOKEN)"));
    }
    let transient_code = matches!(c, "-10001" | "-60001" | "-60007" | "-60009" | "-60020" | "-60021" | "-60022");
    if transient_code || kind == HttpErrorKind::Unavailable {
        return ParseError::new("mineru_unavailable", detail);
    }
    ParseError::new("mineru_failed", detail)
}

impl<'a> Api<'a> {
    pub(super) fn new(cfg: &'a Config, token: &'a SecretString) -> Result<Self, ParseError> {
        let http = http::Client::builder()
            .connect_timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| ParseError::new("mineru_unavailable", format!("HTTP client: {e}")))?;
        Ok(Api { http, base: cfg.mineru_url.trim_end_matches('/'), token, poll: cfg.mineru_poll_interval })
    }

    /// A call to the API (Bearer token); returns `data` of a `code == 0` answer.
    async fn call(&self, what: &str, req: reqwest::RequestBuilder) -> Result<Value, ParseError> {
        let resp = self.http.send(req.bearer_auth(self.token.expose())).await.map_err(|e| unavailable(what, e))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| unavailable(what, HttpError::transport(e)))?;
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
    pub(super) async fn submit(&self, name: &str, data_id: &str) -> Result<(String, String), ParseError> {
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
    pub(super) async fn upload(&self, url: &str, bytes: Vec<u8>) -> Result<(), ParseError> {
        let resp = self.http.send(self.http.put(url).body(bytes)).await.map_err(|e| unavailable("upload", e))?;
        let status = resp.status();
        if status.is_success() {
            Ok(())
        } else if status_code(status) == "mineru_unavailable" {
            Err(ParseError::new("mineru_unavailable", format!("MinerU upload failed (HTTP {})", status.as_u16())))
        } else {
            Err(ParseError::new("mineru_failed", format!("MinerU refused the upload (HTTP {})", status.as_u16())))
        }
    }

    /// Poll the batch until this file is `done` (its `full_zip_url`) or `failed`.
    pub(super) async fn wait(&self, batch_id: &str, name: &str, data_id: &str) -> Result<String, ParseError> {
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
                    state => {
                        tracing::debug!(batch = batch_id, state, elapsed = ?started.elapsed(), "MinerU batch not done yet")
                    }
                }
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// Download the result archive (a CDN URL: no token), bounded in size.
    pub(super) async fn download(&self, url: &str) -> Result<Vec<u8>, ParseError> {
        let mut resp = self.http.send(self.http.get(url)).await.map_err(|e| unavailable("result download", e))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(ParseError::new(
                status_code(status),
                format!("MinerU result download failed (HTTP {})", status.as_u16()),
            ));
        }
        let too_big =
            || ParseError::new("mineru_failed", format!("the MinerU result archive is larger than {MAX_ZIP_BYTES} bytes"));
        if resp.content_length().is_some_and(|n| n > MAX_ZIP_BYTES) {
            return Err(too_big());
        }
        let mut out = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| unavailable("result download", HttpError::transport(e)))? {
            if (out.len() + chunk.len()) as u64 > MAX_ZIP_BYTES {
                return Err(too_big());
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_never_carry_the_token() {
        let t = SecretString::new("sk-secret-123");
        let e = scrub(ParseError::new("mineru_failed", "bad token sk-secret-123 given"), &t);
        assert_eq!(e.message, "bad token [redacted] given");
        let env = Envelope {
            msg_code: Some("A0202".into()),
            msg: Some("user authenticate failed".into()),
            success: Some(false),
            ..Default::default()
        };
        assert_eq!(api_error("x", reqwest::StatusCode::OK, &env).code, "mineru_unauthorized");
        let env = Envelope { code: Some(json!(-60009)), msg: Some("queue full".into()), ..Default::default() };
        assert_eq!(api_error("x", reqwest::StatusCode::OK, &env).code, "mineru_unavailable");
        let env = Envelope { code: Some(json!(-60005)), msg: Some("too large".into()), ..Default::default() };
        let e = api_error("x", reqwest::StatusCode::OK, &env);
        assert_eq!((e.code, e.message.contains("-60005")), ("mineru_failed", true));
        assert_eq!(api_error("x", reqwest::StatusCode::BAD_GATEWAY, &Envelope::default()).code, "mineru_unavailable");
    }
}

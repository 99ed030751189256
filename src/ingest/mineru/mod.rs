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

mod api;
mod content;
mod result;

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{ParseError, ParsedArtifact, artifact};
use crate::config::{Config, SecretString};
use api::{Api, scrub};
use content::frames_for;

pub use content::{Frame, content_list_to_artifact, html_table_text, scale_bbox};
pub use result::{ResultFiles, read_result_zip};

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
            let unreadable =
                |e: &dyn std::fmt::Display| ParseError::new("image_unreadable", format!("{name} is not a readable image: {e}"));
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
    let bytes =
        tokio::fs::read(path).await.map_err(|e| ParseError::new("file_unreadable", format!("{}: {e}", path.display())))?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

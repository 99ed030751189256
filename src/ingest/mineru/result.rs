//! The result archive: `*_content_list.json` and `layout.json`, read with size limits.

use std::io::Read;

use serde_json::Value;

use super::MAX_JSON_BYTES;
use crate::ingest::ParseError;

/// What the provider reads from the result zip.
#[derive(Debug, Default)]
pub struct ResultFiles {
    pub content_list: Vec<Value>,
    /// `layout.json` `pdf_info[].page_size` (`[width, height]`, PDF points), when present.
    pub layout_page_sizes: Vec<Option<[f64; 2]>>,
    /// `layout.json` `_version_name` as `mineru 2.6.4`.
    pub engine_version: Option<String>,
}

pub(super) fn bad_result(msg: impl Into<String>) -> ParseError {
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
    if let Some(layout) = pick(&|n| n == "layout.json" || n.ends_with("_middle.json"))
        && let Some(i) = zip.index_for_name(&layout)
        && let Ok(v) = serde_json::from_slice::<Value>(&read_entry(&mut zip, i)?)
    {
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
    Ok(ResultFiles { content_list, layout_page_sizes, engine_version })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ingest::mineru::content::frames_for;
    use crate::ingest::mineru::{Probe, ProbePage, content_list_to_artifact};

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
        let layout =
            json!({"pdf_info": [{"page_idx": 0, "page_size": [612.0, 792.0]}, {"page_idx": 1, "page_size": [595.0, 842.0]}],
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
}

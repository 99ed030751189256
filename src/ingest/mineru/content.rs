//! MinerU's content list → our artifact: block types and text, boxes scaled to page frames, sections.

use serde_json::Value;

use super::result::{ResultFiles, bad_result};
use super::{PROVIDER_ID, Probe};
use crate::ingest::ParseError;
use crate::ingest::artifact::{self, Block, BlockType, Page, ParsedArtifact, Quality, SectionTree, TextBuilder};

/// Size of one page in the locator unit (PDF points or image pixels).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame {
    pub width: f64,
    pub height: f64,
    pub rotation: i32,
}

/// Page frames: the probe's, extended with `layout.json` page sizes for pages the probe
/// does not know (PDFs only: an image is one page of its pixel size).
pub(super) fn frames_for(probe: &Probe, result: &ResultFiles) -> Result<Vec<Frame>, ParseError> {
    let mut frames: Vec<Frame> =
        probe.pages.iter().map(|p| Frame { width: p.width, height: p.height, rotation: p.rotation }).collect();
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
        .map(|(i, f)| Page {
            page: i as u32 + 1,
            width: f.width,
            height: f.height,
            rotation: f.rotation,
            ocr: true,
            blocks: Vec::new(),
        })
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
            section_id,
            page: Some(number),
            quality: if bbox.is_some() { Quality::Approximate } else { Quality::PageOnly },
            bbox,
            ..Block::flowing(body)
        });
    }
    Ok(ParsedArtifact::paged(PROVIDER_ID, version, source_hash, kind, text.finish(), pages, tree.sections))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
}

//! Whole-document tests: real PDFs from the provisioned test documents (`MNOTE_TESTDATA_DIR`) and
//! hand-written ones.

use std::time::Instant;

use super::geometry::union;
use super::quality::{bounded_chars, quality_char};
use super::*;

fn testdata(rel: &str) -> Vec<u8> {
    crate::ingest::testdata::read(rel)
}

fn parse_bytes(bytes: &[u8]) -> Result<ParsedArtifact, ParseError> {
    PdfProvider.parse(&ParseInput { bytes, file_name: "test.pdf", kind: "pdf" })
}

fn parse_file(rel: &str) -> ParsedArtifact {
    let started = Instant::now();
    let a = parse_bytes(&testdata(rel)).unwrap();
    let pages = a.source_map.pages.len();
    eprintln!("{rel}: {pages} pages in {:?} ({:?}/page)", started.elapsed(), started.elapsed() / pages as u32);
    a.validate().unwrap();
    assert_bboxes_on_page(&a);
    a
}

fn assert_bboxes_on_page(a: &ParsedArtifact) {
    for page in &a.source_map.pages {
        for b in &page.blocks {
            let [x0, y0, x1, y1] = b.bbox.unwrap();
            assert!(
                0.0 <= x0 && x0 <= x1 && x1 <= page.width && 0.0 <= y0 && y0 <= y1 && y1 <= page.height,
                "{} {:?} outside {}x{}",
                b.id,
                b.bbox,
                page.width,
                page.height
            );
            assert_eq!(b.page, Some(page.page));
            assert!(b.id.starts_with(&format!("p{}_b", page.page)));
        }
    }
}

fn block_index(a: &ParsedArtifact, needle: &str) -> usize {
    a.all_blocks().position(|b| b.text.contains(needle)).unwrap_or_else(|| panic!("no block contains {needle:?}"))
}

fn block<'a>(a: &'a ParsedArtifact, needle: &str) -> &'a Block {
    a.all_blocks().nth(block_index(a, needle)).unwrap()
}

pub(super) fn near(actual: f64, expected: f64, tolerance: f64) -> bool {
    (actual - expected).abs() <= tolerance
}

// ---- hand-written PDFs ------------------------------------------------------------------

struct TestPage<'a> {
    media: [f64; 4],
    crop: Option<[f64; 4]>,
    rotate: i32,
    content: &'a str,
}

impl<'a> TestPage<'a> {
    fn new(content: &'a str) -> Self {
        TestPage { media: [0.0, 0.0, 612.0, 792.0], crop: None, rotate: 0, content }
    }
}

/// (title, level, 0-based page, top y in user space)
type TestOutline<'a> = [(&'a str, u8, usize, f64)];

/// A minimal PDF with Helvetica text; optionally an outline or an `/Encrypt` dictionary whose
/// password hashes match no password.
fn build_pdf(pages: &[TestPage], outline: &TestOutline, encrypted: bool) -> Vec<u8> {
    let n = pages.len();
    let page_id = |i: usize| 4 + 2 * i;
    let outline_root = 4 + 2 * n;
    let item_id = |i: usize| outline_root + 1 + i;
    let mut objects: Vec<String> = Vec::new();
    let outlines = if outline.is_empty() { String::new() } else { format!(" /Outlines {outline_root} 0 R") };
    objects.push(format!("<< /Type /Catalog /Pages 2 0 R{outlines} >>"));
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", page_id(i))).collect();
    objects.push(format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")));
    objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into());
    let nums = |r: [f64; 4]| r.map(|v| v.to_string()).join(" ");
    for (i, p) in pages.iter().enumerate() {
        let crop = p.crop.map(|c| format!(" /CropBox [{}]", nums(c))).unwrap_or_default();
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [{}]{crop} /Rotate {} /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            nums(p.media),
            p.rotate,
            page_id(i) + 1
        ));
        objects.push(format!("<< /Length {} >>\nstream\n{}\nendstream", p.content.len() + 1, p.content));
    }
    if !outline.is_empty() {
        // Pre-order entries → parent/sibling/child links.
        let parent: Vec<Option<usize>> =
            (0..outline.len()).map(|i| (0..i).rev().find(|&j| outline[j].1 < outline[i].1)).collect();
        let children = |p: Option<usize>| -> Vec<usize> { (0..outline.len()).filter(|&i| parent[i] == p).collect() };
        let top = children(None);
        objects.push(format!(
            "<< /Type /Outlines /First {} 0 R /Last {} 0 R /Count {} >>",
            item_id(top[0]),
            item_id(*top.last().unwrap()),
            outline.len()
        ));
        for (i, (title, _, page, y)) in outline.iter().enumerate() {
            let siblings = children(parent[i]);
            let at = siblings.iter().position(|&s| s == i).unwrap();
            let mut links = format!(" /Parent {} 0 R", parent[i].map_or(outline_root, item_id));
            if at > 0 {
                links += &format!(" /Prev {} 0 R", item_id(siblings[at - 1]));
            }
            if at + 1 < siblings.len() {
                links += &format!(" /Next {} 0 R", item_id(siblings[at + 1]));
            }
            let kids = children(Some(i));
            if !kids.is_empty() {
                links += &format!(
                    " /First {} 0 R /Last {} 0 R /Count {}",
                    item_id(kids[0]),
                    item_id(*kids.last().unwrap()),
                    kids.len()
                );
            }
            objects.push(format!("<< /Title ({title}){links} /Dest [{} 0 R /XYZ 0 {y} 0] >>", page_id(*page)));
        }
    }
    let encrypt_id = objects.len() + 1;
    if encrypted {
        let hash = "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF";
        objects.push(format!("<< /Filter /Standard /V 1 /R 2 /O <{hash}> /U <{hash}> /P -44 >>"));
    }
    let mut out: Vec<u8> = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    let encrypt = if encrypted {
        format!(" /Encrypt {encrypt_id} 0 R /ID [<0123456789ABCDEF0123456789ABCDEF> <0123456789ABCDEF0123456789ABCDEF>]")
    } else {
        String::new()
    };
    out.extend_from_slice(
        format!("trailer\n<< /Size {} /Root 1 0 R{encrypt} >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).as_bytes(),
    );
    out
}

/// Bounding box of the dark pixels of page `index` rendered at 1 px per point.
fn ink_box(bytes: &[u8], index: i32) -> Rect {
    let engine = engine().unwrap();
    let doc = engine.pdfium.load_pdf_from_byte_slice(bytes, None).unwrap();
    let page = doc.pages().get(index).unwrap();
    let (w, h) = (page.width().value.round() as i32, page.height().value.round() as i32);
    let img = page.render_with_config(&PdfRenderConfig::new().set_target_size(w, h)).unwrap().as_image().unwrap().to_luma8();
    let mut r = [f64::MAX, f64::MAX, f64::MIN, f64::MIN];
    for (x, y, p) in img.enumerate_pixels() {
        if p[0] < 128 {
            r = union(r, [x as f64, y as f64, x as f64 + 1.0, y as f64 + 1.0]);
        }
    }
    r
}

// ---- real documents -------------------------------------------------------------------

#[test]
fn pdfium_is_available() {
    let version = PdfProvider.provider_version();
    assert!(engine().is_ok(), "libpdfium.so must be provisioned (./dev, or {PDFIUM_LIB_ENV})");
    assert!(version.contains("pdfium"), "{version}");
}

#[test]
fn journal_article_is_read_column_by_column() {
    // A two-column journal article (BMC Infectious Diseases 2011, 11:124, one of kreuzberg's test
    // PDFs): no registry package found ships the 3-column Federal Register issue used before.
    let a = parse_file("pdf/kz_bmc_infect_dis_2011_11_124.pdf");
    assert_eq!(a.source_map.page_count, Some(7));
    assert_eq!(a.source_map.resource_kind, "pdf");
    let p2 = &a.source_map.pages[1];
    assert!(near(p2.width, 595.3, 0.5) && near(p2.height, 793.7, 0.5), "{} x {}", p2.width, p2.height);
    assert_eq!((p2.rotation, p2.ocr), (0, false));

    // Column 1 of page 2: its first paragraph is one block, inside the left column.
    let first = block(&a, "mutations in this segment of NS5A");
    assert_eq!(first.page, Some(2));
    let [x0, y0, x1, y1] = first.bbox.unwrap();
    assert!(near(x0, 57.0, 1.5) && x1 < 298.0 && near(y0, 89.0, 3.0) && y1 < 440.0, "{:?}", first.bbox);
    assert_eq!(first.quality, Quality::Exact);

    // Reading order: column 1 top to bottom, then column 2, then the next page.
    let col1 = block_index(&a, "mutations in this segment of NS5A");
    let col1_end = block_index(&a, "The genotype 1 subtype was assessed");
    let col2 = block_index(&a, "subjected to nested PCR using the following primers");
    let col2_end = block_index(&a, "Table 2 shows the baseline status");
    let page3 = block_index(&a, "Virological and clinical characteristics");
    assert!(
        col1 < col1_end && col1_end < col2 && col2 < col2_end && col2_end < page3,
        "{col1} {col1_end} {col2} {col2_end} {page3}"
    );
    assert!(block(&a, "subjected to nested PCR").bbox.unwrap()[0] > 298.0);
    // Run-in headings (bold, at the body size) become sections holding their paragraph.
    let stats = a.source_map.sections.iter().find(|s| s.title == "Statistical analysis").expect("a section");
    assert_eq!((stats.level, stats.page_start), (3, Some(2)));
    assert!(stats.block_ids.contains(&block(&a, "Statistical significance was evaluated").id), "{stats:?}");

    // Quality: pdfium finds the block's own text under (nearly) every box.
    let total = a.all_blocks().count();
    let exact = a.all_blocks().filter(|b| b.quality == Quality::Exact).count();
    assert!(exact * 100 >= total * 97, "{exact}/{total} exact");
    // Running headers never become sections.
    assert!(a.source_map.sections.iter().all(|s| !s.title.starts_with("Alestig et al.")), "{:?}", a.source_map.sections);
}

/// The quality check's own selection of the chars under a box ([`bounded_chars`]) gives
/// what `FPDFText_GetBoundedText` gives, for every block box and many other boxes
/// (word-sized, overlapping, touching) on every page of the text PDFs.
#[test]
fn bounded_chars_match_pdfium() {
    let engine = engine().unwrap();
    let mut files: Vec<Vec<u8>> = [
        "pdf/kz_bmc_infect_dis_2011_11_124.pdf",
        "pdf/pypdf_GeoBase_NHNC1_Data_Model_UML_EN.pdf",
        "pdf/pypdf_multilang.pdf",
        "pdf_scanned/ocr_multipage.pdf",
    ]
    .iter()
    .map(|f| testdata(f))
    .collect();
    let overlapping = "BT /F1 12 Tf 72 700 Td (Horizontal line of text here) Tj ET \
                       BT /F1 12 Tf 0 1 -1 0 140 680 Tm (SIDEWAYS) Tj ET";
    files.push(build_pdf(&[TestPage::new(overlapping)], &[], false));
    let content = "BT /F1 20 Tf 60 200 Td (Hello rotated world) Tj ET";
    for rotate in [90, 270] {
        let page = TestPage { media: [0.0, 0.0, 400.0, 300.0], crop: Some([20.0, 10.0, 380.0, 290.0]), rotate, content };
        files.push(build_pdf(&[page], &[], false));
    }
    let (mut compared, mut non_empty) = (0, 0);
    for bytes in &files {
        let doc = engine.pdfium.load_pdf_from_byte_slice(bytes, None).unwrap();
        for page in doc.pages().iter() {
            let geom = page_geom(&page);
            let text = page.text().unwrap();
            let (glyphs, chars) = extract_chars(&text, &geom, true);
            let chars = chars.expect("every char box is readable");
            let mut boxes: Vec<Rect> = glyphs.iter().map(|g| g.bbox).collect();
            boxes.extend(layout(glyphs, &geom).iter().map(|p| p.bbox));
            boxes.push([0.0, 0.0, geom.width, geom.height]);
            boxes.push([0.0, 0.0, geom.width / 2.0, geom.height / 3.0]);
            for (i, bbox) in boxes.into_iter().enumerate() {
                // Insets like the quality check's, and none (boxes that touch).
                let inset = [0.0, 0.5, 0.05][i % 3];
                let r = [bbox[0] + inset, bbox[1] + inset, bbox[2] - inset, bbox[3] - inset];
                let (l, b, rt, t) = geom.rect_to_user(r);
                let rect = PdfRect::new_from_values(b as f32, l as f32, t as f32, rt as f32);
                let query = [rect.left().value, rect.bottom().value, rect.right().value, rect.top().value];
                let ours = bounded_chars(&chars, query).expect("test PDFs stay in the BMP");
                let theirs: Vec<char> = text.inside_rect(rect).chars().filter_map(quality_char).collect();
                assert_eq!(ours, theirs, "box {r:?}");
                compared += 1;
                non_empty += usize::from(!ours.is_empty());
            }
        }
    }
    assert!(compared > 10_000 && non_empty > 10_000, "{compared} boxes, {non_empty} with text");
}

#[test]
fn parsing_twice_gives_the_same_artifact() {
    let bytes = testdata("pdf/kz_bmc_infect_dis_2011_11_124.pdf");
    let first = parse_bytes(&bytes).unwrap();
    let second = parse_bytes(&bytes).unwrap();
    assert_eq!(first, second);
    assert_eq!(first.source_hash, artifact::source_hash(&bytes));
}

#[test]
fn multilingual_text_keeps_its_scripts() {
    let a = parse_file("pdf/pypdf_multilang.pdf");
    let texts: Vec<&str> = a.all_blocks().map(|b| b.text.as_str()).collect();
    assert!(texts.contains(&"Chinese (traditional): 你好世界"), "{texts:?}");
    assert!(texts.contains(&"Japanese: こんにちは世界"), "{texts:?}");
    assert!(texts.contains(&"Russian: Привет, мир"), "{texts:?}");
    // Arabic comes out in logical order, not in the visual left-to-right order.
    assert!(texts.contains(&"Arabic: مرحبا بالعالم"), "{texts:?}");
    assert!(a.all_blocks().all(|b| b.quality == Quality::Exact));
}

#[test]
fn heading_sizes_become_sections_without_an_outline() {
    let a = parse_file("pdf/pypdf_GeoBase_NHNC1_Data_Model_UML_EN.pdf");
    let sections = &a.source_map.sections;
    let find = |title: &str| sections.iter().find(|s| s.title == title).unwrap_or_else(|| panic!("no section {title}"));
    let overview = find("1 Overview");
    assert_eq!(overview.page_start, Some(6));
    let body = block(&a, "The data model can (and must) extend beyond");
    assert_eq!(body.section_id.as_deref(), Some(overview.id.as_str()));
    assert!(overview.block_ids.contains(&body.id));
    let heading = block(&a, "1 Overview");
    assert_eq!(heading.block_type, BlockType::Heading);
    assert_eq!(find("3 Model").level, overview.level);
    assert!(find("National Hydro Network, Canada, Level 1").level < overview.level);
    assert!(sections.iter().all(|s| s.title != "National Hydro Network, Data Model – Edition 1.0"), "running header");
}

#[test]
fn scanned_page_is_ocred_with_boxes_in_points() {
    let a = parse_file("pdf_scanned/ocr_c02-22.pdf");
    let page = &a.source_map.pages[0];
    assert!(page.ocr);
    assert_eq!((page.width, page.height), (384.0, 470.88));
    assert!(a.text.contains("went tip-toeing along a path amongst the trees"), "{}", a.text);
    assert!(a.text.contains("Miss Watson’s big"), "{}", a.text);
    assert!(a.provider_version.contains("tesseract "), "{}", a.provider_version);
    // The caption under the illustration, bottom left of the page.
    let caption = block(&a, "TIP-TOED ALONG");
    let [x0, y0, x1, y1] = caption.bbox.unwrap();
    assert!(x0 > 50.0 && x1 < 160.0 && y0 > 380.0 && y1 < 405.0, "{:?}", caption.bbox);
    let kitchen = block(&a, "passing by the kitchen");
    assert!(kitchen.bbox.unwrap()[0] > 150.0, "right of the illustration: {:?}", kitchen.bbox);
    assert!(a.all_blocks().all(|b| b.confidence.is_some()));
    assert!(a.all_blocks().any(|b| b.quality == Quality::Exact));
}

#[test]
fn mixed_scanned_document_uses_its_outline() {
    let a = parse_file("pdf_scanned/ocr_multipage.pdf");
    let pages = &a.source_map.pages;
    assert_eq!(pages.iter().map(|p| p.ocr).collect::<Vec<_>>(), [true, true, true, false, true, true]);
    // The 30-inch page is read at a resolution where its large type is legible.
    assert!(a.text.contains("9000x9000 pixels at") && a.text.contains("megapixels"), "{}", a.text);
    assert!(pages[5].blocks.iter().any(|b| b.text.contains("It was the year of Our Lord one thousand")));
    let s = &a.source_map.sections;
    let summary: Vec<(&str, u8, Option<&str>, Option<u32>)> =
        s.iter().map(|s| (s.title.as_str(), s.level, s.parent_id.as_deref(), s.page_start)).collect();
    assert_eq!(
        summary,
        [
            ("Chapter II", 1, None, Some(1)),
            ("Huge Page", 1, None, Some(2)),
            ("Wikipedia image", 1, None, Some(3)),
            ("Indented image", 2, Some("sec_3"), Some(4)),
        ]
    );
    assert_eq!(s[3].path, ["Wikipedia image", "Indented image"]);
    assert_eq!(s[2].page_end, Some(6));
    for b in &pages[0].blocks {
        assert_eq!(b.section_id.as_deref(), Some("sec_1"));
    }
    assert!(pages[5].blocks.iter().all(|b| b.section_id.as_deref() == Some("sec_4")));
}

#[test]
fn rotated_pages_map_boxes_to_the_displayed_page() {
    let content = "BT /F1 20 Tf 60 200 Td (Hello rotated world) Tj ET";
    for rotate in [0, 90, 180, 270] {
        let page = TestPage { media: [0.0, 0.0, 400.0, 300.0], crop: Some([20.0, 10.0, 380.0, 290.0]), rotate, content };
        let bytes = build_pdf(&[page], &[], false);
        let a = parse_bytes(&bytes).unwrap();
        a.validate().unwrap();
        assert_bboxes_on_page(&a);
        let p = &a.source_map.pages[0];
        let (w, h) = if rotate % 180 == 0 { (360.0, 280.0) } else { (280.0, 360.0) };
        assert_eq!((p.width, p.height, p.rotation), (w, h, rotate));
        assert_eq!(p.blocks.len(), 1);
        let b = &p.blocks[0];
        assert_eq!(b.text, "Hello rotated world");
        assert_eq!(b.quality, Quality::Exact);
        // What pdfium draws lies inside the box, and the box fits the drawing.
        let bbox = b.bbox.unwrap();
        let ink = ink_box(&bytes, 0);
        for i in 0..4 {
            let inside = if i < 2 { ink[i] >= bbox[i] - 1.5 } else { ink[i] <= bbox[i] + 1.5 };
            assert!(inside, "rotate {rotate}: ink {ink:?} outside {bbox:?}");
        }
        let centre = |r: Rect| ((r[0] + r[2]) / 2.0, (r[1] + r[3]) / 2.0);
        let (c, k) = (centre(bbox), centre(ink));
        assert!(near(c.0, k.0, 4.0) && near(c.1, k.1, 4.0), "rotate {rotate}: {bbox:?} vs ink {ink:?}");
    }
    // Unrotated: user (60, 200) with the crop box top at 290 → x 40, baseline 90 from the top;
    // the loose box spans Helvetica's font box (ascent 0.931 em, descent 0.225 em).
    let page = TestPage { media: [0.0, 0.0, 400.0, 300.0], crop: Some([20.0, 10.0, 380.0, 290.0]), rotate: 0, content };
    let a = parse_bytes(&build_pdf(&[page], &[], false)).unwrap();
    let [x0, y0, _, y1] = a.source_map.pages[0].blocks[0].bbox.unwrap();
    assert!(near(x0, 40.0, 0.5) && near(y0, 90.0 - 18.6, 0.5) && near(y1, 90.0 + 4.5, 0.5), "{x0} {y0} {y1}");
}

#[test]
fn text_drawn_against_the_page_rotation_reads_upright() {
    // A landscape page stored as portrait + /Rotate 90, its text turned back by the matrix.
    let content = "BT /F1 14 Tf 0 1 -1 0 300 72 Tm (Upright on a landscape page) Tj ET";
    let page = TestPage { media: [0.0, 0.0, 612.0, 792.0], crop: None, rotate: 90, content };
    let bytes = build_pdf(&[page], &[], false);
    let a = parse_bytes(&bytes).unwrap();
    let b = &a.source_map.pages[0].blocks[0];
    assert_eq!(b.text, "Upright on a landscape page");
    let [x0, y0, x1, y1] = b.bbox.unwrap();
    assert!(x1 - x0 > 5.0 * (y1 - y0), "a wide, short line: {:?}", b.bbox);
    let ink = ink_box(&bytes, 0);
    assert!(ink[0] >= x0 - 1.5 && ink[2] <= x1 + 1.5 && ink[1] >= y0 - 1.5 && ink[3] <= y1 + 1.5, "{ink:?} {:?}", b.bbox);
}

#[test]
fn overlapping_text_is_approximate() {
    // A sideways word drawn across a horizontal line: pdfium finds the other
    // direction's characters inside each box.
    let content = "BT /F1 12 Tf 72 700 Td (Horizontal line of text here) Tj ET \
                   BT /F1 12 Tf 0 1 -1 0 140 680 Tm (SIDEWAYS) Tj ET";
    let a = parse_bytes(&build_pdf(&[TestPage::new(content)], &[], false)).unwrap();
    a.validate().unwrap();
    let texts: Vec<(&str, Quality)> = a.all_blocks().map(|b| (b.text.as_str(), b.quality)).collect();
    assert_eq!(texts, [("Horizontal line of text here", Quality::Approximate), ("SIDEWAYS", Quality::Approximate)]);
}

#[test]
fn outline_sections_start_at_their_titles() {
    let p1 = "BT /F1 18 Tf 72 720 Td (Introduction) Tj ET BT /F1 10 Tf 72 690 Td (Opening words of the report.) Tj ET \
              BT /F1 14 Tf 72 600 Td (Scope) Tj ET BT /F1 10 Tf 72 580 Td (What the report covers.) Tj ET";
    let p2 = "BT /F1 10 Tf 72 720 Td (Still in scope.) Tj ET BT /F1 18 Tf 72 500 Td (Results) Tj ET \
              BT /F1 10 Tf 72 480 Td (Numbers follow.) Tj ET";
    let outline = [("Introduction", 1, 0, 740.0), ("Scope", 2, 0, 620.0), ("Results", 1, 1, 520.0)];
    let a = parse_bytes(&build_pdf(&[TestPage::new(p1), TestPage::new(p2)], &outline, false)).unwrap();
    a.validate().unwrap();
    let s = &a.source_map.sections;
    assert_eq!(s.iter().map(|s| (s.id.as_str(), s.level)).collect::<Vec<_>>(), [("sec_1", 1), ("sec_2", 2), ("sec_3", 1)]);
    assert_eq!(s[1].parent_id.as_deref(), Some("sec_1"));
    assert_eq!(s[0].block_ids, ["p1_b1", "p1_b2"]);
    assert_eq!(s[1].block_ids, ["p1_b3", "p1_b4", "p2_b1"]);
    assert_eq!(s[2].block_ids, ["p2_b2", "p2_b3"]);
    assert_eq!((s[0].page_start, s[0].page_end), (Some(1), Some(2)), "the subtree reaches page 2");
    assert_eq!((s[1].page_start, s[1].page_end), (Some(1), Some(2)));
    assert_eq!(block(&a, "Scope").block_type, BlockType::Heading);
    assert_eq!(block(&a, "Still in scope.").section_id.as_deref(), Some("sec_2"));
}

/// Issue 26: a running header (and footer) in a larger type than the body, on every page of a
/// two-page document, is neither a heading nor a section, so no citation shows it as the
/// passage's breadcrumb; the document's real headings still are.
#[test]
fn running_headers_and_footers_are_no_sections() {
    let body = |y: u32, words: &str| {
        (0..4)
            .map(|i| {
                format!("BT /F1 10 Tf 72 {} Td ({words} line {i} of the body text that fills the page width.) Tj ET ", y - 14 * i)
            })
            .collect::<String>()
    };
    let furniture = |page: u32| {
        format!(
            "BT /F1 14 Tf 72 770 Td (GeoBase Data Model Edition 1.0) Tj ET \
             BT /F1 12 Tf 72 30 Td (Natural Resources Canada page {page}) Tj ET "
        )
    };
    let p1 = format!("{}BT /F1 18 Tf 72 700 Td (Overview) Tj ET {}", furniture(1), body(670, "The overview explains the model"));
    let p2 = format!("{}BT /F1 18 Tf 72 700 Td (Results) Tj ET {}", furniture(2), body(670, "The results follow here"));
    let a = parse_bytes(&build_pdf(&[TestPage::new(&p1), TestPage::new(&p2)], &[], false)).unwrap();
    a.validate().unwrap();
    let titles: Vec<&str> = a.source_map.sections.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(titles, ["Overview", "Results"], "the running header and footer are no sections");
    assert_eq!(block(&a, "GeoBase Data Model").block_type, BlockType::Paragraph);
    assert_eq!(block(&a, "Natural Resources Canada page 2").block_type, BlockType::Paragraph);
    let results = a.source_map.sections.iter().find(|s| s.title == "Results").unwrap();
    assert_eq!(block(&a, "The results follow here line 0").section_id.as_deref(), Some(results.id.as_str()));
    // The same header in the middle of the page on two pages is text, not furniture.
    let mid = |t: &str| format!("BT /F1 18 Tf 72 400 Td ({t}) Tj ET {}", body(370, "Plain words"));
    let a = parse_bytes(&build_pdf(&[TestPage::new(&mid("Method")), TestPage::new(&mid("Method"))], &[], false)).unwrap();
    assert!(a.source_map.sections.iter().any(|s| s.title == "Method"), "{:?}", a.source_map.sections);
}

#[test]
fn broken_input_is_malformed() {
    assert_eq!(parse_bytes(b"").unwrap_err().code, "pdf_malformed");
    let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    assert_eq!(parse_bytes(&noise).unwrap_err().code, "pdf_malformed");
    let mut truncated = testdata("pdf/pypdf_multilang.pdf");
    truncated.truncate(600);
    assert_eq!(parse_bytes(&truncated).unwrap_err().code, "pdf_malformed");
}

#[test]
fn password_protected_pdf_is_encrypted() {
    let bytes = build_pdf(&[TestPage::new("BT /F1 12 Tf 72 700 Td (secret) Tj ET")], &[], true);
    let err = parse_bytes(&bytes).unwrap_err();
    assert_eq!(err.code, "pdf_encrypted", "{err}");
    // The same file without the /Encrypt dictionary parses.
    let plain = build_pdf(&[TestPage::new("BT /F1 12 Tf 72 700 Td (secret) Tj ET")], &[], false);
    assert_eq!(parse_bytes(&plain).unwrap().text, "secret");
}

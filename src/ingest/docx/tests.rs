//! Whole-document tests: generated DOCX packages, hostile inputs and the shared test files.

use super::*;
use std::io::Write;
use zip::write::SimpleFileOptions;

const STYLES: &str = r#"<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">
<w:docDefaults><w:rPrDefault><w:rPr><w:sz w:val="24"/></w:rPr></w:rPrDefault></w:docDefaults>
<w:style w:type="paragraph" w:default="1" w:styleId="a"><w:name w:val="Normal"/></w:style>
<w:style w:type="paragraph" w:styleId="1"><w:name w:val="heading 1"/><w:basedOn w:val="a"/><w:rPr><w:b/></w:rPr></w:style>
<w:style w:type="paragraph" w:styleId="2"><w:name w:val="heading 2"/><w:basedOn w:val="a"/></w:style>
<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style></w:styles>"#;
const RELS: &str = r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink" Target="https://example.com/docs" TargetMode="External"/></Relationships>"#;

fn zip_of(files: &[(&str, &str)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, body) in files {
        w.start_file(*name, SimpleFileOptions::default()).unwrap();
        w.write_all(body.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn docx(body: &str, styles: Option<&str>) -> Vec<u8> {
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{NS_W}" xmlns:w14="{NS_W14}" xmlns:r="{NS_R}" xmlns:mc="{NS_MC}"><w:body>{body}<w:sectPr/></w:body></w:document>"#
    );
    let mut files = vec![
        ("[Content_Types].xml", "<Types/>"),
        ("word/document.xml", document.as_str()),
        ("word/_rels/document.xml.rels", RELS),
    ];
    files.extend(styles.map(|s| ("word/styles.xml", s)));
    zip_of(&files)
}

fn parse(bytes: &[u8]) -> Result<ParsedArtifact, ParseError> {
    DocxProvider.parse(&ParseInput { bytes, file_name: "t.docx", kind: "docx" })
}

fn para(id: &str, inner: &str) -> String {
    format!(r#"<w:p w14:paraId="{id}">{inner}</w:p>"#)
}

fn run(text: &str) -> String {
    format!("<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r>")
}

fn word_like_body() -> String {
    let style = |s: &str| format!(r#"<w:pPr><w:pStyle w:val="{s}"/></w:pPr>"#);
    let cell = |ps: &[String]| format!("<w:tc>{}</w:tc>", ps.concat());
    [
        para("10000001", &(style("Title") + &run("Rust 并发指南"))),
        para("10000002", ""),
        para("10000003", &(style("1") + &run("Threads"))),
        para("10000004", &run("使用线程作用域可以借用栈上的数据。")),
        para("10000005", &(style("2") + &run("Scoped threads"))),
        para("10000006", "<w:r><w:t>Line one</w:t><w:br/><w:t>line two</w:t><w:tab/><w:t>tabbed</w:t></w:r>"),
        para(
            "10000007",
            &(run("Keep ")
                + r#"<w:del w:id="1" w:author="a"><w:r><w:delText>removed </w:delText><w:br/></w:r></w:del><w:ins w:id="2" w:author="a">"#
                + &run("added")
                + r#"</w:ins><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGE </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r>"#
                + &run(" 7")
                + r#"<w:r><w:fldChar w:fldCharType="end"/></w:r>"#),
        ),
        para("10000008", r#"<w:r><w:rPr><w:b/></w:rPr><w:t>第一章 总则</w:t></w:r>"#),
        para("10000009", &(r#"<w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="3"/></w:numPr></w:pPr>"#.to_string() + &run("first item &amp; more"))),
        format!(
            "<w:tbl><w:tr>{}{}</w:tr><w:tr>{}{}</w:tr></w:tbl>",
            cell(&[para("1000000A", &run("Name"))]),
            cell(&[para("1000000B", &run("Value"))]),
            cell(&[para("1000000C", &run("a")), para("1000000D", &run("b"))]),
            cell(&[para("1000000E", &format!(r#"<w:hyperlink r:id="rId9">{}</w:hyperlink>"#, run("docs")))]),
        ),
        para("1000000F", &run("一、适用范围")),
        format!("<w:p>{}</w:p>", run("1. Install the crate")),
    ]
    .concat()
}

#[test]
fn word_document_blocks_locators_and_sections() {
    let bytes = docx(&word_like_body(), Some(STYLES));
    let a = parse(&bytes).unwrap();
    a.validate().unwrap();
    assert_eq!(a, parse(&bytes).unwrap(), "deterministic");
    assert_eq!(a.source_map.resource_kind, "docx");
    assert_eq!(a.source_hash, artifact::source_hash(&bytes));
    use BlockType::*;
    // (text, type, paraIdStart..paraIdEnd, paragraphOrdinal, section)
    let expect = [
        ("Rust 并发指南", Heading, "10000001..10000001", 1, "sec_1"),
        ("Threads", Heading, "10000003..10000003", 3, "sec_2"),
        ("使用线程作用域可以借用栈上的数据。", Paragraph, "10000004..10000004", 4, "sec_2"),
        ("Scoped threads", Heading, "10000005..10000005", 5, "sec_3"),
        ("Line one\nline two\ttabbed", Paragraph, "10000006..10000006", 6, "sec_3"),
        ("Keep added 7", Paragraph, "10000007..10000007", 7, "sec_3"),
        ("第一章 总则", Heading, "10000008..10000008", 8, "sec_4"),
        ("first item & more", ListItem, "10000009..10000009", 9, "sec_4"),
        ("Name | Value", TableRow, "1000000A..1000000B", 10, "sec_4"),
        ("a\nb | docs", TableRow, "1000000C..1000000E", 12, "sec_4"),
        ("一、适用范围", Heading, "1000000F..1000000F", 15, "sec_5"),
        ("1. Install the crate", Paragraph, "..", 16, "sec_5"),
    ];
    assert_eq!(a.source_map.blocks.len(), expect.len());
    for (i, (b, e)) in a.source_map.blocks.iter().zip(expect).enumerate() {
        let ids = format!("{}..{}", b.para_id_start.as_deref().unwrap_or(""), b.para_id_end.as_deref().unwrap_or(""));
        assert_eq!((b.id.clone(), b.text.as_str(), b.block_type, ids.as_str()), (format!("b{}", i + 1), e.0, e.1, e.2));
        assert_eq!((b.paragraph_ordinal, b.section_id.as_deref()), (Some(e.3), Some(e.4)), "{}", b.text);
        assert_eq!((b.text_fingerprint.clone(), b.quality), (artifact::fingerprint(e.0), artifact::Quality::Exact));
    }
    let secs: Vec<_> = a
        .source_map
        .sections
        .iter()
        .map(|s| (s.title.as_str(), s.level, s.parent_id.as_deref(), s.path.join(" / "), s.block_ids.join(",")))
        .collect();
    assert_eq!(
        secs,
        [
            ("Rust 并发指南", 1, None, "Rust 并发指南".into(), "b1".into()),
            ("Threads", 1, None, "Threads".into(), "b2,b3".into()),
            ("Scoped threads", 2, Some("sec_2"), "Threads / Scoped threads".into(), "b4,b5,b6".into()),
            ("第一章 总则", 1, None, "第一章 总则".into(), "b7,b8,b9,b10".into()),
            ("一、适用范围", 2, Some("sec_4"), "第一章 总则 / 一、适用范围".into(), "b11,b12".into()),
        ]
    );
    let r = &a.source_map.references;
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].kind, r[0].source_block_id.as_str(), r[0].target.as_str()),
        (ReferenceKind::Link, "b10", "https://example.com/docs")
    );
    assert_eq!(r[0].label.as_deref(), Some("docs"));
}

#[test]
fn without_styles_xml_ids_still_resolve_and_text_boxes_are_counted_not_extracted() {
    let textbox = r#"<w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><w:txbxContent><w:p><w:r><w:t>box</w:t></w:r></w:p></w:txbxContent></w:drawing></mc:Choice><mc:Fallback><w:pict><w:txbxContent><w:p><w:r><w:t>box</w:t></w:r></w:p></w:txbxContent></w:pict></mc:Fallback></mc:AlternateContent></w:r>"#;
    let body = format!(
        r#"<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr>{}</w:p><w:p>{}{textbox}</w:p><w:p>{}</w:p><w:sdt><w:sdtContent><w:p><w:pPr><w:outlineLvl w:val="2"/></w:pPr>{}</w:p></w:sdtContent></w:sdt>"#,
        run("Intro"),
        run("Text"),
        run("After"),
        run("Deep")
    );
    let a = parse(&docx(&body, None)).unwrap();
    a.validate().unwrap();
    let got: Vec<_> = a.source_map.blocks.iter().map(|b| (b.text.as_str(), b.block_type, b.paragraph_ordinal)).collect();
    use BlockType::*;
    assert_eq!(
        got,
        [("Intro", Heading, Some(1)), ("Text", Paragraph, Some(2)), ("After", Paragraph, Some(5)), ("Deep", Heading, Some(6))]
    );
    assert_eq!(a.source_map.sections[1].level, 3);
    assert_eq!(a.source_map.sections[1].parent_id.as_deref(), Some("sec_1"));
}

#[test]
fn larger_font_marks_a_title_but_bold_in_a_bold_document_does_not() {
    let big = r#"<w:p><w:r><w:rPr><w:sz w:val="36"/></w:rPr><w:t>研究背景</w:t></w:r></w:p>"#;
    let body = format!("{big}<w:p>{}</w:p><w:p>{}</w:p>", run("正文内容比较长，用来确定正文字号。"), run("Short plain line"));
    let a = parse(&docx(&body, Some(STYLES))).unwrap();
    let types: Vec<_> = a.source_map.blocks.iter().map(|b| b.block_type).collect();
    assert_eq!(types, [BlockType::Heading, BlockType::Paragraph, BlockType::Paragraph]);
    assert_eq!(a.source_map.sections[0].level, 2);

    let bold = |t: &str| format!(r#"<w:p><w:r><w:rPr><w:b/></w:rPr><w:t>{t}</w:t></w:r></w:p>"#);
    let a = parse(&docx(&(bold("Everything bold") + &bold("Also bold here")), Some(STYLES))).unwrap();
    assert!(a.source_map.sections.is_empty());
}

#[test]
fn hostile_inputs_fail_with_codes() {
    let code = |b: &[u8]| parse(b).unwrap_err().code;
    let good = docx(&word_like_body(), Some(STYLES));
    assert_eq!(code(&good[..good.len() / 2]), "docx_malformed");
    let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    assert_eq!(code(&noise), "docx_malformed");
    assert_eq!(code(b""), "docx_malformed");
    let mut ole = OLE_MAGIC.to_vec();
    ole.extend_from_slice(&[0; 512]);
    assert_eq!(code(&ole), "docx_encrypted");
    assert_eq!(code(&zip_of(&[("word/other.xml", "<x/>")])), "docx_malformed");
    assert_eq!(code(&zip_of(&[("word/document.xml", "<w:document><w:body>")])), "docx_malformed");
    let truncated_xml = docx("<w:p><w:r><w:t>x</w:t></w:r>", None);
    assert_eq!(code(&truncated_xml), "docx_malformed");
    // Broken optional parts are ignored.
    assert!(parse(&docx(&para("1", &run("ok")), Some("<w:styles><oops"))).is_ok());
}

#[test]
fn mangled_documents_never_panic() {
    let xml = format!(
        r#"<w:document xmlns:w="{NS_W}" xmlns:w14="{NS_W14}" xmlns:r="{NS_R}" xmlns:mc="{NS_MC}"><w:body>{}</w:body></w:document>"#,
        word_like_body()
    );
    let cuts = xml.char_indices().map(|(i, _)| i).step_by(7);
    for doc in cuts.map(|i| xml[..i].to_string()).chain([xml.replace("</w:tc>", ""), xml.replace("<w:tr>", "<w:p>")]) {
        let _ = parse(&zip_of(&[("word/document.xml", &doc), ("word/styles.xml", &doc)]));
    }
    let good = docx(&word_like_body(), Some(STYLES));
    for i in (0..good.len()).step_by(13) {
        let mut bad = good.clone();
        bad[i] ^= 0x5A;
        let _ = parse(&bad);
    }
}

/// Rewrites the declared uncompressed size of every entry (local and central headers).
fn patch_sizes(mut zip: Vec<u8>, size: u32) -> Vec<u8> {
    for i in 0..zip.len().saturating_sub(30) {
        let at = match &zip[i..i + 4] {
            b"PK\x03\x04" => i + 22,
            b"PK\x01\x02" => i + 24,
            _ => continue,
        };
        zip[at..at + 4].copy_from_slice(&size.to_le_bytes());
    }
    zip
}

#[test]
fn oversized_entries_are_refused() {
    let bomb = patch_sizes(zip_of(&[("word/document.xml", "<w:document/>")]), 0x7FFF_FFFF);
    let err = parse(&bomb).unwrap_err();
    assert_eq!(err.code, "docx_malformed");
    assert!(err.message.contains("declares"), "{}", err.message);
    // An entry that under-declares its size is cut off by the read cap.
    let body = "x".repeat(100);
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    w.start_file("a.txt", SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored)).unwrap();
    w.write_all(body.as_bytes()).unwrap();
    let lying = patch_sizes(w.finish().unwrap().into_inner(), 5);
    let mut archive = zip::ZipArchive::new(Cursor::new(lying.as_slice())).unwrap();
    let err = read_entry(&mut archive, "a.txt", 10).unwrap_err();
    assert!(err.message.contains("larger than"), "{}", err.message);
}

fn shared(name: &str) -> ParsedArtifact {
    let a = parse(&crate::ingest::testdata::read(&format!("docx/{name}"))).unwrap();
    a.validate().unwrap();
    a
}

#[test]
fn shared_test_files() {
    let zen = shared("d2p_zen_of_python.docx");
    let texts: Vec<_> = zen.source_map.blocks.iter().map(|b| b.text.as_str()).collect();
    assert!(texts.contains(&"Beautiful is better than ugly."));
    assert!(texts.contains(&"Namespaces are one honking great idea -- let's do more of those!"));
    assert!(!zen.text.contains("PAGEREF"), "field instructions are dropped");
    assert!(zen.source_map.blocks.iter().all(|b| b.para_id_start.is_none()));

    // A real operating procedure: 19 tables, 11 of them nested in cells (flattened into the 10
    // rows of the outer tables), merged cells.
    let tables = shared("d2p_lay_down_tubulars.docx");
    let rows: Vec<_> =
        tables.source_map.blocks.iter().filter(|b| b.block_type == BlockType::TableRow).map(|b| b.text.as_str()).collect();
    assert_eq!(rows.len(), 10, "{rows:?}");
    assert!(
        rows.iter().any(|r| r.starts_with("Last Issue Date | Task and Revision Number\n")),
        "nested table flattened into its cell: {rows:?}"
    );
    assert!(tables.text.contains("lower TDS & latch elevators"), "entities decoded: {}", tables.text);

    let pydocx = shared("pydocx_test.docx");
    assert_eq!(pydocx.source_map.sections[0].title, "python-docx was here!");
    assert_eq!(pydocx.source_map.blocks[1].paragraph_ordinal, Some(2));

    let lo = shared("d2p_libreoffice_conversion.docx");
    // Style id "2" is named "Heading 2" in styles.xml; the heuristic would reject the "。".
    assert!(lo.source_map.sections.iter().any(|s| s.title == "特此声明。" && s.level == 2));
    assert!(lo.source_map.blocks.iter().any(|b| b.block_type == BlockType::TableRow));
    // Its hyperlink (LibreOffice writes it with a target frame).
    assert!(
        lo.source_map.references.iter().any(|r| r.target == "http://www.oh100.com/qita/" && r.label.as_deref() == Some("其他")),
        "{:?}",
        lo.source_map.references
    );
}

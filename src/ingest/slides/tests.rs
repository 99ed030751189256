//! The slides provider on decks written here: the parts PowerPoint needs and the reader reads
//! (presentation, rels, slides with placeholders, a group, a table, notes), and hostile ones.

use super::parse_pptx;
use crate::evidence::slides::ShapeType;
use crate::ingest::artifact::{Block, BlockType, ParsedArtifact};
use crate::ingest::sheet::tests::zip_of;

const NS: &str = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main""#;
const REL: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";

fn sp(id: u32, name: &str, ph: &str, xfrm: Option<[i64; 4]>, paras: &[&str]) -> String {
    let xfrm = xfrm
        .map(|[x, y, w, h]| format!(r#"<a:xfrm><a:off x="{x}" y="{y}"/><a:ext cx="{w}" cy="{h}"/></a:xfrm>"#))
        .unwrap_or_default();
    let ps: String = paras.iter().map(|p| format!("<a:p><a:r><a:t>{p}</a:t></a:r></a:p>")).collect();
    format!(
        r#"<p:sp><p:nvSpPr><p:cNvPr id="{id}" name="{name}"/><p:cNvSpPr/><p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:spPr>{xfrm}</p:spPr><p:txBody><a:bodyPr/>{ps}</p:txBody></p:sp>"#
    )
}

fn slide(body: &str) -> Vec<u8> {
    format!(r#"<?xml version="1.0" encoding="UTF-8"?><p:sld {NS}><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>{body}</p:spTree></p:cSld></p:sld>"#).into_bytes()
}

fn rels(items: &[(&str, &str, &str)]) -> Vec<u8> {
    let r: String =
        items.iter().map(|(id, ty, t)| format!(r#"<Relationship Id="{id}" Type="{REL}/{ty}" Target="{t}"/>"#)).collect();
    format!(r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{r}</Relationships>"#).into_bytes()
}

/// A deck of `slides` (slide bodies), the first with notes; slides are listed in reverse
/// part order in the presentation (order comes from `sldIdLst`, not from part names).
fn deck(slides: &[String], notes: Option<&str>) -> Vec<u8> {
    let n = slides.len();
    let ids: String = (0..n).map(|i| format!(r#"<p:sldId id="{}" r:id="rId{}"/>"#, 256 + i, n - i)).collect();
    let pres = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><p:presentation {NS}><p:sldIdLst>{ids}</p:sldIdLst><p:sldSz cx="12192000" cy="6858000"/></p:presentation>"#
    );
    let pres_rels: Vec<(String, &str, String)> =
        (0..n).map(|i| (format!("rId{}", n - i), "slide", format!("slides/slide{}.xml", n - i))).collect();
    let pres_rels: Vec<(&str, &str, &str)> = pres_rels.iter().map(|(a, b, c)| (a.as_str(), *b, c.as_str())).collect();
    let layout = slide(&sp(2, "Title 1", r#"<p:ph type="title"/>"#, Some([838200, 365125, 10515600, 1325563]), &[]));
    let mut entries: Vec<(String, Vec<u8>)> = vec![
        ("ppt/presentation.xml".into(), pres.into_bytes()),
        ("ppt/_rels/presentation.xml.rels".into(), rels(&pres_rels)),
        ("ppt/slideLayouts/slideLayout1.xml".into(), layout),
    ];
    for (i, body) in slides.iter().enumerate() {
        // Part k holds slides[n - k]: deck order is the reverse of part order.
        let k = n - i;
        entries.push((format!("ppt/slides/slide{k}.xml"), slide(body)));
        let mut r = vec![("rId1", "slideLayout", "../slideLayouts/slideLayout1.xml")];
        if i == 0 && notes.is_some() {
            r.push(("rId2", "notesSlide", "../notesSlides/notesSlide1.xml"));
        }
        entries.push((format!("ppt/slides/_rels/slide{k}.xml.rels"), rels(&r)));
    }
    if let Some(text) = notes {
        let body = sp(2, "Notes Placeholder 2", r#"<p:ph type="body" idx="1"/>"#, None, &["", text]);
        entries.push(("ppt/notesSlides/notesSlide1.xml".into(), slide(&body)));
    }
    zip_of(&entries.iter().map(|(a, b)| (a.as_str(), b.clone())).collect::<Vec<_>>())
}

fn find<'a>(art: &'a ParsedArtifact, needle: &str) -> &'a Block {
    art.all_blocks().find(|b| b.text.contains(needle)).unwrap_or_else(|| panic!("no block with {needle}"))
}

fn sample() -> ParsedArtifact {
    let first = [
        sp(2, "Title 1", r#"<p:ph type="title"/>"#, None, &["Roadmap 2027"]),
        sp(3, "TextBox 2", "", Some([914400, 1828800, 3657600, 914400]), &["intro", "", "launch date is March"]),
        // A group scaled ×2 and moved: its child at (100, 100) 50×50 in child space.
        r#"<p:grpSp><p:nvGrpSpPr><p:cNvPr id="4" name="Group 3"/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr><a:xfrm><a:off x="1000" y="2000"/><a:ext cx="200" cy="200"/><a:chOff x="100" y="100"/><a:chExt cx="100" cy="100"/></a:xfrm></p:grpSpPr>"#.to_string()
            + &sp(5, "Inner", "", Some([150, 100, 50, 50]), &["预算负责人是财务部"])
            + "</p:grpSp>",
    ]
    .concat();
    let table = r#"<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="6" name="Table 5"/><p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr><p:xfrm rot="5400000" flipH="1"><a:off x="10" y="20"/><a:ext cx="30" cy="40"/></p:xfrm><a:graphic><a:graphicData><a:tbl><a:tr><a:tc><a:txBody><a:p><a:r><a:t>Owner</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>Amount</a:t></a:r></a:p></a:txBody></a:tc></a:tr><a:tr><a:tc><a:txBody><a:p><a:r><a:t>finance</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>700000</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>"#;
    let bytes = deck(&[first, table.to_string()], Some("say the launch slowly"));
    parse_pptx(&bytes, false).unwrap()
}

#[test]
fn a_turned_shape_keeps_its_frame_and_says_how_it_is_turned() {
    let art = sample();
    let row = find(&art, "finance").slide.clone().unwrap();
    let turn = crate::evidence::slides::Turn { degrees: 90.0, flip_h: true, flip_v: false };
    assert_eq!((row.turn, row.shape_box), (Some(turn), Some([10, 20, 30, 40])));
    assert_eq!(turn.css().as_deref(), Some("rotate(90deg)"), "a flip does not move the frame");
    assert_eq!(find(&art, "launch date").slide.as_ref().unwrap().turn, None);
    assert_eq!(crate::evidence::slides::Turn { degrees: 0.0, flip_h: false, flip_v: true }.css(), None);
}

#[test]
fn blocks_name_their_slide_shape_and_paragraph() {
    let art = sample();
    assert_eq!(art.source_map.page_count, Some(2));
    let b = find(&art, "launch date");
    let p = b.slide.as_ref().unwrap();
    assert_eq!((p.slide, p.shape_id, p.shape_name.as_str(), p.paragraph), (1, 3, "TextBox 2", Some(3)));
    assert_eq!(
        (p.shape_type, p.shape_box, p.slide_size),
        (ShapeType::Text, Some([914400, 1828800, 3657600, 914400]), [12192000, 6858000])
    );
    assert_eq!((b.page, b.bbox, b.id.as_str()), (Some(1), Some([72.0, 144.0, 360.0, 216.0]), "p1_b3"));
    // The title placeholder takes the layout's box and names the slide's section.
    let t = find(&art, "Roadmap");
    assert_eq!((t.block_type, t.slide.as_ref().unwrap().shape_type), (BlockType::Heading, ShapeType::Title));
    assert_eq!(t.slide.as_ref().unwrap().shape_box, Some([838200, 365125, 10515600, 1325563]));
    let sec = art.source_map.sections.iter().find(|s| Some(&s.id) == b.section_id.as_ref()).unwrap();
    assert_eq!(sec.title, "Roadmap 2027");
}

#[test]
fn groups_map_children_into_slide_coordinates() {
    let art = sample();
    let p = find(&art, "预算负责人").slide.clone().unwrap();
    // x = 1000 + (150 - 100) × 2, y = 2000 + 0, size × 2.
    assert_eq!(p.shape_box, Some([1100, 2000, 100, 100]));
}

#[test]
fn tables_notes_and_order() {
    let art = sample();
    let row = find(&art, "finance");
    assert_eq!(row.text, "Owner: finance | Amount: 700000");
    let p = row.slide.as_ref().unwrap();
    assert_eq!((p.slide, p.shape_type, p.table_row, row.block_type), (2, ShapeType::Table, Some(2), BlockType::TableRow));
    let n = find(&art, "slowly").slide.clone().unwrap();
    assert_eq!((n.slide, n.notes, n.shape_type, n.paragraph, n.shape_box), (1, true, ShapeType::Notes, Some(2), None));
    // The untitled second slide is in no section.
    assert_eq!(row.section_id, None);
}

#[test]
fn hostile_decks_end_with_their_codes() {
    let code = |b: &[u8]| parse_pptx(b, false).unwrap_err().code;
    assert_eq!(code(b"not a zip"), "slides_malformed");
    let ole = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1, 0, 0];
    assert_eq!(code(&ole), "encrypted");
    let lol = r#"<?xml version="1.0"?><!DOCTYPE p [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>"#;
    let good = deck(&[sp(2, "T", "", None, &["&b;"])], None);
    let bad = crate::ingest::sheet::tests::with_prolog(&good, "ppt/slides/slide1.xml", lol);
    assert_eq!(code(&bad), "xml_dtd_refused");
    let many: String = (0..super::MAX_SHAPES + 1).map(|i| sp(i as u32 + 2, "x", "", None, &["x"])).collect();
    assert_eq!(code(&deck(&[many], None)), "slides_too_large");
    let bomb = zip_of(&[("ppt/presentation.xml", vec![b' '; 300 << 20])]);
    assert_eq!(code(&bomb), "container_ratio_exceeded");
}

#[test]
fn legacy_files_are_refused_with_what_to_do() {
    let e = super::legacy::refused("old deck.PPT").unwrap();
    assert_eq!(e.code, "unsupported_legacy_format");
    assert!(e.message.contains(".pptx"));
    assert!(super::legacy::refused("memo.msg").unwrap().message.contains(".eml"));
    assert!(super::legacy::refused("deck.pptx").is_none());
}

#[test]
fn odp_reads_on_the_same_locator() {
    let ns = r#"xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0""#;
    let content = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><office:document-content {ns}><office:body><office:presentation>
<draw:page draw:name="p1"><draw:frame draw:name="T" presentation:class="title" svg:x="2cm" svg:y="1cm" svg:width="24cm" svg:height="3cm"><draw:text-box><text:p>Plan 计划</text:p></draw:text-box></draw:frame>
<draw:frame presentation:class="outline" svg:x="2cm" svg:y="5cm" svg:width="24cm" svg:height="9cm"><draw:text-box><text:list><text:list-item><text:p>first</text:p></text:list-item><text:list-item><text:p>needle <text:span>odp</text:span>&amp;co</text:p></text:list-item></text:list></draw:text-box></draw:frame>
<presentation:notes><draw:page-thumbnail/><draw:frame presentation:class="notes" svg:x="1cm" svg:y="1cm" svg:width="1cm" svg:height="1cm"><draw:text-box><text:p>odp notes line</text:p></draw:text-box></draw:frame></presentation:notes></draw:page>
<draw:page draw:name="p2"><draw:frame svg:x="1in" svg:y="1in" svg:width="4in" svg:height="1in"><table:table><table:table-row><table:table-cell><text:p>Owner</text:p></table:table-cell><table:table-cell><text:p>Amount</text:p></table:table-cell></table:table-row><table:table-row><table:table-cell><text:p>ops</text:p></table:table-cell><table:table-cell><text:p>12</text:p></table:table-cell></table:table-row></table:table></draw:frame></draw:page>
</office:presentation></office:body></office:document-content>"#
    );
    let styles = format!(
        r#"<?xml version="1.0"?><office:document-styles {ns}><office:automatic-styles><style:page-layout style:name="PM1"><style:page-layout-properties fo:page-width="28cm" fo:page-height="15.75cm"/></style:page-layout></office:automatic-styles></office:document-styles>"#
    );
    let bytes = zip_of(&[
        ("mimetype", b"application/vnd.oasis.opendocument.presentation".to_vec()),
        ("content.xml", content.into_bytes()),
        ("styles.xml", styles.into_bytes()),
    ]);
    let art = parse_pptx(&bytes, false).unwrap();
    assert_eq!(art.source_map.page_count, Some(2));
    let b = find(&art, "needle odp&co");
    let p = b.slide.as_ref().unwrap();
    assert_eq!((p.slide, p.shape_id, p.shape_type, p.paragraph), (1, 2, ShapeType::Placeholder, Some(2)));
    assert_eq!((p.shape_box, p.slide_size), (Some([720_000, 1_800_000, 8_640_000, 3_240_000]), [10_080_000, 5_670_000]));
    let sec = art.source_map.sections.iter().find(|s| Some(&s.id) == b.section_id.as_ref()).unwrap();
    assert_eq!(sec.title, "Plan 计划");
    let n = find(&art, "odp notes").slide.clone().unwrap();
    assert_eq!((n.slide, n.notes, n.shape_type, n.shape_box), (1, true, ShapeType::Notes, None));
    let row = find(&art, "ops");
    assert_eq!(row.text, "Owner: ops | Amount: 12");
    assert_eq!(row.slide.as_ref().unwrap().shape_box, Some([914_400, 914_400, 3_657_600, 914_400]));
}

#[test]
fn a_deck_past_the_slide_cap_is_too_large() {
    let two = deck(&[sp(2, "a", "", None, &["one"]), sp(2, "b", "", None, &["two"])], None);
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(two.as_slice())).unwrap();
    assert_eq!(super::package::deck(&mut zip, 1).err().map(|e| e.code), Some("slides_too_large"));
    assert_eq!(super::package::deck(&mut zip, 2).map(|d| d.slides.len()).ok(), Some(2));
}

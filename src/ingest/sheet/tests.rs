//! The spreadsheet and CSV providers on files written here: minimal XLSX packages (the parts
//! Excel needs and calamine reads), CSV in several encodings, and hostile containers.

use std::io::Write;

use super::grid::{self, Limits};
use super::{CsvProvider, SpreadsheetProvider, container};
use crate::ingest::artifact::{Block, BlockType, ParsedArtifact, TruncatedReason};
use crate::ingest::{ParseError, ParseInput, ParseProvider};

const NS: &str = "http://schemas.openxmlformats.org/spreadsheetml/2006/main";
const NS_R: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";

pub struct TestSheet<'a> {
    pub name: &'a str,
    pub state: Option<&'a str>,
    /// The `<row>` elements.
    pub rows: String,
    pub merges: &'a [&'a str],
}

/// A text cell.
pub fn s(r: &str, text: &str) -> String {
    format!(r#"<c r="{r}" t="inlineStr"><is><t>{text}</t></is></c>"#)
}

/// A number cell with a style (0 general, 1 date, 2 `0.00%`, 3 `#,##0`).
pub fn n(r: &str, v: f64, style: u32) -> String {
    format!(r#"<c r="{r}" s="{style}"><v>{v}</v></c>"#)
}

pub fn row(r: u32, cells: &[String]) -> String {
    format!(r#"<row r="{r}">{}</row>"#, cells.concat())
}

pub fn zip_of(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        w.start_file(*name, opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// `package` with the XML declaration of its `part` replaced by `prolog` (a DTD in front of
/// the part's root element); the other entries as they are.
pub fn with_prolog(package: &[u8], part: &str, prolog: &str) -> Vec<u8> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(package)).unwrap();
    let mut entries = Vec::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).unwrap();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut data).unwrap();
        let name = f.name().unwrap().into_owned();
        if name == part {
            data = String::from_utf8(data).unwrap().replacen(r#"<?xml version="1.0" encoding="UTF-8"?>"#, prolog, 1).into_bytes();
        }
        entries.push((name, data));
    }
    zip_of(&entries.iter().map(|(n, d)| (n.as_str(), d.clone())).collect::<Vec<_>>())
}

/// A minimal XLSX package with these sheets.
pub fn xlsx(sheets: &[TestSheet<'_>]) -> Vec<u8> {
    let mut types = String::new();
    let (mut list, mut rels) = (String::new(), String::new());
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, sh) in sheets.iter().enumerate() {
        let k = i + 1;
        types.push_str(&format!(r#"<Override PartName="/xl/worksheets/sheet{k}.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>"#));
        let state = sh.state.map(|s| format!(r#" state="{s}""#)).unwrap_or_default();
        list.push_str(&format!(r#"<sheet name="{}" sheetId="{k}"{state} r:id="rId{k}"/>"#, sh.name));
        rels.push_str(&format!(r#"<Relationship Id="rId{k}" Type="{NS_R}/worksheet" Target="worksheets/sheet{k}.xml"/>"#));
        let merges = if sh.merges.is_empty() {
            String::new()
        } else {
            let m: String = sh.merges.iter().map(|r| format!(r#"<mergeCell ref="{r}"/>"#)).collect();
            format!(r#"<mergeCells count="{}">{m}</mergeCells>"#, sh.merges.len())
        };
        let xml = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="{NS}"><sheetData>{}</sheetData>{merges}</worksheet>"#,
            sh.rows
        );
        entries.push((format!("xl/worksheets/sheet{k}.xml"), xml.into_bytes()));
    }
    let n = sheets.len() + 1;
    rels.push_str(&format!(r#"<Relationship Id="rId{n}" Type="{NS_R}/styles" Target="styles.xml"/>"#));
    let ct = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>{types}</Types>"#
    );
    let root_rels = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="{NS_R}/officeDocument" Target="xl/workbook.xml"/></Relationships>"#
    );
    let workbook = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{NS}" xmlns:r="{NS_R}"><sheets>{list}</sheets></workbook>"#
    );
    let wb_rels = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{rels}</Relationships>"#
    );
    let styles = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><styleSheet xmlns="{NS}"><fonts count="1"><font/></fonts><fills count="1"><fill/></fills><borders count="1"><border/></borders><cellStyleXfs count="1"><xf numFmtId="0"/></cellStyleXfs><cellXfs count="4"><xf numFmtId="0" xfId="0"/><xf numFmtId="14" xfId="0" applyNumberFormat="1"/><xf numFmtId="10" xfId="0" applyNumberFormat="1"/><xf numFmtId="3" xfId="0" applyNumberFormat="1"/></cellXfs></styleSheet>"#
    );
    let mut all: Vec<(&str, Vec<u8>)> = vec![
        ("[Content_Types].xml", ct.into_bytes()),
        ("_rels/.rels", root_rels.into_bytes()),
        ("xl/workbook.xml", workbook.into_bytes()),
        ("xl/_rels/workbook.xml.rels", wb_rels.into_bytes()),
        ("xl/styles.xml", styles.into_bytes()),
    ];
    all.extend(entries.iter().map(|(n, d)| (n.as_str(), d.clone())));
    zip_of(&all)
}

fn parse_sheet(bytes: &[u8], name: &str) -> Result<ParsedArtifact, ParseError> {
    let art = SpreadsheetProvider.parse(&ParseInput { bytes, file_name: name, kind: "spreadsheet" })?;
    art.validate().unwrap();
    Ok(art)
}

fn parse_csv(bytes: &[u8], name: &str) -> Result<ParsedArtifact, ParseError> {
    let art = CsvProvider.parse(&ParseInput { bytes, file_name: name, kind: "csv" })?;
    art.validate().unwrap();
    Ok(art)
}

fn block<'a>(art: &'a ParsedArtifact, needle: &str) -> &'a Block {
    art.source_map
        .blocks
        .iter()
        .find(|b| b.text.contains(needle))
        .unwrap_or_else(|| panic!("no block has {needle:?}: {:#?}", art.source_map.blocks))
}

fn forecast() -> Vec<u8> {
    xlsx(&[
        TestSheet {
            name: "Forecast 2027",
            state: None,
            rows: [
                row(1, &[s("A1", "Owner"), s("B1", "Amount"), s("C1", "Due"), s("D1", "Share")]),
                row(2, &[s("A2", "finance"), n("B2", 700000.0, 3), n("C2", 46477.0, 1), n("D2", 0.125, 2)]),
                row(3, &[]),
                row(5, &[s("A5", "研发"), r#"<c r="B5"><f>B2*2</f><v>1400000</v></c>"#.to_string(), s("C5", "明年")]),
            ]
            .concat(),
            merges: &[],
        },
        TestSheet {
            name: "Secret",
            state: Some("hidden"),
            rows: [row(1, &[n("A1", 1.0, 0), n("B1", 2.0, 0)]), row(2, &[s("A2", "hidden needle"), n("B2", 3.0, 0)])].concat(),
            merges: &["A2:A3"],
        },
    ])
}

#[test]
fn rows_carry_their_header_names_and_sheet_cells() {
    let art = parse_sheet(&forecast(), "plan.xlsx").unwrap();
    let b = block(&art, "finance");
    assert_eq!(b.text, "Owner: finance | Amount: 700,000 | Due: 2027-03-31 | Share: 12.50%");
    assert_eq!(b.block_type, BlockType::TableRow);
    assert_eq!(
        (b.sheet.as_deref(), b.cell_range.as_deref(), b.sheet_hidden),
        (Some("Forecast 2027"), Some("A2:D2"), Some(false))
    );
    let header = block(&art, "Owner |");
    assert_eq!((header.text.as_str(), header.cell_range.as_deref()), ("Owner | Amount | Due | Share", Some("A1:D1")));
    // The formula's cached value, never evaluated; the empty row 3 gives no block.
    let zh = block(&art, "研发");
    assert_eq!(zh.text, "Owner: 研发 | Amount: 1400000 | Due: 明年");
    assert_eq!(zh.cell_range.as_deref(), Some("A5:C5"));
    assert_eq!(art.source_map.sections.iter().map(|s| s.title.as_str()).collect::<Vec<_>>(), ["Forecast 2027", "Secret"]);
    assert_eq!(art.source_map.resource_kind, "spreadsheet");
    assert_eq!(art.source_map.truncated, None);
}

#[test]
fn a_hidden_sheet_is_indexed_and_marked_and_numbers_are_no_header() {
    let art = parse_sheet(&forecast(), "plan.xlsx").unwrap();
    let b = block(&art, "hidden needle");
    assert_eq!(b.sheet_hidden, Some(true));
    // Row 1 holds numbers: the columns are named by their letters; A2 is merged down to A3.
    assert_eq!(b.text, "A: hidden needle | B: 3");
    assert_eq!(b.cell_range.as_deref(), Some("A2:B3"));
    assert_eq!(block(&art, "A: 1").cell_range.as_deref(), Some("A1:B1"));
}

#[test]
fn merged_and_long_cells_get_their_own_ranges() {
    let long = "长".repeat(120) + &" long text".repeat(20);
    let bytes = xlsx(&[TestSheet {
        name: "Notes",
        state: None,
        rows: [
            row(1, &[s("A1", "Topic"), s("B1", "Detail")]),
            row(2, &[s("A2", "scope"), s("B2", &long)]),
            row(4, &[s("B4", "wide")]),
        ]
        .concat(),
        merges: &["B4:D4"],
    }]);
    let art = parse_sheet(&bytes, "notes.xlsx").unwrap();
    let p = art.source_map.blocks.iter().find(|b| b.block_type == BlockType::Paragraph).expect("a paragraph block");
    assert_eq!((p.text.as_str(), p.cell_range.as_deref()), (long.as_str(), Some("B2")));
    assert_eq!(block(&art, "scope").text, "Topic: scope");
    assert_eq!(block(&art, "scope").cell_range.as_deref(), Some("A2"));
    assert_eq!(block(&art, "wide").cell_range.as_deref(), Some("B4:D4"));
    // The same bytes parse to the same artifact.
    assert_eq!(parse_sheet(&bytes, "notes.xlsx").unwrap(), art);
}

#[test]
fn the_row_cap_truncates_and_says_so() {
    let rows: String = (1..=30).map(|r| row(r, &[s(&format!("A{r}"), &format!("row {r}"))])).collect();
    let bytes = xlsx(&[TestSheet { name: "Big", state: None, rows, merges: &[] }]);
    let limits = Limits { max_rows: 10, ..Limits::default() };
    let wb = grid::read_workbook(&bytes, "big.xlsx", &limits).unwrap();
    assert!(wb.truncated);
    assert_eq!(wb.sheets[0].rows.len(), 10);
    let art = super::artifact_of(&bytes, "spreadsheet", "t", &wb, &limits);
    let t = art.source_map.truncated.expect("truncated");
    assert_eq!((t.reason, t.limit), (TruncatedReason::RowCap, 10));
    let csv: String = (1..=30).map(|r| format!("{r},x\n")).collect();
    let wb = super::delimited::read_delimited(csv.as_bytes(), "a.csv", &limits).unwrap();
    assert!(wb.truncated);
    assert_eq!(wb.sheets[0].rows.len(), 10);
}

fn code(r: Result<ParsedArtifact, ParseError>) -> &'static str {
    r.map(|a| panic!("parsed: {:?}", a.source_map.blocks)).unwrap_err().code
}

#[test]
fn hostile_workbooks_end_with_their_codes() {
    // A zip bomb: 64 MiB of zeros inflated from a few dozen KiB.
    let bomb = zip_of(&[("xl/worksheets/sheet1.xml", vec![0u8; 64 << 20])]);
    assert_eq!(code(parse_sheet(&bomb, "bomb.xlsx")), "container_ratio_exceeded");
    // Over the total cap (a small cap here: the default is 1 GiB).
    let caps = container::Caps { max_unpacked: 1000, ..container::Caps::default() };
    let err = grid::read_workbook(&forecast(), "plan.xlsx", &Limits { container: caps, ..Limits::default() }).unwrap_err();
    assert_eq!(err.code, "container_too_large");
    // An encrypted OOXML package is an OLE compound file.
    let mut ole = container::OLE_MAGIC.to_vec();
    ole.extend(vec![0u8; 4096]);
    assert_eq!(code(parse_sheet(&ole, "locked.xlsx")), "encrypted");
    let cut = forecast();
    assert_eq!(code(parse_sheet(&cut[..cut.len() / 2], "cut.xlsx")), "malformed_spreadsheet");
    assert_eq!(code(parse_sheet(b"hello", "x.xlsx")), "malformed_spreadsheet");
    assert_eq!(code(parse_sheet(b"hello", "x.xls")), "malformed_spreadsheet");
    assert_eq!(code(parse_sheet(&ole, "legacy.xls")), "malformed_spreadsheet");
}

#[test]
fn xml_entities_are_never_expanded() {
    // A billion laughs in a worksheet: the DTD's entities must not be expanded.
    let mut dtd = String::from(r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">"#);
    for i in 1..=9 {
        let prev = if i == 1 { "lol".to_string() } else { format!("lol{}", i - 1) };
        dtd.push_str(&format!(r#"<!ENTITY lol{i} "{}">"#, format!("&{prev};").repeat(10)));
    }
    dtd.push_str("]>");
    let bytes = xlsx(&[TestSheet { name: "S", state: None, rows: row(1, &[s("A1", "&lol9;")]), merges: &[] }]);
    // Put the DTD in front of the worksheet's root element.
    let bytes = with_prolog(&bytes, "xl/worksheets/sheet1.xml", &dtd);
    // quick-xml (inside calamine) knows no DTD entities: the reference is an error, nothing grows.
    assert_eq!(code(parse_sheet(&bytes, "lol.xlsx")), "malformed_spreadsheet");
}

#[test]
fn csv_rows_have_lines_and_cells() {
    let text = "Owner,Amount,Note\nfinance,700000,\"two\nlines\"\n\n,,\nops,5,x\n";
    let art = parse_csv(text.as_bytes(), "t.csv").unwrap();
    let b = block(&art, "finance");
    assert_eq!(b.text, "Owner: finance | Amount: 700000 | Note: two\nlines");
    assert_eq!((b.line_range, b.cell_range.as_deref(), b.sheet.as_deref()), (Some([2, 3]), Some("A2:C2"), None));
    let ops = block(&art, "ops");
    // Row 4 is the empty record `,,` (skipped); the blank line is no record.
    assert_eq!((ops.line_range, ops.cell_range.as_deref()), (Some([6, 6]), Some("A4:C4")));
    assert!(art.source_map.sections.is_empty());
}

#[test]
fn csv_encodings_are_detected() {
    let simplified =
        "负责人,金额,备注\n财务部,七十万,明年第一季度的预算需要重新审批\n研发中心,五十万,服务器采购与机房扩容的费用\n";
    let traditional =
        "負責人,金額,備註\n財務部,七十萬,明年第一季度的預算需要重新審批\n研發中心,五十萬,伺服器採購與機房擴容的費用\n";
    for (enc, text, needle) in [(encoding_rs::GBK, simplified, "七十万"), (encoding_rs::BIG5, traditional, "七十萬")] {
        let (bytes, _, bad) = enc.encode(text);
        assert!(!bad, "{}", enc.name());
        let art = parse_csv(&bytes, "zh.csv").unwrap();
        assert_eq!(block(&art, needle).cell_range.as_deref(), Some("A2:C2"), "{}: {}", enc.name(), art.text);
        assert_eq!(super::delimited::decode(&bytes).unwrap().1, enc, "{}", enc.name());
    }
    let mut utf16 = vec![0xFF, 0xFE];
    for u in "a\tb\n负责\t金额\n".encode_utf16() {
        utf16.extend(u.to_le_bytes());
    }
    let art = parse_csv(&utf16, "u.tsv").unwrap();
    assert_eq!(block(&art, "负责").text, "a: 负责 | b: 金额");
}

#[test]
fn delimiters_are_sniffed() {
    use super::delimited::sniff_delimiter;
    assert_eq!(sniff_delimiter("a;b;c\n1;2,5;3\n4;5;6\n", b','), b';');
    assert_eq!(sniff_delimiter("a|b\n1|2\n", b','), b'|');
    assert_eq!(sniff_delimiter("a\tb, c\n1\t2\n", b','), b'\t');
    assert_eq!(sniff_delimiter("\"x,y\";b\n\"1,2\";3\n", b','), b';');
    assert_eq!(sniff_delimiter("one column\n", b','), b',');
    let art = parse_csv("Owner;Amount\nfinance;700000\n".as_bytes(), "s.csv").unwrap();
    assert_eq!(block(&art, "finance").text, "Owner: finance | Amount: 700000");
}

const MANIFEST: &str = r#"<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>"#;

#[test]
fn an_ods_spreadsheet_reads_like_a_workbook() {
    let content = r#"<?xml version="1.0" encoding="UTF-8"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2"><office:body><office:spreadsheet><table:table table:name="Plan 2027"><table:table-row><table:table-cell office:value-type="string"><text:p>Owner</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>Amount</text:p></table:table-cell></table:table-row><table:table-row table:number-rows-repeated="2"><table:table-cell table:number-columns-repeated="2"/></table:table-row><table:table-row><table:table-cell office:value-type="string"><text:p>运维</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="1200"><text:p>1200</text:p></table:table-cell></table:table-row><table:table-row><table:table-cell office:value-type="string"><text:p>Share</text:p></table:table-cell><table:table-cell office:value-type="percentage" office:value="0.125"><text:p>12.50%</text:p></table:table-cell></table:table-row><table:table-row table:number-rows-repeated="3"><table:table-cell table:number-columns-repeated="2"/></table:table-row><table:table-row><table:table-cell table:number-columns-repeated="2"/><table:table-cell office:value-type="currency" office:currency="CNY" office:value="1200" table:number-columns-repeated="2"><text:p>¥1,200.00</text:p></table:table-cell><table:table-cell office:value-type="date" office:date-value="2027-03-01"><text:p>01/03/27</text:p></table:table-cell></table:table-row></table:table><table:table table:name="Second"><table:table-row><table:table-cell office:value-type="float" office:value="0.5"><text:p>1/2</text:p></table:table-cell></table:table-row></table:table></office:spreadsheet></office:body></office:document-content>"#;
    let bytes = zip_of(&[
        ("mimetype", b"application/vnd.oasis.opendocument.spreadsheet".to_vec()),
        ("META-INF/manifest.xml", MANIFEST.as_bytes().to_vec()),
        ("content.xml", content.as_bytes().to_vec()),
    ]);
    let art = parse_sheet(&bytes, "plan.ods").unwrap();
    let b = block(&art, "运维");
    assert_eq!(b.text, "Owner: 运维 | Amount: 1200");
    assert_eq!((b.sheet.as_deref(), b.cell_range.as_deref()), (Some("Plan 2027"), Some("A4:B4")));
    assert_eq!(crate::evidence::cells::citation(b.sheet.as_deref(), "A4:B4"), "'Plan 2027'!A4:B4");
    // Numbers, currencies and dates as the file shows them (its `text:p`), not as stored.
    assert_eq!(block(&art, "Share").text, "Owner: Share | Amount: 12.50%");
    let money = block(&art, "¥1,200.00");
    assert_eq!(money.text, "C: ¥1,200.00 | D: ¥1,200.00 | E: 01/03/27");
    assert_eq!(money.cell_range.as_deref(), Some("C9:E9"));
    let second = block(&art, "1/2");
    assert_eq!((second.sheet.as_deref(), second.text.as_str()), (Some("Second"), "A: 1/2"));
}

#[test]
fn many_merged_regions_are_looked_up_by_their_corner() {
    let rows: String = (1..=3000).map(|r| row(r, &[s(&format!("A{r}"), &format!("item {r}"))])).collect();
    let merges: Vec<String> = (1..=3000).map(|r| format!("A{r}:C{r}")).collect();
    let merges: Vec<&str> = merges.iter().map(String::as_str).collect();
    let bytes = xlsx(&[TestSheet { name: "Wide", state: None, rows, merges: &merges }]);
    let art = parse_sheet(&bytes, "wide.xlsx").unwrap();
    assert_eq!(art.source_map.blocks.len(), 3000);
    assert_eq!(block(&art, "item 2999").cell_range.as_deref(), Some("A2999:C2999"));
}

//! Hostile input through the real pipeline: every case fails (or parses) only its own source
//! with a stable code, nothing panics, hangs or exhausts memory, and a good file registered
//! after the hostile ones in the same KB is still indexed. The files are built here.
//!
//! Covered elsewhere: parser timeouts, crashes and memory blow-ups of the child, FIFOs and
//! device links (`ingest.rs`); truncated/corrupt PDF, DOCX, PNG and Markdown (cut inside a
//! character) from the generated fixtures (`fixtures.rs`).

use std::io::{Cursor, Write};

use mnote::db::{Scope, TenantTx};
use serde_json::Value;

use crate::fixtures::{Kb, kb_with_grant, register, rows, sources_by_path};
use crate::helpers::*;

const W_NS: &str = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";

// ---- builders --------------------------------------------------------------------------------

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in entries {
        w.start_file(*name, zip::write::SimpleFileOptions::default()).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn docx_with(document: &str, extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut entries: Vec<(&str, &[u8])> =
        vec![("[Content_Types].xml", b"<Types/>".as_slice()), ("word/document.xml", document.as_bytes())];
    entries.extend_from_slice(extra);
    zip_of(&entries)
}

fn document(body: &str) -> String {
    format!(r#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{W_NS}"><w:body>{body}</w:body></w:document>"#)
}

fn para(text: &str) -> String {
    format!("<w:p><w:r><w:t>{text}</w:t></w:r></w:p>")
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// LSB-first bit writer for a raw deflate stream.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, value: u64, bits: u32) {
        self.acc |= value << self.n;
        self.n += bits;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }
    /// A Huffman code: sent most significant bit first.
    fn code(&mut self, code: u64, len: u32) {
        for i in (0..len).rev() {
            self.put((code >> i) & 1, 1);
        }
    }
    fn align(&mut self) {
        if self.n > 0 {
            self.put(0, 8 - self.n);
        }
    }
}

/// A raw deflate stream that inflates to `prefix` followed by `copies × 258` copies of the
/// prefix's last byte: a stored block with the prefix, then one dynamic-Huffman block whose
/// only symbols are "length 258" and "distance 1" (one bit each), so every 1,032 output bytes
/// cost one input byte.
fn deflate_bomb(prefix: &[u8], copies: u64) -> Vec<u8> {
    assert!(!prefix.is_empty() && prefix.len() < 65536);
    let mut b = Bits::default();
    // Stored block, not final.
    b.put(0, 1);
    b.put(0, 2);
    b.align();
    let len = prefix.len() as u16;
    b.out.extend_from_slice(&len.to_le_bytes());
    b.out.extend_from_slice(&(!len).to_le_bytes());
    b.out.extend_from_slice(prefix);
    // Dynamic block, final.
    b.put(1, 1);
    b.put(2, 2);
    b.put(29, 5); // HLIT: 286 literal/length codes
    b.put(0, 5); // HDIST: 1 distance code
    b.put(14, 4); // HCLEN: 18 code length codes
    // Code length code: 18 → "0" (1 bit), 0 → "10", 1 → "11"; in the order 16 17 18 0 8 7 9 6
    // 10 5 11 4 12 3 13 2 14 1.
    for len in [0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2] {
        b.put(len, 3);
    }
    let zeros = |b: &mut Bits, n: u64| {
        b.code(0b0, 1);
        b.put(n - 11, 7);
    };
    zeros(&mut b, 138); // literals 0..=137
    zeros(&mut b, 118); // literals 138..=255
    b.code(0b11, 2); // 256 (end of block): length 1
    zeros(&mut b, 28); // 257..=284
    b.code(0b11, 2); // 285 (length 258): length 1
    b.code(0b11, 2); // distance code 0 (distance 1): length 1
    // Codes: 256 → "0", 285 → "1"; distance 0 → "0". A match is "1" then "0".
    let mut left = copies;
    while left > 0 && b.n != 0 {
        b.put(0b01, 2);
        left -= 1;
    }
    // Byte aligned: four matches per 0b01010101 byte.
    b.out.extend(std::iter::repeat_n(0x55u8, (left / 4) as usize));
    for _ in 0..left % 4 {
        b.put(0b01, 2);
    }
    b.code(0, 1); // end of block
    b.align();
    b.out
}

/// A zip with one deflated entry whose local and central headers declare `declared` bytes.
fn zip_raw(name: &str, deflated: &[u8], declared: u32, crc: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let header = |sig: u32, central: bool| {
        let mut h = sig.to_le_bytes().to_vec();
        if central {
            h.extend_from_slice(&20u16.to_le_bytes()); // made by
        }
        h.extend_from_slice(&20u16.to_le_bytes()); // version needed
        h.extend_from_slice(&0u16.to_le_bytes()); // flags
        h.extend_from_slice(&8u16.to_le_bytes()); // deflate
        h.extend_from_slice(&0u16.to_le_bytes()); // time
        h.extend_from_slice(&0x5821u16.to_le_bytes()); // date 2024-01-01
        h.extend_from_slice(&crc.to_le_bytes());
        h.extend_from_slice(&(deflated.len() as u32).to_le_bytes());
        h.extend_from_slice(&declared.to_le_bytes());
        h.extend_from_slice(&(name.len() as u16).to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes()); // extra
        if central {
            h.extend_from_slice(&[0; 6]); // comment length, disk, internal attributes
            h.extend_from_slice(&0u32.to_le_bytes()); // external attrs
            h.extend_from_slice(&0u32.to_le_bytes()); // local header offset
        }
        h.extend_from_slice(name.as_bytes());
        h
    };
    out.extend(header(0x0403_4b50, false));
    out.extend_from_slice(deflated);
    let cd_start = out.len() as u32;
    out.extend(header(0x0201_4b50, true));
    let cd_len = out.len() as u32 - cd_start;
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&cd_len.to_le_bytes());
    out.extend_from_slice(&cd_start.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// A PNG chunk with its CRC.
fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut c = (data.len() as u32).to_be_bytes().to_vec();
    c.extend_from_slice(kind);
    c.extend_from_slice(data);
    c.extend_from_slice(&crc32(&[kind.as_slice(), data].concat()).to_be_bytes());
    c
}

/// A well-formed PNG that claims `w × h` 8-bit grey pixels but carries only a few bytes.
fn png_claiming(w: u32, h: u32) -> Vec<u8> {
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    // zlib: header, one stored final block of 16 zero bytes, Adler-32 of 16 zeros.
    let mut idat = vec![0x78, 0x01, 0x01, 16, 0, !16u8, 0xFF];
    idat.extend_from_slice(&[0; 16]);
    idat.extend_from_slice(&0x0010_0001u32.to_be_bytes());
    [b"\x89PNG\r\n\x1a\n".to_vec(), png_chunk(b"IHDR", &ihdr), png_chunk(b"IDAT", &idat), png_chunk(b"IEND", &[])].concat()
}

/// A BMP header claiming `w × h` 24-bit pixels, followed by a few bytes.
fn bmp_claiming(w: i32, h: i32) -> Vec<u8> {
    let mut b = b"BM".to_vec();
    b.extend_from_slice(&(54u32 + 16).to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&54u32.to_le_bytes());
    b.extend_from_slice(&40u32.to_le_bytes());
    b.extend_from_slice(&w.to_le_bytes());
    b.extend_from_slice(&h.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&24u16.to_le_bytes());
    b.extend_from_slice(&[0; 24]);
    b.extend_from_slice(&[0; 16]);
    b
}

/// A PDF from numbered object bodies (object n is `objects[n - 1]`), catalog = object 1.
fn raw_pdf(objects: &[String]) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
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
    out.extend_from_slice(
        format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).as_bytes(),
    );
    out
}

fn stream(content: &str) -> String {
    format!("<< /Length {} >>\nstream\n{content}\nendstream", content.len())
}

const FONT: &str = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>";
const PAGE_TEXT: &str = "Cycles do not stop this page";

fn page(parent: u32, font: u32, contents: u32, extra_resources: &str) -> String {
    format!(
        "<< /Type /Page /Parent {parent} 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 {font} 0 R >>{extra_resources} >> /Contents {contents} 0 R >>"
    )
}

fn text_content() -> String {
    format!("BT /F1 12 Tf 72 700 Td ({PAGE_TEXT}) Tj ET")
}

// ---- running -----------------------------------------------------------------------------------

/// Write `files` into `team/<sub>/`, then a good Markdown file that sorts after them, register
/// the folder, run every job and return the sources by file name. The good file must end
/// indexed: the worker went on after the hostile ones.
async fn run_folder(app: &TestApp, k: &Kb, sub: &str, files: &[(&str, Vec<u8>)]) -> std::collections::HashMap<String, Value> {
    let dir = app.docs.join("team").join(sub);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    std::fs::write(dir.join("zz_after.md"), "# After\n\nthe good file after the hostile ones\n").unwrap();
    let r = register(k, app, &format!("team/{sub}")).await;
    assert_eq!(r["createdCount"], files.len() + 1, "{r}");
    let outcomes = app.run_jobs().await;
    assert_eq!(outcomes.len(), files.len() + 1, "every job ran to an end, none left to retry: {outcomes:?}");
    let all = sources_by_path(k).await;
    let prefix = format!("{sub}/");
    let sources: std::collections::HashMap<String, Value> =
        all.into_iter().filter_map(|(p, s)| p.strip_prefix(&prefix).map(|n| (n.to_string(), s))).collect();
    let after = &sources["zz_after.md"];
    assert_eq!((after["status"].as_str(), after["error"].is_null()), (Some("indexed"), true), "{after}");
    assert!(!rows(app, k.tenant, after).await.is_empty());
    sources
}

fn assert_failed(sources: &std::collections::HashMap<String, Value>, name: &str, code: &str) -> String {
    let s = &sources[name];
    assert_eq!((s["status"].as_str(), s["error"]["code"].as_str()), (Some("failed"), Some(code)), "{name}: {s}");
    s["error"]["message"].as_str().unwrap_or_default().to_string()
}

async fn assert_indexed(app: &TestApp, k: &Kb, sources: &std::collections::HashMap<String, Value>, name: &str) -> Vec<String> {
    let s = &sources[name];
    assert_eq!((s["status"].as_str(), s["error"].is_null()), (Some("indexed"), true), "{name}: {s}");
    rows(app, k.tenant, s).await.into_iter().map(|r| r.text).collect()
}

/// The stored artifact (text and source map) of a source, as JSON text.
async fn artifact_json(app: &TestApp, k: &Kb, source: &Value) -> String {
    let id: uuid::Uuid = source["id"].as_str().unwrap().parse().unwrap();
    let mut tx = TenantTx::begin(&app.pool, k.tenant, Scope::System).await.unwrap();
    let all: Vec<String> =
        sqlx::query_scalar("select a.text || a.source_map::text from source_artifact a where a.source_id = $1")
            .bind(id)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    assert!(!all.is_empty(), "no artifact stored");
    all.concat()
}

// ---- tests ---------------------------------------------------------------------------------------

#[tokio::test]
async fn decompression_bombs_fail_alone_without_inflating() {
    let prefix = format!(r#"<w:document xmlns:w="{W_NS}"><w:body><w:p><w:r><w:t xml:space="preserve"> "#);
    // 3 GiB of spaces from about 3 MB.
    let copies = (3u64 << 30) / 258;
    let bomb = deflate_bomb(prefix.as_bytes(), copies);
    assert!(bomb.len() < 4 << 20, "{}", bomb.len());
    // The stream really inflates to spaces (checked on its first megabyte).
    let probe = zip_raw("a.xml", &bomb, u32::MAX - 1, 0);
    let mut archive = zip::ZipArchive::new(Cursor::new(probe.as_slice())).unwrap();
    let mut first = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(archive.by_index(0).unwrap(), 1 << 20), &mut first).unwrap();
    assert_eq!(first.len(), 1 << 20);
    assert!(first.starts_with(prefix.as_bytes()) && first[prefix.len()..].iter().all(|&c| c == b' '));

    let total = prefix.len() as u64 + copies * 258;
    let files = vec![
        // Honest headers: refused before reading.
        ("declared.docx", zip_raw("word/document.xml", &bomb, u32::try_from(total).unwrap(), 0)),
        // Headers that lie (4 KiB): the read is cut at the limit.
        ("lying.docx", zip_raw("word/document.xml", &bomb, 4096, 0)),
        ("huge.png", png_claiming(100_000, 100_000)),
        ("huge_wide.png", png_claiming(u32::MAX >> 1, 1)),
        ("huge.bmp", bmp_claiming(100_000, 100_000)),
    ];
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let sources = run_folder(&app, &k, "bombs", &files).await;
    let declared = assert_failed(&sources, "declared.docx", "docx_malformed");
    assert!(declared.contains("declares"), "{declared}");
    let lying = assert_failed(&sources, "lying.docx", "docx_malformed");
    assert!(lying.contains("larger than"), "{lying}");
    for name in ["huge.png", "huge_wide.png", "huge.bmp"] {
        assert_failed(&sources, name, "image_unreadable");
    }
}

#[tokio::test]
async fn xml_entities_are_never_resolved() {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let secret_line = passwd.lines().next().unwrap().to_string();
    let dtd = r#"<!DOCTYPE w:document [
        <!ENTITY xxe SYSTEM "file:///etc/passwd">
        <!ENTITY % remote SYSTEM "file:///etc/passwd">
        %remote;
    ]>"#;
    let xxe = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>{dtd}<w:document xmlns:w="{W_NS}"><w:body>{}{}</w:body></w:document>"#,
        para("before &xxe; after"),
        para("second paragraph")
    );
    let styles = format!(
        r#"<?xml version="1.0"?><!DOCTYPE w:styles [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><w:styles xmlns:w="{W_NS}"><w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="&xxe;"/></w:style></w:styles>"#
    );
    let mut laughs = String::from(r#"<!ENTITY lol0 "lol">"#);
    for i in 1..10 {
        laughs += &format!(r#"<!ENTITY lol{i} "{}">"#, format!("&lol{};", i - 1).repeat(10));
    }
    let billion = format!(
        r#"<?xml version="1.0"?><!DOCTYPE w:document [{laughs}]><w:document xmlns:w="{W_NS}"><w:body>{}</w:body></w:document>"#,
        para("laugh &lol9; done")
    );
    let files =
        vec![("xxe.docx", docx_with(&xxe, &[("word/styles.xml", styles.as_bytes())])), ("laughs.docx", docx_with(&billion, &[]))];
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let sources = run_folder(&app, &k, "xml", &files).await;

    let texts = assert_indexed(&app, &k, &sources, "xxe.docx").await;
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[0].starts_with("before") && texts[0].ends_with("after") && texts[1] == "second paragraph", "{texts:?}");
    let art = artifact_json(&app, &k, &sources["xxe.docx"]).await;
    for leak in [secret_line.as_str(), "root:x:0:0", "/bin/"] {
        assert!(!art.contains(leak), "the artifact contains {leak:?} from /etc/passwd");
        assert!(!texts.iter().any(|t| t.contains(leak)));
    }

    let texts = assert_indexed(&app, &k, &sources, "laughs.docx").await;
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(texts[0].starts_with("laugh") && texts[0].ends_with("done") && texts[0].len() < 40, "{texts:?}");
    assert!(artifact_json(&app, &k, &sources["laughs.docx"]).await.len() < 10_000, "entities were not expanded");
}

#[tokio::test]
async fn cyclic_pdf_structures_fail_or_parse_without_looping() {
    let content = stream(&text_content());
    // The page tree's /Kids points back at the tree itself.
    let kids_self = raw_pdf(&["<< /Type /Catalog /Pages 2 0 R >>".into(), "<< /Type /Pages /Kids [2 0 R] /Count 1 >>".into()]);
    // A real page next to an intermediate node whose /Kids leads back to the root.
    let kids_loop = raw_pdf(&[
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>".into(),
        "<< /Type /Pages /Parent 2 0 R /Kids [2 0 R] /Count 1 >>".into(),
        page(2, 5, 6, ""),
        FONT.into(),
        content.clone(),
    ]);
    // Outline items whose /Next (and /First) point back at each other.
    let outline_loop = raw_pdf(&[
        "<< /Type /Catalog /Pages 2 0 R /Outlines 6 0 R >>".into(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".into(),
        page(2, 4, 5, ""),
        FONT.into(),
        content.clone(),
        "<< /Type /Outlines /First 7 0 R /Last 8 0 R /Count 2 >>".into(),
        "<< /Title (First) /Parent 6 0 R /Next 8 0 R /Dest [3 0 R /XYZ 0 720 0] >>".into(),
        "<< /Title (Second) /Parent 6 0 R /Prev 7 0 R /Next 7 0 R /First 7 0 R /Last 7 0 R /Count 1 /Dest [3 0 R /XYZ 0 700 0] >>"
            .into(),
    ]);
    // A form XObject that draws itself.
    let form_loop = raw_pdf(&[
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".into(),
        page(2, 4, 5, " /XObject << /X1 6 0 R >>"),
        FONT.into(),
        stream(&format!("{} /X1 Do", text_content())),
        {
            let c = "BT /F1 9 Tf 72 600 Td (form) Tj ET /X1 Do";
            format!(
                "<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /XObject << /X1 6 0 R >> /Font << /F1 4 0 R >> >> /Length {} >>\nstream\n{c}\nendstream",
                c.len()
            )
        },
    ]);
    let files = vec![
        ("kids_self.pdf", kids_self),
        ("kids_loop.pdf", kids_loop),
        ("outline_loop.pdf", outline_loop),
        ("form_loop.pdf", form_loop),
    ];
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let sources = run_folder(&app, &k, "cycles", &files).await;
    assert_failed(&sources, "kids_self.pdf", "pdf_malformed");
    assert_failed(&sources, "kids_loop.pdf", "pdf_malformed");

    assert_eq!(assert_indexed(&app, &k, &sources, "outline_loop.pdf").await, [PAGE_TEXT]);
    let id = sources["outline_loop.pdf"]["id"].as_str().unwrap();
    let (_, map) = k.client.get_json(&format!("/api/sources/{id}/source-map.json")).await;
    let titles: Vec<&str> = map["sections"].as_array().unwrap().iter().map(|s| s["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["First", "Second"], "each outline item once");

    let texts = assert_indexed(&app, &k, &sources, "form_loop.pdf").await;
    assert!(texts.iter().any(|t| t == PAGE_TEXT), "{texts:?}");
}

#[tokio::test]
async fn truncated_images_of_every_format_are_unreadable() {
    use image::{ImageFormat, Rgb, RgbImage};
    let img =
        RgbImage::from_fn(240, 120, |x, y| if (x / 12 + y / 12) % 2 == 0 { Rgb([20, 20, 20]) } else { Rgb([235, 235, 235]) });
    let mut files = Vec::new();
    for (format, ext) in [
        (ImageFormat::Jpeg, "jpg"),
        (ImageFormat::WebP, "webp"),
        (ImageFormat::Tiff, "tiff"),
        (ImageFormat::Bmp, "bmp"),
        (ImageFormat::Png, "png"),
    ] {
        let mut bytes = Vec::new();
        img.write_to(&mut Cursor::new(&mut bytes), format).unwrap();
        let half = bytes[..bytes.len() / 2].to_vec();
        if format == ImageFormat::Jpeg {
            files.push(("whole.jpg".to_string(), bytes));
        }
        files.push((format!("truncated.{ext}"), half));
    }
    let files: Vec<(&str, Vec<u8>)> = files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let sources = run_folder(&app, &k, "images", &files).await;
    for ext in ["jpg", "webp", "tiff", "bmp", "png"] {
        assert_failed(&sources, &format!("truncated.{ext}"), "image_unreadable");
    }
    // The same JPEG, whole, is read (a checkerboard: no text, no blocks).
    assert_indexed(&app, &k, &sources, "whole.jpg").await;
}

#[tokio::test]
async fn undecodable_text_fails_with_text_encoding_invalid() {
    let mut utf16 = vec![0xFF, 0xFE];
    utf16.extend("# 标题\n\n正文\n".encode_utf16().flat_map(|u| u.to_le_bytes()));
    let files = vec![
        ("utf16.md", utf16),
        ("latin1.txt", b"caf\xe9 cr\xe8me br\xfbl\xe9e\n".to_vec()),
        ("overlong.md", b"# slash \xc0\xaf here\n".to_vec()),
        ("surrogate.md", b"half \xed\xa0\x80 pair\n".to_vec()),
    ];
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let sources = run_folder(&app, &k, "text", &files).await;
    for (name, _) in &files {
        let msg = assert_failed(&sources, name, "text_encoding_invalid");
        assert!(msg.contains("UTF-8"), "{msg}");
    }
}

#[tokio::test]
async fn nul_and_control_characters_do_not_break_indexing() {
    // Valid UTF-8 that Postgres text and jsonb cannot hold (U+0000), in each text kind. It used
    // to fail the evidence write, leaving the job to be retried forever.
    let files = vec![
        ("nul.md", b"# Title\n\nbefore\x00after\n".to_vec()),
        ("nul.txt", b"plain\x00text\x01with controls\n".to_vec()),
        ("nul.docx", docx_with(&document(&(para("char refs &#0; and &#1; and &#x1F;") + &para("next"))), &[])),
    ];
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let sources = run_folder(&app, &k, "nul", &files).await;
    // Markdown and text: replaced one char for one, as CommonMark says.
    assert_eq!(assert_indexed(&app, &k, &sources, "nul.md").await, ["Title", "before\u{FFFD}after"]);
    assert_eq!(assert_indexed(&app, &k, &sources, "nul.txt").await, ["plain\u{FFFD}text\u{1}with controls"]);
    let docx = assert_indexed(&app, &k, &sources, "nul.docx").await;
    assert_eq!(docx.len(), 2, "{docx:?}");
    assert!(docx[0].starts_with("char refs") && !docx[0].contains('\0') && docx[1] == "next", "{docx:?}");
}

#[tokio::test]
async fn huge_single_lines_and_pathological_nesting() {
    const LIMIT: u64 = 8 << 20;
    let app = spawn_app_with(|c| c.parse_max_bytes = LIMIT).await;
    let k = kb_with_grant(&app).await;
    let line = |n: usize| {
        let mut s = "word ".repeat(n / 5);
        s.push('\n');
        s.into_bytes()
    };
    let nested_tables = {
        let n = 3000;
        document(
            &("<w:tbl><w:tr><w:tc>".repeat(n)
                + &para("deep cell")
                + &"</w:tc></w:tr></w:tbl>".repeat(n)
                + &para("after the table")),
        )
    };
    let nested_paras = document(&("<w:p><w:r>".repeat(20_000) + "<w:t>inner</w:t>" + &"</w:r></w:p>".repeat(20_000)));
    let files = vec![
        ("huge_line.md", line(20 << 20)),
        ("long_line.md", line(3 << 20)),
        ("quotes.md", [">".repeat(10_000).into_bytes(), b" deep quote\n\nafter\n".to_vec()].concat()),
        ("lists.md", ["- ".repeat(20_000).into_bytes(), b"deep item\n\nafter\n".to_vec()].concat()),
        ("indented.md", (0..1500).map(|i| format!("{}- item {i}\n", "  ".repeat(i))).collect::<String>().into_bytes()),
        ("brackets.md", ["[".repeat(50_000), "*a **b ".repeat(20_000), "<".repeat(10_000)].join("\n\n").into_bytes()),
        ("tables.docx", docx_with(&nested_tables, &[])),
        ("paras.docx", docx_with(&nested_paras, &[])),
    ];
    let sources = run_folder(&app, &k, "big", &files).await;
    let msg = assert_failed(&sources, "huge_line.md", "file_too_large");
    assert!(msg.contains(&LIMIT.to_string()), "{msg}");

    let long = assert_indexed(&app, &k, &sources, "long_line.md").await;
    assert_eq!(long.len(), 1);
    assert_eq!(long[0].len(), (3 << 20) / 5 * 5 - 1, "the whole line is one block");

    assert_eq!(assert_indexed(&app, &k, &sources, "quotes.md").await, ["deep quote", "after"]);
    assert_eq!(assert_indexed(&app, &k, &sources, "lists.md").await, ["deep item", "after"]);
    let items = assert_indexed(&app, &k, &sources, "indented.md").await;
    assert_eq!(items.len(), 1500);
    assert_eq!((items[0].as_str(), items[1499].as_str()), ("item 0", "item 1499"));
    assert_eq!(assert_indexed(&app, &k, &sources, "brackets.md").await.len(), 3);
    assert_eq!(assert_indexed(&app, &k, &sources, "tables.docx").await, ["deep cell", "after the table"]);
    let paras = assert_indexed(&app, &k, &sources, "paras.docx").await;
    assert!(paras.len() <= 1 && paras.iter().all(|p| p == "inner"), "{paras:?}");
}

#[tokio::test]
async fn odd_file_names_are_registered_and_parsed() {
    use std::os::unix::ffi::OsStrExt;
    let names = [
        "-rf.md",
        "--kind=pdf.md",
        "line\nbreak.md",
        "tab\there.md",
        "quote\"'`$(id).md",
        "back\\slash.md",
        " leading and trailing .md",
        "emoji 🦀 名字.md",
        "*.md",
        "[a-z]?.md",
    ];
    let long = format!("{}.md", "a".repeat(250));
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let dir = app.docs.join("team/odd");
    std::fs::create_dir_all(&dir).unwrap();
    for n in names.iter().copied().chain([long.as_str()]) {
        std::fs::write(dir.join(n), format!("# Heading\n\nbody of {n:?}\n")).unwrap();
    }
    // Not UTF-8: cannot be named in the API or stored as a resource path; skipped, not fatal.
    std::fs::write(dir.join(std::ffi::OsStr::from_bytes(b"latin\xe9.md")), "# x\n").unwrap();
    let r = register(&k, &app, "team/odd").await;
    assert_eq!((r["createdCount"].as_u64(), r["skippedCount"].as_u64()), (Some(names.len() as u64 + 1), Some(1)), "{r}");
    let outcomes = app.run_jobs().await;
    assert_eq!(outcomes.len(), names.len() + 1, "{outcomes:?}");
    // Registering one by name finds the same source (the parser gets absolute paths, so a
    // leading dash is never taken for an option); unchanged, it is not parsed again.
    let (st, one) = k
        .client
        .post_json(&format!("/api/kbs/{}/sources", k.kb), serde_json::json!({"path": app.docs_path("team/odd/-rf.md")}))
        .await;
    assert!(st.is_success(), "{one}");
    assert_eq!(one["resourcePath"], "odd/-rf.md");
    assert_eq!(app.run_jobs().await, vec![]);
    let sources = sources_by_path(&k).await;
    for n in names.iter().copied().chain([long.as_str()]) {
        let s = &sources[&format!("odd/{n}")];
        assert_eq!((s["status"].as_str(), s["error"].is_null()), (Some("indexed"), true), "{n:?}: {s}");
        let rows = rows(&app, k.tenant, s).await;
        assert_eq!(rows.len(), 2, "{n:?}");
        assert_eq!(rows[1].text, format!("body of {n:?}"));
        assert_eq!(rows[1].locator["resourcePath"], format!("odd/{n}"));
    }
}

#[tokio::test]
async fn a_database_refusing_the_evidence_write_fails_the_source_after_bounded_retries() {
    use mnote::{ingest::pipeline::Outcome, sources::queue::MAX_ATTEMPTS};
    let app = spawn_app().await;
    // The owner adds a trigger that refuses any block holding a marker word: the parse
    // succeeds, the evidence write does not (as a constraint or a full disk would).
    for sql in [
        "create function refuse_marker() returns trigger language plpgsql as $$
         begin if new.text like '%REFUSEME%' then raise exception 'refused by a test trigger'; end if; return new; end $$",
        "create trigger refuse_marker before insert on evidence_block for each row execute function refuse_marker()",
    ] {
        sqlx::query(sql).execute(&app.owner_pool).await.unwrap();
    }
    let k = kb_with_grant(&app).await;
    let dir = app.docs.join("team/refuse");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("bad.md"), "# Bad\n\nthis paragraph says REFUSEME\n").unwrap();
    std::fs::write(dir.join("good.md"), "# Good\n\nindexed normally\n").unwrap();
    register(&k, &app, "team/refuse").await;

    let mut outcomes = app.run_jobs().await;
    for _ in 1..MAX_ATTEMPTS {
        // Skip the backoff.
        let mut tx = TenantTx::begin(&app.pool, k.tenant, Scope::System).await.unwrap();
        sqlx::query("update ingest_job set run_after = now() where status = 'queued'").execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
        outcomes.extend(app.run_jobs().await);
    }
    let retrying = Outcome::Retrying { code: "index_failed".into() };
    assert_eq!(outcomes.iter().filter(|o| **o == retrying).count(), (MAX_ATTEMPTS - 1) as usize, "{outcomes:?}");
    assert!(outcomes.contains(&Outcome::Failed { code: "index_failed".into() }), "{outcomes:?}");
    assert!(app.run_jobs().await.is_empty(), "nothing is left to retry");

    let sources = sources_by_path(&k).await;
    let bad = &sources["refuse/bad.md"];
    assert_eq!((bad["status"].as_str(), bad["error"]["code"].as_str()), (Some("failed"), Some("index_failed")), "{bad}");
    assert!(bad["error"]["message"].as_str().unwrap().contains("refused by a test trigger"), "{bad}");
    assert_eq!(sources["refuse/good.md"]["status"], "indexed");
    let mut tx = TenantTx::begin(&app.pool, k.tenant, Scope::System).await.unwrap();
    let open: i64 = sqlx::query_scalar("select count(*) from ingest_job where status in ('queued', 'running')")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(open, 0);
}

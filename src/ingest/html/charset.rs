//! The character encoding of an HTML file, in the order a browser decides it (WHATWG
//! "determining the character encoding", without a transport layer): a byte order mark, then
//! a `<meta charset>` / `<meta http-equiv="Content-Type">` or an XML declaration in the first
//! 1024 bytes, then valid UTF-8, then a guess from the bytes (`chardetng`, which knows GBK,
//! GB18030, Big5, Shift_JIS, the Windows code pages…).

use encoding_rs::{Encoding, UTF_8};

/// How far a declaration is looked for (the WHATWG prescan's limit).
const PRESCAN: usize = 1024;

/// Decode `bytes` as the page says (or, without a word about it, as it looks).
pub fn decode(bytes: &[u8]) -> (String, &'static Encoding) {
    let encoding = detect(bytes);
    let (text, used, _) = encoding.decode(bytes);
    (text.into_owned(), used)
}

fn detect(bytes: &[u8]) -> &'static Encoding {
    if let Some((enc, _)) = Encoding::for_bom(bytes) {
        return enc;
    }
    if let Some(enc) = declared(&bytes[..bytes.len().min(PRESCAN)]) {
        return enc;
    }
    if std::str::from_utf8(bytes).is_ok() {
        return UTF_8;
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    detector.feed(bytes, true);
    detector.guess(None, chardetng::Utf8Detection::Allow)
}

/// The encoding a `<meta>` or `<?xml … encoding="…"?>` names in `head` (ASCII-compatible
/// declarations only: a page that declares UTF-16 in ASCII is not UTF-16, so it reads UTF-8).
fn declared(head: &[u8]) -> Option<&'static Encoding> {
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut found = None;
    if lower.starts_with(b"<?xml") {
        let end = find(&lower, b"?>", 0).unwrap_or(lower.len());
        found = attribute_value(&lower[..end], b"encoding").and_then(|v| Encoding::for_label(&head[v.0..v.1]));
    }
    let mut at = 0;
    while found.is_none() {
        let Some(start) = find(&lower, b"<meta", at) else { break };
        let end = find(&lower, b">", start).unwrap_or(lower.len());
        let tag = &lower[start..end];
        found = attribute_value(tag, b"charset").and_then(|(a, b)| Encoding::for_label(&head[start + a..start + b]));
        at = end;
    }
    found.map(Encoding::output_encoding)
}

/// The byte range of `name`'s value in `tag` (`name="v"`, `name='v'` or `name=v`; also the
/// `charset=` inside an http-equiv `content` value).
fn attribute_value(tag: &[u8], name: &[u8]) -> Option<(usize, usize)> {
    let mut at = 0;
    loop {
        let i = find(tag, name, at)?;
        let mut j = i + name.len();
        while tag.get(j).is_some_and(|c| c.is_ascii_whitespace()) {
            j += 1;
        }
        if tag.get(j) != Some(&b'=') {
            at = i + 1;
            continue;
        }
        j += 1;
        while tag.get(j).is_some_and(|c| c.is_ascii_whitespace()) {
            j += 1;
        }
        let quote = tag.get(j).copied().filter(|c| *c == b'"' || *c == b'\'');
        let start = j + usize::from(quote.is_some());
        let stops = |c: u8| match quote {
            Some(q) => c == q,
            None => c.is_ascii_whitespace() || matches!(c, b';' | b'>' | b'"' | b'\''),
        };
        let end = (start..tag.len()).find(|&k| stops(tag[k])).unwrap_or(tag.len());
        return (end > start).then_some((start, end));
    }
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_charset_decides() {
        let (html, _, _) = encoding_rs::GBK.encode("<html><head><meta charset=\"gb2312\"><title>预算</title></head></html>");
        let (text, enc) = decode(&html);
        assert_eq!(enc.name(), "GBK");
        assert!(text.contains("预算"), "{text}");
    }

    #[test]
    fn an_http_equiv_content_type_decides() {
        let src = "<meta http-equiv='Content-Type' content='text/html; charset=Big5'><p>會議紀錄</p>";
        let (bytes, _, _) = encoding_rs::BIG5.encode(src);
        let (text, enc) = decode(&bytes);
        assert_eq!(enc.name(), "Big5");
        assert!(text.contains("會議紀錄"));
    }

    #[test]
    fn an_xml_declaration_decides_for_xhtml() {
        let src = "<?xml version=\"1.0\" encoding=\"GB18030\"?><html><body><p>出差住宿</p></body></html>";
        let (bytes, _, _) = encoding_rs::GB18030.encode(src);
        assert_eq!(decode(&bytes).1.name(), "gb18030");
    }

    #[test]
    fn a_bom_wins_and_undeclared_pages_are_guessed() {
        let mut utf16 = vec![0xFF, 0xFE];
        for u in "<p>预算金额</p>".encode_utf16() {
            utf16.extend(u.to_le_bytes());
        }
        assert_eq!(decode(&utf16).0, "<p>预算金额</p>");
        assert_eq!(decode("<p>plain</p>".as_bytes()).1, UTF_8);
        let (gbk, _, _) = encoding_rs::GBK.encode("<p>农贸市场经营管理权项目的预算金额是七十万元，合同期限三年。</p>");
        assert!(decode(&gbk).0.contains("预算金额"));
    }

    #[test]
    fn a_declared_utf16_in_ascii_reads_as_utf8() {
        assert_eq!(decode(b"<meta charset=utf-16><p>x</p>").1, UTF_8);
    }
}

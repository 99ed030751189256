//! CSV and TSV: the encoding found (a byte-order mark, else UTF-8 when the bytes are valid
//! UTF-8, else chardetng on the first 256 KiB: GB18030/GBK, Big5, …) and decoded by encoding_rs, the delimiter sniffed (comma, tab, semicolon, pipe),
//! then the records as sheet-less rows with their physical line numbers.

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE};

use super::grid::{GridCell, GridRow, Limits, SheetGrid, Workbook};
use crate::ingest::ParseError;

const DELIMITERS: [u8; 4] = [b',', b'\t', b';', b'|'];
/// Lines the sniffer looks at.
const SNIFF_LINES: usize = 50;

/// How much of a file without a BOM that is not UTF-8 chardetng reads to name its encoding.
const DETECT_BYTES: usize = 256 << 10;

/// The text of a delimited file and the encoding it was decoded from.
pub fn decode(bytes: &[u8]) -> Result<(String, &'static Encoding), ParseError> {
    let encoding = match Encoding::for_bom(bytes) {
        Some((enc, _)) => enc,
        // Valid UTF-8 is UTF-8 (what chardetng would guess too, after reading all of it).
        None if std::str::from_utf8(bytes).is_ok() => UTF_8,
        None => {
            // The first part tells the legacy encoding; a byte past it that does not decode is
            // still `text_encoding_invalid` below.
            let mut det = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
            let head = &bytes[..bytes.len().min(DETECT_BYTES)];
            det.feed(head, head.len() == bytes.len());
            det.guess(None, chardetng::Utf8Detection::Allow)
        }
    };
    // `decode` removes a BOM of the encoding found (and follows a BOM over the guess).
    let (text, used, had_errors) = encoding.decode(bytes);
    if had_errors {
        let msg = format!("the file is not valid {} text (the detected encoding)", used.name());
        return Err(ParseError::new("text_encoding_invalid", msg));
    }
    if used != UTF_16LE && used != UTF_16BE && text.contains('\u{0}') {
        return Err(ParseError::new("text_encoding_invalid", "NUL characters: not a text file"));
    }
    Ok((text.into_owned(), used))
}

/// The delimiter that splits the first lines most consistently (outside quotes); ties go to
/// `preferred` (tab for `.tsv`), then to the order comma, tab, semicolon, pipe.
pub fn sniff_delimiter(text: &str, preferred: u8) -> u8 {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).take(SNIFF_LINES).collect();
    let mut best = (0usize, 0usize, preferred);
    let mut order: Vec<u8> = vec![preferred];
    order.extend(DELIMITERS.iter().copied().filter(|d| *d != preferred));
    for d in order {
        let counts: Vec<usize> = lines.iter().map(|l| count_outside_quotes(l, d)).collect();
        let Some(mode) = mode_of(&counts) else { continue };
        if mode == 0 {
            continue;
        }
        let agree = counts.iter().filter(|c| **c == mode).count();
        if (agree, mode) > (best.0, best.1) {
            best = (agree, mode, d);
        }
    }
    best.2
}

fn count_outside_quotes(line: &str, d: u8) -> usize {
    let mut quoted = false;
    line.bytes()
        .filter(|b| {
            if *b == b'"' {
                quoted = !quoted;
            }
            !quoted && *b == d
        })
        .count()
}

fn mode_of(counts: &[usize]) -> Option<usize> {
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    let mut best: Option<(usize, usize)> = None;
    for chunk in sorted.chunk_by(|a, b| a == b) {
        if best.is_none_or(|(n, _)| chunk.len() > n) {
            best = Some((chunk.len(), chunk[0]));
        }
    }
    best.map(|(_, v)| v)
}

/// Read a delimited file: one sheet without a name; row `n` is the `n`-th record (blank lines
/// are no records), each with the physical lines it spans.
pub fn read_delimited(bytes: &[u8], file_name: &str, limits: &Limits) -> Result<Workbook, ParseError> {
    let (text, _) = decode(bytes)?;
    let tsv = file_name.to_ascii_lowercase().ends_with(".tsv");
    let delimiter = sniff_delimiter(&text, if tsv { b'\t' } else { b',' });
    let mut reader =
        csv::ReaderBuilder::new().has_headers(false).flexible(true).delimiter(delimiter).from_reader(text.as_bytes());
    let mut rows = Vec::new();
    let mut truncated = false;
    let mut record = csv::StringRecord::new();
    let mut index: u32 = 0;
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(super::grid::malformed(format!("CSV record {}: {e}", index + 1))),
        }
        let first_line = record.position().map(|p| p.line() as u32).unwrap_or(0);
        let newlines: usize = record.iter().map(|f| f.matches('\n').count()).sum();
        let cells: Vec<GridCell> = record
            .iter()
            .enumerate()
            .filter_map(|(c, f)| {
                let t = f.trim();
                (!t.is_empty()).then(|| GridCell { col: c as u32, text: t.to_string() })
            })
            .collect();
        let row = index;
        index += 1;
        if cells.is_empty() {
            continue;
        }
        if rows.len() >= limits.max_rows {
            truncated = true;
            break;
        }
        rows.push(GridRow { row, lines: Some([first_line, first_line + newlines as u32]), cells });
    }
    Ok(Workbook { sheets: vec![SheetGrid { name: None, hidden: false, rows, merges: Default::default() }], truncated })
}

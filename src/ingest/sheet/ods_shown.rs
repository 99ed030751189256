//! ODS cells as the file shows them. An OpenDocument spreadsheet stores a number's value
//! (`office:value="0.125"`) and, in the cell's `text:p`, the text its application displayed
//! with the cell's format (`12.50%`, `¥1,200`, `2027-03-01`). calamine reads the value; this
//! reads `content.xml` once more for the displayed text of every cell that is not a string, so
//! an ODS cell is indexed as it reads on screen, as an XLSX cell is through its number format.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use crate::ingest::ParseError;

/// `(sheet index, row, column)` → the displayed text (0-based, as calamine counts them).
pub type Shown = HashMap<(usize, u32, u32), String>;

/// `content.xml` larger than this is not read again (its values are kept as calamine reads them).
const MAX_CONTENT: u64 = 256 << 20;
/// Repeated rows or columns past this are empty filler (`number-rows-repeated="1048000"`).
const MAX_REPEAT: u32 = 1 << 20;

/// The displayed text of every non-string cell of every sheet, in sheet order.
pub fn read(bytes: &[u8]) -> Result<Shown, ParseError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| super::container::malformed(format!("ODS: {e}")))?;
    let Ok(file) = zip.by_name("content.xml") else { return Ok(Shown::new()) };
    if file.size() > MAX_CONTENT {
        return Ok(Shown::new());
    }
    let mut xml = Vec::new();
    file.take(MAX_CONTENT).read_to_end(&mut xml).map_err(|e| super::container::malformed(format!("ODS content.xml: {e}")))?;
    cells(&xml)
}

/// Where the reader is in `content.xml`.
#[derive(Default)]
struct At {
    sheet: Option<usize>,
    sheets: usize,
    row: u32,
    /// The open row's `number-rows-repeated`.
    row_span: u32,
    col: u32,
    /// The cell being read: its column span, whether it shows a non-string value, its text.
    cell: Option<(u32, bool, String)>,
    in_p: bool,
    /// Paragraphs of the cell so far (joined by a line break).
    paras: u32,
}

fn cells(xml: &[u8]) -> Result<Shown, ParseError> {
    let mut r = Reader::from_reader(xml);
    let mut at = At::default();
    let mut shown = Shown::new();
    loop {
        let ev = match r.read_event() {
            Ok(Event::DocType(_)) => {
                return Err(ParseError::new("xml_dtd_refused", "content.xml declares a DTD (entities are never expanded)"));
            }
            Ok(ev) => ev,
            Err(e) => return Err(super::container::malformed(format!("ODS content.xml: {e}"))),
        };
        match ev {
            Event::Start(e) => open(&mut at, &e, false),
            Event::Empty(e) => open(&mut at, &e, true),
            Event::End(e) => close(&mut at, e.local_name().as_ref().as_bytes(), &mut shown),
            Event::Text(t) if at.in_p => {
                if let Some((_, true, text)) = at.cell.as_mut() {
                    text.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(g) if at.in_p => {
                if let Some((_, true, text)) = at.cell.as_mut() {
                    match g.resolve_char_ref() {
                        Ok(Some(c)) => text.push(c),
                        _ => text.push_str(quick_xml::escape::resolve_predefined_entity(&g).unwrap_or("")),
                    }
                }
            }
            Event::Eof => return Ok(shown),
            _ => {}
        }
    }
}

fn repeat(e: &BytesStart<'_>, name: &[u8]) -> u32 {
    e.attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref().as_bytes() == name)
        .and_then(|a| a.normalized_value(quick_xml::XmlVersion::Implicit1_0).ok()?.parse::<u32>().ok())
        .unwrap_or(1)
        .clamp(1, MAX_REPEAT)
}

fn open(at: &mut At, e: &BytesStart<'_>, empty: bool) {
    match e.local_name().as_ref().as_bytes() {
        b"table" if !empty => {
            at.sheet = Some(at.sheets);
            at.sheets += 1;
            at.row = 0;
        }
        // An empty sheet still counts in calamine's order.
        b"table" => at.sheets += 1,
        b"table-row" if empty => at.row = at.row.saturating_add(repeat(e, b"number-rows-repeated")),
        b"table-row" => {
            at.col = 0;
            at.row_span = repeat(e, b"number-rows-repeated");
        }
        b"table-cell" | b"covered-table-cell" => {
            let span = repeat(e, b"number-columns-repeated");
            let typed = e.attributes().flatten().any(|a| {
                a.key.local_name().as_ref() == "value-type"
                    && a.normalized_value(quick_xml::XmlVersion::Implicit1_0).is_ok_and(|v| !matches!(v.as_ref(), "string" | ""))
            });
            if empty {
                at.col = at.col.saturating_add(span);
            } else {
                at.cell = Some((span, typed, String::new()));
                at.paras = 0;
            }
        }
        b"p" if !empty && at.cell.is_some() => {
            if let Some((_, true, text)) = at.cell.as_mut()
                && at.paras > 0
            {
                text.push('\n');
            }
            at.paras += 1;
            at.in_p = true;
        }
        _ => {}
    }
}

fn close(at: &mut At, name: &[u8], shown: &mut Shown) {
    match name {
        b"p" => at.in_p = false,
        b"table-cell" | b"covered-table-cell" => {
            if let Some((span, typed, text)) = at.cell.take() {
                if typed
                    && !text.trim().is_empty()
                    && let Some(sheet) = at.sheet
                {
                    // A repeated value shows the same text in each of its columns.
                    for c in 0..span.min(1024) {
                        shown.insert((sheet, at.row, at.col + c), text.trim().to_string());
                    }
                }
                at.col = at.col.saturating_add(span);
            }
        }
        b"table-row" => at.row = at.row.saturating_add(at.row_span.max(1)),
        b"table" => at.sheet = None,
        _ => {}
    }
}

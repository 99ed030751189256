//! A [`Workbook`] as a source map: one section per sheet (its name), one `table_row` block per
//! non-empty row whose text carries the header names (`Owner: finance | Amount: 700000`), a
//! long text cell as its own paragraph block with a single-cell range.
//!
//! The header row is the first non-empty row of a sheet when every cell of it is text (no
//! number, no date); otherwise the columns are named by their letters. The header row is a
//! block of its own (its cells joined by ` | `). A merged region's value sits at its top-left
//! cell; the block's range covers the region.

use super::grid::{GridRow, SheetGrid, Workbook};
use crate::evidence::cells::{col_letters, range_ref};
use crate::ingest::artifact::{self, Block, BlockType, SectionTree, TextBuilder};

/// A cell longer than this (in characters) becomes its own block.
pub const LONG_CELL: usize = 200;

/// The blocks and sections of a workbook, and the artifact text they index into.
pub struct Assembled {
    pub text: String,
    pub blocks: Vec<Block>,
    pub sections: Vec<artifact::Section>,
}

pub fn assemble(wb: &Workbook) -> Assembled {
    let mut out = Out { tb: TextBuilder::default(), blocks: Vec::new(), tree: SectionTree::default() };
    for sheet in &wb.sheets {
        if let Some(name) = &sheet.name {
            out.tree.open(name.clone(), 1, |_| {});
        }
        sheet_blocks(sheet, &mut out);
    }
    Assembled { text: out.tb.finish(), blocks: out.blocks, sections: out.tree.sections }
}

struct Out {
    tb: TextBuilder,
    blocks: Vec<Block>,
    tree: SectionTree,
}

/// Whether a cell reads as a number or a date (not a header name).
fn is_value(s: &str) -> bool {
    let t = s.replace([',', '%', '$', '¥', '€', '£'], "");
    t.trim().parse::<f64>().is_ok() || looks_like_date(s)
}

fn looks_like_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[7] == b'-'
}

/// The header names by column (only for a header row that reads as one).
fn header_names(sheet: &SheetGrid) -> Option<Vec<(u32, String)>> {
    let first = sheet.rows.first()?;
    if sheet.rows.len() < 2 || first.cells.iter().any(|c| is_value(&c.text) || c.text.chars().count() > LONG_CELL) {
        return None;
    }
    let mut names = Vec::new();
    for c in &first.cells {
        let one_line = c.text.split_whitespace().collect::<Vec<_>>().join(" ");
        let last = sheet.merge_at(first.row, c.col).map(|m| m.1.1).unwrap_or(c.col);
        for col in c.col..=last {
            names.push((col, one_line.clone()));
        }
    }
    Some(names)
}

/// The header row of a sheet (0-based), when its first non-empty row reads as one.
pub fn header_row(sheet: &SheetGrid) -> Option<u32> {
    header_names(sheet).and_then(|_| sheet.rows.first()).map(|r| r.row)
}

fn sheet_blocks(sheet: &SheetGrid, out: &mut Out) {
    let names = header_names(sheet);
    let name_of = |col: u32| -> String {
        names.as_ref().and_then(|n| n.iter().find(|(c, _)| *c == col)).map(|(_, n)| n.clone()).unwrap_or_else(|| col_letters(col))
    };
    for (i, row) in sheet.rows.iter().enumerate() {
        let header = i == 0 && names.is_some();
        let mut parts = Vec::new();
        let (mut first, mut last) = ((row.row, u32::MAX), (row.row, 0u32));
        for c in &row.cells {
            let span = sheet.merge_at(row.row, c.col).unwrap_or(((row.row, c.col), (row.row, c.col)));
            if c.text.chars().count() > LONG_CELL {
                push(out, sheet, row, BlockType::Paragraph, c.text.clone(), range_ref(span.0, span.1));
                continue;
            }
            first.1 = first.1.min(span.0.1);
            last = (last.0.max(span.1.0), last.1.max(span.1.1));
            parts.push(if header { c.text.clone() } else { format!("{}: {}", name_of(c.col), c.text) });
        }
        if !parts.is_empty() {
            push(out, sheet, row, BlockType::TableRow, parts.join(" | "), range_ref(first, last));
        }
    }
}

fn push(out: &mut Out, sheet: &SheetGrid, row: &GridRow, block_type: BlockType, text: String, range: String) {
    let id = format!("b{}", out.blocks.len() + 1);
    let section_id = out.tree.add_block(&id);
    out.blocks.push(Block {
        id,
        block_type,
        char_range: out.tb.push_block(&text),
        section_id,
        line_range: row.lines,
        sheet: sheet.name.clone(),
        sheet_hidden: sheet.name.as_ref().map(|_| sheet.hidden),
        cell_range: Some(range),
        text_fingerprint: artifact::fingerprint(&text),
        ..Block::flowing(text)
    });
}

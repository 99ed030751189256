//! The cells of a workbook as the file shows them: sheets in workbook order, their non-empty
//! rows and cells (0-based positions), merged regions and visibility. Read by the provider
//! (blocks) and by the viewer (the grid), from the original bytes, with the same limits.
//!
//! XLSX/XLSM are read as a stream of cells (calamine's cell reader: no dense range, so a sheet
//! whose two cells lie a million rows apart costs two cells); ODS and XLS through calamine's
//! ranges. Values are the cached ones: no formula is evaluated, no macro is read.

use std::collections::BTreeMap;
use std::io::Cursor;

use calamine::{Dimensions, Ods, Reader, SheetType, SheetVisible, Xls, Xlsx};

use super::{cells, container};
use crate::ingest::ParseError;

/// What one read may take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Non-empty rows kept over all sheets; the rest are left out and the read is `truncated`.
    pub max_rows: usize,
    pub container: container::Caps,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_rows: 200_000, container: container::Caps::default() }
    }
}

/// A non-empty cell: 0-based column and its displayed text.
#[derive(Clone, Debug, PartialEq)]
pub struct GridCell {
    pub col: u32,
    pub text: String,
}

/// A row with at least one non-empty cell.
#[derive(Clone, Debug, PartialEq)]
pub struct GridRow {
    /// 0-based row.
    pub row: u32,
    /// CSV: the record's physical lines, 1-based inclusive.
    pub lines: Option<[u32; 2]>,
    pub cells: Vec<GridCell>,
}

/// A merged region: inclusive 0-based (row, col) corners; the value sits at `first`.
pub type Merge = ((u32, u32), (u32, u32));

#[derive(Clone, Debug, PartialEq)]
pub struct SheetGrid {
    /// `None` for CSV (no sheets).
    pub name: Option<String>,
    pub hidden: bool,
    pub rows: Vec<GridRow>,
    /// Merged regions by their top-left cell (at most [`MAX_MERGES`]; more are ignored).
    pub merges: BTreeMap<(u32, u32), (u32, u32)>,
}

/// Merged regions read per sheet; a file with more only loses the region marks beyond.
pub const MAX_MERGES: usize = 50_000;

fn merge_map(d: &[Dimensions]) -> BTreeMap<(u32, u32), (u32, u32)> {
    d.iter().take(MAX_MERGES).map(|d| (d.start, d.end)).collect()
}

impl SheetGrid {
    /// One past the last used column (merges included).
    pub fn width(&self) -> u32 {
        let cells = self.rows.iter().filter_map(|r| r.cells.last()).map(|c| c.col + 1).max().unwrap_or(0);
        cells.max(self.merges.values().map(|end| end.1 + 1).max().unwrap_or(0))
    }

    /// The merged region whose top-left cell is `(row, col)`.
    pub fn merge_at(&self, row: u32, col: u32) -> Option<Merge> {
        self.merges.get(&(row, col)).map(|end| ((row, col), *end))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Workbook {
    pub sheets: Vec<SheetGrid>,
    /// Rows were left out at [`Limits::max_rows`].
    pub truncated: bool,
}

/// The container formats calamine reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Xlsx,
    Ods,
    Xls,
}

/// Which reader a file needs, by its bytes (the extension only breaks the tie of an OLE file:
/// an `.xls` is a workbook, an `.xlsx` in an OLE file is an encrypted package).
pub fn format_of(bytes: &[u8], file_name: &str) -> Result<Format, ParseError> {
    let ext = file_name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    if bytes.starts_with(&container::OLE_MAGIC) {
        return Ok(Format::Xls);
    }
    if !bytes.starts_with(b"PK") {
        let what = if ext == "xls" { "not an Excel 97-2003 workbook" } else { "not a zip container" };
        return Err(malformed(what));
    }
    Ok(if ext == "ods" || container::is_ods(bytes) { Format::Ods } else { Format::Xlsx })
}

pub use super::container::malformed;

fn encrypted() -> ParseError {
    ParseError::new("encrypted", "the workbook is password-protected (encrypted): it cannot be read without its password")
}

/// Read every sheet of a workbook.
pub fn read_workbook(bytes: &[u8], file_name: &str, limits: &Limits) -> Result<Workbook, ParseError> {
    let format = format_of(bytes, file_name)?;
    if format != Format::Xls {
        container::check_zip(bytes, &limits.container)?;
    }
    match format {
        Format::Xlsx => read_xlsx(bytes, limits),
        Format::Ods => {
            let wb = Ods::new(Cursor::new(bytes)).map_err(|e| map_error(&calamine::Error::Ods(e)))?;
            read_ranges(wb, limits, &super::ods_shown::read(bytes)?, |_, _| Vec::new())
        }
        Format::Xls => match Xls::new(Cursor::new(bytes)) {
            Ok(wb) => read_ranges(wb, limits, &Default::default(), |wb: &Xls<_>, name| {
                wb.merge_cells_by_sheet_name(name).unwrap_or_default()
            }),
            Err(calamine::XlsError::Password) => Err(encrypted()),
            // An OLE file that is no workbook, named like an OOXML file: Office's encrypted package.
            Err(_) if !file_name.to_ascii_lowercase().ends_with(".xls") => Err(encrypted()),
            Err(e) => Err(map_error(&calamine::Error::Xls(e))),
        },
    }
}

/// calamine's errors as our codes (never its panics: it returns these).
pub fn map_error(e: &calamine::Error) -> ParseError {
    use calamine::{Error, OdsError, XlsError, XlsxError};
    match e {
        Error::Xlsx(XlsxError::Password) | Error::Xls(XlsError::Password) | Error::Ods(OdsError::Password) => encrypted(),
        other => malformed(format!("the workbook cannot be read: {other}")),
    }
}

fn visible(v: SheetVisible) -> bool {
    v == SheetVisible::Visible
}

/// Keeps the row budget over all sheets.
struct Budget {
    left: usize,
    truncated: bool,
}

impl Budget {
    /// Whether one more row may be kept (else the read is truncated).
    fn take(&mut self) -> bool {
        if self.left == 0 {
            self.truncated = true;
            return false;
        }
        self.left -= 1;
        true
    }
}

fn read_xlsx(bytes: &[u8], limits: &Limits) -> Result<Workbook, ParseError> {
    let xerr = |e: calamine::XlsxError| map_error(&calamine::Error::Xlsx(e));
    let mut wb: Xlsx<_> = Xlsx::new(Cursor::new(bytes)).map_err(xerr)?;
    let metas: Vec<_> = wb.sheets_metadata().iter().filter(|s| s.typ == SheetType::WorkSheet).cloned().collect();
    let mut budget = Budget { left: limits.max_rows, truncated: false };
    let mut sheets = Vec::new();
    for m in metas {
        if budget.truncated {
            break;
        }
        let merges = merge_map(&wb.merge_cells_by_sheet_name(&m.name).map_err(xerr)?);
        let rows = xlsx_rows(&mut wb, &m.name, &mut budget).map_err(xerr)?;
        sheets.push(SheetGrid { name: Some(m.name), hidden: !visible(m.visible), rows, merges });
    }
    Ok(Workbook { sheets, truncated: budget.truncated })
}

fn xlsx_rows(wb: &mut Xlsx<Cursor<&[u8]>>, name: &str, budget: &mut Budget) -> Result<Vec<GridRow>, calamine::XlsxError> {
    let mut reader = wb.worksheet_cells_reader(name)?;
    let mut rows: Vec<GridRow> = Vec::new();
    while let Some((cell, style)) = reader.next_cell_with_style_id()? {
        let format = reader.styles().get(style).and_then(|s| s.number_format.as_ref()).map(|f| f.format_code.as_str());
        let Some(text) = cells::display(cell.get_value(), format) else { continue };
        let (row, col) = cell.get_position();
        if !push_cell(&mut rows, row, col, text, budget) {
            break;
        }
    }
    Ok(rows)
}

/// Add a cell to the rows read so far (cells come row by row); `false` once the budget is
/// spent.
fn push_cell(rows: &mut Vec<GridRow>, row: u32, col: u32, text: String, budget: &mut Budget) -> bool {
    match rows.last_mut() {
        Some(last) if last.row == row => {
            last.cells.push(GridCell { col, text });
            return true;
        }
        _ => {}
    }
    if !budget.take() {
        return false;
    }
    rows.push(GridRow { row, lines: None, cells: vec![GridCell { col, text }] });
    true
}

/// ODS and XLS: each sheet's range (calamine reads them whole), its used cells in row order;
/// `shown`: the text an ODS file displays for its non-string cells, used in place of the value.
fn read_ranges<'b, R>(
    mut wb: R,
    limits: &Limits,
    shown: &super::ods_shown::Shown,
    merges: impl Fn(&R, &str) -> Vec<Dimensions>,
) -> Result<Workbook, ParseError>
where
    R: Reader<Cursor<&'b [u8]>>,
    R::Error: Into<calamine::Error>,
{
    let metas: Vec<_> = wb.sheets_metadata().iter().filter(|s| s.typ == SheetType::WorkSheet).cloned().collect();
    let mut budget = Budget { left: limits.max_rows, truncated: false };
    let mut sheets = Vec::new();
    for (index, m) in metas.into_iter().enumerate() {
        if budget.truncated {
            break;
        }
        let range = wb.worksheet_range(&m.name).map_err(|e| map_error(&e.into()))?;
        let (r0, c0) = range.start().unwrap_or((0, 0));
        let mut rows = Vec::new();
        for (r, c, v) in range.used_cells() {
            let (row, col) = (r0 + r as u32, c0 + c as u32);
            let Some(text) = shown.get(&(index, row, col)).cloned().or_else(|| cells::display_owned(v)) else { continue };
            if !push_cell(&mut rows, row, col, text, &mut budget) {
                break;
            }
        }
        let merges = merge_map(&merges(&wb, &m.name));
        sheets.push(SheetGrid { name: Some(m.name), hidden: !visible(m.visible), rows, merges });
    }
    Ok(Workbook { sheets, truncated: budget.truncated })
}

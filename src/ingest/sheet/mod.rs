//! Spreadsheets (`spreadsheet`: XLSX, XLSM, ODS, XLS through calamine) and delimited text
//! (`csv`: CSV, TSV) as located evidence: every block names its sheet and cells in A1
//! notation (`'Forecast 2027'!A5:C5`), CSV rows also their physical lines.
//!
//! Rules a viewer can reproduce (it reads the original with [`grid`] and the same limits):
//! - values as the file shows them: cached formula results (no formula is ever evaluated, no
//!   macro read), XLSX's common number formats and dates as ISO dates ([`cells`]), an ODS cell's
//!   number, percentage, currency or date as the text the file displays ([`ods_shown`]), an XLS
//!   cell's stored value;
//! - a row with a non-empty cell is a `table_row` block ([`blocks`]); empty rows give none;
//! - XLSX/ODS containers are checked before they are inflated ([`container`]): a decompressed
//!   size cap (`container_too_large`) and a compression-ratio cap (`container_ratio_exceeded`);
//!   password-protected workbooks are `encrypted`, anything unreadable `malformed_spreadsheet`;
//! - at most [`grid::Limits::max_rows`] rows per file: the rest is left out and the source map
//!   says `truncated` (`row_cap`), which the source shows.

pub mod blocks;
pub mod cells;
pub mod container;
pub mod delimited;
pub mod grid;
mod ods_shown;
#[cfg(test)]
pub(crate) mod tests;

use super::artifact::{self, ParsedArtifact, SOURCE_MAP_SCHEMA, SourceMap, Truncated, TruncatedReason};
use super::{ParseError, ParseInput, ParseProvider};

const SHEET_VERSION: &str = "mnote-sheet/1 calamine/0.38.0";
const CSV_VERSION: &str = "mnote-csv/1 csv/1.4.0 chardetng/1.0.0";

pub struct SpreadsheetProvider;

impl ParseProvider for SpreadsheetProvider {
    fn provider_id(&self) -> &'static str {
        "spreadsheet"
    }
    fn provider_version(&self) -> String {
        SHEET_VERSION.to_string()
    }
    fn can_parse(&self, kind: &str) -> bool {
        kind == "spreadsheet"
    }
    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
        let limits = child_limits();
        let wb = guarded(|| grid::read_workbook(input.bytes, input.file_name, &limits))?;
        Ok(artifact_of(input.bytes, "spreadsheet", SHEET_VERSION, &wb, &limits))
    }
}

pub struct CsvProvider;

impl ParseProvider for CsvProvider {
    fn provider_id(&self) -> &'static str {
        "csv"
    }
    fn provider_version(&self) -> String {
        CSV_VERSION.to_string()
    }
    fn can_parse(&self, kind: &str) -> bool {
        kind == "csv"
    }
    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
        let limits = child_limits();
        let wb = guarded(|| delimited::read_delimited(input.bytes, input.file_name, &limits))?;
        Ok(artifact_of(input.bytes, "csv", CSV_VERSION, &wb, &limits))
    }
}

/// The limits of a parse in this process (the parser child: the row cap its supervisor set).
fn child_limits() -> grid::Limits {
    let max_rows = usize::try_from(super::parse_env::max_rows()).unwrap_or(usize::MAX);
    grid::Limits { max_rows, ..grid::Limits::default() }
}

/// Read the original of a source as the parse did, with the same row cap (the viewer's grid).
pub fn read_original(kind: &str, bytes: &[u8], file_name: &str, max_rows: u64) -> Result<grid::Workbook, ParseError> {
    let max_rows = usize::try_from(max_rows).unwrap_or(usize::MAX);
    let limits = grid::Limits { max_rows, ..grid::Limits::default() };
    guarded(|| match kind {
        "csv" => delimited::read_delimited(bytes, file_name, &limits),
        _ => grid::read_workbook(bytes, file_name, &limits),
    })
}

/// A reader that panics on a hostile file (a bug in a dependency) fails with the file's code
/// instead: in the viewer it runs inside the server process.
fn guarded(read: impl FnOnce() -> Result<grid::Workbook, ParseError>) -> Result<grid::Workbook, ParseError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read))
        .unwrap_or_else(|_| Err(grid::malformed("the spreadsheet reader failed on this file")))
}

pub fn artifact_of(bytes: &[u8], kind: &str, version: &str, wb: &grid::Workbook, limits: &grid::Limits) -> ParsedArtifact {
    let a = blocks::assemble(wb);
    let source_hash = artifact::source_hash(bytes);
    ParsedArtifact {
        source_hash: source_hash.clone(),
        provider: kind.to_string(),
        provider_version: version.to_string(),
        text: a.text,
        source_map: SourceMap {
            schema: SOURCE_MAP_SCHEMA.into(),
            provider: kind.to_string(),
            model_version: version.to_string(),
            source_hash,
            resource_kind: kind.to_string(),
            page_count: None,
            pages: Vec::new(),
            blocks: a.blocks,
            sections: a.sections,
            references: Vec::new(),
            truncated: wb.truncated.then_some(Truncated { reason: TruncatedReason::RowCap, limit: limits.max_rows as u64 }),
        },
    }
}

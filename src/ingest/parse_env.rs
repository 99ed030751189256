//! What a parser child reads from the supervisor that started it (`worker`): its limits, the
//! original file name, and whether to report its progress. A leaf: the parsers (`pdf`, `sheet`)
//! read it without importing the supervisor that dispatches to them.

pub const MAX_PAGES_ENV: &str = "MNOTE_PARSE_MAX_PAGES";
pub const MAX_ROWS_ENV: &str = "MNOTE_PARSE_MAX_ROWS";
/// The original file name, for a child that reads the file from an inherited descriptor
/// ([`crate::grants::paths::CHILD_FILE`]), whose own path says nothing.
pub const FILE_NAME_ENV: &str = "MNOTE_PARSE_FILE_NAME";

/// Set for a parser child whose parent reads its progress from stderr.
pub const PROGRESS_ENV: &str = "MNOTE_PARSE_PROGRESS";
/// The stderr line prefix of a progress report: `@mnote-progress <done> <total>`.
pub const PROGRESS_PREFIX: &str = "@mnote-progress ";

/// Inside the parser child: `done` of `total` pages are parsed. A no-op unless the parent
/// asked for reports; a broken stderr is ignored (progress is a hint, never a failure).
pub fn report_pages(done: u32, total: u32) {
    if std::env::var_os(PROGRESS_ENV).is_some() {
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), "{PROGRESS_PREFIX}{done} {total}");
    }
}

/// Pages done of total, as a parser child reports them while it parses.
pub type PageReports = tokio::sync::mpsc::UnboundedSender<(u32, u32)>;

/// The page limit inside the parser child (passed down by the supervisor).
pub fn max_pages() -> u64 {
    std::env::var(MAX_PAGES_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(5000)
}

/// The row limit inside the parser child (passed down by the supervisor).
pub fn max_rows() -> u64 {
    std::env::var(MAX_ROWS_ENV).ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(200_000)
}

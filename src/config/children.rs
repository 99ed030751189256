//! The programs the server's children run and the environment they read: the parser child
//! (`mnote-parse`), LibreOffice, the pdfium library.

use std::path::{Path, PathBuf};

/// The parser child: `mnote-parse` beside `exe` when it is installed there (the lean binary
/// built with it), else `exe` itself (`mnote parse-file` takes the same arguments).
pub fn parser_exe_beside(exe: &Path) -> PathBuf {
    let lean = exe.with_file_name("mnote-parse");
    if lean.is_file() { lean } else { exe.to_path_buf() }
}

/// `soffice` as MNOTE_SOFFICE names it (`off`: none), else the first on PATH.
pub fn soffice_from(setting: Option<String>) -> Option<PathBuf> {
    match setting.as_deref().map(str::trim) {
        Some("off") | Some("none") => None,
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)).filter(|p| p.is_file()),
        _ => std::env::var_os("PATH")
            .and_then(|path| std::env::split_paths(&path).map(|d| d.join("soffice")).find(|p| p.is_file())),
    }
}

/// Environment variable with the path to `libpdfium.so`.
pub const PDFIUM_LIB_ENV: &str = "MNOTE_PDFIUM_LIB";

/// Set by a parent process for its parser children (`ingest::pdf::child_env`): `<identity>
/// <build name>` of the library, so that a child (one per document) does not read and hash the
/// 8 MB library again. A child uses it only when the identity is that of the library it loads.
pub const PDFIUM_BUILD_ENV: &str = "MNOTE_PDFIUM_BUILD";

/// MNOTE_PDFIUM_BUILD: the pdfium build name a parent process hands its parser children, so
/// each child need not hash the library again.
pub fn pdfium_build_hint() -> Option<String> {
    std::env::var(PDFIUM_BUILD_ENV).ok()
}

/// MNOTE_PDFIUM_LIB, when set and non-empty. Read where a PDF is opened: the parser and
/// page-render children are separate processes that inherit the server's environment.
pub fn pdfium_lib() -> Option<PathBuf> {
    std::env::var_os(PDFIUM_LIB_ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
}

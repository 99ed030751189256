//! Supervised parsing. Each parse runs in a child process (`mnote parse-file`) with a
//! timeout and an address-space limit, so a crash, hang or memory blow-up inside pdfium,
//! Tesseract or a decompressor kills only that child; the job fails (or retries) with a code
//! and the next job gets a fresh process.

use std::{path::Path, time::Duration};

use serde::{Deserialize, Serialize};

pub use super::parse_env::{PageReports, max_pages, max_rows, report_pages};
use super::{
    ParseError, ParseInput, ParsedArtifact,
    parse_env::{FILE_NAME_ENV, MAX_PAGES_ENV, MAX_ROWS_ENV, PROGRESS_ENV, PROGRESS_PREFIX},
    providers,
};
use crate::platform::supervise::{SuperviseError, Supervised};

/// Limits for one parse.
#[derive(Clone, Debug)]
pub struct Limits {
    pub timeout: Duration,
    pub memory_bytes: u64,
    /// Documents with more pages are refused (`too_many_pages`).
    pub max_pages: u64,
    /// Spreadsheet/CSV rows kept per file (the rest is left out, the artifact says `truncated`).
    pub max_rows: u64,
}

impl Limits {
    /// The configured limits of one parse.
    pub fn of(cfg: &crate::config::Config) -> Limits {
        Limits {
            timeout: cfg.parse_timeout,
            memory_bytes: cfg.parse_memory_bytes,
            max_pages: cfg.parse_max_pages,
            max_rows: cfg.parse_max_rows,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct ErrorLine {
    error: ErrorBody,
}

#[derive(Serialize, Deserialize)]
struct ErrorBody {
    code: String,
    message: String,
}

/// Entry point of the child process: parse `path` and print the artifact (or the error) as
/// JSON on stdout. Exit code 0 = artifact, 3 = parse error.
pub fn parse_file_main(path: &Path, kind: &str) -> i32 {
    emit(parse_in_process(path, kind))
}

/// Entry point of the child process in probe mode (`parse-file --probe`): print the
/// [`super::mineru::Probe`] of `path` (page sizes, scanned pages) as JSON.
pub fn probe_file_main(path: &Path, kind: &str) -> i32 {
    emit(super::mineru::probe_in_process(path, kind))
}

fn emit<T: Serialize>(result: Result<T, ParseError>) -> i32 {
    use std::io::Write as _;
    match result {
        // In large writes: stdout's own buffer is a line writer of 1 KiB, one write per KiB of
        // the artifact's single line.
        Ok(value) => {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            match serde_json::to_writer(&mut out, &value).map_err(std::io::Error::from).and_then(|()| out.flush()) {
                Ok(()) => 0,
                Err(_) => 1,
            }
        }
        Err(e) => {
            let line = ErrorLine { error: ErrorBody { code: e.code.to_string(), message: e.message } };
            let _ = serde_json::to_writer(std::io::stdout().lock(), &line);
            3
        }
    }
}

/// Parse in the current process (the child, or tests).
pub fn parse_in_process(path: &Path, kind: &str) -> Result<ParsedArtifact, ParseError> {
    let bytes = std::fs::read(path).map_err(|e| ParseError::new("file_unreadable", format!("{}: {e}", path.display())))?;
    let name = std::env::var(FILE_NAME_ENV)
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    let provider = providers::for_kind(kind)?;
    let art = provider.parse(&ParseInput { bytes: &bytes, file_name: &name, kind })?;
    art.validate().map_err(|e| ParseError::new("artifact_invalid", e))?;
    Ok(art)
}

/// Run `mnote parse-file` as a supervised child on a path this process trusts (tests, the
/// benchmark). Ingest uses [`parse_supervised_file`] with the descriptor it opened.
pub async fn parse_supervised(exe: &Path, path: &Path, kind: &str, limits: &Limits) -> Result<ParsedArtifact, ParseError> {
    let file = std::fs::File::open(path).map_err(|e| ParseError::new("file_unreadable", format!("{}: {e}", path.display())))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    parse_supervised_file(exe, &file, &name, kind, limits, None).await
}

/// Run `mnote parse-file` as a supervised child that reads `file` (inherited as a descriptor,
/// so the child never resolves a path: nothing can be swapped in between).
pub async fn parse_supervised_file(
    exe: &Path,
    file: &std::fs::File,
    name: &str,
    kind: &str,
    limits: &Limits,
    pages: Option<PageReports>,
) -> Result<ParsedArtifact, ParseError> {
    let out = run_child(exe, file, name, kind, false, limits, pages).await?;
    serde_json::from_slice(&out).map_err(|e| ParseError::new("worker_crashed", format!("bad parser output: {e}")))
}

/// Run `mnote parse-file --probe` as a supervised child on `file` (same limits as a parse).
pub async fn probe_supervised(
    exe: &Path,
    file: &std::fs::File,
    name: &str,
    kind: &str,
    limits: &Limits,
) -> Result<super::mineru::Probe, ParseError> {
    let out = run_child(exe, file, name, kind, true, limits, None).await?;
    serde_json::from_slice(&out).map_err(|e| ParseError::new("worker_crashed", format!("bad probe output: {e}")))
}

/// Run the parser child on `file` and return its stdout when it succeeded.
async fn run_child(
    exe: &Path,
    file: &std::fs::File,
    name: &str,
    kind: &str,
    probe: bool,
    limits: &Limits,
    pages: Option<PageReports>,
) -> Result<Vec<u8>, ParseError> {
    let mut cmd = tokio::process::Command::new(exe);
    let path = crate::grants::paths::pass_to_child(&mut cmd, file);
    cmd.arg("parse-file");
    if probe {
        cmd.arg("--probe");
    }
    cmd.arg("--kind")
        .arg(kind)
        .arg(path)
        .env("OMP_THREAD_LIMIT", "1")
        .env(MAX_PAGES_ENV, limits.max_pages.to_string())
        .env(MAX_ROWS_ENV, limits.max_rows.to_string())
        .env(FILE_NAME_ENV, name)
        .env("RUST_LOG", "error")
        // The pdfium build name, so the child need not hash the library (see `pdf::child_env`).
        .envs(if kind == "pdf" { super::pdf::child_env() } else { Vec::new() });
    if pages.is_some() {
        cmd.env(PROGRESS_ENV, "1");
    }
    let mut run = Supervised::new(cmd).memory_limit(limits.memory_bytes).timeout(limits.timeout);
    if let Some(to) = pages {
        run = run.report_lines(PROGRESS_PREFIX, move |line| {
            let mut it = line.split(' ').map(str::parse::<u32>);
            if let (Some(Ok(done)), Some(Ok(total))) = (it.next(), it.next()) {
                // The receiver may be gone (nobody records any more): not an error.
                let _ = to.send((done.min(total), total));
            }
        });
    }
    let out = run.run().await.map_err(|e| match e {
        SuperviseError::Spawn(e) => ParseError::new("worker_unavailable", format!("starting the parser: {e}")),
        SuperviseError::Io(e) => ParseError::new("worker_crashed", e.to_string()),
        SuperviseError::Timeout(t) => ParseError::new("parse_timeout", format!("parsing took longer than {t:?}")),
    })?;
    let status = out.status;
    match status.code() {
        Some(0) => Ok(out.stdout),
        Some(3) => {
            let line: ErrorLine = serde_json::from_slice(&out.stdout)
                .map_err(|e| ParseError::new("worker_crashed", format!("bad parser error output: {e}")))?;
            Err(ParseError { code: leak_code(&line.error.code), message: line.error.message })
        }
        _ => {
            let tail = out.stderr_tail(300);
            let oom = tail.contains("MemoryError")
                || tail.contains("memory allocation")
                || tail.contains("out of memory")
                || tail.contains("bad_alloc");
            let (code, what) =
                if oom { ("parse_out_of_memory", "ran out of its memory limit") } else { ("worker_crashed", "crashed") };
            Err(ParseError::new(code, format!("the parser {what} ({status}): {tail}")))
        }
    }
}

/// Error codes cross the process boundary as strings; map them back to the static set (the
/// source's failure codes, `sources::FAILURES`; anything else is `parse_failed`).
fn leak_code(code: &str) -> &'static str {
    crate::sources::failure_code(code).unwrap_or("parse_failed")
}

/// Errors worth another attempt (the next attempt gets a fresh process).
pub fn is_transient(code: &str) -> bool {
    matches!(code, "worker_crashed" | "worker_unavailable" | "file_unreadable" | "mineru_unavailable" | "mineru_timeout")
}

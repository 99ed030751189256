//! The spreadsheet row of `mnote bench ingest`: a large XLSX written by openpyxl (write-only
//! mode, once per run), read by our provider — as the pipeline runs it (`mnote parse-file`,
//! one process) and in-process — against openpyxl reading the same file in the same run
//! (`load_workbook(read_only=True, data_only=True)`, every row iterated). Our side does more:
//! it also builds the blocks (header names carried into every row) and validates the artifact.
//!
//! openpyxl comes from the fixture generator's packages that `./dev` provisions
//! (`MNOTE_FIXTURE_PYTHONPATH`); the Python is `python3`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};

use super::bench_common::{Row, TempDir, parse_file_child, run_quiet, time_sides};
use super::worker::parse_in_process;

pub const SHEET_ROWS: usize = 100_000;
const COLUMNS: usize = 8;

const WRITE_PY: &str = r#"
import datetime, sys
from openpyxl import Workbook
rows, path = int(sys.argv[1]), sys.argv[2]
wb = Workbook(write_only=True)
ws = wb.create_sheet("Ledger 2027")
ws.append(["Owner", "Account", "Amount", "Share", "Due", "Region", "Note", "Code"])
base = datetime.date(2027, 1, 1)
for i in range(rows):
    ws.append([
        "team %d" % (i % 97), "acct-%06d" % i, i * 13.5, (i % 100) / 100.0,
        base + datetime.timedelta(days=i % 365), ["north", "south", "东部", "西部"][i % 4],
        "invoice %d for the quarterly review 第%d行" % (i, i), i,
    ])
wb.save(path)
"#;

const READ_PY: &str = r#"
import sys
from openpyxl import load_workbook
wb = load_workbook(sys.argv[1], read_only=True, data_only=True)
n = 0
for ws in wb.worksheets:
    for row in ws.iter_rows(values_only=True):
        if any(v is not None for v in row):
            n += 1
wb.close()
print(n)
"#;

const WRITE_CSV_PY: &str = r#"
import csv, datetime, sys
rows, path = int(sys.argv[1]), sys.argv[2]
base = datetime.date(2027, 1, 1)
with open(path, "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["Owner", "Account", "Amount", "Share", "Due", "Region", "Note", "Code"])
    for i in range(rows):
        w.writerow([
            "team %d" % (i % 97), "acct-%06d" % i, i * 13.5, "%d%%" % (i % 100),
            (base + datetime.timedelta(days=i % 365)).isoformat(), ["north", "south", "东部", "西部"][i % 4],
            "invoice %d for the quarterly review, 第%d行" % (i, i), i,
        ])
"#;

const READ_CSV_PY: &str = r#"
import csv, sys
n = 0
with open(sys.argv[1], newline="", encoding="utf-8") as f:
    for row in csv.reader(f):
        if any(v for v in row):
            n += 1
print(n)
"#;

/// The same ledger as CSV (Python's `csv` writes it, quoting the notes' commas): ours through
/// the parser child and in-process (encoding detected, delimiter sniffed, rows with header
/// names and line numbers, validated) against `csv.reader` iterating every row.
pub(super) fn bench_csv(exe: &Path, rounds: usize) -> anyhow::Result<[Row; 3]> {
    let tmp = TempDir(std::env::temp_dir().join(format!("mnote-bench-csv-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0)?;
    let path = tmp.0.join("bench-ledger.csv");
    run_quiet(python(WRITE_CSV_PY)?.arg(SHEET_ROWS.to_string()).arg(&path)).context("Python writing the benchmark CSV")?;
    println!(
        "  csv: Python's csv wrote {} rows x {COLUMNS} columns + a header, {} KiB",
        SHEET_ROWS,
        std::fs::metadata(&path)?.len() / 1024
    );
    let art = parse_in_process(&path, "csv").map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let ours_rows = art.source_map.blocks.len();
    let out = python(READ_CSV_PY)?.arg(&path).output().context("Python reading the benchmark CSV")?;
    let theirs: usize = String::from_utf8_lossy(&out.stdout).trim().parse().context("csv.reader's row count")?;
    if theirs != ours_rows || ours_rows != SHEET_ROWS + 1 {
        bail!("rows differ: ours {ours_rows}, csv.reader {theirs}, written {}", SHEET_ROWS + 1);
    }
    let total = time_sides(
        "csv",
        "csv.reader",
        rounds,
        [
            &mut || parse_file_child(exe, "csv", &path),
            &mut || parse_in_process(&path, "csv").map(drop).map_err(|e| anyhow::anyhow!("{e}")),
            &mut || run_quiet(python(READ_CSV_PY)?.arg(&path)),
        ],
    )?;
    let items = (ours_rows * rounds) as f64;
    let row = |name, (secs, cpu): (Duration, f64)| Row { name, unit: "rows", items, secs: secs.as_secs_f64(), cpu };
    Ok([
        row("CSV: parser child --kind csv (as the pipeline)", total[0]),
        row("CSV: mnote csv provider in-process (reference)", total[1]),
        row("CSV: Python csv.reader, every row", total[2]),
    ])
}

fn python(script: &str) -> anyhow::Result<Command> {
    let path = std::env::var_os("MNOTE_FIXTURE_PYTHONPATH")
        .context("MNOTE_FIXTURE_PYTHONPATH is not set: run through `./dev` (eval \"$(./dev env)\"), which provisions openpyxl")?;
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(script).env("PYTHONPATH", path).env("PYTHONDONTWRITEBYTECODE", "1");
    Ok(cmd)
}

/// Ours through the parser child, ours in-process, and openpyxl, on the same generated XLSX.
pub(super) fn bench_spreadsheet(exe: &Path, rounds: usize) -> anyhow::Result<[Row; 3]> {
    let tmp = TempDir(std::env::temp_dir().join(format!("mnote-bench-sheet-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0)?;
    let path = tmp.0.join("bench-ledger.xlsx");
    run_quiet(python(WRITE_PY)?.arg(SHEET_ROWS.to_string()).arg(&path)).context("openpyxl writing the benchmark workbook")?;
    let size = std::fs::metadata(&path)?.len();
    println!("  spreadsheet: openpyxl wrote {} rows x {COLUMNS} columns + a header, {} KiB", SHEET_ROWS, size / 1024);
    // Warm-up and the row count both sides must agree on.
    let art = parse_in_process(&path, "spreadsheet").map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let ours_rows = art.source_map.blocks.len();
    let out = python(READ_PY)?.arg(&path).output().context("openpyxl reading the benchmark workbook")?;
    if !out.status.success() {
        bail!("openpyxl failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let theirs: usize = String::from_utf8_lossy(&out.stdout).trim().parse().context("openpyxl's row count")?;
    if theirs != ours_rows || ours_rows != SHEET_ROWS + 1 {
        bail!("rows differ: ours {ours_rows}, openpyxl {theirs}, written {}", SHEET_ROWS + 1);
    }
    let total = time_sides(
        "spreadsheet",
        "openpyxl",
        rounds,
        [
            &mut || parse_file_child(exe, "spreadsheet", &path),
            &mut || parse_in_process(&path, "spreadsheet").map(drop).map_err(|e| anyhow::anyhow!("{e}")),
            &mut || run_quiet(python(READ_PY)?.arg(&path)),
        ],
    )?;
    let items = (ours_rows * rounds) as f64;
    let row = |name, (secs, cpu): (Duration, f64)| Row { name, unit: "rows", items, secs: secs.as_secs_f64(), cpu };
    Ok([
        row("XLSX: parser child --kind spreadsheet (as the pipeline)", total[0]),
        row("XLSX: mnote spreadsheet provider in-process (reference)", total[1]),
        row("XLSX: openpyxl read_only+data_only, every row", total[2]),
    ])
}

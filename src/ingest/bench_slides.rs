//! The slides row of `mnote bench ingest`: a deck written by python-pptx (once per run: every
//! slide a title, a five-paragraph body, a 4×3 table and speaker notes), read by our provider —
//! as the pipeline runs it (`mnote parse-file`, one process) and in-process — against
//! python-pptx reading the same file in the same run (every shape's paragraphs, every table
//! cell and the notes of every slide). Our side also builds the located blocks and validates
//! the artifact.
//!
//! python-pptx comes from the fixture generator's packages that `./dev` provisions
//! (`MNOTE_FIXTURE_PYTHONPATH`); the Python is `python3`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};

use super::bench_common::{Row, TempDir, parse_file_child, run_quiet, time_sides};
use super::worker::parse_in_process;

pub const SLIDES: usize = 400;

const WRITE_PY: &str = r#"
import sys
from pptx import Presentation
from pptx.util import Emu
n, path = int(sys.argv[1]), sys.argv[2]
prs = Presentation()
for i in range(n):
    s = prs.slides.add_slide(prs.slide_layouts[1])
    s.shapes.title.text = "Quarterly review %d 季度回顾" % i
    tf = s.placeholders[1].text_frame
    tf.text = "revenue grew in region %d" % (i % 7)
    for j in range(4):
        tf.add_paragraph().text = "point %d of slide %d: 第%d点" % (j, i, j)
    t = s.shapes.add_table(4, 3, Emu(457200), Emu(4800600), Emu(8229600), Emu(1371600)).table
    for r in range(4):
        for c in range(3):
            t.cell(r, c).text = ["Owner", "Amount", "Due"][c] if r == 0 else "v%d-%d-%d" % (i, r, c)
    s.notes_slide.notes_text_frame.text = "say the figure for slide %d slowly" % i
prs.save(path)
"#;

const READ_PY: &str = r#"
import sys
from pptx import Presentation
prs = Presentation(sys.argv[1])
n = 0
for s in prs.slides:
    texts = []
    for sh in s.shapes:
        if sh.has_text_frame:
            texts.extend(p.text for p in sh.text_frame.paragraphs)
        if sh.has_table:
            for row in sh.table.rows:
                texts.append(" | ".join(c.text for c in row.cells))
    if s.has_notes_slide:
        texts.extend(p.text for p in s.notes_slide.notes_text_frame.paragraphs)
    n += 1
print(n)
"#;

fn python(script: &str) -> anyhow::Result<Command> {
    let path = std::env::var_os("MNOTE_FIXTURE_PYTHONPATH").context(
        "MNOTE_FIXTURE_PYTHONPATH is not set: run through `./dev` (eval \"$(./dev env)\"), which provisions python-pptx",
    )?;
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(script).env("PYTHONPATH", path).env("PYTHONDONTWRITEBYTECODE", "1");
    Ok(cmd)
}

/// Ours through the parser child, ours in-process, and python-pptx, on the same generated deck.
pub(super) fn bench_slides(exe: &Path, rounds: usize) -> anyhow::Result<[Row; 3]> {
    let tmp = TempDir(std::env::temp_dir().join(format!("mnote-bench-slides-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0)?;
    let path = tmp.0.join("bench-deck.pptx");
    run_quiet(python(WRITE_PY)?.arg(SLIDES.to_string()).arg(&path)).context("python-pptx writing the benchmark deck")?;
    let size = std::fs::metadata(&path)?.len();
    println!("  slides: python-pptx wrote {SLIDES} slides (title, 5 paragraphs, a 4x3 table, notes), {} KiB", size / 1024);
    let art = parse_in_process(&path, "slides").map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let ours = art.source_map.pages.len();
    let out = python(READ_PY)?.arg(&path).output().context("python-pptx reading the benchmark deck")?;
    if !out.status.success() {
        bail!("python-pptx failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let theirs: usize = String::from_utf8_lossy(&out.stdout).trim().parse().context("python-pptx's slide count")?;
    if theirs != ours || ours != SLIDES {
        bail!("slides differ: ours {ours}, python-pptx {theirs}, written {SLIDES}");
    }
    let total = time_sides(
        "slides",
        "python-pptx",
        rounds,
        [
            &mut || parse_file_child(exe, "slides", &path),
            &mut || parse_in_process(&path, "slides").map(drop).map_err(|e| anyhow::anyhow!("{e}")),
            &mut || run_quiet(python(READ_PY)?.arg(&path)),
        ],
    )?;
    let items = (ours * rounds) as f64;
    let row = |name, (secs, cpu): (Duration, f64)| Row { name, unit: "slides", items, secs: secs.as_secs_f64(), cpu };
    Ok([
        row("PPTX: parser child --kind slides (as the pipeline)", total[0]),
        row("PPTX: mnote slides provider in-process (reference)", total[1]),
        row("PPTX: python-pptx, every paragraph, cell and note", total[2]),
    ])
}

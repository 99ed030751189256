//! The web-page and e-mail rows of `mnote bench ingest`: generated files read by our providers
//! — as the pipeline runs them (`mnote parse-file`, one process per file) and in-process —
//! against Python's standard library reading the same files in the same run:
//! * HTML: `html.parser.HTMLParser` collecting the text outside `script`/`style` (what a
//!   text extractor built on the standard library does; ours also picks the main content,
//!   builds located blocks and validates the artifact);
//! * e-mail: the messages written by Python's `email` package (a plain and an HTML body, a
//!   Markdown attachment), read back with `email.message_from_bytes(policy=default)`: the body
//!   and every attachment's content decoded (ours also parses the attachment into blocks).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};

use super::bench_common::{Row, TempDir, parse_file_child, run_quiet, time_sides};
use super::worker::parse_in_process;

pub const PAGES: usize = 200;
pub const MESSAGES: usize = 500;

const READ_HTML_PY: &str = r#"
import sys
from html.parser import HTMLParser
class Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.skip, self.parts = 0, []
    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"): self.skip += 1
    def handle_endtag(self, tag):
        if tag in ("script", "style") and self.skip: self.skip -= 1
    def handle_data(self, data):
        if not self.skip and data.strip(): self.parts.append(data.strip())
n = 0
for path in sys.argv[1:]:
    p = Text()
    p.feed(open(path, encoding="utf-8").read())
    p.close()
    n += len(p.parts) > 0
print(n)
"#;

const WRITE_EML_PY: &str = r##"
import sys
from email.message import EmailMessage
out, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    m = EmailMessage()
    m["From"] = "Zhang San <zhang%d@example.com>" % i
    m["To"] = "team@example.com"
    m["Subject"] = "周报 %d: budget review" % i
    body = "\n\n".join("Paragraph %d of message %d: the budget line %d is approved. 第%d段。" % (j, i, j * 7, j) for j in range(30))
    m.set_content(body)
    m.add_alternative("<html><body>" + "".join("<p>%s</p>" % p for p in body.split("\n\n")) + "</body></html>", subtype="html")
    m.add_attachment("# Notes %d\n\n- item one\n- item two\n" % i, subtype="markdown", filename="notes-%d.md" % i)
    open("%s/m%04d.eml" % (out, i), "wb").write(bytes(m))
"##;

const READ_EML_PY: &str = r#"
import sys
from email import message_from_bytes, policy
n = 0
for path in sys.argv[1:]:
    m = message_from_bytes(open(path, "rb").read(), policy=policy.default)
    body = m.get_body(preferencelist=("plain", "html")).get_content()
    parts = [a.get_content() for a in m.iter_attachments()]
    n += bool(body) and len(parts) == 1
print(n)
"#;

/// A saved intranet page: navigation, a script, headings, paragraphs, a list and a table.
fn page(i: usize) -> String {
    let mut s = format!(
        "<!DOCTYPE html><html><head><meta charset=utf-8><title>Policy {i}</title><script>var t = {i};</script>\
         <style>p {{ margin: 0 }}</style></head><body><nav><a href=/>Home</a> <a href=/a>Archive</a></nav><main><h1>Policy {i}</h1>"
    );
    for sec in 0..8 {
        s.push_str(&format!("<h2>Section {sec}</h2>"));
        for p in 0..6 {
            s.push_str(&format!(
                "<p>Rule {p} of section {sec} in policy {i}: claims are paid within <b>{p}0 days</b>. 第{p}条。</p>"
            ));
        }
        s.push_str("<ul><li>first point</li><li>second point</li></ul><table><tr><th>City</th><th>Cap</th></tr>");
        for r in 0..5 {
            s.push_str(&format!("<tr><td>City {r}</td><td>{r}50 CNY</td></tr>"));
        }
        s.push_str("</table>");
    }
    s.push_str("</main><footer>Footer</footer></body></html>");
    s
}

fn python(script: &str) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(script).env("PYTHONDONTWRITEBYTECODE", "1");
    cmd
}

fn count_of(cmd: &mut Command) -> anyhow::Result<usize> {
    let out = cmd.output().context("running python3")?;
    if !out.status.success() {
        bail!("python3 failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().context("python's count")
}

/// Ours (child per file, in-process) and Python reading `files`, `rounds` times.
fn compare(exe: &Path, kind: &str, files: &[PathBuf], reader: &str, rounds: usize) -> anyhow::Result<[(Duration, f64); 3]> {
    let theirs = count_of(python(reader).args(files))?;
    if theirs != files.len() {
        bail!("python read {theirs} of {} {kind} files", files.len());
    }
    let parse_each = |f: &PathBuf| parse_in_process(f, kind).map(drop).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()));
    time_sides(
        kind,
        "python",
        rounds,
        [
            &mut || files.iter().try_for_each(|f| parse_file_child(exe, kind, f)),
            &mut || files.iter().try_for_each(parse_each),
            &mut || run_quiet(python(reader).args(files)),
        ],
    )
}

pub(super) fn bench_html(exe: &Path, rounds: usize) -> anyhow::Result<[Row; 3]> {
    let tmp = TempDir(std::env::temp_dir().join(format!("mnote-bench-html-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0)?;
    let files: Vec<PathBuf> = (0..PAGES)
        .map(|i| {
            let p = tmp.0.join(format!("page{i:04}.html"));
            std::fs::write(&p, page(i)).map(|()| p)
        })
        .collect::<Result<_, _>>()?;
    println!("  html: {PAGES} generated pages, {} KiB each", page(0).len() / 1024);
    let total = compare(exe, "html", &files, READ_HTML_PY, rounds)?;
    let row = |name, (secs, cpu): (Duration, f64)| Row {
        name,
        unit: "pages",
        items: (PAGES * rounds) as f64,
        secs: secs.as_secs_f64(),
        cpu,
    };
    Ok([
        row("HTML: parser child --kind html (as the pipeline)", total[0]),
        row("HTML: mnote html provider in-process (reference)", total[1]),
        row("HTML: Python html.parser, text outside script/style", total[2]),
    ])
}

pub(super) fn bench_email(exe: &Path, rounds: usize) -> anyhow::Result<[Row; 3]> {
    let tmp = TempDir(std::env::temp_dir().join(format!("mnote-bench-eml-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0)?;
    run_quiet(python(WRITE_EML_PY).arg(&tmp.0).arg(MESSAGES.to_string()))
        .context("Python's email package writing the messages")?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&tmp.0)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    files.sort();
    println!("  email: {} messages written by Python's email package", files.len());
    let total = compare(exe, "email", &files, READ_EML_PY, rounds)?;
    let row = |name, (secs, cpu): (Duration, f64)| Row {
        name,
        unit: "messages",
        items: (files.len() * rounds) as f64,
        secs: secs.as_secs_f64(),
        cpu,
    };
    Ok([
        row("EML: parser child --kind email (as the pipeline)", total[0]),
        row("EML: mnote email provider in-process (reference)", total[1]),
        row("EML: Python email (policy.default), body + attachments", total[2]),
    ])
}

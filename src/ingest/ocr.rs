//! Tesseract OCR through the `tesseract` command line (DEPENDENCIES.md §4).
//!
//! A subprocess rather than libtesseract: a crash or hang in Tesseract stays outside the parse
//! worker, there is nothing to link, and the only runtime need is the Debian packages
//! `tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim`.
//!
//! `OMP_THREAD_LIMIT=1` is always set: with OpenMP threading a page took 5–9× longer on the
//! 2-core machines this runs on; parallelism comes from running several jobs instead.
//!
//! Output is Tesseract's TSV (one row per page/block/paragraph/line/word). Words are grouped
//! into lines (`block_num`, `par_num`, `line_num`) and lines into paragraphs; callers pick the
//! granularity. Chinese comes back as 1–3 character "words", so words are joined with a space
//! only when one side is not CJK (`线程 作用 域` → `线程作用域`).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::ParseError;
use super::artifact::Quality;

/// Languages every OCR call uses (SPEC §4): Chinese alone garbles English and vice versa.
pub const DEFAULT_LANGS: &str = "chi_sim+eng";

/// Mean word confidence (0–100) below which OCR text is `approximate` rather than `exact`.
/// Tesseract's clean-print words score 85–97; below 60 a line usually has misread characters.
pub const LOW_CONFIDENCE: f32 = 60.0;

/// Lines below this mean confidence are dropped as noise: on scans they are almost always
/// texture or drawings read as letters (`FE`, `jes Jil 7/`), never recoverable text.
const NOISE_CONFIDENCE: f32 = 50.0;

/// A Tesseract run that takes longer than this is killed (a page normally takes 1–5 s).
const TIMEOUT: Duration = Duration::from_secs(300);

/// psm 3 = automatic page segmentation (documents); psm 11 = sparse text, which finds words
/// on photos and signs where psm 3 finds nothing.
const PSM_PAGE: u8 = 3;
const PSM_SPARSE: u8 = 11;

/// A psm-3 result with fewer good words than this is retried with sparse segmentation.
const MIN_GOOD_WORDS: usize = 3;

#[derive(Clone, Debug, PartialEq)]
pub struct OcrWord {
    pub text: String,
    /// `[x0, y0, x1, y1]` in image pixels, top-left origin.
    pub bbox: [f64; 4],
    pub confidence: f32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OcrLine {
    /// Tesseract's block and paragraph numbers (paragraph grouping key).
    pub block: u32,
    pub paragraph: u32,
    pub words: Vec<OcrWord>,
    pub text: String,
    /// Union of the word boxes.
    pub bbox: [f64; 4],
    /// Mean word confidence, 0–100.
    pub confidence: f32,
}

/// A run of lines Tesseract put in the same paragraph.
#[derive(Clone, Debug, PartialEq)]
pub struct OcrParagraph {
    pub lines: Vec<OcrLine>,
    pub text: String,
    pub bbox: [f64; 4],
    /// Mean confidence over all words of the paragraph.
    pub confidence: f32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct OcrPage {
    /// Image size as Tesseract saw it (TSV level-1 row).
    pub width: u32,
    pub height: u32,
    /// Lines in Tesseract's reading order, noise lines removed.
    pub lines: Vec<OcrLine>,
    /// Page segmentation mode that produced the lines.
    pub psm: u8,
}

impl OcrPage {
    /// Lines grouped by Tesseract paragraph, in reading order.
    pub fn paragraphs(&self) -> Vec<OcrParagraph> {
        let mut out: Vec<OcrParagraph> = Vec::new();
        let mut current: Vec<OcrLine> = Vec::new();
        for line in &self.lines {
            if let Some(prev) = current.last()
                && (prev.block, prev.paragraph) != (line.block, line.paragraph)
            {
                out.push(paragraph_of(std::mem::take(&mut current)));
            }
            current.push(line.clone());
        }
        if !current.is_empty() {
            out.push(paragraph_of(current));
        }
        out
    }

    /// Words with a usable confidence: the measure used to pick between segmentation modes.
    fn good_words(&self) -> usize {
        self.lines.iter().flat_map(|l| &l.words).filter(|w| w.confidence >= LOW_CONFIDENCE).count()
    }

    fn good_chars(&self) -> usize {
        self.lines
            .iter()
            .flat_map(|l| &l.words)
            .filter(|w| w.confidence >= LOW_CONFIDENCE)
            .map(|w| w.text.chars().filter(|c| c.is_alphanumeric()).count())
            .sum()
    }
}

fn paragraph_of(lines: Vec<OcrLine>) -> OcrParagraph {
    let mut text = String::new();
    for line in &lines {
        push_joined(&mut text, &line.text);
    }
    let words: Vec<&OcrWord> = lines.iter().flat_map(|l| &l.words).collect();
    OcrParagraph { bbox: union(lines.iter().map(|l| l.bbox)), confidence: mean(words.iter().map(|w| w.confidence)), text, lines }
}

/// `Exact` for confident OCR, `Approximate` below [`LOW_CONFIDENCE`] (SPEC §3a).
pub fn quality_for(confidence: f32) -> Quality {
    if confidence < LOW_CONFIDENCE { Quality::Approximate } else { Quality::Exact }
}

/// CJK characters are written without spaces between words: ideographs, kana, CJK and
/// full-width punctuation. Hangul is excluded because Korean does use spaces.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x2FDF      // radicals
        | 0x3000..=0x303F    // CJK symbols and punctuation (、。「」)
        | 0x3040..=0x30FF    // hiragana, katakana
        | 0x3100..=0x312F    // bopomofo
        | 0x31A0..=0x31FF
        | 0x3400..=0x4DBF    // extension A
        | 0x4E00..=0x9FFF    // unified ideographs
        | 0xF900..=0xFAFF    // compatibility ideographs
        | 0xFE30..=0xFE4F    // vertical forms
        | 0xFF00..=0xFF60    // full-width forms (，：！)
        | 0xFFE0..=0xFFE6
        | 0x20000..=0x3134F  // extensions B–G
    )
}

/// Quotes that Chinese text sets directly against ideographs (`最佳“清道夫”`).
fn is_cjk_adjacent_punct(c: char) -> bool {
    matches!(c, '“' | '”' | '‘' | '’' | '…' | '—' | '·')
}

/// Whether a space goes between a word ending in `left` and one starting with `right`.
pub fn needs_space(left: char, right: char) -> bool {
    let (l, r) = (is_cjk(left), is_cjk(right));
    let glued = if l { r || is_cjk_adjacent_punct(right) } else { r && is_cjk_adjacent_punct(left) };
    !glued
}

/// Append `word` to `text`, with a space unless the junction is CJK on both sides.
pub fn push_joined(text: &mut String, word: &str) {
    if let (Some(l), Some(r)) = (text.chars().next_back(), word.chars().next())
        && needs_space(l, r)
    {
        text.push(' ');
    }
    text.push_str(word);
}

fn union(boxes: impl Iterator<Item = [f64; 4]>) -> [f64; 4] {
    boxes.reduce(|a, b| [a[0].min(b[0]), a[1].min(b[1]), a[2].max(b[2]), a[3].max(b[3])]).unwrap_or([0.0; 4])
}

fn mean(values: impl Iterator<Item = f32>) -> f32 {
    let (sum, n) = values.fold((0.0f64, 0u32), |(s, n), v| (s + v as f64, n + 1));
    if n == 0 { 0.0 } else { (sum / n as f64) as f32 }
}

/// Parse `tesseract … tsv` output. Rows that do not parse are skipped (Tesseract never
/// writes them, but a truncated output must not fail the page); noise lines are dropped.
pub fn parse_tsv(tsv: &str) -> OcrPage {
    let mut page = OcrPage::default();
    // (block, par, line) of the line being collected, and its words.
    let mut key: Option<(u32, u32, u32)> = None;
    let mut words: Vec<OcrWord> = Vec::new();
    let flush = |key: Option<(u32, u32, u32)>, words: &mut Vec<OcrWord>, page: &mut OcrPage| {
        if let Some((block, paragraph, _)) = key
            && !words.is_empty()
        {
            let line = line_of(block, paragraph, std::mem::take(words));
            if !is_noise(&line) {
                page.lines.push(line);
            }
        }
        words.clear();
    };
    for row in tsv.lines() {
        let cols: Vec<&str> = row.split('\t').collect();
        if cols.len() < 11 {
            continue;
        }
        let num = |i: usize| cols[i].trim().parse::<i64>().ok();
        let (Some(level), Some(block), Some(par), Some(line), Some(left), Some(top), Some(w), Some(h)) =
            (num(0), num(2), num(3), num(4), num(6), num(7), num(8), num(9))
        else {
            continue; // header row
        };
        if level == 1 {
            page.width = w.max(0) as u32;
            page.height = h.max(0) as u32;
            continue;
        }
        if level != 5 {
            continue;
        }
        let text = cols.get(11).map(|t| t.trim()).unwrap_or("");
        let confidence: f32 = cols[10].trim().parse().unwrap_or(-1.0);
        if text.is_empty() || confidence < 0.0 {
            continue;
        }
        let k = (block as u32, par as u32, line as u32);
        if key != Some(k) {
            flush(key, &mut words, &mut page);
            key = Some(k);
        }
        words.push(OcrWord {
            text: text.to_string(),
            bbox: [left as f64, top as f64, (left + w) as f64, (top + h) as f64],
            confidence,
        });
    }
    flush(key, &mut words, &mut page);
    page
}

fn line_of(block: u32, paragraph: u32, words: Vec<OcrWord>) -> OcrLine {
    let mut text = String::new();
    for w in &words {
        push_joined(&mut text, &w.text);
    }
    OcrLine {
        block,
        paragraph,
        bbox: union(words.iter().map(|w| w.bbox)),
        confidence: mean(words.iter().map(|w| w.confidence)),
        text,
        words,
    }
}

/// Drawings and paper texture come out as short low-confidence "lines" of symbols.
fn is_noise(line: &OcrLine) -> bool {
    let alnum = line.text.chars().filter(|c| c.is_alphanumeric()).count();
    alnum == 0 || line.confidence < NOISE_CONFIDENCE || (alnum <= 2 && line.confidence < 70.0)
}

/// Checks that the `tesseract` binary runs and has the `chi_sim` and `eng` language data.
/// Success is cached for the process; a failure is re-checked next time (so provisioning
/// while a worker runs is picked up).
pub fn tesseract_available() -> Result<(), ParseError> {
    tesseract_version().map(|_| ())
}

/// `tesseract 5.3.0`, after checking the languages (see [`tesseract_available`]).
pub fn tesseract_version() -> Result<String, ParseError> {
    static VERSION: OnceLock<String> = OnceLock::new();
    if let Some(v) = VERSION.get() {
        return Ok(v.clone());
    }
    let missing = |m: String| ParseError::new("ocr_engine_missing", m);
    let run = |args: &[&str]| {
        Command::new("tesseract")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| missing(format!("cannot run tesseract ({e}); install tesseract-ocr")))
    };
    let version = run(&["--version"])?;
    // Tesseract 5 prints the version on stdout, 4 on stderr.
    let banner = format!("{}{}", String::from_utf8_lossy(&version.stdout), String::from_utf8_lossy(&version.stderr));
    let version = banner.lines().find(|l| l.starts_with("tesseract ")).unwrap_or("tesseract").trim().to_string();
    let langs = run(&["--list-langs"])?;
    let listed = format!("{}{}", String::from_utf8_lossy(&langs.stdout), String::from_utf8_lossy(&langs.stderr));
    let have: Vec<&str> = listed.lines().map(str::trim).collect();
    for lang in DEFAULT_LANGS.split('+') {
        if !have.contains(&lang) {
            return Err(missing(format!(
                "tesseract has no '{lang}' language data; install tesseract-ocr-{}",
                lang.replace('_', "-")
            )));
        }
    }
    Ok(VERSION.get_or_init(|| version).clone())
}

/// OCR a decoded image: transparency is flattened onto white (transparent pixels would
/// otherwise read as black and hide dark text) and the image is written as an 8-bit grey
/// image, which every Tesseract build reads whatever the source format (WebP, 16-bit TIFF,
/// CMYK JPEG).
pub fn ocr_image(img: &::image::DynamicImage, dpi: Option<u32>) -> Result<OcrPage, ParseError> {
    tesseract_available()?;
    let grey = flatten_to_grey(img);
    let file = TempFile::new("pgm")?;
    write_pgm(&file.path, &grey).map_err(|e| ParseError::new("ocr_failed", format!("writing the OCR input image: {e}")))?;
    ocr_image_file_with(&file.path, DEFAULT_LANGS, dpi)
}

/// Binary PGM (`P5`): the grey pixels as they are. Leptonica reads PNM in every Tesseract
/// build, and neither side spends time on compression (a PNG took longer to encode and decode
/// than some pages take to OCR). Like the PNG written before, it carries no resolution, so
/// Tesseract sees exactly the same input.
fn write_pgm(path: &Path, grey: &::image::GrayImage) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    write!(out, "P5\n{} {}\n255\n", grey.width(), grey.height())?;
    out.write_all(grey.as_raw())?;
    out.flush()
}

fn flatten_to_grey(img: &::image::DynamicImage) -> ::image::GrayImage {
    if !img.color().has_alpha() {
        return img.to_luma8();
    }
    let rgba = img.to_rgba8();
    ::image::GrayImage::from_fn(rgba.width(), rgba.height(), |x, y| {
        let [r, g, b, a] = rgba.get_pixel(x, y).0;
        let luma = 0.299 * r as f32 + 0.587 * g as f32 + 0.114 * b as f32;
        let alpha = a as f32 / 255.0;
        ::image::Luma([(luma * alpha + 255.0 * (1.0 - alpha)).round().clamp(0.0, 255.0) as u8])
    })
}

/// A file in the temp directory, removed on drop (Tesseract reads images from a path).
pub(crate) struct TempFile {
    pub path: std::path::PathBuf,
}

impl TempFile {
    pub fn new(ext: &str) -> Result<Self, ParseError> {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!("mnote-ocr-{}-{n}-{nanos}.{ext}", std::process::id()));
        // Claim the name now so two processes can never share it.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| ParseError::new("ocr_failed", format!("creating {}: {e}", path.display())))?;
        Ok(TempFile { path })
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// OCR one image file: psm 3 (page segmentation), retried with psm 11 (sparse text) when psm 3
/// finds almost nothing (photos, signs); the result with more confident text wins.
pub fn ocr_image_file(path: &Path, langs: &str) -> Result<OcrPage, ParseError> {
    ocr_image_file_with(path, langs, None)
}

/// [`ocr_image_file`] with a known resolution (rendered PDF pages), so Tesseract does not guess
/// it from the glyph sizes.
pub fn ocr_image_file_with(path: &Path, langs: &str, dpi: Option<u32>) -> Result<OcrPage, ParseError> {
    tesseract_available()?;
    let page = run_tesseract(path, langs, PSM_PAGE, dpi)?;
    if page.good_words() >= MIN_GOOD_WORDS {
        return Ok(page);
    }
    let sparse = run_tesseract(path, langs, PSM_SPARSE, dpi)?;
    Ok(if sparse.good_chars() > page.good_chars() { sparse } else { page })
}

/// One `tesseract <img> stdout -l <langs> --psm <psm> tsv` run.
pub fn run_tesseract(path: &Path, langs: &str, psm: u8, dpi: Option<u32>) -> Result<OcrPage, ParseError> {
    let mut cmd = Command::new("tesseract");
    cmd.arg(path).arg("stdout").args(["-l", langs, "--psm", &psm.to_string()]);
    if let Some(dpi) = dpi {
        cmd.args(["--dpi", &dpi.to_string()]);
    }
    cmd.arg("tsv").env("OMP_THREAD_LIMIT", "1").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| ParseError::new("ocr_engine_missing", format!("cannot run tesseract ({e})")))?;
    // Both pipes are drained on threads: a page's TSV is larger than a pipe buffer.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ParseError::new("ocr_failed", format!("tesseract took longer than {}s", TIMEOUT.as_secs())));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(ParseError::new("ocr_failed", format!("waiting for tesseract: {e}"))),
        }
    };
    let out = stdout.join().unwrap_or_default();
    let err = stderr.join().unwrap_or_default();
    if !status.success() {
        let msg = String::from_utf8_lossy(&err);
        let code = if msg.contains("Failed loading language") { "ocr_engine_missing" } else { "ocr_failed" };
        return Err(ParseError::new(code, format!("tesseract failed ({status}): {}", msg.trim())));
    }
    let mut page = parse_tsv(&String::from_utf8_lossy(&out));
    page.psm = psm;
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(name: &str) -> std::path::PathBuf {
        crate::ingest::testdata::path(&format!("images/{name}"))
    }

    #[test]
    fn pgm_input_reads_like_png() {
        // The OCR input used to be a PNG; Tesseract must see the same pixels and no resolution.
        let img = ::image::open(image("ocr_linn.png")).unwrap();
        let grey = flatten_to_grey(&img);
        let png = TempFile::new("png").unwrap();
        grey.save_with_format(&png.path, ::image::ImageFormat::Png).unwrap();
        let pgm = TempFile::new("pgm").unwrap();
        write_pgm(&pgm.path, &grey).unwrap();
        let bytes = std::fs::read(&pgm.path).unwrap();
        let header = format!("P5\n{} {}\n255\n", grey.width(), grey.height());
        assert_eq!(&bytes[..header.len()], header.as_bytes());
        assert_eq!(&bytes[header.len()..], grey.as_raw().as_slice());
        let from_png = run_tesseract(&png.path, DEFAULT_LANGS, PSM_PAGE, None).unwrap();
        assert!(from_png.good_words() > 10);
        assert_eq!(run_tesseract(&pgm.path, DEFAULT_LANGS, PSM_PAGE, None).unwrap(), from_png);
    }

    #[test]
    fn cjk_words_are_joined_without_spaces() {
        let mut s = String::new();
        for w in ["线程", "作用", "域", "scope", "is", "“清", "道夫”，", "fine"] {
            push_joined(&mut s, w);
        }
        assert_eq!(s, "线程作用域 scope is “清道夫”， fine");
        assert!(!needs_space('线', '。'));
        assert!(needs_space('a', '线'));
        assert!(needs_space('한', '국')); // Korean keeps its spaces
    }

    #[test]
    fn tsv_rows_become_lines_and_paragraphs() {
        let tsv = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n\
            1\t1\t0\t0\t0\t0\t0\t0\t400\t100\t-1\t\n\
            4\t1\t1\t1\t1\t0\t10\t10\t200\t20\t-1\t\n\
            5\t1\t1\t1\t1\t1\t10\t10\t40\t20\t96\t线程\n\
            5\t1\t1\t1\t1\t2\t50\t12\t40\t18\t90\t作用\n\
            5\t1\t1\t1\t1\t3\t90\t10\t20\t20\t93\t域\n\
            5\t1\t1\t1\t2\t1\t10\t40\t60\t20\t80\tscoped\n\
            5\t1\t1\t1\t2\t2\t75\t40\t60\t20\t40\tthreads\n\
            5\t1\t2\t1\t1\t1\t10\t70\t30\t20\t30\t|~\n\
            5\t1\t3\t1\t1\t1\t10\t80\t30\t10\t-1\t \n";
        let page = parse_tsv(tsv);
        assert_eq!((page.width, page.height), (400, 100));
        assert_eq!(page.lines.len(), 2, "the `|~` noise line is dropped");
        assert_eq!(page.lines[0].text, "线程作用域");
        assert_eq!(page.lines[0].bbox, [10.0, 10.0, 110.0, 30.0]);
        assert_eq!(page.lines[1].text, "scoped threads");
        assert_eq!(page.lines[1].confidence, 60.0);
        let paras = page.paragraphs();
        assert_eq!(paras.len(), 1);
        assert_eq!(paras[0].text, "线程作用域 scoped threads");
        assert_eq!(paras[0].bbox, [10.0, 10.0, 135.0, 60.0]);
        assert_eq!(quality_for(paras[0].confidence), Quality::Exact);
        assert_eq!(quality_for(59.9), Quality::Approximate);
        assert_eq!(parse_tsv("garbage\nrows"), OcrPage::default());
    }

    #[test]
    fn tesseract_has_chinese_and_english() {
        tesseract_available().expect("tesseract with chi_sim+eng (provisioned by ./dev)");
        assert!(tesseract_version().unwrap().starts_with("tesseract "));
    }

    #[test]
    fn english_page_scan_is_read_with_boxes() {
        // A 300 dpi scan of a brochure page (OCRmyPDF's linn.png).
        let path = image("ocr_linn.png");
        let started = Instant::now();
        let page = ocr_image_file(&path, DEFAULT_LANGS).unwrap();
        eprintln!("ocr_linn.png OCR: {:?}", started.elapsed());
        assert_eq!((page.width, page.height), (2550, 3300));
        let text: Vec<&str> = page.lines.iter().map(|l| l.text.as_str()).collect();
        assert!(text[0].contains("The LinnSequencer"), "{text:?}");
        assert!(text.iter().any(|l| l.contains("composition and performance tool")), "{text:?}");
        // The centred title: roughly x 882–1657, y 131–217.
        let first = &page.lines[0];
        assert!(first.bbox[0] > 800.0 && first.bbox[1] < 150.0 && first.bbox[3] < 240.0, "{:?}", first.bbox);
        assert!(first.confidence > LOW_CONFIDENCE);
    }

    #[test]
    fn missing_image_file_is_an_ocr_failure() {
        let err = ocr_image_file(Path::new("/nonexistent/x.png"), DEFAULT_LANGS).unwrap_err();
        assert_eq!(err.code, "ocr_failed");
    }
}

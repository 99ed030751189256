//! PDF parse provider: pdfium text layer with layout analysis, Tesseract for scanned pages.
//!
//! Per page:
//! 1. **Glyphs**: every pdfium char with its loose box, mapped from pdfium's *unrotated* user
//!    space into the *displayed* page (`/Rotate` and the crop box applied), points, top-left
//!    origin. pdfium's own whitespace (real or generated) is kept only as a word-break hint.
//! 2. **Direction groups**: glyphs are grouped by their displayed writing direction (0/90/180/
//!    270°) and each group is laid out in its own frame where the text runs left to right, so a
//!    sideways table or a page whose content is drawn rotated reads like any other.
//! 3. **Words** (runs of glyphs without whitespace or a jump) → **recursive XY-cut**: a region
//!    is split at the widest empty vertical strip (a column gutter, backed by several lines on
//!    both sides) or the widest empty horizontal strip; horizontal strips are weighted down so
//!    a chance alignment of line gaps across columns never beats a real gutter, while a header
//!    spanning all columns blocks the vertical cut until it has been cut off. Leaves are lines
//!    in reading order, column by column.
//! 4. **Paragraphs** (= blocks): consecutive lines merge while they stay in the same column, at
//!    the paragraph's line pitch, at the same font size and boldness, without a first-line
//!    indent, a bullet, or a short sentence-final previous line.
//! 5. **Quality**: the block text is compared with what pdfium extracts inside the block's box
//!    (`FPDFText_GetBoundedText`, whitespace ignored): same characters → `exact`.
//!
//! Pages with almost no text layer but images are rendered (300 DPI, capped) and OCR'd; their
//! blocks are Tesseract paragraphs with boxes scaled back to points.
//!
//! Sections come from the outline when it has destinations, else from font sizes (short
//! paragraphs clearly larger than the page's body text; level by size rank).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use pdfium_render::prelude::*;

use super::artifact::{self, Block, BlockType, Page, ParsedArtifact, Quality, Section, SectionTree, SourceMap, TextBuilder};
use super::ocr;
use super::{ParseError, ParseInput, ParseProvider};

const PROVIDER_ID: &str = "pdfium";
const PROVIDER_VERSION: &str = "mnote-pdf/1 pdfium-render/0.9.5";

/// Environment variable with the path to `libpdfium.so`.
pub const PDFIUM_LIB_ENV: &str = "MNOTE_PDFIUM_LIB";

/// Fallback locations under the project root: the provisioning documented in the brief, and
/// the versioned directory `./dev` installs.
const LOCAL_LIBS: [&str; 2] = [".local/pdfium/libpdfium.so", ".local/pdfium-5.15.2/libpdfium.so"];

/// sha256 of known `libpdfium.so` builds → pdfium build name for `provider_version`.
const KNOWN_BUILDS: [(&str, &str); 1] =
    [("c76dc0f7839644bfa7c3e3107a6068df714e339c861bb7d4519907b821d427f9", "pdfium/8149 (pypdfium2 5.15.2)")];

/// A page with fewer non-space text-layer characters than this, and images, is OCR'd.
const OCR_MIN_CHARS: usize = 20;
const OCR_DPI: f64 = 300.0;
/// Longest side of a rendered page: 5000 px is A4/Letter at 300 DPI with room to spare; larger
/// pages (posters, a 30-inch test page) are rendered at a lower DPI instead.
const OCR_MAX_SIDE_PX: f64 = 5000.0;
/// OCR line height (px) above which a page is OCR'd again at a lower resolution, the height
/// aimed for then, and the lowest resolution used.
const OCR_MAX_LINE_PX: f64 = 120.0;
const OCR_TARGET_LINE_PX: f64 = 50.0;
const OCR_MIN_DPI: f64 = 36.0;

/// Glyph/word geometry thresholds, in ems of the local font size.
mod em {
    /// A gap this wide inside a run of glyphs starts a new word even without a space char.
    pub const WORD_GAP: f64 = 0.25;
    /// Narrowest column gutter. Word spaces are 0.25–0.35 em (justified lines up to ~0.55);
    /// the Federal Register's gutters are 0.67 em.
    pub const GUTTER: f64 = 0.6;
    /// A gap this wide splits even a single line (tab stops, "47698 … Federal Register").
    pub const WIDE_GAP: f64 = 3.0;
    /// Narrowest column beside a narrow gutter (the Federal Register's are 19 em).
    pub const COLUMN: f64 = 6.0;
    /// First-line indent that starts a new paragraph.
    pub const INDENT: f64 = 0.8;
}

/// Share of a box's height trimmed from top and bottom when looking for gaps between lines:
/// loose boxes (ascent to descent) of consecutive lines often touch.
const CORE_TRIM: f64 = 0.2;

/// Horizontal gaps count half against vertical ones when choosing the next XY cut.
const HORIZONTAL_WEIGHT: f64 = 0.5;

pub struct PdfProvider;

struct Engine {
    pdfium: Pdfium,
    /// `pdfium/8149 (…)` or `pdfium sha256:<12 hex>` for an unknown build.
    build: String,
}

static ENGINE: OnceLock<Engine> = OnceLock::new();
static BIND_LOCK: Mutex<()> = Mutex::new(());

/// Where `libpdfium.so` is: `$MNOTE_PDFIUM_LIB` when set, else the first existing local copy.
fn library_path(env_value: Option<std::ffi::OsString>, root: &Path) -> Option<PathBuf> {
    match env_value {
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => LOCAL_LIBS.iter().map(|p| root.join(p)).find(|p| p.is_file()),
    }
}

/// Bind pdfium once per process. A failed bind is not cached, so a library provisioned later
/// is picked up by the next parse.
fn engine() -> Result<&'static Engine, ParseError> {
    if let Some(e) = ENGINE.get() {
        return Ok(e);
    }
    let _guard = BIND_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = ENGINE.get() {
        return Ok(e);
    }
    let missing = |m: String| ParseError::new("pdf_engine_missing", m);
    let path = library_path(std::env::var_os(PDFIUM_LIB_ENV), Path::new(env!("CARGO_MANIFEST_DIR")))
        .ok_or_else(|| missing(format!("libpdfium.so not found: set {PDFIUM_LIB_ENV} or run ./dev provision")))?;
    if !path.is_file() {
        return Err(missing(format!("{PDFIUM_LIB_ENV}={} does not exist", path.display())));
    }
    let bindings =
        Pdfium::bind_to_library(&path).map_err(|e| missing(format!("cannot load {}: {e:?}", path.display())))?;
    let build = library_build_for(&path, std::env::var(PDFIUM_BUILD_ENV).ok());
    let _ = ENGINE.set(Engine { pdfium: Pdfium::new(bindings), build });
    ENGINE.get().ok_or_else(|| missing("pdfium binding was not stored".into()))
}

/// pdfium has no version API; the library's hash names the build truthfully.
fn library_build(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    let Ok(bytes) = std::fs::read(path) else { return "pdfium (unreadable)".into() };
    let hash = hex::encode(Sha256::digest(&bytes));
    KNOWN_BUILDS
        .iter()
        .find(|(h, _)| *h == hash)
        .map(|(_, name)| name.to_string())
        .unwrap_or_else(|| format!("pdfium sha256:{}", &hash[..12]))
}

/// Set by a parent process for its parser children ([`child_env`]): `<identity> <build name>`
/// of the library, so that a child (one per document) does not read and hash the 8 MB library
/// again. A child uses it only when the identity is that of the library it loads.
pub const PDFIUM_BUILD_ENV: &str = "MNOTE_PDFIUM_BUILD";

/// `dev:inode:size:mtime` of a file: a library replaced or rewritten gets another identity.
fn file_identity(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(format!("{}:{}:{}:{}.{:09}", m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

/// The build name of the library at `path`: from `hint` ([`PDFIUM_BUILD_ENV`]) when it names
/// this very file, else from the library's hash.
fn library_build_for(path: &Path, hint: Option<String>) -> String {
    if let Some(hint) = hint
        && let Some((id, name)) = hint.split_once(' ')
        && !name.is_empty()
        && file_identity(path).is_some_and(|current| current == id)
    {
        return name.to_string();
    }
    library_build(path)
}

/// Environment for `mnote parse-file` children: [`PDFIUM_BUILD_ENV`] when pdfium is found. The
/// hash is computed once per process (again only if the library file changes).
pub fn child_env() -> Vec<(&'static str, String)> {
    static HINT: Mutex<Option<(PathBuf, String, String)>> = Mutex::new(None);
    let Some(path) = library_path(std::env::var_os(PDFIUM_LIB_ENV), Path::new(env!("CARGO_MANIFEST_DIR"))) else {
        return Vec::new();
    };
    let Some(id) = file_identity(&path) else { return Vec::new() };
    let mut hint = HINT.lock().unwrap_or_else(|p| p.into_inner());
    let fresh = matches!(&*hint, Some((p, i, _)) if *p == path && *i == id);
    if !fresh {
        let build = library_build(&path);
        *hint = Some((path, id.clone(), build));
    }
    hint.as_ref().map(|(_, id, build)| vec![(PDFIUM_BUILD_ENV, format!("{id} {build}"))]).unwrap_or_default()
}

impl ParseProvider for PdfProvider {
    fn provider_id(&self) -> &'static str {
        PROVIDER_ID
    }

    fn provider_version(&self) -> String {
        match engine() {
            Ok(e) => format!("{PROVIDER_VERSION} {}", e.build),
            Err(_) => format!("{PROVIDER_VERSION} pdfium (unavailable)"),
        }
    }

    fn can_parse(&self, kind: &str) -> bool {
        kind == "pdf"
    }

    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
        let engine = engine()?;
        // Layout code indexes vectors built from untrusted geometry; a bug there must fail
        // this document, not take the worker down with it.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parse_pdf(engine, input))).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(ParseError::new("pdf_malformed", format!("{}: the PDF parser failed: {what}", input.file_name)))
        })
    }
}

// ---- geometry ----------------------------------------------------------------------------

/// `[x0, y0, x1, y1]`, x0 ≤ x1, y0 ≤ y1.
type Rect = [f64; 4];

fn union(a: Rect, b: Rect) -> Rect {
    [a[0].min(b[0]), a[1].min(b[1]), a[2].max(b[2]), a[3].max(b[3])]
}

fn overlap(a0: f64, a1: f64, b0: f64, b1: f64) -> f64 {
    (a1.min(b1) - a0.max(b0)).max(0.0)
}

/// Maps pdfium user space (y up, unrotated, crop box anywhere) to the displayed page (points,
/// top-left origin, after `/Rotate`), and back.
#[derive(Clone, Copy, Debug)]
struct Geom {
    rotation: i32,
    /// Effective crop box in user space.
    left: f64,
    bottom: f64,
    right: f64,
    top: f64,
    /// Displayed size.
    width: f64,
    height: f64,
}

impl Geom {
    fn new(crop: [f64; 4], rotation: i32) -> Geom {
        let [left, bottom, right, top] = crop;
        let (w, h) = (right - left, top - bottom);
        let (width, height) = if rotation % 180 == 0 { (w, h) } else { (h, w) };
        Geom { rotation, left, bottom, right, top, width, height }
    }

    /// `/Rotate` turns the page clockwise for display.
    fn to_display(self, x: f64, y: f64) -> (f64, f64) {
        match self.rotation {
            90 => (y - self.bottom, x - self.left),
            180 => (self.right - x, y - self.bottom),
            270 => (self.top - y, self.right - x),
            _ => (x - self.left, self.top - y),
        }
    }

    fn to_user(self, dx: f64, dy: f64) -> (f64, f64) {
        match self.rotation {
            90 => (dy + self.left, dx + self.bottom),
            180 => (self.right - dx, dy + self.bottom),
            270 => (self.right - dy, self.top - dx),
            _ => (dx + self.left, self.top - dy),
        }
    }

    /// User-space rect (left, bottom, right, top) → display rect.
    fn rect_to_display(&self, l: f64, b: f64, r: f64, t: f64) -> Rect {
        let (x0, y0) = self.to_display(l, b);
        let (x1, y1) = self.to_display(r, t);
        [x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)]
    }

    /// Display rect → user-space (left, bottom, right, top).
    fn rect_to_user(&self, r: Rect) -> (f64, f64, f64, f64) {
        let (ax, ay) = self.to_user(r[0], r[1]);
        let (bx, by) = self.to_user(r[2], r[3]);
        (ax.min(bx), ay.min(by), ax.max(bx), ay.max(by))
    }

    fn clamp(&self, r: Rect) -> Rect {
        [
            r[0].clamp(0.0, self.width),
            r[1].clamp(0.0, self.height),
            r[2].clamp(0.0, self.width),
            r[3].clamp(0.0, self.height),
        ]
    }
}

/// Writing direction on the displayed page, counter-clockwise quarter turns: 0 = left to
/// right, 1 = bottom to top, 2 = upside down, 3 = top to bottom.
type Dir = u8;

/// Rotate a display rect into the frame of direction `dir`, where that text runs left to right
/// and lines advance downwards (and back with [`from_frame`]).
fn to_frame(dir: Dir, r: Rect, w: f64, h: f64) -> Rect {
    let map = |x: f64, y: f64| match dir {
        1 => (h - y, x),
        2 => (w - x, h - y),
        3 => (y, w - x),
        _ => (x, y),
    };
    let (ax, ay) = map(r[0], r[1]);
    let (bx, by) = map(r[2], r[3]);
    [ax.min(bx), ay.min(by), ax.max(bx), ay.max(by)]
}

fn from_frame(dir: Dir, r: Rect, w: f64, h: f64) -> Rect {
    let map = |fx: f64, fy: f64| match dir {
        1 => (fy, h - fx),
        2 => (w - fx, h - fy),
        3 => (w - fy, fx),
        _ => (fx, fy),
    };
    let (ax, ay) = map(r[0], r[1]);
    let (bx, by) = map(r[2], r[3]);
    [ax.min(bx), ay.min(by), ax.max(bx), ay.max(by)]
}

// ---- glyphs and words -------------------------------------------------------------------

/// Whitespace pdfium reported before a glyph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Space {
    None,
    /// Generated by pdfium (a gap or line change it detected).
    Soft,
    /// A space character in the content stream.
    Hard,
}

#[derive(Clone, Debug)]
struct Glyph {
    ch: char,
    /// Display coordinates first, frame coordinates once grouped.
    bbox: Rect,
    size: f64,
    bold: bool,
    space: Space,
    dir: Dir,
}

#[derive(Clone, Debug)]
struct Word {
    text: String,
    bbox: Rect,
    size: f64,
    /// Every glyph is bold.
    bold: bool,
    space_before: Space,
}

impl Word {
    fn first(&self) -> char {
        self.text.chars().next().unwrap_or(' ')
    }
    fn last(&self) -> char {
        self.text.chars().next_back().unwrap_or(' ')
    }
    /// Vertical extent used for gap finding (see [`CORE_TRIM`]).
    fn core(&self) -> (f64, f64) {
        let h = self.bbox[3] - self.bbox[1];
        (self.bbox[1] + CORE_TRIM * h, self.bbox[3] - CORE_TRIM * h)
    }
}

/// One char of pdfium's text page as `FPDFText_GetBoundedText` sees it, kept so the quality
/// check ([`text_quality`]) can select the chars under a block without asking pdfium again.
#[derive(Clone, Copy, Debug)]
struct PageChar {
    /// `FPDFText_GetUnicode`.
    unicode: u32,
    /// `FPDFText_GetCharBox` (pdfium's `m_CharBox`, user space) as pdfium stores it (`f32`),
    /// normalised like `CFX_FloatRect::Normalize`: `[left, bottom, right, top]`.
    bbox: [f32; 4],
}

/// Every char of a page ([`PageChar`]), in pdfium's order; `None` when a box could not be read
/// (the quality check then asks pdfium).
type PageChars = Option<Vec<PageChar>>;

/// Read the page's chars with their boxes in display coordinates.
fn extract_glyphs(text: &PdfPageText, geom: &Geom) -> Vec<Glyph> {
    extract_chars(text, geom, false).0
}

/// [`extract_glyphs`], and with `keep_boxes` every char's tight box for [`text_quality`].
fn extract_chars(text: &PdfPageText, geom: &Geom, keep_boxes: bool) -> (Vec<Glyph>, PageChars) {
    let mut out = Vec::new();
    let mut all: PageChars = keep_boxes.then(Vec::new);
    let mut pending = Space::None;
    for ch in text.chars().iter() {
        let unicode = ch.unicode_value();
        let tight = if keep_boxes { ch.tight_bounds().ok() } else { None };
        if let Some(chars) = &mut all {
            match tight {
                Some(r) => chars.push(PageChar {
                    unicode,
                    // `PdfRect` orders its edges as `Normalize` does.
                    bbox: [r.left().value, r.bottom().value, r.right().value, r.top().value],
                }),
                None => all = None,
            }
        }
        let Some(mut c) = char::from_u32(unicode) else { continue };
        if c == '\r' || c == '\n' {
            pending = pending.max(Space::Soft);
            continue;
        }
        if c.is_whitespace() {
            let generated = ch.is_generated().unwrap_or(false);
            pending = pending.max(if generated { Space::Soft } else { Space::Hard });
            continue;
        }
        // pdfium reports a hyphen that ends a line as U+0002; the page shows a hyphen.
        if c == '\u{2}' {
            c = '-';
        }
        if c.is_control() || c == '\u{FFFE}' || c == '\u{FEFF}' {
            continue;
        }
        let loose = ch.loose_bounds().ok();
        let Some(rect) = loose.or_else(|| if keep_boxes { tight } else { ch.tight_bounds().ok() }) else { continue };
        let bbox = geom.rect_to_display(
            rect.left().value as f64,
            rect.bottom().value as f64,
            rect.right().value as f64,
            rect.top().value as f64,
        );
        let (cx, cy) = ((bbox[0] + bbox[2]) / 2.0, (bbox[1] + bbox[3]) / 2.0);
        // Text outside the crop box is not displayed.
        if !(bbox[2] - bbox[0] > 0.0 || bbox[3] - bbox[1] > 0.0)
            || cx < 0.0
            || cy < 0.0
            || cx > geom.width
            || cy > geom.height
        {
            continue;
        }
        // pdfium measures the angle clockwise (text running up the page is 270°), and the
        // page turns clockwise for display: both subtract from the counter-clockwise angle.
        let pdfium_angle = ch.angle_degrees().unwrap_or(0.0) as f64;
        let display_angle = (-pdfium_angle - geom.rotation as f64).rem_euclid(360.0);
        let dir = ((display_angle / 90.0).round() as i64).rem_euclid(4) as Dir;
        let extent = if dir.is_multiple_of(2) { bbox[3] - bbox[1] } else { bbox[2] - bbox[0] };
        // The font size is the better em unless it is clearly not the glyph's size (a
        // `1 Tf` scaled by the text matrix, broken fonts): then use the box.
        let font = ch.scaled_font_size().value as f64;
        let size =
            if font > 0.5 && extent > 0.0 && (0.4..=2.5).contains(&(font / extent)) { font } else { extent.max(1.0) };
        let bold = ch.font_weight().is_some_and(|w| weight_value(w) >= 600);
        out.push(Glyph { ch: c, bbox, size, bold, space: pending, dir });
        pending = Space::None;
    }
    (out, all)
}

fn weight_value(w: PdfFontWeight) -> u32 {
    match w {
        PdfFontWeight::Weight100 => 100,
        PdfFontWeight::Weight200 => 200,
        PdfFontWeight::Weight300 => 300,
        PdfFontWeight::Weight400Normal => 400,
        PdfFontWeight::Weight500 => 500,
        PdfFontWeight::Weight600 => 600,
        PdfFontWeight::Weight700Bold => 700,
        PdfFontWeight::Weight800 => 800,
        PdfFontWeight::Weight900 => 900,
        PdfFontWeight::Custom(v) => v,
    }
}

/// Glyphs (stream order, one direction, frame coordinates) → words.
fn build_words(glyphs: &[Glyph]) -> Vec<Word> {
    let mut words: Vec<Word> = Vec::new();
    let mut last: Option<&Glyph> = None;
    let mut size_sum = 0.0;
    let mut count = 0usize;
    for g in glyphs {
        let continues = match last {
            None => false,
            Some(p) => {
                let h = (p.bbox[3] - p.bbox[1]).min(g.bbox[3] - g.bbox[1]).max(0.1);
                let same_line = overlap(p.bbox[1], p.bbox[3], g.bbox[1], g.bbox[3]) >= 0.5 * h;
                let em = p.size.max(g.size);
                // Right-to-left scripts come in logical order, moving left.
                let (advance_ok, gap) = if is_rtl(p.ch) && is_rtl(g.ch) {
                    (g.bbox[2] <= p.bbox[2] + 0.1 * em, p.bbox[0] - g.bbox[2])
                } else {
                    (g.bbox[0] >= p.bbox[0] - 0.1 * em, g.bbox[0] - p.bbox[2])
                };
                g.space == Space::None && same_line && advance_ok && gap <= em::WORD_GAP * em
            }
        };
        // Fake bold: the same glyph printed again a fraction of its width to the side.
        if let Some(p) = last
            && continues
            && p.ch == g.ch
            && (g.bbox[0] - p.bbox[0]).abs() < 0.3 * (p.bbox[2] - p.bbox[0]).max(0.1)
            && (g.bbox[1] - p.bbox[1]).abs() < 0.3 * (p.bbox[3] - p.bbox[1]).max(0.1)
        {
            continue;
        }
        if continues {
            if let Some(w) = words.last_mut() {
                w.text.push(g.ch);
                w.bbox = union(w.bbox, g.bbox);
                w.bold &= g.bold;
                size_sum += g.size;
                count += 1;
                w.size = size_sum / count as f64;
            }
        } else {
            words.push(Word {
                text: g.ch.to_string(),
                bbox: g.bbox,
                size: g.size,
                bold: g.bold,
                space_before: g.space,
            });
            size_sum = g.size;
            count = 1;
        }
        last = Some(g);
    }
    words
}

/// The value below which half of the total weight lies.
fn weighted_median(mut v: Vec<(f64, f64)>) -> f64 {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let half = v.iter().map(|s| s.1).sum::<f64>() / 2.0;
    let mut acc = 0.0;
    for (value, weight) in &v {
        acc += weight;
        if acc >= half {
            return *value;
        }
    }
    0.0
}

/// Hebrew, Arabic, Syriac, Thaana, N'Ko and their presentation forms.
fn is_rtl(c: char) -> bool {
    matches!(c as u32, 0x0590..=0x08FF | 0xFB1D..=0xFDFF | 0xFE70..=0xFEFF)
}

impl Word {
    /// Its first letter is right-to-left.
    fn is_rtl(&self) -> bool {
        self.text.chars().find(|c| c.is_alphabetic()).is_some_and(is_rtl)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Number of text lines among `words` (clusters of overlapping core extents).
fn count_lines<'a>(words: impl Iterator<Item = &'a Word>) -> usize {
    let mut spans: Vec<(f64, f64)> = words.map(Word::core).collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut n = 0;
    let mut end = f64::NEG_INFINITY;
    for (y0, y1) in spans {
        if y0 > end {
            n += 1;
        }
        end = end.max(y1);
    }
    n
}

/// Empty strips between the union of `spans`, as `(start, end)` in increasing order.
fn gaps(mut spans: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = Vec::new();
    let mut end = f64::NEG_INFINITY;
    for (s, e) in spans {
        if end.is_finite() && s > end {
            out.push((end, s));
        }
        end = end.max(e);
    }
    out
}

/// Recursive XY-cut: the words of one direction group → lines (as word index lists) in
/// reading order.
fn xy_cut(words: &[Word]) -> Vec<Vec<usize>> {
    let mut leaves = Vec::new();
    // Explicit stack: a long column is cut line by line, too deep for recursion.
    let mut stack: Vec<Vec<usize>> = vec![(0..words.len()).collect()];
    while let Some(node) = stack.pop() {
        if node.len() <= 1 {
            if !node.is_empty() {
                leaves.push(node);
            }
            continue;
        }
        let vertical = widest_gutter(words, &node);
        let horizontal = gaps(node.iter().map(|&i| words[i].core()).collect());
        let widest = horizontal.iter().map(|g| g.1 - g.0).fold(0.0, f64::max);
        let pieces: Vec<Vec<usize>> = match vertical {
            Some((g0, g1)) if g1 - g0 > HORIZONTAL_WEIGHT * widest => {
                let (left, right) = node.iter().partition(|&&i| words[i].bbox[2] <= g0);
                vec![left, right]
            }
            _ if horizontal.is_empty() => {
                leaves.push(node);
                continue;
            }
            _ => {
                // Cut at the widest gap only while a gutter might be hiding below it (a cut at a
                // chance alignment of line gaps would slice the columns into bands); with no
                // gutter in sight, cut at every gap about as wide at once, so a plain column
                // costs one pass instead of one per line.
                let cuts: Vec<f64> = horizontal
                    .iter()
                    .filter(|g| g.1 - g.0 >= if vertical.is_some() { widest } else { 0.9 * widest })
                    .map(|g| g.0)
                    .collect();
                let mut bands = vec![Vec::new(); cuts.len() + 1];
                for &i in &node {
                    let bottom = words[i].core().1;
                    bands[cuts.iter().filter(|&&c| bottom > c).count()].push(i);
                }
                bands
            }
        };
        if pieces.iter().filter(|p| !p.is_empty()).count() < 2 {
            // Cannot happen for a real gap; never loop on it.
            leaves.push(node);
            continue;
        }
        stack.extend(pieces.into_iter().rev().filter(|p| !p.is_empty()));
    }
    leaves
}

/// The widest empty vertical strip of `node` that separates columns: several lines on each
/// side, each side several words wide (not list numbers or table keys), or a very wide gap.
fn widest_gutter(words: &[Word], node: &[usize]) -> Option<(f64, f64)> {
    let em = median(node.iter().map(|&i| words[i].size).collect()).max(1.0);
    let mut best: Option<(f64, f64)> = None;
    for (g0, g1) in gaps(node.iter().map(|&i| (words[i].bbox[0], words[i].bbox[2])).collect()) {
        let width = g1 - g0;
        if width < em::GUTTER * em || best.is_some_and(|(a, b)| b - a >= width) {
            continue;
        }
        let side = |left: bool| {
            let members: Vec<&Word> = node
                .iter()
                .map(|&i| &words[i])
                .filter(|w| if left { w.bbox[2] <= g0 } else { w.bbox[0] >= g1 })
                .collect();
            let x0 = members.iter().map(|w| w.bbox[0]).fold(f64::INFINITY, f64::min);
            let x1 = members.iter().map(|w| w.bbox[2]).fold(f64::NEG_INFINITY, f64::max);
            (count_lines(members.into_iter()), x1 - x0)
        };
        let ((left, left_w), (right, right_w)) = (side(true), side(false));
        let columns = left >= 2 && right >= 2 && left_w.min(right_w) >= em::COLUMN * em;
        if columns || (width >= em::WIDE_GAP * em && left >= 1 && right >= 1) {
            best = Some((g0, g1));
        }
    }
    best
}

// ---- lines and paragraphs ---------------------------------------------------------------

#[derive(Clone, Debug)]
struct Line {
    text: String,
    bbox: Rect,
    size: f64,
    /// Median bottom of its words' loose boxes: a baseline proxy that one larger glyph does not
    /// move.
    base: f64,
    /// Smallest and largest word font size (small-caps labels sit in body lines).
    sizes: (f64, f64),
    /// Every word is bold (a run-in heading line).
    bold: bool,
}

/// A leaf of the XY-cut → its lines (a leaf is normally one line; overlapping lines are split
/// by core overlap), words left to right.
fn leaf_lines(words: &[Word], leaf: &[usize]) -> Vec<Line> {
    let mut idx = leaf.to_vec();
    idx.sort_by(|&a, &b| words[a].core().0.total_cmp(&words[b].core().0));
    let mut clusters: Vec<(f64, Vec<usize>)> = Vec::new();
    for i in idx {
        let (y0, y1) = words[i].core();
        match clusters.last_mut() {
            Some((end, members)) if y0 <= *end => {
                *end = end.max(y1);
                members.push(i);
            }
            _ => clusters.push((y1, vec![i])),
        }
    }
    clusters
        .into_iter()
        .map(|(_, mut members)| {
            members.sort_by(|&a, &b| words[a].bbox[0].total_cmp(&words[b].bbox[0]));
            // Minimal bidi for a left-to-right line: runs of right-to-left words read from
            // the right.
            let mut start = 0;
            while start < members.len() {
                let mut end = start;
                while end < members.len() && words[members[end]].is_rtl() {
                    end += 1;
                }
                members[start..end].reverse();
                start = end + 1;
            }
            let mut text = String::new();
            let mut bbox = words[members[0]].bbox;
            let mut prev: Option<&Word> = None;
            let mut sizes = Vec::new();
            for &i in &members {
                let w = &words[i];
                if let Some(p) = prev
                    && word_space(p, w)
                {
                    text.push(' ');
                }
                text.push_str(&w.text);
                bbox = union(bbox, w.bbox);
                sizes.extend(std::iter::repeat_n(w.size, w.text.chars().count()));
                prev = Some(w);
            }
            let base = median(members.iter().map(|&i| words[i].bbox[3]).collect());
            let word_sizes = members.iter().map(|&i| words[i].size);
            let range = (word_sizes.clone().fold(f64::INFINITY, f64::min), word_sizes.fold(0.0, f64::max));
            let bold = members.iter().all(|&i| words[i].bold || !words[i].text.chars().any(char::is_alphanumeric));
            Line { text, bbox, size: median(sizes), base, sizes: range, bold }
        })
        .collect()
}

/// A space between two words of a line: CJK never gets one unless the PDF has a space char;
/// other scripts get one for any whitespace or a visible gap.
fn word_space(prev: &Word, next: &Word) -> bool {
    if !ocr::needs_space(prev.last(), next.first()) {
        return next.space_before == Space::Hard;
    }
    let gap = (next.bbox[0] - prev.bbox[2]).max(prev.bbox[0] - next.bbox[2]);
    next.space_before != Space::None || gap > 0.2 * prev.size.min(next.size)
}

/// Join the lines of a paragraph. A line ending in a hyphen, dash or slash right after a letter
/// (`large-`, `FAA–2020–`, `https://`) continues without a space, so words and URLs stay whole
/// and the text still has every character the page shows.
fn join_lines(lines: &[Line]) -> String {
    let mut text = String::new();
    for line in lines {
        let mut tail = text.chars().rev();
        let (last, before) = (tail.next(), tail.next());
        let glued =
            matches!(last, Some('-' | '‐' | '–' | '/')) && before.is_some_and(|c| c.is_alphanumeric() || c == '/');
        if glued {
            text.push_str(&line.text);
        } else {
            ocr::push_joined(&mut text, &line.text);
        }
    }
    text
}

/// Bullet glyphs, including U+F0B7, the Symbol-font bullet Word documents carry.
fn starts_with_bullet(text: &str) -> bool {
    matches!(text.chars().next(), Some('•' | '●' | '▪' | '◦' | '■' | '□' | '➢' | '►' | '○' | '✓' | '\u{F0B7}'))
}

/// `1.`, `2)`, `(a)`, `a.`, `iv)` or a bullet: a list item whose continuation lines may hang.
fn starts_with_list_marker(text: &str) -> bool {
    if starts_with_bullet(text) {
        return true;
    }
    let first = text.split_whitespace().next().unwrap_or("");
    let inner = first.trim_start_matches('(').trim_end_matches(['.', ')']);
    first.len() > inner.len()
        && !inner.is_empty()
        && inner.len() <= 3
        && (inner.chars().all(|c| c.is_ascii_digit()) || inner.chars().all(|c| c.is_ascii_lowercase()))
}

fn ends_sentence(text: &str) -> bool {
    matches!(text.chars().next_back(), Some('.' | ':' | '?' | '!' | ';' | '。' | '：' | '？' | '！' | '；'))
}

struct ParaBuild {
    lines: Vec<Line>,
    bbox: Rect,
    size: f64,
    /// Left edge continuation lines are compared with (indent detection).
    ref_x0: f64,
    /// Baseline distance of the first two lines.
    pitch: Option<f64>,
    list_item: bool,
}

impl ParaBuild {
    fn new(line: Line) -> Self {
        ParaBuild {
            bbox: line.bbox,
            size: line.size,
            ref_x0: line.bbox[0],
            pitch: None,
            list_item: starts_with_list_marker(&line.text),
            lines: vec![line],
        }
    }

    fn accepts(&self, line: &Line, typical_pitch: Option<f64>) -> bool {
        let Some(last) = self.lines.last() else { return false };
        let size = self.size.max(line.size);
        // Same font size, or at least one size in common (`DATES: The FAA…` mixes small caps
        // and body text).
        let shares_size = line.sizes.0 <= last.sizes.1 * 1.05 && last.sizes.0 <= line.sizes.1 * 1.05;
        if size / self.size.min(line.size).max(0.1) > 1.15 && !shares_size {
            return false;
        }
        let dy = line.base - last.base;
        // Generated PDFs keep the line pitch of a paragraph exact; a few tenths of a point
        // more already separate paragraphs (the Federal Register adds 1.3 pt).
        let limit = match self.pitch {
            Some(p) => p * 1.08 + 0.2,
            None => (1.5 * size).max(typical_pitch.map_or(0.0, |p| p * 1.15)),
        };
        if dy < 0.5 * size || dy > limit || line.bold != last.bold {
            return false;
        }
        let width = |r: &Rect| r[2] - r[0];
        let shared = overlap(line.bbox[0], line.bbox[2], self.bbox[0], self.bbox[2]);
        if shared < 0.5 * width(&line.bbox).min(width(&self.bbox)) {
            return false;
        }
        if starts_with_bullet(&line.text) {
            return false;
        }
        let hanging = self.lines.len() == 1 && self.list_item;
        if line.bbox[0] > self.ref_x0 + em::INDENT * size && !hanging {
            return false;
        }
        let short = last.bbox[2] < self.bbox[2] - (0.25 * width(&self.bbox)).max(2.0 * size);
        !(self.lines.len() >= 2 && short && ends_sentence(&last.text))
    }

    fn push(&mut self, line: Line) {
        if let Some(last) = self.lines.last() {
            self.pitch.get_or_insert(line.base - last.base);
        }
        self.ref_x0 =
            if self.lines.len() == 1 && self.list_item { line.bbox[0] } else { self.ref_x0.min(line.bbox[0]) };
        self.bbox = union(self.bbox, line.bbox);
        self.lines.push(line);
    }
}

/// Most common baseline distance between consecutive lines of the same column, for judging
/// the first gap of a paragraph (double-spaced documents).
fn typical_pitch(lines: &[Line]) -> Option<f64> {
    let pitches: Vec<f64> = lines
        .windows(2)
        .filter_map(|w| {
            let (a, b) = (&w[0], &w[1]);
            let dy = b.base - a.base;
            let size = a.size.max(b.size);
            let same_column = overlap(a.bbox[0], a.bbox[2], b.bbox[0], b.bbox[2]) > 0.0;
            (same_column && (a.size - b.size).abs() < 0.1 * size && dy > 0.8 * size && dy < 3.0 * size).then_some(dy)
        })
        .collect();
    (!pitches.is_empty()).then(|| median(pitches))
}

/// A paragraph of the text layer, ready to become a block.
#[derive(Clone, Debug)]
struct TextPara {
    text: String,
    /// Display coordinates.
    bbox: Rect,
    size: f64,
    lines: usize,
    /// Mean width of the lines but the last, as a share of the paragraph's width: prose is
    /// close to 1, lists and diagram labels are ragged.
    fill: f64,
    upright: bool,
}

/// Lay out one page's glyphs into paragraphs in reading order.
fn layout(glyphs: Vec<Glyph>, geom: &Geom) -> Vec<TextPara> {
    let mut groups: Vec<(Dir, Vec<Glyph>)> = Vec::new();
    for dir in 0..4u8 {
        let mut g: Vec<Glyph> = glyphs.iter().filter(|g| g.dir == dir).cloned().collect();
        if g.is_empty() {
            continue;
        }
        for glyph in &mut g {
            glyph.bbox = to_frame(dir, glyph.bbox, geom.width, geom.height);
        }
        groups.push((dir, g));
    }
    // Main text direction first, then sideways text (axis labels, margin notes).
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));

    let mut out = Vec::new();
    for (dir, group) in groups {
        let words = build_words(&group);
        let lines: Vec<Line> = xy_cut(&words).iter().flat_map(|leaf| leaf_lines(&words, leaf)).collect();
        let pitch = typical_pitch(&lines);
        let mut paras: Vec<ParaBuild> = Vec::new();
        for line in lines {
            match paras.last_mut() {
                Some(p) if p.accepts(&line, pitch) => p.push(line),
                _ => paras.push(ParaBuild::new(line)),
            }
        }
        for p in paras {
            let text = join_lines(&p.lines);
            if text.trim().is_empty() {
                continue;
            }
            let sizes: Vec<f64> = p.lines.iter().map(|l| l.size).collect();
            let width = (p.bbox[2] - p.bbox[0]).max(0.1);
            let body_lines = p.lines.split_last().map_or(&[][..], |(_, rest)| rest);
            let fill = if body_lines.is_empty() {
                0.0
            } else {
                body_lines.iter().map(|l| (l.bbox[2] - l.bbox[0]) / width).sum::<f64>() / body_lines.len() as f64
            };
            out.push(TextPara {
                text,
                bbox: geom.clamp(from_frame(dir, p.bbox, geom.width, geom.height)),
                size: median(sizes),
                lines: p.lines.len(),
                fill,
                upright: dir == 0,
            });
        }
    }
    out
}

/// `exact` when pdfium finds the same characters inside the block's box (whitespace ignored,
/// order ignored: the block is in reading order, pdfium in content-stream order).
///
/// "What pdfium finds" is `FPDFText_GetBoundedText`. With the page's chars at hand
/// ([`PageChar`]) it is computed here instead, the same way (see [`bounded_chars`]), which saves
/// a scan of the whole page inside pdfium and a UTF-16 round trip per block.
fn text_quality(
    text: &PdfPageText,
    chars: Option<&[PageChar]>,
    geom: &Geom,
    bbox: Rect,
    block_text: &str,
    size: f64,
) -> Quality {
    // Shrink a little so the neighbours' boxes that merely touch this one are not included.
    let inset = (0.1 * size).min(0.5);
    let r = [bbox[0] + inset, bbox[1] + inset, bbox[2] - inset, bbox[3] - inset];
    if r[0] >= r[2] || r[1] >= r[3] {
        return Quality::Approximate;
    }
    let (l, b, rt, t) = geom.rect_to_user(r);
    let rect = PdfRect::new_from_values(b as f32, l as f32, t as f32, rt as f32);
    let query = [rect.left().value, rect.bottom().value, rect.right().value, rect.top().value];
    let mut u = match chars.and_then(|c| bounded_chars(c, query)) {
        Some(u) => u,
        None => text.inside_rect(rect).chars().filter_map(quality_char).collect(),
    };
    let mut a: Vec<char> = block_text.chars().filter_map(quality_char).collect();
    if a == u {
        return Quality::Exact;
    }
    a.sort_unstable();
    u.sort_unstable();
    if a == u { Quality::Exact } else { Quality::Approximate }
}

/// A char as the quality check compares it: whitespace dropped, pdfium's line-end hyphen
/// (U+0002) read as `-`.
fn quality_char(c: char) -> Option<char> {
    (!c.is_whitespace()).then_some(if c == '\u{2}' { '-' } else { c })
}

/// What `FPDFText_GetBoundedText(rect)` returns, as [`quality_char`]s, from the page's chars:
/// pdfium (`CPDF_TextPage::GetTextByRect`) takes, in page order, every char whose tight box
/// overlaps `rect` with a positive area (`CFX_FloatRect::Intersect`, then `IsEmpty`, in
/// `f32`), skips code point 0, and adds only whitespace of its own (spaces, `\r\n`).
///
/// `None` when a selected char lies outside the Basic Multilingual Plane or is a surrogate:
/// pdfium sizes its UTF-16 copy in code points, so such text comes back cut short or
/// undecodable, and only pdfium itself says exactly how.
fn bounded_chars(chars: &[PageChar], query: [f32; 4]) -> Option<Vec<char>> {
    // `std::max` / `std::min` as pdfium calls them (the query rect first).
    let max = |a: f32, b: f32| if a < b { b } else { a };
    let min = |a: f32, b: f32| if b < a { b } else { a };
    let mut out = Vec::new();
    for c in chars {
        let (l, b) = (max(query[0], c.bbox[0]), max(query[1], c.bbox[1]));
        let (r, t) = (min(query[2], c.bbox[2]), min(query[3], c.bbox[3]));
        // `Intersect` resets a negative intersection to zeros, which `IsEmpty` rejects like this.
        if l >= r || b >= t || c.unicode == 0 {
            continue;
        }
        let ch = char::from_u32(c.unicode).filter(|_| c.unicode <= 0xFFFF)?;
        out.extend(quality_char(ch));
    }
    Some(out)
}

// ---- OCR pages ----------------------------------------------------------------------------

/// Images anywhere on the page, including inside form XObjects (a few levels deep).
fn has_images(page: &PdfPage) -> bool {
    fn walk(obj: &PdfPageObject, depth: u8) -> bool {
        match obj {
            PdfPageObject::Image(_) => true,
            PdfPageObject::XObjectForm(form) if depth < 4 => {
                (0..form.len()).any(|i| form.get(i).is_ok_and(|o| walk(&o, depth + 1)))
            }
            _ => false,
        }
    }
    page.objects().iter().any(|o| walk(&o, 0))
}

/// Render the page and OCR it; paragraphs with boxes in display points.
///
/// Tesseract reads lines about 30–60 px tall best. When the first pass finds much taller
/// lines (a poster, a scan of large type), the page is rendered again so they come out at
/// [`OCR_TARGET_LINE_PX`] and the better-read pass wins.
fn ocr_page(page: &PdfPage, geom: &Geom) -> Result<Vec<ocr::OcrParagraph>, ParseError> {
    let longest = geom.width.max(geom.height).max(1.0);
    let dpi = OCR_DPI.min(OCR_MAX_SIDE_PX * 72.0 / longest);
    let first = ocr_at(page, geom, dpi)?;
    let line_px = median(first.lines.iter().map(|l| l.bbox[3] - l.bbox[1]).collect()) * dpi / 72.0;
    if line_px <= OCR_MAX_LINE_PX {
        return Ok(first.paragraphs());
    }
    let second = ocr_at(page, geom, (dpi * OCR_TARGET_LINE_PX / line_px).max(OCR_MIN_DPI))?;
    let score =
        |p: &ocr::OcrPage| p.lines.iter().map(|l| l.confidence as f64 * l.text.chars().count() as f64).sum::<f64>();
    Ok(if score(&second) > score(&first) { second } else { first }.paragraphs())
}

/// One render + OCR pass; line and word boxes come back in display points.
fn ocr_at(page: &PdfPage, geom: &Geom, dpi: f64) -> Result<ocr::OcrPage, ParseError> {
    let px_w = ((geom.width * dpi / 72.0).round() as i32).max(1);
    let px_h = ((geom.height * dpi / 72.0).round() as i32).max(1);
    let config = PdfRenderConfig::new().set_target_size(px_w, px_h).render_form_data(true).render_annotations(true);
    let image = page
        .render_with_config(&config)
        .and_then(|bitmap| bitmap.as_image())
        .map_err(|e| ParseError::new("pdf_malformed", format!("rendering the page for OCR failed: {e:?}")))?;
    let (img_w, img_h) = (image.width().max(1) as f64, image.height().max(1) as f64);
    let result = ocr::ocr_image(&image, Some(dpi.round() as u32));
    drop(image);
    let (sx, sy) = (geom.width / img_w, geom.height / img_h);
    let to_points = |b: [f64; 4]| geom.clamp([b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy]);
    let mut result = result?;
    for line in &mut result.lines {
        line.bbox = to_points(line.bbox);
        for word in &mut line.words {
            word.bbox = to_points(word.bbox);
        }
    }
    Ok(result)
}

// ---- the document -------------------------------------------------------------------------

/// What section detection needs to know about a block besides the block itself.
struct BlockInfo {
    /// Font size (upright text-layer blocks only: OCR and sideways text are never headings).
    size: Option<f64>,
    lines: usize,
    /// Body text size to compare it with (see [`assign_body_sizes`]).
    body: f64,
}

/// A block before it gets its id and char range.
struct Draft {
    text: String,
    bbox: Rect,
    quality: Quality,
    confidence: Option<f32>,
    info: BlockInfo,
}

fn load_error(e: PdfiumError, name: &str) -> ParseError {
    match e {
        PdfiumError::PdfiumLibraryInternalError(
            PdfiumInternalError::PasswordError | PdfiumInternalError::SecurityError,
        ) => ParseError::new("pdf_encrypted", format!("{name} is password-protected")),
        other => ParseError::new("pdf_malformed", format!("{name} is not a readable PDF: {other:?}")),
    }
}

fn rotation_degrees(page: &PdfPage) -> i32 {
    match page.rotation() {
        Ok(PdfPageRenderRotation::Degrees90) => 90,
        Ok(PdfPageRenderRotation::Degrees180) => 180,
        Ok(PdfPageRenderRotation::Degrees270) => 270,
        _ => 0,
    }
}

fn page_geom(page: &PdfPage) -> Geom {
    let rotation = rotation_degrees(page);
    let crop = page.boundaries().bounding().or_else(|_| page.boundaries().media()).map(|b| {
        [
            b.bounds.left().value as f64,
            b.bounds.bottom().value as f64,
            b.bounds.right().value as f64,
            b.bounds.top().value as f64,
        ]
    });
    match crop {
        Ok(c) if c[2] > c[0] && c[3] > c[1] => Geom::new(c, rotation),
        // No usable box: pdfium's displayed size with the origin at 0,0.
        _ => {
            let (w, h) = (page.width().value as f64, page.height().value as f64);
            let (uw, uh) = if rotation % 180 == 0 { (w, h) } else { (h, w) };
            Geom::new([0.0, 0.0, uw, uh], rotation)
        }
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Text-layer paragraphs of a page, with the (size, chars) samples of its prose paragraphs
/// for estimating the body text size.
fn text_drafts(
    text: &PdfPageText,
    chars: Option<&[PageChar]>,
    geom: &Geom,
    glyphs: Vec<Glyph>,
) -> (Vec<Draft>, Vec<(f64, f64)>) {
    let paras = layout(glyphs, geom);
    let samples = paras
        .iter()
        .filter(|p| p.upright && p.lines >= 3 && p.fill >= 0.8)
        .map(|p| (p.size, p.text.chars().count() as f64))
        .collect();
    let drafts = paras
        .into_iter()
        .map(|p| Draft {
            quality: text_quality(text, chars, geom, p.bbox, &p.text, p.size),
            bbox: p.bbox,
            confidence: None,
            info: BlockInfo { size: p.upright.then_some(p.size), lines: p.lines, body: 0.0 },
            text: p.text,
        })
        .collect();
    (drafts, samples)
}

fn ocr_drafts(page: &PdfPage, geom: &Geom) -> Result<Vec<Draft>, ParseError> {
    Ok(ocr_page(page, geom)?
        .into_iter()
        .map(|p| Draft {
            quality: ocr::quality_for(p.confidence),
            bbox: p.bbox,
            confidence: Some((p.confidence * 10.0).round() / 10.0),
            info: BlockInfo { size: None, lines: p.lines.len(), body: 0.0 },
            text: p.text,
        })
        .collect())
}

/// Body text size per block: the font size of most text in prose paragraphs (several full
/// lines; not titles, lists or diagram labels), the larger of the page's and the document's
/// so a page full of footnotes keeps its body text out of the headings; pages with little
/// prose use the document's.
fn assign_body_sizes(pages: &[Page], infos: &mut [BlockInfo], samples: &[Vec<(f64, f64)>]) {
    let mut doc: Vec<(f64, f64)> = samples.iter().flatten().copied().collect();
    if doc.is_empty() {
        let blocks = pages.iter().flat_map(|p| &p.blocks).zip(infos.iter());
        doc = blocks.filter_map(|(b, i)| Some((i.size?, b.text.chars().count() as f64))).collect();
    }
    let doc_body = weighted_median(doc);
    for (info, page) in infos.iter_mut().zip(block_pages(pages)) {
        let page_samples = &samples[page];
        let chars: f64 = page_samples.iter().map(|s| s.1).sum();
        info.body = if chars < 200.0 { doc_body } else { weighted_median(page_samples.clone()).max(doc_body) };
    }
}

fn parse_pdf(engine: &Engine, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
    let doc = engine.pdfium.load_pdf_from_byte_slice(input.bytes, None).map_err(|e| load_error(e, input.file_name))?;
    let page_count = doc.pages().len().max(0);
    if page_count == 0 {
        return Err(ParseError::new("pdf_malformed", format!("{} has no pages", input.file_name)));
    }
    let max_pages = super::worker::max_pages();
    if page_count as u64 > max_pages {
        return Err(ParseError::new(
            "too_many_pages",
            format!("{} has {page_count} pages; the limit is {max_pages} (MNOTE_PARSE_MAX_PAGES)", input.file_name),
        ));
    }
    let mut text_out = TextBuilder::default();
    let mut pages: Vec<Page> = Vec::new();
    let mut infos: Vec<BlockInfo> = Vec::new();
    let mut geoms: Vec<Geom> = Vec::new();
    let mut body_samples: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut used_ocr = false;

    // Page by page: only the current page (and its rendering, for OCR) is held in memory.
    for index in 0..page_count {
        let number = index as u32 + 1;
        let page = doc
            .pages()
            .get(index)
            .map_err(|e| ParseError::new("pdf_malformed", format!("page {number} cannot be loaded: {e:?}")))?;
        let geom = page_geom(&page);
        geoms.push(geom);
        let text = page
            .text()
            .map_err(|e| ParseError::new("pdf_malformed", format!("page {number}: no text layer: {e:?}")))?;
        let (glyphs, chars) = extract_chars(&text, &geom, true);
        let ocr_here = glyphs.len() < OCR_MIN_CHARS && has_images(&page);
        let drafts = if ocr_here {
            ocr::tesseract_available()?;
            used_ocr = true;
            body_samples.push(Vec::new());
            ocr_drafts(&page, &geom)?
        } else {
            let (drafts, samples) = text_drafts(&text, chars.as_deref(), &geom, glyphs);
            body_samples.push(samples);
            drafts
        };
        let mut blocks = Vec::with_capacity(drafts.len());
        for d in drafts {
            blocks.push(Block {
                id: format!("p{number}_b{}", blocks.len() + 1),
                block_type: BlockType::Paragraph,
                char_range: text_out.push_block(&d.text),
                text_fingerprint: artifact::fingerprint(&d.text),
                text: d.text,
                section_id: None,
                page: Some(number),
                bbox: Some(d.bbox.map(round2)),
                line_range: None,
                para_id_start: None,
                para_id_end: None,
                paragraph_ordinal: None,
                quality: d.quality,
                confidence: d.confidence,
            });
            infos.push(d.info);
        }
        pages.push(Page {
            page: number,
            width: round2(geom.width),
            height: round2(geom.height),
            rotation: geom.rotation,
            ocr: ocr_here,
            blocks,
        });
    }

    assign_body_sizes(&pages, &mut infos, &body_samples);
    let headings = heading_levels(&pages, &infos);
    for (block, level) in pages.iter_mut().flat_map(|p| p.blocks.iter_mut()).zip(&headings) {
        if level.is_some() {
            block.block_type = BlockType::Heading;
        }
    }
    let outline = read_outline(&doc, &geoms);
    let sections = if outline.iter().any(|e| e.page.is_some()) {
        sections_from_outline(&mut pages, &outline)
    } else {
        sections_from_headings(&mut pages, &headings)
    };

    let mut version = format!("{PROVIDER_VERSION} {}", engine.build);
    if used_ocr {
        let tess = ocr::tesseract_version()?;
        version.push_str(&format!(" + {tess} {}", ocr::DEFAULT_LANGS));
    }
    let source_hash = artifact::source_hash(input.bytes);
    Ok(ParsedArtifact {
        source_hash: source_hash.clone(),
        provider: PROVIDER_ID.to_string(),
        provider_version: version.clone(),
        text: text_out.finish(),
        source_map: SourceMap {
            schema: artifact::SOURCE_MAP_SCHEMA.to_string(),
            provider: PROVIDER_ID.to_string(),
            model_version: version,
            source_hash,
            resource_kind: "pdf".to_string(),
            page_count: Some(page_count as u32),
            pages,
            blocks: Vec::new(),
            sections,
            references: Vec::new(),
        },
    })
}

/// The 0-based page index of every block, in document order.
fn block_pages(pages: &[Page]) -> impl Iterator<Item = usize> + '_ {
    pages.iter().enumerate().flat_map(|(i, p)| std::iter::repeat_n(i, p.blocks.len()))
}

// ---- sections -----------------------------------------------------------------------------

/// Heading level (1 = largest) of every block, `None` for body text: short text-layer
/// paragraphs at least 20 % larger than the body text, not repeated on several pages; levels
/// rank the distinct heading sizes (half-point steps) of the whole document.
fn heading_levels(pages: &[Page], infos: &[BlockInfo]) -> Vec<Option<u8>> {
    // Running headers and footers repeat on many pages (page numbers aside): never headings.
    let furniture_key = |t: &str| -> String { normalised(t).chars().filter(|c| !c.is_ascii_digit()).collect() };
    let mut seen_on: HashMap<String, Vec<u32>> = HashMap::new();
    for p in pages {
        for b in &p.blocks {
            let on = seen_on.entry(furniture_key(&b.text)).or_default();
            if on.last() != Some(&p.page) {
                on.push(p.page);
            }
        }
    }
    let repeated = |t: &str| seen_on.get(&furniture_key(t)).is_some_and(|on| on.len() >= 3);
    let blocks = pages.iter().flat_map(|p| p.blocks.iter());
    let candidate: Vec<Option<i64>> = blocks
        .zip(infos)
        .map(|(b, info)| {
            let size = info.size?;
            let chars = b.text.chars().count();
            let is_heading = info.body > 0.0
                && !repeated(&b.text)
                && size >= 1.2 * info.body
                && info.lines <= 3
                && chars <= 200
                && b.text.chars().any(char::is_alphabetic);
            is_heading.then(|| (size * 2.0).round() as i64)
        })
        .collect();
    let mut sizes: Vec<i64> = candidate.iter().flatten().copied().collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    candidate
        .iter()
        .map(|c| c.and_then(|s| sizes.iter().position(|&x| x == s)).map(|rank| (rank + 1).min(6) as u8))
        .collect()
}

/// Sections opened by heading blocks; every block belongs to the innermost open section.
fn sections_from_headings(pages: &mut [Page], levels: &[Option<u8>]) -> Vec<Section> {
    let mut tree = SectionTree::default();
    let blocks = pages.iter_mut().flat_map(|p| p.blocks.iter_mut());
    for (block, level) in blocks.zip(levels) {
        let page = block.page;
        if let Some(level) = *level {
            let title = block.text.split_whitespace().collect::<Vec<_>>().join(" ");
            let section = tree.open(title, level, |_| {});
            section.page_start = page;
            section.page_end = page;
        }
        block.section_id = tree.add_block(&block.id);
        // The page range covers the whole subtree.
        tree.for_each_open(|s| s.page_end = s.page_end.max(page));
    }
    tree.sections
}

#[derive(Clone, Debug)]
struct OutlineEntry {
    title: String,
    level: u8,
    parent: Option<usize>,
    /// 0-based destination page.
    page: Option<usize>,
    /// Destination top in display coordinates, when the destination has one.
    y: Option<f64>,
}

/// The outline tree flattened depth-first. Bounded, because outlines can be cyclic.
fn read_outline(doc: &PdfDocument, geoms: &[Geom]) -> Vec<OutlineEntry> {
    const MAX_ENTRIES: usize = 10_000;
    const MAX_DEPTH: u8 = 16;
    let mut out = Vec::new();
    // (bookmark, level, parent)
    let mut stack: Vec<(PdfBookmark, u8, Option<usize>)> = Vec::new();
    if let Some(root) = doc.bookmarks().root() {
        stack.push((root, 1, None));
    }
    // A `/Next` or `/First` pointing back at an earlier item would repeat it (and everything
    // after it) up to MAX_ENTRIES times: each bookmark is read once.
    let mut seen: std::collections::HashSet<PdfBookmark> = std::collections::HashSet::new();
    while let Some((bookmark, level, parent)) = stack.pop() {
        if out.len() >= MAX_ENTRIES {
            break;
        }
        if !seen.insert(bookmark.clone()) {
            continue;
        }
        // Siblings after this one, children first (depth-first order).
        if let Some(next) = bookmark.next_sibling() {
            stack.push((next, level, parent));
        }
        let title = bookmark.title().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
        if title.is_empty() {
            continue;
        }
        // pdfium falls back to a GoTo action's destination by itself.
        let dest = bookmark.destination();
        let page = dest
            .as_ref()
            .and_then(|d| d.page_index().ok())
            .and_then(|p| usize::try_from(p).ok())
            .filter(|&p| p < geoms.len());
        // The destination's top is a user-space y: a vertical position on the displayed page
        // only when the page is not turned sideways.
        let y = page.filter(|&p| geoms[p].rotation % 180 == 0).and_then(|p| {
            let top = match dest.and_then(|d| d.view_settings().ok())? {
                PdfDestinationViewSettings::SpecificCoordinatesAndZoom(_, Some(y), _)
                | PdfDestinationViewSettings::FitPageHorizontallyToWindow(Some(y))
                | PdfDestinationViewSettings::FitBoundsHorizontallyToWindow(Some(y)) => y.value as f64,
                _ => return None,
            };
            Some(geoms[p].to_display(geoms[p].left, top).1)
        });
        let index = out.len();
        out.push(OutlineEntry { title, level, parent, page, y });
        if level < MAX_DEPTH
            && let Some(child) = bookmark.first_child()
        {
            stack.push((child, level + 1, Some(index)));
        }
    }
    out
}

fn normalised(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).flat_map(char::to_lowercase).collect()
}

/// Sections from the outline. Each entry starts at the block on its destination page whose
/// text starts with its title, else the first block at or below the destination's top, else
/// the page's first block; a block belongs to the entry that started last before it.
fn sections_from_outline(pages: &mut [Page], outline: &[OutlineEntry]) -> Vec<Section> {
    let flat: Vec<&Block> = pages.iter().flat_map(|p| &p.blocks).collect();
    // Global index of each page's first block (blocks are in page order), plus the end.
    let mut page_first: Vec<usize> = Vec::with_capacity(pages.len() + 1);
    let mut n = 0;
    for p in pages.iter() {
        page_first.push(n);
        n += p.blocks.len();
    }
    page_first.push(n);
    let starts: Vec<Option<usize>> = outline
        .iter()
        .map(|e| {
            let page = e.page?;
            let on_page = page_first[page]..page_first[page + 1];
            let title = normalised(&e.title);
            let by_title = on_page.clone().find(|&g| {
                let text = normalised(&flat[g].text);
                !title.is_empty()
                    && (text.starts_with(&title) || (text.chars().count() >= 4 && title.starts_with(&text)))
            });
            let top = |g: usize| flat[g].bbox.map_or(f64::MAX, |r| r[1]);
            let by_y = e.y.and_then(|y| {
                on_page.clone().filter(|&g| top(g) >= y - 2.0).min_by(|&a, &b| top(a).total_cmp(&top(b)))
            });
            // A destination page without blocks (a figure) starts at the next block.
            Some(by_title.or(by_y).unwrap_or(on_page.start))
        })
        .collect();

    let mut sections: Vec<Section> = Vec::with_capacity(outline.len());
    for (i, e) in outline.iter().enumerate() {
        let parent = e.parent.map(|p| &sections[p]);
        let mut path: Vec<String> = parent.map(|p: &Section| p.path.clone()).unwrap_or_default();
        path.push(e.title.clone());
        let page = e.page.map(|p| p as u32 + 1);
        sections.push(Section {
            id: format!("sec_{}", i + 1),
            title: e.title.clone(),
            path,
            level: e.level,
            parent_id: parent.map(|p| p.id.clone()),
            page_start: page,
            page_end: page,
            line_range: None,
            block_ids: Vec::new(),
        });
    }
    // Innermost section per block: the latest start at or before it; on a tie the later
    // outline entry (a child starting with its parent).
    let mut by_start: Vec<(usize, usize)> =
        starts.iter().enumerate().filter_map(|(s, st)| st.map(|st| (st, s))).collect();
    by_start.sort_unstable();
    let titled: std::collections::HashSet<usize> = by_start
        .iter()
        .filter(|&&(g, s)| g < flat.len() && normalised(&flat[g].text).starts_with(&normalised(&outline[s].title)))
        .map(|&(g, _)| g)
        .collect();
    drop(flat);
    let (mut next, mut current, mut g) = (0, None, 0);
    for page in pages.iter_mut() {
        for block in &mut page.blocks {
            while next < by_start.len() && by_start[next].0 <= g {
                current = Some(by_start[next].1);
                next += 1;
            }
            if titled.contains(&g) {
                block.block_type = BlockType::Heading;
            }
            if let Some(s) = current {
                block.section_id = Some(sections[s].id.clone());
                sections[s].block_ids.push(block.id.clone());
                let mut up = Some(s);
                while let Some(c) = up {
                    sections[c].page_end = sections[c].page_end.max(Some(page.page));
                    up = outline[c].parent;
                }
            }
            g += 1;
        }
    }
    sections
}

// ---- routing probe (external providers) ---------------------------------------------------

/// Displayed size, rotation and "would be OCR'd" of every page, without parsing text or
/// rendering anything: routing decides with it whether a PDF is scanned (MinerU), and the
/// MinerU provider converts its page-relative boxes to points with these sizes.
pub fn probe_pages(bytes: &[u8], file_name: &str) -> Result<Vec<super::mineru::ProbePage>, ParseError> {
    let engine = engine()?;
    let doc = engine.pdfium.load_pdf_from_byte_slice(bytes, None).map_err(|e| load_error(e, file_name))?;
    let page_count = doc.pages().len().max(0);
    if page_count as u64 > super::worker::max_pages() {
        return Err(ParseError::new("too_many_pages", format!("{file_name} has {page_count} pages (MNOTE_PARSE_MAX_PAGES)")));
    }
    let mut out = Vec::with_capacity(page_count as usize);
    for index in 0..page_count {
        let page = doc
            .pages()
            .get(index)
            .map_err(|e| ParseError::new("pdf_malformed", format!("page {} cannot be loaded: {e:?}", index + 1)))?;
        let geom = page_geom(&page);
        let glyphs = page.text().map(|t| extract_glyphs(&t, &geom).len()).unwrap_or(0);
        out.push(super::mineru::ProbePage {
            width: round2(geom.width),
            height: round2(geom.height),
            rotation: geom.rotation,
            needs_ocr: glyphs < OCR_MIN_CHARS && has_images(&page),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn testdata(rel: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/docs").join(rel);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn parse_bytes(bytes: &[u8]) -> Result<ParsedArtifact, ParseError> {
        PdfProvider.parse(&ParseInput { bytes, file_name: "test.pdf", kind: "pdf" })
    }

    fn parse_file(rel: &str) -> ParsedArtifact {
        let started = Instant::now();
        let a = parse_bytes(&testdata(rel)).unwrap();
        let pages = a.source_map.pages.len();
        eprintln!("{rel}: {pages} pages in {:?} ({:?}/page)", started.elapsed(), started.elapsed() / pages as u32);
        a.validate().unwrap();
        assert_bboxes_on_page(&a);
        a
    }

    fn assert_bboxes_on_page(a: &ParsedArtifact) {
        for page in &a.source_map.pages {
            for b in &page.blocks {
                let [x0, y0, x1, y1] = b.bbox.unwrap();
                assert!(
                    0.0 <= x0 && x0 <= x1 && x1 <= page.width && 0.0 <= y0 && y0 <= y1 && y1 <= page.height,
                    "{} {:?} outside {}x{}",
                    b.id,
                    b.bbox,
                    page.width,
                    page.height
                );
                assert_eq!(b.page, Some(page.page));
                assert!(b.id.starts_with(&format!("p{}_b", page.page)));
            }
        }
    }

    fn block_index(a: &ParsedArtifact, needle: &str) -> usize {
        a.all_blocks().position(|b| b.text.contains(needle)).unwrap_or_else(|| panic!("no block contains {needle:?}"))
    }

    fn block<'a>(a: &'a ParsedArtifact, needle: &str) -> &'a Block {
        a.all_blocks().nth(block_index(a, needle)).unwrap()
    }

    fn near(actual: f64, expected: f64, tolerance: f64) -> bool {
        (actual - expected).abs() <= tolerance
    }

    // ---- hand-written PDFs ------------------------------------------------------------------

    struct TestPage<'a> {
        media: [f64; 4],
        crop: Option<[f64; 4]>,
        rotate: i32,
        content: &'a str,
    }

    impl<'a> TestPage<'a> {
        fn new(content: &'a str) -> Self {
            TestPage { media: [0.0, 0.0, 612.0, 792.0], crop: None, rotate: 0, content }
        }
    }

    /// (title, level, 0-based page, top y in user space)
    type TestOutline<'a> = [(&'a str, u8, usize, f64)];

    /// A minimal PDF with Helvetica text; optionally an outline or an `/Encrypt` dictionary whose
    /// password hashes match no password.
    fn build_pdf(pages: &[TestPage], outline: &TestOutline, encrypted: bool) -> Vec<u8> {
        let n = pages.len();
        let page_id = |i: usize| 4 + 2 * i;
        let outline_root = 4 + 2 * n;
        let item_id = |i: usize| outline_root + 1 + i;
        let mut objects: Vec<String> = Vec::new();
        let outlines = if outline.is_empty() { String::new() } else { format!(" /Outlines {outline_root} 0 R") };
        objects.push(format!("<< /Type /Catalog /Pages 2 0 R{outlines} >>"));
        let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", page_id(i))).collect();
        objects.push(format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")));
        objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into());
        let nums = |r: [f64; 4]| r.map(|v| v.to_string()).join(" ");
        for (i, p) in pages.iter().enumerate() {
            let crop = p.crop.map(|c| format!(" /CropBox [{}]", nums(c))).unwrap_or_default();
            objects.push(format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [{}]{crop} /Rotate {} /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                nums(p.media),
                p.rotate,
                page_id(i) + 1
            ));
            objects.push(format!("<< /Length {} >>\nstream\n{}\nendstream", p.content.len() + 1, p.content));
        }
        if !outline.is_empty() {
            // Pre-order entries → parent/sibling/child links.
            let parent: Vec<Option<usize>> =
                (0..outline.len()).map(|i| (0..i).rev().find(|&j| outline[j].1 < outline[i].1)).collect();
            let children =
                |p: Option<usize>| -> Vec<usize> { (0..outline.len()).filter(|&i| parent[i] == p).collect() };
            let top = children(None);
            objects.push(format!(
                "<< /Type /Outlines /First {} 0 R /Last {} 0 R /Count {} >>",
                item_id(top[0]),
                item_id(*top.last().unwrap()),
                outline.len()
            ));
            for (i, (title, _, page, y)) in outline.iter().enumerate() {
                let siblings = children(parent[i]);
                let at = siblings.iter().position(|&s| s == i).unwrap();
                let mut links = format!(" /Parent {} 0 R", parent[i].map_or(outline_root, item_id));
                if at > 0 {
                    links += &format!(" /Prev {} 0 R", item_id(siblings[at - 1]));
                }
                if at + 1 < siblings.len() {
                    links += &format!(" /Next {} 0 R", item_id(siblings[at + 1]));
                }
                let kids = children(Some(i));
                if !kids.is_empty() {
                    links += &format!(
                        " /First {} 0 R /Last {} 0 R /Count {}",
                        item_id(kids[0]),
                        item_id(*kids.last().unwrap()),
                        kids.len()
                    );
                }
                objects.push(format!("<< /Title ({title}){links} /Dest [{} 0 R /XYZ 0 {y} 0] >>", page_id(*page)));
            }
        }
        let encrypt_id = objects.len() + 1;
        if encrypted {
            let hash = "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF";
            objects.push(format!("<< /Filter /Standard /V 1 /R 2 /O <{hash}> /U <{hash}> /P -44 >>"));
        }
        let mut out: Vec<u8> = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
        let mut offsets = Vec::new();
        for (i, body) in objects.iter().enumerate() {
            offsets.push(out.len());
            out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
        }
        let xref = out.len();
        out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
        for off in offsets {
            out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
        }
        let encrypt = if encrypted {
            format!(
                " /Encrypt {encrypt_id} 0 R /ID [<0123456789ABCDEF0123456789ABCDEF> <0123456789ABCDEF0123456789ABCDEF>]"
            )
        } else {
            String::new()
        };
        out.extend_from_slice(
            format!("trailer\n<< /Size {} /Root 1 0 R{encrypt} >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1)
                .as_bytes(),
        );
        out
    }

    /// Bounding box of the dark pixels of page `index` rendered at 1 px per point.
    fn ink_box(bytes: &[u8], index: i32) -> Rect {
        let engine = engine().unwrap();
        let doc = engine.pdfium.load_pdf_from_byte_slice(bytes, None).unwrap();
        let page = doc.pages().get(index).unwrap();
        let (w, h) = (page.width().value.round() as i32, page.height().value.round() as i32);
        let img = page
            .render_with_config(&PdfRenderConfig::new().set_target_size(w, h))
            .unwrap()
            .as_image()
            .unwrap()
            .to_luma8();
        let mut r = [f64::MAX, f64::MAX, f64::MIN, f64::MIN];
        for (x, y, p) in img.enumerate_pixels() {
            if p[0] < 128 {
                r = union(r, [x as f64, y as f64, x as f64 + 1.0, y as f64 + 1.0]);
            }
        }
        r
    }

    // ---- pure geometry --------------------------------------------------------------------

    #[test]
    fn geometry_round_trips_for_every_rotation() {
        for rotation in [0, 90, 180, 270] {
            let g = Geom::new([20.0, 10.0, 420.0, 310.0], rotation);
            let (w, h) = if rotation % 180 == 0 { (400.0, 300.0) } else { (300.0, 400.0) };
            assert_eq!((g.width, g.height), (w, h));
            // The crop box corners land on the displayed page's corners.
            for (x, y) in [(20.0, 10.0), (420.0, 310.0), (20.0, 310.0), (420.0, 10.0)] {
                let (dx, dy) = g.to_display(x, y);
                assert!((near(dx, 0.0, 1e-9) || near(dx, w, 1e-9)) && (near(dy, 0.0, 1e-9) || near(dy, h, 1e-9)));
                let (ux, uy) = g.to_user(dx, dy);
                assert!(near(ux, x, 1e-9) && near(uy, y, 1e-9));
            }
            for dir in 0..4 {
                let r = [10.0, 20.0, 50.0, 35.0];
                let f = to_frame(dir, r, w, h);
                assert_eq!(from_frame(dir, f, w, h), r);
            }
        }
        // /Rotate 90 turns the page clockwise: the user-space top-left corner goes top-right.
        let g = Geom::new([0.0, 0.0, 612.0, 792.0], 90);
        assert_eq!(g.to_display(0.0, 792.0), (792.0, 0.0));
    }

    fn word(text: &str, bbox: Rect, space_before: Space) -> Word {
        Word { text: text.into(), bbox, size: 10.0, bold: false, space_before }
    }

    #[test]
    fn xy_cut_reads_columns_after_a_spanning_header() {
        let mut words = vec![word("Header", [0.0, 0.0, 300.0, 12.0], Space::None)];
        for line in 0..4 {
            let y = 30.0 + 12.0 * line as f64;
            words.push(word(&format!("left{line}"), [0.0, y, 140.0, y + 10.0], Space::Soft));
            words.push(word(&format!("right{line}"), [150.0, y, 300.0, y + 10.0], Space::Soft));
        }
        let order: Vec<&str> = xy_cut(&words).iter().flatten().map(|&i| words[i].text.as_str()).collect();
        assert_eq!(order, ["Header", "left0", "left1", "left2", "left3", "right0", "right1", "right2", "right3"]);
        // One line with an ordinary word gap is never split into columns.
        let words =
            vec![word("a", [0.0, 0.0, 20.0, 10.0], Space::None), word("b", [27.0, 0.0, 40.0, 10.0], Space::Soft)];
        assert_eq!(xy_cut(&words).len(), 1);
    }

    #[test]
    fn words_and_lines_are_joined_by_script() {
        let cjk =
            [word("线程", [0.0, 0.0, 20.0, 10.0], Space::Soft), word("作用域", [21.0, 0.0, 50.0, 10.0], Space::None)];
        assert!(!word_space(&cjk[0], &cjk[1]));
        assert!(word_space(&cjk[0], &word("x", [21.0, 0.0, 30.0, 10.0], Space::Soft)));
        let lines = |texts: &[&str]| -> Vec<Line> {
            texts
                .iter()
                .map(|t| Line {
                    text: t.to_string(),
                    bbox: [0.0; 4],
                    size: 10.0,
                    base: 0.0,
                    sizes: (10.0, 10.0),
                    bold: false,
                })
                .collect()
        };
        assert_eq!(join_lines(&lines(&["a large-", "scale set"])), "a large-scale set");
        assert_eq!(
            join_lines(&lines(&["Docket FAA–2020–", "0686; see https://", "www.x.gov"])),
            "Docket FAA–2020–0686; see https://www.x.gov"
        );
        assert_eq!(join_lines(&lines(&["线程作用域", "允许借用"])), "线程作用域允许借用");
        assert_eq!(join_lines(&lines(&["ends –", "here"])), "ends – here");
        assert!(
            starts_with_list_marker("1. First")
                && starts_with_list_marker("(a) item")
                && !starts_with_list_marker("2020. The")
        );
    }

    #[test]
    fn library_path_prefers_the_environment() {
        let root = Path::new("/nonexistent-root");
        assert_eq!(library_path(Some("/opt/libpdfium.so".into()), root), Some(PathBuf::from("/opt/libpdfium.so")));
        assert_eq!(library_path(Some("".into()), root), None);
        assert_eq!(library_path(None, root), None);
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        if let Some(found) = library_path(None, here) {
            assert!(found.starts_with(here.join(".local")));
        }
    }

    #[test]
    fn build_hint_is_used_only_for_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libpdfium.so");
        std::fs::write(&lib, b"not really a library").unwrap();
        let hashed = library_build(&lib);
        assert!(hashed.starts_with("pdfium sha256:"), "{hashed}");
        let id = file_identity(&lib).unwrap();
        assert_eq!(library_build_for(&lib, Some(format!("{id} pdfium/1 (test)"))), "pdfium/1 (test)");
        assert_eq!(library_build_for(&lib, Some("1:2:3:4.000000000 pdfium/1 (test)".into())), hashed);
        assert_eq!(library_build_for(&lib, Some(format!("{id} "))), hashed);
        assert_eq!(library_build_for(&lib, None), hashed);
        // Rewritten in place: another size, so another identity.
        std::fs::write(&lib, b"another library build").unwrap();
        assert_ne!(library_build_for(&lib, Some(format!("{id} pdfium/1 (test)"))), "pdfium/1 (test)");
    }

    // ---- real documents -------------------------------------------------------------------

    #[test]
    fn pdfium_is_available() {
        let version = PdfProvider.provider_version();
        assert!(engine().is_ok(), "libpdfium.so must be provisioned (./dev, or {PDFIUM_LIB_ENV})");
        assert!(version.contains("pdfium"), "{version}");
    }

    #[test]
    fn federal_register_is_read_column_by_column() {
        let a = parse_file("pdf/pl_federal-register-2020-17221.pdf");
        assert_eq!(a.source_map.page_count, Some(15));
        assert_eq!(a.source_map.resource_kind, "pdf");
        let p1 = &a.source_map.pages[0];
        assert_eq!((p1.width, p1.height, p1.rotation, p1.ocr), (612.0, 792.0, 0, false));

        // Column 1: the whole SUMMARY paragraph is one block, inside the first column.
        let summary = block(&a, "SUMMARY: The FAA proposes to supersede");
        assert!(summary.text.contains(
            "SUMMARY: The FAA proposes to supersede Airworthiness Directive (AD) 2018–23–51, which applies to all \
             The Boeing Company Model 737–8 and 737–9 (737 MAX) airplanes."
        ));
        assert!(summary.text.ends_with("unsafe condition on these products."), "{}", summary.text);
        let [x0, y0, x1, y1] = summary.bbox.unwrap();
        assert!(
            near(x0, 45.0, 1.0) && x1 < 216.0 && near(y0, 378.0, 2.0) && near(y1, 667.0, 2.0),
            "{:?}",
            summary.bbox
        );
        // The labelled paragraphs that follow (set 1.3 pt apart, no indent) are blocks of their own.
        assert!(block(&a, "DATES: The FAA must receive comments").text.ends_with("September 21, 2020."));
        assert_eq!(summary.quality, Quality::Exact);

        // Reading order: column 1, then column 2, then column 3, then the next page.
        let col1 = block_index(&a, "SUMMARY: The FAA proposes");
        let col1_end = block_index(&a, "ADDRESSES: You may send comments");
        let col2 = block_index(&a, "Federal eRulemaking Portal: Go to https://www.regulations.gov.");
        let col3 = block_index(&a, "Confidential Business Information (CBI)");
        let page2 = block_index(&a, "Hatta International Airport in Jakarta");
        assert!(
            col1 < col1_end && col1_end < col2 && col2 < col3 && col3 < page2,
            "{col1} {col1_end} {col2} {col3} {page2}"
        );
        assert!(block(&a, "Federal eRulemaking Portal").bbox.unwrap()[0] > 216.0);
        assert!(block(&a, "Confidential Business Information (CBI)").bbox.unwrap()[0] > 393.0);
        // The first-line indent starts a paragraph; a heading is its own block.
        assert_eq!(block(&a, "Examining the AD Docket").text, "Examining the AD Docket");

        // Sideways margin text is read in its own direction.
        let margin = block(&a, "with PROPOSALS");
        assert_eq!(margin.text, "jbell on DSKJLSW7X2PROD with PROPOSALS");
        let [x0, y0, x1, y1] = margin.bbox.unwrap();
        assert!(x1 - x0 < 10.0 && y1 - y0 > 100.0, "{:?}", margin.bbox);

        // Quality: pdfium finds the block's own text under (nearly) every box.
        let total = a.all_blocks().count();
        let exact = a.all_blocks().filter(|b| b.quality == Quality::Exact).count();
        assert!(exact * 100 >= total * 97, "{exact}/{total} exact");
        // Running headers never become sections; the page banner does.
        assert!(a.source_map.sections.iter().all(|s| !s.title.starts_with("Federal Register /")));
        assert!(a.source_map.sections.iter().any(|s| s.title == "Proposed Rules" && s.level == 1));
    }

    /// The quality check's own selection of the chars under a box ([`bounded_chars`]) gives
    /// what `FPDFText_GetBoundedText` gives, for every block box and many other boxes
    /// (word-sized, overlapping, touching) on every page of the text PDFs.
    #[test]
    fn bounded_chars_match_pdfium() {
        let engine = engine().unwrap();
        let mut files: Vec<Vec<u8>> = [
            "pdf/pl_federal-register-2020-17221.pdf",
            "pdf/pypdf_GeoBase_NHNC1_Data_Model_UML_EN.pdf",
            "pdf/pypdf_multilang.pdf",
            "pdf_scanned/ocr_multipage.pdf",
        ]
        .iter()
        .map(|f| testdata(f))
        .collect();
        let overlapping = "BT /F1 12 Tf 72 700 Td (Horizontal line of text here) Tj ET \
                           BT /F1 12 Tf 0 1 -1 0 140 680 Tm (SIDEWAYS) Tj ET";
        files.push(build_pdf(&[TestPage::new(overlapping)], &[], false));
        let content = "BT /F1 20 Tf 60 200 Td (Hello rotated world) Tj ET";
        for rotate in [90, 270] {
            let page =
                TestPage { media: [0.0, 0.0, 400.0, 300.0], crop: Some([20.0, 10.0, 380.0, 290.0]), rotate, content };
            files.push(build_pdf(&[page], &[], false));
        }
        let (mut compared, mut non_empty) = (0, 0);
        for bytes in &files {
            let doc = engine.pdfium.load_pdf_from_byte_slice(bytes, None).unwrap();
            for page in doc.pages().iter() {
                let geom = page_geom(&page);
                let text = page.text().unwrap();
                let (glyphs, chars) = extract_chars(&text, &geom, true);
                let chars = chars.expect("every char box is readable");
                let mut boxes: Vec<Rect> = glyphs.iter().map(|g| g.bbox).collect();
                boxes.extend(layout(glyphs, &geom).iter().map(|p| p.bbox));
                boxes.push([0.0, 0.0, geom.width, geom.height]);
                boxes.push([0.0, 0.0, geom.width / 2.0, geom.height / 3.0]);
                for (i, bbox) in boxes.into_iter().enumerate() {
                    // Insets like the quality check's, and none (boxes that touch).
                    let inset = [0.0, 0.5, 0.05][i % 3];
                    let r = [bbox[0] + inset, bbox[1] + inset, bbox[2] - inset, bbox[3] - inset];
                    let (l, b, rt, t) = geom.rect_to_user(r);
                    let rect = PdfRect::new_from_values(b as f32, l as f32, t as f32, rt as f32);
                    let query = [rect.left().value, rect.bottom().value, rect.right().value, rect.top().value];
                    let ours = bounded_chars(&chars, query).expect("test PDFs stay in the BMP");
                    let theirs: Vec<char> = text.inside_rect(rect).chars().filter_map(quality_char).collect();
                    assert_eq!(ours, theirs, "box {r:?}");
                    compared += 1;
                    non_empty += usize::from(!ours.is_empty());
                }
            }
        }
        assert!(compared > 10_000 && non_empty > 10_000, "{compared} boxes, {non_empty} with text");
    }

    #[test]
    fn bounded_chars_follow_pdfium_rect_rules() {
        let c = |unicode: u32, bbox: [f32; 4]| PageChar { unicode, bbox };
        let chars = [
            c('a' as u32, [0.0, 0.0, 10.0, 10.0]),
            c('b' as u32, [10.0, 0.0, 20.0, 10.0]), // touches the query's right edge only
            c(' ' as u32, [2.0, 2.0, 4.0, 4.0]),
            c(0, [2.0, 2.0, 4.0, 4.0]),
            c(2, [5.0, 5.0, 6.0, 6.0]),
            c('c' as u32, [5.0, 5.0, 5.0, 6.0]), // no width
        ];
        assert_eq!(bounded_chars(&chars, [1.0, 1.0, 10.0, 10.0]), Some(vec!['a', '-']));
        let wide = [c(0x2_0000, [0.0, 0.0, 10.0, 10.0])];
        assert_eq!(bounded_chars(&wide, [1.0, 1.0, 9.0, 9.0]), None, "outside the BMP: ask pdfium");
        assert_eq!(bounded_chars(&wide, [20.0, 20.0, 30.0, 30.0]), Some(vec![]));
    }

    #[test]
    fn parsing_twice_gives_the_same_artifact() {
        let bytes = testdata("pdf/pl_federal-register-2020-17221.pdf");
        let first = parse_bytes(&bytes).unwrap();
        let second = parse_bytes(&bytes).unwrap();
        assert_eq!(first, second);
        assert_eq!(first.source_hash, artifact::source_hash(&bytes));
    }

    #[test]
    fn multilingual_text_keeps_its_scripts() {
        let a = parse_file("pdf/pypdf_multilang.pdf");
        let texts: Vec<&str> = a.all_blocks().map(|b| b.text.as_str()).collect();
        assert!(texts.contains(&"Chinese (traditional): 你好世界"), "{texts:?}");
        assert!(texts.contains(&"Japanese: こんにちは世界"), "{texts:?}");
        assert!(texts.contains(&"Russian: Привет, мир"), "{texts:?}");
        // Arabic comes out in logical order, not in the visual left-to-right order.
        assert!(texts.contains(&"Arabic: مرحبا بالعالم"), "{texts:?}");
        assert!(a.all_blocks().all(|b| b.quality == Quality::Exact));
    }

    #[test]
    fn heading_sizes_become_sections_without_an_outline() {
        let a = parse_file("pdf/pypdf_GeoBase_NHNC1_Data_Model_UML_EN.pdf");
        let sections = &a.source_map.sections;
        let find =
            |title: &str| sections.iter().find(|s| s.title == title).unwrap_or_else(|| panic!("no section {title}"));
        let overview = find("1 Overview");
        assert_eq!(overview.page_start, Some(6));
        let body = block(&a, "The data model can (and must) extend beyond");
        assert_eq!(body.section_id.as_deref(), Some(overview.id.as_str()));
        assert!(overview.block_ids.contains(&body.id));
        let heading = block(&a, "1 Overview");
        assert_eq!(heading.block_type, BlockType::Heading);
        assert_eq!(find("3 Model").level, overview.level);
        assert!(find("National Hydro Network, Canada, Level 1").level < overview.level);
        assert!(
            sections.iter().all(|s| s.title != "National Hydro Network, Data Model – Edition 1.0"),
            "running header"
        );
    }

    #[test]
    fn scanned_page_is_ocred_with_boxes_in_points() {
        let a = parse_file("pdf_scanned/ocr_c02-22.pdf");
        let page = &a.source_map.pages[0];
        assert!(page.ocr);
        assert_eq!((page.width, page.height), (384.0, 470.88));
        assert!(a.text.contains("went tip-toeing along a path amongst the trees"), "{}", a.text);
        assert!(a.text.contains("Miss Watson’s big"), "{}", a.text);
        assert!(a.provider_version.contains("tesseract "), "{}", a.provider_version);
        // The caption under the illustration, bottom left of the page.
        let caption = block(&a, "TIP-TOED ALONG");
        let [x0, y0, x1, y1] = caption.bbox.unwrap();
        assert!(x0 > 50.0 && x1 < 160.0 && y0 > 380.0 && y1 < 405.0, "{:?}", caption.bbox);
        let kitchen = block(&a, "passing by the kitchen");
        assert!(kitchen.bbox.unwrap()[0] > 150.0, "right of the illustration: {:?}", kitchen.bbox);
        assert!(a.all_blocks().all(|b| b.confidence.is_some()));
        assert!(a.all_blocks().any(|b| b.quality == Quality::Exact));
    }

    #[test]
    fn mixed_scanned_document_uses_its_outline() {
        let a = parse_file("pdf_scanned/ocr_multipage.pdf");
        let pages = &a.source_map.pages;
        assert_eq!(pages.iter().map(|p| p.ocr).collect::<Vec<_>>(), [true, true, true, false, true, true]);
        // The 30-inch page is read at a resolution where its large type is legible.
        assert!(a.text.contains("9000x9000 pixels at") && a.text.contains("megapixels"), "{}", a.text);
        assert!(pages[5].blocks.iter().any(|b| b.text.contains("It was the year of Our Lord one thousand")));
        let s = &a.source_map.sections;
        let summary: Vec<(&str, u8, Option<&str>, Option<u32>)> =
            s.iter().map(|s| (s.title.as_str(), s.level, s.parent_id.as_deref(), s.page_start)).collect();
        assert_eq!(
            summary,
            [
                ("Chapter II", 1, None, Some(1)),
                ("Huge Page", 1, None, Some(2)),
                ("Wikipedia image", 1, None, Some(3)),
                ("Indented image", 2, Some("sec_3"), Some(4)),
            ]
        );
        assert_eq!(s[3].path, ["Wikipedia image", "Indented image"]);
        assert_eq!(s[2].page_end, Some(6));
        for b in &pages[0].blocks {
            assert_eq!(b.section_id.as_deref(), Some("sec_1"));
        }
        assert!(pages[5].blocks.iter().all(|b| b.section_id.as_deref() == Some("sec_4")));
    }

    #[test]
    fn rotated_pages_map_boxes_to_the_displayed_page() {
        let content = "BT /F1 20 Tf 60 200 Td (Hello rotated world) Tj ET";
        for rotate in [0, 90, 180, 270] {
            let page =
                TestPage { media: [0.0, 0.0, 400.0, 300.0], crop: Some([20.0, 10.0, 380.0, 290.0]), rotate, content };
            let bytes = build_pdf(&[page], &[], false);
            let a = parse_bytes(&bytes).unwrap();
            a.validate().unwrap();
            assert_bboxes_on_page(&a);
            let p = &a.source_map.pages[0];
            let (w, h) = if rotate % 180 == 0 { (360.0, 280.0) } else { (280.0, 360.0) };
            assert_eq!((p.width, p.height, p.rotation), (w, h, rotate));
            assert_eq!(p.blocks.len(), 1);
            let b = &p.blocks[0];
            assert_eq!(b.text, "Hello rotated world");
            assert_eq!(b.quality, Quality::Exact);
            // What pdfium draws lies inside the box, and the box fits the drawing.
            let bbox = b.bbox.unwrap();
            let ink = ink_box(&bytes, 0);
            for i in 0..4 {
                let inside = if i < 2 { ink[i] >= bbox[i] - 1.5 } else { ink[i] <= bbox[i] + 1.5 };
                assert!(inside, "rotate {rotate}: ink {ink:?} outside {bbox:?}");
            }
            let centre = |r: Rect| ((r[0] + r[2]) / 2.0, (r[1] + r[3]) / 2.0);
            let (c, k) = (centre(bbox), centre(ink));
            assert!(near(c.0, k.0, 4.0) && near(c.1, k.1, 4.0), "rotate {rotate}: {bbox:?} vs ink {ink:?}");
        }
        // Unrotated: user (60, 200) with the crop box top at 290 → x 40, baseline 90 from the top;
        // the loose box spans Helvetica's font box (ascent 0.931 em, descent 0.225 em).
        let page =
            TestPage { media: [0.0, 0.0, 400.0, 300.0], crop: Some([20.0, 10.0, 380.0, 290.0]), rotate: 0, content };
        let a = parse_bytes(&build_pdf(&[page], &[], false)).unwrap();
        let [x0, y0, _, y1] = a.source_map.pages[0].blocks[0].bbox.unwrap();
        assert!(near(x0, 40.0, 0.5) && near(y0, 90.0 - 18.6, 0.5) && near(y1, 90.0 + 4.5, 0.5), "{x0} {y0} {y1}");
    }

    #[test]
    fn text_drawn_against_the_page_rotation_reads_upright() {
        // A landscape page stored as portrait + /Rotate 90, its text turned back by the matrix.
        let content = "BT /F1 14 Tf 0 1 -1 0 300 72 Tm (Upright on a landscape page) Tj ET";
        let page = TestPage { media: [0.0, 0.0, 612.0, 792.0], crop: None, rotate: 90, content };
        let bytes = build_pdf(&[page], &[], false);
        let a = parse_bytes(&bytes).unwrap();
        let b = &a.source_map.pages[0].blocks[0];
        assert_eq!(b.text, "Upright on a landscape page");
        let [x0, y0, x1, y1] = b.bbox.unwrap();
        assert!(x1 - x0 > 5.0 * (y1 - y0), "a wide, short line: {:?}", b.bbox);
        let ink = ink_box(&bytes, 0);
        assert!(
            ink[0] >= x0 - 1.5 && ink[2] <= x1 + 1.5 && ink[1] >= y0 - 1.5 && ink[3] <= y1 + 1.5,
            "{ink:?} {:?}",
            b.bbox
        );
    }

    #[test]
    fn overlapping_text_is_approximate() {
        // A sideways word drawn across a horizontal line: pdfium finds the other
        // direction's characters inside each box.
        let content = "BT /F1 12 Tf 72 700 Td (Horizontal line of text here) Tj ET \
                       BT /F1 12 Tf 0 1 -1 0 140 680 Tm (SIDEWAYS) Tj ET";
        let a = parse_bytes(&build_pdf(&[TestPage::new(content)], &[], false)).unwrap();
        a.validate().unwrap();
        let texts: Vec<(&str, Quality)> = a.all_blocks().map(|b| (b.text.as_str(), b.quality)).collect();
        assert_eq!(texts, [("Horizontal line of text here", Quality::Approximate), ("SIDEWAYS", Quality::Approximate)]);
    }

    #[test]
    fn outline_sections_start_at_their_titles() {
        let p1 = "BT /F1 18 Tf 72 720 Td (Introduction) Tj ET BT /F1 10 Tf 72 690 Td (Opening words of the report.) Tj ET \
                  BT /F1 14 Tf 72 600 Td (Scope) Tj ET BT /F1 10 Tf 72 580 Td (What the report covers.) Tj ET";
        let p2 = "BT /F1 10 Tf 72 720 Td (Still in scope.) Tj ET BT /F1 18 Tf 72 500 Td (Results) Tj ET \
                  BT /F1 10 Tf 72 480 Td (Numbers follow.) Tj ET";
        let outline = [("Introduction", 1, 0, 740.0), ("Scope", 2, 0, 620.0), ("Results", 1, 1, 520.0)];
        let a = parse_bytes(&build_pdf(&[TestPage::new(p1), TestPage::new(p2)], &outline, false)).unwrap();
        a.validate().unwrap();
        let s = &a.source_map.sections;
        assert_eq!(
            s.iter().map(|s| (s.id.as_str(), s.level)).collect::<Vec<_>>(),
            [("sec_1", 1), ("sec_2", 2), ("sec_3", 1)]
        );
        assert_eq!(s[1].parent_id.as_deref(), Some("sec_1"));
        assert_eq!(s[0].block_ids, ["p1_b1", "p1_b2"]);
        assert_eq!(s[1].block_ids, ["p1_b3", "p1_b4", "p2_b1"]);
        assert_eq!(s[2].block_ids, ["p2_b2", "p2_b3"]);
        assert_eq!((s[0].page_start, s[0].page_end), (Some(1), Some(2)), "the subtree reaches page 2");
        assert_eq!((s[1].page_start, s[1].page_end), (Some(1), Some(2)));
        assert_eq!(block(&a, "Scope").block_type, BlockType::Heading);
        assert_eq!(block(&a, "Still in scope.").section_id.as_deref(), Some("sec_2"));
    }

    #[test]
    fn broken_input_is_malformed() {
        assert_eq!(parse_bytes(b"").unwrap_err().code, "pdf_malformed");
        let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        assert_eq!(parse_bytes(&noise).unwrap_err().code, "pdf_malformed");
        let mut truncated = testdata("pdf/pypdf_multilang.pdf");
        truncated.truncate(600);
        assert_eq!(parse_bytes(&truncated).unwrap_err().code, "pdf_malformed");
    }

    #[test]
    fn password_protected_pdf_is_encrypted() {
        let bytes = build_pdf(&[TestPage::new("BT /F1 12 Tf 72 700 Td (secret) Tj ET")], &[], true);
        let err = parse_bytes(&bytes).unwrap_err();
        assert_eq!(err.code, "pdf_encrypted", "{err}");
        // The same file without the /Encrypt dictionary parses.
        let plain = build_pdf(&[TestPage::new("BT /F1 12 Tf 72 700 Td (secret) Tj ET")], &[], false);
        assert_eq!(parse_bytes(&plain).unwrap().text, "secret");
    }
}

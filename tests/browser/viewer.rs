//! Search → click → viewer, per kind of document, at the contract of the viewer page:
//! - PDF / image: `.page-frame` with `img.page-img` and the overlay
//!   `#hl.hl-box[data-bbox="x0,y0,x1,y1"][data-page-size="w,h"]` positioned in percent;
//! - DOCX / Markdown: the cited block is `#hl.hl` and contains the quoted text;
//! - a located quality other than `exact` (the search result's quality badge): `hl-approx`
//!   instead of `hl`, and a visible `p.approx-notice`.

use std::path::PathBuf;

use mnote::db::{Scope, TenantTx};
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    browser::Browser,
    files::testdata,
    helpers::{PASSWORD, TestApp, spawn_app},
};

const EMAIL: &str = "owner@acme.test";

// ---- fixtures and indexing ---------------------------------------------------------------

fn fixtures() -> (PathBuf, Value) {
    let dir = std::env::var_os("MNOTE_FIXTURES_DIR")
        .map(PathBuf::from)
        .expect("MNOTE_FIXTURES_DIR is not set: run the tests through `./dev test`, which generates the fixtures");
    let text = std::fs::read_to_string(dir.join("expected.json"))
        .unwrap_or_else(|e| panic!("{}/expected.json: {e}; `./dev provision` generates it", dir.display()));
    (dir, serde_json::from_str(&text).unwrap())
}

fn compact(s: &str) -> String {
    s.split_whitespace().collect()
}

/// A tenant whose owner has a KB with `files` (copied under the grant root as `team/<name>`)
/// indexed. Every file must end `indexed`.
async fn indexed(files: &[(PathBuf, &str)]) -> TestApp {
    indexed_tenant(files).await.0
}

/// `indexed`, with the tenant's id.
async fn indexed_tenant(files: &[(PathBuf, &str)]) -> (TestApp, Uuid) {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", EMAIL).await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let team = app.docs.join("team");
    std::fs::create_dir_all(&team).unwrap();
    for (from, name) in files {
        std::fs::copy(from, team.join(name)).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
    let (st, g) = api
        .post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, kb) = api.post_json("/api/kbs", json!({"name": "Evidence"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let kb = kb["id"].as_str().unwrap().to_string();
    for (_, name) in files {
        let (st, r) =
            api.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path(&format!("team/{name}"))})).await;
        assert!(st.is_success(), "{name}: {st} {r}");
    }
    app.run_jobs().await;
    let (st, list) = api.get_json(&format!("/api/kbs/{kb}/sources")).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    for src in list["items"].as_array().unwrap() {
        assert_eq!(src["status"], "indexed", "{src}");
    }
    (app, s.tenant_id)
}

/// What the watcher's periodic rescan does, then the ingest jobs it queued.
async fn rescan(app: &TestApp, tenant: Uuid) {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    mnote::ingest::watch::rescan_tenant(&mut tx, tenant).await.unwrap();
    tx.commit().await.unwrap();
    app.run_jobs().await;
}

// ---- search and open ---------------------------------------------------------------------

struct Opened {
    /// The result link's `href` (the `openAction.url`).
    href: String,
    /// The result shows a quality badge: the location is not `exact`.
    approximate: bool,
}

/// On `/search`, search `q` in lexical mode through the form, then click the title of the
/// first result whose quote contains `needle` (whitespace ignored) and wait for the viewer.
async fn search_and_open(b: &Browser, q: &str, needle: &str) -> Opened {
    open_result(b, q, needle, None).await
}

/// Like `search_and_open`, with the result's title (the file name) equal to `title` if given.
async fn open_result(b: &Browser, q: &str, needle: &str, title: Option<&str>) -> Opened {
    b.goto("/search").await;
    let input = b.wait_for("#search-q").await;
    input.clear().await.unwrap();
    input.send_keys(q).await.unwrap();
    b.find("select[name=mode]").await.select_by_value("lexical").await.unwrap();
    b.find(".search-bar button").await.click().await.unwrap();
    b.poll(
        "search results",
        "return new URLSearchParams(location.search).get('q') === arguments[0] && document.readyState === 'complete' \
         && !!document.querySelector('#results, .search-empty')",
        vec![json!(q)],
    )
    .await;
    let found = b
        .js(
            "const norm = s => s.replace(/\\s+/g, '');
             const items = Array.from(document.querySelectorAll('li.result'));
             const i = items.findIndex(li => (arguments[1] === null || li.closest('li.result-doc').querySelector('a.result-title').innerText.trim() === arguments[1])
                 && norm(li.querySelector('blockquote.quote').innerText).includes(norm(arguments[0])));
             if (i < 0) return {index: -1, results: items.map(li => li.innerText)};
             const li = items[i];
             return {index: i, href: li.querySelector('a.passage-link').getAttribute('href'),
                     approximate: !!li.querySelector('.badge.quality')};",
            vec![json!(needle), json!(title)],
        )
        .await;
    let index = found["index"].as_i64().unwrap();
    assert!(index >= 0, "{}: no result {title:?} for {q:?} quoting {needle:?}; results: {}", b.name, found["results"]);
    let href = found["href"].as_str().unwrap().to_string();
    assert!(
        href.starts_with("/sources/") && href.contains("/view?evidence=") && href.ends_with("#hl"),
        "{}: the result links {href}, not an openAction viewer URL",
        b.name
    );
    let items = b.c.find_all(fantoccini::Locator::Css("li.result")).await.unwrap();
    let link = items[index as usize].find(fantoccini::Locator::Css("a.passage-link")).await.unwrap();
    link.click().await.unwrap();
    b.poll(
        "the viewer page",
        "return /^\\/sources\\/[^/]+\\/view$/.test(location.pathname) && document.readyState === 'complete'",
        vec![],
    )
    .await;
    b.loaded().await;
    Opened { href, approximate: found["approximate"] == true }
}

// ---- what the page shows -----------------------------------------------------------------

/// Where things are on the viewer page, in CSS pixels of the viewport.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Layout {
    url: String,
    hl: Option<Hl>,
    approx_notice_visible: bool,
    stale_notice: bool,
    stale_notice_visible: bool,
    /// The layout viewport (without scrollbars).
    vw: f64,
    vh: f64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Hl {
    rect: [f64; 4],
    classes: Vec<String>,
    text: String,
    shown: bool,
    bbox: Option<String>,
    page_size: Option<String>,
    /// The `img.page-img` of the enclosing `.page-frame`.
    img: Option<[f64; 4]>,
    img_natural: Option<[f64; 2]>,
}

const LAYOUT_JS: &str = "
const rect = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
const shown = el => { if (!el) return false; const s = getComputedStyle(el); const r = el.getBoundingClientRect();
  return s.display !== 'none' && s.visibility !== 'hidden' && parseFloat(s.opacity) > 0 && r.width > 0 && r.height > 0; };
const el = document.getElementById('hl');
let hl = null;
if (el) {
  const frame = el.closest('.page-frame');
  const img = frame ? frame.querySelector('img.page-img') : null;
  hl = { rect: rect(el), classes: Array.from(el.classList), text: el.innerText || '', shown: shown(el),
         bbox: el.getAttribute('data-bbox'), pageSize: el.getAttribute('data-page-size'),
         img: img ? rect(img) : null, imgNatural: img ? [img.naturalWidth, img.naturalHeight] : null };
}
return { url: location.href,
         hl, approxNoticeVisible: shown(document.querySelector('p.approx-notice')),
         staleNotice: !!document.querySelector('p.stale-notice'), staleNoticeVisible: shown(document.querySelector('p.stale-notice')),
         vw: document.documentElement.clientWidth, vh: document.documentElement.clientHeight };";

async fn layout(b: &Browser) -> Layout {
    serde_json::from_value(b.js(LAYOUT_JS, vec![]).await).expect("layout JSON")
}

/// Is the highlight on screen (after the `#hl` scroll)? A block taller than the viewport
/// counts when its top is in the upper half.
fn on_screen(r: &[f64; 4], vw: f64, vh: f64) -> bool {
    let [l, t, rt, bt] = *r;
    let (w, h) = (rt - l, bt - t);
    w > 0.0 && h > 0.0 && l >= -1.0 && rt <= vw + 1.0 && t >= -1.0 && (bt <= vh + 1.0 || (h > vh && t < vh / 2.0))
}

/// Wait for `#hl` to exist and be in the viewport, then check the highlight's class and the
/// approximate notice against the result's quality. Returns the layout.
async fn visible_highlight(b: &Browser, opened: &Opened) -> Layout {
    // Polls, since images can move the block until they have loaded and laid out.
    b.poll(
        "a visible #hl in the viewport",
        &format!(
            "const r = (() => {{ {LAYOUT_JS} }})();
             if (!r.hl || !r.hl.shown) return false;
             const [l, t, rt, bt] = r.hl.rect; const h = bt - t;
             return (rt - l) > 0 && h > 0 && l >= -1 && rt <= r.vw + 1 && t >= -1 && (bt <= r.vh + 1 || (h > r.vh && t < r.vh / 2));"
        ),
        vec![],
    )
    .await;
    let l = layout(b).await;
    let hl = l.hl.as_ref().unwrap();
    assert!(hl.shown && on_screen(&hl.rect, l.vw, l.vh), "{}: #hl not shown on screen: {l:#?}", b.name);
    assert!(l.url.ends_with(&opened.href), "{}: the viewer is at {}, the result linked {}", b.name, l.url, opened.href);
    assert!(!l.stale_notice, "{}: a fresh source shows the stale notice", b.name);
    if opened.approximate {
        assert!(hl.classes.iter().any(|c| c == "hl-approx"), "{}: approximate location without hl-approx: {hl:?}", b.name);
        assert!(!hl.classes.iter().any(|c| c == "hl"), "{}: approximate location with the confident hl class", b.name);
        assert!(l.approx_notice_visible, "{}: approximate location without a visible p.approx-notice", b.name);
    } else {
        // Text blocks carry `hl`; the page overlay is `hl-box` (plus `hl-approx` when approximate).
        let overlay = hl.classes.iter().any(|c| c == "hl-box");
        assert!(overlay || hl.classes.iter().any(|c| c == "hl"), "{}: exact location without class hl: {hl:?}", b.name);
        assert!(!hl.classes.iter().any(|c| c == "hl-approx"), "{}: exact location marked approximate", b.name);
        assert!(!l.approx_notice_visible, "{}: exact location shows the approximate notice", b.name);
    }
    l
}

fn pair(s: &Option<String>, what: &str) -> Vec<f64> {
    let s = s.as_deref().unwrap_or_else(|| panic!("the overlay has no {what}"));
    let v: Vec<f64> = s.split(',').map(|p| p.trim().parse().unwrap_or_else(|_| panic!("{what}={s:?}"))).collect();
    v
}

/// Map a box in page units (`[x0,y0,x1,y1]`, top-left origin) onto the rendered image.
fn on_image(b: [f64; 4], page: [f64; 2], img: [f64; 4]) -> [f64; 4] {
    let (sx, sy) = ((img[2] - img[0]) / page[0], (img[3] - img[1]) / page[1]);
    [img[0] + b[0] * sx, img[1] + b[1] * sy, img[0] + b[2] * sx, img[1] + b[3] * sy]
}

fn area(r: [f64; 4]) -> f64 {
    (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0)
}

fn intersection(a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
    [a[0].max(b[0]), a[1].max(b[1]), a[2].min(b[2]), a[3].min(b[3])]
}

/// The overlay checks shared by PDFs and images: a loaded page image with the page's aspect
/// ratio, the overlay where `data-bbox` says (percent positioning), inside the page and not
/// covering most of it. `word`: where the generator drew the cited text, in page units; the
/// overlay must cover at least half of it. Returns the overlay's rectangle.
fn check_overlay(name: &str, l: &Layout, page_size: Option<[f64; 2]>, word: Option<[f64; 4]>) -> [f64; 4] {
    let hl = l.hl.as_ref().unwrap();
    assert!(hl.classes.iter().any(|c| c == "hl-box"), "{name}: the overlay lacks class hl-box: {hl:?}");
    let img = hl.img.unwrap_or_else(|| panic!("{name}: #hl is not inside a .page-frame with an img.page-img: {l:#?}"));
    let natural = hl.img_natural.unwrap();
    assert!(natural[0] > 0.0 && natural[1] > 0.0, "{name}: the page image did not load: {l:#?}");
    let bbox = pair(&hl.bbox, "data-bbox");
    let page = pair(&hl.page_size, "data-page-size");
    assert_eq!((bbox.len(), page.len()), (4, 2), "{name}: {hl:?}");
    let (bbox, page) = ([bbox[0], bbox[1], bbox[2], bbox[3]], [page[0], page[1]]);
    if let Some(want) = page_size {
        assert!(
            (page[0] - want[0]).abs() < 0.5 && (page[1] - want[1]).abs() < 0.5,
            "{name}: data-page-size {page:?}, the page is {want:?}"
        );
    }
    let (iw, ih) = (img[2] - img[0], img[3] - img[1]);
    assert!(iw > 50.0 && ih > 50.0, "{name}: the page image is {iw}×{ih} px");
    assert!(
        ((iw / ih) / (page[0] / page[1]) - 1.0).abs() < 0.02,
        "{name}: the page image ({iw:.1}×{ih:.1} px) is not in the page's proportions {page:?}"
    );
    // The overlay sits where its data-bbox says, on the image as rendered.
    let want = on_image(bbox, page, img);
    let tol = 3.0 + 0.005 * iw;
    let off = (0..4).map(|i| (want[i] - hl.rect[i]).abs()).fold(0.0, f64::max);
    assert!(
        off <= tol,
        "{name}: the overlay {:?} is {off:.1} px from its data-bbox {bbox:?} on the image {img:?} (expected {want:?}, tolerance {tol:.1})",
        hl.rect
    );
    let inside = intersection(hl.rect, img);
    assert!(area(inside) >= 0.9 * area(hl.rect), "{name}: the overlay {:?} lies outside the page image {img:?}", hl.rect);
    assert!(area(hl.rect) <= 0.5 * area(img), "{name}: the overlay {:?} covers most of the page {img:?}", hl.rect);
    if let Some(w) = word {
        let w = on_image(w, page, img);
        let covered = area(intersection(hl.rect, w)) / area(w);
        assert!(
            covered >= 0.5,
            "{name}: the overlay {:?} covers {:.0}% of where the text was drawn {w:?}",
            hl.rect,
            covered * 100.0
        );
    }
    hl.rect
}

/// The highlighted block contains the quote (whitespace ignored: CJK OCR puts spaces between characters).
fn check_text(name: &str, l: &Layout, quote: &str) {
    let hl = l.hl.as_ref().unwrap();
    assert!(
        compact(&hl.text).contains(&compact(quote)),
        "{name}: #hl ({}) does not contain {quote:?}; it says {:?}",
        hl.classes.join(" "),
        hl.text
    );
}

fn f4(v: &Value) -> [f64; 4] {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

fn f2(v: &Value) -> [f64; 2] {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// Open `q` at 1280 px and 420 px wide and check the overlay each time: after a live
/// resize (percent positioning keeps it on the word) and after reloading at that width.
async fn overlay_case(b: &Browser, label: &str, q: &str, needle: &str, page_size: Option<[f64; 2]>, word: Option<[f64; 4]>) {
    b.resize(1280, 900).await;
    let opened = search_and_open(b, q, needle).await;
    let l = visible_highlight(b, &opened).await;
    check_overlay(&format!("{}/{label}@1280", b.name), &l, page_size, word);
    b.screenshot(&format!("{label}-1280")).await;

    b.resize(420, 900).await;
    let l = b
        .poll(
            "the page to lay out at 420 px",
            &format!("const r = (() => {{ {LAYOUT_JS} }})(); return r.vw <= 420 ? r : false;"),
            vec![],
        )
        .await;
    let l: Layout = serde_json::from_value(l).unwrap();
    check_overlay(&format!("{}/{label}@420 (resized)", b.name), &l, page_size, word);
    b.c.refresh().await.unwrap();
    b.loaded().await;
    let l = visible_highlight(b, &opened).await;
    check_overlay(&format!("{}/{label}@420", b.name), &l, page_size, word);
    b.screenshot(&format!("{label}-420")).await;
    b.resize(1280, 900).await;
}

async fn text_case(b: &Browser, label: &str, q: &str, quote: &str) {
    let opened = search_and_open(b, q, quote).await;
    let l = visible_highlight(b, &opened).await;
    let hl = l.hl.as_ref().unwrap();
    assert!(hl.img.is_none() && hl.bbox.is_none(), "{}/{label}: a text document highlighted as an overlay: {hl:?}", b.name);
    check_text(&format!("{}/{label}", b.name), &l, quote);
    b.screenshot(label).await;
}

async fn browser_for(app: &TestApp, name: &str) -> Browser {
    let b = Browser::start(name, &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    b
}

// ---- the cases ---------------------------------------------------------------------------

/// A text PDF: the overlay lands on the words where the generator drew them, on page 1 and
/// further down page 3 (scrolled to), at 1280 px and 420 px.
#[tokio::test]
async fn pdf_overlay_covers_the_drawn_word_at_two_widths() {
    let (dir, exp) = fixtures();
    let kw = &exp["knownWords"];
    let app = indexed(&[(dir.join("known_words.pdf"), "known_words.pdf")]).await;
    let b = browser_for(&app, "pdf").await;
    let page = f2(&kw["pageSize"]);
    for word in ["Quokka", "Marmalade"] {
        let w = kw["words"].as_array().unwrap().iter().find(|w| w["word"] == word).unwrap();
        overlay_case(&b, &word.to_lowercase(), word, word, Some(page), Some(f4(&w["bbox"]))).await;
        let url = b.c.current_url().await.unwrap();
        let want_page = format!("page={}", w["page"]);
        assert!(url.query().unwrap_or("").contains(&want_page), "pdf/{word}: the viewer is not on {want_page}: {url}");
    }
    b.finish().await;
}

/// A scanned PDF (OCR): the overlay sits on the page image where the OCR box says.
#[tokio::test]
async fn scanned_pdf_overlay_is_on_the_page_image() {
    let app = indexed(&[(testdata("pdf_scanned/ocr_c02-22.pdf"), "ocr_c02-22.pdf")]).await;
    let b = browser_for(&app, "scanned").await;
    overlay_case(&b, "kitchen", "kitchen", "kitchen", None, None).await;
    b.finish().await;
}

/// Images: the Chinese fixture (the OCR box against where the generator drew the text) and an
/// English one from the provisioned test documents (OCRmyPDF's linn.png, a 2550 × 3300 px scan).
#[tokio::test]
async fn image_overlays_cover_the_ocr_text() {
    let (dir, exp) = fixtures();
    let img = &exp["image"];
    let app = indexed(&[(dir.join("scope_zh.png"), "scope_zh.png"), (testdata("images/ocr_linn.png"), "ocr_linn.png")]).await;
    let b = browser_for(&app, "image").await;
    let text = img["text"].as_str().unwrap();
    overlay_case(&b, "scope_zh", text, text, Some(f2(&img["imageSize"])), Some(f4(&img["bbox"]))).await;
    overlay_case(&b, "ocr_linn", "LinnSequencer", "LinnSequencer", Some([2550.0, 3300.0]), None).await;
    b.finish().await;
}

/// DOCX with Word's paraIds and without them (python-docx): the cited paragraph is the
/// highlighted element.
#[tokio::test]
async fn docx_paragraphs_are_highlighted_with_and_without_para_ids() {
    let (dir, _) = fixtures();
    let app = indexed(&[(dir.join("paraids.docx"), "paraids.docx"), (dir.join("plain.docx"), "plain.docx")]).await;
    let b = browser_for(&app, "docx").await;
    // Both files have the same paragraphs: pick each file's result by opening both.
    for (label, quote) in [
        ("body", "The first body paragraph talks about scoped threads."),
        ("zh", "在 Rust 中，使用线程作用域可以借用栈上的数据。"),
        ("closing", "The closing paragraph comes after the table."),
    ] {
        let q = if label == "zh" { "线程作用域" } else { quote };
        for file in ["paraids.docx", "plain.docx"] {
            let opened = open_result(&b, q, quote, Some(file)).await;
            let l = visible_highlight(&b, &opened).await;
            let hl = l.hl.as_ref().unwrap();
            assert!(hl.img.is_none(), "docx: overlay instead of a block");
            check_text(&format!("docx/{file}/{label}"), &l, quote);
            b.screenshot(&format!("{}-{label}", file.trim_end_matches(".docx"))).await;
        }
    }
    b.finish().await;
}

/// The cited cell is inside the grid's scroll box and below its frozen header rows (not under
/// them): what the reader sees, beyond being in the viewport.
async fn cell_in_grid(b: &Browser, what: &str) {
    let seen = b
        .js(
            "const x = document.getElementById('hl').getBoundingClientRect();
             const s = document.querySelector('.sheet-scroll').getBoundingClientRect();
             const h = document.querySelector('.sheet-grid thead tr:last-child th').getBoundingClientRect();
             return {inside: x.top >= s.top - 1 && x.bottom <= s.bottom + 1 && x.left >= s.left - 1 && x.right <= s.right + 1,
                     belowHeader: x.top >= h.bottom - 1};",
            vec![],
        )
        .await;
    assert_eq!(seen, json!({"inside": true, "belowHeader": true}), "{what}: the cited cell is hidden in the grid");
}

/// Spreadsheets: openpyxl's workbook and a 3,000-row CSV. The cited row's first cell is `#hl`
/// inside the grid and on screen (also far down a sheet, where the grid opens at a window
/// around it), every cell of the row is highlighted, and scrolling the grid loads more rows.
#[tokio::test]
async fn spreadsheet_cells_are_highlighted_and_scrolled_into_view() {
    let (dir, _) = fixtures();
    let big = std::env::temp_dir().join(format!("mnote-browser-ledger-{}.csv", std::process::id()));
    let mut csv = String::from("Item,Amount,Note\n");
    for i in 1..=3000 {
        let note = if i == 1500 { "needle lantern cell".to_string() } else { format!("routine entry {i}") };
        csv.push_str(&format!("item {i},{},{note}\n", i * 10));
    }
    std::fs::write(&big, csv).unwrap();
    let app = indexed(&[(dir.join("needles.xlsx"), "needles.xlsx"), (big.clone(), "ledger.csv")]).await;
    let _ = std::fs::remove_file(&big);
    let b = browser_for(&app, "sheet").await;
    for width in [1280u32, 420] {
        b.resize(width, 900).await;
        let opened = search_and_open(&b, "aurora", "needle aurora budget").await;
        let l = visible_highlight(&b, &opened).await;
        assert_eq!(l.hl.as_ref().unwrap().text.trim(), "finance", "sheet: #hl is the cited row's first cell");
        let row = b.js("return Array.from(document.querySelectorAll('td.hl')).map(td => td.innerText.trim());", vec![]).await;
        assert_eq!(row, json!(["finance", "700,000", "2027-03-31", "needle aurora budget"]), "sheet: the cited cells");
        let tab = b.js("return document.querySelector('.sheet-tab.current').innerText.trim();", vec![]).await;
        assert_eq!(tab, json!("Forecast 2027"));
        cell_in_grid(&b, "xlsx").await;
        b.screenshot(&format!("xlsx-{width}")).await;

        let opened = search_and_open(&b, "lantern", "needle lantern cell").await;
        let l = visible_highlight(&b, &opened).await;
        assert_eq!(l.hl.as_ref().unwrap().text.trim(), "item 1500", "csv: #hl is the cited record's first cell");
        cell_in_grid(&b, "csv").await;
        b.screenshot(&format!("csv-{width}")).await;
        // The grid holds a window around row 1501; scrolling it to the end loads the next one.
        let before = b
            .js(
                "const s = document.querySelector('.sheet-scroll'); const n = s.querySelectorAll('tbody tr').length;
                 s.scrollTop = s.scrollHeight; return n;",
                vec![],
            )
            .await;
        assert!(before.as_u64().unwrap() <= 100, "csv: the grid renders a window, not {before} rows");
        b.poll(
            "the next window of rows",
            "return document.querySelectorAll('.sheet-scroll tbody tr').length > arguments[0] || null",
            vec![before],
        )
        .await;
    }
    b.finish().await;
}

fn long_guide(extra_at_top: &str) -> String {
    let mut md = format!("# Field guide\n\nAn introduction that is short.\n\n{extra_at_top}");
    for i in 1..=60 {
        md.push_str(&format!("## Chapter {i}\n\nFiller paragraph number {i} about ordinary things in the valley.\n\n"));
    }
    md.push_str("## 解除条件\n\n在 Rust 中，使用线程作用域可以借用栈上的数据。\n\n");
    md.push_str("The platypus paragraph sits near the end of the guide, well below the first screen.\n\n");
    for i in 61..=70 {
        md.push_str(&format!("## Chapter {i}\n\nFiller paragraph number {i} about ordinary things in the valley.\n\n"));
    }
    md
}

/// Markdown: a heading and a paragraph far down a long document are scrolled to and highlighted.
#[tokio::test]
async fn markdown_blocks_far_down_are_scrolled_to_and_highlighted() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("guide.md");
    std::fs::write(&path, long_guide("")).unwrap();
    let app = indexed(&[(path, "guide.md")]).await;
    let b = browser_for(&app, "markdown").await;
    text_case(&b, "platypus", "platypus", "The platypus paragraph sits near the end of the guide, well below the first screen.")
        .await;
    text_case(&b, "zh", "线程作用域", "在 Rust 中，使用线程作用域可以借用栈上的数据。").await;
    b.resize(420, 900).await;
    text_case(&b, "platypus-420", "platypus", "The platypus paragraph sits near the end of the guide").await;
    b.finish().await;
}

/// Search results left open in a tab: the results page, then the first result's link.
async fn results_then(b: &Browser, q: &str) -> (fantoccini::elements::Element, String) {
    b.goto(&format!("/search?q={q}&mode=lexical")).await;
    let link = b.wait_for("li.result a.passage-link").await;
    let href = link.attr("href").await.unwrap().unwrap();
    (link, href)
}

async fn click_to_viewer(b: &Browser, link: fantoccini::elements::Element) {
    link.click().await.unwrap();
    b.poll("the viewer page", "return /\\/view$/.test(location.pathname) && document.readyState === 'complete'", vec![]).await;
    b.loaded().await;
}

/// A result opened after its file was deleted: the viewer says the source is stale and still
/// shows the cited block (from the indexed artifact) highlighted.
#[tokio::test]
async fn a_deleted_file_opens_with_a_stale_notice_and_the_cited_block() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("guide.md");
    std::fs::write(&path, long_guide("")).unwrap();
    let (app, tenant) = indexed_tenant(&[(path, "guide.md")]).await;
    let b = browser_for(&app, "stale").await;
    let (link, href) = results_then(&b, "platypus").await;
    std::fs::remove_file(app.docs.join("team/guide.md")).unwrap();
    rescan(&app, tenant).await;
    click_to_viewer(&b, link).await;
    let l = b
        .poll(
            "a visible stale notice",
            &format!("const r = (() => {{ {LAYOUT_JS} }})(); return r.staleNoticeVisible ? r : false;"),
            vec![],
        )
        .await;
    let l: Layout = serde_json::from_value(l).unwrap();
    assert!(l.stale_notice_visible && l.url.ends_with(&href), "stale: at {}, linked {href}", l.url);
    let hl = l.hl.as_ref().unwrap_or_else(|| panic!("stale: no #hl on the stale source's page: {l:#?}"));
    assert!(hl.shown && on_screen(&hl.rect, l.vw, l.vh), "stale: #hl not on screen: {l:#?}");
    check_text("stale", &l, "The platypus paragraph sits near the end of the guide");
    b.screenshot("deleted").await;
    b.finish().await;
}

/// A result opened after its file changed and was re-indexed (its evidence id is gone): the
/// viewer says the location is approximate and highlights where the block most likely is.
/// `openAction.url` carries the locator's hints (`line=` here) for exactly this case.
#[tokio::test]
async fn a_changed_file_opens_approximately_near_the_cited_block() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("guide.md");
    std::fs::write(&path, long_guide("")).unwrap();
    let (app, tenant) = indexed_tenant(&[(path, "guide.md")]).await;
    let b = browser_for(&app, "changed").await;
    let (link, href) = results_then(&b, "platypus").await;
    std::fs::write(app.docs.join("team/guide.md"), long_guide("A new paragraph was added at the top.\n\n")).unwrap();
    rescan(&app, tenant).await;
    click_to_viewer(&b, link).await;
    let l = visible_highlight(&b, &Opened { href, approximate: true }).await;
    assert!(!l.stale_notice);
    b.screenshot("approximate").await;
    b.finish().await;
}

/// Issue #16: paging keeps the citation. Open a page-2 word from the results, Next (no box,
/// "back to the cited page"), Previous (the box again, on screen); the cited word can be
/// selected and copied from the text layer; the breadcrumb goes back to the same results; at
/// 420 px the page opens zoomed to the highlight.
#[tokio::test]
async fn paging_keeps_the_highlight_and_the_word_can_be_copied() {
    let (dir, _) = fixtures();
    let app = indexed(&[(dir.join("known_words.pdf"), "known_words.pdf")]).await;
    let b = browser_for(&app, "viewer-paging").await;
    // From the results page (whatever its layout): follow the first link into the viewer.
    b.goto("/search?q=zephyr&mode=lexical").await;
    let href = b
        .poll(
            "a result",
            "const a = document.querySelector('a[href*=\"/view?evidence=\"]'); return a ? a.getAttribute('href') : null",
            vec![],
        )
        .await;
    let opened = Opened { href: href.as_str().unwrap().to_string(), approximate: false };
    b.js("document.querySelector('a[href*=\"/view?evidence=\"]').click()", vec![]).await;
    b.poll(
        "the viewer page",
        "return /^\\/sources\\/[^/]+\\/view$/.test(location.pathname) && document.readyState === 'complete'",
        vec![],
    )
    .await;
    b.loaded().await;
    let l = visible_highlight(&b, &opened).await;
    assert!(l.url.contains("page=2"), "{}", l.url);
    // Copy the cited word: select its text-layer span.
    let sel = b
        .js(
            "const s = Array.from(document.querySelectorAll('.text-layer span')).find(e => e.textContent.includes('Zephyr'));
             if (!s) return null; const r = document.createRange(); r.selectNodeContents(s);
             const w = window.getSelection(); w.removeAllRanges(); w.addRange(r); return w.toString();",
            vec![],
        )
        .await;
    assert!(sel.as_str().is_some_and(|s| s.contains("Zephyr")), "selected {sel}");
    b.find(".pager a[rel=next]").await.click().await.unwrap();
    b.poll(
        "page 3",
        "return new URLSearchParams(location.search).get('page') === '3' && document.readyState === 'complete'",
        vec![],
    )
    .await;
    b.loaded().await;
    let state = b
        .js("return {box: !!document.querySelector('.hl-box'), back: !!document.querySelector('.viewer-actions a[href$=\"#hl\"]')}", vec![])
        .await;
    assert_eq!(state, json!({"box": false, "back": true}), "page 3 keeps the way back to the citation");
    b.screenshot("page3-back-to-cited").await;
    b.find(".pager a[rel=prev]").await.click().await.unwrap();
    b.poll(
        "page 2",
        "return new URLSearchParams(location.search).get('page') === '2' && document.readyState === 'complete'",
        vec![],
    )
    .await;
    b.loaded().await;
    assert!(b.js("return !!document.querySelector('.page-frame > #hl.hl-box')", vec![]).await == true, "the highlight is back");
    // The sticky toolbar stays at the top while the page scrolls.
    b.js("window.scrollTo(0, document.body.scrollHeight)", vec![]).await;
    let top = b.js("return document.querySelector('.viewer-toolbar').getBoundingClientRect().top", vec![]).await;
    assert!(top.as_f64().unwrap().abs() <= 1.0, "toolbar at {top}");
    // The breadcrumb returns to the same results.
    b.find("a.back-to-results").await.click().await.unwrap();
    b.poll("the results", "return location.pathname === '/search' && document.readyState === 'complete' && !!document.querySelector('a[href*=\"/view?evidence=\"]') || null", vec![])
        .await;
    let q = b.js("return new URLSearchParams(location.search).get('q')", vec![]).await;
    assert_eq!(q, "zephyr");

    // Narrow screen: zoomed to the highlight, which is on screen.
    b.js("sessionStorage.clear()", vec![]).await;
    b.resize(420, 800).await;
    b.goto(opened.href.split('#').next().unwrap()).await;
    b.loaded().await;
    let z = b
        .poll(
            "the zoom",
            "const f = document.querySelector('.page-frame'), h = document.querySelector('#hl.hl-box');
             if (!f || !h || !f.style.width) return null; const r = h.getBoundingClientRect();
             return {frame: f.getBoundingClientRect().width, vw: document.documentElement.clientWidth, box: [r.left, r.top, r.right, r.bottom]};",
            vec![],
        )
        .await;
    let vw = z["vw"].as_f64().unwrap();
    assert!(z["frame"].as_f64().unwrap() > vw * 1.2, "zoomed in: {z}");
    let bx: Vec<f64> = serde_json::from_value(z["box"].clone()).unwrap();
    assert!(bx[0] >= -1.0 && bx[2] <= vw + 1.0 && bx[1] >= 0.0 && bx[3] <= 800.0, "the highlight is on screen: {z}");
    b.screenshot("narrow-zoomed").await;
    b.finish().await;
}

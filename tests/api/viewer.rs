//! The citation viewer: locator → URL (`/api/evidence/open`) → `/sources/{id}/view` round
//! trips for Markdown, DOCX (with and without paraIds), PDF (text and scanned) and images;
//! page PNGs (pdfium, cached, ETag); downloads; authentication and access control.

use std::collections::HashMap;

use mnote::db::{Scope, TenantTx};
use reqwest::{StatusCode, header};
use scraper::{ElementRef, Html, Selector};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{fixtures::*, helpers::*};

const NOTES: &str = "# Notes\n\nIntro paragraph about **scoped** threads.\n\n## Details\n\n- first item\n- second item\n\n\
<script>alert('x')</script>\n\n```rust\nfn main() {}\n```\n\nClosing words on line sixteen.\n";

/// Evidence rows of a source: (evidence id, text, locator), in document order.
async fn evidence(app: &TestApp, tenant: Uuid, source_id: &str) -> Vec<(Uuid, String, Value)> {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let rows: Vec<(Uuid, String, Value)> =
        sqlx::query_as("select id, text, locator from evidence_block where source_id = $1::uuid order by ordinal")
            .bind(source_id)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    rows
}

fn find<'a>(rows: &'a [(Uuid, String, Value)], needle: &str) -> &'a (Uuid, String, Value) {
    rows.iter().find(|r| r.1.contains(needle)).unwrap_or_else(|| panic!("no block contains {needle:?}: {rows:#?}"))
}

/// `POST /api/evidence/open` → the viewer URL (root-relative, ending in `#hl`).
async fn open(c: &Client, body: Value) -> String {
    let (st, v) = c.post_json("/api/evidence/open", body).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let url = v["openAction"]["url"].as_str().unwrap().to_string();
    assert!(url.ends_with("#hl"), "{url}");
    assert!(v["citationMarkdown"].as_str().unwrap().ends_with(&format!("]({url})")), "{v}");
    url
}

/// GET a viewer URL (the fragment stays in the browser) and parse it.
async fn view(c: &Client, url: &str) -> Html {
    let path = url.split('#').next().unwrap();
    let r = c.get(path).await;
    assert_eq!(r.status(), StatusCode::OK, "{path}");
    assert!(r.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
    Html::parse_document(&r.text().await.unwrap())
}

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

fn one<'a>(doc: &'a Html, s: &str) -> ElementRef<'a> {
    let selector = sel(s);
    let mut it = doc.select(&selector);
    let e = it.next().unwrap_or_else(|| panic!("no {s} in {}", doc.html()));
    assert!(it.next().is_none(), "more than one {s}");
    e
}

fn text(e: ElementRef<'_>) -> String {
    e.text().collect::<String>()
}

fn has(doc: &Html, s: &str) -> bool {
    doc.select(&sel(s)).next().is_some()
}

fn floats(s: &str) -> Vec<f64> {
    s.split(',').map(|v| v.parse().unwrap()).collect()
}

/// `left:..%;top:..%;width:..%;height:..%` → the four numbers.
fn percents(style: &str) -> HashMap<String, f64> {
    style
        .split(';')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once(':').unwrap();
            (k.trim().to_string(), v.trim().trim_end_matches('%').parse().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn markdown_and_docx_citations_open_at_the_highlighted_block() {
    let (dir, exp) = fixtures();
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    copy_fixtures(&app, &dir, "flow", &["paraids.docx", "plain.docx"]);
    app.write_doc("team/flow/notes.md", NOTES);
    register(&k, &app, "team/flow").await;
    app.run_jobs().await;
    let sources = sources_by_path(&k).await;
    let id = |p: &str| sources[p]["id"].as_str().unwrap().to_string();

    // Markdown: the block, its line anchors, nothing raw from the document.
    let md = evidence(&app, k.tenant, &id("flow/notes.md")).await;
    let intro = find(&md, "Intro paragraph");
    let url = open(&k.client, json!({"evidenceId": intro.0})).await;
    assert_eq!(url, format!("/sources/{}/view?evidence={}&line=3#hl", id("flow/notes.md"), intro.0));
    let doc = view(&k.client, &url).await;
    let hl = one(&doc, "#hl");
    assert!(text(hl).contains("Intro paragraph about scoped threads."), "{}", hl.html());
    assert!(hl.value().classes().any(|c| c == "hl"), "{}", hl.html());
    assert!(hl.inner_html().contains("<strong>scoped</strong>"), "rendered Markdown: {}", hl.html());
    assert!(has(&doc, "#hl #L3") || has(&doc, "#hl #L2"), "line anchor inside the cited block");
    assert!(has(&doc, "#L16") && has(&doc, "#b-b1"), "every line and block has an anchor");
    assert!(!has(&doc, ".doc script"), "raw HTML from the document is text");
    assert!(text(one(&doc, "article.doc")).contains("<script>alert('x')</script>"));
    assert!(!has(&doc, ".approx-notice") && !has(&doc, ".stale-notice"));
    let item = find(&md, "second item");
    let doc = view(&k.client, &open(&k.client, json!({"evidenceId": item.0})).await).await;
    assert_eq!(one(&doc, "#hl").value().name(), "li");
    assert_eq!(text(one(&doc, "#hl")), "second item");

    // A locator whose block is gone → its line, approximate.
    let url =
        open(&k.client, json!({"locator": {"sourceId": id("flow/notes.md"), "blockId": "b99", "lineRange": [16, 16]}})).await;
    assert_eq!(url, format!("/sources/{}/view?line=16#hl", id("flow/notes.md")));
    let doc = view(&k.client, &url).await;
    assert!(has(&doc, ".approx-notice"));
    let hl = one(&doc, "#hl");
    assert!(hl.value().classes().any(|c| c == "hl-approx"), "{}", hl.html());
    assert!(text(hl).contains("Closing words on line sixteen."), "{}", hl.html());
    // An evidence id that no longer exists (re-indexed file) falls back to the line, approximate.
    let doc = view(&k.client, &format!("/sources/{}/view?evidence={}&line=7#hl", id("flow/notes.md"), Uuid::new_v4())).await;
    assert!(has(&doc, ".approx-notice"));
    assert_eq!(text(one(&doc, "#hl")), "first item");
    // Gone, and nothing else to go by: not an approximate location but "not found" (a stable
    // code: JSON for API clients; for a browser the document with the notice, status 404).
    let gone = format!("/sources/{}/view?evidence={}", id("flow/notes.md"), Uuid::new_v4());
    let (st, e) = k.client.get_json(&gone).await;
    assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"), "{e}");

    // DOCX with and without paraIds: every block carries its ordinal (and paraId when Word wrote one).
    for (file, key) in [("flow/paraids.docx", "docxParaIds"), ("flow/plain.docx", "docxPlain")] {
        let rows = evidence(&app, k.tenant, &id(file)).await;
        for b in exp[key]["blocks"].as_array().unwrap() {
            let want = b["text"].as_str().unwrap();
            let row = rows.iter().find(|r| r.1 == want).unwrap_or_else(|| panic!("{file}: {want}"));
            let doc = view(&k.client, &open(&k.client, json!({"evidenceId": row.0})).await).await;
            let hl = one(&doc, "#hl");
            let shown =
                if b["type"] == "table_row" { hl.select(&sel("td")).map(text).collect::<Vec<_>>().join(" | ") } else { text(hl) };
            assert_eq!(shown, want, "{file}");
            assert!(hl.value().classes().any(|c| c == "hl"), "{file}: {}", hl.html());
            assert_eq!(
                hl.value().attr("data-ordinal").map(String::from),
                b["paragraphOrdinal"].as_u64().map(|o| o.to_string()),
                "{file}"
            );
            assert_eq!(hl.value().attr("data-para-id"), b["paraIdStart"].as_str(), "{file}");
            assert!(!has(&doc, ".approx-notice"), "{file}");
            if b["type"] == "heading" {
                assert!(hl.value().name().starts_with('h'), "{}", hl.html());
            }
        }
        // Every other block has its own id.
        let doc = view(&k.client, &format!("/sources/{}/view", id(file))).await;
        assert!(!has(&doc, "#hl"));
        assert_eq!(doc.select(&sel("[id^=b-][data-ordinal]")).count(), exp[key]["blocks"].as_array().unwrap().len(), "{file}");
    }
    // DOCX bare-locator fallback: paraId → fingerprint → ordinal.
    let docx = id("flow/paraids.docx");
    let loc = json!({"sourceId": docx, "blockId": "b99", "sourceHash": "sha256:old", "paraIdStart": "1A2B3C04",
                     "textFingerprint": "0123456789abcdef", "paragraphOrdinal": 4});
    let url = open(&k.client, json!({"locator": loc})).await;
    assert_eq!(url, format!("/sources/{docx}/view?para=1A2B3C04&fp=0123456789abcdef&ordinal=4#hl"));
    let doc = view(&k.client, &url).await;
    let hl = one(&doc, "#hl");
    assert!(text(hl).contains("线程作用域") && hl.value().classes().any(|c| c == "hl-approx"), "paraId found, text changed");
    assert!(has(&doc, ".approx-notice"));
    let doc = view(&k.client, &format!("/sources/{docx}/view?para=1A2B3C04#hl")).await;
    assert!(text(one(&doc, "#hl")).contains("线程作用域") && !has(&doc, ".approx-notice"));
    let doc = view(&k.client, &format!("/sources/{docx}/view?para=FFFFFFFF&ordinal=9#hl")).await;
    let hl = one(&doc, "#hl");
    assert_eq!(hl.select(&sel("td")).map(text).collect::<Vec<_>>(), ["alpha", "beta"]);
    assert!(hl.value().classes().any(|c| c == "hl-approx") && has(&doc, ".approx-notice"));
}

/// Share of dark pixels of `png` inside `bbox` (page units, page `size`).
fn ink(png: &image::RgbImage, bbox: &[f64], size: &[f64]) -> f64 {
    let (w, h) = (png.width() as f64, png.height() as f64);
    let (x0, y0) = ((bbox[0] / size[0] * w) as u32, (bbox[1] / size[1] * h) as u32);
    let (x1, y1) =
        (((bbox[2] / size[0] * w).ceil() as u32).min(png.width()), ((bbox[3] / size[1] * h).ceil() as u32).min(png.height()));
    let mut dark = 0;
    let mut all = 0;
    for y in y0..y1 {
        for x in x0..x1 {
            let p = png.get_pixel(x, y);
            all += 1;
            if (p[0] as u32 + p[1] as u32 + p[2] as u32) < 3 * 128 {
                dark += 1;
            }
        }
    }
    dark as f64 / all.max(1) as f64
}

async fn png(c: &Client, src: &str) -> (image::RgbImage, reqwest::Response) {
    let r = c.get(src).await;
    assert_eq!(r.status(), StatusCode::OK, "{src}");
    let headers = r.headers().clone();
    let bytes = r.bytes().await.unwrap();
    assert_eq!(headers[header::CONTENT_TYPE], "image/png", "{src}");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{src}");
    let img = image::load_from_memory(&bytes).unwrap().to_rgb8();
    let again = c.get(src).await;
    (img, again)
}

#[tokio::test]
async fn pdf_pages_and_images_show_the_box_over_the_cited_words() {
    let (dir, exp) = fixtures();
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    copy_fixtures(&app, &dir, "paged", &["known_words.pdf", "scope_zh.png"]);
    std::fs::copy(crate::fixtures::testdata("pdf_scanned/ocr_c02-22.pdf"), app.docs.join("team/paged/scan.pdf")).unwrap();
    register(&k, &app, "team/paged").await;
    app.run_jobs().await;
    let sources = sources_by_path(&k).await;
    let id = |p: &str| sources[p]["id"].as_str().unwrap().to_string();

    // Text PDF: every known word, on its page, with the overlay over the rendered ink.
    let pdf = id("paged/known_words.pdf");
    let rows = evidence(&app, k.tenant, &pdf).await;
    let kw = &exp["knownWords"];
    let mut etag_checked = false;
    for w in kw["words"].as_array().unwrap() {
        let word = w["word"].as_str().unwrap();
        let row = rows.iter().find(|r| r.1 == word).unwrap();
        let url = open(&k.client, json!({"evidenceId": row.0})).await;
        let page = w["page"].as_u64().unwrap();
        assert_eq!(url, format!("/sources/{pdf}/view?evidence={}&page={page}#hl", row.0));
        let doc = view(&k.client, &url).await;
        let hl = one(&doc, ".page-frame > #hl.hl-box");
        assert!(!hl.value().classes().any(|c| c == "hl-approx"), "{word}: exact quality");
        assert_eq!(hl.value().attr("data-page-size"), Some("612,792"));
        let bbox = floats(hl.value().attr("data-bbox").unwrap());
        let want: Vec<f64> = serde_json::from_value(w["bbox"].clone()).unwrap();
        assert!(bbox.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 2.0), "{word}: {bbox:?} vs {want:?}");
        let pc = percents(hl.value().attr("style").unwrap());
        assert!(
            (pc["left"] - bbox[0] / 612.0 * 100.0).abs() < 0.01 && (pc["top"] - bbox[1] / 792.0 * 100.0).abs() < 0.01,
            "{pc:?}"
        );
        assert!((pc["width"] - (bbox[2] - bbox[0]) / 612.0 * 100.0).abs() < 0.01, "{pc:?}");
        assert_eq!(one(&doc, ".page-frame").value().attr("data-page"), Some(page.to_string().as_str()));
        assert_eq!(text(one(&doc, ".page-label")), format!("Page {page} of 3"));
        assert_eq!(has(&doc, ".pager a[rel=prev]"), page > 1);
        assert_eq!(has(&doc, ".pager a[rel=next]"), page < 3);
        // The page image: a PNG of the page's aspect ratio with ink under the box.
        let src = one(&doc, "img.page-img").value().attr("src").unwrap().to_string();
        assert!(src.starts_with(&format!("/sources/{pdf}/pages/{page}.png?scale=")), "{src}");
        let (img, again) = png(&k.client, &src).await;
        assert!(((img.width() as f64 / img.height() as f64) - 612.0 / 792.0).abs() < 0.01, "{}x{}", img.width(), img.height());
        assert!(ink(&img, &bbox, &[612.0, 792.0]) > 0.05, "{word}: no text under the box");
        assert_eq!(again.headers()["x-mnote-cache"], "hit", "second request from the cache");
        let etag = again.headers()[header::ETAG].to_str().unwrap().to_string();
        assert!(again.headers()[header::CACHE_CONTROL].to_str().unwrap().contains("max-age"));
        if !etag_checked {
            let r = k
                .client
                .http
                .get(format!("{}{src}", app.base))
                .bearer_auth(k.client.bearer.as_ref().unwrap())
                .header(header::IF_NONE_MATCH, &etag)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
            etag_checked = true;
            // Another scale is another cache entry with the same aspect ratio.
            let (small, _) = png(&k.client, &format!("/sources/{pdf}/pages/{page}.png?scale=1")).await;
            assert_eq!((small.width(), small.height()), (612, 792));
        }
    }
    let cache = app.config.data_dir.join("cache/pages");
    let cached = walk_count(&cache);
    assert!(cached >= 4, "{cached} cached pages");
    // Page navigation without evidence; page 9 of 3 is clamped; non-pages are 404.
    let doc = view(&k.client, &format!("/sources/{pdf}/view?page=9")).await;
    assert_eq!(text(one(&doc, ".page-label")), "Page 3 of 3");
    assert!(!has(&doc, "#hl"));
    assert_eq!(k.client.get(&format!("/sources/{pdf}/pages/4.png")).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(k.client.get(&format!("/sources/{pdf}/pages/x.png")).await.status(), StatusCode::NOT_FOUND);

    // Scanned PDF: OCR blocks are boxed on the rendered scan.
    let scan = id("paged/scan.pdf");
    let rows = evidence(&app, k.tenant, &scan).await;
    let row = find(&rows, "tip-toeing");
    let doc = view(&k.client, &open(&k.client, json!({"evidenceId": row.0})).await).await;
    let hl = one(&doc, ".page-frame > #hl");
    let size = floats(hl.value().attr("data-page-size").unwrap());
    let bbox = floats(hl.value().attr("data-bbox").unwrap());
    let exact = row.2["quality"] == "exact";
    assert_eq!(hl.value().classes().any(|c| c == "hl-approx"), !exact);
    assert_eq!(has(&doc, ".approx-notice"), !exact);
    let src = one(&doc, "img.page-img").value().attr("src").unwrap().to_string();
    let (img, _) = png(&k.client, &src).await;
    assert!(((img.width() as f64 / img.height() as f64) - size[0] / size[1]).abs() < 0.01);
    assert!(ink(&img, &bbox, &size) > 0.03, "OCR box over the scanned words");

    // Image: the original, inline, with the OCR box.
    let png_id = id("paged/scope_zh.png");
    let rows = evidence(&app, k.tenant, &png_id).await;
    let row = find(&rows, "线程作用域");
    let doc = view(&k.client, &open(&k.client, json!({"evidenceId": row.0})).await).await;
    let hl = one(&doc, ".page-frame > #hl");
    assert_eq!(hl.value().attr("data-page-size"), Some("480,200"));
    let bbox = floats(hl.value().attr("data-bbox").unwrap());
    let want: Vec<f64> = serde_json::from_value(exp["image"]["bbox"].clone()).unwrap();
    assert!(bbox.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 8.0), "{bbox:?} vs {want:?}");
    let src = one(&doc, "img.page-img").value().attr("src").unwrap().to_string();
    assert!(src.starts_with(&format!("/sources/{png_id}/download?inline=1")), "{src}");
    let r = k.client.get(&src).await;
    assert_eq!(r.headers()[header::CONTENT_TYPE], "image/png");
    assert!(r.headers()[header::CONTENT_DISPOSITION].to_str().unwrap().starts_with("inline;"));
    let img = image::load_from_memory(&r.bytes().await.unwrap()).unwrap().to_rgb8();
    assert_eq!((img.width(), img.height()), (480, 200));
    assert!(ink(&img, &bbox, &[480.0, 200.0]) > 0.05);

    // The PDF file disappears: the cached page still shows, an uncached one falls back to text.
    std::fs::remove_file(app.docs.join("team/paged/known_words.pdf")).unwrap();
    let doc = view(&k.client, &format!("/sources/{pdf}/view?page=1")).await;
    assert!(has(&doc, ".stale-notice") && has(&doc, "img.page-img"));
    std::fs::remove_dir_all(&cache).unwrap();
    let row = rows_of(&app, k.tenant, &pdf, "Quokka").await;
    let doc = view(&k.client, &format!("/sources/{pdf}/view?evidence={row}&page=1#hl")).await;
    assert!(has(&doc, ".stale-notice") && !has(&doc, "img.page-img"));
    assert_eq!(text(one(&doc, "#hl")), "Quokka");
    let r = k.client.get(&format!("/sources/{pdf}/pages/1.png")).await;
    assert_eq!(r.status(), StatusCode::GONE);
}

async fn rows_of(app: &TestApp, tenant: Uuid, source: &str, text: &str) -> Uuid {
    evidence(app, tenant, source).await.into_iter().find(|r| r.1 == text).unwrap().0
}

fn walk_count(dir: &std::path::Path) -> usize {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                n += walk_count(&p);
            } else if p.extension().is_some_and(|x| x == "png") {
                n += 1;
            }
        }
    }
    n
}

#[tokio::test]
async fn downloads_and_viewer_access_follow_tenants_kbs_grants_and_files() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let content = "# 笔记\n\nHello viewer.\n";
    app.write_doc("team/笔记 \"1\".md", content);
    register(&k, &app, "team/笔记 \"1\".md").await;
    app.run_jobs().await;
    let sources = sources_by_path(&k).await;
    let sid = sources["笔记 \"1\".md"]["id"].as_str().unwrap().to_string();
    let view_url = format!("/sources/{sid}/view");
    let dl = format!("/sources/{sid}/download");

    // Bearer token: view and download.
    assert_eq!(k.client.get(&view_url).await.status(), StatusCode::OK);
    let r = k.client.get(&dl).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[header::CONTENT_TYPE], "text/markdown");
    assert_eq!(
        r.headers()[header::CONTENT_DISPOSITION].to_str().unwrap(),
        "attachment; filename=\"__ _1_.md\"; filename*=UTF-8''%E7%AC%94%E8%AE%B0%20%221%22.md"
    );
    assert_eq!(r.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(r.text().await.unwrap(), content);
    // `inline` is only for images.
    let r = k.client.get(&format!("{dl}?inline=1")).await;
    assert!(r.headers()[header::CONTENT_DISPOSITION].to_str().unwrap().starts_with("attachment;"));

    // Session cookie: the same pages; no authentication: the login page.
    let owner = app.login("owner@acme.test").await;
    assert_eq!(owner.get(&view_url).await.status(), StatusCode::OK);
    assert_eq!(owner.get(&dl).await.status(), StatusCode::OK);
    let anon = app.client();
    for u in [&view_url, &dl] {
        let r = anon.get(u).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{u}");
        assert!(r.headers()[header::LOCATION].to_str().unwrap().starts_with("/login?next="));
    }

    // Another tenant's user: 404 everywhere, as for an id that does not exist.
    let other = app.bootstrap("other", "owner@other.test").await;
    let other = app.api(other.tenant_id, other.user_id).await;
    let nobody = Uuid::new_v4();
    for u in [view_url.clone(), dl.clone(), format!("/sources/{sid}/pages/1.png"), format!("/sources/{nobody}/view")] {
        assert_eq!(other.get(&u).await.status(), StatusCode::NOT_FOUND, "{u}");
    }

    // A member who is not in the (now private) KB: 404; the owner still sees it.
    let member = app.add_user(k.tenant, "member@acme.test", "member").await;
    let member = app.api(k.tenant, member).await;
    assert_eq!(member.get(&view_url).await.status(), StatusCode::OK);
    let (st, _) = k.client.send_json("PATCH", &format!("/api/kbs/{}", k.kb), json!({"visibility": "private"})).await;
    assert_eq!(st, StatusCode::OK);
    for u in [&view_url, &dl] {
        assert_eq!(member.get(u).await.status(), StatusCode::NOT_FOUND, "{u}");
        assert_eq!(k.client.get(u).await.status(), StatusCode::OK, "{u}");
    }

    // The file is deleted: the viewer says so (from the indexed version); the download is 410.
    std::fs::remove_file(app.docs.join("team/笔记 \"1\".md")).unwrap();
    let r = k.client.get(&view_url).await;
    assert_eq!(r.status(), StatusCode::OK);
    let doc = Html::parse_document(&r.text().await.unwrap());
    assert!(text(one(&doc, ".stale-notice")).contains("no longer available"));
    assert!(text(one(&doc, "article.doc")).contains("Hello viewer."));
    let (st, v) = k.client.get_json(&dl).await;
    assert_eq!((st, error_code(&v)), (StatusCode::GONE, "file_missing"), "{v}");
    let r = owner.get(&dl).await;
    assert_eq!(r.status(), StatusCode::GONE);
    assert!(r.text().await.unwrap().contains("<html"), "browsers get an error page");

    // A revoked grant: nothing is served from it.
    app.write_doc("team/笔记 \"1\".md", content);
    let (_, grants) = k.client.get_json("/api/grants").await;
    let g = grants["items"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(k.client.delete(&format!("/api/grants/{g}")).await, StatusCode::OK);
    for u in [&view_url, &dl] {
        assert_eq!(k.client.get(u).await.status(), StatusCode::NOT_FOUND, "{u}");
    }
}

#[tokio::test]
async fn uploads_download_from_their_blob_and_chinese_ui_strings_render() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let form = reqwest::multipart::Form::new()
        .part("file", reqwest::multipart::Part::bytes(b"# Up\n\nUploaded text.\n".to_vec()).file_name("up.md"));
    let r = k
        .client
        .http
        .post(format!("{}/api/kbs/{}/uploads", app.base, k.kb))
        .bearer_auth(k.client.bearer.as_ref().unwrap())
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let v: Value = r.json().await.unwrap();
    let sid = v["items"][0]["id"].as_str().unwrap().to_string();
    // Not parsed yet: the viewer says so and offers the download.
    let doc = view(&k.client, &format!("/sources/{sid}/view")).await;
    assert!(has(&doc, ".not-indexed-notice"));
    app.run_jobs().await;
    let r = k.client.get(&format!("/sources/{sid}/download")).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await.unwrap(), "# Up\n\nUploaded text.\n");
    let r = k
        .client
        .http
        .get(format!("{}/sources/{sid}/view?line=3", app.base))
        .bearer_auth(k.client.bearer.as_ref().unwrap())
        .header(header::ACCEPT_LANGUAGE, "zh-CN")
        .send()
        .await
        .unwrap();
    let doc = Html::parse_document(&r.text().await.unwrap());
    assert_eq!(text(one(&doc, ".approx-notice")).chars().take(4).collect::<String>(), "近似位置");
    assert_eq!(text(one(&doc, "#hl")), "Uploaded text.");
}

/// A page of a viewer URL through a browser-like (session) client: status and document.
async fn browse(c: &Client, path: &str, referer: Option<&str>) -> (StatusCode, Html) {
    let mut r = c.http.get(format!("{}{path}", c.base));
    if let Some(rf) = referer {
        r = r.header(header::REFERER, rf);
    }
    let r = r.send().await.unwrap();
    let st = r.status();
    (st, Html::parse_document(&r.text().await.unwrap()))
}

fn attr(doc: &Html, s: &str, a: &str) -> String {
    one(doc, s).value().attr(a).unwrap_or_else(|| panic!("{s} has no {a}")).to_string()
}

/// Issue #16 "a viewer that keeps its place": Next/Previous keep the citation (the highlight
/// comes back on its page, "back to the cited page" elsewhere), page jump, the selectable text
/// layer, find in document, the outline, the breadcrumb back to the results, and a bad
/// citation link that says "not found".
#[tokio::test]
async fn the_viewer_keeps_its_place_while_paging_and_finds_text() {
    let (dir, exp) = fixtures();
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    copy_fixtures(&app, &dir, "paged", &["known_words.pdf"]);
    let guide: String = (1..=5).map(|i| format!("# Part {i}\n\nText of part {i} about threads.\n\n")).collect();
    app.write_doc("team/paged/guide.md", &guide);
    register(&k, &app, "team/paged").await;
    app.run_jobs().await;
    let sources = sources_by_path(&k).await;
    let pdf = sources["paged/known_words.pdf"]["id"].as_str().unwrap().to_string();
    let md = sources["paged/guide.md"]["id"].as_str().unwrap().to_string();
    let rows = evidence(&app, k.tenant, &pdf).await;
    let w = exp["knownWords"]["words"].as_array().unwrap().iter().find(|w| w["page"] == 2).expect("a word on page 2").clone();
    let word = w["word"].as_str().unwrap();
    let row = rows.iter().find(|r| r.1 == word).unwrap();
    let browser = app.login("owner@acme.test").await;
    let results = format!("{}/search?q={word}&mode=lexical", app.base);

    // Opened from the results: the highlight on page 2, the breadcrumb back to those results.
    let cited = format!("/sources/{pdf}/view?evidence={}&page=2", row.0);
    let (st, doc) = browse(&browser, &cited, Some(&results)).await;
    assert_eq!(st, StatusCode::OK);
    assert!(has(&doc, ".page-frame > #hl.hl-box"));
    assert_eq!(attr(&doc, "a.back-to-results", "href"), format!("/search?q={word}&mode=lexical"));
    assert!(!has(&doc, ".viewer-actions a[href*='#hl']"), "on the cited page: no way back needed");
    // The toolbar: page jump with the citation kept, find.
    assert_eq!(attr(&doc, ".page-jump input[name=evidence]", "value"), row.0.to_string());
    assert_eq!(attr(&doc, ".page-jump input[name=back]", "value"), format!("/search?q={word}&mode=lexical"));
    assert_eq!(attr(&doc, ".page-jump input[name=page]", "max"), "3");
    // The text layer: the cited word is selectable text over the image, in its box.
    let span = doc
        .select(&sel(".page-frame .text-layer span"))
        .find(|e| text(*e).contains(word))
        .unwrap_or_else(|| panic!("{word} not in the text layer: {}", doc.html()));
    let style = span.value().attr("style").unwrap();
    assert!(style.contains("left:") && style.contains("cqw"), "{style}");
    // Next keeps the citation: page 3 has no box but a way back to the cited page.
    let next = attr(&doc, ".pager a[rel=next]", "href");
    assert!(next.contains(&format!("evidence={}", row.0)) && next.contains("page=3") && next.contains("back="), "{next}");
    let (st, doc) = browse(&browser, &next, None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(text(one(&doc, ".page-label")), "Page 3 of 3");
    assert!(!has(&doc, ".hl-box"));
    let back = attr(&doc, ".viewer-actions a.button[href$='#hl']", "href");
    assert!(back.contains(&format!("evidence={}", row.0)) && !back.contains("page="), "{back}");
    assert_eq!(attr(&doc, "a.back-to-results", "href"), format!("/search?q={word}&mode=lexical"), "kept while paging");
    // Previous returns to the highlight.
    let prev = attr(&doc, ".pager a[rel=prev]", "href");
    let (_, doc) = browse(&browser, &prev, None).await;
    assert!(has(&doc, ".page-frame > #hl.hl-box"), "paging back shows the highlight again");
    // And "back to the cited page" from page 1 (page jump) does too.
    let (_, doc) = browse(&browser, &format!("/sources/{pdf}/view?evidence={}&page=1", row.0), None).await;
    assert!(!has(&doc, ".hl-box"));
    let back = attr(&doc, ".viewer-actions a.button[href$='#hl']", "href");
    let (_, doc) = browse(&browser, back.trim_end_matches("#hl"), None).await;
    assert_eq!(attr(&doc, ".page-frame", "data-page"), "2");
    assert!(has(&doc, ".page-frame > #hl.hl-box"));
    // Without a referer from the results, the breadcrumb is the search page itself.
    let (_, doc) = browse(&browser, &cited, Some("https://elsewhere.example/search?q=x")).await;
    assert_eq!(attr(&doc, "a.back-to-results", "href"), "/search");
    // A hostile `back` is not followed.
    let (_, doc) = browse(&browser, &format!("{cited}&back=//evil.example/search"), None).await;
    assert_eq!(attr(&doc, "a.back-to-results", "href"), "/search");

    // Opened from an assistant answer (`from=ai:<run>`): the breadcrumb leads back to that
    // answer, and paging keeps it; a malformed `from` is ignored, never shown.
    let run = uuid::Uuid::new_v4();
    let (st, doc) = browse(&browser, &format!("{cited}&from=ai:{run}"), None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(attr(&doc, "a.back-to-answer", "href"), format!("/ai/runs/{run}"));
    assert_eq!(text(one(&doc, "a.back-to-answer")), "← Assistant");
    assert!(!has(&doc, "a.back-to-results"));
    assert!(attr(&doc, ".pager a[rel=next]", "href").contains(&format!("from=ai%3A{run}")), "kept while paging");
    assert_eq!(attr(&doc, ".page-jump input[name=from]", "value"), format!("ai:{run}"));
    for bad in ["ai:nope", "javascript:alert(1)", "%22%3E%3Cscript%3E"] {
        let (st, doc) = browse(&browser, &format!("{cited}&from={bad}"), None).await;
        assert_eq!(st, StatusCode::OK);
        assert!(!has(&doc, "a.back-to-answer") && !has(&doc, "input[name=from]"), "{bad}");
        assert!(!doc.html().contains("alert(1)") && !doc.html().contains("<script>"), "{bad} reflected");
        assert_eq!(attr(&doc, "a.back-to-results", "href"), "/search");
    }

    // Find in document: every page's matches, linking to the word on its page.
    let (_, doc) = browse(&browser, &format!("/sources/{pdf}/view?evidence={}&page=2&find={word}", row.0), None).await;
    let hits: Vec<String> = doc.select(&sel(".find-list a")).map(|a| a.value().attr("href").unwrap().to_string()).collect();
    assert!(!hits.is_empty(), "{}", doc.html());
    assert!(doc.select(&sel(".find-list mark")).all(|m| text(m).eq_ignore_ascii_case(word)));
    assert!(has(&doc, ".text-layer span.found"), "the match is marked on this page");
    let (_, doc) = browse(&browser, &format!("/sources/{pdf}/view?page=1&find=zzzznothing"), None).await;
    assert!(text(one(&doc, ".find-results")).contains("No passage contains"));

    // A long Markdown document: an outline of its sections linking to their headings; find.
    let (st, doc) = browse(&browser, &format!("/sources/{md}/view?find=part%204"), None).await;
    assert_eq!(st, StatusCode::OK);
    let outline: Vec<(String, String)> =
        doc.select(&sel(".viewer-outline a")).map(|a| (text(a), a.value().attr("href").unwrap().to_string())).collect();
    assert_eq!(outline.len(), 5, "{outline:?}");
    assert_eq!(outline[2].0, "Part 3");
    let target = outline[2].1.trim_start_matches('#');
    assert!(text(one(&doc, &format!("[id='{target}']"))).contains("Part 3"));
    assert!(has(&doc, ".blk.found"));
    // The count agrees with its noun ("1 passage contains", "2 passages contain").
    let found = text(one(&doc, ".find-results"));
    assert!(
        found.starts_with("1 passage contains ") || (found.contains("passages contain") && !found.starts_with("1 ")),
        "{found}"
    );

    // A bad citation link: "not found" with its code, the document without a highlight.
    for bad in
        [format!("/sources/{pdf}/view?evidence={}", Uuid::new_v4()), format!("/sources/{pdf}/view?evidence=garbage&page=2")]
    {
        let (st, doc) = browse(&browser, &bad, None).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{bad}");
        assert_eq!(attr(&doc, ".citation-missing-notice", "data-code"), "not_found");
        assert!(!has(&doc, ".approx-notice") && !has(&doc, "#hl"), "{bad}");
        assert!(has(&doc, ".page-frame"), "the document is still shown");
    }
    let (st, e) = k.client.get_json(&format!("/sources/{md}/view?evidence={}", Uuid::new_v4())).await;
    assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"));
}

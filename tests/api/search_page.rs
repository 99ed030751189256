//! The search page (`GET /search`) and `mnote search`: the same search core as the API,
//! rendered for people.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

const GUIDE: &str =
    "# 第一章\n\n## 解除条件\n\n在 Rust 中，使用线程作用域可以借用栈上的数据。\n\nPlain <b>markup</b> & text stays text.\n";

/// A tenant `acme` whose owner has a KB `Guides` with one indexed Markdown file; returns
/// (source id, KB id).
async fn indexed_guide(app: &TestApp) -> (String, String) {
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("team/guide.md", GUIDE);
    let (st, _) = api
        .post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let (_, kb) = api.post_json("/api/kbs", json!({"name": "Guides"})).await;
    let (st, src) = api
        .post_json(&format!("/api/kbs/{}/sources", kb["id"].as_str().unwrap()), json!({"path": app.docs_path("team/guide.md")}))
        .await;
    assert!(st.is_success(), "{st} {src}");
    app.run_jobs().await;
    (src["id"].as_str().unwrap().to_string(), kb["id"].as_str().unwrap().to_string())
}

fn untranslated(html: &str) -> bool {
    html.replace("/static/search.js", "").contains("search.")
}

fn search_url(q: &str, extra: &str) -> String {
    format!("/search?q={}{extra}", mnote::web::urlencode(q))
}

#[tokio::test]
async fn a_member_finds_highlighted_evidence_with_its_open_link() {
    let app = spawn_app().await;
    let (source, _) = indexed_guide(&app).await;
    let mut c = app.login("owner@acme.test").await;

    let (st, html) = c.page("/search").await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("name=\"q\"") && html.contains("autofocus"), "query box");
    assert!(html.contains("Search across the documents"), "empty query shows a hint");
    assert!(html.contains("href=\"/search\""), "navigation links the page");
    assert!(html.contains("<option value=\"hybrid\" selected data-help=\"Hybrid: "), "hybrid is the default mode, explained");
    assert!(html.contains(">Guides</option>"), "the user's KBs are offered as a filter");

    let (st, html) = c.page(&search_url("线程作用域", "")).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("使用<mark>线程作用域</mark>可以借用栈上的数据"), "{html}");
    assert!(html.contains(&format!("href=\"/sources/{source}/view?evidence=")), "open link from openAction");
    assert!(html.contains("guide.md"));
    assert!(html.contains("<span>第一章 › 解除条件</span> · <span class=\"nowrap\">Line 5</span>"), "section path and line");
    assert!(html.contains("[guide.md · §解除条件](/sources/"), "citation Markdown");
    // No embedder in tests: hybrid runs lexical and says so.
    assert!(html.contains("Vector search unavailable"), "degraded notice");
    assert!(!untranslated(&html), "untranslated key");

    // Quotes are escaped; only the highlights are markup.
    let (_, html) = c.page(&search_url("markup", "&mode=lexical")).await;
    assert!(
        html.contains("Plain &#60;b&#62;<mark>markup</mark>&#60;/b&#62; &#38; text")
            || html.contains("Plain &lt;b&gt;<mark>markup</mark>&lt;/b&gt; &amp; text"),
        "{html}"
    );
    assert!(!html.contains("Vector search unavailable"), "lexical mode is not degraded");

    // Chinese UI.
    let r = c.post_form("/language", &[("lang", "zh-CN"), ("next", "/search")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = c.page(&search_url("线程作用域", "")).await;
    assert!(html.contains("向量搜索不可用") && html.contains("<mark>线程作用域</mark>"));
    assert!(!untranslated(&html), "untranslated key");
}

#[tokio::test]
async fn another_tenant_sees_nothing_and_filters_round_trip() {
    let app = spawn_app().await;
    let (_, kb) = indexed_guide(&app).await;
    app.bootstrap("other", "owner@other.test").await;
    let mut other = app.login("owner@other.test").await;
    let (st, html) = other.page(&search_url("线程作用域", "&mode=lexical")).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("No evidence found") && !html.contains("guide.md") && !html.contains("<mark>"), "{html}");

    let mut c = app.login("owner@acme.test").await;
    for mode in ["lexical", "vector", "graph", "hybrid"] {
        let (st, html) = c.page(&search_url("线程作用域", &format!("&mode={mode}"))).await;
        assert_eq!(st, StatusCode::OK, "{mode}");
        assert!(html.contains(&format!("<option value=\"{mode}\" selected data-help=")), "{mode} stays selected");
        assert_eq!(html.matches(" selected").count(), 1, "{mode}: only the mode is selected");
    }
    let (_, html) = c.page(&search_url("线程作用域", "&mode=graph&kind=markdown")).await;
    assert!(html.contains("<option value=\"markdown\" selected>") && html.contains("<mark>"));
    let (_, html) = c.page(&search_url("线程作用域", "&kind=pdf")).await;
    assert!(html.contains("No evidence found"), "kind filter applies");
    let (_, html) = c.page(&search_url("线程作用域", &format!("&kb={kb}"))).await;
    assert!(html.contains(&format!("<option value=\"{kb}\" selected>")) && html.contains("<mark>"));

    // Bad input is shown inline, with the form.
    let (st, html) = c.page(&search_url("x", "&mode=fuzzy")).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(html.contains("role=\"alert\"") && html.contains("Unknown search mode") && html.contains("name=\"q\""));
    let (st, html) = c.page(&search_url("x", "&kind=keynote")).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(html.contains("unknown kind"), "{html}");

    // Signed out: back to the login page.
    let r = app.client().get("/search?q=x").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(r.headers()["location"].to_str().unwrap().starts_with("/login?next="));
}

#[tokio::test]
async fn results_come_grouped_by_document_with_the_kb_and_the_mode_explained() {
    let app = spawn_app().await;
    let (source, kb) = indexed_guide(&app).await;
    let mut c = app.login("owner@acme.test").await;
    let (st, html) = c.page(&search_url("线程作用域", "&mode=graph")).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("class=\"result-doc\"") && html.contains("<span class=\"kb-name\">Guides</span>"), "{html}");
    assert!(html.contains("passages in 1 document ·"), "the total, singular where it is one: {html}");
    assert!(html.contains("id=\"mode-help\">Connected: keyword matches"), "the selected mode is explained");
    assert!(html.contains("<dt>Semantic</dt><dd>Semantic: "), "every mode is explained");
    assert!(!html.contains("class=\"score\""), "no raw score");
    assert!(html.contains("<details class=\"cite-details\">"), "the citation is behind a disclosure / copy button");

    // One document's matches, with the way back.
    let (st, html) = c.page(&search_url("线程作用域", &format!("&mode=lexical&source={source}"))).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("Matches in guide.md") && html.contains("Back to all results"), "{html}");
    assert!(html.contains(&format!("name=\"source\" value=\"{source}\"")), "the form keeps the document");

    for (extra, msg) in [("&page=0", "page number"), ("&page=x", "page number"), ("&source=nope", "Unknown document")] {
        let (st, html) = c.page(&search_url("x", extra)).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{extra}");
        assert!(html.contains(msg) && html.contains("name=\"q\""), "{extra}: {html}");
    }

    // Per-KB search from the KB page.
    let (_, html) = c.page(&format!("/kbs/{kb}")).await;
    assert!(html.contains("class=\"kb-search quick-search\"") && html.contains(&format!("name=\"kb\" value=\"{kb}\"")), "{html}");
}

fn mnote(app: &TestApp, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mnote"))
        .args(args)
        .env("DATABASE_URL", &app.config.database_url)
        .env("MNOTE_DATA_DIR", &app.config.data_dir)
        .env("MNOTE_GRANTABLE_ROOTS", &app.docs)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run mnote");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[tokio::test]
async fn the_cli_prints_numbered_results() {
    let app = spawn_app().await;
    let (source, _) = indexed_guide(&app).await;
    let who = ["search", "--tenant", "acme", "--as", "owner@acme.test", "--mode", "lexical"];

    let (ok, out, err) = mnote(&app, &[&who[..], &["线程作用域"]].concat());
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("1. guide.md · 第一章 › 解除条件 · L5"), "{out}");
    assert!(out.contains("使用线程作用域可以借用栈上的数据"), "{out}");
    assert!(out.contains(&format!("/sources/{source}/view?evidence=")), "{out}");

    let (ok, out, err) = mnote(&app, &[&who[..], &["--json", "--kb", "Guides", "线程作用域"]].concat());
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["schema"], "mnote.evidence_search_response.v1");
    assert!(v["results"][0]["openAction"]["url"].as_str().unwrap().starts_with(&format!("/sources/{source}/view")));

    let (ok, out, _) = mnote(&app, &[&who[..], &["nothing-like-this-anywhere"]].concat());
    assert!(ok && out.contains("no results"), "{out}");

    let (ok, _, err) = mnote(&app, &["search", "--tenant", "nope", "--as", "owner@acme.test", "x"]);
    assert!(!ok && err.contains("no tenant named \"nope\""), "{err}");
    let (ok, _, err) = mnote(&app, &["search", "--tenant", "acme", "--as", "ghost@acme.test", "x"]);
    assert!(!ok && err.contains("ghost@acme.test is not a member of acme"), "{err}");
    let (ok, _, err) = mnote(&app, &[&who[..], &["--kb", "Missing", "x"]].concat());
    assert!(!ok && err.contains("no knowledge base named \"Missing\""), "{err}");
    let (ok, _, err) = mnote(&app, &[&who[..], &["   "]].concat());
    assert!(!ok && err.contains("invalid_input"), "{err}");
}

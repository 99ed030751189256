//! Knowledge RAG in the browser: a KB bound to a real `lightrag-server` (tests/api/lightrag.rs)
//! shows each source's sync state on its Knowledge RAG page, and the Ask page answers with
//! numbered citations that open the viewer at the cited block, in English and Chinese.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::{
    browser::Browser,
    helpers::{PASSWORD, spawn_app_with},
    lightrag,
};

const EMAIL: &str = "owner@acme.test";
const HANDBOOK: &str = "# Warehouse handbook\n\nAcme Robotics builds warehouse robots in Lyon.\n\n## Charging\n\nThe robots charge overnight in the north hall, and each robot reports its battery level to the fleet controller every minute.\n";

#[tokio::test]
async fn an_answer_in_the_browser_cites_blocks_that_open_highlighted() {
    let server = lightrag::shared();
    let url = server.url.clone();
    let u = url.clone();
    let app = spawn_app_with(move |c| c.rag.allowed_urls = vec![u]).await;
    let s = app.bootstrap("acme", EMAIL).await;
    let api = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("team/handbook.md", HANDBOOK);
    let fixtures = std::path::PathBuf::from(std::env::var_os("MNOTE_FIXTURES_DIR").expect("MNOTE_FIXTURES_DIR (./dev test)"));
    std::fs::copy(fixtures.join("scope_zh.png"), app.docs.join("team/scope_zh.png")).unwrap();
    let (st, _) = api
        .post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let (_, kb) = api.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = api.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("team")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    let (st, b) =
        api.send_json("PUT", &format!("/api/kbs/{kb}/knowledge-rag"), json!({"url": url, "apiKey": lightrag::API_KEY})).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    for _ in 0..240 {
        let r = mnote::rag::sync::pass_tenant(&app.pool, &app.config, s.tenant_id, None).await.unwrap();
        if r.sent == 0 && r.pending == 0 && r.deleted == 0 && r.errors.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let b = Browser::start("ask", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    b.goto(&format!("/kbs/{kb}/knowledge-rag")).await;
    b.wait_for("#rag-items").await;
    let rows = b.js("return Array.from(document.querySelectorAll('#rag-items tbody tr')).map(r => r.innerText)", vec![]).await;
    let rows: Vec<String> = serde_json::from_value(rows).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.contains("Processed")), "{rows:?}");
    assert!(rows.iter().any(|r| r.contains("scope_zh.png") && r.contains("OCR text reached LightRAG")), "{rows:?}");
    assert!(!b.js("return document.body.innerHTML", vec![]).await.as_str().unwrap().contains(lightrag::API_KEY));
    b.screenshot("knowledge-rag-en").await;

    // Ask through the form; the answer's [1] opens the viewer at the cited block.
    b.goto(&format!("/kbs/{kb}/ask")).await;
    let input = b.wait_for("#ask-form input[name=q]").await;
    input.send_keys("Where do the robots charge overnight?").await.unwrap();
    b.find("#ask-form select[name=mode]").await.select_by_value("naive").await.unwrap();
    b.find("#ask-form button").await.click().await.unwrap();
    b.wait_for("#answer a.cite-marker").await;
    b.screenshot("ask-en").await;
    let refs = b.js("return Array.from(document.querySelectorAll('#references li')).map(l => l.innerText)", vec![]).await;
    let refs: Vec<String> = serde_json::from_value(refs).unwrap();
    // The small handbook is one LightRAG chunk over 4 blocks: it cites the first and says so.
    assert!(refs.iter().any(|r| r.contains("handbook.md") && r.contains("spans 4 blocks")), "{refs:?}");
    let href = b.js("return document.querySelector('#answer a.cite-marker').getAttribute('href')", vec![]).await;
    let href = href.as_str().unwrap().to_string();
    assert!(href.starts_with("/sources/") && href.contains("?evidence=") && href.ends_with("#hl"), "{href}");
    b.find("#answer a.cite-marker").await.click().await.unwrap();
    b.poll("the viewer", "return location.pathname.endsWith('/view') && !!document.getElementById('hl')", vec![]).await;
    let hl = b.js("return document.getElementById('hl').innerText", vec![]).await;
    assert!(hl.as_str().unwrap().contains("Warehouse handbook"), "{hl}");
    b.screenshot("ask-viewer").await;

    // 中文: the page in Chinese; the image's OCR text answers a Chinese question.
    b.goto("/").await;
    b.js("document.querySelector('form.lang button[value=\"zh-CN\"], form.lang button').click()", vec![]).await;
    b.poll(
        "the language switch",
        "return document.readyState === 'complete' && document.documentElement.lang.startsWith('zh')",
        vec![],
    )
    .await;
    b.goto(&format!("/kbs/{kb}/ask?q=%E7%BA%BF%E7%A8%8B%E4%BD%9C%E7%94%A8%E5%9F%9F&mode=naive")).await;
    b.wait_for("#references li").await;
    let page = b.js("return document.body.innerText", vec![]).await;
    let page = page.as_str().unwrap();
    assert!(page.contains("回答") && page.contains("引用"), "{page}");
    assert!(page.contains("scope_zh.png"), "{page}");
    b.screenshot("ask-zh").await;
    b.goto(&format!("/kbs/{kb}/knowledge-rag")).await;
    b.wait_for("#rag-items").await;
    assert!(b.js("return document.body.innerText", vec![]).await.as_str().unwrap().contains("OCR 文本已进入 LightRAG"));
    b.screenshot("knowledge-rag-zh").await;
    b.finish().await;
}

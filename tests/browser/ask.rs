//! The one assistant in the browser (issue 26 items 1 and 7): a KB bound to a real
//! `lightrag-server` (tests/api/lightrag.rs) shows each source's sync state on its LightRAG
//! page; the former Ask page leads to the assistant (`/ai`) with the KB and the question kept;
//! the built-in assistant streams LightRAG's answer with citations that open the viewer with
//! the whole cited span highlighted (more than one block). English and Chinese, 1280 and 420 px.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::{
    ai::{count, ended, text, to_chinese},
    browser::Browser,
    helpers::{PASSWORD, spawn_app_with},
    lightrag,
};

const EMAIL: &str = "owner@acme.test";
/// Several paragraphs: LightRAG's chunk spans several of our blocks.
const HANDBOOK: &str = "# Warehouse handbook\n\nAcme Robotics builds warehouse robots in Lyon.\n\n## Charging\n\nThe robots charge overnight in the north hall, and each robot reports its battery level to the fleet controller every minute.\n\nA charging dock holds four robots at once.\n";

/// Send the assistant's form as it is (question already in the box) with `agent`; the new
/// run's id.
async fn send(b: &Browser, agent: &str) -> String {
    b.wait_for("#ai-run select.ai-agent").await.select_by_value(agent).await.unwrap();
    b.wait_for("#ai-run[data-checked]").await;
    let before =
        b.js("const t = document.querySelector('#ai-run .ai-turn'); return t && t.getAttribute('data-run-id')", vec![]).await;
    b.find("#ai-run form.ai-ask button[type=submit]").await.click().await.unwrap();
    let v = b
        .poll(
            "the new run to be shown",
            "const t = document.querySelector('#ai-run .ai-turn'); const id = t && t.getAttribute('data-run-id'); \
             return id && id !== arguments[0] ? id : null",
            vec![before],
        )
        .await;
    v.as_str().unwrap().to_string()
}

/// Open the answer's first citation that spans several blocks; the number of highlighted
/// blocks in the viewer.
async fn open_spanning_citation(b: &Browser) -> u64 {
    let sel = "#ai-run .ai-turn .ai-answer a[href*='through=']";
    assert!(count(b, sel).await >= 1, "no spanning citation: {}", text(b, "#ai-run .ai-answer").await);
    let href = b.js("return document.querySelector(arguments[0]).getAttribute('href')", vec![json!(sel)]).await;
    let href = href.as_str().unwrap().to_string();
    assert!(href.starts_with("/sources/") && href.contains("?evidence=") && href.ends_with("#hl"), "{href}");
    b.goto(&href).await;
    b.poll("the viewer", "return location.pathname.endsWith('/view') && !!document.getElementById('hl')", vec![]).await;
    let n = b.js("return document.querySelectorAll('#hl.hl, .doc .hl-span').length", vec![]).await;
    // The first block is scrolled into view.
    let on_screen = b
        .js("const r = document.getElementById('hl').getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight", vec![])
        .await;
    assert_eq!(on_screen, true, "the first block is in view");
    n.as_u64().unwrap()
}

#[tokio::test]
async fn the_assistant_streams_lightrag_answers_whose_citations_highlight_the_whole_span() {
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
    for _ in 0..960 {
        let r = mnote::rag::sync::pass_tenant(&app.pool, &app.config, s.tenant_id, None).await.unwrap();
        if r.sent == 0 && r.pending == 0 && r.deleted == 0 && r.errors.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let b = Browser::start("assistant", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    b.goto(&format!("/kbs/{kb}/knowledge-rag")).await;
    b.wait_for("#rag-items").await;
    let rows = b.js("return Array.from(document.querySelectorAll('#rag-items tbody tr')).map(r => r.innerText)", vec![]).await;
    let rows: Vec<String> = serde_json::from_value(rows).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.contains("Processed")), "{rows:?}");
    assert!(rows.iter().any(|r| r.contains("scope_zh.png") && r.contains("OCR text reached LightRAG")), "{rows:?}");
    assert!(!b.js("return document.body.innerHTML", vec![]).await.as_str().unwrap().contains(lightrag::API_KEY));
    let h1 = text(&b, "h1").await;
    assert_eq!(h1, "LightRAG knowledge graph");
    b.screenshot("lightrag-en").await;

    // One name: the navigation has the assistant and no separate Ask.
    let nav = text(&b, "nav.mainnav").await;
    assert!(nav.contains("Assistant") && !nav.contains("Page AI") && !nav.contains("Ask"), "{nav}");

    // The former Ask page (its "Ask the assistant" button) leads to /ai with the KB ticked and
    // the question in the box.
    let question = "Where do the robots charge overnight?";
    b.goto(&format!("/kbs/{kb}/ask?q=Where+do+the+robots+charge+overnight%3F")).await;
    b.poll("the assistant", "return location.pathname === '/ai' && !!document.getElementById('ai-form')", vec![]).await;
    let boxed = b.js("return document.querySelector('#ai-form textarea[name=prompt]').value", vec![]).await;
    assert_eq!(boxed, question);
    let ticked = b
        .js("return Array.from(document.querySelectorAll('#ai-form input[name=kb_id]:checked')).map(i => i.value)", vec![])
        .await;
    assert_eq!(ticked, json!([kb]));
    assert_eq!(text(&b, "h1").await, "Assistant");

    // Built-in (no model): LightRAG's answer streams in, then our evidence; the answer shows
    // LightRAG's section with its citations.
    let id = send(&b, "hermes").await;
    // While it runs, the streamed text shows up before the run ends.
    let streamed = b
        .poll(
            "LightRAG's answer streaming in",
            "const a = document.querySelector('#ai-run .ai-answer'); const t = document.querySelector('#ai-run .ai-turn'); \
             return a && a.textContent.includes('MOCK ANSWER') ? (t.hasAttribute('data-ended') ? 'ended' : 'live') : null",
            vec![],
        )
        .await;
    assert!(streamed == "live" || streamed == "ended", "{streamed}");
    assert_eq!(ended(&b, "#ai-run").await, "completed");
    let answer = text(&b, "#ai-run .ai-turn .ai-answer").await;
    assert!(answer.contains("From the LightRAG knowledge graph") && answer.contains("north hall"), "{answer}");
    assert!(!answer.contains("[no-context]") && !answer.contains("####"), "{answer}");
    let plan = text(&b, "#ai-run .ai-turn .ai-plan").await;
    assert!(plan.contains("Ask the LightRAG knowledge graph (graph and passages)"), "{plan}");
    let (_, run) = api.get_json(&format!("/api/page-ai/runs/{id}")).await;
    assert_eq!(run["provider"], "builtin");
    b.js("document.querySelector('#ai-run .ai-turn').scrollIntoView({block: 'start'})", vec![]).await;
    b.screenshot("assistant-en").await;
    b.resize(420, 900).await;
    b.js("document.querySelector('#ai-run .ai-turn').scrollIntoView({block: 'start'})", vec![]).await;
    let over = b.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth", vec![]).await;
    assert!(over.as_f64().unwrap() <= 1.0, "the assistant at 420 px scrolls sideways by {over} px");
    b.screenshot("assistant-en-420").await;
    b.resize(1280, 900).await;

    // The citation opens the viewer with every block of the span highlighted.
    let n = open_spanning_citation(&b).await;
    assert!(n > 1, "{n} highlighted blocks");
    b.screenshot("viewer-span-en").await;
    b.resize(420, 900).await;
    // The run's own page, as a link to it shows it.
    b.goto(&format!("/ai/runs/{id}")).await;
    let n = {
        b.wait_for("#ai-run .ai-answer a[href*='through=']").await;
        open_spanning_citation(&b).await
    };
    assert!(n > 1, "{n} highlighted blocks at 420 px");
    b.screenshot("viewer-span-en-420").await;
    b.resize(1280, 900).await;

    // 中文: one name in Chinese too; a Chinese question, its answer in Chinese around
    // LightRAG's text.
    to_chinese(&b).await;
    let nav = text(&b, "nav.mainnav").await;
    assert!(nav.contains("助手") && !nav.contains("页面 AI"), "{nav}");
    b.goto(&format!(
        "/kbs/{kb}/ask?q=%E6%9C%BA%E5%99%A8%E4%BA%BA%E6%99%9A%E4%B8%8A%E5%9C%A8%E5%93%AA%E9%87%8C%E5%85%85%E7%94%B5%EF%BC%9F"
    ))
    .await;
    b.poll("the assistant", "return location.pathname === '/ai' && !!document.getElementById('ai-form')", vec![]).await;
    assert_eq!(text(&b, "h1").await, "助手");
    let zh_run = send(&b, "hermes").await;
    assert_eq!(ended(&b, "#ai-run").await, "completed");
    // A question brought from the former Ask page starts a conversation of its own: the
    // English question is not its earlier turn.
    let (_, en) = api.get_json(&format!("/api/page-ai/runs/{id}")).await;
    let (_, zh) = api.get_json(&format!("/api/page-ai/runs/{zh_run}")).await;
    assert!(en["sessionId"].is_string() && zh["sessionId"].is_string(), "{en} {zh}");
    assert_ne!(en["sessionId"], zh["sessionId"], "the Chinese question became a follow-up of the English one");
    let answer = text(&b, "#ai-run .ai-turn .ai-answer").await;
    assert!(answer.contains("来自 LightRAG 知识图谱"), "{answer}");
    let plan = text(&b, "#ai-run .ai-turn .ai-plan").await;
    assert!(plan.contains("询问 LightRAG 知识图谱（图谱与段落）"), "{plan}");
    b.js("document.querySelector('#ai-run .ai-turn').scrollIntoView({block: 'start'})", vec![]).await;
    b.screenshot("assistant-zh").await;
    b.resize(420, 900).await;
    b.js("document.querySelector('#ai-run .ai-turn').scrollIntoView({block: 'start'})", vec![]).await;
    b.screenshot("assistant-zh-420").await;
    b.resize(1280, 900).await;
    // LightRAG's first citation (the Chinese question may cite the one-block OCR text of the
    // image) opens the viewer highlighted, in Chinese.
    let href = b
        .js("const a = document.querySelector('#ai-run .ai-turn .ai-answer a[href^=\"/sources/\"]'); return a && a.getAttribute('href')", vec![])
        .await;
    let href = href.as_str().unwrap_or_else(|| panic!("no citation: {}", "zh")).to_string();
    b.goto(&href).await;
    b.poll("the viewer", "return location.pathname.endsWith('/view') && !!document.getElementById('hl')", vec![]).await;
    assert!(count(&b, "#hl").await == 1, "the cited place is highlighted");
    b.screenshot("viewer-cited-zh").await;

    // The advanced LightRAG mode is folded away on the settings page, explained in Chinese.
    b.goto("/settings/agents?tab=hermes").await;
    let folded = b
        .js("const d = document.querySelector('#panel-hermes details.settings-advanced'); return d ? !d.open : null", vec![])
        .await;
    assert_eq!(folded, true);
    b.js("document.querySelector('#panel-hermes details.settings-advanced').open = true", vec![]).await;
    let options = b
        .js("return Array.from(document.querySelectorAll('#panel-hermes select[name$=\"knowledge_rag_mode\"] option')).map(o => o.textContent)", vec![])
        .await;
    let options: Vec<String> = serde_json::from_value(options).unwrap();
    assert_eq!(options.len(), 6, "{options:?}");
    assert!(options[0].starts_with("自动（推荐）") && options.iter().all(|o| o.chars().any(|c| c > '\u{2e80}')), "{options:?}");
    b.screenshot("settings-rag-mode-zh").await;
    b.goto(&format!("/kbs/{kb}/knowledge-rag")).await;
    b.wait_for("#rag-items").await;
    assert!(text(&b, "body").await.contains("OCR 文本已进入 LightRAG"));
    b.screenshot("lightrag-zh").await;
    b.resize(420, 900).await;
    b.screenshot("lightrag-zh-420").await;
    b.finish().await;
}

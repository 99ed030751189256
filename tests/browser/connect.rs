//! Issue 26 item 3 in the browser: an owner connects a model provider from `/settings/agents`
//! against the project's OpenAI-compatible test server (`scripts/mock_openai.py`): a preset
//! fills the URL, "Custom" takes the test server's URL, the key is saved (never shown again),
//! the model is picked from the provider's list, "Test connection" answers with the model's
//! first words, and then a run of that agent streams its answer on `/ai`. A URL outside the
//! operator's allow-list is refused in words. English and Chinese, 1280 and 420 px,
//! screenshotted to `target/browser-artifacts/connect-*`.

use reqwest::StatusCode;
use serde_json::json;

use crate::{
    browser::Browser,
    helpers::{PASSWORD, spawn_app_with},
    lightrag,
};

const EMAIL: &str = "owner@acme.test";
const KEY: &str = "sk-browser-connect-4321";
const HANDBOOK: &str = "# Warehouse handbook\n\n## Charging\n\nThe robots charge overnight in the north hall. Each robot reports its battery level every minute.\n";

async fn text(b: &Browser, css: &str) -> String {
    let v = b.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", vec![json!(css)]).await;
    v.as_str().unwrap_or_else(|| panic!("{}: no `{css}`", b.name)).trim().to_string()
}

/// Click `css` and wait for the next page to have loaded `then`.
async fn click_to(b: &Browser, css: &str, then: &str) {
    b.js("window.__before = 1", vec![]).await;
    b.find(css).await.click().await.unwrap();
    b.poll("the next page", "return !window.__before && document.readyState === 'complete'", vec![]).await;
    b.wait_for(then).await;
}

/// The page is no wider than the window (nothing runs off to the right).
async fn fits(b: &Browser) {
    let v = b.js("return [document.documentElement.scrollWidth, window.innerWidth]", vec![]).await;
    let (w, inner) = (v[0].as_u64().unwrap(), v[1].as_u64().unwrap());
    assert!(w <= inner + 1, "{}: the page is {w} px wide in a {inner} px window", b.name);
}

#[tokio::test]
async fn an_admin_connects_a_provider_picks_a_listed_model_tests_it_and_a_run_streams() {
    let root = lightrag::mock_llm().trim_end_matches("/v1").to_string();
    let allowed = vec![root.clone(), "https://api.openai.com/v1".into(), "https://api.deepseek.com".into()];
    let app = spawn_app_with(move |c| c.agents.allowed_urls = allowed).await;
    let s = app.bootstrap("acme", EMAIL).await;
    let api = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("team/handbook.md", HANDBOOK);
    let (st, g) = api
        .post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (_, kb) = api.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = api.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("team")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;

    let b = Browser::start("connect", &app.base).await;
    b.resize(1280, 900).await;
    b.login(EMAIL, PASSWORD).await;
    b.goto("/settings/agents?tab=hermes").await;
    let url_field = "#panel-hermes input[name='ai.agent.hermes.endpoint_url']";
    b.wait_for("#panel-hermes select.connect-provider").await;
    assert!(text(&b, "#panel-hermes .ai-runs-on").await.contains("not configured"));
    // With JavaScript a preset fills the URL at once (the no-JS button is hidden).
    assert_eq!(b.js("return document.querySelector('#panel-hermes .connect-use').hidden", vec![]).await, json!(true));
    b.find("#panel-hermes select.connect-provider").await.select_by_value("openai").await.unwrap();
    b.poll(
        "the preset's URL",
        "return document.querySelector(arguments[0]).value === 'https://api.openai.com/v1'",
        vec![json!(url_field)],
    )
    .await;
    let presets = b
        .js(
            "return Array.from(document.querySelectorAll('#panel-hermes select.connect-provider option')).map(o => o.value)",
            vec![],
        )
        .await;
    assert_eq!(presets, json!(["openai", "deepseek", "custom"]), "the presets inside the allow-list, then custom");
    b.screenshot("preset-en").await;

    // "Custom OpenAI-compatible": the test server's URL, and the key.
    b.find("#panel-hermes select.connect-provider").await.select_by_value("custom").await.unwrap();
    let f = b.find(url_field).await;
    f.clear().await.unwrap();
    f.send_keys(&root).await.unwrap();
    b.find("#panel-hermes input[name='ai.agent.hermes.api_key']").await.send_keys(KEY).await.unwrap();
    // Saved inline; a new key reloads the page, which then says a key is set (never the key).
    b.js("window.__before = 1", vec![]).await;
    b.find("#panel-hermes form[data-section=admin] button.primary").await.click().await.unwrap();
    b.poll("the reload", "return !window.__before && document.readyState === 'complete'", vec![]).await;
    b.wait_for("#panel-hermes .settings-secret-state").await;
    assert_eq!(text(&b, "#panel-hermes .settings-secret-state").await, "a key is set");
    // The reloaded page confirms the save where the Save button is.
    assert_eq!(
        text(&b, "#panel-hermes form[data-section=admin] .settings-status.ok").await,
        "Saved: the key is stored sealed and never shown again."
    );
    let html = b.js("return document.documentElement.outerHTML", vec![]).await;
    assert!(!html.as_str().unwrap().contains(KEY), "the key is never rendered back");
    // The order an admin works in: connect (URL, key, check) above what each member picks.
    let order = b
        .js(
            "const p = document.querySelector('#panel-hermes'); \
             return [p.querySelector('.settings-admin'), p.querySelector('.settings-member')] \
               .map(e => e ? Array.prototype.indexOf.call(p.querySelectorAll('*'), e) : -1)",
            vec![],
        )
        .await;
    assert!(order[0].as_i64().unwrap() >= 0 && order[0].as_i64() < order[1].as_i64(), "admin section first: {order}");
    let admin_keys = b
        .js(
            "return Array.from(document.querySelectorAll('#panel-hermes form[data-section=admin] .settings-field')).map(f => f.dataset.key)",
            vec![],
        )
        .await;
    assert_eq!(
        admin_keys,
        json!([
            "ai.agent.hermes.endpoint_url",
            "ai.agent.hermes.api_key",
            "ai.agent.hermes.default_model",
            "ai.agent.hermes.extra_models"
        ])
    );
    // The picture shows the confirmation beside the Save button (scrolled into the middle).
    b.js(
        "document.querySelector('#panel-hermes form[data-section=admin] .settings-status.ok').scrollIntoView({block: 'center'})",
        vec![],
    )
    .await;
    b.screenshot("saved-key-en").await;

    // Before any model is saved, "Test connection" tries the model typed beside it.
    b.find("#panel-hermes .connect-test-model input").await.send_keys("mock-llm").await.unwrap();
    click_to(&b, "#panel-hermes button.connect-test", "#panel-hermes .connect-result").await;
    let msg = text(&b, "#panel-hermes .connect-ok .connect-message").await;
    assert!(msg.starts_with("Connected: mock-llm answered"), "{msg}");
    assert_eq!(
        b.js("return document.querySelector('#panel-hermes .connect-test-model input').value", vec![]).await,
        json!("mock-llm"),
        "the typed model stays beside the button"
    );
    let (_, cfg) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert!(cfg["model"].is_null(), "testing a typed model saves nothing: {cfg}");

    // The provider's models, listed server-side; pick one.
    click_to(&b, "#panel-hermes button.connect-list", "#panel-hermes .connect-result").await;
    assert!(text(&b, "#panel-hermes .connect-message").await.contains("The provider lists these models"));
    let models = b
        .js("return Array.from(document.querySelectorAll('#panel-hermes .connect-models option')).map(o => o.value)", vec![])
        .await;
    assert_eq!(models, json!(["mock-embed", "mock-llm", "scripted"]));
    b.screenshot("models-en").await;
    b.find("#panel-hermes .connect-models select").await.select_by_value("scripted").await.unwrap();
    click_to(&b, "#panel-hermes .connect-models button.primary", "#panel-hermes select.connect-provider").await;
    assert!(text(&b, "body").await.contains("Model scripted saved."));
    assert!(text(&b, "#panel-hermes .ai-runs-on").await.contains("scripted"));

    // Test connection: one small streamed request; the model's first words and the latency.
    click_to(&b, "#panel-hermes button.connect-test", "#panel-hermes .connect-result").await;
    let msg = text(&b, "#panel-hermes .connect-ok .connect-message").await;
    assert!(msg.starts_with("Connected: scripted answered “This is a scripted answer") && msg.contains(" ms in all"), "{msg}");
    b.js("document.querySelector('#panel-hermes .connect-result').scrollIntoView({block: 'center'})", vec![]).await;
    b.screenshot("tested-en").await;
    b.resize(420, 900).await;
    b.js("document.querySelector('#panel-hermes .connect-result').scrollIntoView({block: 'center'})", vec![]).await;
    fits(&b).await;
    b.screenshot("tested-en-420").await;
    b.resize(1280, 900).await;

    // A run of the connected agent streams its answer from the provider.
    b.goto("/ai").await;
    b.wait_for("#ai-run select.ai-agent").await.select_by_value("hermes").await.unwrap();
    b.wait_for("#ai-run[data-checked]").await;
    b.find("#ai-run textarea[name=prompt]").await.send_keys("Where do the robots charge overnight? [[slow]]").await.unwrap();
    b.find("#ai-run form.ai-ask button[type=submit]").await.click().await.unwrap();
    b.poll(
        "streamed text",
        "const s = document.querySelector('#ai-run .ai-stream'); return s && s.textContent.length > 20",
        vec![],
    )
    .await;
    let id = b
        .poll(
            "the run",
            "const t = document.querySelector('#ai-run .ai-turn'); return t && t.getAttribute('data-run-id')",
            vec![],
        )
        .await;
    b.screenshot("run-streaming-en").await;
    let ended = b
        .poll(
            "the run to end",
            "const t = document.querySelector('#ai-run .ai-turn[data-ended]'); return t && t.getAttribute('data-ended')",
            vec![],
        )
        .await;
    assert_eq!(ended, "completed");
    let (_, run) = api.get_json(&format!("/api/page-ai/runs/{}", id.as_str().unwrap())).await;
    assert_eq!(run["provider"], "openai", "{run}");
    assert!(text(&b, "#ai-run .ai-answer").await.contains("north hall"));
    b.screenshot("run-done-en").await;

    // 中文: the same page and test in Chinese.
    b.goto("/").await;
    b.js("document.querySelector('form.lang button[value=\"zh-CN\"]').click()", vec![]).await;
    b.poll("Chinese", "return document.readyState === 'complete' && document.documentElement.lang.startsWith('zh')", vec![])
        .await;
    b.goto("/settings/agents?tab=hermes").await;
    b.wait_for("#panel-hermes select.connect-provider").await;
    assert!(text(&b, "#panel-hermes .settings-admin h3").await.starts_with("连接模型服务商"));
    click_to(&b, "#panel-hermes button.connect-test", "#panel-hermes .connect-result").await;
    let msg = text(&b, "#panel-hermes .connect-ok .connect-message").await;
    assert!(msg.starts_with("已连接：scripted 回答“This is a scripted answer"), "{msg}");
    b.js("document.querySelector('#panel-hermes .connect-result').scrollIntoView({block: 'center'})", vec![]).await;
    b.screenshot("tested-zh").await;
    b.resize(420, 900).await;
    fits(&b).await;
    b.screenshot("tested-zh-420").await;
    b.resize(1280, 900).await;

    // A private address outside the allow-list: refused next to the field, in words.
    let f = b.find(url_field).await;
    f.clear().await.unwrap();
    f.send_keys("http://10.0.0.1:8000/v1").await.unwrap();
    b.find("#panel-hermes form[data-section=admin] button.primary").await.click().await.unwrap();
    let err = b
        .poll(
            "the field's error",
            "const e = document.querySelector('#panel-hermes [data-error-for=\"ai.agent.hermes.endpoint_url\"]'); \
             return e && !e.hidden && e.textContent",
            vec![],
        )
        .await;
    let err = err.as_str().unwrap();
    assert!(err.contains("此服务器不允许连接 http://10.0.0.1:8000") && err.contains("MNOTE_AGENT_ALLOWED_URLS"), "{err}");
    b.js("document.querySelector('#panel-hermes [data-error-for=\"ai.agent.hermes.endpoint_url\"]').scrollIntoView({block: 'center'})", vec![])
        .await;
    b.screenshot("refused-zh").await;
    let (_, cfg) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!(cfg["endpointUrl"].as_str(), Some(root.as_str()), "the refused URL was not saved");

    // A key the provider refuses: the test says so in words (no bare code, never the key).
    let (st, v) = api
        .send_json(
            "PUT",
            "/api/page-ai/agents/hermes/config",
            json!({"endpointUrl": root, "model": "scripted", "apiKey": "sk-wrong"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    b.goto("/settings/agents?tab=hermes").await;
    click_to(&b, "#panel-hermes button.connect-test", "#panel-hermes .connect-failed").await;
    let msg = text(&b, "#panel-hermes .connect-failed .connect-message").await;
    assert!(msg.starts_with("连接测试失败。服务商拒绝了此 API 密钥"), "{msg}");
    let page = b.js("return document.body.innerText", vec![]).await;
    assert!(!page.as_str().unwrap().contains("llm_unauthorized") && !page.as_str().unwrap().contains("sk-wrong"));
    b.screenshot("failed-zh").await;
    b.resize(420, 900).await;
    fits(&b).await;
    b.screenshot("failed-zh-420").await;
    b.finish().await;
}

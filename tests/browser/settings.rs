//! The agent settings (`/settings/agents`, rendered from the descriptors) and what the assistant
//! page takes from them, in headless Chromium, in English and Chinese, screenshotted to
//! `target/browser-artifacts/settings-*`: tabs switch without a reload, a form saves inline
//! (no reload) and its error appears next to its field, the admin's capability switch and the
//! user's default agent and KBs show on `/ai`, a member sees no admin section.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    browser::Browser,
    helpers::{Client, PASSWORD, spawn_app_with},
};

async fn text(b: &Browser, css: &str) -> String {
    let v = b.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", vec![json!(css)]).await;
    v.as_str().unwrap_or_else(|| panic!("{}: no `{css}`", b.name)).trim().to_string()
}

async fn visible(b: &Browser, css: &str) -> bool {
    b.js(
        "const e = document.querySelector(arguments[0]); return !!e && !e.closest('[hidden]') && e.offsetParent !== null",
        vec![json!(css)],
    )
    .await
        == json!(true)
}

async fn prefs(api: &Client) -> Value {
    let (st, v) = api.get_json("/api/page-ai/preferences").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["values"].clone()
}

/// Click the submit button of `form` and wait until its status line says something.
async fn save(b: &Browser, form: &str) -> String {
    b.js("document.querySelector(arguments[0]).textContent = ''", vec![json!(format!("{form} .settings-status"))]).await;
    b.find(&format!("{form} button.primary")).await.click().await.unwrap();
    let s = b
        .poll(
            "the form's status",
            "const s = document.querySelector(arguments[0]); return (s && s.textContent.trim()) || null",
            vec![json!(format!("{form} .settings-status"))],
        )
        .await;
    s.as_str().unwrap().to_string()
}

#[tokio::test]
async fn settings_rendered_from_descriptors_save_inline_and_drive_page_ai() {
    let app = spawn_app_with(|c| c.agents.allowed_urls = vec!["http://127.0.0.1:9/v1".into()]).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let mut kbs = Vec::new();
    for name in ["Handbook", "Notes"] {
        let (st, kb) = api.post_json("/api/kbs", json!({"name": name, "visibility": "team"})).await;
        assert_eq!(st, StatusCode::CREATED, "{kb}");
        kbs.push(kb["id"].as_str().unwrap().to_string());
    }
    let member = app.add_user(s.tenant_id, "member@acme.test", "member").await;

    let b = Browser::start("settings", &app.base).await;
    b.login("owner@acme.test", PASSWORD).await;
    b.goto("/settings/agents").await;
    b.wait_for("#panel-common form.settings-form").await;
    assert!(visible(&b, "#panel-common").await && !visible(&b, "#panel-hermes").await);
    b.screenshot("common-en").await;

    // The common tab, saved inline: no reload (the marker survives), values in the API.
    b.js("window.__noReload = 1", vec![]).await;
    b.find("#panel-common select[name='ai.common.default_agent']").await.select_by_value("reasonix").await.unwrap();
    b.find("#panel-common select[name='ai.common.citation_style']").await.select_by_value("footnotes").await.unwrap();
    b.js(
        "document.querySelector(arguments[0]).click()",
        vec![json!(format!("#panel-common input[name='ai.common.default_kbs'][value='{}']", kbs[0]))],
    )
    .await;
    assert_eq!(save(&b, "#panel-common form[data-section=user]").await, "Saved");
    assert_eq!(b.js("return window.__noReload", vec![]).await, json!(1), "saved without a reload");
    let v = prefs(&api).await;
    assert_eq!(v["ai.common.default_agent"], "reasonix");
    assert_eq!(v["ai.common.citation_style"], "footnotes");
    assert_eq!(v["ai.common.default_kbs"], json!([kbs[0]]));

    // Tabs switch without a reload; the URL names the tab.
    b.find("#tab-reasonix").await.click().await.unwrap();
    b.poll("the reasonix tab", "return !document.querySelector('#panel-reasonix').hidden", vec![]).await;
    assert!(!visible(&b, "#panel-common").await);
    assert_eq!(b.js("return location.search", vec![]).await, json!("?tab=reasonix"));
    assert_eq!(b.js("return window.__noReload", vec![]).await, json!(1));
    // An error next to its field.
    let p = b.find("#panel-reasonix input[name='ai.agent.reasonix.profile_id']").await;
    p.clear().await.unwrap();
    p.send_keys("not a profile!").await.unwrap();
    let status = save(&b, "#panel-reasonix form[data-section=user]").await;
    assert!(status.starts_with("Not saved"), "{status}");
    let err = text(&b, "#panel-reasonix [data-error-for='ai.agent.reasonix.profile_id']").await;
    assert!(err.contains("must match"), "{err}");
    assert!(visible(&b, "#panel-reasonix [data-error-for='ai.agent.reasonix.profile_id']").await);
    b.screenshot("field-error-en").await;
    assert_eq!(prefs(&api).await["ai.agent.reasonix.profile_id"], "default");

    // The admin switches knowledge RAG off (inline, then the page shows it).
    b.find("#tab-common").await.click().await.unwrap();
    b.js("document.querySelector(\"#panel-common input[name=capability][value=knowledge_rag]\").click()", vec![]).await;
    b.find("#panel-common form.settings-capabilities button.primary").await.click().await.unwrap();
    b.poll("the reload", "return document.readyState === 'complete' && !window.__noReload", vec![]).await;
    let (_, caps) = api.get_json("/api/page-ai/capabilities").await;
    assert_eq!(caps["capabilities"]["knowledge_rag"], false);
    b.goto("/settings/agents?tab=hermes").await;
    b.wait_for("#panel-hermes .settings-cap-disabled[data-capability=knowledge_rag]").await;
    b.screenshot("hermes-en").await;

    // The assistant takes its agent list, default agent, default KBs and capabilities from them.
    b.goto("/ai").await;
    b.wait_for("#ai-form").await;
    assert_eq!(b.js("return document.querySelector('#ai-form select.ai-agent').value", vec![]).await, json!("reasonix"));
    let checked: Value = b
        .js("return Array.from(document.querySelectorAll('#ai-form input[name=kb_id]')).map(i => [i.value, i.checked])", vec![])
        .await;
    assert_eq!(checked, json!([[kbs[0], true], [kbs[1], false]]));
    let caps = text(&b, "#ai-agent-caps").await;
    assert!(caps.contains("LightRAG knowledge graph (switched off)") && caps.contains("Evidence search"), "{caps}");
    b.find("#ai-form select.ai-agent").await.select_by_value("chat_only").await.unwrap();
    b.poll("the caps line", "return document.querySelector('#ai-agent-caps').textContent.includes('without tools')", vec![])
        .await;
    b.screenshot("page-ai-en").await;

    // 中文: the switcher sets the language preference too.
    b.goto("/").await;
    b.js("document.querySelector('form.lang button[value=\"zh-CN\"]').click()", vec![]).await;
    b.poll("Chinese", "return document.readyState === 'complete' && document.documentElement.lang.startsWith('zh')", vec![])
        .await;
    assert_eq!(prefs(&api).await["ai.common.ui_language"], "zh-CN");
    b.goto("/settings/agents").await;
    b.wait_for("#panel-common").await;
    assert_eq!(text(&b, "#tab-common").await, "通用");
    assert!(text(&b, "#panel-common").await.contains("默认智能体"));
    b.screenshot("common-zh").await;
    b.goto("/settings/agents?tab=hermes").await;
    b.wait_for("#panel-hermes").await;
    assert!(text(&b, "#panel-hermes .settings-caps").await.contains("已关闭"));
    b.screenshot("hermes-zh").await;
    b.goto("/ai").await;
    assert!(
        text(&b, "#ai-agent-caps").await.contains("知识图谱（已关闭）")
            || text(&b, "#ai-agent-caps").await.contains("知识图谱 (已关闭)")
    );
    b.screenshot("page-ai-zh").await;
    b.finish().await;

    // A member: the same tabs, no admin section.
    let _ = member;
    let m = Browser::start("settings-member", &app.base).await;
    m.login("member@acme.test", PASSWORD).await;
    m.goto("/settings/agents?tab=hermes").await;
    m.wait_for("#panel-hermes form[data-section=user]").await;
    assert_eq!(
        m.js("return document.querySelectorAll('[data-admin], form[data-section=admin], .settings-capabilities').length", vec![])
            .await,
        json!(0)
    );
    assert_eq!(
        m.js("return Array.from(document.querySelectorAll('[role=tab]')).map(t => t.dataset.tab)", vec![]).await,
        json!(["common", "hermes", "reasonix", "chat_only"])
    );
    m.screenshot("member-en").await;
    m.finish().await;
}

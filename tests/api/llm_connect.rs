//! Issue 26 item 3: an admin connects an OpenAI-compatible provider from the UI — the default
//! allow-list (public HTTPS providers), the provider's model list, "test connection" (one
//! small streamed request) and the refusal of a URL outside the operator's list, in words.
//! Against the project's OpenAI-compatible test server (`scripts/mock_openai.py`).

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{helpers::*, lightrag::mock_llm};

const KEY: &str = "sk-test-connect-5678";

/// `http://127.0.0.1:<port>`: the mock's root.
fn mock_root() -> String {
    mock_llm().trim_end_matches("/v1").to_string()
}

async fn put_config(api: &Client, agent: &str, body: Value) -> (StatusCode, Value) {
    api.send_json("PUT", &format!("/api/page-ai/agents/{agent}/config"), body).await
}

fn no_key(v: &Value, key: &str) {
    assert!(!v.to_string().contains(key), "the key came back: {v}");
}

#[tokio::test]
async fn the_models_are_listed_and_a_streamed_test_answers_with_the_saved_or_a_typed_key() {
    let app = spawn_app_with(|c| c.agents.allowed_urls = vec![mock_root()]).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    // Nothing saved yet: no endpoint to check.
    let (st, v) = api.post_json("/api/page-ai/agents/hermes/models", json!({})).await;
    assert_eq!((st, v["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_input")), "{v}");
    assert!(v["error"]["fields"]["endpointUrl"].is_string(), "{v}");

    // Unsaved values: the list of the typed endpoint, shaped like OpenAI's.
    let (st, v) = api.post_json("/api/page-ai/agents/hermes/models", json!({"endpointUrl": mock_root(), "apiKey": KEY})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["endpointUrl"], mock_root());
    let ids: Vec<&str> = v["models"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["mock-embed", "mock-llm", "scripted"]);
    assert_eq!(v["models"][2]["ownedBy"], "mnote-mock");
    no_key(&v, KEY);

    // Saved (endpoint and key, no model yet): the test wants a model first.
    let (st, v) = put_config(&api, "hermes", json!({"endpointUrl": mock_llm(), "model": "scripted", "apiKey": KEY})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = api.post_json("/api/page-ai/agents/hermes/models", json!({})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["models"].as_array().unwrap().len(), 3);

    // The test: one streamed completion of the saved model; its first words and latency.
    let (st, v) = api.post_json("/api/page-ai/agents/hermes/test", json!({})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!((v["ok"].as_bool(), v["model"].as_str()), (Some(true), Some("scripted")), "{v}");
    let reply = v["reply"].as_str().unwrap();
    assert!(reply.starts_with("This is a scripted answer"), "the model's own words: {v}");
    assert!(v["chunks"].as_u64().unwrap() >= 2, "streamed in chunks: {v}");
    assert!(v["latencyMs"].as_u64().unwrap() >= v["firstTokenMs"].as_u64().unwrap(), "{v}");
    // Another model of the list, typed for the test only.
    let (st, v) = api.post_json("/api/page-ai/agents/hermes/test", json!({"model": "mock-llm"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert!(v["reply"].as_str().unwrap().starts_with("MOCK ANSWER"), "{v}");
    let (_, cfg) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!(cfg["model"], "scripted", "a check saves nothing");

    // A member may not check (nor learn anything about the endpoint).
    let member = app.add_user(s.tenant_id, "member@acme.test", "member").await;
    let m = app.api(s.tenant_id, member).await;
    for path in ["models", "test"] {
        let (st, v) = m.post_json(&format!("/api/page-ai/agents/hermes/{path}"), json!({})).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    }
    // reasonix has no endpoint; an unknown agent is not found; unknown fields are refused.
    let (st, _) = api.post_json("/api/page-ai/agents/reasonix/models", json!({})).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    let (st, _) = api.post_json("/api/page-ai/agents/nobody/models", json!({})).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = api.post_json("/api/page-ai/agents/hermes/models", json!({"url": "x"})).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn a_refused_key_or_an_unreachable_endpoint_gets_a_stable_code_and_no_secret() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dead = format!("http://127.0.0.1:{closed}/v1");
    let allowed = vec![mock_root(), dead.clone()];
    let app = spawn_app_with(move |c| c.agents.allowed_urls = allowed).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    // A typed wrong key (the mock refuses `sk-wrong` with OpenAI's 401, quoting the key).
    for path in ["models", "test"] {
        let (st, v) = api
            .post_json(
                &format!("/api/page-ai/agents/hermes/{path}"),
                json!({"endpointUrl": mock_llm(), "apiKey": "sk-wrong", "model": "scripted"}),
            )
            .await;
        assert_eq!((st, v["error"]["code"].as_str()), (StatusCode::BAD_GATEWAY, Some("llm_unauthorized")), "{path}: {v}");
        no_key(&v, "sk-wrong");
    }
    // The saved wrong key is the one used (sealed, opened for the check).
    let (st, v) =
        put_config(&api, "chat_only", json!({"endpointUrl": mock_llm(), "model": "scripted", "apiKey": "sk-wrong"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = api.post_json("/api/page-ai/agents/chat_only/test", json!({})).await;
    assert_eq!((st, v["error"]["code"].as_str()), (StatusCode::BAD_GATEWAY, Some("llm_unauthorized")), "{v}");
    // A typed right key overrides it; the saved key never goes to another endpoint.
    let (st, v) = api.post_json("/api/page-ai/agents/chat_only/test", json!({"apiKey": KEY})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = api.post_json("/api/page-ai/agents/chat_only/models", json!({"endpointUrl": mock_root()})).await;
    assert_eq!(st, StatusCode::OK, "another spelling of the endpoint goes without the saved key: {v}");
    // Nobody listening.
    let (st, v) = api.post_json("/api/page-ai/agents/hermes/models", json!({"endpointUrl": dead})).await;
    assert_eq!((st, v["error"]["code"].as_str()), (StatusCode::BAD_GATEWAY, Some("llm_unavailable")), "{v}");
    let (st, v) = api.post_json("/api/page-ai/agents/hermes/test", json!({"endpointUrl": dead, "model": "m"})).await;
    assert_eq!((st, v["error"]["code"].as_str()), (StatusCode::BAD_GATEWAY, Some("llm_unavailable")), "{v}");
    // A path that is no OpenAI API: a 404 is a bad response, not an outage.
    let (st, v) =
        api.post_json("/api/page-ai/agents/hermes/models", json!({"endpointUrl": format!("{}/nothing/v9", mock_root())})).await;
    assert_eq!((st, v["error"]["code"].as_str()), (StatusCode::BAD_GATEWAY, Some("llm_bad_response")), "{v}");
}

#[tokio::test]
async fn a_url_outside_the_allow_list_is_refused_naming_its_origin_and_the_operators_setting() {
    let app = spawn_app_with(|c| c.agents.allowed_urls = vec![mock_root()]).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    for (path, method) in [
        ("/api/page-ai/agents/hermes/config", "PUT"),
        ("/api/page-ai/agents/hermes/models", "POST"),
        ("/api/page-ai/agents/hermes/test", "POST"),
    ] {
        let (st, v) =
            api.send_json(method, path, json!({"endpointUrl": "http://10.0.0.1:8000/v1/x", "model": "m", "apiKey": KEY})).await;
        assert_eq!((st, v["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_input")), "{v}");
        let why = v["error"]["fields"]["endpointUrl"].as_str().unwrap();
        assert!(why.contains("http://10.0.0.1:8000") && !why.contains("/v1/x"), "names the origin: {why}");
        assert!(why.contains("MNOTE_AGENT_ALLOWED_URLS") && why.contains("operator"), "{why}");
        no_key(&v, KEY);
    }
    // The settings page, in English then in Chinese: the same words next to the field.
    let mut web = app.login("owner@acme.test").await;
    web.page("/settings/agents?tab=hermes").await;
    let r = web
        .post_form("/settings/agents/hermes", &[("section", "admin"), ("ai.agent.hermes.endpoint_url", "http://10.0.0.1/v1")])
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.unwrap();
    assert!(
        html.contains("This server does not allow calls to http://10.0.0.1.") && html.contains("MNOTE_AGENT_ALLOWED_URLS"),
        "{html}"
    );
    let (st, _) = api.send_json("PATCH", "/api/page-ai/preferences", json!({"ai.common.ui_language": "zh-CN"})).await;
    assert_eq!(st, StatusCode::OK);
    let r = web
        .post_form("/settings/agents/hermes", &[("section", "admin"), ("ai.agent.hermes.endpoint_url", "http://10.0.0.1/v1")])
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.unwrap();
    assert!(html.contains("此服务器不允许连接 http://10.0.0.1") && html.contains("MNOTE_AGENT_ALLOWED_URLS"), "{html}");
    let (_, cfg) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert!(cfg["endpointUrl"].is_null(), "nothing saved: {cfg}");
}

#[tokio::test]
async fn the_default_allow_list_takes_the_public_providers_and_refuses_private_or_look_alike_urls() {
    let app = spawn_app_with(|c| c.agents.allowed_urls = mnote::config::agent_allowed_urls(None)).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    // Saving needs no network call.
    for url in ["https://api.openai.com/v1", "https://api.deepseek.com", "https://open.bigmodel.cn/api/paas/v4/"] {
        let (st, v) = put_config(&api, "hermes", json!({"endpointUrl": url, "model": "some-model", "apiKey": KEY})).await;
        assert_eq!(st, StatusCode::OK, "{url}: {v}");
        assert_eq!((v["provider"].as_str(), v["hasApiKey"].as_bool()), (Some("openai"), Some(true)), "{v}");
        no_key(&v, KEY);
    }
    for url in [
        "http://10.0.0.1/v1",
        "http://127.0.0.1:11434/v1",
        "http://api.openai.com/v1",
        "https://api.openai.com.evil.example/v1",
        "https://api.openai.com/v1@evil.example",
        "https://api.openai.com@evil.example/v1",
        "https://api.openai.com:8443/v1",
        "https://api.openai.com/v1/../admin",
    ] {
        let (st, v) = put_config(&api, "hermes", json!({"endpointUrl": url, "model": "m"})).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {v}");
    }
    let (_, cfg) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!(cfg["endpointUrl"], "https://open.bigmodel.cn/api/paas/v4", "{cfg}");
}

#[tokio::test]
async fn the_settings_page_lists_the_models_saves_the_picked_one_and_tests_without_javascript() {
    let app = spawn_app_with(|c| c.agents.allowed_urls = vec![mock_root(), "https://api.openai.com/v1".into()]).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let mut web = app.login("owner@acme.test").await;
    // The presets inside the allow-list; picking one fills the field (not saved).
    let (st, html) = web.page("/settings/agents?tab=hermes&provider=openai").await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains(r#"<option value="openai" data-url="https://api.openai.com/v1" selected>OpenAI</option>"#), "{html}");
    assert!(!html.contains(r#"value="deepseek""#), "a preset outside the allow-list is not offered");
    assert!(html.contains(r#"name="ai.agent.hermes.endpoint_url" value="https://api.openai.com/v1""#), "{html}");
    // Save the mock's URL and key (the admin form), then list its models.
    let r = web
        .post_form(
            "/settings/agents/hermes",
            &[("section", "admin"), ("ai.agent.hermes.endpoint_url", mock_llm()), ("ai.agent.hermes.api_key", KEY)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = web.post_form("/settings/agents/hermes/connect", &[("step", "models")]).await;
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    assert!(
        html.contains("The provider lists these models:") && html.contains(r#"<option value="scripted">scripted</option>"#),
        "{html}"
    );
    // No model yet: the test asks for one, in words.
    let r = web.post_form("/settings/agents/hermes/connect", &[("step", "test")]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("Type the model to test beside the button"));
    // Pick it: saved, the agent now runs on it.
    let r = web.post_form("/settings/agents/hermes/connect", &[("step", "use"), ("model", "scripted")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, cfg) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!((cfg["model"].as_str(), cfg["provider"].as_str()), (Some("scripted"), Some("openai")), "{cfg}");
    let r = web.post_form("/settings/agents/hermes/connect", &[("step", "test")]).await;
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    assert!(html.contains("Connected: scripted answered “This is a scripted answer"), "{html}");
    assert!(!html.contains(KEY));
    // A refused key: the reason in words, never the bare code, never the key.
    let (st, _) = put_config(&api, "hermes", json!({"endpointUrl": mock_llm(), "model": "scripted", "apiKey": "sk-wrong"})).await;
    assert_eq!(st, StatusCode::OK);
    for (step, lead) in [("test", "The connection test failed."), ("models", "The models could not be listed")] {
        let r = web.post_form("/settings/agents/hermes/connect", &[("step", step)]).await;
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let html = r.text().await.unwrap();
        assert!(html.contains(lead) && html.contains("The provider refused the API key."), "{html}");
        assert!(!html.contains("llm_unauthorized") && !html.contains("sk-wrong"), "{html}");
    }
    // A member: no connect section, and the form is refused.
    app.add_user(s.tenant_id, "member@acme.test", "member").await;
    let mut m = app.login("member@acme.test").await;
    let (_, html) = m.page("/settings/agents?tab=hermes").await;
    assert!(!html.contains("connect-actions") && !html.contains("connect-provider"), "{html}");
    let r = m.post_form("/settings/agents/hermes/connect", &[("step", "models")]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = m.post_form("/settings/agents/hermes/connect", &[("step", "use"), ("model", "x")]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let (_, cfg) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!(cfg["model"], "scripted");
}

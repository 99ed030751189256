//! Per-user agent preferences (`GET/PATCH /api/page-ai/preferences`, `mnote.ai_preferences.v1`)
//! through the real server: defaults filled in, the tri-state update (value / null = reset /
//! absent = unchanged), per-field `invalid_input` checked against the descriptors (kind,
//! options, auth) with nothing saved, two users' preferences kept apart (also by row-level
//! security), a run freezing the values at creation, the UI language moving with them, and the
//! settings page rendered from the descriptors: a field the operator adds is rendered and saved
//! with plain forms, its error shown next to it.

use mnote::{
    agents::{preferences::JSON_SCHEMA, selftest},
    db::{Scope, TenantTx},
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

async fn prefs(c: &Client) -> Value {
    let (st, v) = c.get_json("/api/page-ai/preferences").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let errors = selftest::validate(JSON_SCHEMA, &v);
    assert!(errors.is_empty(), "preferences do not match docs/schemas: {errors:?}\n{v}");
    assert_eq!(v["schema"], "mnote.ai_preferences.v1");
    v["values"].clone()
}

async fn patch(c: &Client, body: Value) -> (StatusCode, Value) {
    let (st, v) = c.send_json("PATCH", "/api/page-ai/preferences", body).await;
    if st == StatusCode::OK {
        assert!(selftest::validate(JSON_SCHEMA, &v).is_empty(), "{v}");
    }
    (st, v)
}

struct Two {
    app: TestApp,
    tenant: Uuid,
    alice_id: Uuid,
    alice: Client,
    bob: Client,
    kb: String,
}

async fn two_users() -> Two {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "alice@acme.test").await;
    let alice = app.api(s.tenant_id, s.user_id).await;
    let bob_id = app.add_user(s.tenant_id, "bob@acme.test", "member").await;
    let bob = app.api(s.tenant_id, bob_id).await;
    let (st, kb) = alice.post_json("/api/kbs", json!({"name": "Handbook", "visibility": "team"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    Two { tenant: s.tenant_id, alice_id: s.user_id, alice, bob, kb: kb["id"].as_str().unwrap().to_string(), app }
}

#[tokio::test]
async fn defaults_then_a_tri_state_update() {
    let t = two_users().await;
    let v = prefs(&t.bob).await;
    assert_eq!(v["ai.common.default_agent"], "hermes");
    assert_eq!(v["ai.common.default_kbs"], json!([]));
    assert_eq!(v["ai.common.citation_style"], "inline");
    assert_eq!(v["ai.common.ui_language"], "auto");
    assert_eq!(v["ai.agent.reasonix.profile_id"], "default");
    assert_eq!(v["ai.agent.hermes.use_knowledge_rag"], true);
    assert!(v.get("ai.agent.hermes.api_key").is_none(), "a member gets no admin field: {v}");

    let (st, v) = patch(
        &t.bob,
        json!({"ai.common.citation_style": "footnotes", "ai.common.default_kbs": [t.kb], "ai.agent.hermes.max_tool_rounds": 2}),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["values"]["ai.common.citation_style"], "footnotes");
    assert_eq!(v["values"]["ai.common.default_kbs"], json!([t.kb]));
    assert_eq!(v["values"]["ai.agent.hermes.max_tool_rounds"], 2);
    // Absent keys are unchanged.
    let (st, v) = patch(&t.bob, json!({"ai.agent.reasonix.profile_id": "night"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["values"]["ai.common.citation_style"], "footnotes");
    assert_eq!(v["values"]["ai.agent.reasonix.profile_id"], "night");
    // null resets to the default; the rest stays.
    let (st, v) = patch(&t.bob, json!({"ai.common.citation_style": null, "ai.agent.hermes.max_tool_rounds": null})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["values"]["ai.common.citation_style"], "inline");
    assert_eq!(v["values"]["ai.agent.hermes.max_tool_rounds"], t.app.config.agents.max_tool_rounds);
    assert_eq!(v["values"]["ai.common.default_kbs"], json!([t.kb]));
    assert_eq!(prefs(&t.bob).await, v["values"]);
    // The descriptors carry the same values.
    let (_, d) = t.bob.get_json("/api/page-ai/agents/descriptors").await;
    let kbs = d["common"]["fields"].as_array().unwrap().iter().find(|f| f["key"] == "ai.common.default_kbs").unwrap();
    assert_eq!(kbs["value"], json!([t.kb]));
    assert_eq!(d["items"][0]["defaultContextRefs"]["kbIds"], json!([t.kb]));
    assert_eq!(d["items"][2]["defaultContextRefs"]["kbIds"], json!([]), "chat_only takes no context");
}

#[tokio::test]
async fn bad_values_are_invalid_input_per_field_and_nothing_is_saved() {
    let t = two_users().await;
    let (st, e) = patch(
        &t.bob,
        json!({
            "ai.common.citation_style": "loud",
            "ai.common.default_kbs": [Uuid::new_v4()],
            "ai.common.default_agent": 3,
            "ai.agent.hermes.max_tool_rounds": 99,
            "ai.agent.hermes.use_knowledge_rag": "yes",
            "ai.agent.reasonix.profile_id": "no spaces!",
            "ai.agent.hermes.endpoint_url": "http://127.0.0.1:9/v1",
            "ai.common.telepathy": true,
            "ui.theme": "dark",
        }),
    )
    .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert_eq!(error_code(&e), "invalid_input");
    let f = &e["error"]["fields"];
    assert!(f["ai.common.citation_style"].as_str().unwrap().contains("one of: inline, footnotes"), "{e}");
    assert!(f["ai.common.default_kbs"].as_str().unwrap().contains("one of"), "{e}");
    assert!(f["ai.common.default_agent"].is_string(), "{e}");
    assert!(f["ai.agent.hermes.max_tool_rounds"].as_str().unwrap().contains("at most"), "{e}");
    assert_eq!(f["ai.agent.hermes.use_knowledge_rag"], "true or false");
    assert!(f["ai.agent.reasonix.profile_id"].as_str().unwrap().contains("must match"), "{e}");
    assert!(f["ai.agent.hermes.endpoint_url"].as_str().unwrap().contains("owner or admin"), "{e}");
    assert_eq!(f["ai.common.telepathy"], "unknown setting");
    assert_eq!(f["ui.theme"], "unknown setting");
    assert_eq!(f.as_object().unwrap().len(), 9, "{e}");
    // One bad field spoils the whole update.
    let (st, _) = patch(&t.bob, json!({"ai.common.citation_style": "footnotes", "ai.agent.hermes.max_tool_rounds": 0})).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(prefs(&t.bob).await["ai.common.citation_style"], "inline");
    // Not an object at all.
    let (st, e) = t.bob.send_json("PATCH", "/api/page-ai/preferences", json!(["ai.common.citation_style"])).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"));
    // An admin field from an admin is checked against the operator's allow-list.
    let (st, e) = patch(&t.alice, json!({"ai.agent.hermes.endpoint_url": "http://evil.example/v1"})).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert!(e["error"]["fields"]["ai.agent.hermes.endpoint_url"].as_str().unwrap().contains("allow"), "{e}");
}

#[tokio::test]
async fn two_users_of_one_tenant_keep_separate_preferences() {
    let t = two_users().await;
    let (st, _) = patch(&t.alice, json!({"ai.common.default_agent": "reasonix", "ai.common.citation_style": "footnotes"})).await;
    assert_eq!(st, StatusCode::OK);
    let (st, _) = patch(&t.bob, json!({"ai.common.default_agent": "chat_only"})).await;
    assert_eq!(st, StatusCode::OK);
    let (a, b) = (prefs(&t.alice).await, prefs(&t.bob).await);
    assert_eq!(
        (a["ai.common.default_agent"].clone(), b["ai.common.default_agent"].clone()),
        (json!("reasonix"), json!("chat_only"))
    );
    assert_eq!(
        (a["ai.common.citation_style"].clone(), b["ai.common.citation_style"].clone()),
        (json!("footnotes"), json!("inline"))
    );
    // Resetting Bob's leaves Alice's.
    let (st, _) = patch(&t.bob, json!({"ai.common.default_agent": null})).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(prefs(&t.alice).await["ai.common.default_agent"], "reasonix");
    // Row-level security: Bob's transaction sees none of Alice's rows, and cannot write one
    // for her — even though Alice is the owner, she does not see Bob's either.
    let bob_id: Uuid = {
        let mut tx = TenantTx::begin(&t.app.pool, t.tenant, Scope::System).await.unwrap();
        let id: Uuid =
            sqlx::query_scalar("select id from app_user where email = 'bob@acme.test'").fetch_one(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
        id
    };
    let count = |user: Uuid| {
        let pool = t.app.pool.clone();
        let tenant = t.tenant;
        async move {
            let mut tx = TenantTx::begin(&pool, tenant, Scope::User(user)).await.unwrap();
            let n: Vec<(Uuid, String)> =
                sqlx::query_as("select user_id, key from ai_preference order by key").fetch_all(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
            n
        }
    };
    let seen_by_bob = count(bob_id).await;
    assert!(seen_by_bob.is_empty(), "Bob reset his only row and sees none of Alice's: {seen_by_bob:?}");
    let seen_by_alice = count(t.alice_id).await;
    assert_eq!(seen_by_alice.len(), 2);
    assert!(seen_by_alice.iter().all(|(u, _)| *u == t.alice_id));
    let mut tx = TenantTx::begin(&t.app.pool, t.tenant, Scope::User(bob_id)).await.unwrap();
    let forged = sqlx::query(
        "insert into ai_preference (tenant_id, user_id, key, value) values ($1, $2, 'ai.common.default_agent', '\"hermes\"')",
    )
    .bind(t.tenant)
    .bind(t.alice_id)
    .execute(&mut *tx)
    .await;
    assert!(forged.unwrap_err().to_string().contains("row-level security"));
}

#[tokio::test]
async fn a_run_freezes_the_preferences_it_was_created_with() {
    let t = two_users().await;
    let (st, _) = patch(&t.bob, json!({"ai.common.citation_style": "footnotes", "ai.agent.hermes.max_tool_rounds": 3})).await;
    assert_eq!(st, StatusCode::OK);
    let body = |rid: &str| json!({"requestId": rid, "sessionId": "s-prefs", "agentId": "hermes", "prompt": "hello", "contextRefs": {"kbIds": [t.kb]}});
    let (st, run) = t.bob.post_json("/api/page-ai/runs", body("r-1")).await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    let id = run["hostRunId"].as_str().unwrap().to_string();
    let snap = run["preferences"].clone();
    assert_eq!(snap["schema"], "mnote.ai_run_preferences.v1", "{run}");
    assert_eq!(snap["hash"].as_str().unwrap().len(), 64);
    assert_eq!(snap["values"]["ai.common.citation_style"], "footnotes");
    assert_eq!(snap["values"]["ai.agent.hermes.max_tool_rounds"], 3);
    assert!(snap["values"].get("ai.agent.reasonix.profile_id").is_none(), "only the run's agent: {snap}");
    assert!(snap["values"].get("ai.common.ui_language").is_some());
    // A change afterwards does not touch the run…
    let (st, _) = patch(&t.bob, json!({"ai.common.citation_style": "inline"})).await;
    assert_eq!(st, StatusCode::OK);
    let (_, again) = t.bob.get_json(&format!("/api/page-ai/runs/{id}")).await;
    assert_eq!(again["preferences"], snap);
    // …nor a retry of the same request; a new run gets the new values and another hash.
    let (st, retry) = t.bob.post_json("/api/page-ai/runs", body("r-1")).await;
    assert_eq!((st, retry["preferences"].clone()), (StatusCode::OK, snap.clone()));
    let (st, run2) = t.bob.post_json("/api/page-ai/runs", body("r-2")).await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(run2["preferences"]["values"]["ai.common.citation_style"], "inline");
    assert_ne!(run2["preferences"]["hash"], snap["hash"]);
    // The old request field is gone (preferences come from the user's settings only).
    let mut b = body("r-3");
    b["preferences"] = json!({"ai.common.citation_style": "loud"});
    let (st, e) = t.bob.post_json("/api/page-ai/runs", b).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"));
}

#[tokio::test]
async fn the_ui_language_is_a_preference() {
    let t = two_users().await;
    let mut web = t.app.login("bob@acme.test").await;
    let (_, html) = web.page("/ai").await;
    assert!(html.contains("lang=\"en\""), "English first");
    let (st, v) = patch(&t.bob, json!({"ai.common.ui_language": "zh-CN"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["values"]["ai.common.ui_language"], "zh-CN");
    // The browser session follows the preference set through the API on its next page.
    let (_, html) = web.page("/ai").await;
    assert!(html.contains("lang=\"zh-CN\""), "{}", &html[..html.len().min(400)]);
    let (st, e) = patch(&t.bob, json!({"ai.common.ui_language": "fr"})).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    let (st, _) = patch(&t.bob, json!({"ai.common.ui_language": null})).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(prefs(&t.bob).await["ai.common.ui_language"], "auto");
}

const EXTRA: &str = r#"[
  {"key": "ai.agent.reasonix.tone", "label": {"en": "Tone", "zh-CN": "语气"}, "kind": "select", "default": "plain",
   "options": [{"value": "plain", "label": {"en": "Plain", "zh-CN": "朴素"}}, {"value": "formal", "label": {"en": "Formal", "zh-CN": "正式"}}]},
  {"key": "ai.common.signature", "label": {"en": "Signature"}, "kind": "string", "default": "",
   "validation": {"max": 20}}
]"#;

#[tokio::test]
async fn a_field_added_to_the_descriptors_is_rendered_and_saved_by_the_settings_page() {
    let app = spawn_app_with(|c| c.agents.extra_fields = Some(EXTRA.into())).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let v = prefs(&api).await;
    assert_eq!((v["ai.agent.reasonix.tone"].clone(), v["ai.common.signature"].clone()), (json!("plain"), json!("")));

    let mut web = app.login("owner@acme.test").await;
    let (st, html) = web.page("/settings/agents?tab=reasonix").await;
    assert_eq!(st, StatusCode::OK);
    // The new select, with its options, in the reasonix tab (no template knows it).
    assert!(html.contains(r#"<select name="ai.agent.reasonix.tone">"#), "{html}");
    assert!(html.contains(r#"<option value="formal">Formal</option>"#), "{html}");
    assert!(html.contains(r#"name="ai.common.signature""#) && html.contains(r#"maxlength="20""#), "{html}");
    // Saved with a plain form: a redirect back to the tab, and the API shows it.
    let r = web
        .post_form(
            "/settings/agents/reasonix",
            &[("section", "user"), ("ai.agent.reasonix.tone", "formal"), ("ai.agent.reasonix.profile_id", "default")],
        )
        .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/settings/agents?tab=reasonix");
    assert_eq!(prefs(&api).await["ai.agent.reasonix.tone"], "formal");
    let (_, html) = web.page("/settings/agents?tab=reasonix").await;
    assert!(html.contains(r#"<option value="formal" selected>Formal</option>"#), "{html}");
    // Unticked box = false within the submitted section.
    assert_eq!(prefs(&api).await["ai.agent.reasonix.use_knowledge_rag"], false);
    // A bad value: the page again (422) with the error next to the field and the value as typed.
    let r = web
        .post_form("/settings/agents/common", &[("section", "user"), ("ai.common.signature", "far too long for twenty chars")])
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.unwrap();
    let at = html.find(r#"data-error-for="ai.common.signature""#).expect("the error sits with its field");
    assert!(
        html[at..at + 120].contains("at most 20 characters") && !html[at..at + 60].contains("hidden"),
        "{}",
        &html[at..at + 120]
    );
    assert!(html.contains(r#"value="far too long for twenty chars""#));
    assert_eq!(prefs(&api).await["ai.common.signature"], "");
    // In Chinese, the operator's own words.
    let (st, _) = patch(&api, json!({"ai.common.ui_language": "zh-CN"})).await;
    assert_eq!(st, StatusCode::OK);
    let (_, html) = web.page("/settings/agents?tab=reasonix").await;
    assert!(html.contains("语气") && html.contains(r#"<option value="formal" selected>正式</option>"#), "{html}");
}

#[tokio::test]
async fn members_see_no_admin_section_and_cannot_save_one() {
    let app = spawn_app_with(|c| c.agents.allowed_urls = vec!["http://127.0.0.1:9/v1".into()]).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    app.add_user(s.tenant_id, "member@acme.test", "member").await;
    let mut owner = app.login("owner@acme.test").await;
    let (_, html) = owner.page("/settings/agents?tab=hermes").await;
    assert!(html.contains(r#"name="ai.agent.hermes.endpoint_url""#) && html.contains(r#"name="ai.agent.hermes.api_key""#));
    assert!(html.contains(r#"name="capability" value="knowledge_rag""#), "the switches, for admins");
    // The owner saves the endpoint through the admin section; the capability form switches.
    let r = owner
        .post_form(
            "/settings/agents/hermes",
            &[
                ("section", "admin"),
                ("ai.agent.hermes.endpoint_url", "http://127.0.0.1:9/v1"),
                ("ai.agent.hermes.default_model", "m1"),
                ("ai.agent.hermes.extra_models", ""),
                ("ai.agent.hermes.api_key", ""),
            ],
        )
        .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = owner.post_form("/settings/agents/capabilities", &[("capability", "evidence")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let api = app.api(s.tenant_id, s.user_id).await;
    let (_, caps) = api.get_json("/api/page-ai/capabilities").await;
    assert_eq!(caps["capabilities"], json!({"evidence": true, "knowledge_rag": false}));
    let (_, cfg) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!((cfg["endpointUrl"].clone(), cfg["model"].clone()), (json!("http://127.0.0.1:9/v1"), json!("m1")));

    let mut m = app.login("member@acme.test").await;
    let (st, html) = m.page("/settings/agents?tab=hermes").await;
    assert_eq!(st, StatusCode::OK);
    assert!(!html.contains("endpoint_url") && !html.contains("api_key") && !html.contains(r#"name="capability""#), "{html}");
    assert!(html.contains(r#"name="ai.agent.hermes.model""#), "the member's own fields");
    assert!(html.contains(r#"data-capability="knowledge_rag" data-state="disabled""#), "{html}");
    // Posting the admin section or the switches anyway: refused, nothing saved.
    let r = m
        .post_form("/settings/agents/hermes", &[("section", "admin"), ("ai.agent.hermes.endpoint_url", "http://127.0.0.1:9/v2")])
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let (_, cfg) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!(cfg["endpointUrl"], "http://127.0.0.1:9/v1");
    let r = m.post_form("/settings/agents/capabilities", &[("capability", "knowledge_rag")]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let (_, caps) = api.get_json("/api/page-ai/capabilities").await;
    assert_eq!(caps["capabilities"]["knowledge_rag"], false);
}

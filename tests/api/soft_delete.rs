//! Deleting a KB and removing a source (#16): a confirmation that says what follows, hidden
//! at once from lists and search, restorable for the grace period, purged after it.

use std::time::Duration;

use reqwest::{StatusCode, multipart};
use serde_json::{Value, json};

use crate::helpers::*;

struct Team {
    app: TestApp,
    c: Client,
    kb: String,
    grant: String,
    tenant: uuid::Uuid,
}

/// A team with a KB holding two indexed Markdown files under a granted folder.
async fn team() -> Team {
    team_with(|_| {}).await
}

async fn team_with(tweak: impl FnOnce(&mut mnote::config::Config)) -> Team {
    let app = spawn_app_with(tweak).await;
    let seeded = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.login("owner@acme.test").await.with_csrf().await;
    app.write_doc("docs/alpha.md", "# Alpha\n\nThe zanzibar protocol keeps the ledger consistent.\n");
    app.write_doc("docs/beta.md", "# Beta\n\nQuokka migrations happen every spring.\n");
    let (st, g) =
        c.post_json("/api/grants", json!({"path": app.docs_path("docs"), "allMembers": true, "permission": "read_index"})).await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, kb) = c.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = c.post_json(&format!("/api/kbs/{kb}/sources"), json!({"grantId": g["id"], "path": ""})).await;
    assert_eq!(st, StatusCode::CREATED, "{r}");
    app.run_jobs().await;
    Team { app, c, kb, grant: g["id"].as_str().unwrap().to_string(), tenant: seeded.tenant_id }
}

/// A count over every row of the tenant, deleted ones included (background work's view).
async fn count_all(app: &TestApp, tenant: uuid::Uuid, sql: &'static str) -> i64 {
    let mut tx = mnote::db::TenantTx::begin(&app.pool, tenant, mnote::db::Scope::System).await.unwrap();
    mnote::db::include_deleted(&mut tx, true).await.unwrap();
    let n = sqlx::query_scalar(sql).fetch_one(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    n
}

async fn sources(t: &Team) -> Vec<Value> {
    let (st, v) = t.c.get_json(&format!("/api/kbs/{}/sources", t.kb)).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["items"].as_array().unwrap().clone()
}

async fn source_id(t: &Team, path: &str) -> String {
    let all = sources(t).await;
    let s = all.iter().find(|s| s["resourcePath"] == path).unwrap_or_else(|| panic!("{path} in {all:?}"));
    s["id"].as_str().unwrap().to_string()
}

/// How many search results quote `word` (lexical, over every KB the user sees).
async fn hits(c: &Client, word: &str) -> usize {
    let (st, v) = c.post_json("/api/evidence/search", json!({"query": word, "mode": "lexical"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["results"].as_array().unwrap().iter().filter(|r| r["quote"].as_str().unwrap_or("").to_lowercase().contains(word)).count()
}

#[tokio::test]
async fn a_removed_source_leaves_list_and_search_at_once_and_comes_back_whole() {
    let t = team().await;
    let alpha = source_id(&t, "alpha.md").await;
    assert_eq!(hits(&t.c, "zanzibar").await, 1);

    // The confirmation's numbers come from the server.
    let (st, p) = t.c.get_json(&format!("/api/sources/{alpha}/delete-preview")).await;
    assert_eq!(st, StatusCode::OK, "{p}");
    assert_eq!(p["sources"], 1);
    let blocks = p["blocks"].as_i64().unwrap();
    assert!(blocks >= 2, "heading + paragraph: {p}");
    assert_eq!(p["graceSecs"], 7 * 24 * 3600);

    assert_eq!(t.c.delete(&format!("/api/sources/{alpha}")).await, StatusCode::NO_CONTENT);
    let left: Vec<_> = sources(&t).await.iter().map(|s| s["resourcePath"].as_str().unwrap().to_string()).collect();
    assert_eq!(left, vec!["beta.md"]);
    assert_eq!(hits(&t.c, "zanzibar").await, 0, "gone from search at once");
    assert_eq!(hits(&t.c, "quokka").await, 1, "the other source stays");
    let (st, _) = t.c.get_json(&format!("/api/sources/{alpha}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(t.c.get(&format!("/sources/{alpha}/view")).await.status(), StatusCode::NOT_FOUND);
    // Removing twice: nothing to remove.
    assert_eq!(t.c.delete(&format!("/api/sources/{alpha}")).await, StatusCode::NOT_FOUND);

    let (st, removed) = t.c.get_json(&format!("/api/kbs/{}/sources/removed", t.kb)).await;
    assert_eq!(st, StatusCode::OK);
    let items = removed["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{removed}");
    assert_eq!(items[0]["source"]["id"], alpha.as_str());
    assert!(items[0]["purgeAfter"].is_string());

    // A member who cannot manage the KB cannot restore it.
    let member = t.app.add_user(t.tenant, "m@acme.test", "member").await;
    let m = t.app.api(t.tenant, member).await;
    let (st, _) = m.post_json(&format!("/api/sources/{alpha}/restore"), json!({})).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, back) = t.c.post_json(&format!("/api/sources/{alpha}/restore"), json!({})).await;
    assert_eq!(st, StatusCode::OK, "{back}");
    assert_eq!(back["status"], "indexed");
    assert_eq!(hits(&t.c, "zanzibar").await, 1, "searchable again, evidence intact");
    assert_eq!(sources(&t).await.len(), 2);
    let (st, _) = t.c.post_json(&format!("/api/sources/{alpha}/restore"), json!({})).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "not removed any more");
}

/// The lexical mirror is keyed by the KB's block statistics, which removing a source leaves as
/// they are: a mirror built while a source is removed must hold its blocks, or a restored
/// source stays out of lexical search until the KB next changes (seen in CI).
#[tokio::test]
async fn a_mirror_built_while_a_source_is_removed_still_finds_it_once_restored() {
    let t = team().await;
    let alpha = source_id(&t, "alpha.md").await;
    assert_eq!(t.c.delete(&format!("/api/sources/{alpha}")).await, StatusCode::NO_CONTENT);

    let mut tx = mnote::db::TenantTx::begin(&t.app.pool, t.tenant, mnote::db::Scope::System).await.unwrap();
    let versions = mnote::search::memindex::visible_versions(&mut tx, t.tenant, None).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(versions.len(), 1, "{versions:?}");
    let index = mnote::search::memindex::build(&t.app.pool, versions[0]).await.unwrap().expect("the KB did not change");
    assert_eq!(index.blocks() as i64, versions[0].blocks, "every block of the KB, the removed source's included");

    let (st, back) = t.c.post_json(&format!("/api/sources/{alpha}/restore"), json!({})).await;
    assert_eq!(st, StatusCode::OK, "{back}");
    assert_eq!(hits(&t.c, "zanzibar").await, 1);
}

#[tokio::test]
async fn a_deleted_kb_is_hidden_with_its_sources_restorable_and_its_name_free() {
    let t = team().await;
    let (st, p) = t.c.get_json(&format!("/api/kbs/{}/delete-preview", t.kb)).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(p["sources"], 2, "{p}");

    // A plain member may not delete it.
    let member = t.app.add_user(t.tenant, "m@acme.test", "member").await;
    let m = t.app.api(t.tenant, member).await;
    assert_eq!(m.delete(&format!("/api/kbs/{}", t.kb)).await, StatusCode::FORBIDDEN);

    assert_eq!(t.c.delete(&format!("/api/kbs/{}", t.kb)).await, StatusCode::NO_CONTENT);
    let (_, list) = t.c.get_json("/api/kbs").await;
    assert!(list["items"].as_array().unwrap().is_empty(), "{list}");
    let (st, _) = t.c.get_json(&format!("/api/kbs/{}", t.kb)).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(hits(&t.c, "zanzibar").await + hits(&t.c, "quokka").await, 0, "its sources left search");
    assert_eq!(hits(&m, "quokka").await, 0);
    let (st, _) = t.c.get_json(&format!("/api/kbs/{}/sources", t.kb)).await;
    assert_eq!(st, StatusCode::NOT_FOUND);

    let (_, trash) = t.c.get_json("/api/kbs/deleted").await;
    let items = trash["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{trash}");
    assert_eq!(items[0]["kb"]["id"], t.kb.as_str());
    assert_eq!(items[0]["kb"]["sourceCount"], 2);
    assert!(items[0]["purgeAfter"].is_string());
    let (st, _) = m.post_json(&format!("/api/kbs/{}/restore", t.kb), json!({})).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "a member cannot restore it");

    // The name is free while it is deleted; restoring then needs the name back.
    let (st, other) = t.c.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    assert_eq!(st, StatusCode::CREATED, "{other}");
    let (st, e) = t.c.post_json(&format!("/api/kbs/{}/restore", t.kb), json!({})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::CONFLICT, "conflict"), "{e}");
    let (st, _) = t.c.send_json("PATCH", &format!("/api/kbs/{}", other["id"].as_str().unwrap()), json!({"name": "Other"})).await;
    assert_eq!(st, StatusCode::OK);
    let (st, kb) = t.c.post_json(&format!("/api/kbs/{}/restore", t.kb), json!({})).await;
    assert_eq!(st, StatusCode::OK, "{kb}");
    assert_eq!((kb["name"].as_str(), kb["sourceCount"].as_i64()), (Some("Handbook"), Some(2)));
    assert_eq!(hits(&t.c, "zanzibar").await, 1);
}

#[tokio::test]
async fn the_purge_deletes_for_good_only_after_the_grace_period() {
    let t = team().await;
    let alpha = source_id(&t, "alpha.md").await;
    assert_eq!(t.c.delete(&format!("/api/sources/{alpha}")).await, StatusCode::NO_CONTENT);
    let (_, kb2) = t.c.post_json("/api/kbs", json!({"name": "Scratch"})).await;
    let kb2 = kb2["id"].as_str().unwrap().to_string();
    assert_eq!(t.c.delete(&format!("/api/kbs/{kb2}")).await, StatusCode::NO_CONTENT);

    let count = |sql: &'static str| count_all(&t.app, t.tenant, sql);
    // Within the grace period nothing goes.
    let p = mnote::sources::purge::run_once(&t.app.pool, Duration::from_secs(3600)).await.unwrap();
    assert_eq!((p.kbs, p.sources), (0, 0));
    assert_eq!(count("select count(*) from source").await, 2);
    assert_eq!(count("select count(*) from kb").await, 2);
    let blocks_before = count("select count(*) from evidence_block").await;

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let p = mnote::sources::purge::run_once(&t.app.pool, Duration::from_secs(1)).await.unwrap();
    assert_eq!((p.kbs, p.sources), (1, 1));
    assert_eq!(count("select count(*) from source").await, 1, "only beta.md is left");
    assert_eq!(count("select count(*) from kb").await, 1);
    assert!(count("select count(*) from evidence_block").await < blocks_before, "its evidence went with it");
    assert_eq!(count("select count(*) from evidence_block where source_id not in (select id from source)").await, 0);
    let (st, _) = t.c.post_json(&format!("/api/sources/{alpha}/restore"), json!({})).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "purged: nothing to restore");
}

#[tokio::test]
async fn the_workers_purge_with_a_configured_grace_period() {
    let t = team_with(|c| c.delete_grace = Duration::from_secs(1)).await;
    let alpha = source_id(&t, "alpha.md").await;
    assert_eq!(t.c.delete(&format!("/api/sources/{alpha}")).await, StatusCode::NO_CONTENT);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let workers = mnote::ingest::pipeline::spawn_workers(
        t.app.pool.clone(),
        std::sync::Arc::new(t.app.config.clone()),
        1,
        None,
        t.app.vector_health.clone(),
        stop,
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if count_all(&t.app, t.tenant, "select count(*) from source").await == 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the workers did not purge the removed source");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop_tx.send(true).unwrap();
    for w in workers {
        w.await.unwrap();
    }
}

#[tokio::test]
async fn without_javascript_the_delete_buttons_lead_to_a_confirmation_page_that_says_what_follows() {
    let t = team().await;
    let mut c = t.app.login("owner@acme.test").await;
    let (_, html) = c.page(&format!("/kbs/{}", t.kb)).await;
    // The buttons are links to the confirmation pages; the dialog text is the same sentence.
    assert!(html.contains(&format!("href=\"/kbs/{}/delete\"", t.kb)), "{html}");
    assert!(html.contains("become stale and leave search: 2 sources"), "{html}");
    let (st, confirm) = c.page(&format!("/kbs/{}/delete", t.kb)).await;
    assert_eq!(st, StatusCode::OK);
    assert!(confirm.contains("become stale and leave search: 2 sources"), "{confirm}");
    assert!(confirm.contains("for 7 days"), "{confirm}");
    assert!(confirm.contains(&format!("action=\"/kbs/{}/delete\"", t.kb)));
    let r = c.post_form(&format!("/kbs/{}/delete", t.kb), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, dash) = c.page("/").await;
    assert!(dash.contains("Deleted “Handbook”"), "the flash says so: {dash}");
    assert!(dash.contains("Recently deleted knowledge bases"));
    assert!(dash.contains(&format!("action=\"/kbs/{}/restore\"", t.kb)));
    let r = c.post_form(&format!("/kbs/{}/restore", t.kb), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (st, page) = c.page(&format!("/kbs/{}", t.kb)).await;
    assert_eq!(st, StatusCode::OK);
    assert!(page.contains("Restored “Handbook”"));

    // A source: its confirmation counts its passages; removed, it is listed with Restore.
    let alpha = source_id(&t, "alpha.md").await;
    let (st, confirm) = c.page(&format!("/sources/{alpha}/delete")).await;
    assert_eq!(st, StatusCode::OK);
    assert!(confirm.contains("alpha.md leaves this knowledge base and search (2 passages)"), "{confirm}");
    let r = c.post_form(&format!("/sources/{alpha}/delete"), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, page) = c.page(&format!("/kbs/{}", t.kb)).await;
    assert!(page.contains("Recently removed"), "{page}");
    assert!(page.contains(&format!("action=\"/sources/{alpha}/restore\"")));
    let r = c.post_form(&format!("/sources/{alpha}/restore"), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(sources(&t).await.len(), 2);

    // In Chinese too.
    let zh = c.http.get(format!("{}/kbs/{}/delete", t.app.base, t.kb)).header("accept-language", "zh-CN").send().await.unwrap();
    let zh = zh.text().await.unwrap();
    assert!(zh.contains("2 个来源将失效并从搜索中移除"), "{zh}");
}

#[tokio::test]
async fn the_rescan_does_not_bring_back_a_removed_source_but_registering_it_does() {
    let t = team().await;
    let alpha = source_id(&t, "alpha.md").await;
    assert_eq!(t.c.delete(&format!("/api/sources/{alpha}")).await, StatusCode::NO_CONTENT);
    mnote::ingest::watch::rescan_all(&t.app.pool).await.unwrap();
    assert_eq!(sources(&t).await.len(), 1, "the folder rescan leaves it removed");
    let (st, s) = t.c.post_json(&format!("/api/kbs/{}/sources", t.kb), json!({"grantId": t.grant, "path": "alpha.md"})).await;
    assert_eq!(st, StatusCode::CREATED, "{s}");
    assert_eq!(s["id"], alpha.as_str(), "the same source, restored");
    assert_eq!(hits(&t.c, "zanzibar").await, 1);
}

#[tokio::test]
async fn a_duplicate_upload_says_already_in_this_kb_instead_of_a_silent_no_op() {
    let t = team().await;
    let up = |name: &'static str, body: &'static str| {
        let form = multipart::Form::new().part("file", multipart::Part::bytes(body.as_bytes()).file_name(name));
        t.c.req(reqwest::Method::POST, &format!("/api/kbs/{}/uploads", t.kb)).multipart(form).send()
    };
    let (st, v) = json_of(up("notes.md", "# Notes\n\nfirst\n").await.unwrap()).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["results"][0]["outcome"], "created");
    let (st, v) = json_of(up("notes.md", "# Notes\n\nfirst\n").await.unwrap()).await;
    assert_eq!((st, &v["results"][0]["outcome"]), (StatusCode::OK, &json!("duplicate")), "{v}");
    let (_, v) = json_of(up("copy-of-notes.md", "# Notes\n\nfirst\n").await.unwrap()).await;
    assert_eq!(v["results"][0]["outcome"], "duplicate", "same content under another name: {v}");
    assert_eq!(v["results"][0]["source"]["resourcePath"], "uploads/notes.md");
    let (_, v) = json_of(up("notes.md", "# Notes\n\nsecond\n").await.unwrap()).await;
    assert_eq!(v["results"][0]["outcome"], "updated", "{v}");
    assert_eq!(sources(&t).await.len(), 3, "alpha, beta, notes");

    // The form says it in words.
    let mut c = t.app.login("owner@acme.test").await;
    c.page(&format!("/kbs/{}", t.kb)).await;
    let form = multipart::Form::new()
        .text("csrf_token", c.csrf.clone().unwrap())
        .part("file", multipart::Part::bytes(&b"# Notes\n\nsecond\n"[..]).file_name("notes.md"));
    let r = c.http.post(format!("{}/kbs/{}/uploads", t.app.base, t.kb)).multipart(form).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, page) = c.page(&format!("/kbs/{}", t.kb)).await;
    assert!(page.contains("Already in this knowledge base: notes.md."), "{page}");
    // The upload input accepts exactly the server's kinds.
    assert!(
        page.contains(
            "accept=\".md,.markdown,.pdf,.docx,.xlsx,.xlsm,.ods,.xls,.csv,.tsv,.png,.jpg,.jpeg,.webp,.tif,.tiff,.bmp,.txt,.html,.htm,.xhtml,.eml,.mbox,.pptx,.odp,.doc,.ppt,.msg\""
        ),
        "{page}"
    );
    // Indexed rows open the viewer at page 1.
    let alpha = source_id(&t, "alpha.md").await;
    assert!(page.contains(&format!("href=\"/sources/{alpha}/view?page=1\"")), "{page}");
}

/// The steps of the dashboard's checklist as `(key, done)`.
fn steps(html: &str) -> Vec<(String, bool)> {
    html.split("data-step=\"")
        .skip(1)
        .map(|rest| {
            let key = rest.split('"').next().unwrap().to_string();
            let done = rest.split("data-done=\"").nth(1).unwrap().starts_with("true");
            (key, done)
        })
        .collect()
}

fn done_steps(html: &str) -> Vec<String> {
    steps(html).into_iter().filter(|(_, d)| *d).map(|(k, _)| k).collect()
}

#[tokio::test]
async fn the_dashboard_checklist_follows_each_roles_real_steps_and_disappears_when_done() {
    let app = spawn_app_with(|c| c.agents.allowed_urls = vec!["https://api.openai.com/v1".into()]).await;
    let seeded = app.bootstrap("acme", "owner@acme.test").await;
    let mut c = app.login("owner@acme.test").await;
    let (_, html) = c.page("/").await;
    assert!(html.contains("id=\"checklist\""), "{html}");
    let keys: Vec<String> = steps(&html).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["grant", "kb", "documents", "model", "invite", "ask"], "an admin's steps");
    assert!(done_steps(&html).is_empty(), "nothing done yet");
    app.write_doc("docs/a.md", "# A\n\nThe wombat digs a burrow.\n");
    let c2 = app.login("owner@acme.test").await.with_csrf().await;
    let (_, g) =
        c2.post_json("/api/grants", json!({"path": app.docs_path("docs"), "allMembers": true, "permission": "read_index"})).await;
    let (_, kb) = c2.post_json("/api/kbs", json!({"name": "K"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (_, html) = c.page("/").await;
    assert_eq!(done_steps(&html), ["grant", "kb"]);
    c2.post_json(&format!("/api/kbs/{kb}/sources"), json!({"grantId": g["id"], "path": ""})).await;
    app.run_jobs().await;
    let (_, html) = c.page("/").await;
    assert_eq!(done_steps(&html), ["grant", "kb", "documents"]);
    let (st, v) = c2
        .send_json(
            "PUT",
            "/api/page-ai/agents/hermes/config",
            json!({"endpointUrl": "https://api.openai.com/v1", "model": "gpt-4o-mini"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    // An invitation sent counts as inviting a teammate (before anyone joins).
    let (st, v) = c2.post_json("/api/members", json!({"email": "zoe@acme.test", "role": "member"})).await;
    assert!(st.is_success(), "{v}");
    let (_, html) = c.page("/").await;
    assert_eq!(done_steps(&html), ["grant", "kb", "documents", "model", "invite"]);

    // A member's own steps: nothing is ticked by the admin's work.
    app.add_user(seeded.tenant_id, "mia@acme.test", "member").await;
    let mut m = app.login("mia@acme.test").await;
    let (_, html) = m.page("/").await;
    assert_eq!(
        steps(&html),
        [("search".into(), false), ("ask".into(), false), ("own_kb".into(), false), ("token".into(), false)],
        "a member's steps, none done: {html}"
    );
    // Searching on the search page ticks the search step.
    let (st, _) = m.page("/search?q=wombat").await;
    assert_eq!(st, StatusCode::OK);
    let (_, html) = m.page("/").await;
    assert_eq!(done_steps(&html), ["search"]);

    // The admin asks the assistant: the last of the admin's steps, and the list is gone.
    let body = json!({
        "requestId": "req-checklist-1", "sessionId": "s-1", "agentId": "hermes",
        "prompt": "What does the wombat dig?", "contextRefs": {"kbIds": [kb]},
    });
    let (st, run) = c2.post_json("/api/page-ai/runs", body).await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    let (_, html) = c.page("/").await;
    assert!(!html.contains("id=\"checklist\""), "all done: gone: {:?}", steps(&html));
    // The dashboard search goes through /start/search, which ticks the step too.
    let r = m.get("/start/search?q=wombat").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/search?q=wombat");
    // Another session can hide it by hand.
    let mut m2 = app.login("mia@acme.test").await;
    let (_, html) = m2.page("/").await;
    assert!(html.contains("id=\"checklist\""));
    let r = m2.post_form("/start/hide", &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = m2.page("/").await;
    assert!(!html.contains("id=\"checklist\""));
}

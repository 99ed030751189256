//! The audit log (issue 44 item 4): every audited action writes exactly one row with who,
//! from where, what and the outcome; the app role cannot change or delete rows; old rows go
//! only through the purge, which keeps at least 30 days; admins read it through the API, the
//! page and its exports, and nobody else does.

use mnote::db::{Scope, TenantTx};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

use crate::helpers::*;

/// One audit row as the tests compare it.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    actor: String,
    ip: Option<String>,
    target: String,
    outcome: String,
    detail: String,
}

/// The tenant's rows of `action`, oldest first.
async fn rows(app: &TestApp, tenant: Uuid, action: &str) -> Vec<Row> {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let r: Vec<(String, Option<String>, String, String, String)> = sqlx::query_as(
        "select actor_email, client_ip, target, outcome, detail from audit_event
         where tenant_id = $1 and action = $2 order by id",
    )
    .bind(tenant)
    .bind(action)
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    r.into_iter().map(|(actor, ip, target, outcome, detail)| Row { actor, ip, target, outcome, detail }).collect()
}

/// Exactly one row of `action`; it is returned.
async fn one(app: &TestApp, tenant: Uuid, action: &str) -> Row {
    let r = rows(app, tenant, action).await;
    assert_eq!(r.len(), 1, "{action}: {r:?}");
    r.into_iter().next().unwrap()
}

fn local(r: &Row) {
    assert_eq!(r.ip.as_deref(), Some("127.0.0.1"), "the client address as the server sees it: {r:?}");
}

#[tokio::test]
async fn the_app_role_cannot_change_or_delete_audit_rows_and_the_purge_keeps_30_days() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let (st, _) = c.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    assert_eq!(st, StatusCode::CREATED);
    one(&app, s.tenant_id, "kb.create").await;

    // The server's own role, inside the tenant, as every request runs.
    for stmt in ["update audit_event set target = 'forged' where tenant_id = $1", "delete from audit_event where tenant_id = $1"]
    {
        let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::User(s.user_id)).await.unwrap();
        let e = sqlx::query(stmt).bind(s.tenant_id).execute(&mut *tx).await.expect_err(stmt);
        let code = e.as_database_error().and_then(|d| d.code()).map(|c| c.to_string());
        assert_eq!(code.as_deref(), Some("42501"), "{stmt}: {e}");
    }
    let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::System).await.unwrap();
    let e = sqlx::query("truncate audit_event").execute(&mut *tx).await.expect_err("truncate");
    assert_eq!(e.as_database_error().and_then(|d| d.code()).as_deref(), Some("42501"), "{e}");
    drop(tx);
    // Not even the owner role updates a row.
    let mut tx = TenantTx::begin(&app.owner_pool, s.tenant_id, Scope::System).await.unwrap();
    let e = sqlx::query("update audit_event set target = 'forged'").execute(&mut *tx).await.expect_err("owner update");
    assert!(e.to_string().contains("append-only"), "{e}");
    drop(tx);
    // A row's time is the server's, whatever the insert says.
    let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::User(s.user_id)).await.unwrap();
    sqlx::query(
        "insert into audit_event (tenant_id, at, action, target, outcome) values ($1, now() - interval '400 days', 'kb.delete', 'backdated', 'success')",
    )
    .bind(s.tenant_id)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let stamped = rows(&app, s.tenant_id, "kb.delete").await;
    assert_eq!(stamped.len(), 1);
    let recent = mnote::audit::queries::purge(&app.pool, 30).await.unwrap();
    assert_eq!(recent, 0, "nothing younger than 30 days is purged (the backdated insert got now())");

    // An old row (written past the triggers, as the database's superuser can) is purged at
    // the retention; a retention under 30 days is refused.
    let mut url = reqwest::Url::parse(&admin_url()).unwrap();
    url.set_path(&app.db_name);
    let mut admin = PgConnection::connect(url.as_str()).await.unwrap();
    admin.execute("set session_replication_role = replica").await.unwrap();
    sqlx::query(
        "insert into audit_event (tenant_id, at, action, target, outcome) values ($1, now() - interval '40 days', 'kb.delete', 'old', 'success')",
    )
    .bind(s.tenant_id)
    .execute(&mut admin)
    .await
    .unwrap();
    admin.close().await.unwrap();
    let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::System).await.unwrap();
    let e = sqlx::query("select mnote_audit_purge(29)").execute(&mut *tx).await.expect_err("29 days");
    assert!(e.to_string().contains("at least 30 days"), "{e}");
    drop(tx);
    assert_eq!(mnote::audit::queries::purge(&app.pool, 60).await.unwrap(), 0);
    assert_eq!(mnote::audit::queries::purge(&app.pool, 30).await.unwrap(), 1);
    let left: Vec<String> = rows(&app, s.tenant_id, "kb.delete").await.into_iter().map(|r| r.target).collect();
    assert_eq!(left, vec!["backdated".to_string()]);
    one(&app, s.tenant_id, "kb.create").await;
}

#[tokio::test]
async fn sign_in_and_sign_out_write_one_row_each_with_the_method_and_address() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let bad = app.client().login("owner@acme.test", "wrong password").await;
    assert_eq!(bad.status(), StatusCode::UNAUTHORIZED);
    app.audit_rows(s.tenant_id, "sign_in", 1).await;
    let failed = one(&app, s.tenant_id, "sign_in").await;
    assert_eq!(
        (failed.outcome.as_str(), failed.detail.as_str(), failed.actor.as_str()),
        ("failure", "password", "owner@acme.test")
    );
    local(&failed);
    // An e-mail without an account belongs to no team: nothing to record.
    app.client().login("nobody@acme.test", PASSWORD).await;
    let mut c = app.login("owner@acme.test").await;
    let all = rows(&app, s.tenant_id, "sign_in").await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!((all[1].outcome.as_str(), all[1].detail.as_str()), ("success", "password"));
    local(&all[1]);
    c.page("/").await;
    let r = c.post_form("/logout", &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let out = one(&app, s.tenant_id, "sign_out").await;
    assert_eq!(out.actor, "owner@acme.test");
    local(&out);
}

#[tokio::test]
async fn sign_ins_refused_by_the_rate_limit_are_recorded_too() {
    let app = spawn_app_with(|c| c.login_max_failures = 2).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    for _ in 0..2 {
        assert_eq!(app.client().login("owner@acme.test", "a wrong guess").await.status(), StatusCode::UNAUTHORIZED);
    }
    let r = app.client().login("owner@acme.test", PASSWORD).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    app.audit_rows(s.tenant_id, "sign_in", 3).await;
    let all = rows(&app, s.tenant_id, "sign_in").await;
    let details: Vec<(&str, &str)> = all.iter().map(|r| (r.outcome.as_str(), r.detail.as_str())).collect();
    let mut sorted = details.clone();
    sorted.sort();
    assert_eq!(sorted, [("failure", "password"), ("failure", "password"), ("failure", "password, rate limited")], "{all:?}");
}

#[tokio::test]
async fn tokens_invitations_and_roles_write_one_row_each() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let t = s.tenant_id;
    let c = app.api(t, s.user_id).await;
    let (st, tok) = c.post_json("/api/tokens", json!({"name": "ci"})).await;
    assert_eq!(st, StatusCode::CREATED, "{tok}");
    let created = one(&app, t, "token.create").await;
    assert!(created.target.ends_with(" ci"), "{created:?}");
    local(&created);
    assert_eq!(c.delete(&format!("/api/tokens/{}", tok["id"].as_str().unwrap())).await, StatusCode::NO_CONTENT);
    one(&app, t, "token.revoke").await;

    let (st, inv) = c.post_json("/api/members", json!({"email": "gone@acme.test", "role": "member"})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{inv}");
    let invited = one(&app, t, "invitation.create").await;
    assert_eq!((invited.target.as_str(), invited.detail.as_str()), ("gone@acme.test", "member"));
    let (_, open) = c.get_json("/api/members/invitations").await;
    let id = open["items"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(c.delete(&format!("/api/members/invitations/{id}")).await, StatusCode::NO_CONTENT);
    one(&app, t, "invitation.revoke").await;

    let member = crate::invitations::invite_and_accept(&app, &c, "joiner@acme.test", "member").await;
    let accepted = one(&app, t, "invitation.accept").await;
    assert_eq!(accepted.actor, "joiner@acme.test");
    assert_eq!(rows(&app, t, "invitation.create").await.len(), 2);
    let (st, m) = c.send_json("PATCH", &format!("/api/members/{member}"), json!({"role": "admin"})).await;
    assert_eq!(st, StatusCode::OK, "{m}");
    let role = one(&app, t, "member.role").await;
    assert_eq!(role.detail, "member -> admin");
    assert_eq!(c.delete(&format!("/api/members/{member}")).await, StatusCode::NO_CONTENT);
    let removed = one(&app, t, "member.remove").await;
    assert!(removed.target.contains("joiner@acme.test"), "{removed:?}");
}

#[tokio::test]
async fn grants_and_knowledge_bases_write_one_row_each() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let t = s.tenant_id;
    let other = app.add_user(t, "bob@acme.test", "member").await;
    let c = app.api(t, s.user_id).await;
    std::fs::create_dir_all(app.docs.join("team")).unwrap();
    let (st, g) =
        c.post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"})).await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let added = one(&app, t, "grant.add").await;
    assert_eq!(added.detail, "read_index to all members");
    // The same grant again changes nothing and records nothing.
    let (st, _) =
        c.post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"})).await;
    assert_eq!(st, StatusCode::OK);
    one(&app, t, "grant.add").await;
    let (st, _) = c.delete_json(&format!("/api/grants/{}", g["id"].as_str().unwrap())).await;
    assert_eq!(st, StatusCode::OK);
    one(&app, t, "grant.revoke").await;

    let (st, kb) = c.post_json("/api/kbs", json!({"name": "Handbook", "visibility": "team"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let id = kb["id"].as_str().unwrap();
    assert_eq!(one(&app, t, "kb.create").await.target, format!("kb:{id} Handbook"));
    let (st, _) = c.send_json("PATCH", &format!("/api/kbs/{id}"), json!({"description": "only words"})).await;
    assert_eq!(st, StatusCode::OK);
    assert!(rows(&app, t, "kb.visibility").await.is_empty(), "no visibility change, no row");
    let (st, _) = c.send_json("PATCH", &format!("/api/kbs/{id}"), json!({"visibility": "private"})).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(one(&app, t, "kb.visibility").await.detail, "team -> private");
    let (st, _) = c.send_json("PUT", &format!("/api/kbs/{id}/members/{other}"), json!({"canManage": true})).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(one(&app, t, "kb.member_set").await.detail, "bob@acme.test manage");
    assert_eq!(c.delete(&format!("/api/kbs/{id}/members/{other}")).await, StatusCode::NO_CONTENT);
    assert_eq!(one(&app, t, "kb.member_remove").await.detail, "bob@acme.test");
    let (st, v) = c.post_json(&format!("/api/kbs/{id}/transfer"), json!({"ownerId": other})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(one(&app, t, "kb.transfer").await.detail, "owner@acme.test -> bob@acme.test");
    assert_eq!(c.delete(&format!("/api/kbs/{id}")).await, StatusCode::NO_CONTENT);
    one(&app, t, "kb.delete").await;
    let (st, v) = c.post_json(&format!("/api/kbs/{id}/restore"), json!({})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let restored = one(&app, t, "kb.restore").await;
    local(&restored);
}

#[tokio::test]
async fn lightrag_agents_capabilities_and_downloads_write_one_row_each() {
    let app = spawn_app_with(|c| {
        c.rag.allowed_urls = vec!["http://127.0.0.1:9".into()];
        c.agents.allowed_urls = vec!["http://127.0.0.1:9".into()];
    })
    .await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let t = s.tenant_id;
    let c = app.api(t, s.user_id).await;
    let (_, kb) = c.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();

    let (st, b) =
        c.send_json("PUT", &format!("/api/kbs/{kb}/knowledge-rag"), json!({"url": "http://127.0.0.1:9", "apiKey": "k"})).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    let bound = one(&app, t, "rag.bind").await;
    assert_eq!(bound.detail, "http://127.0.0.1:9 (with key)", "the key itself is never written: {bound:?}");
    assert_eq!(c.delete(&format!("/api/kbs/{kb}/knowledge-rag")).await, StatusCode::NO_CONTENT);
    one(&app, t, "rag.unbind").await;

    let (st, v) = c
        .send_json(
            "PUT",
            "/api/page-ai/agents/hermes/config",
            json!({"endpointUrl": "http://127.0.0.1:9/v1", "model": "m1", "apiKey": "sk-secret"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let endpoint = one(&app, t, "agent.endpoint").await;
    assert_eq!((endpoint.target.as_str(), endpoint.detail.as_str()), ("hermes", "http://127.0.0.1:9/v1 m1"));
    assert_eq!(one(&app, t, "agent.key").await.detail, "set");
    assert!(!rows(&app, t, "agent.key").await.iter().any(|r| r.detail.contains("sk-secret")));

    let (st, v) = c.send_json("PATCH", "/api/page-ai/capabilities", json!({"knowledge_rag": false, "evidence": true})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let switched = one(&app, t, "capability.switch").await;
    assert_eq!((switched.target.as_str(), switched.detail.as_str()), ("knowledge_rag", "off"), "only what changed");

    let r = c
        .req(reqwest::Method::POST, &format!("/api/kbs/{kb}/uploads"))
        .multipart(
            reqwest::multipart::Form::new()
                .part("file", reqwest::multipart::Part::bytes(b"# Notes\n\nhello".to_vec()).file_name("notes.md")),
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let (_, list) = c.get_json(&format!("/api/kbs/{kb}/sources")).await;
    let sid = list["items"][0]["id"].as_str().unwrap().to_string();
    let r = c.get(&format!("/sources/{sid}/download")).await;
    assert_eq!(r.status(), StatusCode::OK);
    r.bytes().await.unwrap();
    let dl = one(&app, t, "source.download").await;
    assert_eq!(dl.target, format!("source:{sid} notes.md"));
    // A later piece of the same download (a range past the start) is not another download.
    let r = c.req(reqwest::Method::GET, &format!("/sources/{sid}/download")).header("range", "bytes=2-").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    one(&app, t, "source.download").await;
}

async fn items(c: &Client, query: &str) -> Vec<Value> {
    let (st, v) = c.get_json(&format!("/api/audit{query}")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn admins_read_filter_page_and_export_their_teams_audit_log_only() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let member = app.add_user(s.tenant_id, "bob@acme.test", "member").await;
    let other = app.bootstrap("globex", "owner@globex.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    for name in ["One", "Two", "Three"] {
        let (st, _) = c.post_json("/api/kbs", json!({"name": name})).await;
        assert_eq!(st, StatusCode::CREATED);
    }
    app.login("bob@acme.test").await;
    let g = app.api(other.tenant_id, other.user_id).await;
    let (st, _) = g.post_json("/api/kbs", json!({"name": "Theirs"})).await;
    assert_eq!(st, StatusCode::CREATED);

    let kbs = items(&c, "?action=kb.create").await;
    let names: Vec<&str> = kbs.iter().map(|e| e["target"].as_str().unwrap().rsplit(' ').next().unwrap()).collect();
    assert_eq!(names, ["Three", "Two", "One"], "newest first, this team's only");
    assert_eq!(kbs[0]["actorEmail"], "owner@acme.test");
    assert_eq!(kbs[0]["clientIp"], "127.0.0.1");
    assert_eq!(kbs[0]["outcome"], "success");
    let bobs = items(&c, "?person=BOB@").await;
    assert_eq!(bobs.len(), 1, "{bobs:?}");
    assert_eq!(bobs[0]["action"], "sign_in");
    let today = chrono::Utc::now().date_naive();
    let yesterday = today.pred_opt().unwrap();
    assert_eq!(items(&c, &format!("?from={today}&to={today}")).await.len(), 4);
    assert!(items(&c, &format!("?to={yesterday}")).await.is_empty());

    // Paging: two, then the rest.
    let (_, p1) = c.get_json("/api/audit?limit=2").await;
    assert_eq!(p1["items"].as_array().unwrap().len(), 2);
    let before = p1["nextBefore"].as_i64().expect("a next page");
    let (_, p2) = c.get_json(&format!("/api/audit?limit=2&before={before}")).await;
    assert_eq!(p2["items"].as_array().unwrap().len(), 2);
    assert!(p2["nextBefore"].is_null(), "{p2}");

    // Refused filters name the field.
    for (q, field) in
        [("?action=kb.nope", "action"), ("?from=07/12/2026", "from"), ("?limit=0", "limit"), ("?format=xml", "format")]
    {
        let (st, v) = c.get_json(&format!("/api/audit{q}")).await;
        assert_eq!((st, error_code(&v)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{q}: {v}");
        assert!(v["error"]["fields"][field].is_string(), "{q}: {v}");
    }

    // CSV: a header and one line per row.
    let r = c.get("/api/audit?format=csv&action=kb.create").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let csv = r.text().await.unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "id,at,actor_id,actor_email,client_ip,action,target,outcome,detail");
    assert_eq!(lines.len(), 4, "{csv}");
    assert!(lines[1].contains(",owner@acme.test,127.0.0.1,kb.create,") && lines[1].ends_with("Three,success,team"), "{csv}");

    // A member reads none of it.
    let m = app.api(s.tenant_id, member).await;
    let (st, v) = m.get_json("/api/audit").await;
    assert_eq!((st, error_code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "{v}");

    // The page and its exports.
    let mut owner = app.login("owner@acme.test").await;
    let (st, html) = owner.page("/admin/audit?action=kb.create").await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("Knowledge base created") && html.contains("Three") && !html.contains("Theirs"), "{html}");
    assert!(html.contains("/admin/audit/export?format=csv&amp;action=kb.create"), "{html}");
    let r = owner.get("/admin/audit/export?format=json&action=kb.create").await;
    assert_eq!(r.status(), StatusCode::OK);
    let (_, v) = json_of(r).await;
    assert_eq!(v["items"].as_array().unwrap().len(), 3, "{v}");
    let (st, _) = owner.page("/admin/audit?from=nope").await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    let mut bob = app.login("bob@acme.test").await;
    let (st, _) = bob.page("/admin/audit").await;
    assert_eq!(st, StatusCode::FORBIDDEN);
}

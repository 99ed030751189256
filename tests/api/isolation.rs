//! Tenant isolation lives in the database: forced RLS on every tenant table, a confined app
//! role, and no API input that can change the tenant.

use mnote::db::{Scope, TenantTx};
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

use crate::helpers::*;

const TENANT_TABLES: &[&str] = &[
    "agent_config",
    "ai_capability_setting",
    "ai_conversation",
    "ai_preference",
    "ai_run",
    "ai_run_event",
    "api_token",
    "audit_event",
    "dir_grant",
    "evidence_block",
    "evidence_edge",
    "evidence_embedding",
    "evidence_kb_stat",
    "evidence_section",
    "evidence_term_stat",
    "ingest_job",
    "invitation",
    "kb",
    "kb_folder",
    "kb_member",
    "membership",
    "password_reset",
    "rag_binding",
    "rag_doc",
    "source",
    "source_artifact",
    "tenant_root",
    "tenant_setting",
];

/// Tenant tables the app role may only insert into and read.
const APPEND_ONLY: &[&str] = &["audit_event"];

/// Seed one row in every tenant table for a tenant; returns (tenant, owner, kb id).
async fn seed_everything(app: &TestApp, name: &str) -> (Seeded, Uuid) {
    let s = app.bootstrap(name, &format!("owner@{name}.test")).await;
    let member = app.add_user(s.tenant_id, &format!("member@{name}.test"), "member").await;
    app.write_doc(&format!("{name}/notes.md"), "# Notes\n\nhello [[Other]] @Alice");
    let c = app.api(s.tenant_id, s.user_id).await;
    let (st, g) =
        c.post_json("/api/grants", json!({"path": app.docs_path(name), "allMembers": true, "permission": "read_index"})).await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, kb) = c.post_json("/api/kbs", json!({"name": format!("{name} kb"), "visibility": "private"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let kb_id: Uuid = kb["id"].as_str().unwrap().parse().unwrap();
    let (st, r) = c.post_json(&format!("/api/kbs/{kb_id}/sources"), json!({"path": app.docs_path(name)})).await;
    assert_eq!(st, StatusCode::CREATED, "{r}");
    let (st, _) = c.send_json("PUT", &format!("/api/kbs/{kb_id}/members/{member}"), json!({"canManage": false})).await;
    assert_eq!(st, StatusCode::OK);
    let (st, _) = c.send_json("PATCH", "/api/tenant/settings", json!({"externalParsingUpload": false})).await;
    assert_eq!(st, StatusCode::OK);
    // Parse it (evidence rows) and queue one more job so ingest_job has an open row too.
    app.run_jobs().await;
    seed_vector(app, s.tenant_id).await;
    seed_rag(app, s.tenant_id, kb_id).await;
    seed_runs(app, s.tenant_id, member).await;
    // A password reset link for the member (one team only, so it may be issued).
    let (st, r) = c.post_json(&format!("/api/members/{member}/password-reset"), json!({})).await;
    assert_eq!(st, StatusCode::CREATED, "{r}");
    // A pending invitation (tenant_root has its row from `bootstrap`).
    let (st, inv) = c.post_json("/api/members", json!({"email": format!("invitee@{name}.test"), "role": "member"})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{inv}");
    app.write_doc(&format!("{name}/notes.md"), "# Notes\n\nchanged");
    let (st, _) = c.post_json(&format!("/api/kbs/{kb_id}/sources"), json!({"path": app.docs_path(name)})).await;
    assert_eq!(st, StatusCode::OK);
    (s, kb_id)
}

/// A LightRAG binding and one synced document (the sync needs no server to prove isolation).
async fn seed_rag(app: &TestApp, tenant: Uuid, kb: Uuid) {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let binding = Uuid::new_v4();
    sqlx::query("insert into rag_binding (tenant_id, id, kb_id, url) values ($1, $2, $3, 'http://127.0.0.1:9621')")
        .bind(tenant)
        .bind(binding)
        .bind(kb)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "insert into rag_doc (tenant_id, binding_id, source_id, file_source, doc_id, source_hash, method, status)
         select $1, $2, id, 'mnote-x', 'doc-x', 'sha256:x', 'upload', 'processed' from source limit 1",
    )
    .bind(tenant)
    .bind(binding)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

/// A run of the member with its events, an agent configuration, a capability switch and a
/// preference of the member.
async fn seed_runs(app: &TestApp, tenant: Uuid, member: Uuid) {
    let c = app.api(tenant, member).await;
    let (st, run) = c
        .post_json("/api/page-ai/runs", json!({"requestId": "iso-1", "sessionId": "s", "agentId": "hermes", "prompt": "hello"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    sqlx::query(
        "insert into agent_config (tenant_id, agent_id, endpoint_url, model) values ($1, 'hermes', 'http://127.0.0.1:9', 'm')",
    )
    .bind(tenant)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let (st, p) = c.send_json("PATCH", "/api/page-ai/preferences", json!({"ai.common.citation_style": "footnotes"})).await;
    assert_eq!(st, StatusCode::OK, "{p}");
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    sqlx::query("insert into ai_capability_setting (tenant_id, capability, enabled) values ($1, 'knowledge_rag', false)")
        .bind(tenant)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

/// One vector row (the embedder is not needed to prove isolation). Re-indexing a source
/// replaces its blocks and so drops their vectors: call again after running jobs.
async fn seed_vector(app: &TestApp, tenant: Uuid) {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    sqlx::query(
        "insert into evidence_embedding (tenant_id, block_id, model, source_id, kb_id, embedding)
         select tenant_id, id, 'test-model', source_id, kb_id, '[1,0,0]'::vector from evidence_block limit 1
         on conflict do nothing",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

async fn count_as(app: &TestApp, tenant: Uuid, table: &str, filter_tenant: Uuid) -> i64 {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let n: i64 = sqlx::query_scalar(&format!("select count(*) from {table} where tenant_id = $1"))
        .bind(filter_tenant)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    n
}

#[tokio::test]
async fn every_tenant_table_has_forced_rls_and_a_tenant_policy() {
    let app = spawn_app().await;
    let rows: Vec<(String, bool, bool)> = sqlx::query_as(
        "select c.relname::text, c.relrowsecurity, c.relforcerowsecurity from pg_class c
         join pg_namespace n on n.oid = c.relnamespace
         where n.nspname = 'public' and c.relkind = 'r'
           and exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'tenant_id')
         order by 1",
    )
    .fetch_all(&app.owner_pool)
    .await
    .unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, TENANT_TABLES, "every table with tenant_id must be listed here and tested");
    for (t, enabled, forced) in &rows {
        assert!(*enabled && *forced, "{t}: RLS enabled={enabled} forced={forced}");
        let policy: Option<String> =
            sqlx::query_scalar("select qual from pg_policies where tablename = $1 and policyname = 'tenant_isolation'")
                .bind(t)
                .fetch_optional(&app.owner_pool)
                .await
                .unwrap();
        let policy = policy.unwrap_or_else(|| panic!("{t} has no tenant_isolation policy"));
        assert!(policy.contains("app.tenant_id"), "{t}: {policy}");
    }
}

/// A view runs as its owner unless it is `security_invoker`: one that is not would read the
/// tenant tables past their row-level security.
#[tokio::test]
async fn every_view_reads_with_the_callers_row_level_security() {
    let app = spawn_app().await;
    let rows: Vec<(String, Option<Vec<String>>)> = sqlx::query_as(
        "select c.relname::text, c.reloptions::text[] from pg_class c
         join pg_namespace n on n.oid = c.relnamespace
         where n.nspname = 'public' and c.relkind in ('v', 'm')
         order by 1",
    )
    .fetch_all(&app.owner_pool)
    .await
    .unwrap();
    assert!(rows.iter().any(|(v, _)| v == "readable_source"), "the views: {rows:?}");
    for (v, options) in &rows {
        assert!(
            options.iter().flatten().any(|o| o == "security_invoker=true"),
            "{v} is not security_invoker: it would read past row-level security ({options:?})"
        );
    }
}

#[tokio::test]
async fn rows_of_one_tenant_are_invisible_and_unmodifiable_from_another() {
    let app = spawn_app().await;
    let (a, _) = seed_everything(&app, "alpha").await;
    let (b, _) = seed_everything(&app, "beta").await;
    seed_vector(&app, a.tenant_id).await; // beta's run re-indexed alpha's changed file
    for t in TENANT_TABLES {
        assert!(count_as(&app, a.tenant_id, t, a.tenant_id).await > 0, "{t}: seed row missing for A");
        assert_eq!(count_as(&app, b.tenant_id, t, a.tenant_id).await, 0, "{t}: B sees A's rows");
        if APPEND_ONLY.contains(t) {
            // No UPDATE or DELETE for the app role at all, in any tenant (tests/api/audit.rs).
            continue;
        }
        let mut tx = TenantTx::begin(&app.pool, b.tenant_id, Scope::System).await.unwrap();
        let upd = sqlx::query(&format!("update {t} set tenant_id = tenant_id where tenant_id = $1"))
            .bind(a.tenant_id)
            .execute(&mut *tx)
            .await
            .unwrap();
        assert_eq!(upd.rows_affected(), 0, "{t}: B updated A's rows");
        let del =
            sqlx::query(&format!("delete from {t} where tenant_id = $1")).bind(a.tenant_id).execute(&mut *tx).await.unwrap();
        assert_eq!(del.rows_affected(), 0, "{t}: B deleted A's rows");
        tx.commit().await.unwrap();
        // Moving B's own rows into A is refused by the policy's WITH CHECK.
        let mut tx = TenantTx::begin(&app.pool, b.tenant_id, Scope::System).await.unwrap();
        let moved = sqlx::query(&format!("update {t} set tenant_id = $1 where tenant_id = $2"))
            .bind(a.tenant_id)
            .bind(b.tenant_id)
            .execute(&mut *tx)
            .await;
        let err = moved.expect_err(&format!("{t}: B moved a row into A")).to_string();
        assert!(err.contains("row-level security") || err.contains("foreign key"), "{t}: {err}");
    }
    // Still intact for A.
    for t in TENANT_TABLES {
        assert!(count_as(&app, a.tenant_id, t, a.tenant_id).await > 0, "{t}");
    }
}

#[tokio::test]
async fn with_no_tenant_set_every_query_sees_zero_rows() {
    let app = spawn_app().await;
    seed_everything(&app, "alpha").await;
    for t in TENANT_TABLES {
        let n: i64 = sqlx::query_scalar(&format!("select count(*) from {t}")).fetch_one(&app.pool).await.unwrap();
        assert_eq!(n, 0, "{t} visible without app.tenant_id");
        // An empty setting counts as unset.
        let mut tx = app.pool.begin().await.unwrap();
        sqlx::query("select set_config('app.tenant_id', '', true)").execute(&mut *tx).await.unwrap();
        let n: i64 = sqlx::query_scalar(&format!("select count(*) from {t}")).fetch_one(&mut *tx).await.unwrap();
        assert_eq!(n, 0, "{t} visible with an empty app.tenant_id");
    }
}

#[tokio::test]
async fn the_app_role_cannot_switch_off_rls_or_escalate() {
    let app = spawn_app().await;
    for t in TENANT_TABLES {
        for stmt in [
            format!("alter table {t} disable row level security"),
            format!("alter table {t} no force row level security"),
            format!("drop policy tenant_isolation on {t}"),
        ] {
            let err = sqlx::query(&stmt).execute(&app.pool).await.expect_err(&stmt).to_string();
            assert!(err.contains("must be owner"), "{stmt}: {err}");
        }
    }
    let err = sqlx::query(&format!("set role {OWNER_ROLE}")).execute(&app.pool).await.expect_err("set role").to_string();
    assert!(err.contains("permission denied"), "{err}");
    let (sup, bypass): (bool, bool) = sqlx::query_as("select rolsuper, rolbypassrls from pg_roles where rolname = current_user")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(!sup && !bypass);
    // And the server refuses a role that could bypass RLS (the owner owns the tables).
    let err = mnote::db::ensure_app_role_is_confined(&app.owner_pool).await.expect_err("owner role accepted");
    assert!(err.to_string().contains("owns tables"), "{err}");
    mnote::db::ensure_app_role_is_confined(&app.pool).await.expect("app role is confined");
}

#[tokio::test]
async fn no_api_input_can_forge_the_tenant() {
    let app = spawn_app().await;
    let (a, a_kb) = seed_everything(&app, "alpha").await;
    let (b, _) = seed_everything(&app, "beta").await;
    let cb = app.api(b.tenant_id, b.user_id).await;
    let a_tenant = a.tenant_id.to_string();

    // Headers, query strings and body fields naming tenant A change nothing.
    let r = cb
        .http
        .get(format!("{}/api/kbs?tenant_id={a_tenant}&tenantId={a_tenant}", app.base))
        .bearer_auth(cb.bearer.as_ref().unwrap())
        .header("x-tenant-id", &a_tenant)
        .header("x-mnote-tenant", &a_tenant)
        .send()
        .await
        .unwrap();
    let (st, list) = json_of(r).await;
    assert_eq!(st, StatusCode::OK);
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["beta kb"]);
    let (st, e) = cb.get_json(&format!("/api/kbs/{a_kb}")).await;
    assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"));
    let (st, e) = cb.get_json(&format!("/api/kbs/{a_kb}/sources")).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{e}");
    let (st, _) = cb.post_json("/api/kbs", json!({"name": "x", "tenantId": a_tenant, "tenant_id": a_tenant})).await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(count_as(&app, a.tenant_id, "kb", a.tenant_id).await, 1, "the KB landed in A");
    // A SQL-injection-shaped value is just data.
    let (st, _) = cb.post_json("/api/kbs", json!({"name": "'); select set_config('app.tenant_id', '1', false); --"})).await;
    assert_eq!(st, StatusCode::CREATED);

    // A token whose tenant part is swapped for A's is not valid anywhere.
    let tok = app.token(b.tenant_id, b.user_id).await;
    let forged = tok.replace(&b.tenant_id.simple().to_string(), &a.tenant_id.simple().to_string());
    let r = app.client().http.get(format!("{}/api/kbs", app.base)).bearer_auth(&forged).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // A's sources and grants are 404 to B.
    let ca = app.api(a.tenant_id, a.user_id).await;
    let (_, sources) = ca.get_json(&format!("/api/kbs/{a_kb}/sources")).await;
    let src = sources["items"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(cb.get_json(&format!("/api/sources/{src}")).await.0, StatusCode::NOT_FOUND);
    assert_eq!(cb.delete(&format!("/api/sources/{src}")).await, StatusCode::NOT_FOUND);
    let (_, grants) = ca.get_json("/api/grants").await;
    let gid = grants["items"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(cb.get_json(&format!("/api/grants/{gid}")).await.0, StatusCode::NOT_FOUND);
    assert_eq!(cb.delete(&format!("/api/grants/{gid}")).await, StatusCode::NOT_FOUND);
    assert_eq!(ca.get_json(&format!("/api/sources/{src}")).await.0, StatusCode::OK);
}

#[tokio::test]
async fn private_kbs_are_read_by_owner_and_members_and_only_seen_by_admins() {
    let app = spawn_app().await;
    let (a, kb) = seed_everything(&app, "alpha").await; // private; member@alpha.test was added
    let outsider = app.add_user(a.tenant_id, "outsider@alpha.test", "member").await;
    let admin = app.add_user(a.tenant_id, "admin@alpha.test", "admin").await;
    let member = app.add_user(a.tenant_id, "member@alpha.test", "member").await;

    let co = app.api(a.tenant_id, outsider).await;
    assert_eq!(co.get_json(&format!("/api/kbs/{kb}")).await.0, StatusCode::NOT_FOUND);
    let (_, list) = co.get_json("/api/kbs").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 0);
    // Even at the SQL level, as that user, and as an admin (who sees the KB row, not its
    // contents: issue 39):
    for who in [outsider, admin] {
        let mut tx = TenantTx::begin(&app.pool, a.tenant_id, Scope::User(who)).await.unwrap();
        for t in [
            "kb_folder",
            "rag_binding",
            "rag_doc",
            "source",
            "evidence_block",
            "evidence_section",
            "evidence_edge",
            "source_artifact",
            "ingest_job",
            "evidence_embedding",
            "evidence_term_stat",
            "evidence_kb_stat",
        ] {
            let n: i64 = sqlx::query_scalar(&format!("select count(*) from {t}")).fetch_one(&mut *tx).await.unwrap();
            assert_eq!(n, 0, "{t} rows of a private KB leak to a non-member");
        }
        tx.commit().await.unwrap();
    }

    let cm = app.api(a.tenant_id, member).await;
    let (st, k) = cm.get_json(&format!("/api/kbs/{kb}")).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(k["canManage"], false);
    let (st, e) = cm.send_json("PATCH", &format!("/api/kbs/{kb}"), json!({"name": "renamed"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "forbidden"));

    let cadm = app.api(a.tenant_id, admin).await;
    let (st, k) = cadm.get_json(&format!("/api/kbs/{kb}")).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        (&k["canRead"], &k["canManage"], &k["canDelete"], &k["canTransfer"]),
        (&json!(false), &json!(false), &json!(true), &json!(true)),
        "{k}"
    );
    assert_eq!(k["sourceCount"], 1, "the admin knows its size: {k}");
    assert_eq!(cadm.get_json(&format!("/api/kbs/{kb}/sources")).await.0, StatusCode::NOT_FOUND);

    // Making it a team KB opens it to everyone in the tenant.
    let ca = app.api(a.tenant_id, a.user_id).await;
    let (st, _) = ca.send_json("PATCH", &format!("/api/kbs/{kb}"), json!({"visibility": "team"})).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(co.get_json(&format!("/api/kbs/{kb}")).await.0, StatusCode::OK);
}

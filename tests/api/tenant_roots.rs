//! Per-tenant grantable roots (`tenant_root`, `mnote tenant roots`): one tenant's admin
//! cannot grant, nor keep reading through an old grant, a directory that is only another
//! tenant's root; the rows are the operator's (background scope only); MNOTE_GRANTABLE_ROOTS
//! stays the upper bound; `MNOTE_TENANT_ROOTS=open` is the opt-in old behaviour.

use mnote::{
    config::TenantRootsMode,
    db::{Scope, TenantTx},
    grants::roots,
};
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

use crate::helpers::*;

/// Replace the tenant's roots (the helpers' `bootstrap` gave it all of `docs`) by `dirs`.
async fn only_roots(app: &TestApp, tenant: Uuid, dirs: &[&str]) {
    assert!(roots::remove(&app.pool, tenant, &app.docs.to_string_lossy()).await.unwrap());
    for d in dirs {
        std::fs::create_dir_all(app.docs.join(d)).unwrap();
        let (root, added) = roots::add(&app.pool, &app.config, tenant, &app.docs_path(d)).await.unwrap();
        assert!(added && root == app.docs_path(d), "{root}");
    }
}

async fn grant(c: &Client, path: &str) -> (StatusCode, serde_json::Value) {
    c.post_json("/api/grants", json!({"path": path, "allMembers": true, "permission": "read_index"})).await
}

#[tokio::test]
async fn a_tenant_cannot_grant_or_read_another_tenants_root() {
    let app = spawn_app().await;
    let a = app.bootstrap("alpha", "owner@alpha.test").await;
    let b = app.bootstrap("beta", "owner@beta.test").await;
    let ca = app.api(a.tenant_id, a.user_id).await;
    let cb = app.api(b.tenant_id, b.user_id).await;
    app.write_doc("beta/secret.md", "# Beta secret\n\nOnly beta may read this.\n");
    app.write_doc("alpha/notes.md", "# Alpha\n");

    // Before the operator narrows alpha's roots, alpha grants beta's directory and indexes it.
    let (st, old) = grant(&ca, &app.docs_path("beta")).await;
    assert_eq!(st, StatusCode::CREATED, "{old}");
    let (_, kb) = ca.post_json("/api/kbs", json!({"name": "kb"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, src) = ca.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("beta/secret.md")})).await;
    assert!(st.is_success(), "{src}");
    app.run_jobs().await;
    let (_, list) = ca.get_json(&format!("/api/kbs/{kb}/sources")).await;
    let sid = list["items"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(ca.get(&format!("/sources/{sid}/download")).await.status(), StatusCode::OK);

    // The operator: alpha may grant docs/alpha, beta docs/beta.
    only_roots(&app, a.tenant_id, &["alpha"]).await;
    only_roots(&app, b.tenant_id, &["beta"]).await;
    assert_eq!(roots::list(&app.pool, a.tenant_id).await.unwrap(), vec![app.docs_path("alpha")]);

    // Creation: beta's root (and anything under it, or above both) is refused for alpha.
    for p in ["beta", "beta/", "alpha/../beta", ""] {
        let (st, e) = grant(&ca, &app.docs_path(p)).await;
        assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "path_outside_grant"), "{p:?}: {e}");
    }
    let (st, e) = grant(&ca, &app.docs_path("alpha")).await;
    assert_eq!(st, StatusCode::CREATED, "{e}");
    let (st, e) = grant(&cb, &app.docs_path("beta")).await;
    assert_eq!(st, StatusCode::CREATED, "{e}");

    // Access through the old grant: download, view and registering are refused ...
    for u in [format!("/sources/{sid}/download"), format!("/sources/{sid}/view")] {
        let r = ca.get(&u).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{u}");
    }
    let (st, e) = ca.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("beta/secret.md")})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "path_outside_grant"), "{e}");
    // ... and ingest marks the source stale instead of reading the file again.
    std::fs::write(app.docs.join("beta/secret.md"), "# Beta secret v2\n\nchanged\n").unwrap();
    let mut tx = TenantTx::begin(&app.pool, a.tenant_id, Scope::System).await.unwrap();
    mnote::sources::queue::enqueue(&mut tx, a.tenant_id, sid.parse().unwrap()).await.unwrap();
    tx.commit().await.unwrap();
    app.run_jobs().await;
    let (_, s) = ca.get_json(&format!("/api/sources/{sid}")).await;
    assert_eq!((s["status"].as_str(), s["error"]["code"].as_str()), (Some("stale"), Some("path_outside_grant")), "{s}");
}

#[tokio::test]
async fn roots_are_listed_added_removed_by_the_operator_only_inside_the_grantable_roots() {
    let app = spawn_app().await;
    let a = app.bootstrap("alpha", "owner@alpha.test").await;
    let ca = app.api(a.tenant_id, a.user_id).await;
    std::fs::create_dir_all(app.docs.join("team")).unwrap();
    assert_eq!(roots::list(&app.pool, a.tenant_id).await.unwrap(), vec![app.docs.to_string_lossy().into_owned()]);
    // Adding again is idempotent.
    let (_, added) = roots::add(&app.pool, &app.config, a.tenant_id, &app.docs.to_string_lossy()).await.unwrap();
    assert!(!added);

    // Outside MNOTE_GRANTABLE_ROOTS, the data dir, a missing dir: refused.
    let outside = app.docs.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let escape = format!("{}/../outside", app.docs.display());
    for (p, code) in [
        (outside.to_string_lossy().into_owned(), "path_outside_grant"),
        (escape, "path_outside_grant"),
        ("/etc".into(), "path_outside_grant"),
        (app.config.data_dir.to_string_lossy().into_owned(), "path_outside_grant"),
        (app.docs_path("missing"), "invalid_input"),
    ] {
        let e = roots::add(&app.pool, &app.config, a.tenant_id, &p).await.unwrap_err();
        assert_eq!(e.code(), code, "{p}");
    }

    // Removing the last root: strict mode grants nothing, and says which command fixes it.
    assert!(roots::remove(&app.pool, a.tenant_id, &app.docs.to_string_lossy()).await.unwrap());
    assert!(!roots::remove(&app.pool, a.tenant_id, &app.docs.to_string_lossy()).await.unwrap());
    assert!(roots::list(&app.pool, a.tenant_id).await.unwrap().is_empty());
    let (st, e) = grant(&ca, &app.docs_path("team")).await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "path_outside_grant"), "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("mnote tenant roots add"), "{e}");

    // No request can write the table, even as the tenant's owner: the policies want the
    // background scope.
    let mut tx = TenantTx::begin(&app.pool, a.tenant_id, Scope::User(a.user_id)).await.unwrap();
    let r = sqlx::query("insert into tenant_root (tenant_id, root_path) values ($1, $2)")
        .bind(a.tenant_id)
        .bind(app.docs_path("team"))
        .execute(&mut *tx)
        .await;
    assert!(r.is_err(), "a user-scope insert must be refused");
    drop(tx);
    // Another tenant's transaction cannot see or remove alpha's rows either.
    roots::add(&app.pool, &app.config, a.tenant_id, &app.docs_path("team")).await.unwrap();
    let b = app.bootstrap("beta", "owner@beta.test").await;
    assert!(!roots::remove(&app.pool, b.tenant_id, &app.docs_path("team")).await.unwrap());
    assert_eq!(roots::list(&app.pool, a.tenant_id).await.unwrap(), vec![app.docs_path("team")]);
    let (st, e) = grant(&ca, &app.docs_path("team")).await;
    assert_eq!(st, StatusCode::CREATED, "{e}");
}

#[tokio::test]
async fn open_mode_keeps_the_shared_allow_list_for_tenants_without_roots() {
    let app = spawn_app_with(|c| c.tenant_roots = TenantRootsMode::Open).await;
    let a = app.bootstrap("alpha", "owner@alpha.test").await;
    let ca = app.api(a.tenant_id, a.user_id).await;
    std::fs::create_dir_all(app.docs.join("team")).unwrap();
    roots::remove(&app.pool, a.tenant_id, &app.docs.to_string_lossy()).await.unwrap();
    let (st, e) = grant(&ca, &app.docs_path("team")).await;
    assert_eq!(st, StatusCode::CREATED, "{e}");
    let (st, e) = grant(&ca, "/etc").await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "path_outside_grant"), "{e}");
}

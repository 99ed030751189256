//! Admin-issued password reset links (issue 44 item 5): a link works once, for 24 hours, sets
//! the password, signs every session of the account out and is audited; who may issue one
//! and for whom is limited, since the admin sees the link.

use mnote::db::{Scope, TenantTx};
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

use crate::helpers::*;

const NEW: &str = "a brand new passphrase";

/// The path of a reset link from the API's answer.
fn reset_path(v: &serde_json::Value) -> String {
    let url = v["resetUrl"].as_str().unwrap_or_else(|| panic!("no link: {v}"));
    format!("/reset/{}", url.rsplit("/reset/").next().unwrap())
}

async fn audit_count(app: &TestApp, tenant: Uuid, action: &str) -> i64 {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let n: i64 = sqlx::query_scalar("select count(*) from audit_event where tenant_id = $1 and action = $2")
        .bind(tenant)
        .bind(action)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    n
}

#[tokio::test]
async fn a_reset_link_sets_the_password_once_and_signs_every_session_out() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let bob = app.add_user(s.tenant_id, "bob@acme.test", "member").await;
    let mut bobs_browser = app.login("bob@acme.test").await;
    let (st, _) = bobs_browser.page("/").await;
    assert_eq!(st, StatusCode::OK);

    let admin = app.api(s.tenant_id, s.user_id).await;
    let (st, v) = admin.post_json(&format!("/api/members/{bob}/password-reset"), json!({})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["email"], "bob@acme.test");
    let path = reset_path(&v);
    assert_eq!(audit_count(&app, s.tenant_id, "member.reset_link").await, 1);

    let mut person = app.client();
    let (st, html) = person.page(&path).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("bob@acme.test") && html.contains("Set the password"), "{html}");
    // Two different passwords, or a short one, are refused on the page; the link still works.
    let r = person.post_form(&path, &[("password", NEW), ("confirm_password", "something else entirely")]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let r = person.post_form(&path, &[("password", "short"), ("confirm_password", "short")]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let r = person.post_form(&path, &[("password", NEW), ("confirm_password", NEW)]).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().contains("Sign in with the new password"));
    assert_eq!(audit_count(&app, s.tenant_id, "password.reset").await, 1);

    // Bob's session from before is signed out; the old password is gone, the new one works.
    let r = bobs_browser.get("/").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "the old session is signed out");
    assert_eq!(app.client().login("bob@acme.test", PASSWORD).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(app.client().login("bob@acme.test", NEW).await.status(), StatusCode::SEE_OTHER);

    // Once only.
    let (st, html) = person.page(&path).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(html.contains("does not work"), "{html}");
    let r =
        person.post_form(&path, &[("password", "yet another passphrase"), ("confirm_password", "yet another passphrase")]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(app.client().login("bob@acme.test", NEW).await.status(), StatusCode::SEE_OTHER);
    assert_eq!(audit_count(&app, s.tenant_id, "password.reset").await, 1);
}

#[tokio::test]
async fn reset_links_expire_are_replaced_and_are_only_for_accounts_the_team_alone_holds() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let t = s.tenant_id;
    let bob = app.add_user(t, "bob@acme.test", "member").await;
    let admin_id = app.add_user(t, "ann@acme.test", "admin").await;
    let co_owner = app.add_user(t, "co@acme.test", "owner").await;
    let other = app.bootstrap("globex", "owner@globex.test").await;
    let shared = app.add_user(t, "shared@acme.test", "member").await;
    app.add_user(other.tenant_id, "shared@acme.test", "member").await;
    let owner = app.api(t, s.user_id).await;
    let ann = app.api(t, admin_id).await;
    let member = app.api(t, bob).await;

    let issue = async |c: &Client, user: Uuid| c.post_json(&format!("/api/members/{user}/password-reset"), json!({})).await;
    let (st, v) = issue(&member, admin_id).await;
    assert_eq!((st, error_code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "a member issues none: {v}");
    let (st, v) = issue(&ann, admin_id).await;
    assert_eq!((st, error_code(&v)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "not for oneself: {v}");
    let (st, v) = issue(&ann, co_owner).await;
    assert_eq!((st, error_code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "an admin resets no owner: {v}");
    let (st, v) = issue(&owner, shared).await;
    assert_eq!((st, error_code(&v)), (StatusCode::CONFLICT, "conflict"), "an account another team holds too: {v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("another team"), "{v}");
    let (st, v) = issue(&owner, other.user_id).await;
    assert_eq!((st, error_code(&v)), (StatusCode::NOT_FOUND, "not_found"), "not a member here: {v}");
    assert_eq!(audit_count(&app, t, "member.reset_link").await, 0);

    // A newer link replaces the older one.
    let (st, first) = issue(&owner, co_owner).await;
    assert_eq!(st, StatusCode::CREATED, "{first}");
    let (st, second) = issue(&owner, co_owner).await;
    assert_eq!(st, StatusCode::CREATED, "{second}");
    let mut c = app.client();
    assert_eq!(c.page(&reset_path(&first)).await.0, StatusCode::NOT_FOUND);
    assert_eq!(c.page(&reset_path(&second)).await.0, StatusCode::OK);

    // Past its time it is refused with its own message, and changes nothing.
    let mut tx = TenantTx::begin(&app.pool, t, Scope::System).await.unwrap();
    sqlx::query("update password_reset set expires_at = now() - interval '1 second' where tenant_id = $1")
        .bind(t)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let (st, html) = c.page(&reset_path(&second)).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(html.contains("has expired"), "{html}");
    let r = c.post_form(&reset_path(&second), &[("password", NEW), ("confirm_password", NEW)]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(app.client().login("co@acme.test", PASSWORD).await.status(), StatusCode::SEE_OTHER);

    // The Members page: the button, and the link shown once.
    let mut page = app.login("owner@acme.test").await;
    let (_, html) = page.page("/admin/members").await;
    assert!(html.contains(&format!("/admin/members/{bob}/reset-link")), "{html}");
    let r = page.post_form(&format!("/admin/members/{bob}/reset-link"), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = page.page("/admin/members").await;
    assert!(html.contains("Password reset link") && html.contains("/reset/"), "{html}");
    let (_, html) = page.page("/admin/members").await;
    assert!(!html.contains("/reset/"), "shown once");
    let r = page.post_form(&format!("/admin/members/{shared}/reset-link"), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = page.page("/admin/members").await;
    assert!(html.contains("another team"), "the refusal as a notice: {html}");
}

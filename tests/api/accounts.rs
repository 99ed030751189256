//! Sessions, CSRF, rate limiting, API tokens, /setup and tenant choice.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

fn session_cookie(r: &reqwest::Response) -> Option<String> {
    cookie(r, "mnote_session=")
}

fn cookie(r: &reqwest::Response, prefix: &str) -> Option<String> {
    r.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()).find(|v| v.starts_with(prefix)).map(String::from)
}

/// An anonymous session: a visitor who chose a language (the login page alone stores none).
async fn anonymous_session(c: &Client) -> reqwest::Response {
    let csrf = csrf_from_html(&c.get("/login").await.text().await.unwrap()).unwrap();
    let r = c.http.post(format!("{}/language", c.base)).form(&[("lang", "en"), ("next", "/login"), ("csrf_token", &csrf)]);
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::SEE_OTHER);
    r
}

#[tokio::test]
async fn login_sets_a_hardened_cookie_and_rotates_the_session_id() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let c = app.client();
    let r = c.get("/login").await;
    assert_eq!(session_cookie(&r), None, "an anonymous page view starts no session (#14 item 11)");
    let token_cookie = cookie(&r, "mnote_csrf=").expect("the form's token travels in a cookie");
    assert!(token_cookie.contains("HttpOnly") && token_cookie.contains("SameSite=Strict"), "{token_cookie}");
    assert!(!token_cookie.contains("Secure"), "plain HTTP test server must not set Secure: {token_cookie}");
    let r = anonymous_session(&c).await;
    let before = session_cookie(&r).expect("a stored preference starts a session");
    assert!(before.contains("HttpOnly") && before.contains("SameSite=Lax"), "{before}");
    assert!(!before.contains("Secure"), "plain HTTP test server must not set Secure: {before}");
    let csrf = csrf_from_html(&c.get("/login").await.text().await.unwrap()).unwrap();
    let r = c
        .http
        .post(format!("{}/login", app.base))
        .form(&[("email", "owner@acme.test"), ("password", PASSWORD), ("csrf_token", &csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let after = session_cookie(&r).expect("login sets a new session cookie");
    let id = |c: &str| c.split(';').next().unwrap().to_string();
    assert_ne!(id(&before), id(&after), "session id must change at login");
    let (st, me) = c.get_json("/api/session").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(me["user"]["email"], "owner@acme.test");
    assert_eq!(me["role"], "owner");

    // Logout ends it.
    let mut c = c;
    c.page("/").await;
    let r = c.post_form("/logout", &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(c.get_json("/api/session").await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn secure_cookie_when_configured_for_tls() {
    let app = spawn_app_with(|c| c.cookie_secure = true).await;
    app.bootstrap("acme", "owner@acme.test").await;
    let c = app.client();
    let r = c.get("/login").await;
    let token_cookie = cookie(&r, "mnote_csrf=").unwrap();
    assert!(token_cookie.contains("Secure"), "{token_cookie}");
    // The client's cookie store keeps Secure cookies off plain HTTP: send the cookie by hand.
    let csrf = csrf_from_html(&r.text().await.unwrap()).unwrap();
    let r = c
        .http
        .post(format!("{}/login", app.base))
        .header("cookie", token_cookie.split(';').next().unwrap())
        .form(&[("email", "owner@acme.test"), ("password", PASSWORD), ("csrf_token", &csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(session_cookie(&r).unwrap().contains("Secure"));
}

#[tokio::test]
async fn wrong_password_is_refused_with_a_clear_message() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let r = app.client().login("owner@acme.test", "not the password").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("Wrong email or password"));
    let r = app.client().login("nobody@acme.test", "whatever-password").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn state_changing_requests_with_a_cookie_need_the_csrf_token() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let c = app.login("owner@acme.test").await;
    // JSON without the header:
    let (st, e) = c.post_json("/api/kbs", json!({"name": "no token"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "csrf_failed"));
    // A form without the field gets an HTML error page.
    let r = c.post_form("/kbs", &[("name", "no token"), ("visibility", "team")]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    // A wrong token:
    let r = c.post_form("/kbs", &[("name", "bad"), ("visibility", "team"), ("csrf_token", "forged")]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // The session's token works, as header or form field.
    let mut c = c.with_csrf().await;
    let (st, _) = c.post_json("/api/kbs", json!({"name": "with header"})).await;
    assert_eq!(st, StatusCode::CREATED);
    c.page("/").await;
    let r = c.post_form("/kbs", &[("name", "with field"), ("visibility", "team")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // Nothing was created by the refused requests.
    let (_, list) = c.get_json("/api/kbs").await;
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["with field", "with header"]);
    // The login form itself is protected too.
    let r = app
        .client()
        .http
        .post(format!("{}/login", app.base))
        .form(&[("email", "owner@acme.test"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn bearer_requests_are_exempt_from_csrf_and_bad_tokens_get_401() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let (st, kb) = c.post_json("/api/kbs", json!({"name": "via token"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    assert_eq!(kb["visibility"], "team");

    for bad in ["", "nonsense", "mnote_0000_abc", &format!("mnote_{}_{}", s.tenant_id.simple(), "x".repeat(43))] {
        let r = app
            .client()
            .http
            .get(format!("{}/api/kbs", app.base))
            .header("authorization", format!("Bearer {bad}"))
            .send()
            .await
            .unwrap();
        let (st, e) = json_of(r).await;
        assert_eq!((st, error_code(&e)), (StatusCode::UNAUTHORIZED, "unauthorized"), "{bad:?}");
    }
    let (st, e) = app.client().get_json("/api/kbs").await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNAUTHORIZED, "unauthorized"));
}

#[tokio::test]
async fn api_tokens_are_shown_once_stored_hashed_tracked_and_revocable() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.login("owner@acme.test").await.with_csrf().await;
    let (st, created) = c.post_json("/api/tokens", json!({"name": "agent"})).await;
    assert_eq!(st, StatusCode::CREATED, "{created}");
    let plain = created["token"].as_str().unwrap().to_string();
    assert!(plain.starts_with("mnote_"));
    // Not stored in plaintext.
    let stored: Vec<String> =
        sqlx::query_scalar("select token_hash from api_token").fetch_all(&app.owner_pool).await.unwrap_or_default();
    let mut tx = mnote::db::TenantTx::begin(&app.pool, s.tenant_id, mnote::db::Scope::System).await.unwrap();
    let hashes: Vec<String> = sqlx::query_scalar("select token_hash from api_token").fetch_all(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    assert!(stored.is_empty(), "the owner role is subject to forced RLS too");
    assert_eq!(hashes.len(), 1);
    assert_ne!(hashes[0], plain);
    assert!(!hashes[0].contains(&plain[10..]));

    let (_, list) = c.get_json("/api/tokens").await;
    assert!(list["items"][0].get("token").is_none(), "the plaintext is never listed");
    assert!(list["items"][0]["lastUsedAt"].is_null());

    let mut t = app.client();
    t.bearer = Some(plain.clone());
    assert_eq!(t.get_json("/api/kbs").await.0, StatusCode::OK);
    let (_, list) = c.get_json("/api/tokens").await;
    assert!(list["items"][0]["lastUsedAt"].is_string(), "last use recorded");

    let id = created["id"].as_str().unwrap();
    assert_eq!(c.delete(&format!("/api/tokens/{id}")).await, StatusCode::NO_CONTENT);
    assert_eq!(t.get_json("/api/kbs").await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(c.delete(&format!("/api/tokens/{id}")).await, StatusCode::NOT_FOUND);
}

/// Issue 31 item 7: a token could mint tokens without a cap (300 in 2.4 s). A member holds at
/// most `MAX_LIVE_PER_USER` live tokens; the next is `429 too_many_tokens`, concurrent
/// requests cannot race past the cap, and revoking one makes room again.
#[tokio::test]
async fn a_member_holds_a_bounded_number_of_live_tokens() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let cap = 50; // mnote::auth::tokens::MAX_LIVE_PER_USER
    let minter = app.api(s.tenant_id, s.user_id).await; // live token number 1
    // Everything at once: the cap holds under concurrency.
    let tries =
        futures_util::future::join_all((0..cap + 5).map(|i| minter.post_json("/api/tokens", json!({"name": format!("t{i}")}))))
            .await;
    let created: Vec<&Value> = tries.iter().filter(|(st, _)| *st == StatusCode::CREATED).map(|(_, v)| v).collect();
    assert_eq!(created.len(), cap - 1, "one token existed already");
    for (st, v) in tries.iter().filter(|(st, _)| *st != StatusCode::CREATED) {
        assert_eq!((*st, error_code(v)), (StatusCode::TOO_MANY_REQUESTS, "too_many_tokens"), "{v}");
    }
    // A browser form gets the same refusal, on the page.
    let c = app.login("owner@acme.test").await.with_csrf().await;
    let (st, v) = c.post_json("/api/tokens", json!({"name": "one more"})).await;
    assert_eq!((st, error_code(&v)), (StatusCode::TOO_MANY_REQUESTS, "too_many_tokens"), "{v}");
    // Revoking one makes room for exactly one.
    let id = created[0]["id"].as_str().unwrap();
    assert_eq!(c.delete(&format!("/api/tokens/{id}")).await, StatusCode::NO_CONTENT);
    assert_eq!(c.post_json("/api/tokens", json!({"name": "replacement"})).await.0, StatusCode::CREATED);
    assert_eq!(c.post_json("/api/tokens", json!({"name": "too many"})).await.0, StatusCode::TOO_MANY_REQUESTS);
    // Another member is not affected.
    let m = app.add_user(s.tenant_id, "member@acme.test", "member").await;
    assert_eq!(app.api(s.tenant_id, m).await.post_json("/api/tokens", json!({"name": "mine"})).await.0, StatusCode::CREATED);
}

#[tokio::test]
async fn login_is_rate_limited_per_account_and_per_address() {
    let app = spawn_app_with(|c| c.login_max_failures = 3).await;
    app.bootstrap("acme", "owner@acme.test").await;
    for _ in 0..3 {
        let r = app.client().login("owner@acme.test", "wrong password!").await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    // Now even the right password is refused, with a clear message and Retry-After.
    let r = app.client().login("owner@acme.test", PASSWORD).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = r.text().await.unwrap();
    assert!(body.contains("Too many failed sign-in attempts"), "{body}");

    // Per address: many different accounts from one client address.
    let app = spawn_app_with(|c| c.login_max_failures = 2).await;
    app.bootstrap("acme", "owner@acme.test").await;
    for i in 0..8 {
        let r = app.client().login(&format!("user{i}@acme.test"), "wrong password!").await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "attempt {i}");
    }
    let r = app.client().login("owner@acme.test", PASSWORD).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "address limit (4 × per-account) not applied");
}

#[tokio::test]
async fn sessions_expire_after_the_absolute_lifetime() {
    let app = spawn_app_with(|c| c.session_absolute = std::time::Duration::from_secs(1)).await;
    app.bootstrap("acme", "owner@acme.test").await;
    let c = app.login("owner@acme.test").await;
    assert_eq!(c.get_json("/api/session").await.0, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (st, e) = c.get_json("/api/session").await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    // A browser page redirects to the login form, keeping where the user was going.
    let r = c.get("/admin/members").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/login?next=%2Fadmin%2Fmembers");
}

#[tokio::test]
async fn sessions_expire_when_idle() {
    let app = spawn_app_with(|c| c.session_idle = std::time::Duration::from_secs(1)).await;
    app.bootstrap("acme", "owner@acme.test").await;
    let c = app.login("owner@acme.test").await;
    assert_eq!(c.get_json("/api/session").await.0, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    assert_eq!(c.get_json("/api/session").await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn first_run_setup_works_once() {
    let app = spawn_app().await;
    let mut c = app.client();
    let r = c.get("/login").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/setup");
    let (st, html) = c.page("/setup").await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("name=\"tenant\""));
    let r = c.post_form("/setup", &[("tenant", "First Team"), ("email", "me@first.test"), ("password", "short")]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let r = c.post_form("/setup", &[("tenant", "First Team"), ("email", "me@first.test"), ("password", PASSWORD)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (st, me) = c.get_json("/api/session").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(me["tenant"]["name"], "First Team");
    assert_eq!(me["role"], "owner");
    // Closed afterwards, for everyone: it points to sign-in, which says why.
    let mut other = app.client();
    let r = other.get("/setup").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/login?setup=done");
    let (_, html) = other.page("/login?setup=done").await;
    assert!(html.contains("name=\"password\""));
    assert!(html.contains("This server is already set up"), "{html}");
    let r = other.post_form("/setup", &[("tenant", "Evil"), ("email", "evil@x.test"), ("password", PASSWORD)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/login?setup=done");
    assert!(mnote::auth::directory::user_by_email(&app.pool, "evil@x.test").await.unwrap().is_none());
}

#[tokio::test]
async fn setup_form_errors_are_inline_and_translated() {
    let app = spawn_app().await;
    let mut c = app.client();
    c.page("/setup").await;
    // A missing field is the form's message, not a bare 422 from the form parser.
    let r = c.post_form("/setup", &[("tenant", "First Team"), ("email", "me@first.test")]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.unwrap();
    assert!(html.contains("The password must be at least 10 characters.") && html.contains("name=\"tenant\""), "{html}");
    assert!(html.contains("value=\"First Team\""), "typed values are kept");
    // In Chinese when the visitor reads Chinese.
    let r = c
        .http
        .post(format!("{}/setup", c.base))
        .header("accept-language", "zh-CN")
        .form(&[("tenant", "团队"), ("email", "bad"), ("password", PASSWORD), ("csrf_token", c.csrf.as_deref().unwrap())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("邮箱地址无效。"));
}

#[tokio::test]
async fn a_user_in_several_tenants_picks_one_and_can_switch() {
    let app = spawn_app().await;
    let a = app.bootstrap("alpha", "owner@alpha.test").await;
    let b = app.bootstrap("beta", "owner@beta.test").await;
    app.add_user(b.tenant_id, "owner@alpha.test", "member").await;
    let _ = a;
    let mut c = app.client();
    let r = c.login("owner@alpha.test", PASSWORD).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(r.headers()["location"].to_str().unwrap().starts_with("/tenants"));
    // No tenant yet: pages send the user to the picker, the API says so.
    let r = c.get("/").await;
    assert_eq!(r.headers()["location"], "/tenants");
    let (_, html) = c.page("/tenants").await;
    assert!(html.contains("alpha") && html.contains("beta"));
    let r = c.post_form("/tenants/switch", &[("tenant_id", &b.tenant_id.to_string())]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, me) = c.get_json("/api/session").await;
    assert_eq!((me["tenant"]["name"].as_str(), me["role"].as_str()), (Some("beta"), Some("member")));
    let r = c.post_form("/tenants/switch", &[("tenant_id", &a.tenant_id.to_string())]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, me) = c.get_json("/api/session").await;
    assert_eq!((me["tenant"]["name"].as_str(), me["role"].as_str()), (Some("alpha"), Some("owner")));
    // A tenant the user does not belong to cannot be chosen.
    let other = app.bootstrap("gamma", "owner@gamma.test").await;
    let r = c.post_form("/tenants/switch", &[("tenant_id", &other.tenant_id.to_string())]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn members_and_roles_are_managed_by_admins_only() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let owner = app.api(s.tenant_id, s.user_id).await;
    // Adding invites; the new account joins through the link (tests/api/invitations.rs).
    let member_id = crate::invitations::invite_and_accept(&app, &owner, "new@acme.test", "member").await;
    let member = app.api(s.tenant_id, member_id).await;
    let (st, e) = member.post_json("/api/members", json!({"email": "x@acme.test", "role": "admin"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "forbidden"));
    let (st, e) = owner.post_json("/api/members", json!({"email": "bad", "role": "member"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"));
    assert_eq!(e["error"]["fields"]["email"], "not a valid email address");
    // The last owner cannot be demoted.
    let (st, e) = owner.send_json("PATCH", &format!("/api/members/{}", s.user_id), json!({"role": "member"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::CONFLICT, "conflict"));
    let (st, m) = owner.send_json("PATCH", &format!("/api/members/{member_id}"), json!({"role": "admin"})).await;
    assert_eq!((st, m["role"].as_str()), (StatusCode::OK, Some("admin")));
    assert_eq!(owner.delete(&format!("/api/members/{member_id}")).await, StatusCode::NO_CONTENT);
    // Removed members lose access at once, even with a token.
    assert_eq!(member.get_json("/api/kbs").await.0, StatusCode::UNAUTHORIZED);
}

/// The account's password change: the current password is required, the other sessions of
/// the account are signed out (the one that changed it stays), the old password stops working.
#[tokio::test]
async fn a_user_changes_their_password_and_other_sessions_are_signed_out() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let mut here = app.login("owner@acme.test").await;
    let elsewhere = app.login("owner@acme.test").await;
    let token = app.token(s.tenant_id, s.user_id).await;
    assert_eq!(elsewhere.get_json("/api/session").await.0, StatusCode::OK);

    // Wrong current password: the same page, the message inline, nothing changed.
    let (st, html) = here.page("/settings/account").await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("name=\"current_password\"") && html.contains("class=\"mainnav"), "{html}");
    let new_pw = "a brand new passphrase";
    let r = here
        .post_form(
            "/settings/account/password",
            &[("current_password", "not it at all"), ("new_password", new_pw), ("confirm_password", new_pw)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.unwrap();
    assert!(html.contains("Your current password is not right.") && html.contains("class=\"mainnav"), "{html}");
    // Mismatched confirmation and a too-short password are inline too.
    let r = here
        .post_form(
            "/settings/account/password",
            &[("current_password", PASSWORD), ("new_password", new_pw), ("confirm_password", "x")],
        )
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("The two passwords differ."));
    let r = here
        .post_form(
            "/settings/account/password",
            &[("current_password", PASSWORD), ("new_password", "short"), ("confirm_password", "short")],
        )
        .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("at least 10 characters"));
    assert_eq!(elsewhere.get_json("/api/session").await.0, StatusCode::OK, "failed attempts sign nobody out");

    // The change.
    let r = here
        .post_form(
            "/settings/account/password",
            &[("current_password", PASSWORD), ("new_password", new_pw), ("confirm_password", new_pw)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/settings/account");
    let (st, html) = here.page("/settings/account").await;
    assert_eq!(st, StatusCode::OK, "the session that changed it stays signed in");
    assert!(html.contains("Password changed."));
    assert_eq!(here.get_json("/api/session").await.0, StatusCode::OK);
    // The other session is signed out: its pages go to sign-in, its API calls are 401.
    assert_eq!(elsewhere.get_json("/api/session").await.0, StatusCode::UNAUTHORIZED);
    let r = elsewhere.get("/").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(r.headers()["location"].to_str().unwrap().starts_with("/login"));
    // API tokens are not sessions: they keep working.
    let mut api = app.client();
    api.bearer = Some(token);
    assert_eq!(api.get_json("/api/session").await.0, StatusCode::OK);
    // Old password refused, new one accepted.
    assert_eq!(app.client().login("owner@acme.test", PASSWORD).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(app.client().login("owner@acme.test", new_pw).await.status(), StatusCode::SEE_OTHER);

    // The API: same rules, stable codes.
    let c = app.client();
    assert_eq!(c.login("owner@acme.test", new_pw).await.status(), StatusCode::SEE_OTHER);
    let c = c.with_csrf().await;
    let (st, e) = c
        .post_json("/api/account/password", json!({"currentPassword": "wrong one!!", "newPassword": "another passphrase"}))
        .await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{e}");
    assert_eq!(e["error"]["fields"]["current_password"], "the current password is not right");
    let (st, _) =
        c.post_json("/api/account/password", json!({"currentPassword": new_pw, "newPassword": "another passphrase"})).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    assert_eq!(c.get_json("/api/session").await.0, StatusCode::OK);
    assert_eq!(here.get_json("/api/session").await.0, StatusCode::UNAUTHORIZED, "the page session is signed out now");
}

/// Tokens may expire: an expired token is refused with `token_expired`, the list says so.
#[tokio::test]
async fn api_tokens_can_expire_and_expired_ones_are_refused_with_a_stable_code() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let owner = app.api(s.tenant_id, s.user_id).await;
    let (st, v) = owner.post_json("/api/tokens", json!({"name": "short-lived", "expiresInDays": 7})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let expires: chrono::DateTime<chrono::Utc> = serde_json::from_value(v["expiresAt"].clone()).unwrap();
    let days = (expires - chrono::Utc::now()).num_hours();
    assert!((7 * 24 - 1..=7 * 24).contains(&days), "{days} hours");
    let plain = v["token"].as_str().unwrap().to_string();
    let mut c = app.client();
    c.bearer = Some(plain.clone());
    assert_eq!(c.get_json("/api/session").await.0, StatusCode::OK);
    for bad in [json!(0), json!(-3), json!(100000), json!("x")] {
        let (st, e) = owner.post_json("/api/tokens", json!({"name": "bad", "expiresInDays": bad})).await;
        assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{bad}: {e}");
    }
    let (st, v) = owner.post_json("/api/tokens", json!({"name": "forever"})).await;
    assert_eq!(st, StatusCode::CREATED);
    assert!(v["expiresAt"].is_null());

    // Time passes (the row's expiry moves into the past).
    let mut tx = mnote::db::TenantTx::begin(&app.pool, s.tenant_id, mnote::db::Scope::User(s.user_id)).await.unwrap();
    let n = sqlx::query("update api_token set expires_at = now() - interval '1 second' where token_hash = $1")
        .bind(mnote::auth::tokens::hash(&plain))
        .execute(&mut *tx)
        .await
        .unwrap()
        .rows_affected();
    tx.commit().await.unwrap();
    assert_eq!(n, 1);
    let (st, e) = c.get_json("/api/session").await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNAUTHORIZED, "token_expired"), "{e}");
    // Also for a state-changing call (not a CSRF failure) and on a page URL (JSON, not a redirect).
    let (st, e) = c.post_json("/api/tokens", json!({"name": "x"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNAUTHORIZED, "token_expired"), "{e}");
    let r = c.get("/settings/tokens").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // An unknown token stays `unauthorized`.
    c.bearer = Some(format!("{plain}x"));
    assert_eq!(error_code(&c.get_json("/api/session").await.1), "unauthorized");

    // The page: expiry choice, the expired token marked, the new one with a copy button.
    let mut page = app.login("owner@acme.test").await;
    let (_, html) = page.page("/settings/tokens").await;
    assert!(html.contains("name=\"expires\"") && html.contains(">expired<"), "{html}");
    let r = page.post_form("/settings/tokens", &[("name", "cli"), ("expires", "30")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = page.page("/settings/tokens").await;
    assert!(html.contains("data-copy=\"#new-token\""), "{html}");
    let doc = scraper::Html::parse_document(&html);
    let shown = doc.select(&scraper::Selector::parse("#new-token").unwrap()).next().unwrap().text().collect::<String>();
    let mut c = app.client();
    c.bearer = Some(shown.trim().to_string());
    assert_eq!(c.get_json("/api/session").await.0, StatusCode::OK);
    // A bad label: inline, translated, navigation kept.
    let r = page.post_form("/settings/tokens", &[("name", "  "), ("expires", "never")]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.unwrap();
    assert!(html.contains("Give the token a label") && html.contains("class=\"mainnav"), "{html}");
}

/// Signed-in pages and API answers are never stored by the browser (Back after sign-out).
#[tokio::test]
async fn signed_in_pages_are_not_stored() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let c = app.login("owner@acme.test").await;
    for path in ["/", "/search?q=x", "/settings/tokens", "/settings/account", "/admin/members", "/admin/grants", "/nope"] {
        let r = c.get(path).await;
        assert_eq!(r.headers().get("cache-control").and_then(|v| v.to_str().ok()), Some("no-store"), "{path}: {:?}", r.status());
    }
    let r = c.get("/api/session").await;
    assert_eq!(r.headers()["cache-control"], "no-store");
    // Static assets stay cacheable.
    let r = c.get("/static/app.css").await;
    assert!(r.headers()["cache-control"].to_str().unwrap().contains("max-age"));
    // The tab icon: linked from every page, and where browsers look without the link.
    let (_, html) = c.clone().page("/").await;
    assert!(html.contains("<link rel=\"icon\" href=\"/static/favicon.svg\""), "{html}");
    for path in ["/static/favicon.svg", "/favicon.ico"] {
        let r = app.client().get(path).await;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.headers()["content-type"], "image/svg+xml", "{path}");
        assert!(r.text().await.unwrap().starts_with("<svg"), "{path}");
    }
}

//! Issue 31 item 2 (the password oracle) and item 11's lockout: the current-password check of
//! `POST /api/account/password` is under the sign-in limit and needs a browser session, and
//! an attacker at one address cannot lock the owner out from another.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

const OWNER: &str = "owner@acme.test";
const NEW: &str = "a brand new passphrase";

/// Whether `pw` is the account's password now (straight from the stored hash, counting no
/// attempt against any limit).
async fn password_is(app: &TestApp, email: &str, pw: &str) -> bool {
    let u = mnote::auth::directory::user_by_email(&app.pool, email).await.unwrap().unwrap();
    mnote::auth::password::verify(pw.to_string(), Some(u.password_hash)).await.unwrap()
}

#[tokio::test]
async fn a_password_cannot_be_changed_with_an_api_token() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", OWNER).await;
    let t = app.api(s.tenant_id, s.user_id).await;
    // Wrong guesses and the right one alike: refused before any check, so no oracle.
    for current in ["guess one", "guess two", PASSWORD] {
        let (st, e) = t.post_json("/api/account/password", json!({"currentPassword": current, "newPassword": NEW})).await;
        assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "forbidden"), "{current}: {e}");
        assert!(e["error"]["message"].as_str().unwrap().contains("sign in in the browser"), "{e}");
    }
    // Nor through the account page's form.
    let r = t
        .req(reqwest::Method::POST, "/settings/account/password")
        .form(&[("current_password", PASSWORD), ("new_password", NEW), ("confirm_password", NEW)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(password_is(&app, OWNER, PASSWORD).await && !password_is(&app, OWNER, NEW).await, "the password changed");
    // The session way still works.
    let c = app.login(OWNER).await.with_csrf().await;
    let (st, e) = c.post_json("/api/account/password", json!({"currentPassword": PASSWORD, "newPassword": NEW})).await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{e}");
    assert!(password_is(&app, OWNER, NEW).await);
}

#[tokio::test]
async fn wrong_current_passwords_are_limited_together_with_sign_in() {
    let app = spawn_app_with(|c| c.login_max_failures = 3).await;
    app.bootstrap("acme", OWNER).await;
    let c = app.login(OWNER).await.with_csrf().await;
    for i in 0..3 {
        let (st, e) =
            c.post_json("/api/account/password", json!({"currentPassword": format!("guess {i}"), "newPassword": NEW})).await;
        assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "guess {i}: {e}");
    }
    // Over the limit: the right password is refused too, with Retry-After, and nothing changes.
    let r = c
        .req(reqwest::Method::POST, "/api/account/password")
        .json(&json!({"currentPassword": PASSWORD, "newPassword": NEW}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().contains_key("retry-after"));
    let (_, e) = json_of(r).await;
    assert_eq!(error_code(&e), "rate_limited", "{e}");
    assert!(password_is(&app, OWNER, PASSWORD).await && !password_is(&app, OWNER, NEW).await, "the password changed");
    // One budget: sign-in from the same address is locked as well.
    assert_eq!(app.client().login(OWNER, PASSWORD).await.status(), StatusCode::TOO_MANY_REQUESTS);

    // And the other way round: wrong sign-ins use up the password check's budget.
    let app = spawn_app_with(|c| c.login_max_failures = 3).await;
    app.bootstrap("acme", OWNER).await;
    let c = app.login(OWNER).await.with_csrf().await;
    for _ in 0..3 {
        assert_eq!(app.client().login(OWNER, "wrong password!").await.status(), StatusCode::UNAUTHORIZED);
    }
    let (st, e) = c.post_json("/api/account/password", json!({"currentPassword": PASSWORD, "newPassword": NEW})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::TOO_MANY_REQUESTS, "rate_limited"), "{e}");
    assert!(password_is(&app, OWNER, PASSWORD).await);
}

/// Sign in from client address `ip` (the server trusts `X-Forwarded-For` here).
async fn login_from(app: &TestApp, ip: &str, email: &str, pw: &str) -> StatusCode {
    let c = app.client();
    let html = c.http.get(format!("{}/login", app.base)).header("x-forwarded-for", ip).send().await.unwrap();
    let csrf = csrf_from_html(&html.text().await.unwrap()).expect("CSRF token");
    c.http
        .post(format!("{}/login", app.base))
        .header("x-forwarded-for", ip)
        .form(&[("email", email), ("password", pw), ("csrf_token", &csrf)])
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn guessing_from_one_address_does_not_lock_the_owner_out_from_another() {
    let app = spawn_app_with(|c| {
        c.trust_proxy = true;
        c.login_max_failures = 2;
    })
    .await;
    app.bootstrap("acme", OWNER).await;
    let attacker = "203.0.113.7";
    for _ in 0..2 {
        assert_eq!(login_from(&app, attacker, OWNER, "wrong password!").await, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(login_from(&app, attacker, OWNER, PASSWORD).await, StatusCode::TOO_MANY_REQUESTS, "attacker not limited");
    // The owner, from another address, signs in with the right password.
    assert_eq!(login_from(&app, "198.51.100.2", OWNER, PASSWORD).await, StatusCode::SEE_OTHER, "the owner is locked out");
    // The owner's success gives the attacker's address no new budget.
    assert_eq!(login_from(&app, attacker, OWNER, "wrong password!").await, StatusCode::TOO_MANY_REQUESTS);
    // Another account from the attacker's address still has its own budget.
    app.add_user(app_tenant(&app).await, "bob@acme.test", "member").await;
    assert_eq!(login_from(&app, attacker, "bob@acme.test", PASSWORD).await, StatusCode::SEE_OTHER);
}

async fn app_tenant(app: &TestApp) -> uuid::Uuid {
    mnote::auth::directory::tenant_by_name(&app.pool, "acme").await.unwrap().unwrap()
}

/// The backstop: from many addresses, an account takes at most 10 × `MNOTE_LOGIN_MAX_FAILURES`
/// failures per window; then it waits, whoever signs in from wherever.
#[tokio::test]
async fn distributed_guessing_is_still_capped_per_account() {
    let app = spawn_app_with(|c| {
        c.trust_proxy = true;
        c.login_max_failures = 2;
    })
    .await;
    app.bootstrap("acme", OWNER).await;
    for i in 0..10 {
        for _ in 0..2 {
            let st = login_from(&app, &format!("192.0.2.{i}"), OWNER, "wrong password!").await;
            assert_eq!(st, StatusCode::UNAUTHORIZED, "address {i}");
        }
    }
    for ip in ["192.0.2.200", "198.51.100.2"] {
        assert_eq!(login_from(&app, ip, OWNER, PASSWORD).await, StatusCode::TOO_MANY_REQUESTS, "{ip}");
    }
}

//! Regression tests of the security pass (issue #14): each failed before its fix.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

/// The `Location` a sign-in with `next` redirects to.
async fn login_location(app: &TestApp, email: &str, next: &str) -> (StatusCode, String) {
    let c = app.client();
    let r = c.get("/login").await;
    let csrf = csrf_from_html(&r.text().await.unwrap()).unwrap();
    let r = c
        .http
        .post(format!("{}/login", app.base))
        .form(&[("email", email), ("password", PASSWORD), ("csrf_token", csrf.as_str()), ("next", next)])
        .send()
        .await
        .unwrap();
    let loc = r.headers().get("location").map(|l| l.to_str().unwrap().to_string()).unwrap_or_default();
    (r.status(), loc)
}

#[tokio::test]
async fn next_after_sign_in_never_leaves_the_site() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    for hostile in [
        "/\t/evil.example/x",
        "/\n/evil.example",
        "/\r\n/evil.example",
        "//evil.example",
        "/\\evil.example",
        "/x/../..//evil.example",
    ] {
        let (st, loc) = login_location(&app, "owner@acme.test", hostile).await;
        assert_eq!(st, StatusCode::SEE_OTHER, "{hostile:?}: a redirect, never a 500");
        assert_eq!(loc, "/", "{hostile:?} -> {loc:?}");
    }
    let (_, loc) = login_location(&app, "owner@acme.test", "/search?q=a").await;
    assert_eq!(loc, "/search?q=a");
}

#[tokio::test]
async fn an_owner_of_two_teams_cannot_leave_one_of_them_ownerless() {
    let app = spawn_app().await;
    let a = app.bootstrap("alpha", "owner@two.test").await;
    // The same account also owns a second team.
    let b = app.bootstrap("beta", "other@beta.test").await;
    mnote::tenants::add_user(&app.pool, b.tenant_id, "owner@two.test", "owner".parse().unwrap(), None).await.unwrap();
    let c = app.api(a.tenant_id, a.user_id).await;
    let (st, e) = c.send_json("PATCH", &format!("/api/members/{}", a.user_id), json!({"role": "admin"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::CONFLICT, "conflict"), "the last owner of alpha: {e}");
    assert_eq!(c.delete(&format!("/api/members/{}", a.user_id)).await, StatusCode::CONFLICT);
    // Still the owner of both.
    let (_, me) = c.get_json("/api/session").await;
    assert_eq!(me["role"], "owner", "{me}");
}

#[tokio::test]
async fn only_admins_list_the_members() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let m = app.add_user(s.tenant_id, "member@acme.test", "member").await;
    let member = app.api(s.tenant_id, m).await;
    let (st, e) = member.get_json("/api/members").await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "forbidden"), "{e}");
    let owner = app.api(s.tenant_id, s.user_id).await;
    let (st, list) = owner.get_json("/api/members").await;
    assert_eq!((st, list["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(2)));
}

#[tokio::test]
async fn parallel_wrong_passwords_past_the_limit_are_refused() {
    let app = spawn_app_with(|c| c.login_max_failures = 5).await;
    app.bootstrap("acme", "owner@acme.test").await;
    let clients: Vec<Client> = (0..20).map(|_| app.client()).collect();
    let attempts = clients.iter().map(|c| c.login("owner@acme.test", "wrong password!"));
    let statuses: Vec<StatusCode> = futures_util::future::join_all(attempts).await.iter().map(|r| r.status()).collect();
    let refused = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    let checked = statuses.iter().filter(|s| **s == StatusCode::UNAUTHORIZED).count();
    assert_eq!((checked, refused), (5, 15), "{statuses:?}");
}

#[tokio::test]
async fn no_text_of_a_source_is_readable_after_its_grant_was_revoked() {
    let app = spawn_app().await;
    let k = crate::fixtures::kb_with_grant(&app).await;
    app.write_doc("team/secret.md", "# Plans\n\nThe merger closes in March.\n");
    crate::fixtures::register(&k, &app, "team/secret.md").await;
    app.run_jobs().await;
    let (st, hits) = k.client.post_json("/api/evidence/search", json!({"query": "merger closes", "mode": "lexical"})).await;
    assert_eq!(st, StatusCode::OK, "{hits}");
    let hit = &hits["results"][0];
    let (evidence, source) =
        (hit["evidenceId"].as_str().unwrap().to_string(), hit["source"]["sourceId"].as_str().unwrap().to_string());
    let (st, _) = k.client.post_json("/api/evidence/read", json!({"evidenceId": evidence})).await;
    assert_eq!(st, StatusCode::OK, "readable while the grant is active");
    let (_, grants) = k.client.get_json("/api/grants").await;
    let grant = grants["items"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(k.client.delete(&format!("/api/grants/{grant}")).await, StatusCode::OK);

    let (st, r) = k.client.post_json("/api/evidence/read", json!({"evidenceId": evidence})).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "read after revoke: {r}");
    assert!(!r.to_string().contains("merger"), "{r}");
    let (st, r) = k.client.post_json("/api/evidence/read", json!({"locator": {"sourceId": source, "blockId": "b2"}})).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "read by locator after revoke: {r}");
    let (st, r) = k.client.post_json("/api/evidence/open", json!({"evidenceId": evidence})).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "open after revoke: {r}");
    let (st, r) = k.client.get_json(&format!("/api/sources/{source}/source-map.json")).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "source map after revoke: {r}");
    assert!(!r.to_string().contains("merger"), "{r}");
}

#[tokio::test]
async fn pages_carry_a_strict_content_security_policy_and_cannot_be_framed() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let r = app.client().get("/login").await;
    assert_eq!(r.status(), StatusCode::OK);
    let h = r.headers();
    let csp = h.get("content-security-policy").expect("a CSP on HTML").to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'") && !csp.contains("unsafe-eval"), "{csp}");
    assert!(!csp.split(';').any(|d| d.trim().starts_with("script-src") && d.contains("unsafe-inline")), "{csp}");
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["x-content-type-options"], "nosniff");
    let (st, _) = app.client().get_json("/healthz").await;
    assert_eq!(st, StatusCode::OK);
    let r = app.client().get("/healthz").await;
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert!(r.headers().get("content-security-policy").is_none(), "JSON needs no CSP");
}

#[tokio::test]
async fn an_oversized_json_body_is_413_not_422() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let big = "x".repeat(3 * 1024 * 1024);
    let (st, e) = c.post_json("/api/evidence/search", json!({"query": big})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"), "{e}");
}

#[tokio::test]
async fn an_authorization_header_does_not_skip_csrf_for_cookie_requests() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let browser = app.login("owner@acme.test").await;
    let post = |auth: Option<&'static str>, origin: Option<&'static str>| {
        let mut r = browser.http.post(format!("{}/language", app.base)).form(&[("lang", "zh-CN"), ("next", "/")]);
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r
    };
    // Cookie + some other Authorization scheme, no CSRF token: refused (it used to pass).
    let r = post(Some("Basic Zm9vOmJhcg=="), None).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "cookie + Basic without a CSRF token");
    // Cookie + a bearer token that is not valid: refused, never served as the cookie's user.
    let r = post(Some("Bearer mnote_x_not-a-token"), None).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // A valid token is its own user; the cookie-only routes refuse it.
    let token = app.token(s.tenant_id, s.user_id).await;
    let r = browser
        .http
        .post(format!("{}/tenants/switch", app.base))
        .header("authorization", format!("Bearer {token}"))
        .form(&[("tenant_id", s.tenant_id.to_string())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "a bearer request does not act as the cookie's user");
    // With the session's CSRF token but from another site: refused.
    let mut b = app.login("owner@acme.test").await;
    b.page("/").await;
    let csrf = b.csrf.clone().unwrap();
    let r = b
        .http
        .post(format!("{}/language", app.base))
        .header("origin", "https://evil.example")
        .form(&[("lang", "zh-CN"), ("next", "/"), ("csrf_token", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "cross-site origin");
    let r = b
        .http
        .post(format!("{}/language", app.base))
        .header("origin", app.base.as_str())
        .form(&[("lang", "zh-CN"), ("next", "/"), ("csrf_token", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "same origin with the token");
}

#[tokio::test]
async fn a_live_status_stream_ends_when_its_member_is_removed() {
    use futures_util::StreamExt;
    let app = spawn_app().await;
    let k = crate::fixtures::kb_with_grant(&app).await;
    let member = app.add_user(k.tenant, "member@acme.test", "member").await;
    let mc = app.api(k.tenant, member).await;
    let r = mc.get(&format!("/kbs/{}/events", k.kb)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let mut stream = Box::pin(r.bytes_stream());
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), stream.next()).await.expect("the first event");
    assert!(String::from_utf8_lossy(&first.unwrap().unwrap()).contains("event: sources"));
    // Removed from the team, then a change of the KB: the stream ends instead of delivering it.
    assert_eq!(k.client.delete(&format!("/api/members/{member}")).await, StatusCode::NO_CONTENT);
    app.write_doc("team/new.md", "# new");
    crate::fixtures::register(&k, &app, "team/new.md").await;
    let mut rest = String::new();
    let ended = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(c) => rest.push_str(&String::from_utf8_lossy(&c)),
                Err(_) => break,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream stayed open after the member was removed");
    assert!(!rest.contains("new.md") && !rest.contains("event: sources"), "{rest}");
}

#[tokio::test]
async fn metrics_are_for_the_operator_only() {
    // Without a token: direct loopback requests only, never one a proxy relayed.
    let app = spawn_app().await;
    assert_eq!(app.client().get("/metrics").await.status(), StatusCode::OK);
    let relayed =
        app.client().http.get(format!("{}/metrics", app.base)).header("x-forwarded-for", "203.0.113.7").send().await.unwrap();
    assert_eq!(relayed.status(), StatusCode::UNAUTHORIZED, "through a proxy, /metrics is not public");
    // With MNOTE_METRICS_TOKEN: only with it.
    let app = spawn_app_with(|c| c.metrics_token = Some(mnote::config::SecretString::new("op-secret-1"))).await;
    assert_eq!(app.client().get("/metrics").await.status(), StatusCode::UNAUTHORIZED);
    let wrong = app.client().http.get(format!("{}/metrics", app.base)).bearer_auth("op-secret-2").send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let ok = app.client().http.get(format!("{}/metrics", app.base)).bearer_auth("op-secret-1").send().await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    assert!(ok.text().await.unwrap().contains("http_requests_total"));
}

#[tokio::test]
async fn signing_in_rotates_the_csrf_token() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let mut c = app.client();
    c.page("/login").await;
    let before = c.csrf.clone().expect("the login form's token");
    let r = c
        .http
        .post(format!("{}/login", app.base))
        .form(&[("email", "owner@acme.test"), ("password", PASSWORD), ("csrf_token", before.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    c.page("/").await;
    let after = c.csrf.clone().unwrap();
    assert_ne!(before, after, "a new token after sign-in");
    let r = c
        .http
        .post(format!("{}/language", app.base))
        .form(&[("lang", "zh-CN"), ("next", "/"), ("csrf_token", before.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "the pre-login token is refused");
    let r = c
        .http
        .post(format!("{}/language", app.base))
        .form(&[("lang", "zh-CN"), ("next", "/"), ("csrf_token", after.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

/// Item 7: the CSRF token is no longer taken from the query string (URLs reach logs, history
/// and `Referer`); the upload form sends it as the first multipart field.
#[tokio::test]
async fn the_upload_form_sends_its_csrf_token_in_the_body_not_the_url() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let mut c = app.login("owner@acme.test").await.with_csrf().await;
    let (st, kb) = c.post_json("/api/kbs", json!({"name": "uploads"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let kb = kb["id"].as_str().unwrap().to_string();
    let (_, html) = c.page(&format!("/kbs/{kb}")).await;
    let csrf = c.csrf.clone().unwrap();
    assert!(!html.contains("?csrf_token="), "the form's action carries no token");
    let file = || reqwest::multipart::Part::bytes(b"# Notes\n\nhello\n".to_vec()).file_name("notes.md");
    let post = |form: reqwest::multipart::Form, query: &str| {
        c.http.post(format!("{}/kbs/{kb}/uploads{query}", app.base)).multipart(form).send()
    };

    let r = post(reqwest::multipart::Form::new().part("file", file()), &format!("?csrf_token={csrf}")).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "a token in the query string is refused");
    let r = post(reqwest::multipart::Form::new().part("file", file()).text("csrf_token", csrf.clone()), "").await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "the token must be the first part");
    let r = post(reqwest::multipart::Form::new().text("csrf_token", "forged").part("file", file()), "").await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "a wrong token");
    let (_, list) = c.get_json(&format!("/api/kbs/{kb}/sources")).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "nothing was stored: {list}");

    // The form as the page renders it: the token first, then the files.
    let form = reqwest::multipart::Form::new().text("csrf_token", csrf.clone()).part("file", file());
    let r = post(form, "").await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // The header still works (scripts), and a large upload after the token streams through.
    let big = vec![b'a'; 200 * 1024];
    let form = reqwest::multipart::Form::new().part("file", reqwest::multipart::Part::bytes(big).file_name("big.txt"));
    let r =
        c.http.post(format!("{}/kbs/{kb}/uploads", app.base)).header("x-csrf-token", &csrf).multipart(form).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, list) = c.get_json(&format!("/api/kbs/{kb}/sources")).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2), "{list}");
}

/// Item 11: idle anonymous visits to the sign-in page store nothing (each used to write a
/// session row just for the form's CSRF token); the form is still CSRF-protected, by the
/// `mnote_csrf` browser cookie.
#[tokio::test]
async fn anonymous_sign_in_page_views_write_no_session_rows() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let rows = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from tower_sessions.session").fetch_one(&app.owner_pool).await.unwrap()
    };
    let before = rows().await;
    let returning = app.client();
    for i in 0..20 {
        let fresh = app.client();
        let c = if i % 2 == 0 { &fresh } else { &returning };
        let r = c.get("/login").await;
        assert_eq!(r.status(), StatusCode::OK);
        assert!(csrf_from_html(&r.text().await.unwrap()).is_some(), "the form still has a token");
    }
    assert_eq!(rows().await, before, "anonymous GET /login wrote session rows");

    // Sign-in still needs the token, and the token only works with its cookie.
    let c = app.client();
    let csrf = csrf_from_html(&c.get("/login").await.text().await.unwrap()).unwrap();
    let post = |c: &Client, token: &str| {
        c.http
            .post(format!("{}/login", app.base))
            .form(&[("email", "owner@acme.test"), ("password", PASSWORD), ("csrf_token", token)])
            .send()
    };
    assert_eq!(post(&c, "forged-forged-forged-forged-1234").await.unwrap().status(), StatusCode::FORBIDDEN);
    let r = c.http.post(format!("{}/login", app.base)).form(&[("email", "owner@acme.test"), ("password", PASSWORD)]).send();
    assert_eq!(r.await.unwrap().status(), StatusCode::FORBIDDEN, "no token");
    let stranger = app.client();
    assert_eq!(post(&stranger, &csrf).await.unwrap().status(), StatusCode::FORBIDDEN, "someone else's token, without its cookie");
    assert_eq!(rows().await, before, "refused attempts (and their error pages) store nothing either");
    let r = post(&c, &csrf).await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "the form still works after a refused attempt");
    assert_eq!(rows().await, before + 1, "signing in stores the session");
    // The browser token does not stand in for a signed-in session's own token.
    let r = c
        .http
        .post(format!("{}/language", app.base))
        .form(&[("lang", "en"), ("next", "/"), ("csrf_token", csrf.as_str())])
        .send();
    assert_eq!(r.await.unwrap().status(), StatusCode::FORBIDDEN);
    let c = c.with_csrf().await;
    assert_eq!(c.get_json("/api/session").await.0, StatusCode::OK);
}

//! An ended session (idle expiry, or signed out elsewhere) on a form of a signed-in page leads
//! to the sign-in page with a notice in the reader's language, and back to the page the form was
//! on; nothing of the form is done. Never the bare "form expired" error. A signed-in session's
//! wrong token and the visitors' own forms keep their error (`security.rs`).

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

async fn end_sessions(app: &TestApp) {
    sqlx::query("delete from tower_sessions.session").execute(&app.owner_pool).await.unwrap();
}

async fn runs(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from ai_run").fetch_one(&app.owner_pool).await.unwrap()
}

#[tokio::test]
async fn a_form_sent_after_the_session_ended_asks_to_sign_in_and_comes_back() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let (_, kb) = api.post_json("/api/kbs", json!({"name": "Notes"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let mut c = app.login("owner@acme.test").await;
    c.page("/ai?session=s-1").await;
    let csrf = c.csrf.clone().unwrap();
    end_sessions(&app).await;

    // The ask form (no JavaScript), sent from /ai?session=s-1.
    let r = c
        .http
        .post(format!("{}/ai/runs", app.base))
        .header("referer", format!("{}/ai?session=s-1", app.base))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("request_id", "r-1"),
            ("session_id", "s-1"),
            ("agent_id", "hermes"),
            ("prompt", "Where?"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(to, "/login?next=%2Fai%3Fsession%3Ds-1&expired=1");
    assert_eq!(runs(&app).await, 0, "nothing of the form was done");

    // The upload form (multipart) from the KB page: the same.
    let form = reqwest::multipart::Form::new()
        .text("csrf_token", csrf.clone())
        .part("file", reqwest::multipart::Part::bytes(b"# a\n".to_vec()).file_name("a.md"));
    let r = c
        .http
        .post(format!("{}/kbs/{kb}/uploads", app.base))
        .header("referer", format!("{}/kbs/{kb}", app.base))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"].to_str().unwrap(), format!("/login?next=%2Fkbs%2F{kb}&expired=1"));
    let (_, list) = api.get_json(&format!("/api/kbs/{kb}/sources")).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "{list}");

    // A Referer from another site is not followed back.
    let r = c
        .http
        .post(format!("{}/ai/runs", app.base))
        .header("referer", "https://evil.example/ai")
        .form(&[("csrf_token", csrf.as_str()), ("prompt", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["location"].to_str().unwrap(), "/login?next=%2F&expired=1");

    // The sign-in page says why, in the reader's language, and signing in goes back.
    for (lang, words) in [("en", "Your session has expired. Sign in again"), ("zh-CN", "登录已过期。请重新登录")] {
        let html =
            c.http.get(format!("{}{to}", app.base)).header("accept-language", lang).send().await.unwrap().text().await.unwrap();
        assert!(html.contains(words), "{lang}: {html}");
        assert!(html.contains("name=\"next\"") && html.contains("session=s-1"), "the form keeps where to go back: {html}");
    }
    let html = c.get(&to).await.text().await.unwrap();
    let token = csrf_from_html(&html).unwrap();
    let r = c
        .http
        .post(format!("{}/login", app.base))
        .form(&[
            ("email", "owner@acme.test"),
            ("password", PASSWORD),
            ("csrf_token", token.as_str()),
            ("next", "/ai?session=s-1"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"].to_str().unwrap(), "/ai?session=s-1");

    // The JSON API keeps its stable error (the page's script then does the same as the form).
    end_sessions(&app).await;
    let r = c
        .http
        .post(format!("{}/api/kbs", app.base))
        .header("x-csrf-token", &csrf)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    let (st, e) = json_of(r).await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "csrf_failed"));
}

#[tokio::test]
async fn a_signed_in_form_with_a_wrong_token_still_gets_the_error_page() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let mut c = app.login("owner@acme.test").await;
    c.page("/").await;
    let r = c.post_form("/kbs", &[("name", "x"), ("visibility", "team"), ("csrf_token", "forged")]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let html = r.text().await.unwrap();
    assert!(html.contains("This form has expired"), "{html}");
}

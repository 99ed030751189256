//! Server-rendered pages: they render, use the catalogue in both languages, and work
//! without JavaScript (plain forms).

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

#[tokio::test]
async fn main_pages_render_for_an_owner() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let mut c = app.login("owner@acme.test").await;
    for path in ["/", "/admin/members", "/admin/grants", "/settings/tokens"] {
        let (st, html) = c.page(path).await;
        assert_eq!(st, StatusCode::OK, "{path}");
        assert!(html.contains("owner@acme.test"), "{path} shows who is signed in");
        assert!(!html.contains("nav.") && !html.contains("dashboard."), "{path}: untranslated key");
    }
    // Create a KB through the form and land on its page.
    c.page("/").await;
    let r = c.post_form("/kbs", &[("name", "Research"), ("visibility", "team"), ("description", "papers")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let kb_page = r.headers()["location"].to_str().unwrap().to_string();
    let (st, html) = c.page(&kb_page).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("Research") && html.contains("papers"));
    // Grant, then register through the KB page form.
    app.write_doc("lab/paper.md", "# Paper");
    let r =
        c.post_form("/admin/grants", &[("path", &app.docs_path("lab")), ("grantee", "all"), ("permission", "read_index")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = c.page(&kb_page).await;
    assert!(html.contains(&app.docs_path("lab")), "grant offered in the register form");
    let grant_id = {
        let api = app.api(s.tenant_id, s.user_id).await;
        let (_, g) = api.get_json("/api/grants").await;
        g["items"][0]["id"].as_str().unwrap().to_string()
    };
    let r = c.post_form(&format!("{kb_page}/sources"), &[("grant_id", &grant_id), ("path", "")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = c.page(&kb_page).await;
    assert!(html.contains("paper.md") && html.contains("Registered 1 file (1 new"), "source listed with a notice");
    assert!(html.contains("class=\"status pending\""));
    // Token page shows a new token exactly once.
    let r = c.post_form("/settings/tokens", &[("name", "cli")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = c.page("/settings/tokens").await;
    assert!(html.contains("id=\"new-token\">mnote_"));
    let (_, html) = c.page("/settings/tokens").await;
    assert!(!html.contains("id=\"new-token\""));
}

#[tokio::test]
async fn pages_follow_the_language_preference() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let r = app
        .client()
        .http
        .get(format!("{}/login", app.base))
        .header("accept-language", "zh-CN,zh;q=0.9,en;q=0.5")
        .send()
        .await
        .unwrap();
    let html = r.text().await.unwrap();
    assert!(html.contains("lang=\"zh-CN\""));
    assert!(!html.contains(">Sign in<"), "login page should be Chinese");
    let mut c = app.login("owner@acme.test").await;
    let (_, html) = c.page("/").await;
    assert!(html.contains(">Dashboard<"));
    // Saved preference wins over Accept-Language, and sticks to the account.
    let r = c.post_form("/language", &[("lang", "zh-CN"), ("next", "/")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = c.page("/").await;
    assert!(html.contains("lang=\"zh-CN\"") && !html.contains(">Dashboard<"));
    let c2 = app.login("owner@acme.test").await;
    let html = c2.get("/").await.text().await.unwrap();
    assert!(html.contains("lang=\"zh-CN\""), "preference restored at the next login");
}

#[tokio::test]
async fn errors_render_as_pages_for_browsers_and_json_for_the_api() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let m = app.add_user(s.tenant_id, "m@acme.test", "member").await;
    let _ = m;
    let mut c = app.login("m@acme.test").await;
    let (st, html) = c.page("/admin/grants").await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(html.contains("<html") && html.contains("forbidden"));
    let (st, html) = c.page(&format!("/kbs/{}", uuid::Uuid::new_v4())).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(html.contains("<html"));
    let (st, e) = c.get_json(&format!("/api/kbs/{}", uuid::Uuid::new_v4())).await;
    assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"));
    assert_eq!(e["error"]["message"], "not found");
    let _ = json!({});
}

/// An error page keeps the signed-in navigation (and says the code), in the reader's language;
/// server messages of well-known errors read in Chinese too.
#[tokio::test]
async fn error_pages_keep_the_navigation_and_the_language() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    app.add_user(s.tenant_id, "m@acme.test", "member").await;
    let mut c = app.login("m@acme.test").await;
    let (st, html) = c.page("/admin/grants").await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(html.contains("class=\"mainnav") && html.contains("m@acme.test"), "navigation kept: {html}");
    assert!(html.contains("This needs the admin or owner role."), "{html}");
    let (st, html) = c.page(&format!("/kbs/{}", uuid::Uuid::new_v4())).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(html.contains("class=\"mainnav") && html.contains("<code>not_found</code>"), "{html}");
    // An address no route knows (a typo in the URL) keeps the navigation too.
    let (st, html) = c.page("/no-such-page/at-all?x=1").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(html.contains("class=\"mainnav") && html.contains("m@acme.test"), "unknown URL: {html}");
    assert!(html.contains("<code>not_found</code>"), "{html}");
    let csrf = c.csrf.clone().unwrap();
    let r = c.post_form("/language", &[("lang", "zh-CN"), ("next", "/"), ("csrf_token", &csrf)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (st, html) = c.page("/admin/grants").await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(html.contains("此操作需要管理员或所有者角色。") && html.contains("class=\"mainnav"), "{html}");
    let (st, html) = c.page("/no-such-page").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(html.contains("class=\"mainnav") && html.contains("搜索"), "unknown URL in Chinese: {html}");
    // The narrow-screen menu is in every signed-in page's header (a checkbox, no script needed).
    let (_, html) = c.page("/").await;
    assert!(html.contains("id=\"menu-toggle\"") && html.contains("href=\"/settings/account\""), "{html}");
    // One register in Chinese, and "搜索" rather than "搜索证据".
    assert!(!html.contains('您') && !html.contains("搜索证据"), "{html}");
}

/// The KB page's live status re-reads the page in the background (`X-Mnote-Background`). When
/// that request arrives between a form's redirect and the page it leads to, it must not take
/// the notice meant for that page (seen as a flaky browser test: "Removed alpha.md" missing).
#[tokio::test]
async fn a_background_re_read_leaves_the_notice_to_the_next_page() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let mut c = app.login("owner@acme.test").await;
    c.page("/").await;
    let r = c.post_form("/kbs", &[("name", "Research"), ("visibility", "team"), ("description", "")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let kb_page = r.headers()["location"].to_str().unwrap().to_string();
    c.page(&kb_page).await;
    let r =
        c.post_form(&format!("{kb_page}/edit"), &[("name", "Research"), ("visibility", "team"), ("description", "papers")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let notice = "Saved.";
    // The background read first: the page renders, without the notice.
    let r = c.http.get(format!("{}{kb_page}", c.base)).header("X-Mnote-Background", "1").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    assert!(html.contains("id=\"sources-card\"") && !html.contains("class=\"flash"), "{html}");
    // Then the page the redirect leads to: the notice is still there, once.
    let (_, html) = c.page(&kb_page).await;
    assert!(html.contains("class=\"flash") && html.contains(notice), "the notice survived the background read");
    let (_, html) = c.page(&kb_page).await;
    assert!(!html.contains("class=\"flash"), "and is shown once");
}

/// A mistyped path in the KB page's "Register from a directory" form comes back on the same
/// form (422), filled in, with the message next to the path, in the reader's language.
#[tokio::test]
async fn a_mistyped_register_path_is_a_field_error_on_the_kb_page() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let mut c = app.login("owner@acme.test").await;
    c.page("/").await;
    let r = c.post_form("/kbs", &[("name", "Research"), ("visibility", "team")]).await;
    let kb_page = r.headers()["location"].to_str().unwrap().to_string();
    app.write_doc("lab/paper.md", "# Paper");
    let r =
        c.post_form("/admin/grants", &[("path", &app.docs_path("lab")), ("grantee", "all"), ("permission", "read_index")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let grant_id = {
        let api = app.api(s.tenant_id, s.user_id).await;
        let (_, g) = api.get_json("/api/grants").await;
        g["items"][0]["id"].as_str().unwrap().to_string()
    };
    c.page(&kb_page).await;
    let post = |path: &'static str| {
        let (c, url, g) = (c.clone(), format!("{kb_page}/sources"), grant_id.clone());
        async move { c.post_form(&url, &[("grant_id", &g), ("path", path), ("include", "*.md")]).await }
    };
    let r = post("papr.md").await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.unwrap();
    assert!(html.contains("class=\"field-error\" role=\"alert\" id=\"path-error\">Nothing is at that path"), "{html}");
    assert!(html.contains("value=\"papr.md\"") && html.contains("aria-invalid=\"true\""), "the form kept the path");
    assert!(html.contains(&format!("<option value=\"{grant_id}\" selected title=")) && html.contains("value=\"*.md\""), "{html}");
    assert!(html.contains("class=\"mainnav") && !html.contains("<code>"), "the KB page, not an error page");
    let r = post("../elsewhere").await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("That path leads outside the chosen directory."));
    let r = c.post_form("/language", &[("lang", "zh-CN"), ("next", "/")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = post("papr.md").await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("所选目录中没有这个路径。请检查拼写（区分大小写）。"));
    // The right path registers as before.
    let r = post("paper.md").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = c.page(&kb_page).await;
    assert!(html.contains("paper.md") && !html.contains("id=\"path-error\""), "{html}");
}

/// The Chinese UI ends its labels with the full-width colon and names every agent in Chinese
/// ("仅对话", not "Chat only"); the English one keeps ": " and "Chat only".
#[tokio::test]
async fn the_chinese_ui_uses_full_width_colons_and_names_every_agent() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let mut c = app.login("owner@acme.test").await;
    let (_, html) = c.page("/admin/grants").await;
    assert!(html.contains("Allowed roots: <code>"), "{html}");
    let (_, html) = c.page("/ai").await;
    assert!(html.contains(">Chat only — "), "{html}");
    let r = c.post_form("/language", &[("lang", "zh-CN"), ("next", "/")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = c.page("/admin/grants").await;
    assert!(html.contains("允许的根目录：<code>"), "{html}");
    let (_, html) = c.page("/ai").await;
    assert!(html.contains(">仅对话 — ") && !html.contains("Chat only"), "{html}");
    let (_, html) = c.page("/settings/agents").await;
    assert!(html.contains(">仅对话</a>") && !html.contains("Chat only"), "{html}");
}

/// The API tokens page gives a ready-to-copy MCP client configuration: this server's `/mcp`
/// (the request's origin without MNOTE_PUBLIC_URL) and a placeholder for the token.
#[tokio::test]
async fn the_tokens_page_shows_an_mcp_client_snippet() {
    let app = spawn_app().await;
    app.bootstrap("acme", "owner@acme.test").await;
    let mut c = app.login("owner@acme.test").await;
    let (st, html) = c.page("/settings/tokens").await;
    assert_eq!(st, StatusCode::OK);
    let snippet = html.split("id=\"mcp-snippet\">").nth(1).and_then(|s| s.split("</pre>").next()).expect("the snippet");
    assert!(snippet.contains("mcpServers") && snippet.contains(&format!("{}/mcp", app.base)), "{snippet}");
    assert!(snippet.contains("Authorization") && snippet.contains("Bearer mnote_…"), "{snippet}");
    assert!(html.contains("Connect an MCP client") && html.contains("data-copy=\"#mcp-snippet\""), "{html}");
    let r = c.post_form("/language", &[("lang", "zh-CN"), ("next", "/")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = c.page("/settings/tokens").await;
    assert!(html.contains("连接 MCP 客户端") && html.contains(&format!("{}/mcp", app.base)), "{html}");
}

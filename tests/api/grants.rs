//! Directory grants and path confinement through the API.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

#[tokio::test]
async fn only_directories_inside_the_allow_list_can_be_granted() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("team/a.md", "a");
    let data = app.config.data_dir.to_string_lossy().into_owned();
    let escape = format!("{}/../data", app.docs.display());
    for (path, code) in [
        ("/etc", "path_outside_grant"),
        (data.as_str(), "path_outside_grant"),
        (escape.as_str(), "path_outside_grant"),
        // A NUL never reaches a path check: any JSON string holding one is refused.
        ("/tmp\u{0}x", "invalid_input"),
        ("relative/dir", "invalid_input"),
    ] {
        let (st, e) = c.post_json("/api/grants", json!({"path": path, "allMembers": true, "permission": "read"})).await;
        assert_eq!(error_code(&e), code, "{path:?}: {e}");
        assert_eq!(st, if code == "invalid_input" { StatusCode::UNPROCESSABLE_ENTITY } else { StatusCode::FORBIDDEN });
    }
    let (st, e) =
        c.post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "write"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"));
    let (st, g) = c
        .post_json("/api/grants", json!({"path": app.docs_path("team/../team/"), "allMembers": true, "permission": "read"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    assert_eq!(g["rootPath"], app.docs_path("team"), "stored canonical");
    assert!(g["userId"].is_null());
    // Granting the same again returns the same grant.
    let (st, again) =
        c.post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read"})).await;
    assert_eq!((st, &again["id"]), (StatusCode::OK, &g["id"]));
    // Members cannot grant.
    let m = app.add_user(s.tenant_id, "m@acme.test", "member").await;
    let cm = app.api(s.tenant_id, m).await;
    let (st, e) =
        cm.post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "forbidden"));
}

#[tokio::test]
async fn registering_paths_outside_a_grant_is_refused() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("team/ok.md", "# ok");
    app.write_doc("other/secret.md", "# secret, not granted");
    symlink(&app.docs.join("other/secret.md"), &app.docs.join("team/link-out.md"));
    symlink(&app.docs.join("other"), &app.docs.join("team/dir-out"));
    let (_, g) =
        c.post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"})).await;
    let grant = g["id"].as_str().unwrap();
    let (_, kb) = c.post_json("/api/kbs", json!({"name": "kb"})).await;
    let kb = kb["id"].as_str().unwrap();
    let url = format!("/api/kbs/{kb}/sources");
    let cases = [
        json!({"grantId": grant, "path": "../other/secret.md"}),
        json!({"grantId": grant, "path": "../../../../etc/passwd"}),
        json!({"grantId": grant, "path": "/etc/passwd"}),
        json!({"grantId": grant, "path": "link-out.md"}),
        json!({"grantId": grant, "path": "dir-out"}),
        json!({"path": app.docs_path("other/secret.md")}),
        json!({"path": app.docs_path("team/../other/secret.md")}),
        json!({"path": "/etc/passwd"}),
        json!({"path": app.docs_path("team/link-out.md")}),
    ];
    for body in cases {
        let (st, e) = c.post_json(&url, body.clone()).await;
        assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "path_outside_grant"), "{body}");
    }
    // A NUL never reaches a path check: any JSON string holding one is refused.
    let (st, e) = c.post_json(&url, json!({"grantId": grant, "path": "ok.md\u{0}"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{e}");
    let (_, list) = c.get_json(&url).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 0, "nothing was registered");
    // The directory itself registers only what is inside (the symlinks out are skipped).
    let (st, r) = c.post_json(&url, json!({"grantId": grant, "path": ""})).await;
    assert_eq!(st, StatusCode::CREATED, "{r}");
    let paths: Vec<&str> = r["items"].as_array().unwrap().iter().map(|s| s["resourcePath"].as_str().unwrap()).collect();
    assert_eq!(paths, vec!["ok.md"]);
    assert_eq!(r["skippedCount"], 2, "two symlinks leading out");
}

#[tokio::test]
async fn a_member_needs_a_read_index_grant_of_their_own_to_register() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let owner = app.api(s.tenant_id, s.user_id).await;
    let alice = app.add_user(s.tenant_id, "alice@acme.test", "member").await;
    let bob = app.add_user(s.tenant_id, "bob@acme.test", "member").await;
    app.write_doc("alice/a.md", "# a");
    app.write_doc("shared/s.md", "# s");
    owner
        .post_json("/api/grants", json!({"path": app.docs_path("alice"), "email": "alice@acme.test", "permission": "read_index"}))
        .await;
    owner.post_json("/api/grants", json!({"path": app.docs_path("shared"), "allMembers": true, "permission": "read"})).await;
    let ca = app.api(s.tenant_id, alice).await;
    let cb = app.api(s.tenant_id, bob).await;
    let (_, kb) = cb.post_json("/api/kbs", json!({"name": "bob's"})).await;
    let bob_kb = kb["id"].as_str().unwrap().to_string();
    let (_, kb) = ca.post_json("/api/kbs", json!({"name": "alice's"})).await;
    let alice_kb = kb["id"].as_str().unwrap().to_string();
    // Bob has no grant on alice/, and `read` on shared/ does not allow indexing.
    for path in [app.docs_path("alice/a.md"), app.docs_path("shared/s.md")] {
        let (st, e) = cb.post_json(&format!("/api/kbs/{bob_kb}/sources"), json!({"path": path})).await;
        assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "path_outside_grant"), "{path}");
    }
    let (st, _) = ca.post_json(&format!("/api/kbs/{alice_kb}/sources"), json!({"path": app.docs_path("alice/a.md")})).await;
    assert_eq!(st, StatusCode::CREATED);
    // Alice cannot register into Bob's KB (team-visible, but she does not manage it).
    let (st, e) = ca.post_json(&format!("/api/kbs/{bob_kb}/sources"), json!({"path": app.docs_path("alice/a.md")})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "forbidden"));
    // Grants listing: a member sees only grants that apply to them.
    let (_, gl) = cb.get_json("/api/grants").await;
    let roots: Vec<&str> = gl["items"].as_array().unwrap().iter().map(|g| g["rootPath"].as_str().unwrap()).collect();
    assert_eq!(roots, vec![app.docs_path("shared")]);
}

#[tokio::test]
async fn revoking_a_grant_makes_its_sources_stale() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("team/a.md", "# a");
    app.write_doc("team/b/c.md", "# c");
    let (_, g) =
        c.post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"})).await;
    let (_, kb) = c.post_json("/api/kbs", json!({"name": "kb"})).await;
    let kb = kb["id"].as_str().unwrap();
    let (st, r) = c.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("team")})).await;
    assert_eq!((st, r["createdCount"].as_u64()), (StatusCode::CREATED, Some(2)));
    let (st, r) = c.delete_json(&format!("/api/grants/{}", g["id"].as_str().unwrap())).await;
    assert_eq!((st, r["staleSources"].as_u64()), (StatusCode::OK, Some(2)));
    let (_, list) = c.get_json(&format!("/api/kbs/{kb}/sources")).await;
    for src in list["items"].as_array().unwrap() {
        assert_eq!(src["status"], "stale");
        assert_eq!(src["error"]["code"], "grant_revoked");
    }
    // And the path can no longer be registered.
    let (st, e) = c.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("team/a.md")})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "path_outside_grant"));
}

/// Revoke grant and remove member say what follows, counted by the server, before acting:
/// without JavaScript a confirmation page (the form posts without `confirm=yes`), with it a
/// dialog fed by the form's `data-confirm`; a bad path on the grant form is an inline,
/// translated message with the navigation kept (not a bare 403 page).
#[tokio::test]
async fn revoking_a_grant_and_removing_a_member_are_confirmed_with_their_consequences() {
    let app = spawn_app().await;
    let k = crate::fixtures::kb_with_grant(&app).await;
    for i in 0..3 {
        app.write_doc(&format!("team/n{i}.md"), &format!("# Note {i}\n\nbody {i}"));
    }
    crate::fixtures::register(&k, &app, "team").await;
    app.run_jobs().await;
    let (_, grants) = k.client.get_json("/api/grants").await;
    let gid = grants["items"][0]["id"].as_str().unwrap().to_string();
    let (st, impact) = k.client.get_json(&format!("/api/grants/{gid}/impact")).await;
    assert_eq!(st, StatusCode::OK, "{impact}");
    assert_eq!((impact["staleSources"].as_i64(), impact["kbs"].as_i64()), (Some(3), Some(1)), "{impact}");

    let mut page = app.login("owner@acme.test").await;
    let (_, html) = page.page("/admin/grants").await;
    assert!(html.contains("data-confirm=\"Revoking makes 3 sources under"), "the dialog's text is counted: {html}");
    // No JavaScript: posting the row's form shows the confirmation page and changes nothing.
    let r = page.post_form(&format!("/admin/grants/{gid}/revoke"), &[]).await;
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    assert!(
        html.contains("3 sources under") && html.contains("leave search") && html.contains("name=\"confirm\" value=\"yes\""),
        "{html}"
    );
    assert_eq!(page.get(&format!("/admin/grants/{gid}/revoke")).await.status(), StatusCode::OK);
    let (_, g) = k.client.get_json(&format!("/api/grants/{gid}")).await;
    assert!(g["revokedAt"].is_null(), "not revoked before confirming");
    // Confirmed: revoked, the notice says how many became stale.
    let r = page.post_form(&format!("/admin/grants/{gid}/revoke"), &[("confirm", "yes")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = page.page("/admin/grants").await;
    assert!(html.contains("Grant revoked; stale now: 3 sources."), "{html}");
    let (_, g) = k.client.get_json(&format!("/api/grants/{gid}")).await;
    assert!(!g["revokedAt"].is_null());

    // Inline errors on the grant form, in both languages.
    let r = page.post_form("/admin/grants", &[("path", "/etc"), ("grantee", "all"), ("permission", "read")]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let html = r.text().await.unwrap();
    assert!(html.contains("outside the directories this team may grant") && html.contains("class=\"mainnav"), "{html}");
    assert!(html.contains("value=\"/etc\""), "the typed path is kept");
    let r = page.post_form("/admin/grants", &[("grantee", "all"), ("permission", "read")]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY, "a missing field is the form's message");
    assert!(r.text().await.unwrap().contains("Give the directory to grant."));
    let r = page
        .http
        .post(format!("{}/language", app.base))
        .form(&[("lang", "zh-CN"), ("next", "/admin/grants"), ("csrf_token", page.csrf.as_deref().unwrap())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = page.post_form("/admin/grants", &[("path", "/etc"), ("grantee", "all"), ("permission", "read")]).await;
    assert!(r.text().await.unwrap().contains("该目录不在本团队可授权的范围内"));

    // Removing a member: their tokens, KBs, grants and the sources under those grants.
    let bob = app.add_user(k.tenant, "bob@acme.test", "member").await;
    app.token(k.tenant, bob).await;
    app.token(k.tenant, bob).await;
    std::fs::create_dir_all(app.docs.join("bob")).unwrap();
    let (st, g) =
        k.client.post_json("/api/grants", json!({"path": app.docs_path("bob"), "userId": bob, "permission": "read_index"})).await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (_, html) = page.page("/admin/members").await;
    assert!(html.contains("data-confirm=\"bob@acme.test 将立即失去"), "the dialog's text: {html}");
    let r = page.post_form(&format!("/admin/members/{bob}/remove"), &[]).await;
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    // (The page is in Chinese now: the language was switched above.)
    assert!(
        html.contains("bob@acme.test 将立即失去") && html.contains("2 个 API 令牌") && html.contains("1 个目录授权"),
        "{html}"
    );
    let (_, members) = k.client.get_json("/api/members").await;
    assert_eq!(members["items"].as_array().unwrap().len(), 2, "not removed before confirming");
    let r = page.post_form(&format!("/admin/members/{bob}/remove"), &[("confirm", "yes")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, members) = k.client.get_json("/api/members").await;
    assert_eq!(members["items"].as_array().unwrap().len(), 1);
}

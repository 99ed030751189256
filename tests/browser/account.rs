//! Accounts and admin in the browser (issue #16): changing one's own password through the
//! account page, and the confirmation dialogs of "revoke grant" and "remove member" (their
//! text counted by the server; Cancel changes nothing, confirming acts).

use reqwest::StatusCode;
use serde_json::json;

use crate::{
    browser::Browser,
    helpers::{PASSWORD, spawn_app},
};

const EMAIL: &str = "owner@acme.test";

#[tokio::test]
async fn a_user_changes_their_password_in_the_browser() {
    let app = spawn_app().await;
    app.bootstrap("acme", EMAIL).await;
    let b = Browser::start("account-password", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    // The header's email leads to the account page.
    b.find("header .who a.email").await.click().await.unwrap();
    b.poll("the account page", "return location.pathname === '/settings/account' && document.readyState === 'complete'", vec![])
        .await;
    let new_pw = "the new long passphrase";
    // A wrong current password: the message inline, on the same page, with the navigation.
    b.find("input[name=current_password]").await.send_keys("definitely wrong").await.unwrap();
    b.find("input[name=new_password]").await.send_keys(new_pw).await.unwrap();
    b.find("input[name=confirm_password]").await.send_keys(new_pw).await.unwrap();
    b.find("form[action='/settings/account/password'] button").await.click().await.unwrap();
    let err = b.wait_for(".form-error").await.text().await.unwrap();
    assert!(err.contains("current password is not right"), "{err}");
    assert!(b.js("return !!document.querySelector('nav.mainnav')", vec![]).await == true);
    b.screenshot("wrong-current").await;
    // The change.
    b.find("input[name=current_password]").await.send_keys(PASSWORD).await.unwrap();
    b.find("input[name=new_password]").await.send_keys(new_pw).await.unwrap();
    b.find("input[name=confirm_password]").await.send_keys(new_pw).await.unwrap();
    b.find("form[action='/settings/account/password'] button").await.click().await.unwrap();
    b.flash("Password changed").await;
    b.screenshot("changed").await;
    // Sign out; the old password is refused, the new one works.
    b.find("form[action='/logout'] button").await.click().await.unwrap();
    b.poll("the login page", "return location.pathname === '/login' && document.readyState === 'complete'", vec![]).await;
    // Back after sign-out does not show the signed-in page (it is never stored).
    b.c.back().await.unwrap();
    b.poll("back", "return document.readyState === 'complete'", vec![]).await;
    let path = b.js("return location.pathname", vec![]).await;
    let has_nav = b.js("return !!document.querySelector('nav.mainnav')", vec![]).await;
    assert!(has_nav == false, "Back showed a signed-in page at {path}");
    b.goto("/login").await;
    b.wait_for("input[name=email]").await.send_keys(EMAIL).await.unwrap();
    b.find("input[name=password]").await.send_keys(PASSWORD).await.unwrap();
    b.find("form[action='/login'] button[type=submit]").await.click().await.unwrap();
    let err = b.wait_for(".alert").await.text().await.unwrap();
    assert!(err.contains("Wrong email or password"), "{err}");
    b.login(EMAIL, new_pw).await;
    assert_eq!(b.js("return location.pathname", vec![]).await, "/");
    b.finish().await;
}

#[tokio::test]
async fn revoke_and_remove_ask_first_in_a_dialog_that_says_what_follows() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", EMAIL).await;
    let api = app.api(s.tenant_id, s.user_id).await;
    std::fs::create_dir_all(app.docs.join("team")).unwrap();
    for i in 0..2 {
        app.write_doc(&format!("team/n{i}.md"), &format!("# Note {i}\n\nbody {i}"));
    }
    let (st, g) = api
        .post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (_, kb) = api.post_json("/api/kbs", json!({"name": "Evidence"})).await;
    let (st, _) =
        api.post_json(&format!("/api/kbs/{}/sources", kb["id"].as_str().unwrap()), json!({"path": app.docs_path("team")})).await;
    assert!(st.is_success());
    app.run_jobs().await;
    app.add_user(s.tenant_id, "bob@acme.test", "member").await;

    let b = Browser::start("confirm-dialogs", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    b.goto("/admin/grants").await;
    b.wait_for("form[data-confirm] button").await.click().await.unwrap();
    let text = b
        .poll(
            "the dialog",
            "const d = document.querySelector('dialog.confirm-dialog'); return d && d.open ? d.innerText : null",
            vec![],
        )
        .await;
    assert!(text.as_str().unwrap().contains("2 sources under") && text.as_str().unwrap().contains("leave search"), "{text}");
    b.screenshot("revoke-dialog").await;
    b.find("dialog .confirm-cancel").await.click().await.unwrap();
    b.poll("the dialog to close", "return !document.querySelector('dialog.confirm-dialog').open", vec![]).await;
    let (_, g2) = api.get_json(&format!("/api/grants/{}", g["id"].as_str().unwrap())).await;
    assert!(g2["revokedAt"].is_null(), "Cancel revoked nothing");
    b.find("form[data-confirm] button").await.click().await.unwrap();
    b.poll("the dialog", "const d = document.querySelector('dialog.confirm-dialog'); return d && d.open", vec![]).await;
    b.find("dialog .confirm-ok").await.click().await.unwrap();
    b.flash("stale now: 2 sources").await;
    let (_, g2) = api.get_json(&format!("/api/grants/{}", g["id"].as_str().unwrap())).await;
    assert!(!g2["revokedAt"].is_null());

    // Remove member: the same dialog, with what the removal takes away.
    b.goto("/admin/members").await;
    b.wait_for("form[action$='/remove'][data-confirm] button").await.click().await.unwrap();
    let text = b
        .poll(
            "the dialog",
            "const d = document.querySelector('dialog.confirm-dialog'); return d && d.open ? d.innerText : null",
            vec![],
        )
        .await;
    assert!(text.as_str().unwrap().contains("bob@acme.test loses access"), "{text}");
    b.screenshot("remove-dialog").await;
    b.find("dialog .confirm-ok").await.click().await.unwrap();
    b.flash("Member removed").await;
    let (_, members) = api.get_json("/api/members").await;
    assert_eq!(members["items"].as_array().unwrap().len(), 1);
    b.finish().await;
}

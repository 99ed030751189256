//! Invitations (issue #14 item 5): adding an email to a team invites it; the person joins only
//! through the invitation's link (issue 31 item 1: a signed-in account accepts only with the
//! link's secret), and the answer never tells whether the email has an account.

use mnote::db::{Scope, TenantTx};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

/// A session client signed in as `email`, with the CSRF token of the team picker.
async fn signed_in(app: &TestApp, email: &str) -> Client {
    let mut c = app.login(email).await;
    c.page("/tenants").await;
    assert!(c.csrf.is_some(), "no CSRF token on /tenants");
    c
}

/// The open invitations the client sees.
async fn my_invitations(c: &Client) -> Vec<Value> {
    let (st, v) = c.get_json("/api/invitations").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["items"].as_array().unwrap().clone()
}

/// The path of an invitation link (`…/join/<token>`) from the API's `inviteUrl`.
fn join_path(url: &str) -> String {
    format!("/join/{}", url.rsplit("/join/").next().unwrap())
}

/// The token of the invitation link in an answer of `POST /api/members`.
fn token(v: &Value) -> String {
    v["inviteUrl"].as_str().unwrap_or_else(|| panic!("no link: {v}")).rsplit("/join/").next().unwrap().to_string()
}

async fn member_emails(owner: &Client) -> Vec<String> {
    let (st, v) = owner.get_json("/api/members").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["items"].as_array().unwrap().iter().map(|m| m["email"].as_str().unwrap().to_lowercase()).collect()
}

/// Invite `email` (no account yet) through the API (as `admin`); the person joins through the
/// link with the password `PASSWORD`. The new member's id. For tests that need a member added
/// the way the API does it.
pub async fn invite_and_accept(app: &TestApp, admin: &Client, email: &str, role: &str) -> Uuid {
    let (st, v) = admin.post_json("/api/members", json!({"email": email, "role": role})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let path = join_path(v["inviteUrl"].as_str().unwrap());
    let mut person = app.client();
    person.page(&path).await;
    let r = person.post_form(&path, &[("password", PASSWORD), ("confirm_password", PASSWORD)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, list) = admin.get_json("/api/members").await;
    let m = list["items"].as_array().unwrap().iter().find(|m| m["email"] == email).expect("member after accepting").clone();
    m["id"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn another_teams_member_is_only_invited_until_they_accept() {
    let app = spawn_app().await;
    let alpha = app.bootstrap("alpha", "owner@alpha.test").await;
    let a_id = app.add_user(alpha.tenant_id, "a@alpha.test", "member").await;
    let beta = app.bootstrap("beta", "owner@beta.test").await;
    let beta_owner = app.api(beta.tenant_id, beta.user_id).await;

    let (st, v) = beta_owner.post_json("/api/members", json!({"email": "A@Alpha.test", "role": "admin"})).await;
    assert_eq!((st, v["status"].as_str(), v["email"].as_str()), (StatusCode::ACCEPTED, Some("invited"), Some("a@alpha.test")));
    let link = token(&v);
    assert!(v["inviteUrl"].as_str().is_some_and(|u| u.contains("/join/")), "{v}");
    // No membership: beta does not list them, and they cannot act in beta.
    assert!(!member_emails(&beta_owner).await.contains(&"a@alpha.test".to_string()));
    let (st, list) = beta_owner.get_json("/api/members/invitations").await;
    assert_eq!((st, list["items"][0]["email"].as_str()), (StatusCode::OK, Some("a@alpha.test")));
    let mut tx = TenantTx::begin_user_only(&app.pool, a_id).await.unwrap();
    let n: i64 =
        sqlx::query_scalar("select count(*) from membership where user_id = $1").bind(a_id).fetch_one(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(n, 1, "only alpha");

    // Signing in shows the invitation on the team picker.
    let c = app.client();
    let r = c.login("a@alpha.test", PASSWORD).await;
    assert_eq!(r.headers()["location"].to_str().unwrap(), "/tenants?next=%2F", "open invitations are shown after sign-in");
    let mut a = signed_in(&app, "a@alpha.test").await;
    // Who invites shows once the invitee opened the link signed in (issue 39 item 3).
    let inv = my_invitations(&a).await;
    assert_eq!((inv.len(), inv[0]["opened"].as_bool(), inv[0]["tenantName"].as_str()), (1, Some(false), None));
    let (st, html) = a.page(&format!("/join/{link}")).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains(&format!("action=\"/join/{link}/decline\"")), "{html}");
    let (_, html) = a.page("/tenants").await;
    assert!(html.contains("beta") && html.contains("/accept"), "{html}");
    let r = a.post_form("/tenants/switch", &[("tenant_id", &beta.tenant_id.to_string())]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND, "not a member of beta before accepting");
    let inv = my_invitations(&a).await;
    assert_eq!(inv.len(), 1);
    assert_eq!((inv[0]["tenantName"].as_str(), inv[0]["role"].as_str()), (Some("beta"), Some("admin")));
    assert_eq!(inv[0]["invitedBy"].as_str(), Some("owner@beta.test"));

    // Accepting (here with alpha's token: the invitation belongs to the person), with the
    // link's secret, joins beta.
    let a_token = app.api(alpha.tenant_id, a_id).await;
    let id = inv[0]["id"].as_str().unwrap();
    let (st, v) = a_token.post_json(&format!("/api/invitations/{id}/accept"), json!({"token": link})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!((v["tenantId"].as_str(), v["role"].as_str()), (Some(beta.tenant_id.to_string().as_str()), Some("admin")));
    assert!(member_emails(&beta_owner).await.contains(&"a@alpha.test".to_string()));
    let r = a.post_form("/tenants/switch", &[("tenant_id", &beta.tenant_id.to_string())]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, s) = a.get_json("/api/session").await;
    assert_eq!((s["tenant"]["name"].as_str(), s["role"].as_str()), (Some("beta"), Some("admin")));
    assert!(my_invitations(&a).await.is_empty());
}

#[tokio::test]
async fn declined_expired_or_accepted_invitations_cannot_be_accepted() {
    let app = spawn_app().await;
    let alpha = app.bootstrap("alpha", "owner@alpha.test").await;
    app.add_user(alpha.tenant_id, "a@alpha.test", "member").await;
    let beta = app.bootstrap("beta", "owner@beta.test").await;
    let owner = app.api(beta.tenant_id, beta.user_id).await;
    let a = signed_in(&app, "a@alpha.test").await;

    // Declined (through the page form).
    let (_, v) = owner.post_json("/api/members", json!({"email": "a@alpha.test", "role": "member"})).await;
    let link = token(&v);
    let id = my_invitations(&a).await[0]["id"].as_str().unwrap().to_string();
    let r = a.post_form(&format!("/invitations/{id}/decline"), &[]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY, "declining needs the link");
    let r = a.post_form(&format!("/invitations/{id}/decline"), &[("link", link.as_str())]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(my_invitations(&a).await.is_empty());
    let (st, e) = a.post_json(&format!("/api/invitations/{id}/accept"), json!({"token": link})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::CONFLICT, "conflict"));

    // Expired.
    let (_, v) = owner.post_json("/api/members", json!({"email": "a@alpha.test", "role": "member"})).await;
    let link = token(&v);
    let id = my_invitations(&a).await[0]["id"].as_str().unwrap().to_string();
    let mut tx = TenantTx::begin(&app.pool, beta.tenant_id, Scope::System).await.unwrap();
    let r = sqlx::query("update invitation set expires_at = now() - interval '1 minute' where id = $1")
        .bind(id.parse::<Uuid>().unwrap())
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(r.rows_affected(), 1);
    assert!(my_invitations(&a).await.is_empty(), "an expired invitation is not offered");
    let (st, e) = a.post_json(&format!("/api/invitations/{id}/accept"), json!({"token": link})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::CONFLICT, "conflict"));
    let r = a.post_form(&format!("/invitations/{id}/accept"), &[("link", link.as_str())]).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(!member_emails(&owner).await.contains(&"a@alpha.test".to_string()));

    // Accepted once, not twice; the default expiry is 14 days.
    let (st, v) = owner.post_json("/api/members", json!({"email": "a@alpha.test", "role": "member"})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let link = v["inviteUrl"].as_str().unwrap().to_string();
    let inv = my_invitations(&a).await;
    let mut tx = TenantTx::begin(&app.pool, beta.tenant_id, Scope::System).await.unwrap();
    let days: f64 =
        sqlx::query_scalar("select (extract(epoch from expires_at - created_at) / 86400)::float8 from invitation where id = $1")
            .bind(inv[0]["id"].as_str().unwrap().parse::<Uuid>().unwrap())
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(days.round() as i64, 14);
    let id = inv[0]["id"].as_str().unwrap();
    // The picker's form takes the pasted link (the whole URL).
    let r = a.post_form(&format!("/invitations/{id}/accept"), &[("link", link.as_str())]).await;
    assert_eq!((r.status(), r.headers()["location"].to_str().unwrap()), (StatusCode::SEE_OTHER, "/"));
    let (st, e) = a.post_json(&format!("/api/invitations/{id}/accept"), json!({"token": link})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::CONFLICT, "conflict"));
    // The form switched the session to the team just joined.
    let (_, s) = a.get_json("/api/session").await;
    assert_eq!(s["tenant"]["name"].as_str(), Some("beta"));
}

#[tokio::test]
async fn the_answer_is_the_same_whether_or_not_the_email_has_an_account() {
    let app = spawn_app().await;
    let alpha = app.bootstrap("alpha", "owner@alpha.test").await;
    app.add_user(alpha.tenant_id, "known@alpha.test", "member").await;
    let beta = app.bootstrap("beta", "owner@beta.test").await;
    let owner = app.api(beta.tenant_id, beta.user_id).await;
    // The link's secret differs per invitation; its shape is the same for both.
    let without_email = |mut v: Value| {
        v.as_object_mut().unwrap().remove("email");
        let url = v.as_object_mut().unwrap().remove("inviteUrl").unwrap();
        assert!(url.as_str().unwrap().contains("/join/"), "{url}");
        v
    };
    // With a password (issue 31 item 1: refused, the same way for both).
    for body in [json!({"role": "member"}), json!({"role": "member", "password": PASSWORD})] {
        let mut answers = Vec::new();
        for email in ["known@alpha.test", "unknown@nowhere.test"] {
            let mut b = body.clone();
            b["email"] = json!(email);
            let (st, v) = owner.post_json("/api/members", b).await;
            if st == StatusCode::ACCEPTED {
                assert_eq!(v["email"].as_str(), Some(email));
                answers.push((st, without_email(v)));
            } else {
                assert_eq!((st, error_code(&v)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{v}");
                answers.push((st, v));
            }
        }
        assert_eq!(answers[0], answers[1], "{body}");
        if body.get("password").is_none() {
            assert_eq!(answers[0], (StatusCode::ACCEPTED, json!({"status": "invited"})));
        }
    }
    // Any password is refused the same way for both.
    let mut answers = Vec::new();
    for email in ["known@alpha.test", "other@nowhere.test"] {
        let (st, v) = owner.post_json("/api/members", json!({"email": email, "role": "member", "password": "short"})).await;
        answers.push((st, v));
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0].0, StatusCode::UNPROCESSABLE_ENTITY);
    // The same through the members page: one flash message.
    let mut page = signed_in(&app, "owner@beta.test").await;
    let mut flashes = Vec::new();
    for email in ["known@alpha.test", "third@nowhere.test"] {
        page.page("/admin/members").await;
        let r = page.post_form("/admin/members", &[("email", email), ("role", "member"), ("password", "")]).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        let (_, html) = page.page("/admin/members").await;
        // The flash names the email and says that no email is sent (the admin sends the link).
        let flash = html
            .split("Invitation created for ")
            .nth(1)
            .map(|s| s.split(". No email is sent").next().unwrap().trim().to_string());
        assert!(!html.contains("Invitation sent"), "no email is sent, so none is promised");
        flashes.push(flash);
    }
    assert_eq!(flashes, [Some("known@alpha.test".to_string()), Some("third@nowhere.test".to_string())]);

    // The known account kept its password; no account was created for the new email.
    app.login("known@alpha.test").await;
    assert!(mnote::auth::directory::user_by_email(&app.pool, "unknown@nowhere.test").await.unwrap().is_none());
}

#[tokio::test]
async fn nobody_else_can_accept_or_see_an_invitation() {
    let app = spawn_app().await;
    let alpha = app.bootstrap("alpha", "owner@alpha.test").await;
    app.add_user(alpha.tenant_id, "a@alpha.test", "member").await;
    let beta = app.bootstrap("beta", "owner@beta.test").await;
    app.add_user(beta.tenant_id, "b@beta.test", "member").await;
    let owner = app.api(beta.tenant_id, beta.user_id).await;
    let (_, v) = owner.post_json("/api/members", json!({"email": "a@alpha.test", "role": "owner"})).await;
    let link = token(&v);
    let a = signed_in(&app, "a@alpha.test").await;
    let id = my_invitations(&a).await[0]["id"].as_str().unwrap().to_string();

    // Neither another user nor the inviting owner can see, accept (even with the link) or
    // decline it.
    for email in ["b@beta.test", "owner@beta.test", "owner@alpha.test"] {
        let other = signed_in(&app, email).await;
        assert!(my_invitations(&other).await.is_empty(), "{email} sees a's invitation");
        let (st, e) = other.post_json(&format!("/api/invitations/{id}/accept"), json!({"token": link})).await;
        assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"), "{email}");
        let r = other.post_form(&format!("{}/accept", join_path(&link)), &[]).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{email} through the link page");
        let (st, _) = other.post_json(&format!("/api/invitations/{id}/decline"), json!({"token": link})).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{email}");
        let r = other.post_form(&format!("{}/decline", join_path(&link)), &[]).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{email} through the link page");
    }
    let (st, _) = owner.post_json(&format!("/api/invitations/{id}/accept"), json!({"token": link})).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "the inviter's token");
    // Still open for a.
    assert_eq!(my_invitations(&a).await.len(), 1);
    // Only admins invite, and only owners invite owners.
    let member = app.api(beta.tenant_id, app.add_user(beta.tenant_id, "m@beta.test", "admin").await).await;
    let (st, e) = member.post_json("/api/members", json!({"email": "x@y.test", "role": "owner"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::FORBIDDEN, "forbidden"));
}

#[tokio::test]
async fn an_admin_can_withdraw_an_open_invitation_and_it_can_no_longer_be_accepted() {
    let app = spawn_app().await;
    let alpha = app.bootstrap("alpha", "owner@alpha.test").await;
    app.add_user(alpha.tenant_id, "a@alpha.test", "member").await;
    let beta = app.bootstrap("beta", "owner@beta.test").await;
    let beta_owner = app.api(beta.tenant_id, beta.user_id).await;
    let beta_member_id = app.add_user(beta.tenant_id, "m@beta.test", "member").await;
    let beta_member = app.api(beta.tenant_id, beta_member_id).await;
    let alpha_owner = app.api(alpha.tenant_id, alpha.user_id).await;

    let (st, v) = beta_owner.post_json("/api/members", json!({"email": "a@alpha.test", "role": "member"})).await;
    assert_eq!(st, StatusCode::ACCEPTED);
    let link = token(&v);
    let (_, list) = beta_owner.get_json("/api/members/invitations").await;
    let id = list["items"][0]["id"].as_str().unwrap().to_string();
    let path = format!("/api/members/invitations/{id}");
    // Members may not withdraw; another team's owner does not even see it.
    let (st, v) = beta_member.delete_json(&path).await;
    assert_eq!((st, error_code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "{v}");
    assert_eq!(alpha_owner.delete_json(&path).await.0, StatusCode::NOT_FOUND);
    assert_eq!(beta_owner.delete(&path).await, StatusCode::NO_CONTENT);
    assert_eq!(beta_owner.delete(&path).await, StatusCode::NOT_FOUND, "already withdrawn");
    // The person no longer sees it and cannot accept it.
    let person = signed_in(&app, "a@alpha.test").await;
    assert!(my_invitations(&person).await.is_empty());
    let (st, _) = person.post_json(&format!("/api/invitations/{id}/accept"), json!({"token": link})).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(!member_emails(&beta_owner).await.contains(&"a@alpha.test".to_string()));
}

/// Invite by link (issue #16): a person without an account opens the link, sets a password
/// and is a member, signed in; the link works once and expires; someone with an account is
/// told to sign in instead; a renewed link replaces the old one.
#[tokio::test]
async fn a_person_without_an_account_joins_through_the_invitation_link() {
    let app = spawn_app().await;
    let beta = app.bootstrap("beta", "owner@beta.test").await;
    let owner = app.api(beta.tenant_id, beta.user_id).await;
    let (st, v) = owner.post_json("/api/members", json!({"email": "new@person.test", "role": "admin"})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let url = v["inviteUrl"].as_str().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:") && url.contains("/join/"), "absolute, copyable: {url}");
    let path = join_path(&url);

    let mut guest = app.client();
    let (st, html) = guest.page(&path).await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert!(html.contains("beta") && html.contains("new@person.test") && html.contains("name=\"password\""), "{html}");
    // Inline errors: a short password, mismatched confirmation; the link stays usable.
    let r = guest.post_form(&path, &[("password", "short"), ("confirm_password", "short")]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("at least 10 characters"));
    let r = guest.post_form(&path, &[("password", PASSWORD), ("confirm_password", "something else")]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("The two passwords differ."));
    // Joining: signed in, in the team with the invited role.
    let r = guest.post_form(&path, &[("password", PASSWORD), ("confirm_password", PASSWORD)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/");
    let (st, me) = guest.get_json("/api/session").await;
    assert_eq!(st, StatusCode::OK, "{me}");
    assert_eq!((me["tenant"]["name"].as_str(), me["role"].as_str()), (Some("beta"), Some("admin")));
    assert!(member_emails(&owner).await.contains(&"new@person.test".to_string()));
    assert_eq!(app.client().login("new@person.test", PASSWORD).await.status(), StatusCode::SEE_OTHER);
    // Single use: the link is gone now.
    let mut other = app.client();
    let (st, html) = other.page(&path).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(html.contains("not valid"), "{html}");
    let r = other.post_form(&path, &[("password", PASSWORD), ("confirm_password", PASSWORD)]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let (_, open) = owner.get_json("/api/members/invitations").await;
    assert!(open["items"].as_array().unwrap().is_empty(), "{open}");

    // An email with an account: the link says to sign in and accept; it creates nothing.
    app.bootstrap("alpha", "known@alpha.test").await;
    let (_, v) = owner.post_json("/api/members", json!({"email": "known@alpha.test", "role": "member"})).await;
    let known = join_path(v["inviteUrl"].as_str().unwrap());
    let mut k = app.client();
    let (st, html) = k.page(&known).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("exists already") && !html.contains("name=\"confirm_password\""), "{html}");
    let r = k.post_form(&known, &[("password", "another password"), ("confirm_password", "another password")]).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert_eq!(app.client().login("known@alpha.test", PASSWORD).await.status(), StatusCode::SEE_OTHER, "password kept");

    // Expired: 410 with the explanation.
    let (_, v) = owner.post_json("/api/members", json!({"email": "late@person.test", "role": "member"})).await;
    let late = join_path(v["inviteUrl"].as_str().unwrap());
    let mut tx = TenantTx::begin(&app.pool, beta.tenant_id, Scope::User(beta.user_id)).await.unwrap();
    let n = sqlx::query("update invitation set expires_at = now() - interval '1 minute' where email = 'late@person.test'")
        .execute(&mut *tx)
        .await
        .unwrap()
        .rows_affected();
    tx.commit().await.unwrap();
    assert_eq!(n, 1);
    let mut l = app.client();
    let (st, html) = l.page(&late).await;
    assert_eq!(st, StatusCode::GONE);
    assert!(html.contains("expired"), "{html}");
    let r = l.post_form(&late, &[("password", PASSWORD), ("confirm_password", PASSWORD)]).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(mnote::auth::directory::user_by_email(&app.pool, "late@person.test").await.unwrap().is_none());

    // Garbage and forged tokens: 404, no error page leak.
    let mut g = app.client();
    for bad in ["/join/nonsense", &format!("/join/{}.{}", beta.tenant_id.simple(), "A".repeat(43))] {
        assert_eq!(g.page(bad).await.0, StatusCode::NOT_FOUND, "{bad}");
    }

    // The members page: the link shown once with a copy button; "new link" replaces it.
    let mut page = app.login("owner@beta.test").await;
    page.page("/admin/members").await;
    let r = page.post_form("/admin/members", &[("email", "page@person.test"), ("role", "member")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = page.page("/admin/members").await;
    let doc = scraper::Html::parse_document(&html);
    let input = scraper::Selector::parse("#invite-link").unwrap();
    let first = doc.select(&input).next().expect("link shown").value().attr("value").unwrap().to_string();
    assert!(html.contains("data-copy=\"#invite-link\""));
    let (_, again) = page.page("/admin/members").await;
    assert!(!again.contains("id=\"invite-link\""), "shown once");
    let (_, list) = owner.get_json("/api/members/invitations").await;
    let id = list["items"].as_array().unwrap().iter().find(|i| i["email"] == "page@person.test").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = page.post_form(&format!("/admin/members/invitations/{id}/link"), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = page.page("/admin/members").await;
    let doc = scraper::Html::parse_document(&html);
    let second = doc.select(&input).next().expect("new link shown").value().attr("value").unwrap().to_string();
    assert_ne!(first, second);
    assert_eq!(app.client().get(&join_path(&first)).await.status(), StatusCode::NOT_FOUND, "the old link stopped working");
    assert_eq!(app.client().get(&join_path(&second)).await.status(), StatusCode::OK);
    // The invite form's errors are inline, with the navigation.
    let r = page.post_form("/admin/members", &[("email", "not-an-email"), ("role", "member")]).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.unwrap();
    assert!(html.contains("That is not a valid email address.") && html.contains("class=\"mainnav"), "{html}");
}

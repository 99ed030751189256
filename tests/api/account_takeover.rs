//! Issue 31 item 1: the cross-tenant account pre-hijack. A team admin must never choose the
//! password of an account that may be someone else's, and an invitation is accepted only by
//! whoever holds that invitation's own link: team A's admin, who can create an account for
//! any email through A's link, can never accept team B's invitation to that email.

use mnote::auth::directory::user_by_email;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

const VICTIM: &str = "victim@corp.test";
/// The password the attacker (team A's admin) would like the victim's account to have.
const EVIL: &str = "mallory chose this one";
/// Team B's secret: the name of a team KB, readable by any member of B.
const SECRET: &str = "Project Nightingale merger";

/// The path of an invitation link (`…/join/<token>`) from the API's `inviteUrl`.
fn join_path(v: &Value) -> String {
    let url = v["inviteUrl"].as_str().unwrap_or_else(|| panic!("no inviteUrl: {v}"));
    format!("/join/{}", url.rsplit("/join/").next().unwrap())
}

/// A session client signed in as `email` with `password`, CSRF token loaded.
async fn signed_in_with(app: &TestApp, email: &str, password: &str) -> Client {
    let mut c = app.client();
    let r = c.login(email, password).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "sign-in as {email}");
    c.page("/tenants").await;
    assert!(c.csrf.is_some());
    c
}

async fn member_emails(owner: &Client) -> Vec<String> {
    let (st, v) = owner.get_json("/api/members").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["items"].as_array().unwrap().iter().map(|m| m["email"].as_str().unwrap().to_lowercase()).collect()
}

#[tokio::test]
async fn an_admin_never_sets_the_password_of_an_account() {
    let app = spawn_app().await;
    let alpha = app.bootstrap("alpha", "mallory@alpha.test").await;
    app.bootstrap("other", "known@other.test").await;
    let mallory = app.api(alpha.tenant_id, alpha.user_id).await;
    // With a password, for a new email and for one that has an account: the same refusal,
    // naming the field; nothing is created or changed, no invitation is left behind.
    let mut answers = Vec::new();
    for email in [VICTIM, "known@other.test"] {
        let (st, e) = mallory.post_json("/api/members", json!({"email": email, "role": "admin", "password": EVIL})).await;
        assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{e}");
        let msg = e["error"]["fields"]["password"].as_str().unwrap_or_default();
        assert!(msg.contains("link"), "the message says the invitee sets their own password: {e}");
        answers.push(e);
    }
    assert_eq!(answers[0], answers[1], "the answer does not tell which email has an account");
    assert!(user_by_email(&app.pool, VICTIM).await.unwrap().is_none(), "an account was created with the admin's password");
    assert_eq!(app.client().login(VICTIM, EVIL).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(app.client().login("known@other.test", EVIL).await.status(), StatusCode::UNAUTHORIZED);
    let (_, open) = mallory.get_json("/api/members/invitations").await;
    assert_eq!(open["items"].as_array().map(Vec::len), Some(0), "{open}");
}

/// The whole chain of the attack pass: team A's admin invites the victim's email, creates the
/// account through A's own link (the link is shown to the inviting admin, so this cannot be
/// prevented without email), team B invites the same email as admin, and the attacker, signed
/// in as the victim's email, tries every way to accept B's invitation and read B's secret.
#[tokio::test]
async fn a_team_admin_cannot_take_over_another_teams_invitation() {
    let app = spawn_app().await;
    let alpha = app.bootstrap("alpha", "mallory@alpha.test").await;
    let beta = app.bootstrap("beta", "owner@beta.test").await;
    let mallory = app.api(alpha.tenant_id, alpha.user_id).await;
    let beta_owner = app.api(beta.tenant_id, beta.user_id).await;
    let (st, kb) = beta_owner.post_json("/api/kbs", json!({"name": SECRET, "visibility": "team"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");

    // 1. Inviting with a password is refused outright.
    let (st, e) = mallory.post_json("/api/members", json!({"email": VICTIM, "role": "member", "password": EVIL})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{e}");
    assert!(user_by_email(&app.pool, VICTIM).await.unwrap().is_none());

    // 2. Without one: A's link. Mallory holds it and creates "the victim's" account with it.
    let (st, v) = mallory.post_json("/api/members", json!({"email": VICTIM, "role": "member"})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let link_a = join_path(&v);
    let mut m = app.client();
    m.page(&link_a).await;
    let r = m.post_form(&link_a, &[("password", EVIL), ("confirm_password", EVIL)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);

    // 3. Team B invites the same email as admin; B's owner gives B's link to the real person.
    let (st, v) = beta_owner.post_json("/api/members", json!({"email": VICTIM, "role": "admin"})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let link_b = join_path(&v);

    // 4. Mallory signs in as the victim's email and tries to accept B's invitation.
    let as_victim = signed_in_with(&app, VICTIM, EVIL).await;
    let (_, mine) = as_victim.get_json("/api/invitations").await;
    // B's invitation is the only open one (A's was used); which team it is stays hidden.
    assert_eq!(mine["items"].as_array().map(Vec::len), Some(1), "{mine}");
    let id = mine["items"][0]["id"].as_str().unwrap().to_string();
    let accept = format!("/api/invitations/{id}/accept");
    let (st, e) = as_victim.post_json(&accept, json!({})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "accepted without B's link: {e}");
    let forged = format!("{}.{}", beta.tenant_id, "A".repeat(43));
    let used_a = link_a.trim_start_matches("/join/").to_string();
    for token in [used_a.as_str(), forged.as_str(), ""] {
        let (st, e) = as_victim.post_json(&accept, json!({"token": token})).await;
        assert!(st.is_client_error(), "accepted with {token:?}: {st} {e}");
    }
    for fields in [vec![], vec![("link", link_a.as_str())], vec![("link", forged.as_str())]] {
        let r = as_victim.post_form(&format!("/invitations/{id}/accept"), &fields).await;
        assert!(r.status().is_client_error(), "the picker's form accepted with {fields:?}: {}", r.status());
    }
    // With a token of team A for the same account.
    let victim_id = user_by_email(&app.pool, VICTIM).await.unwrap().unwrap().id;
    let token_client = app.api(alpha.tenant_id, victim_id).await;
    let (st, e) = token_client.post_json(&accept, json!({})).await;
    assert!(st.is_client_error(), "accepted with an API token: {e}");
    // 5. Nothing of B is reachable: no membership, no team switch, no KB, the invitation open.
    let r = as_victim.post_form("/tenants/switch", &[("tenant_id", &beta.tenant_id.to_string())]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND, "switched into beta");
    assert!(!member_emails(&beta_owner).await.contains(&VICTIM.to_string()), "a member of beta");
    for path in ["/api/kbs", "/api/session", "/api/invitations", "/"] {
        for c in [&as_victim, &token_client] {
            let body = c.get(path).await.text().await.unwrap();
            assert!(!body.contains(SECRET), "{path} shows B's secret");
        }
    }
    let (_, open) = beta_owner.get_json("/api/members/invitations").await;
    assert!(open["items"].as_array().unwrap().iter().any(|i| i["email"] == VICTIM), "{open}");

    // A second link of team A cannot set the existing account's password either.
    assert_eq!(mallory.delete(&format!("/api/members/{victim_id}")).await, StatusCode::NO_CONTENT);
    let (_, v) = mallory.post_json("/api/members", json!({"email": VICTIM, "role": "member"})).await;
    let link_a2 = join_path(&v);
    let mut m2 = app.client();
    m2.page(&link_a2).await;
    let other = "yet another password";
    let r = m2.post_form(&link_a2, &[("password", other), ("confirm_password", other)]).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert_eq!(app.client().login(VICTIM, other).await.status(), StatusCode::UNAUTHORIZED);

    // The real person with B's link is told that the email has an account (to sign in with);
    // B's link cannot set that account's password.
    let mut real = app.client();
    let (st, html) = real.page(&link_b).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("exists already") && !html.contains("name=\"confirm_password\""), "{html}");
    let r = real.post_form(&link_b, &[("password", PASSWORD), ("confirm_password", PASSWORD)]).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert_eq!(app.client().login(VICTIM, PASSWORD).await.status(), StatusCode::UNAUTHORIZED);
    assert!(!member_emails(&beta_owner).await.contains(&VICTIM.to_string()));
}

/// The rule the chain above depends on: a signed-in invitee accepts only with the secret of
/// that very invitation's link (API: `token`; the team picker: the pasted link; the link page
/// itself: a button). Another invitation's link does not do.
#[tokio::test]
async fn an_invitation_is_accepted_only_with_its_own_link() {
    let app = spawn_app().await;
    let alpha = app.bootstrap("alpha", "owner@alpha.test").await;
    app.add_user(alpha.tenant_id, "a@alpha.test", "member").await;
    let beta = app.bootstrap("beta", "owner@beta.test").await;
    let gamma = app.bootstrap("gamma", "owner@gamma.test").await;
    let beta_owner = app.api(beta.tenant_id, beta.user_id).await;
    let gamma_owner = app.api(gamma.tenant_id, gamma.user_id).await;
    let (_, v) = beta_owner.post_json("/api/members", json!({"email": "a@alpha.test", "role": "admin"})).await;
    let link_b = join_path(&v);
    let (_, v) = gamma_owner.post_json("/api/members", json!({"email": "a@alpha.test", "role": "member"})).await;
    let link_g = join_path(&v);

    let mut a = signed_in_with(&app, "a@alpha.test", PASSWORD).await;
    // The invitee opens both links (then its list names the teams, issue 39 item 3).
    a.page(&link_b).await;
    a.page(&link_g).await;
    let (_, mine) = a.get_json("/api/invitations").await;
    let id_of = |team: &str| {
        mine["items"].as_array().unwrap().iter().find(|i| i["tenantName"] == team).unwrap()["id"].as_str().unwrap().to_string()
    };
    let (id_b, id_g) = (id_of("beta"), id_of("gamma"));
    // Without a link, or with gamma's link for beta's invitation: refused, still open.
    let (st, e) = a.post_json(&format!("/api/invitations/{id_b}/accept"), json!({})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{e}");
    assert!(e["error"]["fields"]["token"].is_string(), "{e}");
    let g_token = link_g.trim_start_matches("/join/");
    let (st, e) = a.post_json(&format!("/api/invitations/{id_b}/accept"), json!({"token": g_token})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"), "{e}");
    assert!(!member_emails(&beta_owner).await.contains(&"a@alpha.test".to_string()));

    // With its own link (the whole URL is accepted too): joined.
    let (st, v) =
        a.post_json(&format!("/api/invitations/{id_b}/accept"), json!({"token": format!("http://example.test{link_b}")})).await;
    assert_eq!((st, v["role"].as_str()), (StatusCode::OK, Some("admin")), "{v}");
    assert!(member_emails(&beta_owner).await.contains(&"a@alpha.test".to_string()));

    // The link page, signed in as the invitee: an accept button that joins and switches.
    let (st, html) = a.page(&link_g).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains(&format!("action=\"{link_g}/accept\"")), "{html}");
    let r = a.post_form(&format!("{link_g}/accept"), &[]).await;
    assert_eq!((r.status(), r.headers()["location"].to_str().unwrap()), (StatusCode::SEE_OTHER, "/"));
    let (_, s) = a.get_json("/api/session").await;
    assert_eq!(s["tenant"]["name"].as_str(), Some("gamma"));
    assert!(member_emails(&gamma_owner).await.contains(&"a@alpha.test".to_string()));
    let (st, e) = a.post_json(&format!("/api/invitations/{id_g}/accept"), json!({"token": g_token})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::CONFLICT, "conflict"), "a used link: {e}");

    // Signed in as someone else, the link page does not offer to accept; posting is refused.
    let (_, v) = gamma_owner.post_json("/api/members", json!({"email": "third@alpha.test", "role": "member"})).await;
    let link_third = join_path(&v);
    app.add_user(alpha.tenant_id, "third@alpha.test", "member").await;
    let (st, html) = a.page(&link_third).await;
    assert_eq!(st, StatusCode::OK);
    assert!(!html.contains(&format!("action=\"{link_third}/accept\"")) && html.contains("third@alpha.test"), "{html}");
    let r = a.post_form(&format!("{link_third}/accept"), &[]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // Signed out, it says to sign in and come back to this link.
    let (st, html) = app.client().page(&link_third).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains(&format!("/login?next={link_third}")), "{html}");
}

/// Issue 39 item 3, invitation squatting: team A's admin makes an account for the victim's
/// email through A's own link. That account must not learn which other team invites the
/// email (team, role, inviter), nor decline that invitation without its link: before, it
/// listed B's invitation with all three and declined it with an empty body, B's link then
/// answered 404 and B's admin saw the invitation silently gone.
#[tokio::test]
async fn an_account_made_through_another_teams_link_can_neither_see_nor_decline_an_invitation() {
    let app = spawn_app().await;
    let alpha = app.bootstrap("alpha", "mallory@alpha.test").await;
    let beta = app.bootstrap("beta", "owner@beta.test").await;
    let mallory = app.api(alpha.tenant_id, alpha.user_id).await;
    let beta_owner = app.api(beta.tenant_id, beta.user_id).await;
    let (_, v) = mallory.post_json("/api/members", json!({"email": VICTIM, "role": "member"})).await;
    let link_a = join_path(&v);
    let mut m = app.client();
    m.page(&link_a).await;
    let r = m.post_form(&link_a, &[("password", EVIL), ("confirm_password", EVIL)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (st, v) = beta_owner.post_json("/api/members", json!({"email": VICTIM, "role": "admin"})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let link_b = join_path(&v);
    let token_b = link_b.trim_start_matches("/join/").to_string();

    // Signed in as the email: there is an invitation, and nothing says whose.
    let mut as_victim = signed_in_with(&app, VICTIM, EVIL).await;
    let (st, mine) = as_victim.get_json("/api/invitations").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(mine["items"].as_array().map(Vec::len), Some(1), "{mine}");
    let inv = &mine["items"][0];
    assert_eq!(inv["opened"], false, "{mine}");
    for field in ["tenantId", "tenantName", "role", "invitedBy"] {
        assert!(inv[field].is_null(), "{field} is shown before the link was opened: {mine}");
    }
    let (_, html) = as_victim.page("/tenants").await;
    assert!(!html.contains("<strong>beta</strong>") && !html.contains("owner@beta.test"), "{html}");
    let id = inv["id"].as_str().unwrap().to_string();

    // Declining without B's link: refused every way, and the invitation stays open.
    let decline = format!("/api/invitations/{id}/decline");
    let (st, e) = as_victim.post_json(&decline, json!({})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "declined without a link: {e}");
    assert!(e["error"]["fields"]["token"].is_string(), "{e}");
    let forged = format!("{}.{}", beta.tenant_id, "A".repeat(43));
    let used_a = link_a.trim_start_matches("/join/").to_string();
    for token in [used_a.as_str(), forged.as_str()] {
        let (st, e) = as_victim.post_json(&decline, json!({"token": token})).await;
        assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"), "declined with {token:?}: {e}");
    }
    for fields in [vec![], vec![("link", link_a.as_str())], vec![("link", forged.as_str())]] {
        let r = as_victim.post_form(&format!("/invitations/{id}/decline"), &fields).await;
        assert!(r.status().is_client_error(), "the picker's form declined with {fields:?}: {}", r.status());
    }
    let victim_id = user_by_email(&app.pool, VICTIM).await.unwrap().unwrap().id;
    let (st, e) = app.api(alpha.tenant_id, victim_id).await.post_json(&decline, json!({})).await;
    assert!(st.is_client_error(), "declined with an API token: {e}");
    // B's side is untouched: its admin still lists the invitation, its link still opens.
    let (_, open) = beta_owner.get_json("/api/members/invitations").await;
    assert!(open["items"].as_array().unwrap().iter().any(|i| i["email"] == VICTIM), "{open}");
    let (st, _) = app.client().page(&link_b).await;
    assert_eq!(st, StatusCode::OK, "B's link must still work");

    // Whoever holds B's link and signs in as the email sees who invites once the link page
    // was opened, and may decline there (the link is used up).
    let (st, html) = as_victim.page(&link_b).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains(&format!("action=\"{link_b}/decline\"")), "{html}");
    let (_, mine) = as_victim.get_json("/api/invitations").await;
    let inv = &mine["items"][0];
    assert_eq!(
        (inv["opened"].as_bool(), inv["tenantName"].as_str(), inv["role"].as_str(), inv["invitedBy"].as_str()),
        (Some(true), Some("beta"), Some("admin"), Some("owner@beta.test")),
        "{mine}"
    );
    assert_eq!(inv["tenantId"].as_str(), Some(beta.tenant_id.to_string().as_str()));
    let r = as_victim.post_form(&format!("{link_b}/decline"), &[]).await;
    assert_eq!((r.status(), r.headers()["location"].to_str().unwrap()), (StatusCode::SEE_OTHER, "/tenants"));
    let (st, e) = as_victim.post_json(&decline, json!({"token": token_b})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::CONFLICT, "conflict"), "{e}");
    let (_, open) = beta_owner.get_json("/api/members/invitations").await;
    assert!(!open["items"].as_array().unwrap().iter().any(|i| i["email"] == VICTIM), "{open}");
}

/// A renewed link (or a fresh invitation) forgets who opened the old one: its list hides the
/// team again until the new link is opened; the API declines with the link's token.
#[tokio::test]
async fn a_renewed_link_hides_the_invitation_again_until_it_is_opened() {
    let app = spawn_app().await;
    let alpha = app.bootstrap("alpha", "owner@alpha.test").await;
    app.add_user(alpha.tenant_id, "a@alpha.test", "member").await;
    let beta = app.bootstrap("beta", "owner@beta.test").await;
    let beta_owner = app.api(beta.tenant_id, beta.user_id).await;
    let (_, v) = beta_owner.post_json("/api/members", json!({"email": "a@alpha.test", "role": "member"})).await;
    let link = join_path(&v);
    let mut a = signed_in_with(&app, "a@alpha.test", PASSWORD).await;
    a.page(&link).await;
    let (_, mine) = a.get_json("/api/invitations").await;
    assert_eq!(mine["items"][0]["tenantName"], "beta", "{mine}");
    // Invited again: a new link, the opener forgotten.
    let (_, v) = beta_owner.post_json("/api/members", json!({"email": "a@alpha.test", "role": "member"})).await;
    let new_link = join_path(&v);
    let (_, mine) = a.get_json("/api/invitations").await;
    assert_eq!((mine["items"][0]["opened"].as_bool(), mine["items"][0]["tenantName"].as_str()), (Some(false), None), "{mine}");
    let id = mine["items"][0]["id"].as_str().unwrap().to_string();
    let (st, e) =
        a.post_json(&format!("/api/invitations/{id}/decline"), json!({"token": link.trim_start_matches("/join/")})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"), "the old link: {e}");
    let (st, e) =
        a.post_json(&format!("/api/invitations/{id}/decline"), json!({"token": format!("http://example.test{new_link}")})).await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{e}");
    let (_, open) = beta_owner.get_json("/api/members/invitations").await;
    assert_eq!(open["items"].as_array().map(Vec::len), Some(0), "{open}");
}

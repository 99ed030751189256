//! `/setup`, member administration (API + pages).

use askama::Template;
use axum::{
    Form, Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;
use uuid::Uuid;

use super::{
    audited,
    invitations::{self, Answer, TeamInvitation},
    settings::{self, TenantSettings},
};
use crate::{
    audit::Action,
    auth::{
        Account, Auth, ClientIp, SignedIn, TENANT_ID,
        account::start_session,
        directory::{self as q, Member, Role},
        handlers::SignedInOpt,
        session_err,
    },
    db::TenantTx,
    error::{ApiJson, AppError, AppResult, Items},
    state::AppState,
    web::{AnonCtx, Page, PageCtx, flash, form_error, render},
};

#[derive(Template)]
#[template(path = "auth/setup.html")]
struct SetupPage {
    ctx: PageCtx,
    tenant: String,
    email: String,
    error: Option<String>,
}

/// Where `/setup` sends a visitor once the server has its first account: sign-in, which says so.
const SETUP_DONE: &str = "/login?setup=done";

pub async fn setup_page(State(state): State<AppState>, AnonCtx(ctx): AnonCtx) -> AppResult<Response> {
    if q::any_users(&state.pool).await? {
        return Ok(Redirect::to(SETUP_DONE).into_response());
    }
    render(SetupPage { ctx, tenant: String::new(), email: String::new(), error: None })
}

/// Missing fields are empty strings: the page says what is wrong instead of a bare 422.
#[derive(Deserialize)]
pub struct SetupForm {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

pub async fn setup(
    State(state): State<AppState>,
    session: Session,
    AnonCtx(ctx): AnonCtx,
    Form(f): Form<SetupForm>,
) -> AppResult<Response> {
    match super::first_run_setup(&state.pool, &f.tenant, &f.email, &f.password).await {
        Ok(b) => {
            start_session(&session, &state.pool, b.user_id).await?;
            session.insert(TENANT_ID, b.tenant_id).await.map_err(session_err)?;
            Ok(Redirect::to("/").into_response())
        }
        Err(AppError::NotFound) => Ok(Redirect::to(SETUP_DONE).into_response()),
        Err(e @ AppError::Invalid { .. }) => {
            let message = form_error(ctx.lang, &e);
            let mut r = render(SetupPage { ctx, tenant: f.tenant, email: f.email, error: Some(message) })?;
            *r.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            Ok(r)
        }
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------- API

/// Admins and owners only (as documented): members see the people of the KBs they share.
pub async fn list_members(State(state): State<AppState>, auth: Auth) -> AppResult<Json<Items<Member>>> {
    auth.require_admin()?;
    let mut tx = auth.tx(&state).await?;
    let items = q::members(&mut tx).await?;
    tx.commit().await?;
    Ok(Json(items.into()))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewMember {
    #[schemars(email)]
    email: String,
    role: Role,
    /// Refused when present: an admin never sets an account's password (issue 31 item 1).
    password: Option<serde_json::Value>,
    /// How long the invitation stays open (default 14 days, at most 90).
    #[schemars(range(min = 1, max = invitations::MAX_TTL_DAYS))]
    expires_in_days: Option<i64>,
}

/// Only an owner may make owners; admins manage admins and members.
fn check_can_assign(auth: &Auth, role: Role) -> AppResult<()> {
    auth.require_admin()?;
    if role == Role::Owner && auth.role != Role::Owner {
        return Err(AppError::forbidden("only an owner can make owners"));
    }
    Ok(())
}

/// The answer to `POST /api/members`: `status` is always `invited`; `inviteUrl` only when the
/// email was not yet invited (the link is shown once).
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Invited {
    status: &'static str,
    email: String,
    invite_url: Option<String>,
}

/// `POST /api/members`: invite an email. The answer is `202 {"status": "invited", "email"}`
/// whether or not the email has an account, so it tells nobody which emails have accounts;
/// the person joins through the invitation's link. A `password` is refused (`invalid_input`):
/// the invitee sets their own through the link.
pub async fn add_member(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    headers: HeaderMap,
    ApiJson(m): ApiJson<NewMember>,
) -> AppResult<Response> {
    check_can_assign(&auth, m.role)?;
    if m.password.is_some() {
        return Err(AppError::invalid(
            "password",
            "an admin does not set passwords: the invitee sets their own through the invitation link",
        ));
    }
    let (email, link) =
        invitations::invite(&state.pool, auth.tenant_id, auth.user_id, &m.email, m.role, m.expires_in_days).await?;
    audited::by(&state, &auth, &ip, Action::InvitationCreate, &email, m.role.as_str()).await?;
    let url = link.map(|t| link_url(&state, &headers, &t));
    Ok((StatusCode::ACCEPTED, Json(Invited { status: "invited", email, invite_url: url })).into_response())
}

/// The absolute invitation link: under `MNOTE_PUBLIC_URL`, else this request's host.
pub fn link_url(state: &AppState, headers: &HeaderMap, token: &str) -> String {
    crate::web::absolute_link(state, headers, invitations::link_path(token))
}

/// `GET /api/members/invitations`: the team's open invitations (admins).
pub async fn list_team_invitations(State(state): State<AppState>, auth: Auth) -> AppResult<Json<Items<TeamInvitation>>> {
    auth.require_admin()?;
    let mut tx = auth.tx(&state).await?;
    let items = invitations::pending_for_team(&mut tx).await?;
    tx.commit().await?;
    Ok(Json(items.into()))
}

/// `DELETE /api/members/invitations/{id}`: (admins) withdraw an open invitation → 204.
pub async fn withdraw_invitation(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path(id): Path<Uuid>,
) -> AppResult<StatusCode> {
    auth.require_admin()?;
    let mut tx = auth.tx(&state).await?;
    let gone = invitations::withdraw(&mut tx, id).await?;
    if gone {
        auth.audit(&mut tx, &ip, Action::InvitationRevoke, format!("invitation:{id}"), "").await?;
    }
    tx.commit().await?;
    if gone { Ok(StatusCode::NO_CONTENT) } else { Err(AppError::NotFound) }
}

/// `GET /api/invitations`: the caller's own open invitations, from every team.
pub async fn my_invitations(State(state): State<AppState>, who: Account) -> AppResult<Json<Items<q::MyInvitation>>> {
    let mut tx = TenantTx::begin_user_only(&state.pool, who.user_id).await?;
    let items = q::pending_for_user(&mut tx).await?;
    tx.commit().await?;
    Ok(Json(items.into()))
}

/// The body of `POST /api/invitations/{id}/accept` and `…/decline`: the invitation link's
/// token (or the whole link). Required: answering either way needs the link's secret.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct AnswerBody {
    token: Option<String>,
}

/// The answer to an accepted invitation: the team joined, with which role.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    status: &'static str,
    tenant_id: Uuid,
    role: Role,
}

/// `POST /api/invitations/{id}/accept` `{token}`: join the inviting team. Needs the secret of
/// this invitation's own link (issue 31 item 1).
pub async fn accept_invitation(
    State(state): State<AppState>,
    who: Account,
    ip: ClientIp,
    Path(id): Path<Uuid>,
    ApiJson(b): ApiJson<AnswerBody>,
) -> AppResult<Json<Accepted>> {
    let (tenant, role) = invitations::answer(&state.pool, who.user_id, id, Answer::Accept { link: b.token.as_deref() }).await?;
    audited::as_member(&state, tenant, who.user_id, &ip, Action::InvitationAccept, &format!("invitation:{id}"), role.as_str())
        .await?;
    Ok(Json(Accepted { status: "accepted", tenant_id: tenant, role }))
}

/// `POST /api/invitations/{id}/decline` `{token}`: decline; needs the link's secret as
/// accepting does (issue 39 item 3).
pub async fn decline_invitation(
    State(state): State<AppState>,
    who: Account,
    Path(id): Path<Uuid>,
    ApiJson(b): ApiJson<AnswerBody>,
) -> AppResult<StatusCode> {
    invitations::answer(&state.pool, who.user_id, id, Answer::Decline { link: b.token.as_deref() }).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The team picker's answer form (the invitation link pasted): accept (join, and switch to
/// the team) or decline.
#[derive(Deserialize)]
pub struct AnswerForm {
    #[serde(default)]
    link: String,
}

pub async fn invitation_accept_form(
    State(state): State<AppState>,
    session: Session,
    who: SignedIn,
    ip: ClientIp,
    Path(id): Path<Uuid>,
    Form(f): Form<AnswerForm>,
) -> AppResult<Redirect> {
    let (tenant, role) = invitations::answer(&state.pool, who.user_id, id, Answer::Accept { link: Some(&f.link) }).await?;
    audited::as_member(&state, tenant, who.user_id, &ip, Action::InvitationAccept, &format!("invitation:{id}"), role.as_str())
        .await?;
    session.insert(TENANT_ID, tenant).await.map_err(session_err)?;
    Ok(Redirect::to("/"))
}

pub async fn invitation_decline_form(
    State(state): State<AppState>,
    who: SignedIn,
    Path(id): Path<Uuid>,
    Form(f): Form<AnswerForm>,
) -> AppResult<Redirect> {
    invitations::answer(&state.pool, who.user_id, id, Answer::Decline { link: Some(&f.link) }).await?;
    Ok(Redirect::to("/tenants"))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct RoleChange {
    role: Role,
}

async fn change_role(state: &AppState, auth: &Auth, ip: &ClientIp, user: Uuid, role: Role) -> AppResult<Member> {
    check_can_assign(auth, role)?;
    let mut tx = auth.tx(state).await?;
    let current = q::member(&mut tx, user).await?.ok_or(AppError::NotFound)?;
    if current.role == Role::Owner && auth.role != Role::Owner {
        return Err(AppError::forbidden("only an owner can change an owner"));
    }
    if current.role == Role::Owner && role != Role::Owner && q::count_owners(&mut tx).await? <= 1 {
        return Err(AppError::Conflict("a team needs at least one owner".into()));
    }
    q::set_role(&mut tx, user, role).await?;
    let m = q::member(&mut tx, user).await?.ok_or(AppError::NotFound)?;
    let detail = format!("{} -> {}", current.role.as_str(), role.as_str());
    auth.audit(&mut tx, ip, Action::MemberRole, format!("user:{user} {}", m.email), detail).await?;
    tx.commit().await?;
    Ok(m)
}

async fn remove(state: &AppState, auth: &Auth, ip: &ClientIp, user: Uuid) -> AppResult<()> {
    auth.require_admin()?;
    let mut tx = auth.tx(state).await?;
    let current = q::member(&mut tx, user).await?.ok_or(AppError::NotFound)?;
    if current.role == Role::Owner && (auth.role != Role::Owner || q::count_owners(&mut tx).await? <= 1) {
        return Err(AppError::Conflict("the last owner cannot be removed, and only owners remove owners".into()));
    }
    q::remove_member(&mut tx, user).await?;
    let target = format!("user:{user} {}", current.email);
    auth.audit(&mut tx, ip, Action::MemberRemove, target, current.role.as_str()).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn update_member(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path(user): Path<Uuid>,
    ApiJson(c): ApiJson<RoleChange>,
) -> AppResult<Json<Member>> {
    Ok(Json(change_role(&state, &auth, &ip, user, c.role).await?))
}

pub async fn delete_member(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path(user): Path<Uuid>,
) -> AppResult<StatusCode> {
    remove(&state, &auth, &ip, user).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---------------------------------------------------------------- pages

/// A member row with what removing them would do.
pub struct MemberRow {
    pub m: Member,
    pub confirm: String,
}

#[derive(Template)]
#[template(path = "admin/members.html")]
struct MembersPage {
    ctx: PageCtx,
    members: Vec<MemberRow>,
    invitations: Vec<TeamInvitation>,
    me: Uuid,
    i_am_owner: bool,
    /// A just-made invitation link (shown once) and its email.
    new_link: Option<(String, String)>,
    /// A just-made password reset link (shown once) and its email (`super::reset_pages`).
    reset_link: Option<(String, String)>,
    /// The invite form's error (inline), and what was typed.
    error: Option<String>,
    email: String,
}

/// The sentence a removal confirmation shows, counted by the server.
fn removal_sentence(ctx: &PageCtx, email: &str, i: &q::RemovalImpact) -> String {
    let mut s = ctx.t("members.remove_consequence").replace("{email}", email);
    let parts = [
        (i.tokens, "members.remove_tokens", "token"),
        (i.kbs, "members.remove_kbs", "kb"),
        (i.grants, "members.remove_grants", "grant"),
        (i.sources, "members.remove_sources", "source"),
    ];
    for (n, key, noun) in parts {
        if n > 0 {
            s.push(' ');
            s.push_str(&ctx.t(key).replace("{n}", &ctx.count(n, noun)));
        }
    }
    s
}

async fn members_page_for(
    state: &AppState,
    session: &Session,
    page: Page,
    error: Option<String>,
    email: String,
) -> AppResult<Response> {
    page.auth.require_admin()?;
    let mut tx = page.auth.tx(state).await?;
    let list = q::members(&mut tx).await?;
    let mut members = Vec::with_capacity(list.len());
    for m in list {
        let impact = q::removal_impact(&mut tx, m.user_id).await?;
        members.push(MemberRow { confirm: removal_sentence(&page.ctx, &m.email, &impact), m });
    }
    let invitations = invitations::pending_for_team(&mut tx).await?;
    tx.commit().await?;
    // Shown once, like a new API token.
    let new_link = session.remove::<(String, String)>("invite_link").await.map_err(session_err)?;
    let reset_link = session.remove::<(String, String)>(super::reset_pages::SESSION_KEY).await.map_err(session_err)?;
    render(MembersPage {
        ctx: page.ctx,
        members,
        invitations,
        me: page.auth.user_id,
        i_am_owner: page.auth.role == Role::Owner,
        new_link,
        reset_link,
        error,
        email,
    })
}

pub async fn members_page(State(state): State<AppState>, session: Session, page: Page) -> AppResult<Response> {
    members_page_for(&state, &session, page, None, String::new()).await
}

/// The invite form (no password: the person sets their own through the link).
#[derive(Deserialize)]
pub struct MemberForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    role: Option<Role>,
}

pub async fn members_add(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    headers: HeaderMap,
    Form(f): Form<MemberForm>,
) -> AppResult<Response> {
    let role = f.role.unwrap_or(Role::Member);
    let result = match check_can_assign(&page.auth, role) {
        Ok(()) => invitations::invite(&state.pool, page.auth.tenant_id, page.auth.user_id, &f.email, role, None).await,
        Err(e) => Err(e),
    };
    match result {
        Ok((email, link)) => {
            audited::by(&state, &page.auth, &ip, Action::InvitationCreate, &email, role.as_str()).await?;
            // One message for every case: the page must not tell which emails have accounts.
            // No email is sent: the flash says so, and the link to send is shown below it.
            flash(&session, page.ctx.t("assist.invite_created").replace("{email}", &email)).await?;
            if let Some(t) = link {
                session.insert("invite_link", (email, link_url(&state, &headers, &t))).await.map_err(session_err)?;
            }
            Ok(Redirect::to("/admin/members").into_response())
        }
        Err(e @ AppError::Invalid { .. }) | Err(e @ AppError::Forbidden(_)) => {
            let status = e.status();
            let msg = form_error(page.ctx.lang, &e);
            let mut r = members_page_for(&state, &session, page, Some(msg), f.email).await?;
            *r.status_mut() = status;
            Ok(r)
        }
        Err(e) => Err(e),
    }
}

/// `POST /admin/members/invitations/{id}/link`: a new link for an open invitation (the old
/// one stops working), shown once.
pub async fn invitation_link_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    headers: HeaderMap,
    Path(id): Path<Uuid>,
) -> AppResult<Redirect> {
    page.auth.require_admin()?;
    let mut tx = page.auth.tx(&state).await?;
    let (email, token) = invitations::renew_link(&mut tx, page.auth.tenant_id, id).await?;
    page.auth.audit(&mut tx, &ip, Action::InvitationRenew, format!("invitation:{id} {email}"), "").await?;
    tx.commit().await?;
    session.insert("invite_link", (email, link_url(&state, &headers, &token))).await.map_err(session_err)?;
    Ok(Redirect::to("/admin/members"))
}

/// `POST /admin/members/invitations/{id}/withdraw`.
pub async fn invitation_withdraw_form(
    State(state): State<AppState>,
    page: Page,
    ip: ClientIp,
    Path(id): Path<Uuid>,
) -> AppResult<Redirect> {
    page.auth.require_admin()?;
    let mut tx = page.auth.tx(&state).await?;
    if invitations::withdraw(&mut tx, id).await? {
        page.auth.audit(&mut tx, &ip, Action::InvitationRevoke, format!("invitation:{id}"), "").await?;
    }
    tx.commit().await?;
    Ok(Redirect::to("/admin/members"))
}

pub async fn members_role(
    State(state): State<AppState>,
    page: Page,
    ip: ClientIp,
    Path(user): Path<Uuid>,
    Form(c): Form<RoleChange>,
) -> AppResult<Redirect> {
    change_role(&state, &page.auth, &ip, user, c.role).await?;
    Ok(Redirect::to("/admin/members"))
}

async fn removal_confirmation(state: &AppState, page: Page, user: Uuid) -> AppResult<Response> {
    page.auth.require_admin()?;
    let mut tx = page.auth.tx(state).await?;
    let m = q::member(&mut tx, user).await?.ok_or(AppError::NotFound)?;
    let impact = q::removal_impact(&mut tx, user).await?;
    tx.commit().await?;
    render(crate::web::confirm::ConfirmPage {
        title: page.ctx.t("members.remove_title"),
        lines: vec![removal_sentence(&page.ctx, &m.email, &impact)],
        action: format!("/admin/members/{user}/remove"),
        ok_label: page.ctx.t("common.remove"),
        cancel_url: "/admin/members".into(),
        ctx: page.ctx,
    })
}

/// `GET /admin/members/{id}/remove`: the confirmation page.
pub async fn members_remove_page(State(state): State<AppState>, page: Page, Path(user): Path<Uuid>) -> AppResult<Response> {
    removal_confirmation(&state, page, user).await
}

/// `POST /admin/members/{id}/remove`: with `confirm=yes` it removes; without, it shows the
/// confirmation page (no JavaScript).
pub async fn members_remove(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    Path(user): Path<Uuid>,
    Form(f): Form<crate::web::confirm::ConfirmForm>,
) -> AppResult<Response> {
    if !f.confirmed() {
        return removal_confirmation(&state, page, user).await;
    }
    remove(&state, &page.auth, &ip, user).await?;
    flash(&session, page.ctx.t("members.removed")).await?;
    Ok(Redirect::to("/admin/members").into_response())
}

// ---------------------------------------------------------------- joining by link

#[derive(Template)]
#[template(path = "auth/join.html")]
struct JoinPage {
    ctx: PageCtx,
    token: String,
    invitation: Option<invitations::LinkInvitation>,
    /// Why the link cannot be used (translated), when it cannot.
    problem: Option<String>,
    error: Option<String>,
    /// For an email with an account: who is signed in here, if anyone.
    signed_in: SignedInAs,
}

/// Who the link page talks to when the invited email has an account.
#[derive(Clone, Debug, PartialEq, Eq)]
enum SignedInAs {
    Nobody,
    /// The invited account: it may accept with the link.
    Invitee,
    /// Another account (its email): it may not.
    Other(String),
}

fn link_problem(ctx: &PageCtx, p: invitations::LinkProblem) -> String {
    match p {
        invitations::LinkProblem::Unknown => ctx.t("join.unknown"),
        invitations::LinkProblem::Expired => ctx.t("join.expired"),
    }
}

async fn signed_in_as(state: &AppState, who: Option<SignedIn>, invited: &str) -> AppResult<SignedInAs> {
    let Some(who) = who else { return Ok(SignedInAs::Nobody) };
    let Some(me) = q::user_by_id(&state.pool, who.user_id).await? else { return Ok(SignedInAs::Nobody) };
    Ok(if me.email.to_lowercase() == invited { SignedInAs::Invitee } else { SignedInAs::Other(me.email) })
}

/// `GET /join/{token}`: who invites, for which email; a password form for a person without
/// an account; for an email with an account, accept and decline buttons when that account is
/// signed in here (else: sign in, and come back to this link), and from then on its team
/// picker shows who invites ([`invitations::mark_opened`]). A used, withdrawn or unknown link
/// is 404, an expired one 410, each with its explanation.
pub async fn join_page(
    State(state): State<AppState>,
    AnonCtx(ctx): AnonCtx,
    who: Option<SignedInOpt>,
    Path(token): Path<String>,
) -> AppResult<Response> {
    let (invitation, problem, status) = match invitations::by_link(&state.pool, &token).await? {
        Ok(i) => (Some(i), None, StatusCode::OK),
        Err(p) => {
            let status = if p == invitations::LinkProblem::Expired { StatusCode::GONE } else { StatusCode::NOT_FOUND };
            (None, Some(link_problem(&ctx, p)), status)
        }
    };
    let who = who.map(|w| w.0);
    let signed_in = match &invitation {
        Some(i) if i.has_account => signed_in_as(&state, who.clone(), &i.email).await?,
        _ => SignedInAs::Nobody,
    };
    if let (SignedInAs::Invitee, Some(who)) = (&signed_in, &who) {
        invitations::mark_opened(&state.pool, who.user_id, &token).await?;
    }
    let mut r = render(JoinPage { ctx, token, invitation, problem, error: None, signed_in })?;
    *r.status_mut() = status;
    Ok(r)
}

#[derive(Deserialize)]
pub struct JoinForm {
    #[serde(default)]
    password: String,
    #[serde(default)]
    confirm_password: String,
}

/// `POST /join/{token}`: create the account, join, sign in, go to the dashboard.
pub async fn join(
    State(state): State<AppState>,
    session: Session,
    AnonCtx(ctx): AnonCtx,
    ip: ClientIp,
    Path(token): Path<String>,
    Form(f): Form<JoinForm>,
) -> AppResult<Response> {
    let result = if f.password != f.confirm_password {
        Err(AppError::invalid("confirm_password", "the two passwords differ"))
    } else {
        invitations::join_by_link(&state.pool, &token, &f.password).await
    };
    match result {
        Ok((user, tenant)) => {
            audited::as_member(&state, tenant, user, &ip, Action::InvitationAccept, "link", "new account").await?;
            start_session(&session, &state.pool, user).await?;
            session.insert(TENANT_ID, tenant).await.map_err(session_err)?;
            Ok(Redirect::to("/").into_response())
        }
        Err(e) if e.status().is_client_error() => {
            let status = e.status();
            let (invitation, problem) = match invitations::by_link(&state.pool, &token).await? {
                Ok(i) => (Some(i), None),
                Err(p) => (None, Some(link_problem(&ctx, p))),
            };
            let error = invitation.is_some().then(|| form_error(ctx.lang, &e));
            let mut r = render(JoinPage { ctx, token, invitation, problem, error, signed_in: SignedInAs::Nobody })?;
            *r.status_mut() = status;
            Ok(r)
        }
        Err(e) => Err(e),
    }
}

/// `POST /join/{token}/accept`: the signed-in invitee (an existing account) accepts through
/// the link; joins and switches to the team. Anyone else's session is `not_found`.
pub async fn join_accept(
    State(state): State<AppState>,
    session: Session,
    who: SignedIn,
    ip: ClientIp,
    Path(token): Path<String>,
) -> AppResult<Redirect> {
    let (tenant, role) = invitations::accept_by_link(&state.pool, who.user_id, &token).await?;
    audited::as_member(&state, tenant, who.user_id, &ip, Action::InvitationAccept, "link", role.as_str()).await?;
    session.insert(TENANT_ID, tenant).await.map_err(session_err)?;
    Ok(Redirect::to("/"))
}

/// `POST /join/{token}/decline`: the signed-in invitee declines through the link; back to
/// the team picker. Anyone else's session is `not_found`.
pub async fn join_decline(State(state): State<AppState>, who: SignedIn, Path(token): Path<String>) -> AppResult<Redirect> {
    invitations::decline_by_link(&state.pool, who.user_id, &token).await?;
    Ok(Redirect::to("/tenants"))
}

// ---------------------------------------------------------------- team settings

/// Settings as the API shows them: `mineruConfigured` says whether the server has a MinerU
/// token (never the token itself), so an admin knows whether enabling upload can work.
/// The team's settings as the API shows them.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SettingsView {
    external_parsing_upload: bool,
    mineru_configured: bool,
    updated_at: Option<chrono::DateTime<chrono::Utc>>,
}

fn settings_json(s: &TenantSettings, state: &AppState) -> SettingsView {
    SettingsView {
        external_parsing_upload: s.external_parsing_upload,
        mineru_configured: state.config.mineru_token.is_some(),
        updated_at: s.updated_at,
    }
}

pub async fn get_settings(State(state): State<AppState>, auth: Auth) -> AppResult<Json<SettingsView>> {
    let mut tx = auth.tx(&state).await?;
    let s = settings::get(&mut tx).await?;
    tx.commit().await?;
    Ok(Json(settings_json(&s, &state)))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettingsPatch {
    external_parsing_upload: Option<bool>,
}

async fn save_settings(state: &AppState, auth: &Auth, external_parsing_upload: Option<bool>) -> AppResult<TenantSettings> {
    auth.require_admin()?;
    let mut tx = auth.tx(state).await?;
    let s = match external_parsing_upload {
        Some(on) => settings::set_external_parsing_upload(&mut tx, auth.tenant_id, auth.user_id, on).await?,
        None => settings::get(&mut tx).await?,
    };
    tx.commit().await?;
    tracing::info!(tenant.id = %auth.tenant_id, user.id = %auth.user_id, external_parsing_upload = s.external_parsing_upload, "team settings changed");
    Ok(s)
}

pub async fn patch_settings(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(p): ApiJson<SettingsPatch>,
) -> AppResult<Json<SettingsView>> {
    let s = save_settings(&state, &auth, p.external_parsing_upload).await?;
    Ok(Json(settings_json(&s, &state)))
}

#[derive(Template)]
#[template(path = "admin/settings.html")]
struct SettingsPage {
    ctx: PageCtx,
    settings: TenantSettings,
    mineru_configured: bool,
}

pub async fn settings_page(State(state): State<AppState>, page: Page) -> AppResult<Response> {
    page.auth.require_admin()?;
    let mut tx = page.auth.tx(&state).await?;
    let settings = settings::get(&mut tx).await?;
    tx.commit().await?;
    render(SettingsPage { ctx: page.ctx, settings, mineru_configured: state.config.mineru_token.is_some() })
}

/// The form posts `external_parsing_upload=on` when the box is ticked and nothing otherwise.
#[derive(Deserialize)]
pub struct SettingsForm {
    #[serde(default)]
    external_parsing_upload: Option<String>,
}

pub async fn settings_save(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Form(f): Form<SettingsForm>,
) -> AppResult<Redirect> {
    let on = f.external_parsing_upload.is_some_and(|v| v == "on" || v == "true");
    save_settings(&state, &page.auth, Some(on)).await?;
    flash(&session, page.ctx.t("team_settings.saved")).await?;
    Ok(Redirect::to("/admin/settings"))
}

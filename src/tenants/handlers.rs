//! `/setup`, member administration (API + pages).

use askama::Template;
use axum::{
    Form, Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use serde_json::json;
use tower_sessions::Session;
use uuid::Uuid;

use super::{
    invitations::{self, Answer, TeamInvitation},
    queries::{self as q, Member, Role},
    settings::{self, TenantSettings},
};
use crate::{
    auth::{Account, Auth, LOGIN_AT, SignedIn, TENANT_ID, USER_ID, session_err},
    db::TenantTx,
    error::{ApiJson, AppError, AppResult},
    state::AppState,
    web::{AnonCtx, Page, PageCtx, flash, render},
};

#[derive(Template)]
#[template(path = "auth/setup.html")]
struct SetupPage {
    ctx: PageCtx,
    tenant: String,
    email: String,
    error: Option<String>,
}

pub async fn setup_page(State(state): State<AppState>, AnonCtx(ctx): AnonCtx) -> AppResult<Response> {
    if q::any_users(&state.pool).await? {
        return Err(AppError::NotFound);
    }
    render(SetupPage { ctx, tenant: String::new(), email: String::new(), error: None })
}

#[derive(Deserialize)]
pub struct SetupForm {
    tenant: String,
    email: String,
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
            session.cycle_id().await.map_err(session_err)?;
            session.insert(USER_ID, b.user_id).await.map_err(session_err)?;
            session.insert(LOGIN_AT, chrono::Utc::now().timestamp()).await.map_err(session_err)?;
            session.insert(TENANT_ID, b.tenant_id).await.map_err(session_err)?;
            Ok(Redirect::to("/").into_response())
        }
        Err(AppError::Invalid { message, .. }) => {
            let mut r = render(SetupPage { ctx, tenant: f.tenant, email: f.email, error: Some(message) })?;
            *r.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            Ok(r)
        }
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------- API

/// Admins and owners only (as documented): members see the people of the KBs they share.
pub async fn list_members(State(state): State<AppState>, auth: Auth) -> AppResult<Json<serde_json::Value>> {
    auth.require_admin()?;
    let mut tx = auth.tx(&state).await?;
    let items = q::members(&mut tx).await?;
    tx.commit().await?;
    Ok(Json(json!({ "items": items })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewMember {
    email: String,
    role: Role,
    password: Option<String>,
    /// How long the invitation stays open (default 14 days, at most 90).
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

/// `POST /api/members`: invite an email. The answer is `202 {"status": "invited", "email"}`
/// whether the email has an account, gets one now (a `password` was given) or has none, so
/// it tells nobody which emails have accounts; the person joins by accepting.
pub async fn add_member(State(state): State<AppState>, auth: Auth, ApiJson(m): ApiJson<NewMember>) -> AppResult<Response> {
    check_can_assign(&auth, m.role)?;
    let email = invitations::invite(
        &state.pool,
        auth.tenant_id,
        auth.user_id,
        &m.email,
        m.role,
        m.password.as_deref(),
        m.expires_in_days,
    )
    .await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "status": "invited", "email": email }))).into_response())
}

/// `GET /api/members/invitations`: the team's open invitations (admins).
pub async fn list_team_invitations(State(state): State<AppState>, auth: Auth) -> AppResult<Json<serde_json::Value>> {
    auth.require_admin()?;
    let mut tx = auth.tx(&state).await?;
    let items = invitations::pending_for_team(&mut tx).await?;
    tx.commit().await?;
    Ok(Json(json!({ "items": items })))
}

/// `DELETE /api/members/invitations/{id}`: (admins) withdraw an open invitation → 204.
pub async fn withdraw_invitation(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<StatusCode> {
    auth.require_admin()?;
    let mut tx = auth.tx(&state).await?;
    let gone = invitations::withdraw(&mut tx, id).await?;
    tx.commit().await?;
    if gone { Ok(StatusCode::NO_CONTENT) } else { Err(AppError::NotFound) }
}

/// `GET /api/invitations`: the caller's own open invitations, from every team.
pub async fn my_invitations(State(state): State<AppState>, who: Account) -> AppResult<Json<serde_json::Value>> {
    let mut tx = TenantTx::begin_user_only(&state.pool, who.user_id).await?;
    let items = invitations::pending_for_user(&mut tx).await?;
    tx.commit().await?;
    Ok(Json(json!({ "items": items })))
}

/// `POST /api/invitations/{id}/accept`: join the inviting team.
pub async fn accept_invitation(
    State(state): State<AppState>,
    who: Account,
    Path(id): Path<Uuid>,
) -> AppResult<Json<serde_json::Value>> {
    let (tenant, role) = invitations::answer(&state.pool, who.user_id, id, Answer::Accept).await?;
    Ok(Json(json!({ "status": "accepted", "tenantId": tenant, "role": role })))
}

/// `POST /api/invitations/{id}/decline`.
pub async fn decline_invitation(State(state): State<AppState>, who: Account, Path(id): Path<Uuid>) -> AppResult<StatusCode> {
    invitations::answer(&state.pool, who.user_id, id, Answer::Decline).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The team picker's accept button: join, and switch to the new team.
pub async fn invitation_accept_form(
    State(state): State<AppState>,
    session: Session,
    who: SignedIn,
    Path(id): Path<Uuid>,
) -> AppResult<Redirect> {
    let (tenant, _) = invitations::answer(&state.pool, who.user_id, id, Answer::Accept).await?;
    session.insert(TENANT_ID, tenant).await.map_err(session_err)?;
    Ok(Redirect::to("/"))
}

pub async fn invitation_decline_form(State(state): State<AppState>, who: SignedIn, Path(id): Path<Uuid>) -> AppResult<Redirect> {
    invitations::answer(&state.pool, who.user_id, id, Answer::Decline).await?;
    Ok(Redirect::to("/tenants"))
}

#[derive(Deserialize)]
pub struct RoleChange {
    role: Role,
}

async fn change_role(state: &AppState, auth: &Auth, user: Uuid, role: Role) -> AppResult<Member> {
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
    tx.commit().await?;
    Ok(m)
}

async fn remove(state: &AppState, auth: &Auth, user: Uuid) -> AppResult<()> {
    auth.require_admin()?;
    let mut tx = auth.tx(state).await?;
    let current = q::member(&mut tx, user).await?.ok_or(AppError::NotFound)?;
    if current.role == Role::Owner && (auth.role != Role::Owner || q::count_owners(&mut tx).await? <= 1) {
        return Err(AppError::Conflict("the last owner cannot be removed, and only owners remove owners".into()));
    }
    q::remove_member(&mut tx, user).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn update_member(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<Uuid>,
    ApiJson(c): ApiJson<RoleChange>,
) -> AppResult<Json<Member>> {
    Ok(Json(change_role(&state, &auth, user, c.role).await?))
}

pub async fn delete_member(State(state): State<AppState>, auth: Auth, Path(user): Path<Uuid>) -> AppResult<StatusCode> {
    remove(&state, &auth, user).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---------------------------------------------------------------- pages

#[derive(Template)]
#[template(path = "admin/members.html")]
struct MembersPage {
    ctx: PageCtx,
    members: Vec<Member>,
    invitations: Vec<TeamInvitation>,
    me: Uuid,
    i_am_owner: bool,
}

pub async fn members_page(State(state): State<AppState>, page: Page) -> AppResult<Response> {
    page.auth.require_admin()?;
    let mut tx = page.auth.tx(&state).await?;
    let members = q::members(&mut tx).await?;
    let invitations = invitations::pending_for_team(&mut tx).await?;
    tx.commit().await?;
    render(MembersPage { ctx: page.ctx, members, invitations, me: page.auth.user_id, i_am_owner: page.auth.role == Role::Owner })
}

#[derive(Deserialize)]
pub struct MemberForm {
    email: String,
    role: Role,
    password: Option<String>,
}

pub async fn members_add(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Form(f): Form<MemberForm>,
) -> AppResult<Redirect> {
    check_can_assign(&page.auth, f.role)?;
    let pw = f.password.filter(|p| !p.is_empty());
    let email =
        invitations::invite(&state.pool, page.auth.tenant_id, page.auth.user_id, &f.email, f.role, pw.as_deref(), None).await?;
    // One message for every case: the page must not tell which emails have accounts.
    flash(&session, format!("{} {email}", page.ctx.t("members.invited"))).await?;
    Ok(Redirect::to("/admin/members"))
}

pub async fn members_role(
    State(state): State<AppState>,
    page: Page,
    Path(user): Path<Uuid>,
    Form(c): Form<RoleChange>,
) -> AppResult<Redirect> {
    change_role(&state, &page.auth, user, c.role).await?;
    Ok(Redirect::to("/admin/members"))
}

pub async fn members_remove(State(state): State<AppState>, page: Page, Path(user): Path<Uuid>) -> AppResult<Redirect> {
    remove(&state, &page.auth, user).await?;
    Ok(Redirect::to("/admin/members"))
}

// ---------------------------------------------------------------- team settings

/// Settings as the API shows them: `mineruConfigured` says whether the server has a MinerU
/// token (never the token itself), so an admin knows whether enabling upload can work.
fn settings_json(s: &TenantSettings, state: &AppState) -> serde_json::Value {
    json!({
        "externalParsingUpload": s.external_parsing_upload,
        "mineruConfigured": state.config.mineru_token.is_some(),
        "updatedAt": s.updated_at,
    })
}

pub async fn get_settings(State(state): State<AppState>, auth: Auth) -> AppResult<Json<serde_json::Value>> {
    let mut tx = auth.tx(&state).await?;
    let s = settings::get(&mut tx).await?;
    tx.commit().await?;
    Ok(Json(settings_json(&s, &state)))
}

#[derive(Deserialize)]
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
) -> AppResult<Json<serde_json::Value>> {
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

//! Knowledge base API, the dashboard and the KB pages.

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

use super::{Kb, queries};
use crate::{
    auth::Auth,
    error::{ApiJson, AppError, AppResult, ResultExt},
    grants::{self, Grant, Permission},
    sources::{self, Source},
    state::AppState,
    tenants::queries::{self as tq, Member},
    web::{Page, PageCtx, flash, render},
};

// ---------------------------------------------------------------- API

pub async fn list_kbs(State(state): State<AppState>, auth: Auth) -> AppResult<Json<serde_json::Value>> {
    let mut tx = auth.tx(&state).await?;
    let items = queries::list(&mut tx, auth.user_id, auth.role.is_admin()).await?;
    tx.commit().await?;
    Ok(Json(json!({ "items": items })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewKb {
    name: String,
    #[serde(default = "team")]
    visibility: String,
    #[serde(default)]
    description: String,
    owner_id: Option<Uuid>,
}

fn team() -> String {
    "team".into()
}

pub async fn create_kb(State(state): State<AppState>, auth: Auth, ApiJson(b): ApiJson<NewKb>) -> AppResult<Response> {
    let mut tx = auth.tx(&state).await?;
    let kb = super::create(&mut tx, &auth, &b.name, &b.description, &b.visibility, b.owner_id).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(kb)).into_response())
}

pub async fn get_kb(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Json<Kb>> {
    let mut tx = auth.tx(&state).await?;
    let kb = super::visible(&mut tx, &auth, id).await?;
    tx.commit().await?;
    Ok(Json(kb))
}

#[derive(Deserialize)]
pub struct KbPatch {
    name: Option<String>,
    visibility: Option<String>,
    description: Option<String>,
}

async fn update(state: &AppState, auth: &Auth, id: Uuid, p: KbPatch) -> AppResult<Kb> {
    let mut tx = auth.tx(state).await?;
    super::managed(&mut tx, auth, id).await?;
    let name = p.name.as_deref().map(super::validate_name).transpose()?;
    let vis = p.visibility.as_deref().map(super::validate_visibility).transpose()?;
    queries::update(&mut tx, id, name.as_deref(), p.description.as_deref().map(str::trim), vis)
        .await
        .on_unique("a knowledge base with this name exists")?;
    let kb = super::visible(&mut tx, auth, id).await?;
    tx.commit().await?;
    Ok(kb)
}

pub async fn patch_kb(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    ApiJson(p): ApiJson<KbPatch>,
) -> AppResult<Json<Kb>> {
    Ok(Json(update(&state, &auth, id, p).await?))
}

async fn delete(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<()> {
    let mut tx = auth.tx(state).await?;
    super::managed(&mut tx, auth, id).await?;
    queries::delete(&mut tx, id).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn delete_kb(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<StatusCode> {
    delete(&state, &auth, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn list_kb_members(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> AppResult<Json<serde_json::Value>> {
    let mut tx = auth.tx(&state).await?;
    super::visible(&mut tx, &auth, id).await?;
    let items = queries::members(&mut tx, id).await?;
    tx.commit().await?;
    Ok(Json(json!({ "items": items })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KbMemberBody {
    #[serde(default)]
    can_manage: bool,
}

async fn put_member(state: &AppState, auth: &Auth, kb: Uuid, user: Uuid, manage: bool) -> AppResult<()> {
    let mut tx = auth.tx(state).await?;
    super::managed(&mut tx, auth, kb).await?;
    tq::member(&mut tx, user).await?.ok_or_else(|| AppError::invalid("userId", "not a member of this team"))?;
    queries::put_member(&mut tx, auth.tenant_id, kb, user, manage).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn put_kb_member(
    State(state): State<AppState>,
    auth: Auth,
    Path((kb, user)): Path<(Uuid, Uuid)>,
    ApiJson(b): ApiJson<KbMemberBody>,
) -> AppResult<Json<serde_json::Value>> {
    put_member(&state, &auth, kb, user, b.can_manage).await?;
    Ok(Json(json!({ "kbId": kb, "userId": user, "canManage": b.can_manage })))
}

pub async fn delete_kb_member(
    State(state): State<AppState>,
    auth: Auth,
    Path((kb, user)): Path<(Uuid, Uuid)>,
) -> AppResult<StatusCode> {
    let mut tx = auth.tx(&state).await?;
    super::managed(&mut tx, &auth, kb).await?;
    if !queries::remove_member(&mut tx, kb, user).await? {
        return Err(AppError::NotFound);
    }
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---------------------------------------------------------------- pages

#[derive(Template)]
#[template(path = "kbs/dashboard.html")]
struct DashboardPage {
    ctx: PageCtx,
    kbs: Vec<Kb>,
    recent: Vec<(Source, String)>,
}

pub async fn dashboard(State(state): State<AppState>, page: Page) -> AppResult<Response> {
    let mut tx = page.auth.tx(&state).await?;
    let kbs = queries::list(&mut tx, page.auth.user_id, page.auth.role.is_admin()).await?;
    let recent = sources::queries::recent(&mut tx, 10).await?;
    tx.commit().await?;
    render(DashboardPage { ctx: page.ctx, kbs, recent })
}

#[derive(Template)]
#[template(path = "kbs/show.html")]
struct KbPage {
    ctx: PageCtx,
    kb: Kb,
    sources: Vec<Source>,
    grants: Vec<Grant>,
    kb_members: Vec<queries::KbMember>,
    team: Vec<Member>,
    upload_max_mb: u64,
}

pub async fn kb_page(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Response> {
    let mut tx = page.auth.tx(&state).await?;
    let kb = super::visible(&mut tx, &page.auth, id).await?;
    let sources = sources::queries::list(&mut tx, id).await?;
    let grants = grants::queries::active_for_user(&mut tx, page.auth.user_id)
        .await?
        .into_iter()
        .filter(|g| g.permission == Permission::ReadIndex.as_str())
        .collect();
    let kb_members = queries::members(&mut tx, id).await?;
    let team = if kb.can_manage { tq::members(&mut tx).await? } else { Vec::new() };
    tx.commit().await?;
    let upload_max_mb = state.config.upload_max_bytes.div_ceil(1024 * 1024);
    render(KbPage { ctx: page.ctx, kb, sources, grants, kb_members, team, upload_max_mb })
}

#[derive(Deserialize)]
pub struct KbForm {
    name: String,
    visibility: String,
    #[serde(default)]
    description: String,
}

pub async fn create_form(State(state): State<AppState>, page: Page, Form(f): Form<KbForm>) -> AppResult<Redirect> {
    let mut tx = page.auth.tx(&state).await?;
    let kb = super::create(&mut tx, &page.auth, &f.name, &f.description, &f.visibility, None).await?;
    tx.commit().await?;
    Ok(Redirect::to(&format!("/kbs/{}", kb.id)))
}

pub async fn update_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(id): Path<Uuid>,
    Form(f): Form<KbForm>,
) -> AppResult<Redirect> {
    let patch = KbPatch { name: Some(f.name), visibility: Some(f.visibility), description: Some(f.description) };
    update(&state, &page.auth, id, patch).await?;
    flash(&session, page.ctx.t("kb.saved")).await?;
    Ok(Redirect::to(&format!("/kbs/{id}")))
}

pub async fn delete_form(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Redirect> {
    delete(&state, &page.auth, id).await?;
    Ok(Redirect::to("/"))
}

#[derive(Deserialize)]
pub struct KbMemberForm {
    user_id: Uuid,
    #[serde(default)]
    can_manage: Option<String>,
}

pub async fn member_form(
    State(state): State<AppState>,
    page: Page,
    Path(id): Path<Uuid>,
    Form(f): Form<KbMemberForm>,
) -> AppResult<Redirect> {
    put_member(&state, &page.auth, id, f.user_id, f.can_manage.is_some()).await?;
    Ok(Redirect::to(&format!("/kbs/{id}#members")))
}

pub async fn member_remove_form(
    State(state): State<AppState>,
    page: Page,
    Path((id, user)): Path<(Uuid, Uuid)>,
) -> AppResult<Redirect> {
    let mut tx = page.auth.tx(&state).await?;
    super::managed(&mut tx, &page.auth, id).await?;
    queries::remove_member(&mut tx, id, user).await?;
    tx.commit().await?;
    Ok(Redirect::to(&format!("/kbs/{id}#members")))
}

//! Knowledge base API, the dashboard and the KB pages.

use axum::{
    Form, Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;
use uuid::Uuid;

use super::{Kb, queries};
use crate::{
    audit::Action,
    auth::directory as tq,
    auth::{Auth, ClientIp},
    error::{ApiJson, AppError, AppResult, Items, ResultExt},
    state::AppState,
    web::{Page, confirm::ConfirmPage, flash, render},
};

// ---------------------------------------------------------------- API

pub async fn list_kbs(State(state): State<AppState>, auth: Auth) -> AppResult<Json<Items<Kb>>> {
    let mut tx = auth.tx(&state).await?;
    let items = queries::list(&mut tx, auth.user_id, auth.role.is_admin()).await?;
    tx.commit().await?;
    Ok(Json(items.into()))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewKb {
    #[schemars(length(min = 1, max = 200), regex(pattern = r"\S"))]
    name: String,
    #[serde(default = "team")]
    #[schemars(regex(pattern = "^(private|team)$"))]
    visibility: String,
    #[serde(default)]
    description: String,
    owner_id: Option<Uuid>,
}

fn team() -> String {
    "team".into()
}

/// The audit target of a KB: its id and name.
fn kb_target(kb: &Kb) -> String {
    format!("kb:{} {}", kb.id, kb.name)
}

pub async fn create_kb(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    ApiJson(b): ApiJson<NewKb>,
) -> AppResult<Response> {
    let mut tx = auth.tx(&state).await?;
    let kb = super::create(&mut tx, &auth, &b.name, &b.description, &b.visibility, b.owner_id).await?;
    auth.audit(&mut tx, &ip, Action::KbCreate, kb_target(&kb), kb.visibility.as_str()).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(kb)).into_response())
}

pub async fn get_kb(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Json<Kb>> {
    let mut tx = auth.tx(&state).await?;
    let kb = super::visible(&mut tx, &auth, id).await?;
    tx.commit().await?;
    Ok(Json(kb))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct KbPatch {
    name: Option<String>,
    visibility: Option<String>,
    description: Option<String>,
}

async fn update(state: &AppState, auth: &Auth, ip: &ClientIp, id: Uuid, p: KbPatch) -> AppResult<Kb> {
    let mut tx = auth.tx(state).await?;
    let before = super::managed(&mut tx, auth, id).await?;
    let name = p.name.as_deref().map(super::validate_name).transpose()?;
    let vis = p.visibility.as_deref().map(super::validate_visibility).transpose()?;
    queries::update(&mut tx, id, name.as_deref(), p.description.as_deref().map(str::trim), vis)
        .await
        .on_unique("a knowledge base with this name exists")?;
    let kb = super::visible(&mut tx, auth, id).await?;
    if kb.visibility != before.visibility {
        let detail = format!("{} -> {}", before.visibility, kb.visibility);
        auth.audit(&mut tx, ip, Action::KbVisibility, kb_target(&kb), detail).await?;
    }
    tx.commit().await?;
    Ok(kb)
}

pub async fn patch_kb(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path(id): Path<Uuid>,
    ApiJson(p): ApiJson<KbPatch>,
) -> AppResult<Json<Kb>> {
    Ok(Json(update(&state, &auth, &ip, id, p).await?))
}

async fn delete(state: &AppState, auth: &Auth, ip: &ClientIp, id: Uuid) -> AppResult<Kb> {
    let mut tx = auth.tx(state).await?;
    let kb = super::deletable(super::visible(&mut tx, auth, id).await?)?;
    queries::soft_delete(&mut tx, id, auth.user_id).await?;
    auth.audit(&mut tx, ip, Action::KbDelete, kb_target(&kb), "").await?;
    tx.commit().await?;
    Ok(kb)
}

/// `DELETE /api/kbs/{id}`: the KB and its sources leave lists and search at once; it can be
/// restored for [`Config::delete_grace`](crate::config::Config::delete_grace), then it is purged.
pub async fn delete_kb(State(state): State<AppState>, auth: Auth, ip: ClientIp, Path(id): Path<Uuid>) -> AppResult<StatusCode> {
    delete(&state, &auth, &ip, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What deleting a KB takes away, for the confirmation.
async fn impact(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<(Kb, super::DeleteImpact)> {
    let mut tx = auth.tx(state).await?;
    let kb = super::deletable(super::visible(&mut tx, auth, id).await?)?;
    let blocks = queries::block_count(&mut tx, id).await?;
    tx.commit().await?;
    let grace_secs = state.config.delete_grace.as_secs();
    Ok((kb.clone(), super::DeleteImpact { sources: kb.source_count, blocks, grace_secs }))
}

/// `GET /api/kbs/{id}/delete-preview`: `{sources, blocks, graceSecs}`.
pub async fn delete_preview(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> AppResult<Json<super::DeleteImpact>> {
    Ok(Json(impact(&state, &auth, id).await?.1))
}

async fn restore(state: &AppState, auth: &Auth, ip: &ClientIp, id: Uuid) -> AppResult<Kb> {
    let mut tx = auth.tx(state).await?;
    let kb = queries::get_deleted(&mut tx, auth.user_id, auth.role.is_admin(), id).await?.ok_or(AppError::NotFound)?;
    super::deletable(kb)?;
    queries::restore(&mut tx, id).await.on_unique("another knowledge base has this name now; rename that one first")?;
    let kb = super::visible(&mut tx, auth, id).await?;
    auth.audit(&mut tx, ip, Action::KbRestore, kb_target(&kb), "").await?;
    tx.commit().await?;
    Ok(kb)
}

/// `POST /api/kbs/{id}/restore`: a deleted KB (still in its grace period) comes back whole.
pub async fn restore_kb(State(state): State<AppState>, auth: Auth, ip: ClientIp, Path(id): Path<Uuid>) -> AppResult<Json<Kb>> {
    Ok(Json(restore(&state, &auth, &ip, id).await?))
}

/// `POST /api/kbs/{id}/transfer`: who becomes the owner.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KbTransfer {
    /// A member of the team.
    owner_id: Uuid,
}

/// Give the KB to another member: its owner or a team admin may (also an admin who cannot
/// read a private KB, but not to themselves); the previous owner stays in it as a member.
async fn transfer(state: &AppState, auth: &Auth, ip: &ClientIp, id: Uuid, owner: Uuid) -> AppResult<Kb> {
    let mut tx = auth.tx(state).await?;
    let kb = super::visible(&mut tx, auth, id).await?;
    if !kb.can_transfer {
        return Err(AppError::forbidden("only the owner or a team admin can transfer this knowledge base"));
    }
    // Taking it would be reading it: an admin outside a private KB gives it to someone else.
    if !kb.can_read && owner == auth.user_id {
        return Err(AppError::forbidden("an admin outside this knowledge base cannot make themselves its owner"));
    }
    tq::member(&mut tx, owner).await?.ok_or_else(|| AppError::invalid("ownerId", "not a member of this team"))?;
    queries::transfer(&mut tx, id, kb.owner_id, owner).await?;
    let before = kb.owner_email;
    let kb = super::visible(&mut tx, auth, id).await?;
    auth.audit(&mut tx, ip, Action::KbTransfer, kb_target(&kb), format!("{before} -> {}", kb.owner_email)).await?;
    tx.commit().await?;
    Ok(kb)
}

/// `POST /api/kbs/{id}/transfer`: the KB with its new owner.
pub async fn transfer_kb(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path(id): Path<Uuid>,
    ApiJson(b): ApiJson<KbTransfer>,
) -> AppResult<Json<Kb>> {
    Ok(Json(transfer(&state, &auth, &ip, id, b.owner_id).await?))
}

/// A deleted KB and when it will be purged for good.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletedKb {
    kb: Kb,
    purge_after: Option<chrono::DateTime<chrono::Utc>>,
}

/// `GET /api/kbs/deleted`: deleted KBs the caller can see, with when they will be purged.
pub async fn list_deleted(State(state): State<AppState>, auth: Auth) -> AppResult<Json<Items<DeletedKb>>> {
    let mut tx = auth.tx(&state).await?;
    let items = queries::deleted(&mut tx, auth.user_id, auth.role.is_admin()).await?;
    tx.commit().await?;
    let grace = chrono::Duration::from_std(state.config.delete_grace).unwrap_or(chrono::Duration::MAX);
    let items: Vec<_> = items
        .into_iter()
        .map(|k| {
            let purge = k.deleted_at.and_then(|d| d.checked_add_signed(grace));
            DeletedKb { kb: k, purge_after: purge }
        })
        .collect();
    Ok(Json(items.into()))
}

pub async fn list_kb_members(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> AppResult<Json<Items<queries::KbMember>>> {
    let mut tx = auth.tx(&state).await?;
    super::visible(&mut tx, &auth, id).await?;
    let items = queries::members(&mut tx, id).await?;
    tx.commit().await?;
    Ok(Json(items.into()))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KbMemberBody {
    #[serde(default)]
    can_manage: bool,
}

/// What `PUT /api/kbs/{id}/members/{user}` set.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KbMemberSet {
    kb_id: Uuid,
    user_id: Uuid,
    can_manage: bool,
}

async fn put_member(state: &AppState, auth: &Auth, ip: &ClientIp, kb: Uuid, user: Uuid, manage: bool) -> AppResult<()> {
    let mut tx = auth.tx(state).await?;
    let k = super::managed(&mut tx, auth, kb).await?;
    let m = tq::member(&mut tx, user).await?.ok_or_else(|| AppError::invalid("userId", "not a member of this team"))?;
    queries::put_member(&mut tx, auth.tenant_id, kb, user, manage).await?;
    let detail = format!("{} {}", m.email, if manage { "manage" } else { "read" });
    auth.audit(&mut tx, ip, Action::KbMemberSet, kb_target(&k), detail).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn put_kb_member(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path((kb, user)): Path<(Uuid, Uuid)>,
    ApiJson(b): ApiJson<KbMemberBody>,
) -> AppResult<Json<KbMemberSet>> {
    put_member(&state, &auth, &ip, kb, user, b.can_manage).await?;
    Ok(Json(KbMemberSet { kb_id: kb, user_id: user, can_manage: b.can_manage }))
}

pub async fn delete_kb_member(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path((kb, user)): Path<(Uuid, Uuid)>,
) -> AppResult<StatusCode> {
    if !remove_member(&state, &auth, &ip, kb, user).await? {
        return Err(AppError::NotFound);
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Take `user` out of the KB (and audit it); `false`: they were not in it.
async fn remove_member(state: &AppState, auth: &Auth, ip: &ClientIp, kb: Uuid, user: Uuid) -> AppResult<bool> {
    let mut tx = auth.tx(state).await?;
    let k = super::managed(&mut tx, auth, kb).await?;
    if !queries::remove_member(&mut tx, kb, user).await? {
        return Ok(false);
    }
    let email = tq::member(&mut tx, user).await?.map(|m| m.email).unwrap_or_else(|| format!("user:{user}"));
    auth.audit(&mut tx, ip, Action::KbMemberRemove, kb_target(&k), email).await?;
    tx.commit().await?;
    Ok(true)
}

// ---------------------------------------------------------------- pages

#[derive(Deserialize)]
pub struct KbForm {
    name: String,
    visibility: String,
    #[serde(default)]
    description: String,
}

pub async fn create_form(State(state): State<AppState>, page: Page, ip: ClientIp, Form(f): Form<KbForm>) -> AppResult<Redirect> {
    let mut tx = page.auth.tx(&state).await?;
    let kb = super::create(&mut tx, &page.auth, &f.name, &f.description, &f.visibility, None).await?;
    page.auth.audit(&mut tx, &ip, Action::KbCreate, kb_target(&kb), kb.visibility.as_str()).await?;
    tx.commit().await?;
    Ok(Redirect::to(&format!("/kbs/{}", kb.id)))
}

pub async fn update_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    Path(id): Path<Uuid>,
    Form(f): Form<KbForm>,
) -> AppResult<Redirect> {
    let patch = KbPatch { name: Some(f.name), visibility: Some(f.visibility), description: Some(f.description) };
    update(&state, &page.auth, &ip, id, patch).await?;
    flash(&session, page.ctx.t("kb.saved")).await?;
    Ok(Redirect::to(&format!("/kbs/{id}")))
}

/// `GET /kbs/{id}/delete`: what deleting the KB does, and the button that does it.
pub async fn delete_confirm(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Response> {
    let (kb, impact) = impact(&state, &page.auth, id).await?;
    let message = super::delete_message(&page.ctx, &kb.name, &impact);
    render(ConfirmPage {
        title: page.ctx.t("kbpage.delete_kb_title").replace("{name}", &kb.name),
        lines: vec![message],
        action: format!("/kbs/{id}/delete"),
        ok_label: page.ctx.t("kb.delete"),
        cancel_url: format!("/kbs/{id}"),
        ctx: page.ctx,
    })
}

pub async fn delete_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    Path(id): Path<Uuid>,
) -> AppResult<Redirect> {
    let kb = delete(&state, &page.auth, &ip, id).await?;
    let days = super::grace_days(&page.ctx, state.config.delete_grace);
    flash(&session, page.ctx.t("kbpage.kb_deleted").replace("{name}", &kb.name).replace("{days}", &days)).await?;
    Ok(Redirect::to("/#deleted"))
}

pub async fn restore_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    Path(id): Path<Uuid>,
) -> AppResult<Redirect> {
    let kb = restore(&state, &page.auth, &ip, id).await?;
    flash(&session, page.ctx.t("kbpage.kb_restored").replace("{name}", &kb.name)).await?;
    Ok(Redirect::to(&format!("/kbs/{id}")))
}

#[derive(Deserialize)]
pub struct KbTransferForm {
    owner_id: Uuid,
}

pub async fn transfer_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    Path(id): Path<Uuid>,
    Form(f): Form<KbTransferForm>,
) -> AppResult<Redirect> {
    let kb = transfer(&state, &page.auth, &ip, id, f.owner_id).await?;
    flash(&session, page.ctx.t("kb.transferred").replace("{name}", &kb.name).replace("{owner}", &kb.owner_email)).await?;
    Ok(Redirect::to(&format!("/kbs/{id}")))
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
    ip: ClientIp,
    Path(id): Path<Uuid>,
    Form(f): Form<KbMemberForm>,
) -> AppResult<Redirect> {
    put_member(&state, &page.auth, &ip, id, f.user_id, f.can_manage.is_some()).await?;
    Ok(Redirect::to(&format!("/kbs/{id}#members")))
}

pub async fn member_remove_form(
    State(state): State<AppState>,
    page: Page,
    ip: ClientIp,
    Path((id, user)): Path<(Uuid, Uuid)>,
) -> AppResult<Redirect> {
    remove_member(&state, &page.auth, &ip, id, user).await?;
    Ok(Redirect::to(&format!("/kbs/{id}#members")))
}

//! Directory grant API and admin page.

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

use super::{Grant, Grantee, Permission, queries};
use crate::{
    auth::Auth,
    error::{ApiJson, AppError, AppResult},
    state::AppState,
    tenants::queries::{self as tq, Member},
    web::{Page, PageCtx, flash, render},
};

/// Admins see every grant; members see the active grants that apply to them.
pub async fn list_grants(State(state): State<AppState>, auth: Auth) -> AppResult<Json<serde_json::Value>> {
    let mut tx = auth.tx(&state).await?;
    let items = if auth.role.is_admin() {
        queries::list_all(&mut tx).await?
    } else {
        queries::active_for_user(&mut tx, auth.user_id).await?
    };
    tx.commit().await?;
    Ok(Json(json!({ "items": items })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewGrant {
    path: String,
    user_id: Option<Uuid>,
    email: Option<String>,
    #[serde(default)]
    all_members: bool,
    permission: String,
}

impl NewGrant {
    fn grantee(&self) -> AppResult<Grantee> {
        match (self.all_members, self.user_id, self.email.as_deref().filter(|e| !e.trim().is_empty())) {
            (true, None, None) => Ok(Grantee::AllMembers),
            (false, Some(u), None) => Ok(Grantee::User(u)),
            (false, None, Some(e)) => Ok(Grantee::Email(e.to_string())),
            _ => Err(AppError::invalid("grantee", "give exactly one of allMembers, userId or email")),
        }
    }
}

pub async fn create_grant(State(state): State<AppState>, auth: Auth, ApiJson(g): ApiJson<NewGrant>) -> AppResult<Response> {
    let grantee = g.grantee()?;
    let permission = Permission::parse(&g.permission)?;
    let mut tx = auth.tx(&state).await?;
    let (grant, created) = super::create(&mut tx, &state.config, &auth, &g.path, grantee, permission).await?;
    tx.commit().await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(grant)).into_response())
}

pub async fn get_grant(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Json<Grant>> {
    let mut tx = auth.tx(&state).await?;
    let g = queries::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    let mine = g.user_id.is_none_or(|u| u == auth.user_id);
    if !auth.role.is_admin() && !mine {
        return Err(AppError::NotFound);
    }
    Ok(Json(g))
}

async fn revoke(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<u64> {
    auth.require_admin()?;
    let mut tx = auth.tx(state).await?;
    let stale = queries::revoke(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    tracing::info!(grant.id = %id, "grant {id} revoked; {stale} sources marked stale");
    Ok(stale)
}

pub async fn revoke_grant(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Json<serde_json::Value>> {
    let stale = revoke(&state, &auth, id).await?;
    Ok(Json(json!({ "id": id, "revoked": true, "staleSources": stale })))
}

// ---------------------------------------------------------------- page

#[derive(Template)]
#[template(path = "admin/grants.html")]
struct GrantsPage {
    ctx: PageCtx,
    grants: Vec<Grant>,
    members: Vec<Member>,
    roots: Vec<String>,
}

pub async fn grants_page(State(state): State<AppState>, page: Page) -> AppResult<Response> {
    page.auth.require_admin()?;
    let mut tx = page.auth.tx(&state).await?;
    let grants = queries::list_all(&mut tx).await?;
    let members = tq::members(&mut tx).await?;
    tx.commit().await?;
    let roots = state.config.grantable_roots.iter().map(|r| r.display().to_string()).collect();
    render(GrantsPage { ctx: page.ctx, grants, members, roots })
}

#[derive(Deserialize)]
pub struct GrantForm {
    path: String,
    /// "all" or a user id
    grantee: String,
    permission: String,
}

pub async fn grants_add(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Form(f): Form<GrantForm>,
) -> AppResult<Redirect> {
    let grantee = match f.grantee.as_str() {
        "all" => Grantee::AllMembers,
        id => Grantee::User(Uuid::parse_str(id).map_err(|_| AppError::invalid("grantee", "choose a member"))?),
    };
    let permission = Permission::parse(&f.permission)?;
    let mut tx = page.auth.tx(&state).await?;
    let (g, _) = super::create(&mut tx, &state.config, &page.auth, &f.path, grantee, permission).await?;
    tx.commit().await?;
    flash(&session, format!("{} {}", page.ctx.t("grants.created"), g.root_path)).await?;
    Ok(Redirect::to("/admin/grants"))
}

pub async fn grants_revoke(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Redirect> {
    revoke(&state, &page.auth, id).await?;
    Ok(Redirect::to("/admin/grants"))
}

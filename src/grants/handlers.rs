//! Directory grant API and admin page.

use askama::Template;
use axum::{
    Form, Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;
use uuid::Uuid;

use super::{Grant, Grantee, Permission, queries};
use crate::{
    audit::Action,
    auth::directory::{self as tq, Member},
    auth::{Auth, ClientIp},
    error::{ApiJson, AppError, AppResult, Items},
    state::AppState,
    web::{
        Page, PageCtx,
        confirm::{ConfirmForm, ConfirmPage},
        flash, form_error, render,
    },
};

/// Admins see every grant; members see the active grants that apply to them.
pub async fn list_grants(State(state): State<AppState>, auth: Auth) -> AppResult<Json<Items<Grant>>> {
    let mut tx = auth.tx(&state).await?;
    let items = if auth.role.is_admin() {
        queries::list_all(&mut tx).await?
    } else {
        queries::active_for_user(&mut tx, auth.user_id).await?
    };
    tx.commit().await?;
    Ok(Json(items.into()))
}

#[derive(Deserialize, schemars::JsonSchema)]
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

pub async fn create_grant(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    ApiJson(g): ApiJson<NewGrant>,
) -> AppResult<Response> {
    let grantee = g.grantee()?;
    let permission = Permission::parse(&g.permission)?;
    let mut tx = auth.tx(&state).await?;
    let (grant, created) = super::create(&mut tx, &state.config, &auth, &g.path, grantee, permission).await?;
    if created {
        audit_added(&mut tx, &auth, &ip, &grant).await?;
    }
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

/// The audit row of a new grant: its path, permission and grantee.
async fn audit_added(tx: &mut crate::db::TenantTx, auth: &Auth, ip: &ClientIp, g: &Grant) -> AppResult<()> {
    let grantee = g.user_email.clone().unwrap_or_else(|| "all members".into());
    let target = format!("grant:{} {}", g.id, g.root_path);
    auth.audit(tx, ip, Action::GrantAdd, target, format!("{} to {grantee}", g.permission)).await?;
    Ok(())
}

async fn revoke(state: &AppState, auth: &Auth, ip: &ClientIp, id: Uuid) -> AppResult<u64> {
    auth.require_admin()?;
    let mut tx = auth.tx(state).await?;
    let stale = queries::revoke(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    auth.audit(&mut tx, ip, Action::GrantRevoke, format!("grant:{id}"), format!("{stale} sources stale")).await?;
    tx.commit().await?;
    tracing::info!(grant.id = %id, "grant {id} revoked; {stale} sources marked stale");
    Ok(stale)
}

/// What `DELETE /api/grants/{id}` answers.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revoked {
    id: Uuid,
    revoked: bool,
    stale_sources: u64,
}

pub async fn revoke_grant(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    Path(id): Path<Uuid>,
) -> AppResult<Json<Revoked>> {
    let stale_sources = revoke(&state, &auth, &ip, id).await?;
    Ok(Json(Revoked { id, revoked: true, stale_sources }))
}

/// `GET /api/grants/{id}/impact` (admins): what revoking would do, before doing it.
pub async fn grant_impact(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> AppResult<Json<queries::RevokeImpact>> {
    auth.require_admin()?;
    let mut tx = auth.tx(&state).await?;
    let impact = queries::revoke_impact(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(Json(impact))
}

// ---------------------------------------------------------------- page

/// The sentence a revoke confirmation shows, counted by the server.
fn revoke_sentence(ctx: &PageCtx, i: &queries::RevokeImpact) -> String {
    ctx.t("grants.revoke_consequence")
        .replace("{n}", &ctx.count(i.stale_sources, "source"))
        .replace("{kbs}", &ctx.count(i.kbs, "kb"))
        .replace("{path}", &i.root_path)
}

/// An active grant with what revoking it would do.
pub struct GrantRow {
    pub grant: Grant,
    /// The confirmation text (active grants only).
    pub confirm: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/grants.html")]
struct GrantsPage {
    ctx: PageCtx,
    grants: Vec<GrantRow>,
    members: Vec<Member>,
    roots: Vec<String>,
    /// The add form's error (inline), and what was typed.
    error: Option<String>,
    path: String,
}

async fn grants_page_for(state: &AppState, page: Page, error: Option<String>, path: String) -> AppResult<Response> {
    page.auth.require_admin()?;
    let mut tx = page.auth.tx(state).await?;
    let all = queries::list_all(&mut tx).await?;
    let mut grants = Vec::with_capacity(all.len());
    for g in all {
        let confirm = match g.revoked_at {
            Some(_) => None,
            None => queries::revoke_impact(&mut tx, g.id).await?.map(|i| revoke_sentence(&page.ctx, &i)),
        };
        grants.push(GrantRow { grant: g, confirm });
    }
    let members = tq::members(&mut tx).await?;
    tx.commit().await?;
    let roots = state.config.grantable_roots.iter().map(|r| r.display().to_string()).collect();
    render(GrantsPage { ctx: page.ctx, grants, members, roots, error, path })
}

pub async fn grants_page(State(state): State<AppState>, page: Page) -> AppResult<Response> {
    grants_page_for(&state, page, None, String::new()).await
}

/// The add form. Missing fields are empty, so they get the inline message, not a bare 422.
#[derive(Deserialize)]
pub struct GrantForm {
    #[serde(default)]
    path: String,
    /// "all" or a user id
    #[serde(default)]
    grantee: String,
    #[serde(default)]
    permission: String,
}

async fn add_from_form(state: &AppState, page: &Page, ip: &ClientIp, f: &GrantForm) -> AppResult<Grant> {
    page.auth.require_admin()?;
    if f.path.trim().is_empty() {
        return Err(AppError::invalid("path", "give the directory to grant"));
    }
    let grantee = match f.grantee.as_str() {
        "all" | "" => Grantee::AllMembers,
        id => Grantee::User(Uuid::parse_str(id).map_err(|_| AppError::invalid("grantee", "choose a member"))?),
    };
    let permission = Permission::parse(&f.permission)?;
    let mut tx = page.auth.tx(state).await?;
    let (g, created) = super::create(&mut tx, &state.config, &page.auth, f.path.trim(), grantee, permission).await?;
    if created {
        audit_added(&mut tx, &page.auth, ip, &g).await?;
    }
    tx.commit().await?;
    Ok(g)
}

/// Adding a grant: done → back to the list with a notice; refused (a path outside the
/// roots, a bad field) → the same page with the message inline and the path kept.
pub async fn grants_add(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    Form(f): Form<GrantForm>,
) -> AppResult<Response> {
    match add_from_form(&state, &page, &ip, &f).await {
        Ok(g) => {
            flash(&session, format!("{} {}", page.ctx.t("grants.created"), g.root_path)).await?;
            Ok(Redirect::to("/admin/grants").into_response())
        }
        Err(e) if e.status().is_client_error() && !matches!(e, AppError::Unauthorized | AppError::NoTenant) => {
            let status = e.status();
            let msg = form_error(page.ctx.lang, &e);
            let mut r = grants_page_for(&state, page, Some(msg), f.path).await?;
            *r.status_mut() = status;
            Ok(r)
        }
        Err(e) => Err(e),
    }
}

async fn revoke_confirmation(state: &AppState, page: Page, id: Uuid) -> AppResult<Response> {
    page.auth.require_admin()?;
    let mut tx = page.auth.tx(state).await?;
    let impact = queries::revoke_impact(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    let grantee = impact.user_email.clone().unwrap_or_else(|| page.ctx.t("grants.all_members"));
    let lines = vec![revoke_sentence(&page.ctx, &impact), page.ctx.t("grants.revoke_grantee").replace("{who}", &grantee)];
    render(ConfirmPage {
        title: page.ctx.t("grants.revoke_title"),
        lines,
        action: format!("/admin/grants/{id}/revoke"),
        ok_label: page.ctx.t("grants.revoke"),
        cancel_url: "/admin/grants".into(),
        ctx: page.ctx,
    })
}

/// `GET /admin/grants/{id}/revoke`: the confirmation page.
pub async fn grants_revoke_page(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Response> {
    revoke_confirmation(&state, page, id).await
}

/// `POST /admin/grants/{id}/revoke`: with `confirm=yes` (the dialog or the confirmation
/// page) it revokes; without, it shows the confirmation page (no JavaScript).
pub async fn grants_revoke(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    Path(id): Path<Uuid>,
    Form(f): Form<ConfirmForm>,
) -> AppResult<Response> {
    if !f.confirmed() {
        return revoke_confirmation(&state, page, id).await;
    }
    let stale = revoke(&state, &page.auth, &ip, id).await?;
    flash(&session, page.ctx.t("grants.revoked_notice").replace("{n}", &page.ctx.count(stale, "source"))).await?;
    Ok(Redirect::to("/admin/grants").into_response())
}

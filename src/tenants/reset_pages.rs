//! Password reset links (`resets`) over HTTP: the admin's `POST /api/members/{id}/password-reset`
//! and the Members page's *Reset link* button (the link shown once), and the link's own page
//! `/reset/<token>` where the person sets a new password once.

use askama::Template;
use axum::{
    Form, Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;
use uuid::Uuid;

use super::resets::{self, LinkProblem, ResetLink};
use crate::{
    auth::{Auth, ClientIp, session_err},
    error::{AppError, AppResult},
    state::AppState,
    web::{AnonCtx, Page, PageCtx, flash_error, form_error, render},
};

/// Where the Members page finds a just-made reset link (email, URL), once.
pub const SESSION_KEY: &str = "reset_link";

/// The answer to `POST /api/members/{id}/password-reset`: the link, shown this once.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResetIssued {
    email: String,
    reset_url: String,
    expires_at: DateTime<Utc>,
}

fn url(state: &AppState, headers: &HeaderMap, token: &str) -> String {
    crate::web::absolute_link(state, headers, resets::link_path(token))
}

/// `POST /api/members/{id}/password-reset` (admins) → 201 with the one-time link.
pub async fn issue_api(
    State(state): State<AppState>,
    auth: Auth,
    ip: ClientIp,
    headers: HeaderMap,
    Path(user): Path<Uuid>,
) -> AppResult<Response> {
    let r = resets::issue(&state.pool, &auth, &ip, user).await?;
    let body = ResetIssued { reset_url: url(&state, &headers, &r.token), email: r.email, expires_at: r.expires_at };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `POST /admin/members/{id}/reset-link`: back to the Members page, the link shown once (or
/// why not, as an error notice).
pub async fn issue_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    headers: HeaderMap,
    Path(user): Path<Uuid>,
) -> AppResult<Redirect> {
    match resets::issue(&state.pool, &page.auth, &ip, user).await {
        Ok(r) => {
            session.insert(SESSION_KEY, (r.email, url(&state, &headers, &r.token))).await.map_err(session_err)?;
        }
        Err(e) if e.status().is_client_error() && !matches!(e, AppError::Unauthorized | AppError::NoTenant) => {
            flash_error(&session, form_error(page.ctx.lang, &e)).await?;
        }
        Err(e) => return Err(e),
    }
    Ok(Redirect::to("/admin/members"))
}

#[derive(Template)]
#[template(path = "auth/reset.html")]
struct ResetPage {
    ctx: PageCtx,
    token: String,
    link: Option<ResetLink>,
    problem: Option<String>,
    error: Option<String>,
    done: bool,
}

fn problem_words(ctx: &PageCtx, p: LinkProblem) -> String {
    match p {
        LinkProblem::Unknown => ctx.t("reset.unknown"),
        LinkProblem::Expired => ctx.t("reset.expired"),
    }
}

async fn page_for(state: &AppState, ctx: PageCtx, token: String, error: Option<String>) -> AppResult<Response> {
    let (link, problem) = match resets::by_link(&state.pool, &token).await? {
        Ok(l) => (Some(l), None),
        Err(p) => (None, Some(problem_words(&ctx, p))),
    };
    let status = if problem.is_some() { StatusCode::NOT_FOUND } else { StatusCode::OK };
    let mut r = render(ResetPage { ctx, token, link, problem, error, done: false })?;
    *r.status_mut() = status;
    Ok(r)
}

/// `GET /reset/{token}`: the new-password form, or why the link does not work.
pub async fn reset_page(State(state): State<AppState>, AnonCtx(ctx): AnonCtx, Path(token): Path<String>) -> AppResult<Response> {
    page_for(&state, ctx, token, None).await
}

#[derive(Deserialize)]
pub struct ResetForm {
    #[serde(default)]
    password: String,
    #[serde(default)]
    confirm_password: String,
}

/// `POST /reset/{token}`: set the password once; every session of the account ends (this
/// browser's too, so the person signs in with the new password).
pub async fn reset(
    State(state): State<AppState>,
    session: Session,
    AnonCtx(ctx): AnonCtx,
    ip: ClientIp,
    Path(token): Path<String>,
    Form(f): Form<ResetForm>,
) -> AppResult<Response> {
    let result = if f.password != f.confirm_password {
        Err(AppError::invalid("confirm_password", "the two passwords differ"))
    } else {
        resets::use_link(&state.pool, &ip, &token, &f.password).await
    };
    match result {
        Ok(_) => {
            session.flush().await.map_err(session_err)?;
            render(ResetPage { ctx, token: String::new(), link: None, problem: None, error: None, done: true })
        }
        Err(e) if e.status().is_client_error() => {
            let status = e.status();
            let msg = form_error(ctx.lang, &e);
            let mut r = page_for(&state, ctx, token, Some(msg)).await?;
            if r.status() == StatusCode::OK {
                *r.status_mut() = status;
            }
            Ok(r)
        }
        Err(e) => Err(e),
    }
}

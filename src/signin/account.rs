//! The account page: the signed-in person's password (browser sessions only).

use askama::Template;
use axum::{
    Form,
    extract::State,
    http::HeaderMap,
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use tower_sessions::Session;

use crate::{
    auth::{
        EPOCH, Via,
        account::{BrowserSession, change_password},
        rate_limit::{Peer, client_ip},
        session_err,
    },
    error::{AppError, AppResult},
    state::AppState,
    web::{Page, PageCtx, flash, form_error, render},
};

#[derive(Template)]
#[template(path = "settings/account.html")]
struct AccountPage {
    ctx: PageCtx,
    email: String,
    error: Option<String>,
    /// Which field the error is about (`current_password`, `new_password`, `confirm`).
    error_field: String,
}

pub async fn account_page(page: Page) -> AppResult<Response> {
    render(AccountPage { email: page.auth.email.clone(), ctx: page.ctx, error: None, error_field: String::new() })
}

/// The password form. Missing fields are empty strings, so they get the inline message.
#[derive(Deserialize)]
pub struct PasswordForm {
    #[serde(default)]
    current_password: String,
    #[serde(default)]
    new_password: String,
    #[serde(default)]
    confirm_password: String,
}

pub async fn change_password_form(
    State(state): State<AppState>,
    session: Session,
    headers: HeaderMap,
    peer: Peer,
    page: Page,
    Form(f): Form<PasswordForm>,
) -> AppResult<Response> {
    if page.auth.via != Via::Session {
        return Err(BrowserSession::token_refused());
    }
    let result = if f.new_password != f.confirm_password {
        Err(AppError::invalid("confirm_password", "the two new passwords differ"))
    } else {
        let ip = client_ip(state.config.trust_proxy, &headers, peer.0);
        change_password(&state, page.auth.user_id, &ip, &f.current_password, &f.new_password).await
    };
    match result {
        Ok(epoch) => {
            session.insert(EPOCH, epoch).await.map_err(session_err)?;
            flash(&session, page.ctx.t("account.password_changed")).await?;
            Ok(Redirect::to("/settings/account").into_response())
        }
        Err(e) if e.status().is_client_error() => {
            let field = match &e {
                AppError::Invalid { fields, .. } => fields.keys().next().cloned().unwrap_or_default(),
                _ => String::new(),
            };
            let message = form_error(page.ctx.lang, &e);
            let status = e.status();
            let mut r =
                render(AccountPage { email: page.auth.email.clone(), ctx: page.ctx, error: Some(message), error_field: field })?;
            *r.status_mut() = status;
            Ok(r)
        }
        Err(e) => Err(e),
    }
}

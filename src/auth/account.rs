//! The signed-in person's own account: changing the password (the current one required; the
//! account's other sessions are signed out; its page is `signin::account`), and starting a
//! session after sign-in.
//!
//! Sessions are signed out through the account's `session_epoch`: a session stores the epoch
//! it signed in with ([`super::EPOCH`]) and [`super::signed_in`] drops it when the account's
//! epoch moved on. A password change bumps the epoch and re-stamps the session that made it.

use axum::{
    extract::{FromRequestParts, State},
    http::{HeaderMap, StatusCode, request::Parts},
};
use serde::Deserialize;
use sqlx::PgExecutor;
use tower_sessions::Session;
use uuid::Uuid;

use super::{
    EPOCH, LOGIN_AT, SignedIn, USER_ID, password,
    rate_limit::{self, Peer, client_ip},
    session_err,
};
use crate::{
    auth::directory as tq,
    error::{ApiJson, AppError, AppResult},
    state::AppState,
};

/// The account's current session epoch; `None` when the account is gone.
pub async fn session_epoch(db: impl PgExecutor<'_>, user: Uuid) -> sqlx::Result<Option<i32>> {
    sqlx::query_scalar!("select session_epoch from app_user where id = $1", user).fetch_optional(db).await
}

/// Begin a signed-in session for `user` (after the password was checked, or an account was
/// just created): a new session id and CSRF token (fixation), the user, the sign-in time and
/// the account's session epoch.
pub async fn start_session(session: &Session, db: impl PgExecutor<'_>, user: Uuid) -> AppResult<()> {
    let epoch = session_epoch(db, user).await?.unwrap_or(0);
    session.cycle_id().await.map_err(session_err)?;
    session.remove::<String>(super::csrf::KEY).await.map_err(session_err)?;
    session.insert(USER_ID, user).await.map_err(session_err)?;
    session.insert(LOGIN_AT, chrono::Utc::now().timestamp()).await.map_err(session_err)?;
    session.insert(EPOCH, epoch).await.map_err(session_err)?;
    Ok(())
}

/// Change `user`'s password: `current` must be right, `new` a valid new password. Returns
/// the account's new session epoch (every session signed in before is signed out).
///
/// The check of `current` is a password check like sign-in, under the same limits and
/// budget ([`rate_limit`]: per account from `ip`, per address, per account): a wrong current
/// password counts as a failure, and over a limit the answer is `rate_limited` whatever the
/// password (issue 31 item 2).
pub async fn change_password(state: &AppState, user: Uuid, ip: &str, current: &str, new: &str) -> AppResult<i32> {
    let row = tq::user_by_id(&state.pool, user).await?.ok_or(AppError::Unauthorized)?;
    let attempt = rate_limit::reserve(&state.pool, &state.config, &row.email, ip).await?;
    let right = password::verify(current.to_string(), Some(row.password_hash)).await?;
    rate_limit::finish(&state.pool, attempt, right).await?;
    if !right {
        tracing::info!(user.id = %user, client.ip = %ip, "password change: the current password was wrong");
        return Err(AppError::invalid("current_password", "the current password is not right"));
    }
    password::validate_new_password(new)?;
    if new == current {
        return Err(AppError::invalid("new_password", "the new password must differ from the current one"));
    }
    let hash = password::hash(new.to_string()).await?;
    let epoch = sqlx::query_scalar!(
        "update app_user set password_hash = $2, session_epoch = session_epoch + 1 where id = $1 returning session_epoch",
        user,
        hash,
    )
    .fetch_one(&state.pool)
    .await?;
    tracing::info!(user.id = %user, "password changed; other sessions signed out");
    Ok(epoch)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasswordChange {
    current_password: String,
    new_password: String,
}

/// `POST /api/account/password` `{currentPassword, newPassword}` → 204. Sessions only: with a
/// bearer token it is `forbidden` (a token must not be a way to guess or change the password).
/// The caller's other sessions are signed out; this session stays signed in.
pub async fn change_password_api(
    State(state): State<AppState>,
    session: Session,
    headers: HeaderMap,
    peer: Peer,
    who: BrowserSession,
    ApiJson(b): ApiJson<PasswordChange>,
) -> AppResult<StatusCode> {
    let ip = client_ip(state.config.trust_proxy, &headers, peer.0);
    let epoch = change_password(&state, who.0.user_id, &ip, &b.current_password, &b.new_password).await?;
    session.insert(EPOCH, epoch).await.map_err(session_err)?;
    Ok(StatusCode::NO_CONTENT)
}

/// A signed-in browser session; a request with `Authorization` is `forbidden` (not
/// `unauthorized`: the token may be valid, it is just not enough for this).
pub struct BrowserSession(pub SignedIn);

impl FromRequestParts<AppState> for BrowserSession {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        if super::has_bearer(parts) {
            return Err(Self::token_refused());
        }
        Ok(BrowserSession(<SignedIn as FromRequestParts<AppState>>::from_request_parts(parts, state).await?))
    }
}

impl BrowserSession {
    pub fn token_refused() -> AppError {
        AppError::forbidden("sign in in the browser to change a password; an API token cannot")
    }
}

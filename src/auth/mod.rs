//! Authentication: who is calling, for which tenant, with which role.
//!
//! A request is authenticated either by `Authorization: Bearer <api token>` or by the session
//! cookie. Either way the result is an [`Auth`]: user, tenant and role, re-read from the
//! membership table on every request so a removed member loses access at once.

pub mod account;
pub mod csrf;
pub mod directory;
pub mod handlers;
pub mod password;
pub mod rate_limit;
pub mod tokens;

use axum::{
    extract::{FromRequestParts, OptionalFromRequestParts},
    http::{header::AUTHORIZATION, request::Parts},
};
use tower_sessions::Session;
use uuid::Uuid;

use crate::{
    auth::directory::{self as tq, Role},
    db::{Scope, TenantTx},
    error::AppError,
    state::AppState,
};

/// The session and token API and the password change (the pages are `signin`'s).
pub fn api_router() -> axum::Router<AppState> {
    use axum::routing::{delete, get};
    use handlers as a;
    axum::Router::new()
        .route("/api/session", get(a::session_info))
        .route("/api/tokens", get(a::list_tokens).post(a::create_token))
        .route("/api/tokens/{id}", delete(a::revoke_token))
        .route("/api/account/password", axum::routing::post(account::change_password_api))
}

/// The OpenAPI description of [`api_router`]'s routes.
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    use handlers as a;
    d.op("get", "/api/session").summary("Who is calling: user, team, role, how (`mnote.session.v1`)").ok::<a::SessionInfo>(200);
    d.op("get", "/api/tokens").summary("The caller's API tokens").ok::<crate::error::Items<tokens::ApiToken>>(200);
    d.op("post", "/api/tokens")
        .summary("Create an API token (its plaintext is answered this once)")
        .body::<a::NewToken>()
        .ok::<a::NewTokenView>(201)
        .errors(&[(429, &["too_many_tokens"])]);
    d.op("delete", "/api/tokens/{id}").summary("Revoke one of the caller's API tokens").empty(204);
    d.op("post", "/api/account/password")
        .summary("Change the own password (browser sessions only; other sessions are signed out)")
        .session_only()
        .body::<account::PasswordChange>()
        .empty(204)
        .errors(&[(429, &["rate_limited"])]);
}

/// Session keys.
pub const USER_ID: &str = "uid";
pub const TENANT_ID: &str = "tid";
pub const LOGIN_AT: &str = "login_at";
pub const LOCALE: &str = "locale";
/// The account's `session_epoch` when this session signed in (a password change bumps it).
pub const EPOCH: &str = "epoch";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Session,
    Token,
}

/// A caller acting inside one tenant.
#[derive(Clone, Debug)]
pub struct Auth {
    pub user_id: Uuid,
    pub tenant_id: Uuid,
    pub role: Role,
    pub email: String,
    pub via: Via,
}

impl Auth {
    pub fn require_admin(&self) -> Result<(), AppError> {
        if self.role.is_admin() { Ok(()) } else { Err(AppError::forbidden("this needs the admin or owner role")) }
    }

    /// A tenant transaction acting as this user.
    pub async fn tx(&self, state: &AppState) -> Result<TenantTx, sqlx::Error> {
        self.tx_pool(&state.pool).await
    }

    /// A read-only tenant transaction acting as this user, on the read replica when it may
    /// serve it (`db::read`): for reads that need not see this request's own writes.
    pub async fn read_tx(&self, state: &AppState) -> Result<TenantTx, sqlx::Error> {
        state.reads.begin(self.tenant_id, Scope::User(self.user_id)).await
    }

    /// [`crate::db::read::Reads::run`] acting as this user: `f` once more on the primary when
    /// the standby was lost under it.
    pub async fn read<T, E, F>(&self, state: &AppState, f: F) -> Result<T, E>
    where
        E: From<sqlx::Error>,
        F: for<'c> FnMut(&'c mut TenantTx) -> futures_util::future::BoxFuture<'c, Result<T, E>>,
    {
        state.reads.run(self.tenant_id, Scope::User(self.user_id), f).await
    }

    pub async fn tx_pool(&self, pool: &sqlx::PgPool) -> Result<TenantTx, sqlx::Error> {
        TenantTx::begin(pool, self.tenant_id, Scope::User(self.user_id)).await
    }
}

impl Auth {
    /// This caller as the audit log's actor, from `ip`.
    pub fn actor(&self, ip: &ClientIp) -> crate::audit::Actor {
        crate::audit::Actor { user_id: Some(self.user_id), email: self.email.clone(), ip: Some(ip.0.clone()) }
    }

    /// Write one audit row of this caller in `tx` (the transaction of the change it records).
    pub async fn audit(
        &self,
        tx: &mut TenantTx,
        ip: &ClientIp,
        action: crate::audit::Action,
        target: impl Into<String>,
        detail: impl Into<String>,
    ) -> Result<(), sqlx::Error> {
        crate::audit::record(tx, &crate::audit::Entry::new(self.actor(ip), action, target).detail(detail)).await
    }
}

/// The client address as the server sees it (`rate_limit::client_ip`: the TCP peer, or the
/// last `X-Forwarded-For` entry with `MNOTE_TRUST_PROXY`), for the audit log.
#[derive(Clone, Debug)]
pub struct ClientIp(pub String);

impl FromRequestParts<AppState> for ClientIp {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let peer = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0);
        Ok(ClientIp(rate_limit::client_ip(state.config.trust_proxy, &parts.headers, peer)))
    }
}

/// A signed-in browser user who may not have picked a tenant yet.
#[derive(Clone, Debug)]
pub struct SignedIn {
    pub user_id: Uuid,
    pub tenant_id: Option<Uuid>,
}

/// The calling account, with or without a chosen tenant: a valid bearer token's user, or the
/// session's signed-in user. For what belongs to the person rather than to one team (their
/// invitations), so a new account with no team yet can use it.
#[derive(Clone, Copy, Debug)]
pub struct Account {
    pub user_id: Uuid,
}

impl FromRequestParts<AppState> for Account {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        if has_bearer(parts) {
            let a = <Auth as FromRequestParts<AppState>>::from_request_parts(parts, state).await?;
            return Ok(Account { user_id: a.user_id });
        }
        let s = <SignedIn as FromRequestParts<AppState>>::from_request_parts(parts, state).await?;
        Ok(Account { user_id: s.user_id })
    }
}

fn bearer(parts: &Parts) -> Option<&str> {
    bearer_token(&parts.headers)
}

/// The token of `Authorization: Bearer <token>`, if that is the header's scheme.
pub fn bearer_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    let v = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub fn has_bearer(parts: &Parts) -> bool {
    parts.headers.contains_key(AUTHORIZATION)
}

async fn session_of(parts: &mut Parts, state: &AppState) -> Result<Session, AppError> {
    Session::from_request_parts(parts, state)
        .await
        .map_err(|(_, msg)| AppError::Internal(anyhow::anyhow!("session layer missing: {msg}")))
}

/// Read the signed-in user from the session, enforcing the absolute session lifetime.
async fn signed_in(session: &Session, state: &AppState) -> Result<Option<SignedIn>, AppError> {
    let Some(user_id) = session.get::<Uuid>(USER_ID).await.map_err(session_err)? else {
        return Ok(None);
    };
    let login_at = session.get::<i64>(LOGIN_AT).await.map_err(session_err)?.unwrap_or(0);
    let age = chrono::Utc::now().timestamp() - login_at;
    if age < 0 || age as u64 > state.config.session_absolute.as_secs() {
        session.flush().await.map_err(session_err)?;
        return Ok(None);
    }
    // Signed out by a password change made in another session.
    let epoch = session.get::<i32>(EPOCH).await.map_err(session_err)?.unwrap_or(0);
    if account::session_epoch(&state.pool, user_id).await?.is_none_or(|current| current != epoch) {
        session.flush().await.map_err(session_err)?;
        return Ok(None);
    }
    let tenant_id = session.get::<Uuid>(TENANT_ID).await.map_err(session_err)?;
    Ok(Some(SignedIn { user_id, tenant_id }))
}

pub fn session_err(e: tower_sessions::session::Error) -> AppError {
    AppError::Internal(anyhow::anyhow!("session store: {e}"))
}

async fn load(state: &AppState, user_id: Uuid, tenant_id: Uuid, via: Via) -> Result<Option<Auth>, AppError> {
    let mut tx = TenantTx::begin(&state.pool, tenant_id, Scope::User(user_id)).await?;
    let Some(m) = tq::member(&mut tx, user_id).await? else {
        return Ok(None);
    };
    tx.commit().await?;
    Ok(Some(Auth { user_id, tenant_id, role: m.role, email: m.email, via }))
}

impl FromRequestParts<AppState> for Auth {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        if has_bearer(parts) {
            let token = bearer(parts).ok_or(AppError::Unauthorized)?;
            let tenant_id = tokens::tenant_of(token).ok_or(AppError::Unauthorized)?;
            // One statement: the token and its user's membership of the token's tenant.
            let mut tx = TenantTx::begin(&state.pool, tenant_id, Scope::System).await?;
            let m = match tokens::authenticate(&mut tx, token).await? {
                Some(tokens::Authenticated::Member(m)) => m,
                Some(tokens::Authenticated::Expired) => return Err(AppError::TokenExpired),
                None => return Err(AppError::Unauthorized),
            };
            tx.commit().await?;
            return Ok(Auth { user_id: m.user_id, tenant_id, role: m.role, email: m.email, via: Via::Token });
        }
        let session = session_of(parts, state).await?;
        let who = signed_in(&session, state).await?.ok_or(AppError::Unauthorized)?;
        let Some(tenant_id) = who.tenant_id else {
            return Err(AppError::NoTenant);
        };
        match load(state, who.user_id, tenant_id, Via::Session).await? {
            Some(a) => Ok(a),
            None => {
                // No longer a member of that tenant: drop the choice, keep the login.
                session.remove::<Uuid>(TENANT_ID).await.map_err(session_err)?;
                Err(AppError::Unauthorized)
            }
        }
    }
}

impl OptionalFromRequestParts<AppState> for Auth {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Option<Self>, AppError> {
        match <Auth as FromRequestParts<AppState>>::from_request_parts(parts, state).await {
            Ok(a) => Ok(Some(a)),
            Err(AppError::Unauthorized | AppError::NoTenant) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl FromRequestParts<AppState> for SignedIn {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        // A request carrying credentials of its own never acts as the cookie's user.
        if has_bearer(parts) {
            return Err(AppError::Unauthorized);
        }
        let session = session_of(parts, state).await?;
        signed_in(&session, state).await?.ok_or(AppError::Unauthorized)
    }
}

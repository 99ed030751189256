//! The session info endpoint, the API token endpoints and `SignedInOpt` (the sign-in pages
//! that render with the layout are `signin`'s).

use axum::{
    Json,
    extract::State,
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;
use uuid::Uuid;

use super::{
    Auth, SignedIn,
    directory::{self as tq, Role},
};
use crate::{
    error::{ApiJson, AppError, AppResult, Items},
    state::AppState,
};

pub use super::rate_limit::{Peer, client_ip};

/// `SignedIn` as an optional extractor.
pub struct SignedInOpt(pub SignedIn);

impl axum::extract::OptionalFromRequestParts<AppState> for SignedInOpt {
    type Rejection = AppError;
    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &AppState) -> Result<Option<Self>, AppError> {
        use axum::extract::FromRequestParts;
        match SignedIn::from_request_parts(parts, state).await {
            Ok(s) => Ok(Some(SignedInOpt(s))),
            Err(AppError::Unauthorized) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// `GET /api/session`: who is calling, and the CSRF token for cookie-authenticated JSON calls.
/// `mnote.session.v1`
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    schema: &'static str,
    user: SessionUser,
    tenant: SessionTenant,
    role: Role,
    /// `session` (a browser) or `token` (an API token).
    authenticated_by: &'static str,
    /// For cookie-authenticated JSON calls; `null` for a token.
    csrf_token: Option<String>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct SessionUser {
    id: Uuid,
    email: String,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct SessionTenant {
    id: Uuid,
    name: Option<String>,
}

pub async fn session_info(State(state): State<AppState>, session: Session, auth: Auth) -> AppResult<Json<SessionInfo>> {
    let tenant = tq::tenant_name(&state.pool, auth.tenant_id).await?;
    let csrf = match auth.via {
        super::Via::Session => Some(super::csrf::token(&session).await?),
        super::Via::Token => None,
    };
    Ok(Json(SessionInfo {
        schema: "mnote.session.v1",
        user: SessionUser { id: auth.user_id, email: auth.email },
        tenant: SessionTenant { id: auth.tenant_id, name: tenant },
        role: auth.role,
        authenticated_by: match auth.via {
            super::Via::Session => "session",
            super::Via::Token => "token",
        },
        csrf_token: csrf,
    }))
}

// ---------------------------------------------------------------- API tokens

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewToken {
    #[schemars(length(min = 1, max = 100), regex(pattern = r"\S"))]
    name: String,
    /// Days until the token stops working (`null` / absent: never).
    #[serde(default)]
    #[schemars(range(min = 1, max = super::tokens::MAX_EXPIRY_DAYS))]
    expires_in_days: Option<i64>,
}

pub(crate) fn token_name(raw: &str) -> AppResult<String> {
    let n = raw.trim();
    if n.is_empty() || n.chars().count() > 100 {
        return Err(AppError::invalid("name", "a label of 1–100 characters"));
    }
    Ok(n.to_string())
}

pub(crate) fn token_expiry(days: Option<i64>) -> AppResult<Option<i64>> {
    match days {
        None => Ok(None),
        Some(d) if (1..=super::tokens::MAX_EXPIRY_DAYS).contains(&d) => Ok(Some(d)),
        Some(_) => Err(AppError::invalid("expiresInDays", format!("1–{} days, or none", super::tokens::MAX_EXPIRY_DAYS))),
    }
}

/// `POST /api/tokens` `{name, expiresInDays?}`: the plaintext is in the response once and never again.
pub async fn create_token(
    State(state): State<AppState>,
    auth: Auth,
    ip: super::ClientIp,
    ApiJson(b): ApiJson<NewToken>,
) -> AppResult<Response> {
    let name = token_name(&b.name)?;
    let days = token_expiry(b.expires_in_days)?;
    let mut tx = auth.tx(&state).await?;
    super::tokens::ensure_room(&mut tx, auth.user_id).await?;
    let (rec, plain) = super::tokens::create_expiring(&mut tx, auth.tenant_id, auth.user_id, &name, days).await?;
    auth.audit(&mut tx, &ip, crate::audit::Action::TokenCreate, format!("token:{} {}", rec.id, rec.name), "").await?;
    tx.commit().await?;
    Ok((axum::http::StatusCode::CREATED, Json(NewTokenView { token: rec, plaintext: plain })).into_response())
}

/// A new token: its record and, this once, its plaintext (`token`).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct NewTokenView {
    #[serde(flatten)]
    token: super::tokens::ApiToken,
    #[serde(rename = "token")]
    plaintext: String,
}

pub async fn list_tokens(State(state): State<AppState>, auth: Auth) -> AppResult<Json<Items<super::tokens::ApiToken>>> {
    let mut tx = auth.tx(&state).await?;
    let items = super::tokens::list_for_user(&mut tx, auth.user_id).await?;
    tx.commit().await?;
    Ok(Json(items.into()))
}

pub async fn revoke_token(
    State(state): State<AppState>,
    auth: Auth,
    ip: super::ClientIp,
    axum::extract::Path(id): axum::extract::Path<Uuid>,
) -> AppResult<axum::http::StatusCode> {
    let mut tx = auth.tx(&state).await?;
    if !super::tokens::revoke(&mut tx, auth.user_id, id).await? {
        return Err(AppError::NotFound);
    }
    auth.audit(&mut tx, &ip, crate::audit::Action::TokenRevoke, format!("token:{id}"), "").await?;
    tx.commit().await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

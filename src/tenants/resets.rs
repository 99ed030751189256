//! Admin-issued password reset links (issue 44 item 5): a team admin gives a member a
//! one-time link (`/reset/<tenant>.<secret>`, shown once, stored as a SHA-256, valid for
//! [`TTL_HOURS`]); whoever opens it sets the account's password once, and every session of
//! the account is signed out.
//!
//! An admin can take over an account with such a link (they see it), so it is limited to
//! accounts the team alone holds: a member of any other team is refused (`conflict`: the
//! operator resets it, `mnote user add --password-stdin` cannot either, by design), and so is
//! the admin's own account (the password page is for that) and an owner unless an owner
//! issues it.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::{
    audit::{self, Action, Actor, Entry},
    auth::{Auth, ClientIp, directory as q, directory::Role, password, tokens},
    db::{Scope, TenantTx},
    error::{AppError, AppResult},
};

/// How long a reset link works.
pub const TTL_HOURS: i64 = 24;

/// A new reset link: its token (shown once) and when it stops working.
pub struct Issued {
    pub token: String,
    pub email: String,
    pub expires_at: DateTime<Utc>,
}

/// The path of a reset link.
pub fn link_path(token: &str) -> String {
    format!("/reset/{token}")
}

/// Issue a reset link for `user`, a member of the admin's team (older unused links of that
/// member stop working).
pub async fn issue(pool: &PgPool, auth: &Auth, ip: &ClientIp, user: Uuid) -> AppResult<Issued> {
    auth.require_admin()?;
    if user == auth.user_id {
        return Err(AppError::invalid("id", "change your own password on your account page"));
    }
    let mut tx = auth.tx_pool(pool).await?;
    let m = q::member(&mut tx, user).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    if m.role == Role::Owner && auth.role != Role::Owner {
        return Err(AppError::forbidden("only an owner can reset an owner's password"));
    }
    if teams_of(pool, user).await? > 1 {
        return Err(AppError::Conflict("this account is also in another team; only the operator can reset its password".into()));
    }
    let token = super::invitations::new_link_token(auth.tenant_id);
    let mut tx = auth.tx_pool(pool).await?;
    let tenant = tx.tenant_id();
    sqlx::query!(
        "update password_reset set link_hash = null where tenant_id = $1 and user_id = $2 and used_at is null",
        tenant,
        user,
    )
    .execute(&mut *tx)
    .await?;
    let expires_at = sqlx::query_scalar!(
        r#"insert into password_reset (tenant_id, id, user_id, link_hash, created_by, expires_at)
           values ($1, $2, $3, $4, $5, now() + make_interval(hours => $6)) returning expires_at as "expires_at: _""#,
        tenant,
        Uuid::new_v4(),
        user,
        tokens::hash(&token),
        auth.user_id,
        TTL_HOURS as i32,
    )
    .fetch_one(&mut *tx)
    .await?;
    auth.audit(&mut tx, ip, Action::PasswordResetLink, format!("user:{user} {}", m.email), "").await?;
    tx.commit().await?;
    Ok(Issued { token, email: m.email, expires_at })
}

/// How many teams the account belongs to, read in its own user scope (the memberships
/// policy shows an account its own memberships in every team; nothing else is read).
async fn teams_of(pool: &PgPool, user: Uuid) -> sqlx::Result<usize> {
    let mut tx = TenantTx::begin_user_only(pool, user).await?;
    let n = q::tenants_of_user(&mut tx, user).await?.len();
    tx.commit().await?;
    Ok(n)
}

/// The account a usable link resets.
pub struct ResetLink {
    pub tenant_id: Uuid,
    pub user_id: Uuid,
    pub email: String,
    pub expires_at: DateTime<Utc>,
}

/// Why a link cannot be used (as an invitation link's: unknown — wrong, replaced or used
/// already — or expired).
pub use super::invitations::LinkProblem;

struct Row {
    user_id: Uuid,
    email: String,
    expires_at: DateTime<Utc>,
    expired: bool,
}

async fn row(tx: &mut TenantTx, token: &str) -> sqlx::Result<Result<ResetLink, LinkProblem>> {
    let tenant = tx.tenant_id();
    let r = sqlx::query_as!(
        Row,
        r#"select r.user_id, u.email, r.expires_at as "expires_at: _", r.expires_at <= now() as "expired!"
           from password_reset r join app_user u on u.id = r.user_id
           where r.tenant_id = $1 and r.link_hash = $2 and r.used_at is null
           for update of r"#,
        tenant,
        tokens::hash(token),
    )
    .fetch_optional(&mut **tx)
    .await?;
    Ok(match r {
        None => Err(LinkProblem::Unknown),
        Some(r) if r.expired => Err(LinkProblem::Expired),
        Some(r) => Ok(ResetLink { tenant_id: tenant, user_id: r.user_id, email: r.email, expires_at: r.expires_at }),
    })
}

/// The account behind a link token, if the link can still be used.
pub async fn by_link(pool: &PgPool, token: &str) -> AppResult<Result<ResetLink, LinkProblem>> {
    let Some(tenant) = super::invitations::tenant_of_link(token) else { return Ok(Err(LinkProblem::Unknown)) };
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let r = row(&mut tx, token).await?;
    tx.commit().await?;
    Ok(r)
}

/// Set the account's password through the link, once: the link is used up and every session
/// of the account signed out, in one transaction. The account it reset.
pub async fn use_link(pool: &PgPool, ip: &ClientIp, token: &str, pw: &str) -> AppResult<ResetLink> {
    password::validate_new_password(pw)?;
    let tenant = super::invitations::tenant_of_link(token).ok_or(AppError::NotFound)?;
    let hash = password::hash(pw.to_string()).await?;
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let link = match row(&mut tx, token).await? {
        Ok(l) => l,
        Err(LinkProblem::Unknown) => return Err(AppError::NotFound),
        Err(LinkProblem::Expired) => return Err(AppError::Conflict("this reset link has expired; ask for a new one".into())),
    };
    sqlx::query!(
        "update password_reset set used_at = now(), link_hash = null where tenant_id = $1 and link_hash = $2",
        tenant,
        tokens::hash(token),
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!("update app_user set password_hash = $2, session_epoch = session_epoch + 1 where id = $1", link.user_id, hash)
        .execute(&mut *tx)
        .await?;
    let actor = Actor { user_id: Some(link.user_id), email: link.email.clone(), ip: Some(ip.0.clone()) };
    audit::record(&mut tx, &Entry::new(actor, Action::PasswordReset, link.email.clone()).detail("reset link")).await?;
    tx.commit().await?;
    tracing::info!(tenant.id = %tenant, user.id = %link.user_id, "password reset through a link; sessions signed out");
    Ok(link)
}

//! The team's audit rows written outside a change's own transaction: an invitation (made
//! through `invitations::invite`, which commits by itself) and an account answering an
//! invitation (it has no `Auth` in that team until it joined).

use uuid::Uuid;

use crate::{
    audit::{self, Action, Actor, Entry},
    auth::{Auth, ClientIp, directory as q},
    db::{Scope, TenantTx},
    error::AppResult,
    state::AppState,
};

/// One row of `auth` in its team, in a transaction of its own.
pub async fn by(state: &AppState, auth: &Auth, ip: &ClientIp, action: Action, target: &str, detail: &str) -> AppResult<()> {
    let mut tx = auth.tx(state).await?;
    auth.audit(&mut tx, ip, action, target, detail).await?;
    tx.commit().await?;
    Ok(())
}

/// One row of `user` in `tenant` (an account that just joined it).
pub async fn as_member(
    state: &AppState,
    tenant: Uuid,
    user: Uuid,
    ip: &ClientIp,
    action: Action,
    target: &str,
    detail: &str,
) -> AppResult<()> {
    let mut tx = TenantTx::begin(&state.pool, tenant, Scope::User(user)).await?;
    let email = q::member(&mut tx, user).await?.map(|m| m.email).unwrap_or_default();
    let actor = Actor { user_id: Some(user), email, ip: Some(ip.0.clone()) };
    audit::record(&mut tx, &Entry::new(actor, action, target).detail(detail)).await?;
    tx.commit().await?;
    Ok(())
}

//! What command-line and batch work (`mnote index`, `eval`, `bench`, …) runs with: a small
//! pool from the environment, and a real member of a tenant to act as, so every command goes
//! through the same service functions and row-level security as the HTTP API.

use anyhow::Context as _;
use sqlx::PgPool;

use crate::{
    auth::{Auth, Via},
    config::Config,
    db::{self, Scope, TenantTx},
    tenants::queries::{self as tq, Role},
};

/// The configuration from the environment and a small pool of the app role.
pub async fn app_pool() -> anyhow::Result<(Config, PgPool)> {
    let cfg = Config::from_env()?;
    let pool = db::connect(&cfg.database_url, 4).await?;
    Ok((cfg, pool))
}

/// Resolve `--tenant` (and `--as`) to an `Auth` for a real member of that tenant.
pub async fn act_as(pool: &PgPool, tenant: &str, email: Option<&str>) -> anyhow::Result<Auth> {
    let tenant_id = tq::tenant_by_name(pool, tenant).await?.with_context(|| format!("no tenant named {tenant:?}"))?;
    let mut tx = TenantTx::begin(pool, tenant_id, Scope::System).await?;
    let member = match email {
        Some(e) => tq::member_by_email(&mut tx, e).await?.with_context(|| format!("{e} is not a member of {tenant}"))?,
        None => {
            let members = tq::members(&mut tx).await?;
            members
                .into_iter()
                .filter(|m| m.role == Role::Owner)
                .min_by_key(|m| m.created_at)
                .with_context(|| format!("tenant {tenant} has no owner"))?
        }
    };
    tx.commit().await?;
    Ok(Auth { user_id: member.user_id, tenant_id, role: member.role, email: member.email, via: Via::Token })
}

//! What command-line and batch work (`mnote index`, `eval`, `bench`, …) runs with: a small
//! pool from the environment, and a real member of a tenant to act as, so every command goes
//! through the same service functions and row-level security as the HTTP API.

use anyhow::Context as _;
use sqlx::PgPool;

use crate::{
    auth::directory::{self as tq, Role},
    auth::{Auth, Via},
    config::Config,
    db::{self, Scope, TenantTx},
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

/// The server (`app`, i.e. `startup::build_router`, passed in by `cli`) on a loopback port of
/// this process, and an API token of `actor` for it: what the benchmarks drive through HTTP.
/// Returns the base URL, the `Authorization` value and the token's id (revoke it afterwards).
pub async fn serve_in_process(
    state: crate::state::AppState,
    app: fn(crate::state::AppState) -> axum::Router,
    actor: &Auth,
    label: &str,
) -> anyhow::Result<(String, String, uuid::Uuid)> {
    let pool = state.pool.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    // The address really bound: what `/mcp` accepts as Host and builds citation URLs from.
    let mut state = state;
    let mut cfg = (*state.config).clone();
    cfg.bind = listener.local_addr()?;
    state.config = std::sync::Arc::new(cfg);
    let router = app(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router.into_make_service_with_connect_info::<std::net::SocketAddr>()).await;
    });
    let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
    let (token, plain) = crate::auth::tokens::create(&mut tx, actor.tenant_id, actor.user_id, label).await?;
    tx.commit().await?;
    Ok((base, format!("Bearer {plain}"), token.id))
}

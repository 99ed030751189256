//! SQL of the agent descriptors: each user's preferences (`ai_preference`, visible to its own
//! user only by policy) and the tenant's capability switches (`ai_capability_setting`,
//! written by owners/admins only by policy). The agent configuration's SQL is in `config`.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::TenantTx;

/// One stored preference: a JSON value, or (secrets) only that a sealed value exists.
#[derive(Debug, Clone)]
pub struct PreferenceRow {
    pub key: String,
    pub value: Option<serde_json::Value>,
    pub secret_cipher: Option<Vec<u8>>,
}

/// The preferences of `user` in the transaction's tenant.
pub async fn preferences(tx: &mut TenantTx, user: Uuid) -> sqlx::Result<Vec<PreferenceRow>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        PreferenceRow,
        "select key, value, secret_cipher from ai_preference where tenant_id = $2 and user_id = $1 order by key",
        user,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

pub async fn set_preference(
    conn: &mut PgConnection,
    tenant: Uuid,
    user: Uuid,
    key: &str,
    value: &serde_json::Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into ai_preference (tenant_id, user_id, key, value) values ($1, $2, $3, $4)
         on conflict (tenant_id, user_id, key) do update set value = excluded.value, secret_cipher = null",
        tenant,
        user,
        key,
        value,
    )
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn set_secret_preference(
    conn: &mut PgConnection,
    tenant: Uuid,
    user: Uuid,
    key: &str,
    sealed: &[u8],
) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into ai_preference (tenant_id, user_id, key, secret_cipher) values ($1, $2, $3, $4)
         on conflict (tenant_id, user_id, key) do update set value = null, secret_cipher = excluded.secret_cipher",
        tenant,
        user,
        key,
        sealed,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Back to the default: the row goes.
pub async fn reset_preference(tx: &mut TenantTx, user: Uuid, key: &str) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    sqlx::query!("delete from ai_preference where tenant_id = $3 and user_id = $1 and key = $2", user, key, tenant)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The tenant's capability switches that were ever set (`capability → enabled`).
pub async fn capability_switches(tx: &mut TenantTx) -> sqlx::Result<Vec<(String, bool)>> {
    let tenant = tx.tenant_id();
    let rows =
        sqlx::query!("select capability, enabled from ai_capability_setting where tenant_id = $1 order by capability", tenant)
            .fetch_all(&mut **tx)
            .await?;
    Ok(rows.into_iter().map(|r| (r.capability, r.enabled)).collect())
}

pub async fn set_capability(
    conn: &mut PgConnection,
    tenant: Uuid,
    by: Uuid,
    capability: &str,
    enabled: bool,
) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into ai_capability_setting (tenant_id, capability, enabled, updated_by) values ($1, $2, $3, $4)
         on conflict (tenant_id, capability) do update set enabled = excluded.enabled, updated_by = excluded.updated_by",
        tenant,
        capability,
        enabled,
        by,
    )
    .execute(conn)
    .await?;
    Ok(())
}

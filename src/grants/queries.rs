//! SQL for directory grants.

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::TenantTx;

#[derive(Clone, Debug, Serialize, sqlx::FromRow, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    pub id: Uuid,
    pub root_path: String,
    /// None = every member.
    pub user_id: Option<Uuid>,
    pub user_email: Option<String>,
    pub permission: super::Permission,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub revoked_at: Option<chrono::DateTime<chrono::Utc>>,
}

pub async fn insert(
    conn: &mut PgConnection,
    tenant: Uuid,
    root: &str,
    user: Option<Uuid>,
    permission: super::Permission,
    by: Uuid,
) -> sqlx::Result<Grant> {
    let id = sqlx::query_scalar!(
        "insert into dir_grant (tenant_id, id, root_path, user_id, permission, created_by)
         values ($1, $2, $3, $4, $5, $6) returning id",
        tenant,
        Uuid::new_v4(),
        root,
        user,
        permission as _,
        by,
    )
    .fetch_one(&mut *conn)
    .await?;
    get_in(conn, tenant, id).await?.ok_or(sqlx::Error::RowNotFound)
}

pub async fn get(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<Option<Grant>> {
    let tenant = tx.tenant_id();
    get_in(tx, tenant, id).await
}

async fn get_in(conn: &mut PgConnection, tenant: Uuid, id: Uuid) -> sqlx::Result<Option<Grant>> {
    sqlx::query_as!(
        Grant,
        r#"select g.id, g.root_path, g.user_id, u.email as "user_email?", g.permission as "permission: _",
            g.created_at as "created_at: _", g.revoked_at as "revoked_at: _"
        from dir_grant g left join app_user u on u.id = g.user_id
        where g.tenant_id = $2 and g.id = $1"#,
        id,
        tenant,
    )
    .fetch_optional(conn)
    .await
}

/// Find an identical active grant (same root, same grantee, same permission).
pub async fn find_active(
    tx: &mut TenantTx,
    root: &str,
    user: Option<Uuid>,
    permission: super::Permission,
) -> sqlx::Result<Option<Grant>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Grant,
        r#"select g.id, g.root_path, g.user_id, u.email as "user_email?", g.permission as "permission: _",
            g.created_at as "created_at: _", g.revoked_at as "revoked_at: _"
        from dir_grant g left join app_user u on u.id = g.user_id
        where g.tenant_id = $4 and g.root_path = $1 and g.user_id is not distinct from $2 and g.permission = $3
            and g.revoked_at is null"#,
        root,
        user,
        permission as _,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

/// All grants (admins), newest first.
pub async fn list_all(tx: &mut TenantTx) -> sqlx::Result<Vec<Grant>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Grant,
        r#"select g.id, g.root_path, g.user_id, u.email as "user_email?", g.permission as "permission: _",
            g.created_at as "created_at: _", g.revoked_at as "revoked_at: _"
        from dir_grant g left join app_user u on u.id = g.user_id
        where g.tenant_id = $1 order by g.revoked_at is not null, g.root_path, g.created_at desc"#,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

/// Active grants that apply to `user` (theirs and the all-members ones).
pub async fn active_for_user(tx: &mut TenantTx, user: Uuid) -> sqlx::Result<Vec<Grant>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Grant,
        r#"select g.id, g.root_path, g.user_id, u.email as "user_email?", g.permission as "permission: _",
            g.created_at as "created_at: _", g.revoked_at as "revoked_at: _"
        from dir_grant g left join app_user u on u.id = g.user_id
        where g.tenant_id = $2 and g.revoked_at is null and (g.user_id is null or g.user_id = $1)
        order by length(g.root_path) desc"#,
        user,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

/// Revoke the grant and mark the sources registered through it stale (`grant_revoked`).
pub async fn revoke(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<Option<u64>> {
    let tenant = tx.tenant_id();
    let done = sqlx::query!(
        "update dir_grant set revoked_at = now() where tenant_id = $2 and id = $1 and revoked_at is null",
        id,
        tenant
    )
    .execute(&mut **tx)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    let stale = sqlx::query!(
        "update source set status = 'stale', error_code = 'grant_revoked',
             error_message = 'the directory grant for this file was revoked'
         where tenant_id = $2 and grant_id = $1",
        id,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    Ok(Some(stale.rows_affected()))
}

/// What revoking grant `id` does (the confirmation says it): the sources that become stale
/// and leave search, and the KBs they are in. `None`: no such active grant.
#[derive(Clone, Debug, serde::Serialize, sqlx::FromRow, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevokeImpact {
    pub root_path: String,
    pub user_email: Option<String>,
    /// Sources under the grant that are not stale yet.
    pub stale_sources: i64,
    pub kbs: i64,
}

pub async fn revoke_impact(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<Option<RevokeImpact>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        RevokeImpact,
        r#"select g.root_path, u.email as "user_email?",
                (select count(*) from source s where s.tenant_id = g.tenant_id and s.grant_id = g.id and s.status <> 'stale') as "stale_sources!",
                (select count(distinct s.kb_id) from source s where s.tenant_id = g.tenant_id and s.grant_id = g.id and s.status <> 'stale') as "kbs!"
         from dir_grant g left join app_user u on u.id = g.user_id
         where g.tenant_id = $2 and g.id = $1 and g.revoked_at is null"#,
        id,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

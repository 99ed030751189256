//! SQL for knowledge bases. Visibility of private KBs is enforced by policies: the
//! `kb_visibility` policy decides who sees that a KB exists (`mnote_kb_visible`: also the
//! team's owners and admins), the content tables' policies who reads its contents
//! (`mnote_kb_readable`: owner, added members); these queries only add what the caller may
//! *do*, and the size (`mnote_kb_source_count`), which the list shows for KBs whose contents
//! the caller cannot read too.

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::TenantTx;

use crate::db::include_deleted;

#[derive(Clone, Debug, Serialize, sqlx::FromRow, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Kb {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub visibility: String,
    pub owner_id: Uuid,
    pub owner_email: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    /// Whether the caller reads the KB's contents (sources, passages): a team KB, or its owner
    /// or an added member. A team admin sees a private KB they are not in, and not its contents.
    pub can_read: bool,
    /// Whether the caller may change it: its sources, members, settings, LightRAG binding
    /// (owner, added managers, and team admins of a KB whose contents they read).
    pub can_manage: bool,
    /// Whether the caller may delete (and restore) it: who may manage it, and team admins.
    pub can_delete: bool,
    /// Whether the caller may give it to another member: its owner and team admins.
    pub can_transfer: bool,
    /// Live sources (known also to an admin who cannot read them).
    pub source_count: i64,
    /// Set while the KB is deleted (only the trash reads such rows); `None` otherwise.
    pub deleted_at: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Clone, Debug, Serialize, sqlx::FromRow, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KbMember {
    pub user_id: Uuid,
    pub email: String,
    pub can_manage: bool,
}

/// Which KBs [`select`] returns (on top of the `kb_visibility` policy).
#[derive(Clone, Copy, Default)]
struct Filter<'a> {
    id: Option<Uuid>,
    name: Option<&'a str>,
    /// Only deleted KBs (the caller has switched `include_deleted` on), most recent first.
    deleted: bool,
}

/// The one statement that reads KBs, with what the caller may do with each.
async fn select(tx: &mut TenantTx, user: Uuid, admin: bool, f: Filter<'_>) -> sqlx::Result<Vec<Kb>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Kb,
        r#"select k.id, k.name, k.description, k.visibility, k.owner_id, u.email as owner_email,
            k.created_at as "created_at: _", k.updated_at as "updated_at: _",
            mnote_kb_readable(k.tenant_id, k.id, k.visibility, k.owner_id) as "can_read!",
            (($2 and mnote_kb_readable(k.tenant_id, k.id, k.visibility, k.owner_id)) or k.owner_id = $1
                or exists (select 1 from kb_member m
                    where m.tenant_id = k.tenant_id and m.kb_id = k.id and m.user_id = $1 and m.can_manage)) as "can_manage!",
            ($2 or k.owner_id = $1 or exists (select 1 from kb_member m
                where m.tenant_id = k.tenant_id and m.kb_id = k.id and m.user_id = $1 and m.can_manage)) as "can_delete!",
            ($2 or k.owner_id = $1) as "can_transfer!",
            mnote_kb_source_count(k.tenant_id, k.id) as "source_count!",
            k.deleted_at as "deleted_at: _"
        from kb k join app_user u on u.id = k.owner_id
        where k.tenant_id = $3 and ($4::uuid is null or k.id = $4) and ($5::text is null or k.name = $5)
            and (not $6 or k.deleted_at is not null)
        order by case when $6 then k.deleted_at end desc, lower(k.name)"#,
        user,
        admin,
        tenant,
        f.id,
        f.name,
        f.deleted,
    )
    .fetch_all(&mut **tx)
    .await
}

pub async fn list(tx: &mut TenantTx, user: Uuid, admin: bool) -> sqlx::Result<Vec<Kb>> {
    select(tx, user, admin, Filter::default()).await
}

/// The KBs whose contents the caller reads (what search, runs, LightRAG and MCP offer): the
/// list without the private KBs an admin only sees exist.
pub async fn list_readable(tx: &mut TenantTx, user: Uuid, admin: bool) -> sqlx::Result<Vec<Kb>> {
    Ok(list(tx, user, admin).await?.into_iter().filter(|k| k.can_read).collect())
}

pub async fn get(tx: &mut TenantTx, user: Uuid, admin: bool, id: Uuid) -> sqlx::Result<Option<Kb>> {
    Ok(select(tx, user, admin, Filter { id: Some(id), ..Filter::default() }).await?.pop())
}

pub async fn get_by_name(tx: &mut TenantTx, user: Uuid, admin: bool, name: &str) -> sqlx::Result<Option<Kb>> {
    Ok(select(tx, user, admin, Filter { name: Some(name), ..Filter::default() }).await?.pop())
}

pub async fn insert(
    conn: &mut PgConnection,
    tenant: Uuid,
    name: &str,
    description: &str,
    visibility: &str,
    owner: Uuid,
) -> sqlx::Result<Uuid> {
    sqlx::query_scalar!(
        "insert into kb (tenant_id, id, name, description, visibility, owner_id)
         values ($1, $2, $3, $4, $5, $6) returning id",
        tenant,
        Uuid::new_v4(),
        name,
        description,
        visibility,
        owner,
    )
    .fetch_one(conn)
    .await
}

pub async fn update(
    tx: &mut TenantTx,
    id: Uuid,
    name: Option<&str>,
    description: Option<&str>,
    visibility: Option<&str>,
) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    let r = sqlx::query!(
        "update kb set name = coalesce($2, name), description = coalesce($3, description),
             visibility = coalesce($4, visibility)
         where tenant_id = $5 and id = $1",
        id,
        name,
        description,
        visibility,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Delete a KB: hidden at once with all its sources (and so their evidence), restorable
/// until the purge.
pub async fn soft_delete(tx: &mut TenantTx, id: Uuid, by: Uuid) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    include_deleted(tx, true).await?;
    let r = sqlx::query!(
        "update kb set deleted_at = now(), deleted_by = $2 where tenant_id = $3 and id = $1 and deleted_at is null",
        id,
        by,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    include_deleted(tx, false).await?;
    Ok(r.rows_affected() == 1)
}

/// Bring a deleted KB back (a unique violation: a live KB has its name now).
pub async fn restore(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    include_deleted(tx, true).await?;
    let r = sqlx::query!(
        "update kb set deleted_at = null, deleted_by = null where tenant_id = $2 and id = $1 and deleted_at is not null",
        id,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    include_deleted(tx, false).await?;
    Ok(r.rows_affected() == 1)
}

/// The deleted KBs the caller can see, most recent first.
pub async fn deleted(tx: &mut TenantTx, user: Uuid, admin: bool) -> sqlx::Result<Vec<Kb>> {
    include_deleted(tx, true).await?;
    let r = select(tx, user, admin, Filter { deleted: true, ..Filter::default() }).await?;
    include_deleted(tx, false).await?;
    Ok(r)
}

/// A deleted KB the caller can see.
pub async fn get_deleted(tx: &mut TenantTx, user: Uuid, admin: bool, id: Uuid) -> sqlx::Result<Option<Kb>> {
    include_deleted(tx, true).await?;
    let r = select(tx, user, admin, Filter { id: Some(id), deleted: true, ..Filter::default() }).await?.pop();
    include_deleted(tx, false).await?;
    Ok(r)
}

/// How much of a KB's content is searchable (what deleting it takes out of search), also for
/// an admin who cannot read it (a count only: `mnote_kb_block_count`).
pub async fn block_count(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<i64> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(r#"select mnote_kb_block_count($2, $1) as "n!""#, id, tenant).fetch_one(&mut **tx).await
}

/// Give the KB to `owner` (a member of the team). The previous owner stays in the KB as a
/// member without management rights (the new owner may remove them), so nothing they wrote
/// becomes unreadable to them behind their back.
pub async fn transfer(tx: &mut TenantTx, id: Uuid, previous: Uuid, owner: Uuid) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    if previous != owner {
        sqlx::query!(
            "insert into kb_member (tenant_id, kb_id, user_id, can_manage) values ($1, $2, $3, false)
             on conflict (tenant_id, kb_id, user_id) do nothing",
            tenant,
            id,
            previous,
        )
        .execute(&mut **tx)
        .await?;
    }
    let r = sqlx::query!("update kb set owner_id = $2 where tenant_id = $3 and id = $1", id, owner, tenant)
        .execute(&mut **tx)
        .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn members(tx: &mut TenantTx, kb: Uuid) -> sqlx::Result<Vec<KbMember>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        KbMember,
        "select m.user_id, u.email, m.can_manage from kb_member m join app_user u on u.id = m.user_id
         where m.tenant_id = $2 and m.kb_id = $1 order by lower(u.email)",
        kb,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

pub async fn put_member(conn: &mut PgConnection, tenant: Uuid, kb: Uuid, user: Uuid, manage: bool) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into kb_member (tenant_id, kb_id, user_id, can_manage) values ($1, $2, $3, $4)
         on conflict (tenant_id, kb_id, user_id) do update set can_manage = excluded.can_manage",
        tenant,
        kb,
        user,
        manage,
    )
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn remove_member(tx: &mut TenantTx, kb: Uuid, user: Uuid) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    let r = sqlx::query!("delete from kb_member where tenant_id = $3 and kb_id = $1 and user_id = $2", kb, user, tenant)
        .execute(&mut **tx)
        .await?;
    Ok(r.rows_affected() == 1)
}

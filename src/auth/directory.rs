//! SQL for tenants, users, memberships and the invitations a user received.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use crate::db::TenantTx;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum Role {
    Owner,
    Admin,
    Member,
}

impl Role {
    pub fn is_admin(self) -> bool {
        matches!(self, Role::Owner | Role::Admin)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "owner" => Ok(Role::Owner),
            "admin" => Ok(Role::Admin),
            "member" => Ok(Role::Member),
            _ => Err(format!("unknown role {s:?} (owner|admin|member)")),
        }
    }
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct UserRow {
    pub id: Uuid,
    pub email: String,
    pub password_hash: String,
    pub display_name: Option<String>,
    pub locale: Option<String>,
}

#[derive(Clone, Debug, Serialize, sqlx::FromRow, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    #[serde(rename = "id")]
    pub user_id: Uuid,
    pub email: String,
    pub display_name: Option<String>,
    pub role: Role,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Clone, Debug, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct TenantChoice {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
}

pub async fn tenant_by_name(db: impl PgExecutor<'_>, name: &str) -> sqlx::Result<Option<Uuid>> {
    sqlx::query_scalar!("select id from tenant where name = $1", name).fetch_optional(db).await
}

pub async fn tenant_name(db: impl PgExecutor<'_>, id: Uuid) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!("select name from tenant where id = $1", id).fetch_optional(db).await
}

pub async fn insert_tenant(db: impl PgExecutor<'_>, name: &str) -> sqlx::Result<Uuid> {
    sqlx::query_scalar!("insert into tenant (id, name) values ($1, $2) returning id", Uuid::new_v4(), name).fetch_one(db).await
}

pub async fn user_by_email(db: impl PgExecutor<'_>, email: &str) -> sqlx::Result<Option<UserRow>> {
    sqlx::query_as!(
        UserRow,
        "select id, email, password_hash, display_name, locale from app_user where lower(email) = lower($1)",
        email.trim(),
    )
    .fetch_optional(db)
    .await
}

pub async fn user_by_id(db: impl PgExecutor<'_>, id: Uuid) -> sqlx::Result<Option<UserRow>> {
    sqlx::query_as!(UserRow, "select id, email, password_hash, display_name, locale from app_user where id = $1", id)
        .fetch_optional(db)
        .await
}

pub async fn insert_user(db: impl PgExecutor<'_>, email: &str, password_hash: &str) -> sqlx::Result<Uuid> {
    sqlx::query_scalar!(
        "insert into app_user (id, email, password_hash) values ($1, $2, $3) returning id",
        Uuid::new_v4(),
        email.trim(),
        password_hash,
    )
    .fetch_one(db)
    .await
}

pub async fn set_locale(db: impl PgExecutor<'_>, user: Uuid, locale: Option<&str>) -> sqlx::Result<()> {
    sqlx::query!("update app_user set locale = $2 where id = $1", user, locale).execute(db).await?;
    Ok(())
}

pub async fn any_users(db: impl PgExecutor<'_>) -> sqlx::Result<bool> {
    sqlx::query_scalar!(r#"select exists (select 1 from app_user) as "any!""#).fetch_one(db).await
}

/// The caller's role in the transaction's tenant.
pub async fn role_of(tx: &mut TenantTx, user: Uuid) -> sqlx::Result<Option<Role>> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(
        r#"select role as "role: Role" from membership
         where user_id = $1 and tenant_id = $2"#,
        user,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

/// Tenants the user belongs to (needs a transaction with `app.user_id` set).
pub async fn tenants_of_user(conn: &mut PgConnection, user: Uuid) -> sqlx::Result<Vec<TenantChoice>> {
    sqlx::query_as!(
        TenantChoice,
        // all tenants: the tenant picker lists the user's memberships in every team.
        r#"select t.id, t.name, m.role as "role: _" from membership m join tenant t on t.id = m.tenant_id
         where m.user_id = $1 order by t.name"#,
        user,
    )
    .fetch_all(conn)
    .await
}

pub async fn add_membership(conn: &mut PgConnection, tenant: Uuid, user: Uuid, role: Role) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into membership (tenant_id, user_id, role) values ($1, $2, $3)
         on conflict (tenant_id, user_id) do update set role = excluded.role",
        tenant,
        user,
        role as _,
    )
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn members(tx: &mut TenantTx) -> sqlx::Result<Vec<Member>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Member,
        r#"select u.id as user_id, u.email, u.display_name, m.role as "role: _", m.created_at as "created_at: _"
         from membership m join app_user u on u.id = m.user_id
         where m.tenant_id = $1
         order by m.role, lower(u.email)"#,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

pub async fn member(tx: &mut TenantTx, user: Uuid) -> sqlx::Result<Option<Member>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Member,
        r#"select u.id as user_id, u.email, u.display_name, m.role as "role: _", m.created_at as "created_at: _"
         from membership m join app_user u on u.id = m.user_id
         where m.user_id = $1 and m.tenant_id = $2"#,
        user,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

pub async fn member_by_email(tx: &mut TenantTx, email: &str) -> sqlx::Result<Option<Member>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Member,
        r#"select u.id as user_id, u.email, u.display_name, m.role as "role: _", m.created_at as "created_at: _"
         from membership m join app_user u on u.id = m.user_id
         where lower(u.email) = lower($1)
           and m.tenant_id = $2"#,
        email.trim(),
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

pub async fn set_role(tx: &mut TenantTx, user: Uuid, role: Role) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    let r = sqlx::query!(
        "update membership set role = $2
         where user_id = $1 and tenant_id = $3",
        user,
        role as _,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn remove_member(tx: &mut TenantTx, user: Uuid) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    let r = sqlx::query!("delete from membership where user_id = $1 and tenant_id = $2", user, tenant).execute(&mut **tx).await?;
    Ok(r.rows_affected() == 1)
}

/// Owners of the transaction's tenant. The filter matters: the `own_memberships` policy also
/// shows the caller's memberships in other tenants, so an owner of two teams would count twice.
pub async fn count_owners(tx: &mut TenantTx) -> sqlx::Result<i64> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(
        r#"select count(*) as "n!" from membership
         where role = 'owner' and tenant_id = $1"#,
        tenant,
    )
    .fetch_one(&mut **tx)
    .await
}

/// What removing `user` from the transaction's tenant takes away (the confirmation says it).
#[derive(Clone, Debug, Default, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct RemovalImpact {
    /// Their API tokens for this team that work now (they stop working).
    pub tokens: i64,
    /// Knowledge bases they are a member of (they leave them).
    pub kbs: i64,
    /// Directory grants made to them personally (deleted with the membership).
    pub grants: i64,
    /// Sources registered through those grants (deleted with them, so they leave search).
    pub sources: i64,
}

pub async fn removal_impact(tx: &mut TenantTx, user: Uuid) -> sqlx::Result<RemovalImpact> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        RemovalImpact,
        r#"select
           (select count(*) from api_token a where a.tenant_id = $2 and a.user_id = $1 and a.revoked_at is null
              and (a.expires_at is null or a.expires_at > now())) as "tokens!",
           (select count(*) from kb_member k where k.tenant_id = $2 and k.user_id = $1) as "kbs!",
           (select count(*) from dir_grant g where g.tenant_id = $2 and g.user_id = $1) as "grants!",
           (select count(*) from source s join dir_grant g on g.tenant_id = s.tenant_id and g.id = s.grant_id
              where s.tenant_id = $2 and g.user_id = $1) as "sources!""#,
        user,
        tenant,
    )
    .fetch_one(&mut **tx)
    .await
}

/// A pending invitation as its invitee sees it (`GET /api/invitations`, the team picker).
/// Which team, role and inviter only once this account opened the invitation's link while
/// signed in (`opened`); before, all three are `null` (issue 39 item 3: whoever can sign in as
/// the invited email, e.g. through their own team's link to it, learns nothing of the others).
#[derive(Clone, Debug, Serialize, sqlx::FromRow, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MyInvitation {
    pub id: Uuid,
    /// This account opened the invitation's link (signed in): the fields below are shown.
    pub opened: bool,
    pub tenant_id: Option<Uuid>,
    pub tenant_name: Option<String>,
    pub role: Option<Role>,
    pub invited_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// The signed-in user's open invitations, across teams (the `own_invitations` policy), with
/// the team, role and inviter of those whose link this account opened.
pub async fn pending_for_user(conn: &mut PgConnection) -> sqlx::Result<Vec<MyInvitation>> {
    sqlx::query_as!(
        MyInvitation,
        // all tenants: the invitations a user received, from every team.
        r#"select i.id, coalesce(i.opened_by = me.id, false) as "opened!",
                case when i.opened_by = me.id then i.tenant_id end as "tenant_id?",
                case when i.opened_by = me.id then t.name end as "tenant_name?",
                case when i.opened_by = me.id then i.role end as "role?: _",
                case when i.opened_by = me.id then u.email end as "invited_by?",
                i.created_at as "created_at: _", i.expires_at as "expires_at: _"
         from invitation i join tenant t on t.id = i.tenant_id left join app_user u on u.id = i.invited_by
              cross join (select nullif(current_setting('app.user_id', true), '')::uuid as id) me
         where i.accepted_at is null and i.declined_at is null and i.expires_at > now()
           and i.email = (select lower(email) from app_user where id = me.id)
         order by i.created_at desc"#,
    )
    .fetch_all(conn)
    .await
}

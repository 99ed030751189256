//! Invitations (issue #14 item 5): a team admin invites an *email*; the person joins only by
//! accepting through the invitation's one-time link.
//!
//! What this protects:
//! - consent: a team cannot make another team's member its own without them agreeing;
//! - account privacy: what an admin sees when inviting an email is the same whether or not
//!   an account exists ([`invite`] always ends in one pending invitation and creates nothing);
//! - accounts (issue 31 item 1): an admin never sets a password. An account is created only
//!   through a link ([`join_by_link`]), by whoever holds it; and an invitation is accepted
//!   only with the secret of *its own* link ([`answer`], [`accept_by_link`]), by the signed-in
//!   account of the invited email. So team A's admin, who sees A's link and can create an
//!   account for any email with it, can never accept team B's invitation to that email: B's
//!   link goes from B's admin to the real person;
//! - invitations against squatting (issue 39 item 3): that same account can neither decline
//!   B's invitation (declining needs the link's secret as accepting does) nor learn who
//!   invites it. The invitee's list shows an invitation's team, role and inviter only to the
//!   account that opened its link while signed in ([`mark_opened`], recorded as
//!   `invitation.opened_by`; a renewed link or a fresh invitation forgets it); before, the
//!   invitation is listed as "open the link you were sent", nothing more.
//!
//! The operator's CLI (`mnote user add`, [`super::add_user`]) still adds members directly.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::auth::directory::Role;
use crate::{
    auth::password,
    db::{Scope, TenantTx},
    error::{AppError, AppResult},
};

/// How long an invitation can be accepted when the inviter does not say.
pub const DEFAULT_TTL_DAYS: i64 = 14;
/// The longest an invitation may stay open.
pub const MAX_TTL_DAYS: i64 = 90;

/// A pending invitation as the inviting team's admins see it (members page).
#[derive(Clone, Debug, Serialize, sqlx::FromRow, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamInvitation {
    pub id: Uuid,
    pub email: String,
    pub role: Role,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// The secret of an invitation link: `<tenant>.<random>` (the tenant part picks the tenant
/// transaction the hash is looked up in, like API tokens).
pub fn new_link_token(tenant_id: Uuid) -> String {
    let plain = crate::auth::tokens::generate(tenant_id);
    // `mnote_<tenant>_<secret>` → `<tenant>.<secret>`: a different shape from API tokens.
    plain.trim_start_matches(crate::auth::tokens::PREFIX).replacen('_', ".", 1)
}

/// The token of an invitation link given either as the token or as the whole link
/// (`…/join/<token>`), trimmed.
pub fn token_of(link: &str) -> &str {
    link.trim().rsplit("/join/").next().unwrap_or_default().trim_end_matches('/')
}

/// The tenant an invitation link token claims (verified only by finding its hash there).
pub fn tenant_of_link(token: &str) -> Option<Uuid> {
    let (tenant, secret) = token.split_once('.')?;
    if secret.len() < 20 {
        return None;
    }
    Uuid::try_parse(tenant).ok()
}

/// The path of an invitation link.
pub fn link_path(token: &str) -> String {
    format!("/join/{token}")
}

/// Invite `email` into the inviter's tenant with `role`, valid for `ttl_days`.
/// Returns the normalised (lowercased) email and the invitation link's token (shown once;
/// `None` when the email is already a member, so there is nothing to join). Creates no
/// account: the invitee sets their own password through the link.
pub async fn invite(
    pool: &PgPool,
    tenant_id: Uuid,
    inviter: Uuid,
    email: &str,
    role: Role,
    ttl_days: Option<i64>,
) -> AppResult<(String, Option<String>)> {
    let email = super::validate_email(email)?;
    let ttl = ttl_days.unwrap_or(DEFAULT_TTL_DAYS);
    if !(1..=MAX_TTL_DAYS).contains(&ttl) {
        return Err(AppError::invalid("expiresInDays", format!("1–{MAX_TTL_DAYS} days")));
    }
    let lower = email.to_lowercase();
    let mut tx = TenantTx::begin(pool, tenant_id, Scope::User(inviter)).await?;
    // A current member needs no invitation (role changes go through PATCH /api/members/{id}).
    let mut link = None;
    if crate::auth::directory::member_by_email(&mut tx, &lower).await?.is_none() {
        let token = new_link_token(tenant_id);
        sqlx::query!(
            "insert into invitation (tenant_id, id, email, role, invited_by, expires_at, link_hash)
             values ($1, $2, $3, $4, $5, now() + make_interval(days => $6), $7)
             on conflict (tenant_id, email) where accepted_at is null and declined_at is null
             do update set role = excluded.role, invited_by = excluded.invited_by,
                           created_at = now(), expires_at = excluded.expires_at, link_hash = excluded.link_hash,
                           opened_by = null",
            tenant_id,
            Uuid::new_v4(),
            &lower,
            role as _,
            inviter,
            ttl as i32,
            crate::auth::tokens::hash(&token),
        )
        .execute(&mut *tx)
        .await?;
        link = Some(token);
    }
    tx.commit().await?;
    Ok((lower, link))
}

/// A new link for the transaction tenant's open invitation `id` (the old link stops working).
pub async fn renew_link(conn: &mut PgConnection, tenant_id: Uuid, id: Uuid) -> AppResult<(String, String)> {
    let token = new_link_token(tenant_id);
    let email = sqlx::query_scalar!(
        "update invitation set link_hash = $3, opened_by = null where tenant_id = $1 and id = $2
           and accepted_at is null and declined_at is null and expires_at > now()
         returning email",
        tenant_id,
        id,
        crate::auth::tokens::hash(&token),
    )
    .fetch_optional(conn)
    .await?;
    Ok((email.ok_or(AppError::NotFound)?, token))
}

/// An invitation as its link shows it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct LinkInvitation {
    pub tenant_id: Uuid,
    pub id: Uuid,
    pub email: String,
    pub role: Role,
    pub tenant_name: String,
    pub expires_at: DateTime<Utc>,
    /// An account with this email exists already (it signs in and accepts instead).
    pub has_account: bool,
}

/// Why a link cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkProblem {
    /// No such link (wrong, withdrawn, renewed, or already used).
    Unknown,
    Expired,
}

/// The open invitation behind a link token.
pub async fn by_link(pool: &PgPool, token: &str) -> AppResult<Result<LinkInvitation, LinkProblem>> {
    let Some(tenant) = tenant_of_link(token) else { return Ok(Err(LinkProblem::Unknown)) };
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let row = link_row(&mut tx, tenant, token, false).await?;
    tx.commit().await?;
    Ok(row)
}

async fn link_row(
    conn: &mut PgConnection,
    tenant: Uuid,
    token: &str,
    lock: bool,
) -> sqlx::Result<Result<LinkInvitation, LinkProblem>> {
    let hash = crate::auth::tokens::hash(token);
    // The same statement twice: with the row locked (to use the link up) and without.
    let row = if lock {
        sqlx::query_as!(
            LinkRow,
            r#"select i.tenant_id, i.id, i.email, i.role as "role: _", t.name as tenant_name, i.expires_at as "expires_at: _",
                    exists (select 1 from app_user u where lower(u.email) = i.email) as "has_account!",
                    i.expires_at <= now() as "expired!"
             from invitation i join tenant t on t.id = i.tenant_id
             where i.tenant_id = $1 and i.link_hash = $2 and i.accepted_at is null and i.declined_at is null
             for update of i"#,
            tenant,
            hash,
        )
        .fetch_optional(conn)
        .await?
    } else {
        sqlx::query_as!(
            LinkRow,
            r#"select i.tenant_id, i.id, i.email, i.role as "role: _", t.name as tenant_name, i.expires_at as "expires_at: _",
                    exists (select 1 from app_user u where lower(u.email) = i.email) as "has_account!",
                    i.expires_at <= now() as "expired!"
             from invitation i join tenant t on t.id = i.tenant_id
             where i.tenant_id = $1 and i.link_hash = $2 and i.accepted_at is null and i.declined_at is null"#,
            tenant,
            hash,
        )
        .fetch_optional(conn)
        .await?
    };
    let row = row.map(|r| {
        let LinkRow { tenant_id, id, email, role, tenant_name, expires_at, has_account, expired } = r;
        (LinkInvitation { tenant_id, id, email, role, tenant_name, expires_at, has_account }, expired)
    });
    Ok(match row {
        None => Err(LinkProblem::Unknown),
        Some((_, true)) => Err(LinkProblem::Expired),
        Some((i, false)) => Ok(i),
    })
}

struct LinkRow {
    tenant_id: Uuid,
    id: Uuid,
    email: String,
    role: Role,
    tenant_name: String,
    expires_at: DateTime<Utc>,
    has_account: bool,
    expired: bool,
}

/// Why a link does not create an account for an email that has one.
pub const ACCOUNT_EXISTS: &str = "an account with this email exists; sign in, then open this link again to accept";

/// Join through a link: create the account for the invitation's email with `pw`, make it a
/// member with the invited role and use the link up, in one transaction. Returns the new
/// user and the tenant. An email that has an account already is `conflict` (that person
/// signs in and accepts through the link, [`accept_by_link`]).
pub async fn join_by_link(pool: &PgPool, token: &str, pw: &str) -> AppResult<(Uuid, Uuid)> {
    password::validate_new_password(pw)?;
    let tenant = tenant_of_link(token).ok_or(AppError::NotFound)?;
    let hash = password::hash(pw.to_string()).await?;
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let inv = match link_row(&mut tx, tenant, token, true).await? {
        Ok(i) => i,
        Err(LinkProblem::Unknown) => return Err(AppError::NotFound),
        Err(LinkProblem::Expired) => return Err(AppError::Conflict("this invitation has expired".into())),
    };
    let user = sqlx::query_scalar!(
        "insert into app_user (id, email, password_hash) values ($1, $2, $3)
         on conflict ((lower(email))) do nothing returning id",
        Uuid::new_v4(),
        &inv.email,
        &hash,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(user) = user else {
        // The link never sets the password of an existing account (it may be someone else's).
        return Err(AppError::Conflict(ACCOUNT_EXISTS.into()));
    };
    sqlx::query!(
        "insert into membership (tenant_id, user_id, role) values ($1, $2, $3) on conflict (tenant_id, user_id) do nothing",
        tenant,
        user,
        inv.role as _,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!("update invitation set accepted_at = now(), link_hash = null where tenant_id = $1 and id = $2", tenant, inv.id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    tracing::info!(tenant.id = %tenant, user.id = %user, "joined through an invitation link");
    Ok((user, tenant))
}

/// The transaction tenant's open invitations. The tenant filter matters: `own_invitations`
/// also shows an admin the invitations *they* received from other teams.
pub async fn pending_for_team(tx: &mut TenantTx) -> sqlx::Result<Vec<TeamInvitation>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        TeamInvitation,
        r#"select id, email, role as "role: _", created_at as "created_at: _", expires_at as "expires_at: _" from invitation
         where tenant_id = $1 and accepted_at is null and declined_at is null and expires_at > now()
         order by created_at desc"#,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

/// Withdraw the transaction tenant's open invitation `id` (an admin's call): it can no longer
/// be accepted. `false` when there is no such open invitation in this tenant.
pub async fn withdraw(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    let n = sqlx::query!(
        "delete from invitation where tenant_id = $2 and id = $1 and accepted_at is null and declined_at is null",
        id,
        tenant,
    )
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// What the invitee does with an invitation. Either needs the invitation's link (its token,
/// or the whole link): whoever can sign in as the invited email without having been sent
/// the link must not answer for the real person (issue 39 item 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer<'a> {
    Accept { link: Option<&'a str> },
    Decline { link: Option<&'a str> },
}

/// Accept or decline invitation `id` as `user`. Someone else's invitation, or none, is
/// `not_found`; one already answered or expired is `conflict`. Without a link it is
/// `invalid_input` (field `token`), with another invitation's link `not_found`. Accepting
/// creates the membership in the inviting tenant's transaction (an existing membership
/// keeps its role) and uses the link up; declining uses it up too.
pub async fn answer(pool: &PgPool, user: Uuid, id: Uuid, answer: Answer<'_>) -> AppResult<(Uuid, Role)> {
    let (Answer::Accept { link } | Answer::Decline { link }) = answer;
    let token = link.map(token_of).filter(|t| !t.is_empty()).ok_or_else(|| {
        let verb = if matches!(answer, Answer::Accept { .. }) { "accept" } else { "decline" };
        AppError::invalid("token", format!("{verb} through the invitation's link: give its token (the part after /join/)"))
    })?;
    let link_hash = crate::auth::tokens::hash(token);
    // Which tenant: readable here only through `own_invitations`, i.e. only for the invitee.
    let mut tx = TenantTx::begin_user_only(pool, user).await?;
    // all tenants: which team's invitation this is, asked by its invitee before any team is set.
    let tenant = sqlx::query_scalar!("select tenant_id from invitation where id = $1", id).fetch_optional(&mut *tx).await?;
    tx.commit().await?;
    let tenant = tenant.ok_or(AppError::NotFound)?;

    let mut tx = TenantTx::begin(pool, tenant, Scope::User(user)).await?;
    let row = sqlx::query!(
        r#"select role as "role: Role", accepted_at is not null as "accepted!", declined_at is not null as "declined!",
                expires_at <= now() as "expired!", coalesce(link_hash is not null and link_hash = $4, false) as "link_matches!"
         from invitation
         where tenant_id = $1 and id = $2 and email = (select lower(email) from app_user where id = $3)
         for update"#,
        tenant,
        id,
        user,
        &link_hash,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(AppError::NotFound)?;
    let (role, accepted, declined, expired, link_matches) = (row.role, row.accepted, row.declined, row.expired, row.link_matches);
    if accepted {
        return Err(AppError::Conflict("this invitation was already accepted".into()));
    }
    if declined {
        return Err(AppError::Conflict("this invitation was declined".into()));
    }
    if expired {
        return Err(AppError::Conflict("this invitation has expired".into()));
    }
    // Only the holder of this invitation's own link: not another invitation's, not a
    // renewed-away one (issue 31 item 1), for declining as for accepting (issue 39 item 3).
    if !link_matches {
        return Err(AppError::NotFound);
    }
    match answer {
        Answer::Accept { .. } => {
            sqlx::query!(
                "insert into membership (tenant_id, user_id, role) values ($1, $2, $3)
                 on conflict (tenant_id, user_id) do nothing",
                tenant,
                user,
                role as _,
            )
            .execute(&mut *tx)
            .await?;
            sqlx::query!(
                "update invitation set accepted_at = now(), link_hash = null where tenant_id = $1 and id = $2",
                tenant,
                id
            )
            .execute(&mut *tx)
            .await?;
        }
        Answer::Decline { .. } => {
            sqlx::query!(
                "update invitation set declined_at = now(), link_hash = null where tenant_id = $1 and id = $2",
                tenant,
                id
            )
            .execute(&mut *tx)
            .await?;
        }
    }
    tx.commit().await?;
    Ok((tenant, role))
}

/// The open invitation behind link `token` if it invites `user`'s email: its id (to accept
/// with [`answer`]). `not_found` for a link of someone else's invitation, or none.
pub async fn id_by_link_for(pool: &PgPool, user: Uuid, token: &str) -> AppResult<Uuid> {
    let token = token_of(token);
    let tenant = tenant_of_link(token).ok_or(AppError::NotFound)?;
    let mut tx = TenantTx::begin(pool, tenant, Scope::User(user)).await?;
    let id = sqlx::query_scalar!(
        "select id from invitation
         where tenant_id = $1 and link_hash = $2 and accepted_at is null and declined_at is null
           and email = (select lower(email) from app_user where id = $3)",
        tenant,
        crate::auth::tokens::hash(token),
        user,
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    id.ok_or(AppError::NotFound)
}

/// Accept the invitation behind link `token` as the signed-in `user` (its email must be the
/// invited one): the link page's button for a person who has an account.
pub async fn accept_by_link(pool: &PgPool, user: Uuid, token: &str) -> AppResult<(Uuid, Role)> {
    let id = id_by_link_for(pool, user, token).await?;
    answer(pool, user, id, Answer::Accept { link: Some(token) }).await
}

/// Decline the invitation behind link `token` as the signed-in `user` (the link page's
/// other button).
pub async fn decline_by_link(pool: &PgPool, user: Uuid, token: &str) -> AppResult<()> {
    let id = id_by_link_for(pool, user, token).await?;
    answer(pool, user, id, Answer::Decline { link: Some(token) }).await.map(drop)
}

/// Record that `user` opened the link `token` of an open invitation to their own email (the
/// link page, signed in): from now on their invitation list shows its team, role and
/// inviter. Anyone else's link, or none, changes nothing.
pub async fn mark_opened(pool: &PgPool, user: Uuid, token: &str) -> AppResult<()> {
    let token = token_of(token);
    let Some(tenant) = tenant_of_link(token) else { return Ok(()) };
    let mut tx = TenantTx::begin(pool, tenant, Scope::User(user)).await?;
    sqlx::query!(
        "update invitation set opened_by = $3
         where tenant_id = $1 and link_hash = $2 and accepted_at is null and declined_at is null
           and expires_at > now() and opened_by is distinct from $3
           and email = (select lower(email) from app_user where id = $3)",
        tenant,
        crate::auth::tokens::hash(token),
        user,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

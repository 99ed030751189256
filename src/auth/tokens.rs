//! API tokens: `mnote_<tenant>_<secret>`, shown once, stored as a SHA-256 hash.
//!
//! The tenant id in the token selects the tenant transaction in which the hash is looked up,
//! so token lookup runs under row-level security like everything else; a forged tenant part
//! only finds nothing.

use base64::Engine;
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::TenantTx;

pub const PREFIX: &str = "mnote_";

/// The prefix of a run-scoped MCP token (`mnoterun_<tenant>_<secret>`): minted for one ACP run,
/// accepted only at `/mcp` while that run is live (`mcp::http`), never by [`Auth`](super::Auth)
/// anywhere else (it does not start with [`PREFIX`]).
pub const RUN_PREFIX: &str = "mnoterun_";

pub fn generate(tenant_id: Uuid) -> String {
    generate_with(PREFIX, tenant_id)
}

/// A new run-scoped MCP token for a run of `tenant_id` (see [`RUN_PREFIX`]).
pub fn generate_run(tenant_id: Uuid) -> String {
    generate_with(RUN_PREFIX, tenant_id)
}

fn generate_with(prefix: &str, tenant_id: Uuid) -> String {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("OS random source");
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
    format!("{prefix}{}_{secret}", tenant_id.simple())
}

/// The tenant a run-scoped token claims to belong to (unverified until its hash is found on a
/// live run there).
pub fn run_tenant_of(token: &str) -> Option<Uuid> {
    tenant_part(token.strip_prefix(RUN_PREFIX)?)
}

pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The tenant a token claims to belong to (unverified until its hash is found there).
pub fn tenant_of(token: &str) -> Option<Uuid> {
    tenant_part(token.strip_prefix(PREFIX)?)
}

fn tenant_part(rest: &str) -> Option<Uuid> {
    let (tenant, secret) = rest.split_once('_')?;
    if secret.len() < 20 {
        return None;
    }
    Uuid::try_parse(tenant).ok()
}

#[derive(Debug, Serialize, sqlx::FromRow, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiToken {
    pub id: Uuid,
    pub user_id: Uuid,
    pub name: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub last_used_at: Option<chrono::DateTime<chrono::Utc>>,
    pub revoked_at: Option<chrono::DateTime<chrono::Utc>>,
    /// `None`: never expires.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl ApiToken {
    pub fn is_expired(&self) -> bool {
        self.expires_at.is_some_and(|e| e <= chrono::Utc::now())
    }
}

/// The longest expiry a token may be given, in days.
pub const MAX_EXPIRY_DAYS: i64 = 3650;

/// Live (neither revoked nor expired) tokens one member may hold in a team: a token cannot
/// mint an unbounded crowd of tokens (each with its own budget somewhere).
pub const MAX_LIVE_PER_USER: i64 = 50;

/// Refuse a new token when the member already holds [`MAX_LIVE_PER_USER`] live ones
/// (`too_many_tokens`, 429). Takes a transaction-scoped lock on the member's tokens, so
/// concurrent creations count one after the other: call it in the transaction that creates.
pub async fn ensure_room(tx: &mut TenantTx, user_id: Uuid) -> Result<(), crate::error::AppError> {
    let tenant = tx.tenant_id();
    sqlx::query!("select pg_advisory_xact_lock(hashtextextended('mnote.api_token:' || $1::text, 0))", user_id.to_string())
        .execute(&mut **tx)
        .await?;
    let live = sqlx::query_scalar!(
        r#"select count(*) as "n!" from api_token where tenant_id = $2 and user_id = $1 and revoked_at is null
           and (expires_at is null or expires_at > now())"#,
        user_id,
        tenant,
    )
    .fetch_one(&mut **tx)
    .await?;
    if live >= MAX_LIVE_PER_USER {
        return Err(crate::error::AppError::limit(
            "too_many_tokens",
            format!("you already have {live} active API tokens (at most {MAX_LIVE_PER_USER}); revoke one first"),
        ));
    }
    Ok(())
}

/// What [`authenticate`] found for a plaintext.
pub enum Authenticated {
    Member(crate::auth::directory::Member),
    /// The token exists and is not revoked, but its expiry has passed.
    Expired,
}

/// Create a token for `user_id` in the transaction's tenant; returns the record and the
/// plaintext (never stored).
pub async fn create(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
    name: &str,
) -> Result<(ApiToken, String), sqlx::Error> {
    create_expiring(conn, tenant_id, user_id, name, None).await
}

/// [`create`] with an expiry `expires_in_days` from now (`None`: never).
pub async fn create_expiring(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    user_id: Uuid,
    name: &str,
    expires_in_days: Option<i64>,
) -> Result<(ApiToken, String), sqlx::Error> {
    let plain = generate(tenant_id);
    let rec = sqlx::query_as!(
        ApiToken,
        r#"insert into api_token (tenant_id, id, user_id, name, token_hash, expires_at)
         values ($1, $2, $3, $4, $5, now() + make_interval(days => $6))
         returning id, user_id, name, created_at as "created_at: _", last_used_at as "last_used_at: _",
             revoked_at as "revoked_at: _", expires_at as "expires_at: _""#,
        tenant_id,
        Uuid::new_v4(),
        user_id,
        name,
        hash(&plain),
        expires_in_days.map(|d| d as i32),
    )
    .fetch_one(conn)
    .await?;
    Ok((rec, plain))
}

pub async fn list_for_user(tx: &mut TenantTx, user_id: Uuid) -> Result<Vec<ApiToken>, sqlx::Error> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        ApiToken,
        r#"select id, user_id, name, created_at as "created_at: _", last_used_at as "last_used_at: _",
             revoked_at as "revoked_at: _", expires_at as "expires_at: _" from api_token
         where tenant_id = $2 and user_id = $1 order by created_at desc"#,
        user_id,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

/// Revoke one of the user's tokens; false when there is no such active token.
pub async fn revoke(tx: &mut TenantTx, user_id: Uuid, id: Uuid) -> Result<bool, sqlx::Error> {
    let tenant = tx.tenant_id();
    let r = sqlx::query!(
        "update api_token set revoked_at = now() where tenant_id = $3 and id = $1 and user_id = $2 and revoked_at is null",
        id,
        user_id,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Whether the token with this hash is still live (not revoked, not expired) and `user`'s.
pub async fn is_live_for(tx: &mut TenantTx, token_hash: &str, user_id: Uuid) -> Result<bool, sqlx::Error> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(
        r#"select exists(select 1 from api_token where tenant_id = $3 and token_hash = $1 and user_id = $2
                         and revoked_at is null and (expires_at is null or expires_at > now())) as "live!""#,
        token_hash,
        user_id,
        tenant,
    )
    .fetch_one(&mut **tx)
    .await
}

/// Find the active token with this plaintext in the transaction's tenant and its user's
/// membership there, in one statement; touches `last_used_at` at most once a minute (a read
/// otherwise: no write per request). An expired token is [`Authenticated::Expired`] (and not
/// touched).
pub async fn authenticate(tx: &mut TenantTx, plain: &str) -> Result<Option<Authenticated>, sqlx::Error> {
    struct Row {
        expired: bool,
        user_id: Option<Uuid>,
        email: Option<String>,
        display_name: Option<String>,
        role: Option<crate::auth::directory::Role>,
        created_at: Option<chrono::DateTime<chrono::Utc>>,
    }
    let tenant = tx.tenant_id();
    let row = sqlx::query_as!(
        Row,
        r#"with t as (select id, user_id, last_used_at, coalesce(expires_at <= now(), false) as expired
                    from api_token where tenant_id = $2 and token_hash = $1 and revoked_at is null),
              touched as (update api_token a set last_used_at = now() from t
                          where a.tenant_id = $2 and a.id = t.id and not t.expired
                            and (t.last_used_at is null or t.last_used_at < now() - interval '1 minute'))
         select t.expired as "expired!", u.id as "user_id?", u.email as "email?", u.display_name as "display_name?",
             m.role as "role?: _", m.created_at as "created_at?: _"
         from t left join membership m on m.tenant_id = $2 and m.user_id = t.user_id
                left join app_user u on u.id = m.user_id"#,
        hash(plain),
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await?;
    Ok(match row {
        None => None,
        Some(r) if r.expired => Some(Authenticated::Expired),
        Some(Row {
            user_id: Some(user_id),
            email: Some(email),
            display_name,
            role: Some(role),
            created_at: Some(created_at),
            ..
        }) => Some(Authenticated::Member(crate::auth::directory::Member { user_id, email, display_name, role, created_at })),
        Some(_) => None, // no longer a member of the token's tenant
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_round_trip() {
        let t = Uuid::new_v4();
        let tok = generate(t);
        assert_eq!(tenant_of(&tok), Some(t));
        assert_ne!(generate(t), tok);
        assert_eq!(hash(&tok).len(), 64);
        assert_eq!(tenant_of("mnote_nottenant_secretsecretsecretsecret"), None);
        assert_eq!(tenant_of("Bearer x"), None);
        let run = generate_run(t);
        assert_eq!((run_tenant_of(&run), tenant_of(&run)), (Some(t), None), "a run token is no API token");
        assert_eq!(run_tenant_of(&tok), None, "an API token is no run token");
    }
}

//! Password-check rate limiting (sign-in and the current password of a password change),
//! stored in Postgres so that every app replica sees the same counts.
//!
//! Three limits, all within `MNOTE_LOGIN_WINDOW_MINUTES`, with `N` = `MNOTE_LOGIN_MAX_FAILURES`:
//! - one account from one client address: `N` failures since that pair's last success. An
//!   attacker at one address locks only that address out of that account, so the owner still
//!   signs in from elsewhere (issue 31 item 11);
//! - one client address, any accounts: `4 × N`;
//! - one account, any addresses: `10 × N` failures since the account's last success, the
//!   backstop that still bounds guessing spread over many addresses.
//!
//! Check and count are one step ([`reserve`]): under transaction-level advisory locks on the
//! account and the address, the recent failures are counted and the attempt is recorded as a
//! failure before its password is checked; [`finish`] then marks it as it turned out. So N
//! attempts at once cannot all pass the check before any of them is counted.

use std::net::SocketAddr;

use axum::{extract::ConnectInfo, http::HeaderMap};
use sqlx::PgPool;

use crate::{config::Config, error::AppError};

/// Failures allowed per client address (any accounts), as a multiple of the per-pair limit.
pub const ADDRESS_FACTOR: i64 = 4;
/// Failures allowed per account (any addresses), as a multiple of the per-pair limit.
pub const ACCOUNT_FACTOR: i64 = 10;

/// The client address used for rate limiting.
pub fn client_ip(trust_proxy: bool, headers: &HeaderMap, peer: Option<SocketAddr>) -> String {
    if trust_proxy {
        // The last entry is the one our own proxy appended; earlier ones are client-supplied.
        if let Some(last) = headers
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .map(str::trim)
            .filter(|v| !v.is_empty())
        {
            return last.to_string();
        }
    }
    peer.map(|p| p.ip().to_string()).unwrap_or_else(|| "unknown".into())
}

/// The TCP peer, when the server was started with connect info.
pub struct Peer(pub Option<SocketAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Peer(parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)))
    }
}

/// An attempt counted against the limits, until [`finish`] says it succeeded.
#[derive(Debug, Clone, Copy)]
pub struct Attempt(i64);

/// Refuse the attempt when the account from this address, the address, or the account has
/// too many recent failures; otherwise record it (as a failure, until [`finish`]).
pub async fn reserve(pool: &PgPool, cfg: &Config, email: &str, ip: &str) -> Result<Attempt, AppError> {
    let window = cfg.login_window.as_secs_f64();
    let mut tx = pool.begin().await?;
    // Account first, then address: every attempt takes them in this order (no deadlock).
    sqlx::query!(
        "select pg_advisory_xact_lock(hashtext('mnote:login:email:' || lower($1))), \
                 pg_advisory_xact_lock(hashtext('mnote:login:ip:' || $2))",
        email,
        ip,
    )
    .execute(&mut *tx)
    .await?;
    // For each limit: the failures counted and how long until the oldest leaves the window.
    let r = sqlx::query!(
        r#"with recent as (
                 select * from login_attempt
                 where not succeeded and at > now() - make_interval(secs => $3)
             ), account as (
                 select * from recent r where lower(r.email) = lower($1)
                   and r.at > coalesce((select max(at) from login_attempt s
                                        where s.succeeded and lower(s.email) = lower($1)), '-infinity')
             ), pair as (
                 select * from recent r where lower(r.email) = lower($1) and r.client_ip = $2
                   and r.at > coalesce((select max(at) from login_attempt s
                                        where s.succeeded and lower(s.email) = lower($1) and s.client_ip = $2),
                                       '-infinity')
             ), address as (select * from recent where client_ip = $2)
             select (select count(*) from pair) as "by_pair!",
                    (select extract(epoch from min(at) + make_interval(secs => $3) - now())::float8 from pair) as pair_wait,
                    (select count(*) from address) as "by_ip!",
                    (select extract(epoch from min(at) + make_interval(secs => $3) - now())::float8 from address) as ip_wait,
                    (select count(*) from account) as "by_email!",
                    (select extract(epoch from min(at) + make_interval(secs => $3) - now())::float8 from account) as email_wait"#,
        email,
        ip,
        window,
    )
    .fetch_one(&mut *tx)
    .await?;
    let (by_pair, pair_wait, by_ip, ip_wait, by_email, email_wait) =
        (r.by_pair, r.pair_wait, r.by_ip, r.ip_wait, r.by_email, r.email_wait);
    let max = cfg.login_max_failures;
    let over = [(by_pair, max, pair_wait), (by_ip, max * ADDRESS_FACTOR, ip_wait), (by_email, max * ACCOUNT_FACTOR, email_wait)]
        .into_iter()
        .filter(|(n, limit, _)| n >= limit)
        .map(|(_, _, wait)| wait.unwrap_or(window))
        .reduce(f64::max);
    if let Some(wait) = over {
        let retry = wait.clamp(1.0, window).ceil() as u64;
        return Err(AppError::RateLimited { retry_after_secs: retry });
    }
    let id = sqlx::query_scalar!(
        "insert into login_attempt (email, client_ip, succeeded) values ($1, $2, false) returning id",
        email,
        ip
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Attempt(id))
}

/// Record how the attempt turned out.
pub async fn finish(pool: &PgPool, attempt: Attempt, succeeded: bool) -> Result<(), sqlx::Error> {
    if succeeded {
        sqlx::query!("update login_attempt set succeeded = true where id = $1", attempt.0).execute(pool).await?;
    }
    // Keep the table small: attempts older than a day are no longer needed.
    sqlx::query!("delete from login_attempt where at < now() - interval '1 day'").execute(pool).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ip_trusts_only_the_proxy_entry() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "6.6.6.6, 10.0.0.7".parse().unwrap());
        let peer = Some("127.0.0.1:9".parse().unwrap());
        assert_eq!(client_ip(true, &h, peer), "10.0.0.7");
        assert_eq!(client_ip(false, &h, peer), "127.0.0.1");
        assert_eq!(client_ip(true, &HeaderMap::new(), peer), "127.0.0.1");
        assert_eq!(client_ip(false, &HeaderMap::new(), None), "unknown");
    }
}

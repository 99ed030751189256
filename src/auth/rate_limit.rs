//! Login rate limiting, per account and per client address, stored in Postgres so that
//! every app replica sees the same counts.
//!
//! Check and count are one step ([`reserve`]): under transaction-level advisory locks on the
//! account and the address, the recent failures are counted and the attempt is recorded as a
//! failure before its password is checked; [`finish`] then marks it as it turned out. So N
//! attempts at once cannot all pass the check before any of them is counted.

use sqlx::PgPool;

use crate::{config::Config, error::AppError};

/// An attempt counted against the limits, until [`finish`] says it succeeded.
#[derive(Debug, Clone, Copy)]
pub struct Attempt(i64);

/// Refuse the attempt when the account or the address has too many recent failures;
/// otherwise record it (as a failure, until [`finish`]).
pub async fn reserve(pool: &PgPool, cfg: &Config, email: &str, ip: &str) -> Result<Attempt, AppError> {
    let window = cfg.login_window.as_secs_f64();
    let mut tx = pool.begin().await?;
    // Account first, then address: every attempt takes them in this order (no deadlock).
    sqlx::query(
        "select pg_advisory_xact_lock(hashtext('mnote:login:email:' || lower($1))), \
                 pg_advisory_xact_lock(hashtext('mnote:login:ip:' || $2))",
    )
    .bind(email)
    .bind(ip)
    .execute(&mut *tx)
    .await?;
    let (by_email, by_ip, oldest): (i64, i64, Option<f64>) = sqlx::query_as(
        "with recent as (
             select * from login_attempt
             where not succeeded and at > now() - make_interval(secs => $3)
         ), e as (
             select count(*) n, min(at) first from recent r where lower(r.email) = lower($1)
               and r.at > coalesce((select max(at) from login_attempt s
                                    where s.succeeded and lower(s.email) = lower($1)), '-infinity')
         ), i as (select count(*) n, min(at) first from recent where client_ip = $2)
         select e.n, i.n,
                extract(epoch from (least(e.first, i.first) + make_interval(secs => $3) - now()))::float8
         from e, i",
    )
    .bind(email)
    .bind(ip)
    .bind(window)
    .fetch_one(&mut *tx)
    .await?;
    let max = cfg.login_max_failures;
    if by_email >= max || by_ip >= max * 4 {
        let retry = oldest.unwrap_or(window).clamp(1.0, window).ceil() as u64;
        return Err(AppError::RateLimited { retry_after_secs: retry });
    }
    let id: i64 =
        sqlx::query_scalar("insert into login_attempt (email, client_ip, succeeded) values ($1, $2, false) returning id")
            .bind(email)
            .bind(ip)
            .fetch_one(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(Attempt(id))
}

/// Record how the attempt turned out.
pub async fn finish(pool: &PgPool, attempt: Attempt, succeeded: bool) -> Result<(), sqlx::Error> {
    if succeeded {
        sqlx::query("update login_attempt set succeeded = true where id = $1").bind(attempt.0).execute(pool).await?;
    }
    // Keep the table small: attempts older than a day are no longer needed.
    sqlx::query("delete from login_attempt where at < now() - interval '1 day'").execute(pool).await?;
    Ok(())
}

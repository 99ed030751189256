//! Login rate limiting, per account and per client address, stored in Postgres so that
//! every app replica sees the same counts.

use sqlx::PgPool;

use crate::{config::Config, error::AppError};

/// Refuse the attempt when the account or the address has too many recent failures.
pub async fn check(pool: &PgPool, cfg: &Config, email: &str, ip: &str) -> Result<(), AppError> {
    let window = cfg.login_window.as_secs_f64();
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
    .fetch_one(pool)
    .await?;
    let max = cfg.login_max_failures;
    if by_email >= max || by_ip >= max * 4 {
        let retry = oldest.unwrap_or(window).clamp(1.0, window).ceil() as u64;
        return Err(AppError::RateLimited { retry_after_secs: retry });
    }
    Ok(())
}

pub async fn record(pool: &PgPool, email: &str, ip: &str, succeeded: bool) -> Result<(), sqlx::Error> {
    sqlx::query("insert into login_attempt (email, client_ip, succeeded) values ($1, $2, $3)")
        .bind(email)
        .bind(ip)
        .bind(succeeded)
        .execute(pool)
        .await?;
    // Keep the table small: attempts older than a day are no longer needed.
    sqlx::query("delete from login_attempt where at < now() - interval '1 day'").execute(pool).await?;
    Ok(())
}

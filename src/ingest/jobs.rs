//! The ingest job queue in Postgres. Jobs are tenant rows under RLS, so workers claim them
//! tenant by tenant (round-robin, `FOR UPDATE SKIP LOCKED`), which also keeps one busy
//! tenant from starving the others. A running job holds a lease; a worker that dies leaves
//! the lease to expire and the job is claimed again.

use std::time::Duration;

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::db::{Scope, TenantTx};

pub const MAX_ATTEMPTS: i32 = 3;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Job {
    pub id: Uuid,
    pub source_id: Uuid,
    pub attempts: i32,
}

/// Queue a (re)parse of a source unless one is already open.
pub async fn enqueue(conn: &mut PgConnection, tenant: Uuid, source_id: Uuid) -> sqlx::Result<()> {
    sqlx::query(
        "insert into ingest_job (tenant_id, id, source_id) values ($1, $2, $3)
         on conflict (tenant_id, source_id) where status in ('queued', 'running') do nothing",
    )
    .bind(tenant)
    .bind(Uuid::new_v4())
    .bind(source_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Claim the next ready job of one tenant (queued, or running with an expired lease).
async fn claim_in(pool: &PgPool, tenant: Uuid, worker: &str, lease: Duration) -> sqlx::Result<Option<Job>> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let job: Option<Job> = sqlx::query_as(
        "update ingest_job set status = 'running', attempts = attempts + 1, worker = $1,
             lease_until = now() + make_interval(secs => $2)
         where id = (select id from ingest_job
                     where (status = 'queued' and run_after <= now())
                        or (status = 'running' and lease_until < now())
                     order by run_after, created_at
                     for update skip locked limit 1)
         returning id, source_id, attempts",
    )
    .bind(worker)
    .bind(lease.as_secs_f64())
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(job)
}

/// Claim a job from any tenant, starting after `cursor` (round-robin).
pub async fn claim(pool: &PgPool, worker: &str, lease: Duration, cursor: &mut usize) -> sqlx::Result<Option<(Uuid, Job)>> {
    let tenants: Vec<Uuid> = sqlx::query_scalar("select id from tenant order by id").fetch_all(pool).await?;
    for i in 0..tenants.len() {
        let t = tenants[(*cursor + i) % tenants.len()];
        if let Some(job) = claim_in(pool, t, worker, lease).await? {
            *cursor = (*cursor + i + 1) % tenants.len();
            return Ok(Some((t, job)));
        }
    }
    Ok(None)
}

pub async fn finish(conn: &mut PgConnection, job: Uuid) -> sqlx::Result<()> {
    sqlx::query("update ingest_job set status = 'done', finished_at = now(), lease_until = null where id = $1")
        .bind(job)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn fail(conn: &mut PgConnection, job: Uuid, code: &str, message: &str) -> sqlx::Result<()> {
    sqlx::query(
        "update ingest_job set status = 'failed', finished_at = now(), lease_until = null,
             error_code = $2, error_message = $3 where id = $1",
    )
    .bind(job)
    .bind(code)
    .bind(message)
    .execute(conn)
    .await?;
    Ok(())
}

/// Put a job back with exponential backoff after a transient error.
pub async fn retry_later(conn: &mut PgConnection, job: Uuid, attempts: i32, code: &str, message: &str) -> sqlx::Result<()> {
    let delay = 2f64.powi(attempts.clamp(0, 10)) * 5.0;
    sqlx::query(
        "update ingest_job set status = 'queued', lease_until = null, error_code = $2, error_message = $3,
             run_after = now() + make_interval(secs => $4) where id = $1",
    )
    .bind(job)
    .bind(code)
    .bind(message)
    .bind(delay)
    .execute(conn)
    .await?;
    Ok(())
}

//! A source's parse job as registration, uploads and the retry button see it: queueing it
//! (`ingest_job`, whose workers live in `ingest::jobs`) and its progress, stored on the source
//! row (the KB page shows it live).

use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::TenantTx;

/// Attempts a job gets before its source is `failed`.
pub const MAX_ATTEMPTS: i32 = 3;

/// Queue a (re)parse of a source unless one is already open.
pub async fn enqueue(conn: &mut PgConnection, tenant: Uuid, source_id: Uuid) -> sqlx::Result<()> {
    let r = sqlx::query!(
        "insert into ingest_job (tenant_id, id, source_id) values ($1, $2, $3)
         on conflict (tenant_id, source_id) where status in ('queued', 'running') do nothing",
        tenant,
        Uuid::new_v4(),
        source_id,
    )
    .execute(&mut *conn)
    .await?;
    if r.rows_affected() == 1 {
        set_progress_in(conn, tenant, source_id, Some(Progress::phase(Phase::Queued))).await?;
    }
    Ok(())
}

/// Where a source's open job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Queued,
    /// Opening the file and hashing it.
    Reading,
    /// The parser child (or MinerU) runs.
    Parsing,
    /// Writing the evidence rows.
    Indexing,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Queued => "queued",
            Phase::Reading => "reading",
            Phase::Parsing => "parsing",
            Phase::Indexing => "indexing",
        }
    }
}

/// The progress of a source's open job, stored on the source (the KB page shows it live).
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub phase: Phase,
    /// Pages (parsing) or blocks (indexing) done of `total`, when known.
    pub done: Option<i32>,
    pub total: Option<i32>,
    /// The attempt that runs (1-based); `None` while queued.
    pub attempt: Option<i32>,
}

impl Progress {
    pub fn phase(phase: Phase) -> Self {
        Progress { phase, done: None, total: None, attempt: None }
    }
}

/// Record (or, with `None`, clear) a source's progress. A new attempt (`Reading`) restarts
/// the elapsed time; later phases keep it.
pub async fn set_progress(tx: &mut TenantTx, source_id: Uuid, p: Option<Progress>) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    set_progress_in(tx, tenant, source_id, p).await
}

/// [`set_progress`] on a connection of a transaction in `tenant`.
pub async fn set_progress_in(conn: &mut PgConnection, tenant: Uuid, source_id: Uuid, p: Option<Progress>) -> sqlx::Result<()> {
    sqlx::query!(
        "update source set progress_phase = $2, progress_done = $3, progress_total = $4,
             progress_attempt = coalesce($5, case when $2::text is null or $2::text = 'queued' then null else progress_attempt end),
             progress_started_at = case when $2::text is null then null
                                        when $2::text = 'reading' or progress_started_at is null then now()
                                        else progress_started_at end
         where tenant_id = $6 and id = $1",
        source_id,
        p.map(|p| p.phase.as_str()),
        p.and_then(|p| p.done),
        p.and_then(|p| p.total),
        p.and_then(|p| p.attempt),
        tenant,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The open job of a source: `(status, lease still valid)`.
async fn open_job(conn: &mut PgConnection, tenant: Uuid, source_id: Uuid) -> sqlx::Result<Option<(String, bool)>> {
    let row = sqlx::query!(
        r#"select status, coalesce(lease_until > now(), false) as "leased!" from ingest_job
         where tenant_id = $2 and source_id = $1 and status in ('queued', 'running')"#,
        source_id,
        tenant,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.status, r.leased)))
}

/// Run a source's queued job now, with fresh attempts (the retry button), or queue a new one.
/// `false` when a worker holds a valid lease on it (it is running).
pub async fn retry_now(conn: &mut PgConnection, tenant: Uuid, source_id: Uuid) -> sqlx::Result<bool> {
    match open_job(conn, tenant, source_id).await? {
        Some((status, true)) if status == "running" => Ok(false),
        Some(_) => {
            sqlx::query!(
                "update ingest_job set status = 'queued', attempts = 0, run_after = now(), lease_until = null,
                     worker = null, error_code = null, error_message = null
                 where tenant_id = $2 and source_id = $1 and status in ('queued', 'running')",
                source_id,
                tenant,
            )
            .execute(&mut *conn)
            .await?;
            set_progress_in(conn, tenant, source_id, Some(Progress::phase(Phase::Queued))).await?;
            Ok(true)
        }
        None => {
            enqueue(conn, tenant, source_id).await?;
            Ok(true)
        }
    }
}

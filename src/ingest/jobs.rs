//! The ingest job queue in Postgres. Jobs are tenant rows under RLS, so workers claim them
//! tenant by tenant (round-robin, `FOR UPDATE SKIP LOCKED`), which also keeps one busy
//! tenant from starving the others. A running job holds a lease and names its worker
//! ([`WorkerIdentity`]: host, boot, PID namespace, PID and the process's start time). A
//! worker that dies is noticed without waiting for its lease: every starting worker process
//! (and every worker process twice a minute) requeues the jobs of dead processes on its own
//! host ([`reclaim_dead`]); a job of another host waits for its lease to end.

use std::time::Duration;

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::{
    db::{Scope, TenantTx},
    sources::queue::{MAX_ATTEMPTS, Phase, Progress, set_progress, set_progress_in},
};

#[derive(Clone, Debug)]
pub struct Job {
    pub id: Uuid,
    pub source_id: Uuid,
    pub attempts: i32,
}

/// Who runs a job: this process, identified so that another process on the same host can
/// tell whether it still lives (a recycled PID has another start time; a reboot another
/// boot id; a container another PID namespace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerIdentity {
    host: String,
    /// Boot id and PID namespace: processes with the same `node` see the same `/proc`.
    node: String,
    pid: u32,
    start: u64,
}

impl WorkerIdentity {
    pub fn current() -> Self {
        let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_else(|_| "host".into());
        let pid = std::process::id();
        WorkerIdentity { host: clean(&host), node: node_id(), pid, start: start_time(pid).unwrap_or(0) }
    }

    /// The identity of another process of this host and PID namespace (`None` when it is
    /// not running): what its workers would write, e.g. for a test that kills it.
    pub fn of_pid(pid: u32) -> Option<Self> {
        let me = Self::current();
        Some(WorkerIdentity { pid, start: start_time(pid)?, ..me })
    }

    /// The `worker` column of a job claimed by this process's worker `i`.
    pub fn name(&self, i: usize) -> String {
        format!("{}/{}/{}.{}#{i}", self.host, self.node, self.pid, self.start)
    }

    fn parse(name: &str) -> Option<WorkerIdentity> {
        let (rest, _worker) = name.rsplit_once('#')?;
        let mut parts = rest.split('/');
        let (host, node, proc_) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let (pid, start) = proc_.split_once('.')?;
        Some(WorkerIdentity { host: host.into(), node: node.into(), pid: pid.parse().ok()?, start: start.parse().ok()? })
    }

    /// Whether the process named by `worker` is known to be gone: same host, and another
    /// boot, or (same boot and PID namespace) no process with that PID and start time.
    /// Unknown (another host, an old-style name): `false`, the lease decides.
    pub fn owner_is_dead(&self, worker: &str) -> bool {
        let Some(w) = WorkerIdentity::parse(worker) else { return false };
        if w.host != self.host {
            return false;
        }
        let (boot, ns) = self.node.split_once('-').unwrap_or((&self.node, ""));
        let (w_boot, w_ns) = w.node.split_once('-').unwrap_or((&w.node, ""));
        if w_boot != boot {
            return true;
        }
        if w_ns != ns {
            return false;
        }
        if w.pid == self.pid {
            return w.start != self.start;
        }
        start_time(w.pid) != Some(w.start)
    }
}

fn clean(s: &str) -> String {
    let s: String = s.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')).take(64).collect();
    if s.is_empty() { "host".into() } else { s }
}

/// `<first 8 hex of the boot id>-<PID namespace inode>`.
fn node_id() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|b| b.trim().replace('-', "").chars().take(8).collect::<String>())
        .unwrap_or_else(|_| "noboot".into());
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|l| l.to_string_lossy().trim_start_matches("pid:[").trim_end_matches(']').parse::<u64>().ok())
        .unwrap_or(0);
    format!("{}-{ns}", clean(&boot))
}

/// The start time of a process (field 22 of `/proc/<pid>/stat`, clock ticks since boot).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Requeue the running jobs whose worker process is gone ([`WorkerIdentity::owner_is_dead`]),
/// without waiting for their leases. A job that already used its attempts fails with
/// `worker_lost` instead (a document that kills its worker process is not retried forever).
/// Returns how many jobs were released.
pub async fn reclaim_dead(pool: &PgPool, me: &WorkerIdentity) -> sqlx::Result<usize> {
    let tenants: Vec<Uuid> = sqlx::query_scalar!("select id from tenant order by id").fetch_all(pool).await?;
    let mut released = 0;
    for t in tenants {
        let mut tx = TenantTx::begin(pool, t, Scope::System).await?;
        let running = sqlx::query!(
            r#"select id, source_id, worker as "worker!", attempts from ingest_job
             where tenant_id = $1 and status = 'running' and worker is not null and lease_until > now()
             for update skip locked"#,
            t,
        )
        .fetch_all(&mut *tx)
        .await?;
        for r in running {
            let (id, source, worker, attempts) = (r.id, r.source_id, r.worker, r.attempts);
            if !me.owner_is_dead(&worker) {
                continue;
            }
            if attempts >= MAX_ATTEMPTS {
                let msg = "the worker process running this job ended unexpectedly on every attempt";
                fail(&mut tx, id, "worker_lost", msg).await?;
                sqlx::query!(
                    "update source set status = case when indexed_hash is null then 'failed' else 'indexed' end,
                         error_code = 'worker_lost', error_message = $2 where tenant_id = $3 and id = $1",
                    source,
                    msg,
                    t,
                )
                .execute(&mut *tx)
                .await?;
                set_progress(&mut tx, source, None).await?;
            } else {
                sqlx::query!(
                    "update ingest_job set status = 'queued', lease_until = null, worker = null, run_after = now()
                     where tenant_id = $2 and id = $1",
                    id,
                    t,
                )
                .execute(&mut *tx)
                .await?;
                sqlx::query!(
                    "update source set status = case when indexed_hash is null then 'pending' else 'indexed' end
                     where tenant_id = $2 and id = $1 and status = 'parsing'",
                    source,
                    t,
                )
                .execute(&mut *tx)
                .await?;
                set_progress(&mut tx, source, Some(Progress::phase(Phase::Queued))).await?;
            }
            tracing::info!(tenant.id = %t, source.id = %source, %worker, "released the ingest job of a worker process that is gone");
            released += 1;
        }
        tx.commit().await?;
    }
    Ok(released)
}

/// Claim the next ready job of one tenant (queued, or running with an expired lease).
async fn claim_in(pool: &PgPool, tenant: Uuid, worker: &str, lease: Duration) -> sqlx::Result<Option<Job>> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let job: Option<Job> = sqlx::query_as!(
        Job,
        "update ingest_job set status = 'running', attempts = attempts + 1, worker = $1,
             lease_until = now() + make_interval(secs => $2)
         where tenant_id = $3 and id = (select id from ingest_job
                     where tenant_id = $3
                       and ((status = 'queued' and run_after <= now()) or (status = 'running' and lease_until < now()))
                     order by run_after, created_at
                     for update skip locked limit 1)
         returning id, source_id, attempts",
        worker,
        lease.as_secs_f64(),
        tenant,
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(job)
}

/// Claim a job from any tenant, starting after `cursor` (round-robin).
pub async fn claim(pool: &PgPool, worker: &str, lease: Duration, cursor: &mut usize) -> sqlx::Result<Option<(Uuid, Job)>> {
    let tenants: Vec<Uuid> = sqlx::query_scalar!("select id from tenant order by id").fetch_all(pool).await?;
    for i in 0..tenants.len() {
        let t = tenants[(*cursor + i) % tenants.len()];
        if let Some(job) = claim_in(pool, t, worker, lease).await? {
            *cursor = (*cursor + i + 1) % tenants.len();
            return Ok(Some((t, job)));
        }
    }
    Ok(None)
}

/// The source of a job, for its progress.
async fn source_of(conn: &mut PgConnection, tenant: Uuid, job: Uuid) -> sqlx::Result<Option<Uuid>> {
    sqlx::query_scalar!("select source_id from ingest_job where tenant_id = $2 and id = $1", job, tenant)
        .fetch_optional(conn)
        .await
}

pub async fn finish(tx: &mut TenantTx, job: Uuid) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    sqlx::query!(
        "update ingest_job set status = 'done', finished_at = now(), lease_until = null where tenant_id = $2 and id = $1",
        job,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    if let Some(s) = source_of(tx, tenant, job).await? {
        set_progress_in(tx, tenant, s, None).await?;
    }
    Ok(())
}

pub async fn fail(tx: &mut TenantTx, job: Uuid, code: &str, message: &str) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    sqlx::query!(
        "update ingest_job set status = 'failed', finished_at = now(), lease_until = null,
             error_code = $2, error_message = $3 where tenant_id = $4 and id = $1",
        job,
        code,
        message,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    if let Some(s) = source_of(tx, tenant, job).await? {
        set_progress_in(tx, tenant, s, None).await?;
    }
    Ok(())
}

/// Put a job back with exponential backoff after a transient error.
pub async fn retry_later(tx: &mut TenantTx, job: Uuid, attempts: i32, code: &str, message: &str) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    let delay = 2f64.powi(attempts.clamp(0, 10)) * 5.0;
    sqlx::query!(
        "update ingest_job set status = 'queued', lease_until = null, error_code = $2, error_message = $3,
             run_after = now() + make_interval(secs => $4) where tenant_id = $5 and id = $1",
        job,
        code,
        message,
        delay,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    if let Some(s) = source_of(tx, tenant, job).await? {
        set_progress_in(tx, tenant, s, Some(Progress::phase(Phase::Queued))).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_round_trips_and_knows_itself_alive() {
        let me = WorkerIdentity::current();
        let name = me.name(3);
        assert_eq!(WorkerIdentity::parse(&name), Some(me.clone()), "{name}");
        assert!(!me.owner_is_dead(&name), "this process is alive");
        // The same PID with another start time is a recycled PID: dead.
        let recycled = WorkerIdentity { start: me.start + 1, ..me.clone() };
        assert!(me.owner_is_dead(&recycled.name(0)));
        // Another host, or an old-style name: unknown, left to the lease.
        let other = WorkerIdentity { host: "elsewhere".into(), ..recycled.clone() };
        assert!(!me.owner_is_dead(&other.name(0)));
        assert!(!me.owner_is_dead("host-1234-0"));
        // Another boot of this host: dead.
        let rebooted = WorkerIdentity { node: "00000000-1".into(), ..me.clone() };
        assert!(me.owner_is_dead(&rebooted.name(0)));
    }
}

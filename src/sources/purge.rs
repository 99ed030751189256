//! The purge: deleted KBs and removed sources older than the grace period
//! (`MNOTE_DELETE_GRACE_SECS`) are deleted for good, with everything under them (sources,
//! artifacts, evidence, jobs: `on delete cascade`). Run by ingest worker 0 twice a minute
//! and by tests; idempotent, so several processes may run it.

use std::time::Duration;

use sqlx::PgPool;

use crate::db::include_deleted;
use crate::db::{Scope, TenantTx};

/// What one pass purged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Purged {
    pub kbs: u64,
    pub sources: u64,
}

/// Purge every tenant's deletions older than `grace`.
pub async fn run_once(pool: &PgPool, grace: Duration) -> sqlx::Result<Purged> {
    let tenants = sqlx::query_scalar!("select id from tenant order by id").fetch_all(pool).await?;
    let mut total = Purged::default();
    for t in tenants {
        let mut tx = TenantTx::begin(pool, t, Scope::System).await?;
        include_deleted(&mut tx, true).await?;
        let secs = grace.as_secs_f64();
        let sources =
            sqlx::query!("delete from source where tenant_id = $2 and deleted_at < now() - make_interval(secs => $1)", secs, t)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        let kbs = sqlx::query!("delete from kb where tenant_id = $2 and deleted_at < now() - make_interval(secs => $1)", secs, t)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        if kbs + sources > 0 {
            tracing::info!(tenant.id = %t, kbs, sources, "purged deleted knowledge bases and sources");
        }
        total.kbs += kbs;
        total.sources += sources;
    }
    Ok(total)
}

//! The lease reconciler: a run whose worker died (its lease expired: the process crashed, was
//! killed, or lost the database for longer than a lease) becomes `interrupted` with reason
//! `worker_lost`, so no run stays `running` forever. Every replica runs it; the status update
//! decides which one writes the `run.interrupted` event.

use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use super::store;
use crate::db::{Scope, TenantTx};

/// How often expired leases are looked for (more often with a lease shorter than 30 s).
pub const INTERVAL: Duration = Duration::from_secs(10);

fn interval() -> Duration {
    INTERVAL.min(store::lease() / 3)
}

/// One pass over every tenant; the runs it interrupted.
pub async fn once(pool: &PgPool) -> sqlx::Result<Vec<Uuid>> {
    let tenants = sqlx::query_scalar!("select id from tenant order by id").fetch_all(pool).await?;
    let mut out = Vec::new();
    for t in tenants {
        let mut tx = TenantTx::begin(pool, t, Scope::System).await?;
        out.extend(store::reconcile_expired(&mut tx, t).await?);
        tx.commit().await?;
    }
    if !out.is_empty() {
        tracing::warn!(runs = out.len(), "runs interrupted: their worker was lost (lease expired)");
    }
    Ok(out)
}

/// A stopping process hands its live runs over as `interrupted` (they can be resumed) rather
/// than leaving them to the lease timeout.
pub async fn release(pool: &PgPool, owner: &str) -> sqlx::Result<usize> {
    let tenants = sqlx::query_scalar!("select id from tenant order by id").fetch_all(pool).await?;
    let mut n = 0;
    for t in tenants {
        let mut tx = TenantTx::begin(pool, t, Scope::System).await?;
        n += store::release_owned(&mut tx, t, owner).await?.len();
        tx.commit().await?;
    }
    Ok(n)
}

/// Reconcile every [`INTERVAL`] (or a third of the lease, if shorter) until `stop` turns true.
pub async fn run(pool: PgPool, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        if let Err(e) = once(&pool).await {
            tracing::debug!("run reconciler: {e}");
        }
        tokio::select! {
            _ = tokio::time::sleep(interval()) => {}
            _ = stop.changed() => return,
        }
    }
}

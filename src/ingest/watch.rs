//! Keeping sources in step with the files on disk: a `notify` watcher on granted roots that
//! hold registered sources, plus a periodic rescan as the fallback (network filesystems and
//! missed events). Modified → re-parse; deleted or moved away → `stale` (`file_missing`);
//! restored → re-parse; new files in registered folders (matching their globs) → registered.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use notify::{RecursiveMode, Watcher};
use sqlx::{PgConnection, PgPool};
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use crate::{
    config::Config,
    db::{Scope, TenantTx},
    evidence::SourceStatus,
    grants::paths,
    platform::log_limit::WarnLimiter,
    sources::{self, queries as sq},
};

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub registered: usize,
    pub queued: usize,
    pub stale: usize,
}

struct Watched {
    id: Uuid,
    root_path: String,
    resource_path: String,
    status: SourceStatus,
    error_code: Option<String>,
    size_bytes: i64,
    mtime: Option<chrono::DateTime<chrono::Utc>>,
}

struct Folder {
    kb_id: Uuid,
    grant_id: Uuid,
    root_path: String,
    dir_path: String,
    include_globs: Vec<String>,
    exclude_globs: Vec<String>,
    created_by: Uuid,
}

/// Compare one tenant's grant-backed sources and registered folders with the disk.
pub async fn rescan_tenant(conn: &mut PgConnection, tenant: Uuid) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let rows: Vec<Watched> = sqlx::query_as!(
        Watched,
        r#"select s.id, g.root_path, s.resource_path, s.status as "status: _", s.error_code, s.size_bytes,
               s.mtime as "mtime: _"
         from source s join dir_grant g on g.tenant_id = s.tenant_id and g.id = s.grant_id
         where s.tenant_id = $1 and g.revoked_at is null order by s.id"#,
        tenant,
    )
    .fetch_all(&mut *conn)
    .await?;
    for r in rows {
        let found = paths::confine(Path::new(&r.root_path), &r.resource_path).ok().filter(|c| c.abs.is_file());
        match found {
            None if r.status != SourceStatus::Stale => {
                sqlx::query!(
                    "update source set status = 'stale', error_code = 'file_missing',
                         error_message = 'the file was deleted or moved away' where tenant_id = $2 and id = $1",
                    r.id,
                    tenant,
                )
                .execute(&mut *conn)
                .await?;
                report.stale += 1;
            }
            None => {}
            Some(c) => {
                // Gone since the check (a churning directory): the next pass sees it missing.
                let Ok(meta) = std::fs::metadata(&c.abs) else { continue };
                let mtime = meta.modified().ok().map(chrono::DateTime::<chrono::Utc>::from);
                let restored = r.status == SourceStatus::Stale && r.error_code.as_deref() == Some("file_missing");
                // Postgres keeps microseconds; compare at that precision.
                let micros = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.timestamp_micros());
                let changed = meta.len() as i64 != r.size_bytes || micros(mtime) != micros(r.mtime);
                if restored || changed {
                    crate::sources::queue::enqueue(conn, tenant, r.id).await?;
                    report.queued += 1;
                }
            }
        }
    }
    let folders: Vec<Folder> = sqlx::query_as!(
        Folder,
        "select f.kb_id, f.grant_id, g.root_path, f.dir_path, f.include_globs, f.exclude_globs, f.created_by
         from kb_folder f join dir_grant g on g.tenant_id = f.tenant_id and g.id = f.grant_id
         where f.tenant_id = $1 and g.revoked_at is null order by f.id",
        tenant,
    )
    .fetch_all(&mut *conn)
    .await?;
    for f in folders {
        let root = PathBuf::from(&f.root_path);
        let Ok(dir) = paths::confine(&root, &f.dir_path) else { continue };
        let (inc, exc) = (f.include_globs.clone(), f.exclude_globs.clone());
        let (files, _) = tokio::task::spawn_blocking(move || sources::scan_dir(&root, &dir.abs, &inc, &exc)).await??;
        for (abs, rel, kind) in files {
            let exists: bool = sqlx::query_scalar!(
                r#"select exists (select 1 from source where tenant_id = $4 and kb_id = $1 and grant_id = $2 and resource_path = $3) as "exists!""#,
                f.kb_id,
                f.grant_id,
                &rel,
                tenant,
            )
            .fetch_one(&mut *conn)
            .await?;
            // A source a user removed stays removed (registering it by hand restores it).
            if exists || sq::removed_at_path(conn, tenant, f.kb_id, Some(f.grant_id), &rel).await?.is_some() {
                continue;
            }
            let facts = tokio::task::spawn_blocking(move || sources::file_facts(&abs)).await??;
            let n = sq::NewSource {
                kb_id: f.kb_id,
                grant_id: Some(f.grant_id),
                resource_path: &rel,
                kind,
                size_bytes: facts.size,
                mtime: facts.mtime,
                sha256: &facts.sha256,
            };
            let (s, created) = sq::upsert(conn, tenant, f.created_by, &n).await?;
            if created {
                crate::sources::queue::enqueue(conn, tenant, s.id).await?;
                report.registered += 1;
            }
        }
    }
    Ok(report)
}

/// Rescan every tenant (each in its own transaction).
pub async fn rescan_all(pool: &PgPool) -> anyhow::Result<Report> {
    let tenants: Vec<Uuid> = sqlx::query_scalar!("select id from tenant order by id").fetch_all(pool).await?;
    let mut total = Report::default();
    for t in tenants {
        let mut tx = TenantTx::begin(pool, t, Scope::System).await?;
        let r = rescan_tenant(&mut tx, t).await?;
        tx.commit().await?;
        total.registered += r.registered;
        total.queued += r.queued;
        total.stale += r.stale;
    }
    Ok(total)
}

/// Granted roots that currently back at least one source or folder, across tenants.
async fn watched_roots(pool: &PgPool) -> anyhow::Result<BTreeSet<PathBuf>> {
    let tenants: Vec<Uuid> = sqlx::query_scalar!("select id from tenant").fetch_all(pool).await?;
    let mut roots = BTreeSet::new();
    for t in tenants {
        let mut tx = TenantTx::begin(pool, t, Scope::System).await?;
        let rs: Vec<String> = sqlx::query_scalar!(
            "select distinct g.root_path from dir_grant g
             where g.tenant_id = $1 and g.revoked_at is null
               and (exists (select 1 from source s where s.tenant_id = g.tenant_id and s.grant_id = g.id)
                    or exists (select 1 from kb_folder f where f.tenant_id = g.tenant_id and f.grant_id = g.id))",
            t,
        )
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        roots.extend(rs.into_iter().map(PathBuf::from));
    }
    Ok(roots)
}

/// How often one kind of watcher warning (per root, or "rescan failed") may be logged.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// " (N more like it held back)" when lines were held back.
fn held_back(n: u64) -> String {
    if n == 0 { String::new() } else { format!(" ({n} more like it in the last {} s held back)", WARN_EVERY.as_secs()) }
}

/// Run the watcher and the periodic rescan until `stop`. File events are debounced into a
/// rescan (cheap: one `stat` per registered file).
pub fn spawn(pool: PgPool, cfg: Arc<Config>, mut stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<()>();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok_and(|e| !e.kind.is_access()) {
                let _ = ev_tx.send(());
            }
        })
        .map_err(|e| tracing::warn!("file watcher unavailable, relying on periodic rescans: {e}"))
        .ok();
        let mut watching = BTreeSet::new();
        let mut warn = WarnLimiter::new(WARN_EVERY);
        let mut tick = tokio::time::interval(cfg.rescan_interval);
        // A rescan slower than the interval does not make the missed ticks fire back to back.
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                Some(()) = ev_rx.recv() => {
                    // Debounce a burst of events (editors write several times per save).
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    while ev_rx.try_recv().is_ok() {}
                }
                _ = stop.changed() => break,
            }
            if let Some(w) = watcher.as_mut()
                && let Ok(roots) = watched_roots(&pool).await
            {
                for r in roots.difference(&watching.clone()) {
                    match w.watch(r, RecursiveMode::Recursive) {
                        Ok(()) => {
                            watching.insert(r.clone());
                        }
                        Err(e) => {
                            if let Some(n) = warn.allow(&r.to_string_lossy(), Instant::now()) {
                                tracing::warn!("cannot watch {}: {e}{}", r.display(), held_back(n));
                            }
                        }
                    }
                }
                for r in watching.clone().difference(&roots) {
                    let _ = w.unwatch(r);
                    watching.remove(r);
                }
            }
            match rescan_all(&pool).await {
                Ok(r) if r != Report::default() => tracing::info!("rescan: {r:?}"),
                Ok(_) => {}
                Err(e) => {
                    if let Some(n) = warn.allow("rescan", Instant::now()) {
                        tracing::warn!("rescan failed: {e:#}{}", held_back(n));
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_held_back_count_is_said_only_when_there_is_one() {
        assert_eq!(held_back(0), "");
        assert!(held_back(3).starts_with(" (3 more like it"));
    }
}

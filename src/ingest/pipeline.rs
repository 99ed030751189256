//! One ingest job end to end, and the worker loop that runs jobs.
//!
//! Status flow of a source: `pending → parsing → indexed | failed`; a missing file or a
//! revoked grant makes it `stale`. A changed file is re-parsed and its evidence replaced in
//! one transaction; if the new parse fails, the old evidence stays, the source stays
//! `indexed` and `error` holds the failure.

use std::{path::PathBuf, sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio::sync::watch;
use uuid::Uuid;

use super::{ParseError, index, jobs, mineru, worker};
use crate::{
    config::Config,
    db::{Scope, TenantTx},
    grants::paths,
    sources::{self, Source, queries as sq, queue},
};

/// How a job ended, for logs and the CLI.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Indexed { blocks: usize },
    Unchanged,
    Failed { code: String },
    KeptOld { code: String },
    Stale { code: &'static str },
    Retrying { code: String },
    Gone,
}

async fn set_status(tx: &mut TenantTx, id: Uuid, status: &str, error: Option<(&str, &str)>) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    sqlx::query!(
        "update source set status = $2, error_code = $3, error_message = $4 where tenant_id = $5 and id = $1",
        id,
        status,
        error.map(|e| e.0),
        error.map(|e| e.1),
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Open the bytes of a source for ingest (and the LightRAG sync): the upload blob, or the file under its grant's
/// root through [`paths::open_beneath`] (the kernel keeps the resolution inside the root, so
/// a directory swapped for a symlink out of it cannot be read). Everything afterwards (hash,
/// size, the parser child, MinerU) uses this descriptor only. `Err((code, message))` makes the
/// source stale.
pub async fn open_source(
    conn: &mut crate::db::TenantTx,
    cfg: &Config,
    s: &Source,
) -> sqlx::Result<Result<std::fs::File, (&'static str, String)>> {
    let gone = |s: &Source, where_: &str| ("file_missing", format!("{} is no longer in {where_}", s.resource_path));
    match s.grant_id {
        None => {
            let p = sources::upload_blob_path(&cfg.uploads_dir(), &s.sha256);
            Ok(std::fs::File::open(&p).map_err(|_| gone(s, "the upload store")))
        }
        Some(g) => {
            let grant = crate::grants::queries::get(conn, g).await?;
            let Some(grant) = grant.filter(|g| g.revoked_at.is_none()) else {
                return Ok(Err(("grant_revoked", "the directory grant for this file was revoked".into())));
            };
            let root = PathBuf::from(&grant.root_path);
            match crate::grants::roots::check(conn, cfg, &root).await {
                Ok(()) => {}
                Err(crate::error::AppError::Sqlx(e)) => return Err(e),
                Err(e) => return Ok(Err(("path_outside_grant", e.to_string()))),
            }
            let (rel, allow) = (s.resource_path.clone(), cfg.allow_hard_links);
            let opened = tokio::task::spawn_blocking(move || paths::open_beneath(&root, &rel, allow))
                .await
                .map_err(|e| sqlx::Error::Io(std::io::Error::other(e)))?;
            Ok(opened.map_err(|e| match e {
                paths::OpenError::Missing | paths::OpenError::Io(_) => gone(s, &grant.root_path),
                paths::OpenError::Outside => {
                    ("path_outside_grant", format!("{} now leads outside {}", s.resource_path, grant.root_path))
                }
                paths::OpenError::HardLink => (
                    "hard_link_refused",
                    format!("{} has several hard links (set MNOTE_ALLOW_HARD_LINKS=true to allow)", s.resource_path),
                ),
            }))
        }
    }
}

/// Size, mtime and sha256 of an open file, read with `pread` (the offset stays at 0).
fn facts_of(file: &std::fs::File) -> std::io::Result<sources::FileFacts> {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::FileExt;
    let meta = file.metadata()?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut at = 0u64;
    loop {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(sources::FileFacts {
        size: at as i64,
        mtime: meta.modified().ok().map(chrono::DateTime::<chrono::Utc>::from),
        sha256: format!("sha256:{}", hex::encode(h.finalize())),
    })
}

/// Run one claimed job. An unexpected error (the database refusing a write, a lost
/// connection) is recorded like a transient parse error: retried with backoff, and after
/// [`queue::MAX_ATTEMPTS`] the job fails with `index_failed` (the previous version, if any, is
/// kept). Only when even that cannot be written does the error come back, and the job is
/// claimed again when its lease ends.
pub async fn process(pool: &PgPool, cfg: &Config, tenant: Uuid, job: &jobs::Job) -> anyhow::Result<Outcome> {
    match process_claimed(pool, cfg, tenant, job).await {
        Ok(o) => Ok(o),
        Err(e) => match record_internal_failure(pool, tenant, job, &e).await {
            Ok(o) => {
                tracing::warn!(tenant.id = %tenant, source.id = %job.source_id, "ingest job error: {e:#}");
                Ok(o)
            }
            Err(_) => Err(e),
        },
    }
}

async fn record_internal_failure(pool: &PgPool, tenant: Uuid, job: &jobs::Job, e: &anyhow::Error) -> anyhow::Result<Outcome> {
    const CODE: &str = "index_failed";
    let mut message = format!("indexing failed: {e:#}");
    if let Some((i, _)) = message.char_indices().nth(500) {
        message.truncate(i);
    }
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let Some(source) = sq::get(&mut tx, job.source_id).await? else {
        jobs::finish(&mut tx, job.id).await?;
        tx.commit().await?;
        return Ok(Outcome::Gone);
    };
    let back = if source.indexed_hash.is_some() { "indexed" } else { "pending" };
    let outcome = if job.attempts < queue::MAX_ATTEMPTS {
        jobs::retry_later(&mut tx, job.id, job.attempts, CODE, &message).await?;
        set_status(&mut tx, source.id, back, Some((CODE, &message))).await?;
        Outcome::Retrying { code: CODE.into() }
    } else {
        jobs::fail(&mut tx, job.id, CODE, &message).await?;
        if source.indexed_hash.is_some() {
            set_status(&mut tx, source.id, "indexed", Some((CODE, &message))).await?;
            Outcome::KeptOld { code: CODE.into() }
        } else {
            set_status(&mut tx, source.id, "failed", Some((CODE, &message))).await?;
            Outcome::Failed { code: CODE.into() }
        }
    };
    tx.commit().await?;
    Ok(outcome)
}

async fn process_claimed(pool: &PgPool, cfg: &Config, tenant: Uuid, job: &jobs::Job) -> anyhow::Result<Outcome> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let Some(source) = sq::get(&mut tx, job.source_id).await? else {
        jobs::finish(&mut tx, job.id).await?;
        tx.commit().await?;
        return Ok(Outcome::Gone);
    };
    let progress = |phase| queue::Progress { attempt: Some(job.attempts), ..queue::Progress::phase(phase) };
    queue::set_progress(&mut tx, source.id, Some(progress(queue::Phase::Reading))).await?;
    let file = match open_source(&mut tx, cfg, &source).await? {
        Ok(f) => Arc::new(f),
        Err((code, msg)) => {
            set_status(&mut tx, source.id, "stale", Some((code, &msg))).await?;
            jobs::finish(&mut tx, job.id).await?;
            tx.commit().await?;
            return Ok(Outcome::Stale { code });
        }
    };
    tx.commit().await?;

    let f = file.clone();
    let facts = tokio::task::spawn_blocking(move || facts_of(&f)).await??;
    if facts.size as u64 > cfg.parse_max_bytes {
        let err = ParseError::new(
            "file_too_large",
            format!("{} bytes is above the parse limit of {}", facts.size, cfg.parse_max_bytes),
        );
        return record_failure(pool, tenant, job, &source, err).await;
    }
    if source.indexed_hash.as_deref() == Some(facts.sha256.as_str()) {
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        set_status(&mut tx, source.id, "indexed", None).await?;
        jobs::finish(&mut tx, job.id).await?;
        tx.commit().await?;
        return Ok(Outcome::Unchanged);
    }
    {
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        set_status(&mut tx, source.id, "parsing", source.error_code.as_deref().zip(source.error_message.as_deref())).await?;
        queue::set_progress(&mut tx, source.id, Some(progress(queue::Phase::Parsing))).await?;
        tx.commit().await?;
    }
    let limits = worker::Limits::of(cfg);
    let (pages_tx, pages_rx) = tokio::sync::mpsc::unbounded_channel();
    let recorder = tokio::spawn(record_pages(pool.clone(), tenant, source.id, job.attempts, pages_rx));
    let parsed = parse(pool, cfg, tenant, &source, &file, &limits, pages_tx).await;
    // The reports end with the parse; wait for the last write before the next phase's own.
    let _ = recorder.await;
    match parsed? {
        Ok(art) if art.source_hash != facts.sha256 => {
            // The file changed while it was parsed: parse again.
            let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
            jobs::retry_later(&mut tx, job.id, 0, "file_changed", "the file changed during parsing").await?;
            tx.commit().await?;
            Ok(Outcome::Retrying { code: "file_changed".into() })
        }
        Ok(art) => {
            {
                // What the parse found, while the evidence rows are written.
                let pages = art.source_map.page_count.map(|p| p as i32);
                let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
                let p = queue::Progress { done: pages, total: pages, ..progress(queue::Phase::Indexing) };
                queue::set_progress(&mut tx, source.id, Some(p)).await?;
                tx.commit().await?;
            }
            let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
            index::store_artifact(&mut tx, tenant, source.id, &art).await?;
            let blocks = index::write(&mut tx, tenant, &source, &art).await?;
            sqlx::query!(
                "update source set status = 'indexed', error_code = null, error_message = null,
                     indexed_hash = $2, sha256 = $2, size_bytes = $3, mtime = $4, provider = $5, pages = $6,
                     truncated_rows = $8
                 where tenant_id = $7 and id = $1",
                source.id,
                &art.source_hash,
                facts.size,
                // chrono, where the macros expect `time` for timestamptz: typed by the column.
                facts.mtime as _,
                format!("{} {}", art.provider, art.provider_version),
                art.source_map.page_count.map(|p| p as i32),
                tenant,
                art.source_map.truncated.as_ref().map(|t| i32::try_from(t.limit).unwrap_or(i32::MAX)),
            )
            .execute(&mut *tx)
            .await?;
            jobs::finish(&mut tx, job.id).await?;
            tx.commit().await?;
            crate::search::vectors::hint_backlog();
            Ok(Outcome::Indexed { blocks })
        }
        Err(e) => record_failure(pool, tenant, job, &source, e).await,
    }
}

/// Choose the provider and parse. Scanned PDFs and PNG/JPEG images of a tenant that enabled
/// external parsing upload go to MinerU (HTTP, in this task: network-bound, and the token
/// never leaves this process); everything else goes to the supervised parser child.
async fn parse(
    pool: &PgPool,
    cfg: &Config,
    tenant: Uuid,
    source: &Source,
    file: &std::fs::File,
    limits: &worker::Limits,
    pages: worker::PageReports,
) -> anyhow::Result<Result<super::ParsedArtifact, ParseError>> {
    let name = source.file_name();
    if matches!(source.kind.as_str(), "pdf" | "image") {
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        let settings = crate::tenants::settings::get(&mut tx).await?;
        tx.commit().await?;
        if settings.external_parsing_upload {
            let probe = match worker::probe_supervised(&cfg.parser_exe, file, name, source.kind.as_str(), limits).await {
                Ok(p) => p,
                Err(e) => return Ok(Err(e)),
            };
            if probe.goes_to_mineru() {
                let Some(token) = cfg.mineru_token.as_ref() else {
                    return Ok(Err(ParseError::new(
                        "mineru_token_missing",
                        "external parsing (MinerU) is enabled for this team, but the server has no MinerU token (MNOTE_MINERU_TOKEN)",
                    )));
                };
                // `/proc/self/fd/N`: the descriptor opened above, not the original name.
                return Ok(mineru::parse_file(cfg, token, &paths::fd_path(file), &probe).await);
            }
        }
    }
    // `.doc`/`.ppt`: converted by LibreOffice first, when it is installed.
    if let Some(converted) = super::slides::legacy::convert(cfg, name, &paths::fd_path(file)).await {
        let c = match converted {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        let parsed =
            worker::parse_supervised_file(&cfg.parser_exe, &c.file, &c.name, source.kind.as_str(), limits, Some(pages)).await;
        return Ok(parsed.map(|art| c.mark(art)));
    }
    Ok(worker::parse_supervised_file(&cfg.parser_exe, file, name, source.kind.as_str(), limits, Some(pages)).await)
}

/// How often, at most, the pages a parse reports are written to its source (the first at once).
const PAGES_EVERY: Duration = Duration::from_secs(1);

/// Record the pages done of total that a parse reports on its source, each write in its own
/// short transaction (the KB page shows them live). Ends when the parse ends.
async fn record_pages(
    pool: PgPool,
    tenant: Uuid,
    source: Uuid,
    attempt: i32,
    mut reports: tokio::sync::mpsc::UnboundedReceiver<(u32, u32)>,
) {
    let mut last: Option<tokio::time::Instant> = None;
    let mut pending: Option<(u32, u32)> = None;
    loop {
        let got = match (pending, last) {
            // A report waits for the interval; a newer one replaces it meanwhile.
            (Some(_), Some(t)) => tokio::time::timeout_at(t + PAGES_EVERY, reports.recv()).await.ok(),
            _ => Some(reports.recv().await),
        };
        match got {
            Some(None) => return,
            Some(Some(p)) => pending = Some(p),
            None => {}
        }
        let due = last.is_none_or(|t| t.elapsed() >= PAGES_EVERY);
        if let (Some((done, total)), true) = (pending, due) {
            let p = queue::Progress {
                done: Some(i32::try_from(done).unwrap_or(i32::MAX)),
                total: Some(i32::try_from(total).unwrap_or(i32::MAX)),
                attempt: Some(attempt),
                ..queue::Progress::phase(queue::Phase::Parsing)
            };
            let write = async {
                let mut tx = TenantTx::begin(&pool, tenant, Scope::System).await?;
                queue::set_progress(&mut tx, source, Some(p)).await?;
                tx.commit().await?;
                Ok::<_, anyhow::Error>(())
            };
            if let Err(e) = write.await {
                tracing::debug!(%source, "recording parse progress failed: {e:#}");
            }
            last = Some(tokio::time::Instant::now());
            pending = None;
        }
    }
}

async fn record_failure(pool: &PgPool, tenant: Uuid, job: &jobs::Job, source: &Source, e: ParseError) -> anyhow::Result<Outcome> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let outcome = if worker::is_transient(e.code) && job.attempts < queue::MAX_ATTEMPTS {
        jobs::retry_later(&mut tx, job.id, job.attempts, e.code, &e.message).await?;
        let back = if source.indexed_hash.is_some() { "indexed" } else { "pending" };
        set_status(&mut tx, source.id, back, Some((e.code, &e.message))).await?;
        Outcome::Retrying { code: e.code.into() }
    } else {
        jobs::fail(&mut tx, job.id, e.code, &e.message).await?;
        if source.indexed_hash.is_some() {
            // Keep serving the previous good version; say what went wrong with the new one.
            set_status(&mut tx, source.id, "indexed", Some((e.code, &e.message))).await?;
            Outcome::KeptOld { code: e.code.into() }
        } else {
            set_status(&mut tx, source.id, "failed", Some((e.code, &e.message))).await?;
            Outcome::Failed { code: e.code.into() }
        }
    };
    tx.commit().await?;
    Ok(outcome)
}

/// A job [`run_next`] claimed and ran.
pub struct Ran {
    pub tenant: Uuid,
    pub job: jobs::Job,
    /// An error here could not even be recorded as a failure ([`process`]): the job is
    /// claimed again when its lease ends.
    pub outcome: anyhow::Result<Outcome>,
}

/// Claim the next ready job of any tenant as `worker` (round-robin from `cursor`) and run
/// it; `Ok(None)` when no job is ready.
pub async fn run_next(
    pool: &PgPool,
    cfg: &Config,
    worker: &str,
    lease: Duration,
    cursor: &mut usize,
) -> sqlx::Result<Option<Ran>> {
    let Some((tenant, job)) = jobs::claim(pool, worker, lease, cursor).await? else { return Ok(None) };
    let outcome = process(pool, cfg, tenant, &job).await;
    Ok(Some(Ran { tenant, job, outcome }))
}

/// Run ready jobs as `worker` until none is left (the CLI's evaluation; the server's workers
/// keep polling instead, see [`spawn_workers`]), stopping at the first error. `on_done`
/// sees each outcome.
pub async fn drain(
    pool: &PgPool,
    cfg: &Config,
    worker: &str,
    lease: Duration,
    cursor: &mut usize,
    mut on_done: impl FnMut(Outcome),
) -> anyhow::Result<()> {
    while let Some(ran) = run_next(pool, cfg, worker, lease, cursor).await? {
        on_done(ran.outcome?);
    }
    Ok(())
}

/// Run `n` workers until `stop` turns true. Each claims jobs round-robin across tenants; with
/// no job ready, it embeds blocks that lack a vector (see [`crate::search::vectors`]).
pub fn spawn_workers(
    pool: PgPool,
    cfg: Arc<Config>,
    n: usize,
    embedder: Option<Arc<dyn crate::search::embed::Embedder>>,
    vector_health: Arc<crate::search::vector_health::VectorHealth>,
    stop: watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..n)
        .map(|i| {
            let (pool, cfg, mut stop, embedder) = (pool.clone(), cfg.clone(), stop.clone(), embedder.clone());
            let vector_health = vector_health.clone();
            tokio::spawn(async move {
                let me = jobs::WorkerIdentity::current();
                let name = me.name(i);
                let mut cursor = i;
                // Worker 0 releases the jobs of dead worker processes of this host at start-up
                // (a restarted server gets its own jobs back at once) and twice a minute.
                let mut next_reclaim = tokio::time::Instant::now();
                loop {
                    if *stop.borrow() {
                        break;
                    }
                    if i == 0 && tokio::time::Instant::now() >= next_reclaim {
                        next_reclaim = tokio::time::Instant::now() + RECLAIM_EVERY;
                        match jobs::reclaim_dead(&pool, &me).await {
                            Ok(0) => {}
                            Ok(n) => tracing::info!("released {n} ingest jobs of worker processes that are gone"),
                            Err(e) => tracing::warn!("releasing the jobs of dead workers failed: {e:#}"),
                        }
                        if let Err(e) = crate::sources::purge::run_once(&pool, cfg.delete_grace).await {
                            tracing::warn!("purging deleted knowledge bases and sources failed: {e:#}");
                        }
                        if let Err(e) = crate::audit::queries::purge(&pool, cfg.audit_retention_days).await {
                            tracing::warn!("purging audit rows past the retention failed: {e:#}");
                        }
                    }
                    // A MinerU parse (probe child + upload, queue, parse, download) may take
                    // up to both timeouts; the lease must outlive it.
                    let external = if cfg.mineru_token.is_some() { cfg.mineru_timeout } else { Duration::ZERO };
                    let lease = cfg.parse_timeout + external + Duration::from_secs(60);
                    match run_next(&pool, &cfg, &name, lease, &mut cursor).await {
                        Ok(Some(Ran { tenant, job, outcome })) => match outcome {
                            Ok(o) => tracing::info!(tenant.id = %tenant, source.id = %job.source_id, "ingest job done: {o:?}"),
                            Err(e) => {
                                tracing::warn!(tenant.id = %tenant, source.id = %job.source_id, "ingest job error, not recorded (claimed again when its lease ends): {e:#}")
                            }
                        },
                        Ok(None) => {
                            if let Some(e) = &embedder {
                                match crate::search::vectors::idle_step(&pool, e, &vector_health).await {
                                    Ok(true) => continue,
                                    Ok(false) => {}
                                    Err(err) => tracing::warn!("embedding backlog: {err:#}"),
                                }
                            }
                            tokio::select! {
                                _ = tokio::time::sleep(Duration::from_millis(700)) => {}
                                _ = stop.changed() => {}
                            }
                        }
                        Err(e) => {
                            tracing::warn!("claiming ingest jobs failed: {e:#}");
                            tokio::time::sleep(Duration::from_secs(3)).await;
                        }
                    }
                }
            })
        })
        .collect()
}

/// How often worker 0 looks for jobs of dead worker processes (and purges expired deletions).
const RECLAIM_EVERY: Duration = Duration::from_secs(30);

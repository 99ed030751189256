//! Loading an evaluation or benchmark collection into a KB (`mnote eval`, `mnote bench search`,
//! `mnote bench answers`): each document one Markdown upload, parsed by in-process workers.
//! `cli` hands [`load_boxed`] to those commands (the search side names no ingest code).

use std::{collections::HashSet, time::Duration};

use futures_util::future::BoxFuture;
use sqlx::PgPool;
use uuid::Uuid;

use super::pipeline;
use crate::{
    auth::Auth,
    config::Config,
    db::{Scope, TenantTx},
    evidence::SourceKind,
    platform::progress::bar,
    sources::{self, queries::NewSource},
};

/// [`load`] as the commands take it (`search::eval::LoadCorpus`).
pub fn load_boxed<'a>(
    pool: &'a PgPool,
    cfg: &'a Config,
    actor: &'a Auth,
    kb: Uuid,
    docs: &'a [(String, String)],
) -> BoxFuture<'a, anyhow::Result<()>> {
    Box::pin(load(pool, cfg, actor, kb, docs))
}

/// Upload the documents not yet in the KB and parse them with in-process workers.
pub async fn load(pool: &PgPool, cfg: &Config, actor: &Auth, kb: Uuid, docs: &[(String, String)]) -> anyhow::Result<()> {
    let mut tx = actor.tx_pool(pool).await?;
    let existing: HashSet<String> = sqlx::query_scalar!(
        "select resource_path from source where tenant_id = $2 and kb_id = $1 and status <> 'failed'",
        kb,
        actor.tenant_id,
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .collect();
    tx.commit().await?;
    let todo: Vec<&(String, String)> = docs.iter().filter(|(id, _)| !existing.contains(&format!("uploads/{id}.md"))).collect();
    if !todo.is_empty() {
        let b = bar(todo.len() as u64, "upload");
        for chunk in todo.chunks(500) {
            let mut tx = actor.tx_pool(pool).await?;
            for (id, markdown) in chunk {
                let bytes = markdown.as_bytes();
                let sha = sources::blobs::store(&cfg.uploads_dir(), bytes).await?;
                let path = format!("uploads/{id}.md");
                let (s, _) = sources::queries::upsert(
                    &mut tx,
                    actor.tenant_id,
                    actor.user_id,
                    &NewSource {
                        kb_id: kb,
                        grant_id: None,
                        resource_path: &path,
                        kind: SourceKind::Markdown,
                        size_bytes: bytes.len() as i64,
                        mtime: None,
                        sha256: &sha,
                    },
                )
                .await?;
                crate::sources::queue::enqueue(&mut tx, actor.tenant_id, s.id).await?;
                b.inc(1);
            }
            tx.commit().await?;
        }
        b.finish();
    }
    // Parse whatever is still open (this run's uploads, or an interrupted earlier run).
    let open = |pool: PgPool| async move {
        let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::System).await?;
        let n: i64 = sqlx::query_scalar!(
            r#"select count(*) as "n!" from ingest_job j join source s on s.tenant_id = j.tenant_id and s.id = j.source_id
             where j.tenant_id = $2 and s.kb_id = $1 and j.status in ('queued', 'running')"#,
            kb,
            actor.tenant_id,
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        anyhow::Ok(n)
    };
    let total = open(pool.clone()).await?;
    if total == 0 {
        return Ok(());
    }
    let b = bar(total as u64, "parse");
    let workers: Vec<_> = (0..cfg.ingest_workers.max(1))
        .map(|i| {
            let (pool, cfg, b) = (pool.clone(), cfg.clone(), b.clone());
            tokio::spawn(async move {
                let mut cursor = i;
                let lease = cfg.parse_timeout + Duration::from_secs(60);
                pipeline::drain(&pool, &cfg, "eval", lease, &mut cursor, |_| b.inc(1)).await
            })
        })
        .collect();
    for w in workers {
        w.await??;
    }
    b.finish();
    Ok(())
}

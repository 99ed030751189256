//! `mnote index`: register paths, run workers in this process (cooperating with any running
//! server through the same queue), and show progress until every file is parsed.

use std::{collections::BTreeMap, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use crate::{
    context::{act_as, app_pool},
    db::{Scope, TenantTx},
    evidence::SourceStatus,
    kbs,
    sources::{self, RegisterRequest},
};

struct Row {
    resource_path: String,
    status: SourceStatus,
    error_code: Option<String>,
    error_message: Option<String>,
    pages: Option<i32>,
    open_job: bool,
}

pub async fn index_command(tenant: &str, as_email: Option<&str>, kb_name: &str, paths: &[PathBuf]) -> anyhow::Result<()> {
    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, tenant, as_email).await?;
    let mut ids = Vec::new();
    {
        let mut tx = actor.tx_pool(&pool).await?;
        let kb = kbs::queries::get_by_name(&mut tx, actor.user_id, actor.role.is_admin(), kb_name)
            .await?
            .with_context(|| format!("no knowledge base named {kb_name:?} visible to {}", actor.email))?;
        for p in paths {
            let abs = std::path::absolute(p)?;
            let r = sources::register(
                &mut tx,
                &cfg,
                &actor,
                RegisterRequest { kb_id: kb.id, grant_id: None, path: &abs.to_string_lossy(), include: &[], exclude: &[] },
            )
            .await
            .map_err(|e| anyhow::anyhow!("{}: {}: {}", p.display(), e.code(), e.public_message()))?;
            ids.extend(r.items.iter().map(|s| s.id));
        }
        tx.commit().await?;
    }
    ids.sort();
    ids.dedup();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let workers = crate::ingest::pipeline::spawn_workers(
        pool.clone(),
        Arc::new(cfg.clone()),
        cfg.ingest_workers.max(1),
        None,
        Arc::new(crate::search::vector_health::VectorHealth::new(cfg.vector_retry_min, cfg.vector_retry_max)),
        stop_rx,
    );

    let bar = ProgressBar::new(ids.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} files · {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let rows = loop {
        let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
        let rows: Vec<Row> = sqlx::query_as!(
            Row,
            r#"select s.resource_path, s.status as "status: _", s.error_code, s.error_message, s.pages,
                    exists (select 1 from ingest_job j where j.tenant_id = s.tenant_id and j.source_id = s.id
                            and j.status in ('queued', 'running')) as "open_job!"
             from source s where s.tenant_id = $2 and s.id = any($1) order by s.resource_path"#,
            &ids,
            actor.tenant_id,
        )
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let done = rows.iter().filter(|r| !r.open_job).count();
        let pages: i32 = rows.iter().filter(|r| !r.open_job).filter_map(|r| r.pages).sum();
        let current: Vec<&str> =
            rows.iter().filter(|r| r.status == SourceStatus::Parsing).map(|r| r.resource_path.as_str()).collect();
        let errors = rows.iter().filter(|r| r.error_code.is_some()).count();
        bar.set_position(done as u64);
        bar.set_message(format!("{pages} pages · {errors} errors · {}", current.join(", ")));
        if done == rows.len() {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    bar.finish_and_clear();
    let _ = stop_tx.send(true);
    for w in workers {
        let _ = w.await;
    }
    let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &rows {
        *by_status.entry(r.status.as_str()).or_default() += 1;
    }
    let summary: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
    println!("{} files: {}", rows.len(), summary.join(", "));
    for r in rows.iter().filter(|r| r.error_code.is_some()) {
        println!(
            "  {} {}: {} {}",
            if r.status == SourceStatus::Indexed { "kept previous version of" } else { "error in" },
            r.resource_path,
            r.error_code.as_deref().unwrap_or(""),
            r.error_message.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

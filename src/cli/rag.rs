//! `mnote rag resync`.

use crate::{
    context::{act_as, app_pool},
    db::{Scope, TenantTx},
};

/// Repair a KB's LightRAG documents both ways, with a progress bar and a summary.
pub async fn resync(tenant: &str, kb: &str) -> anyhow::Result<()> {
    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, tenant, None).await?;
    let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::System).await?;
    let found = match uuid::Uuid::parse_str(kb) {
        Ok(id) => crate::kbs::queries::get(&mut tx, actor.user_id, true, id).await?,
        Err(_) => crate::kbs::queries::get_by_name(&mut tx, actor.user_id, true, kb).await?,
    };
    tx.commit().await?;
    let kb = found.ok_or_else(|| anyhow::anyhow!("no knowledge base {kb:?} in {tenant}"))?;
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} LightRAG {bar:30} {pos}/{len} processed {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    let progress = |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    };
    let r = crate::rag::resync::run(&pool, &cfg, actor.tenant_id, kb.id, Some(&progress)).await;
    bar.finish_and_clear();
    let r = r?;
    println!(
        "resync of {}: {} lost document(s) sent again, {} orphan(s) deleted, {} sent in all; {} processed, {} failed",
        kb.name, r.missing, r.orphans, r.sent, r.processed, r.failed
    );
    Ok(())
}

//! `mnote rag resync`: repair drift between a KB and its LightRAG both ways. Documents we
//! track that LightRAG no longer holds are sent again; `mnote-*` documents LightRAG holds
//! that no tracked source explains (orphans) are deleted; changed sources are re-sent by the
//! ordinary sync passes this then runs until LightRAG has processed everything.

use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use super::{
    binding,
    docs::{self, DocState},
};
use crate::{
    config::Config,
    db::{Scope, TenantTx},
};

#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Tracked documents LightRAG had lost (sent again).
    pub missing: usize,
    /// `mnote-*` documents without a tracked source (deleted).
    pub orphans: usize,
    /// Documents sent by the passes (missing, new and changed sources).
    pub sent: usize,
    pub processed: usize,
    pub failed: usize,
}

/// Repair one KB's binding. `progress(done, total)` is called while LightRAG processes.
pub async fn run(
    pool: &PgPool,
    cfg: &Config,
    tenant: Uuid,
    kb: Uuid,
    progress: Option<&(dyn Fn(usize, usize) + Sync)>,
) -> anyhow::Result<Report> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let b = binding::active(&mut tx, kb).await?.ok_or_else(|| anyhow::anyhow!("this knowledge base is not bound to LightRAG"))?;
    let rows = docs::of_binding(&mut tx, b.id).await?;
    // Every tracked document of this tenant on the same endpoint (other KBs may share it).
    let tracked = sqlx::query_scalar!(
        "select d.doc_id from rag_doc d join rag_binding b on b.id = d.binding_id and b.tenant_id = d.tenant_id
         where d.tenant_id = $2 and b.url = $1",
        &b.url,
        tenant,
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let client = b.client(&cfg.rag)?;
    let held = client.all_documents().await?;
    let mut report = Report::default();

    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    for d in &rows {
        let present = held.iter().any(|h| h.id == d.doc_id);
        if !present && d.status.0 != DocState::Deleted && d.track_id.is_some() {
            let m = "LightRAG no longer holds this document; sent again by resync";
            docs::set_state(&mut tx, b.id, d.source_id, DocState::Deleted, Some(("knowledge_rag_doc_lost", m)), None).await?;
            report.missing += 1;
        }
    }
    tx.commit().await?;
    let orphans: Vec<String> = held
        .iter()
        .filter(|h| docs::source_of_file_path(&h.file_path).is_some() && !tracked.contains(&h.id))
        .map(|h| h.id.clone())
        .collect();
    if !orphans.is_empty() {
        client.delete_documents(&orphans).await?;
        report.orphans = orphans.len();
    }

    for _ in 0..2400 {
        let r = super::sync::pass_tenant(pool, cfg, tenant, Some(kb)).await?;
        if let Some(e) = r.errors.first() {
            anyhow::bail!("LightRAG: {e}");
        }
        report.sent += r.sent;
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        let rows = docs::of_binding(&mut tx, b.id).await?;
        tx.commit().await?;
        let done = rows.iter().filter(|d| matches!(d.status.0, DocState::Processed | DocState::Failed)).count();
        if let Some(p) = progress {
            p(done, rows.len());
        }
        if r.sent == 0 && r.pending == 0 && r.deleted == 0 {
            report.processed = rows.iter().filter(|d| d.status.0 == DocState::Processed).count();
            report.failed = rows.iter().filter(|d| d.status.0 == DocState::Failed).count();
            return Ok(report);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    anyhow::bail!("LightRAG did not finish processing within 10 minutes")
}

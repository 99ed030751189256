//! `mnote index` and `mnote reindex`.

use std::path::PathBuf;

use super::TenantActor;
use crate::{
    context::{act_as, app_pool},
    db::{Scope, TenantTx},
};

/// `mnote index`: register the paths and wait until they are parsed and indexed.
pub async fn index(who: &TenantActor, kb: &str, paths: &[PathBuf]) -> anyhow::Result<()> {
    crate::ingest::progress::index_command(&who.tenant, who.as_email.as_deref(), kb, paths).await
}

/// `mnote reindex`: every evidence row of the tenant rebuilt from the stored artifacts.
pub async fn reindex(tenant: &str) -> anyhow::Result<()> {
    let (_, pool) = app_pool().await?;
    let actor = act_as(&pool, tenant, None).await?;
    let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::System).await?;
    let (sources, blocks) = crate::ingest::index::rebuild_all(&mut tx, actor.tenant_id).await?;
    tx.commit().await?;
    println!("rebuilt {blocks} evidence blocks of {sources} sources from their artifacts");
    Ok(())
}

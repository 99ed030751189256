//! `mnote serve` and `mnote migrate`.

use crate::{config::Config, db, startup};

/// `mnote serve`: the web UI and API on `$MNOTE_BIND`, with the ingest workers and watcher.
pub async fn serve() -> anyhow::Result<()> {
    let cfg = Config::from_env()?;
    tracing::info!(?cfg, "starting");
    if cfg.agents.acp_command.is_some() {
        let key_file = cfg.rag.secret_key_file.clone();
        for warning in crate::agents::acp::sandbox::prepare_server(&cfg.data_dir, key_file, cfg.agents.acp_sandbox) {
            tracing::warn!("ACP sandbox: {warning}");
        }
    }
    let state = startup::prepare(cfg).await?;
    startup::serve(state).await
}

/// `mnote migrate`: migrations as the owner role, DML grants for the app role, and the vector
/// index of the configured embedder.
pub async fn migrate() -> anyhow::Result<()> {
    let crate::config::MigrationTarget { owner_url: url, app_url } = crate::config::MigrationTarget::from_env()?;
    let app_role = app_url.as_deref().and_then(db::url_user);
    let owner = db::connect(&url, 2).await?;
    let app_role = app_role.filter(|r| Some(r.as_str()) != db::url_user(&url).as_deref());
    db::refuse_citus(&owner).await?;
    db::migrate(&owner, app_role.as_deref()).await?;
    println!("migrations applied{}", app_role.map(|r| format!("; app role {r} granted")).unwrap_or_default());
    let embed = crate::search::embed::EmbedConfig::from_env()?;
    let spaces = crate::search::vectors::spaces_of_config(&embed);
    if !spaces.is_empty() {
        crate::search::vectors::ensure_indexes(&owner, &spaces).await?;
    }
    for space in &spaces {
        println!("vector index ready for {} ({} dimensions)", space.model, space.dim);
    }
    Ok(())
}

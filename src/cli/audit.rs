//! `mnote audit --tenant …`: the operator reads a team's audit log (the rows the admin page
//! shows) as a table, CSV or JSON, with the page's filters.

use anyhow::Context;

use super::{AuditArgs, app_err};
use crate::{
    audit::{self, queries::AuditEvent},
    auth::directory as tq,
    context::app_pool,
    db::{Scope, TenantTx},
    tenants::audit_log::AuditQuery,
};

pub async fn audit(a: AuditArgs) -> anyhow::Result<()> {
    let (_, pool) = app_pool().await?;
    let tenant = tq::tenant_by_name(&pool, &a.tenant).await?.with_context(|| format!("no tenant named {:?}", a.tenant))?;
    let q = AuditQuery { action: a.action, person: a.person, from: a.from, to: a.to, ..AuditQuery::default() };
    let filter = q.filter().map_err(app_err)?;
    let mut tx = TenantTx::begin(&pool, tenant, Scope::System).await?;
    let rows = audit::queries::list(&mut tx, &filter, a.limit.clamp(1, 1_000_000)).await?.items;
    tx.commit().await?;
    match a.format.as_str() {
        "csv" => print!("{}", audit::export::csv(&rows)),
        "json" => println!("{}", serde_json::to_string_pretty(&crate::error::Items { items: rows })?),
        _ => print_table(&rows),
    }
    Ok(())
}

fn print_table(rows: &[AuditEvent]) {
    for e in rows {
        let who = if e.actor_email.is_empty() { "operator" } else { e.actor_email.as_str() };
        let detail = if e.detail.is_empty() { String::new() } else { format!(" · {}", e.detail) };
        println!(
            "{}  {:<20} {:<8} {}  {}  {}{}",
            e.at.format("%Y-%m-%d %H:%M:%S"),
            e.action.as_str(),
            e.outcome.as_str(),
            who,
            e.client_ip.as_deref().unwrap_or("-"),
            e.target,
            detail
        );
    }
    if rows.is_empty() {
        eprintln!("no audit entries match");
    }
}

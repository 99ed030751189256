//! Reading and purging the audit log.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::{Action, Outcome};
use crate::db::{Scope, TenantTx};

/// One audit row as the API, the page, the exports and the CLI show it. `mnote.audit_event.v1`
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub id: i64,
    pub at: DateTime<Utc>,
    /// `null`: the operator's CLI or background work.
    pub actor_id: Option<Uuid>,
    pub actor_email: String,
    /// The client address as the server saw it.
    pub client_ip: Option<String>,
    pub action: Action,
    pub target: String,
    pub outcome: Outcome,
    pub detail: String,
}

/// Which rows: every filter optional; `to` is inclusive (whole UTC days).
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub action: Option<Action>,
    /// The actor's e-mail, case-insensitive, a part of it is enough.
    pub person: Option<String>,
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
    /// Keyset paging: only rows with a smaller id (older).
    pub before: Option<i64>,
}

/// One page of rows, newest first, and the cursor of the next (older) page.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    pub items: Vec<AuditEvent>,
    /// Pass as `before` for the next, older page; `null` on the last page.
    pub next_before: Option<i64>,
}

/// Rows of the transaction's tenant matching `f`, newest first, at most `limit`.
pub async fn list(tx: &mut TenantTx, f: &Filter, limit: i64) -> sqlx::Result<AuditPage> {
    let tenant = tx.tenant_id();
    let person = f.person.as_deref().map(|p| format!("%{}%", escape_like(p.trim())));
    let mut items = sqlx::query_as!(
        AuditEvent,
        r#"select id, at as "at: _", actor_id, actor_email, client_ip, action as "action: _", target, outcome as "outcome: _", detail
           from audit_event
           where tenant_id = $1
             and ($2::text is null or action = $2)
             and ($3::text is null or actor_email ilike $3)
             and ($4::timestamptz is null or at >= $4)
             and ($5::timestamptz is null or at < $5)
             and ($6::bigint is null or id < $6)
           order by id desc
           limit $7"#,
        tenant,
        f.action.map(Action::as_str),
        person,
        f.from.map(midnight) as _,
        f.to.and_then(|d| d.succ_opt()).map(midnight) as _,
        f.before,
        limit + 1,
    )
    .fetch_all(&mut **tx)
    .await?;
    let more = items.len() as i64 > limit;
    items.truncate(limit.max(0) as usize);
    let next_before = if more { items.last().map(|e| e.id) } else { None };
    Ok(AuditPage { items, next_before })
}

/// The start of a UTC day.
fn midnight(d: NaiveDate) -> DateTime<Utc> {
    d.and_time(chrono::NaiveTime::MIN).and_utc()
}

fn escape_like(s: &str) -> String {
    s.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

/// Every tenant's rows older than `keep_days` deleted, through `mnote_audit_purge` (which
/// refuses fewer than 30 days). Run by ingest worker 0 beside the deleted-KB purge; returns
/// the rows deleted.
pub async fn purge(pool: &PgPool, keep_days: u32) -> sqlx::Result<u64> {
    let tenants = sqlx::query_scalar!("select id from tenant order by id").fetch_all(pool).await?;
    let days = i32::try_from(keep_days).unwrap_or(i32::MAX);
    let mut total = 0u64;
    for t in tenants {
        let mut tx = TenantTx::begin(pool, t, Scope::System).await?;
        let n = sqlx::query_scalar!(r#"select mnote_audit_purge($1) as "n!""#, days).fetch_one(&mut *tx).await?;
        tx.commit().await?;
        if n > 0 {
            tracing::info!(tenant.id = %t, rows = n, "purged audit rows past the retention");
        }
        total += n as u64;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    #[test]
    fn like_patterns_are_escaped() {
        assert_eq!(super::escape_like("a_b%c\\"), "a\\_b\\%c\\\\");
    }
}

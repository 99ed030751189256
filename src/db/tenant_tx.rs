//! Tenant-scoped transactions: the only way request code touches tenant tables.
//!
//! The tenant and the user are set with `SET LOCAL`, which lasts until the end of the
//! transaction (like `set_config(…, true)`), so the tenant never leaks to the next borrower of
//! a pooled connection (a session-level `SET` would). `SET` takes no bind parameters: the
//! values spliced in are formatted from typed values only (a [`Uuid`], a fixed word), never
//! from caller text.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

/// Who the transaction acts for, beyond the tenant.
#[derive(Clone, Copy, Debug)]
pub enum Scope {
    /// A signed-in user: private KBs are limited to their owner, members and admins.
    User(Uuid),
    /// Background work inside one tenant (workers, bootstrap): sees all of that tenant's KBs.
    System,
}

pub struct TenantTx {
    tx: Transaction<'static, Postgres>,
    /// The tenant, for the read-your-writes record of a committed write (`db::read`).
    tenant: Option<Uuid>,
    /// The pool it came from (to read the WAL position after a commit); `None` for a read.
    pool: Option<PgPool>,
    /// Set when the transaction runs on the read replica (`db::read`).
    pub(super) standby: Option<Arc<super::read::Health>>,
}

/// `begin …; set local …` for one tenant: one round trip (the simple protocol takes several
/// statements). Only a UUID and fixed words are spliced in.
fn begin_sql(begin: &str, tenant_id: Uuid, scope: Scope) -> String {
    let (user, sys) = match scope {
        Scope::User(u) => (u.to_string(), ""),
        Scope::System => (String::new(), "system"),
    };
    format!("{begin}; set local app.tenant_id = '{tenant_id}'; set local app.user_id = '{user}'; set local app.scope = '{sys}'")
}

impl TenantTx {
    pub async fn begin(pool: &PgPool, tenant_id: Uuid, scope: Scope) -> Result<Self, sqlx::Error> {
        let tx = pool.begin_with(begin_sql("begin", tenant_id, scope)).await?;
        Ok(TenantTx { tx, tenant: Some(tenant_id), pool: Some(pool.clone()), standby: None })
    }

    /// A read-only transaction (`db::read` opens it on the standby or on the primary).
    pub(super) async fn begin_read_only(pool: &PgPool, tenant_id: Uuid, scope: Scope) -> Result<Self, sqlx::Error> {
        let tx = pool.begin_with(begin_sql("begin transaction read only", tenant_id, scope)).await?;
        Ok(TenantTx { tx, tenant: Some(tenant_id), pool: None, standby: None })
    }

    /// A transaction that knows the user but no tenant: it can read the user's own
    /// memberships (tenant picker) and nothing tenant-owned.
    pub async fn begin_user_only(pool: &PgPool, user_id: Uuid) -> Result<Self, sqlx::Error> {
        let tx = pool.begin_with(format!("begin; set local app.user_id = '{user_id}'")).await?;
        Ok(TenantTx { tx, tenant: None, pool: None, standby: None })
    }

    /// The tenant it acts in (`None`: a user-only transaction).
    pub fn tenant(&self) -> Option<Uuid> {
        self.tenant
    }

    /// The tenant to bind as `tenant_id = $n` in its statements (issue 29: explicit filters
    /// beside RLS). The nil UUID in a user-only transaction, which matches no tenant's rows.
    pub fn tenant_id(&self) -> Uuid {
        self.tenant.unwrap_or_default()
    }

    /// Whether this transaction runs on the read replica.
    pub fn on_standby(&self) -> bool {
        self.standby.is_some()
    }

    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        // With a read replica configured, a transaction that wrote records the WAL position
        // after its commit for its tenant (the freshness rule of `db::read`).
        let track = match (&self.pool, self.tenant) {
            (Some(pool), Some(tenant)) if super::read::tracking() => Some((pool.clone(), tenant)),
            _ => None,
        };
        let Some((pool, tenant)) = track else { return self.tx.commit().await };
        let wrote = sqlx::query_scalar!(r#"select pg_current_xact_id_if_assigned() is not null as "wrote!""#)
            .fetch_one(&mut *self.tx)
            .await?;
        self.tx.commit().await?;
        if wrote {
            super::read::after_write(&pool, tenant).await;
        }
        Ok(())
    }
}

impl Deref for TenantTx {
    type Target = sqlx::PgConnection;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl DerefMut for TenantTx {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

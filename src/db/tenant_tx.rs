//! Tenant-scoped transactions: the only way request code touches tenant tables.
//!
//! `set_config(..., true)` is transaction-local, so the tenant never leaks to the next
//! borrower of a pooled connection (a session-level `SET` would).

use std::ops::{Deref, DerefMut};

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
}

impl TenantTx {
    pub async fn begin(pool: &PgPool, tenant_id: Uuid, scope: Scope) -> Result<Self, sqlx::Error> {
        let (user, sys) = match scope {
            Scope::User(u) => (u.to_string(), ""),
            Scope::System => (String::new(), "system"),
        };
        // `begin` and the settings in one round trip (the simple protocol takes several
        // statements). Only UUIDs and fixed words are spliced in, never caller text.
        let tx = pool
            .begin_with(format!(
                "begin; select set_config('app.tenant_id', '{tenant_id}', true), set_config('app.user_id', '{user}', true), \
                 set_config('app.scope', '{sys}', true)"
            ))
            .await?;
        Ok(TenantTx { tx })
    }

    /// A transaction that knows the user but no tenant: it can read the user's own
    /// memberships (tenant picker) and nothing tenant-owned.
    pub async fn begin_user_only(pool: &PgPool, user_id: Uuid) -> Result<Self, sqlx::Error> {
        let mut tx = pool.begin().await?;
        sqlx::query("select set_config('app.user_id', $1, true)").bind(user_id.to_string()).execute(&mut *tx).await?;
        Ok(TenantTx { tx })
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
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

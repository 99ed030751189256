//! Per-tenant grantable roots (`tenant_root`): the operator says which directories each
//! tenant may grant, so one team's admin cannot grant a directory holding another team's
//! files. `MNOTE_GRANTABLE_ROOTS` stays the upper bound: a tenant root lies inside one of them.
//!
//! Rows are written only in the background scope (`Scope::System`, the CLI): the table's
//! restrictive policies refuse every write from a request. They are read inside the caller's
//! tenant transaction on grant creation and on every access ([`check`]), so removing a root
//! cuts off existing grants under it at once.

use std::path::{Path, PathBuf};

use sqlx::PgPool;
use uuid::Uuid;

use super::paths;
use crate::{
    config::{Config, TenantRootsMode},
    db::{Scope, TenantTx},
    error::{AppError, AppResult},
};

/// Add `path` (an existing directory inside MNOTE_GRANTABLE_ROOTS, not overlapping the data
/// directory) to the tenant's roots. Returns the canonical root and whether it is new.
pub async fn add(pool: &PgPool, cfg: &Config, tenant: Uuid, path: &str) -> AppResult<(String, bool)> {
    let root = paths::grantable_dir(path, &cfg.grantable_roots, &cfg.data_dir)?;
    let root = root.to_str().ok_or_else(|| AppError::invalid("path", "path is not valid UTF-8"))?.to_string();
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let added =
        sqlx::query!("insert into tenant_root (tenant_id, root_path) values ($1, $2) on conflict do nothing", tenant, &root)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
    tx.commit().await?;
    Ok((root, added))
}

/// Remove a root of the tenant (given as stored, or as a path that canonicalizes to it; the
/// directory may already be gone). Returns whether a row was removed.
pub async fn remove(pool: &PgPool, tenant: Uuid, path: &str) -> AppResult<bool> {
    let raw = Path::new(path.trim());
    let mut names = vec![raw.to_string_lossy().into_owned()];
    if let Some(n) = paths::normalize(raw) {
        names.push(n.to_string_lossy().into_owned());
    }
    if let Ok(c) = raw.canonicalize() {
        names.push(c.to_string_lossy().into_owned());
    }
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let removed = sqlx::query!("delete from tenant_root where tenant_id = $2 and root_path = any($1)", &names, tenant)
        .execute(&mut *tx)
        .await?
        .rows_affected()
        > 0;
    tx.commit().await?;
    Ok(removed)
}

/// The tenant's roots, sorted.
pub async fn list(pool: &PgPool, tenant: Uuid) -> AppResult<Vec<String>> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let rows = roots_in(&mut tx).await?;
    tx.commit().await?;
    Ok(rows)
}

/// The roots of the transaction's tenant (RLS picks the tenant).
async fn roots_in(tx: &mut TenantTx) -> sqlx::Result<Vec<String>> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!("select root_path from tenant_root where tenant_id = $1 order by root_path", tenant)
        .fetch_all(&mut **tx)
        .await
}

/// Whether `dir` (a canonical grant root) may be used by the transaction's tenant now: it
/// lies inside one of the tenant's roots, which itself still lies inside
/// MNOTE_GRANTABLE_ROOTS. A tenant without rows gets the shared allow-list only when the
/// operator set `MNOTE_TENANT_ROOTS=open`; otherwise nothing (`path_outside_grant`, naming
/// the command that fixes it).
pub async fn check(conn: &mut crate::db::TenantTx, cfg: &Config, dir: &Path) -> AppResult<()> {
    let in_operator_roots = |p: &Path| cfg.grantable_roots.iter().any(|r| p.starts_with(r));
    let rows = roots_in(conn).await?;
    if rows.is_empty() {
        return match cfg.tenant_roots {
            TenantRootsMode::Open if in_operator_roots(dir) => Ok(()),
            TenantRootsMode::Open => Err(AppError::PathOutsideGrant),
            TenantRootsMode::Strict => Err(AppError::NoTenantRoots),
        };
    }
    let ok = rows.iter().map(PathBuf::from).any(|r| in_operator_roots(&r) && dir.starts_with(&r));
    if ok { Ok(()) } else { Err(AppError::PathOutsideGrant) }
}
